"""Thai word segmentation for the word field (:func:`fabric_resources.lexical_index.word_field_text`).

Thai is written without spaces between words. Read as overlapping character bigrams, as Han and
kana are, nearly every Thai passage shares a bigram with any Thai query: the alphabet is small, so
pairs such as ``าร`` or ``อง`` stand in most sentences. Each such passage was a word-channel match,
counted as lexical evidence and exempt from floor demotion (hostile trial 13a, left open until
stop 50). Runs of Thai script are cut into words instead, by PyThaiNLP's ``newmm`` maximal matching
(Phatthiyaphaibun et al., "PyThaiNLP: Thai Natural Language Processing in Python", NLP-OSS 2023)
over the Thai word list its wheel ships (62,106 words in 5.4.0).

The cut runs on *folded* text (the index holds nothing else): the word list is folded as the text
is (:func:`~fabric_resources.text_folding.fold`: tone marks dropped, ``ำ`` decomposed), so both
meet. ``safe_mode`` bounds the time of a long ambiguous run. A part of a compound the list holds
whole (``น้ำ`` in ``น้ำท่วม``) is no word of its own here; the substring field keeps every
character, so it is still found there.
"""

from __future__ import annotations

import os
from functools import lru_cache

import regex

from fabric_resources.text_folding import fold

# PyThaiNLP makes a data folder under the home directory when it is first imported, unless told it
# is read-only: Fabric reads only the word list inside the wheel, and may run with no home folder.
os.environ.setdefault("PYTHAINLP_READ_ONLY", "1")

#: A run of Thai script characters (letters, vowel signs, digits, ``ๆ``, ``ฯ``).
THAI_RUN = regex.compile(r"\p{Thai}+")


@lru_cache(maxsize=1)
def _dictionary():
    # ~0.9 s once per process (building PyThaiNLP's trie), and only when Thai text is met.
    from pythainlp.corpus import thai_words
    from pythainlp.util import Trie

    return Trie({fold(w) for w in thai_words()} - {""})


def thai_words(run: str) -> tuple[str, ...]:
    """The words of ``run``, a run of folded Thai text, in order; they join back to ``run``. About
    0.4 million characters a second on one core (docs/benchmarks.md, "Thai words"), linear in the
    run's length.

    >>> thai_words(fold("ฝนตกหนักในฤดูมรสุม"))  # rain falls heavily in the monsoon season
    ('ฝน', 'ตกหนัก', 'ใน', 'ฤดู', 'มรสุม')
    """
    # Queries re-read the same candidate chunks; runs are short in prose, and a long one (a table
    # cell of Thai without a space) is cut again rather than kept.
    return _cut_short(run) if len(run) <= CACHED_RUN_CHARS else _cut(run)


#: Runs up to this many characters keep their cut in a bounded cache.
CACHED_RUN_CHARS = 256


def _cut(run: str) -> tuple[str, ...]:
    from pythainlp.tokenize.newmm import segment

    return tuple(w for w in segment(run, custom_dict=_dictionary(), safe_mode=True) if w)


@lru_cache(maxsize=32768)
def _cut_short(run: str) -> tuple[str, ...]:
    return _cut(run)
