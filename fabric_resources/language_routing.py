"""Which dense model a text needs (pure).

all-MiniLM-L6-v2 is English-only (nDCG@10 0.245 on JSQuAD vs 0.886 for
multilingual-e5-small, ../shared/eval/README.md), so text written mostly in
scripts without spaces (CJK, Thai, …) or mostly in non-Latin scripts (Arabic,
Cyrillic, Greek, Hebrew, Devanagari, …) goes to the multilingual model.
"""

from __future__ import annotations

import unicodedata

from fabric_resources.text_folding import UNSPACED

#: Share of letters (Unicode category L*) outside Latin script above which text is routed.
NON_LATIN_SHARE = 0.3


def needs_multilingual(text: str) -> bool:
    """True if at least 30% of the letters of ``text`` are not Latin (or in unspaced scripts).

    >>> needs_multilingual("The lighthouse keeper"), needs_multilingual("認証トークンとは"), needs_multilingual("Café au lait")
    (False, True, False)
    """
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return False
    non_latin = sum(1 for c in letters if UNSPACED.match(c) or not _is_latin(c))
    return non_latin >= NON_LATIN_SHARE * len(letters)


def _is_latin(ch: str) -> bool:
    if ch.isascii():
        return True
    try:
        return "LATIN" in unicodedata.name(ch)
    except ValueError:
        return False


def guess_language(text: str) -> str | None:
    """A BCP 47 primary subtag when the script alone identifies the language, else ``None``.

    Kana → ``ja``; Hangul → ``ko``; Han without kana → ``zh``; Thai → ``th``. Latin, Cyrillic,
    Arabic… are shared by many languages, so no guess is made for them.

    >>> guess_language("認証トークン"), guess_language("园丁每天"), guess_language("The keeper")
    ('ja', 'zh', None)
    """
    sample = text[:20_000]
    kana = sum(1 for c in sample if "\u3040" <= c <= "\u30ff")
    hangul = sum(1 for c in sample if "\uac00" <= c <= "\ud7a3")
    han = sum(1 for c in sample if "\u4e00" <= c <= "\u9fff")
    thai = sum(1 for c in sample if "\u0e00" <= c <= "\u0e7f")
    letters = sum(1 for c in sample if c.isalpha()) or 1
    if (kana + han) / letters > 0.3 and kana:
        return "ja"
    if hangul / letters > 0.3:
        return "ko"
    if han / letters > 0.3:
        return "zh"
    if thai / letters > 0.3:
        return "th"
    return None
