"""Word segmentation of Thai, Lao, Khmer and Myanmar for the word field (:func:`fabric_resources.lexical_index.word_field_text`).

These four scripts are written without spaces between words. Read as overlapping character bigrams,
as Han and kana are, nearly every passage in them shares a bigram with any query in them: the
alphabets are small, so pairs such as Thai ``าร`` or ``อง`` stand in most sentences. Each such
passage was a word-channel match, counted as lexical evidence and exempt from floor demotion
(hostile trial 13a; Thai until stop 50, Lao until stop 51, Khmer and Myanmar until stop 52). Runs of
each script are cut into words instead:

* Thai and Lao by PyThaiNLP's ``newmm`` maximal matching (Phatthiyaphaibun et al., "PyThaiNLP: Thai
  Natural Language Processing in Python", NLP-OSS 2023) over a word list its script's package
  ships: PyThaiNLP's Thai list (62,106 words in 5.4.0) and LaoNLP's Lao lists (34,036 words in
  1.3.0: the Lao-English dictionary of Laos' E-Government Center, a spell-check list and
  Wiktionary's; LaoNLP's own segmenter is a fork of the same maximal matching). The cut runs on
  *folded* text (the index holds nothing else): each word list is folded as the text is
  (:func:`~fabric_resources.text_folding.fold`: tone marks dropped, Thai ``ำ`` decomposed), so both
  meet. ``safe_mode`` bounds the time of a long ambiguous run.
* Khmer and Myanmar by ICU's word break iterator (UAX #29 with ICU's dictionary-based break engine
  for these scripts: the Khmer and Burmese dictionaries of ICU 78, which the ``icu4py`` wheel
  bundles), which reads the coeng, asat and virama signs; folding keeps every mark of these two
  scripts for it (:data:`~fabric_resources.text_folding.KEPT_MARKS`).

A part of a compound a list holds whole (``น้ำ`` in ``น้ำท่วม``) is no word of its own here; the
substring field keeps every character, so it is still found there. Myanmar text in the Zawgyi
encoding (a font hack that reuses Unicode's Myanmar code points in another order) is cut as if it
were Unicode, so poorly; it is still found in the substring field.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import lru_cache

import regex

from fabric_resources.text_folding import fold

# PyThaiNLP makes a data folder under the home directory when it is first imported, unless told it
# is read-only: Fabric reads only the word lists inside the wheels, and may run with no home folder.
os.environ.setdefault("PYTHAINLP_READ_ONLY", "1")

#: A run of one script whose words are cut: Thai, Lao, Khmer or Myanmar letters, vowel signs and
#: marks, digits, repetition and abbreviation marks (``ๆ``, ``ฯ``, ``ໆ``, ``ຯ``); only in the four
#: blocks the word field reads as unspaced (:data:`~fabric_resources.text_folding.UNSPACED`). The
#: Khmer Symbols and Myanmar Extended-A, B and C blocks are not: the tokenizer reads their letters as
#: words of their own, and a highlight that cut them into a run cut it otherwise than the index
#: did (Extended-C, beyond the BMP, shifted ICU's UTF-16 offsets besides).
SEGMENTED_RUN = regex.compile(r"[\p{Thai}&&\u0e00-\u0e7f]+|[\p{Lao}&&\u0e80-\u0eff]+"
                              r"|[\p{Khmer}&&\u1780-\u17ff]+|[\p{Myanmar}&&\u1000-\u109f]+", regex.V1)

#: Package versions of the word lists and segmenters, part of the index's analyzer identity.
WORD_LISTS = ("thai-newmm-pythainlp5.4.0+lao-laonlp1.3.0-skip"  # -skip: an unlisted Lao stretch ends where a listed word starts
              "+khmer-myanmar-icu4py1.2.0-icu78.3-marks-coded")  # -marks-coded: MARK_CODES

#: A character the word field's tokenizer splits a word at (tantivy's simple tokenizer keeps
#: ``char::is_alphanumeric`` characters: Unicode ``Alphabetic`` or a number): the Khmer and Myanmar
#: marks folding keeps for the segmenter. :func:`word_token` codes them (:data:`MARK_CODES`).
TOKEN_BREAK = regex.compile(r"[^\p{Alphabetic}\p{N}]")


def _thai_words() -> list[str]:
    from pythainlp.corpus import thai_words

    return list(thai_words())


def _lao_words() -> list[str]:
    from laonlp.corpus import lao_words  # imports LaoNLP whole: ~0.3 s, once, when Lao text is met

    return lao_words()


_LISTS = {"Thai": _thai_words, "Lao": _lao_words}
#: ICU locale of each script read by ICU's dictionaries (the dictionary follows the script of the
#: text; the locale only names it).
_ICU_LOCALES = {"Khmer": "km", "Myanmar": "my"}


@lru_cache(maxsize=2)
def _dictionary(script: str):
    # ~0.9 s (Thai) or ~0.5 s (Lao) once per process, building PyThaiNLP's trie, and only when
    # text of that script is met.
    from pythainlp.util import Trie

    return Trie({fold(w) for w in _LISTS[script]()} - {""})


def segmented_words(run: str) -> tuple[str, ...]:
    """The words of ``run``, a :data:`SEGMENTED_RUN` of folded text (one script), in order; they
    join back to ``run``. Thai about 0.4 million characters a second on one core (docs/benchmarks.md,
    "Thai words"), linear in the run's length.

    >>> segmented_words(fold("ฝนตกหนักในฤดูมรสุม"))  # rain falls heavily in the monsoon season
    ('ฝน', 'ตกหนัก', 'ใน', 'ฤดู', 'มรสุม')
    >>> segmented_words(fold("ພາສາລາວໃນປັດຈຸບັນ"))  # the Lao language today
    ('ພາສາລາວ', 'ໃນ', 'ປັດຈຸບັນ')
    >>> segmented_words(fold("ខ្ញុំចូលចិត្តញ៉ាំបាយ"))  # I like to eat rice
    ('ខ្ញុំ', 'ចូលចិត្ត', 'ញ៉ាំបាយ')
    >>> segmented_words(fold("ကျွန်တော်စာအုပ်ဖတ်နေသည်"))  # I am reading a book
    ('ကျွန်တော်', 'စာအုပ်', 'ဖတ်', 'နေသည်')
    """
    # Queries re-read the same candidate chunks; runs are short in prose, and a long one (a table
    # cell without a space) is cut again rather than kept.
    return _cut_short(run) if len(run) <= CACHED_RUN_CHARS else _cut(run)


#: Runs up to this many characters keep their cut in a bounded cache.
CACHED_RUN_CHARS = 256


#: The Khmer and Myanmar marks the tokenizer would split a word at (:data:`TOKEN_BREAK`), each
#: written in the word field's token as digits of its script: folding turns every decimal digit of
#: the text into an ASCII one, so these digits stand in no token but as such a code, and a word's
#: marks stay part of its token (``နေ့`` day is not ``နေ`` live, ``កាត់`` cut not ``កាត`` card). The
#: codes are of one length per script, so no sequence of them reads as another. The Khmer coeng is
#: no mark here: it goes, so a word typed without it (``ខមែរ``, as people type) keeps its token.
MARK_CODES = str.maketrans(
    {"\u1037": "\u1040", "\u1039": "\u1041", "\u103a": "\u1042"}  # Myanmar dot below, virama, asat
    | {mark: "\u17e0" + chr(0x17E0 + i) if i < 10 else "\u17e1\u17e0"  # Khmer: two digits each
       for i, mark in enumerate("\u17c9\u17ca\u17cb\u17cc\u17cd\u17ce\u17cf\u17d0\u17d1\u17d3\u17dd")})


def word_token(word: str) -> str:
    """``word`` (one of :func:`segmented_words`) as the word field's token: its marks the tokenizer
    would split it at written as their :data:`MARK_CODES`, the Khmer coeng and any other character
    of :data:`TOKEN_BREAK` dropped; ``""`` where only such characters remain.

    >>> word_token(fold("ខ្មែរ"))  # the coeng goes, the word stays whole
    'ខមែរ'
    >>> word_token(fold("နေ့")), word_token(fold("နေ"))  # day, live: the dot below is coded
    ('နေ၀', 'နေ')
    """
    return TOKEN_BREAK.sub("", word.translate(MARK_CODES))


_BREAK_BUT_SPACE = regex.compile(r"[^\p{Alphabetic}\p{N} ]")


def word_tokens_line(words: Iterable[str]) -> str:
    """``" ".join(map(word_token, words))`` for :func:`segmented_words` (which hold no space), in one
    pass over the line rather than one call a word (about three times as fast)."""
    return _BREAK_BUT_SPACE.sub("", " ".join(words).translate(MARK_CODES))


def _cut(run: str) -> tuple[str, ...]:
    script = next(s for s in ("Thai", "Lao", "Khmer", "Myanmar") if regex.match(rf"\p{{{s}}}", run))
    if script in _ICU_LOCALES:
        from icu4py.breakers import WordBreaker

        # Offsets are in Unicode scalars (a run is of one BMP script, so UTF-16 units alike).
        return tuple(run[start:end] for start, end in WordBreaker(run, _ICU_LOCALES[script]).segments())
    from pythainlp.tokenize.newmm import segment

    words = [w for w in segment(run, custom_dict=_dictionary(script), safe_mode=True) if w]
    return tuple(_lao_skips(words, _dictionary(script), segment) if script == "Lao" else words)


def _lao_skips(words: list[str], trie, segment) -> list[str]:
    """``words`` of a Lao run with each unlisted stretch ended where a listed word starts.

    newmm reads Lao letters as it reads Latin ones, as no Thai: where no listed word starts it took
    the rest of the run (or of its ``safe_mode`` piece, ~120 characters) as one word, so every word
    after a name, a typo or a stray sign (``ຂຂຂພາສາລາວໃນປັດຈຸບັນ``) was lost to the word field
    (hostile trial 18e). Such a stretch now ends where the next listed word starts, as LaoNLP's own
    segmenter ends it, and the rest is cut again; the pieces are at most ``safe_mode``'s, so this
    stays linear in the run."""
    out: list[str] = []
    for word in words:
        while len(word) > 1 and word not in trie:  # only newmm's "non-Thai" skip makes such a word
            at = next((i for i in range(1, len(word)) if trie.prefixes(word, i)), len(word))
            out.append(word[:at])
            rest = [w for w in segment(word[at:], custom_dict=trie, safe_mode=True) if w] or [""]
            out += rest[:-1]
            word = rest[-1]
        if word:
            out.append(word)
    return out


@lru_cache(maxsize=32768)
def _cut_short(run: str) -> tuple[str, ...]:
    return _cut(run)
