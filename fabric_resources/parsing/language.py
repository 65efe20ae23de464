"""The language of a parsed document, identified from its text (what ``lang:`` filters on).

One rule for every format, so ``lang:en`` means the same for a plain-text file and an EPUB:
the language is identified from a sample of the document's units by py3langid (langid.py's
naive Bayes model over byte n-grams, 97 languages, Lui & Baldwin, ACL 2012; the model ships
in the wheel and runs offline), and only where that identification is unsure does a language
the document declares (an EPUB's ``dc:language``) stand in. Script routing for the dense model
is a separate question (:mod:`fabric_resources.language_routing`).

Measured on 661 labelled texts from ../shared (units of the corpus and sentences of the
html-extraction set: en, es, de, ja, zh, ar, bn), each cut to 20-40 and to at most 300
characters (``docs/reliability.md``): 95.6 % / 98.3 % identified right; answers with a
normalised probability >= 0.5 were right 99.1 % / 99.2 % of the time and covered 87 % / 98 %
of the texts, so less sure answers are dropped. A book's sample is far longer than that.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

#: Normalised probability below which an identification is not used (measured, module docstring).
MIN_CONFIDENCE = 0.5
#: Fewer letters than this identify nothing reliably (a title, a number).
MIN_LETTERS = 10
#: The sample: at most this many units, spread evenly over the document ...
SAMPLE_UNITS = 64
#: ... each cut to this many characters (so a book costs about as much as a short story).
SAMPLE_CHARS_PER_UNIT = 300

_LOCK = threading.Lock()

#: Hebrew points: cantillation marks and niqqud (the Hebrew block's combining marks). They are a way
#: of writing, not a language: py3langid's model answers ``hbo`` (Ancient Hebrew) with probability
#: 1.0 for any pointed text (a modern children's book, a poem, ``הַיֶּלֶד הָלַךְ לְבֵית הַסֵּפֶר``), so
#: ``lang:he`` missed it; without them modern text is ``he``, and so is the Bible (unpointed, the
#: model reads it as ``he``; ``hbo`` came from the points alone).
_HEBREW_POINTS = re.compile("[\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7]")


@dataclass(frozen=True)
class LanguageVerdict:
    """What :func:`document_language` decided and from what.

    Attributes
    ----------
    language : str | None
        BCP 47 tag: the identified ISO 639-1 code (``"en"``, ``"ja"``…), else the declared tag
        as declared (``"en-US"``), else ``None``.
    identified : str | None
        The identifier's answer, whatever its confidence (``None`` below ``MIN_LETTERS``).
    confidence : float
        Its normalised probability in [0, 1] (0.0 when nothing was identified).
    source : str
        ``"identified"``, ``"declared"`` or ``"none"``.
    """

    language: str | None
    identified: str | None
    confidence: float
    source: str


@cache
def _identifier():
    with _LOCK:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier

        return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def identify_language(text: str) -> tuple[str | None, float]:
    """The language of ``text`` and the identifier's normalised probability.

    Returns
    -------
    (code, probability)
        ISO 639-1 code (a few of the model's languages have only an ISO 639-3 one: ``grc``,
        ``arz``…), or ``(None, 0.0)`` when ``text`` has fewer than ``MIN_LETTERS`` letters.
        Deterministic (the model is fixed; no sampling). Hebrew points are not read
        (:data:`_HEBREW_POINTS`).
    """
    if sum(1 for ch in text if ch.isalpha()) < MIN_LETTERS:
        return None, 0.0
    code, probability = _identifier().classify(_HEBREW_POINTS.sub("", text))
    return code, float(probability)


def language_sample(texts: Sequence[str]) -> str:
    """Up to ``SAMPLE_UNITS`` of ``texts``, evenly spread, each cut to ``SAMPLE_CHARS_PER_UNIT``."""
    if len(texts) > SAMPLE_UNITS:
        step = len(texts) / SAMPLE_UNITS
        texts = [texts[int(i * step)] for i in range(SAMPLE_UNITS)]
    return "\n".join(t[:SAMPLE_CHARS_PER_UNIT] for t in texts)


def document_language(unit_texts: Sequence[str], declared: str | None = None) -> LanguageVerdict:
    """The language of a document from its units' texts (reading order), and why.

    The identified language when its probability is at least ``MIN_CONFIDENCE``; else
    ``declared`` (stripped; ``None`` when empty); else ``None``.

    >>> document_language(["It is a truth universally acknowledged, that a single man"]).language
    'en'
    >>> document_language(["42"], declared="fr").source
    'declared'
    """
    code, probability = identify_language(language_sample(unit_texts))
    if code is not None and probability >= MIN_CONFIDENCE:
        return LanguageVerdict(code, code, probability, "identified")
    declared = (declared or "").strip() or None
    return LanguageVerdict(declared, code, probability, "declared" if declared else "none")


def language_probability(text: str, codes: frozenset[str]) -> float:
    """The identifier's normalised probability that ``text`` is in one of the languages ``codes``:
    the sum over them, in [0, 1]; 0.0 when ``text`` has fewer than ``MIN_LETTERS`` letters. Close
    languages split one answer (Croatian, Bosnian and Serbian in Latin letters: ``hr`` 0.47, ``bs``
    0.41, ``sr`` 0.11 for one Croatian sentence), so a question about a family sums them.

    >>> language_probability("Pchnąć w tę łódź jeża lub ośm skrzyń fig.", frozenset({"pl", "cs"})) > 0.99
    True
    """
    if sum(1 for ch in text if ch.isalpha()) < MIN_LETTERS:
        return 0.0
    return float(sum(p for code, p in _identifier().rank(_HEBREW_POINTS.sub("", text)) if code in codes))
