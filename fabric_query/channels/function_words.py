"""Function words: query words that are no lexical evidence on their own.

A natural-language question (``what to do about a punctured tire``) shares ``what``, ``to``,
``do`` and ``about`` with most English text. BM25 weighs them by their document frequency, which
on a home of a dozen files is no guide (``what`` in 4 of 12 files has a high idf), so a chunk that
matched only them ranked as a word match, counted as lexical evidence (exempt from the dense floor's
demotion) and chose the dense feedback documents. With :func:`function_word_tokens`, the word
channel keeps such words in every score but asks each matching chunk to hold at least one other
query word (or a quoted phrase) when the query has one.

The list is NLTK's English stop-word list (179 words; Bird, Klein & Loper, *Natural Language
Processing with Python*, 2009), as the ``bm25s`` package (a dependency) ships it
(``bm25s.stopwords.STOPWORDS_EN_PLUS``). Only English: other languages' lists hold English
content words (Dutch ``door``, Danish ``men``, German ``die``), and a query's language cannot be
told reliably from a few words.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def english_function_words() -> frozenset[str]:
    """NLTK's English stop words as ``bm25s`` ships them (179 words, lower case, some with ``'``).

    Read from the module file alone: importing the ``bm25s`` package loads SciPy (~0.6 s), which
    the query process otherwise never needs.

    Raises
    ------
    ImportError
        If ``bm25s`` is not installed (it is a declared dependency).
    """
    spec = importlib.util.find_spec("bm25s")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("bm25s is not installed: its English stop-word list is the function-word list")
    path = Path(next(iter(spec.submodule_search_locations))) / "stopwords.py"
    module_spec = importlib.util.spec_from_file_location("_bm25s_stopwords", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return frozenset(module.STOPWORDS_EN_PLUS)


def function_word_tokens(analyze: Callable[[str], Iterable[str]]) -> frozenset[str]:
    """The index tokens of :func:`english_function_words` under ``analyze`` (the word field's
    analyzer: folded, stemmed), so a query token is compared as the index holds it (``doing`` and
    ``does`` are ``do`` and ``doe``)."""
    return frozenset(t for w in english_function_words() for t in analyze(w))


def content_tokens(free_text: Iterable[str], phrase_tokens: Iterable[str], function: frozenset[str]) -> set[str]:
    """The query tokens a chunk must hold one of to be a word match: the free-text tokens that are
    not function words and every token of a quoted phrase (a phrase is asked for on purpose). When
    no such token is left (``to be or not to be``), every free-text token.

    >>> sorted(content_tokens(["what", "do", "about", "tire"], [], frozenset({"what", "do", "about"})))
    ['tire']
    >>> sorted(content_tokens(["to", "be"], [], frozenset({"to", "be"})))
    ['be', 'to']
    """
    free = list(free_text)
    kept = {t for t in free if t not in function} | set(phrase_tokens)
    return kept or set(free)
