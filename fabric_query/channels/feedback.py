"""Pseudo-relevance feedback of the word channel: which terms a second pass adds, and with what
weight (:class:`Feedback`). Pure functions over the first pass's window documents; the channel
(:func:`fabric_query.channels.lexical.word_matches`) runs the passes."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fabric_query.channels.bm25 import TermStats
from fabric_resources.lexical_index import OpenIndex


@dataclass(frozen=True)
class Feedback:
    """Pseudo-relevance feedback over the top ``docs`` first-pass window documents, ``terms``
    expansion terms, by ``method``:

    * ``idf``: terms by Σ_d tf(t,d)/|d| · idf(t) (terms in over 10% of windows left out), added as
      SHOULD clauses boosted by ``weight`` × their score over the best one; query terms keep theirs.
    * ``rm3``: RM3 (Lavrenko & Croft, SIGIR 2001; Abdul-Jaleel et al., TREC 2004, as Anserini
      implements it): the relevance model P(t|R) = Σ_d P(t|d)·P(d|q) with P(t|d) = tf(t,d)/|d| and
      P(d|q) the window's first-pass BM25 score over the feedback windows' sum, cut to the best
      ``terms`` terms and renormalised, then interpolated with the query's own term distribution:
      w(t) = (1 − ``weight``)·q(t)/Σq + ``weight``·P(t|R) (query terms may gain weight too).
    """

    docs: int = 10
    terms: int = 10
    weight: float = 0.5
    method: str = "idf"


def expansion_terms(
    index: OpenIndex, first_pass: Sequence[str], stats_of: Callable[[str], TermStats], query_tokens: set[str],
    fb: Feedback,
) -> list[tuple[str, float]]:
    """Feedback terms from the top ``fb.docs`` of ``first_pass`` (window document IDs, best first);
    ``stats_of`` gives a window's word-field term counts and length. idf over the window documents."""
    n_docs = max(index.word_documents, 1)
    scores: dict[str, float] = {}
    for wid in first_pass[: fb.docs]:
        counts, length = stats_of(wid)
        if not length:
            continue
        for term, tf in counts.items():
            if term not in query_tokens and len(term) > 1:
                scores[term] = scores.get(term, 0.0) + tf / length
    weighted = []
    for term, s in scores.items():
        df = index.word_doc_freq(term)
        if df and df / n_docs < 0.1:  # very common terms carry no topic
            weighted.append((term, s * math.log(n_docs / df)))
    weighted.sort(key=lambda p: (-p[1], p[0]))
    top = weighted[: fb.terms]
    if not top:
        return []
    best = top[0][1]
    return [(t, fb.weight * s / best) for t, s in top]


def rm3_weights(
    first_pass: Sequence[tuple[str, float]], stats_of: Callable[[str], TermStats], query: dict[str, float],
    fb: Feedback, excluded: Callable[[str], bool] = lambda t: False,
) -> dict[str, float]:
    """The RM3 query (:class:`Feedback`, ``method="rm3"``): term → weight over the query's terms and
    the expansion terms, scaled by Σq so that a query term's weight stays near its count.

    ``first_pass``: (window ID, BM25 score) best first; ``stats_of``: a window's term counts and
    length; ``query``: the query's term weights; ``excluded``: terms never added (stop words).
    Single-character terms are added only when the query has them. Ties break by term.

    >>> stats = {"a": ({"lamp": 2, "keeper": 2}, 4), "b": ({"lamp": 1, "tide": 3}, 4)}
    >>> w = rm3_weights([("a", 2.0), ("b", 1.0)], stats.__getitem__, {"lamp": 1.0}, Feedback(2, 2, 0.5, "rm3"))
    >>> sorted(w), round(w["lamp"], 4), round(w["keeper"], 4)
    (['keeper', 'lamp'], 0.7778, 0.2222)
    """
    top = [(w, s) for w, s in first_pass[: fb.docs] if s > 0]
    q_total = sum(query.values())
    if not top or not q_total:
        return dict(query)
    z = math.fsum(s for _, s in top)
    relevance: dict[str, float] = {}
    for wid, score in top:
        counts, length = stats_of(wid)
        if not length:
            continue
        for term, tf in counts.items():
            if (len(term) > 1 or term in query) and not (excluded(term) and term not in query):
                relevance[term] = relevance.get(term, 0.0) + (score / z) * tf / length
    best = sorted(relevance.items(), key=lambda p: (-p[1], p[0]))[: fb.terms]
    r_total = math.fsum(v for _, v in best)
    out = {t: (1 - fb.weight) * w for t, w in query.items()}
    for term, v in best:
        out[term] = out.get(term, 0.0) + fb.weight * v / r_total * q_total
    return out
