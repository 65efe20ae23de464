"""Whether a short reading is spelt like words of a language: its letter pairs against the language's.

A line of bytes in a legacy code page of another script reads as letters of that script whatever the
bytes are, and random bytes 0xC0-0xFF with spaces read as Cyrillic or Greek letters that the language
identifier calls Russian or Greek (1,664 of 2,000 seeded cases were read so after trial 14a's short
line rule). The identifier's probability is normalised over languages, so it says which language
letters are most like, never whether they are any language at all. :func:`letter_pair_bits` asks that:
how much more likely a reading's letter pairs are under the language's than under letters drawn at
random.

The language's letter pairs come from the common words that jusText (a dependency of trafilatura)
ships per language (``justext/stoplists/<Language>.txt``: the most frequent words of that language's
Wikipedia, 600-6,000 a language): each distinct word counted once, with its first and last letter
paired with the word boundary.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import cache

#: jusText's stoplist of each language of :mod:`~fabric_resources.parsing.text.script_pages`'s scripts
#: that has one (py3langid code -> stoplist name; ``tt``, ``ba``, ``tg``, ``mn``, ``grc``, ``arz``...
#: have none and are judged by their script's other languages).
LEXICONS: dict[str, str] = {
    "ru": "Russian", "uk": "Ukrainian", "be": "Belarusian", "bg": "Bulgarian", "mk": "Macedonian",
    "sr": "Serbian", "kk": "Kazakh", "ky": "Kyrgyz", "el": "Greek", "he": "Hebrew", "ar": "Arabic",
    "fa": "Persian", "ur": "Urdu",
}

#: Additive smoothing of the pair counts (Jeffreys' prior, half a count per pair).
_SMOOTHING = 0.5
#: The word boundary, as a letter: a pair ``^x`` opens a word, ``x$`` ends one.
_START, _END = "^", "$"
_WORD = re.compile(r"[^\W\d_]+")


@dataclass(frozen=True)
class _PairModel:
    """Counts of a language's letter pairs (a letter, or ``^``, then a letter or ``$``)."""

    pairs: Counter
    #: How many pairs start with each letter (or ``^``).
    firsts: Counter
    #: The letters that follow: the lexicon's letters and ``$``.
    alphabet_size: int


def words(text: str) -> list[str]:
    """The runs of non-ASCII letters of ``text``, small, combining marks (Arabic vowel signs, Hebrew
    points) left out: they are optional in writing.

    >>> words("Мама мыла раму, а папа — газету."), words("مُحَمَّد and Ἀθῆναι")
    (['мама', 'мыла', 'раму', 'а', 'папа', 'газету'], ['محمد', 'ἀθῆναι'])
    """
    bare = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
    return [w.lower() for w in _WORD.findall(bare) if not w.isascii()]


@cache
def _model(language: str) -> _PairModel:
    import justext

    lexicon = {w for entry in justext.get_stoplist(LEXICONS[language]) for w in words(entry)}
    pairs = Counter(pair for word in lexicon for pair in _pairs(word))
    firsts: Counter = Counter()
    for pair, n in pairs.items():
        firsts[pair[0]] += n
    alphabet = {ch for word in lexicon for ch in word} | {_END}
    return _PairModel(pairs, firsts, len(alphabet))


def _pairs(word: str) -> list[str]:
    padded = _START + word + _END
    return [padded[i:i + 2] for i in range(len(padded) - 1)]


def letter_pair_bits(text: str, language: str) -> float:
    """Bits per letter pair by which ``text``'s words are likelier under the letter pairs of ``language``
    (one of :data:`LEXICONS`) than under letters drawn at random from its alphabet.

    For each pair ``ab`` of a word (``^`` and ``$`` the word's edges), ``log2(P(b | a) * V)``, with
    ``P(b | a) = (n(ab) + 0.5) / (n(a·) + 0.5 V)`` counted over the language's lexicon and ``V`` its
    letters plus ``$``; the mean over the pairs. Positive where the text is spelt like the language,
    about -0.5 for random letters; ``-inf`` without a word of non-ASCII letters.

    >>> letter_pair_bits("Вчера мы ходили в театр.", "ru") > 1
    True
    >>> letter_pair_bits("ъщжю ыьфц пжаъшд", "ru") < 0
    True
    """
    pairs = [pair for word in words(text) for pair in _pairs(word)]
    if not pairs:
        return -math.inf
    model = _model(language)
    v = model.alphabet_size
    bits = sum(math.log2((model.pairs[p] + _SMOOTHING) * v / (model.firsts[p[0]] + _SMOOTHING * v)) for p in pairs)
    return bits / len(pairs)
