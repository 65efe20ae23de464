"""Which dense model a text needs (pure).

all-MiniLM-L6-v2 is English-only (nDCG@10 0.245 on JSQuAD vs 0.886 for
multilingual-e5-small, ../shared/eval/README.md), so text written mostly in
scripts without spaces (CJK, Thai, …) or mostly in non-Latin scripts (Arabic,
Cyrillic, Greek, Hebrew, Devanagari, …) goes to the multilingual model.
A document's language (what ``lang:`` filters on) is another question, answered
by identification in :mod:`fabric_resources.parsing.language`.
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
