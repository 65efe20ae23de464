"""Retrieval metrics over ranked document IDs and graded qrels (pure).

nDCG uses the **linear gain** of trec_eval / BEIR (pytrec_eval):
``DCG@k = Σ_{i=1..k} rel_i / log2(i + 1)``, ideal DCG from the qrels sorted by
grade; documents absent from the qrels have gain 0. Recall@k counts documents
with grade > 0. MRR@k is the reciprocal rank of the first document with grade
> 0 within the top k (0 if none).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def ndcg_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """Normalised discounted cumulative gain at ``k`` (linear gain). 0.0 if no relevant document.

    >>> round(ndcg_at_k(["a", "b"], {"b": 1}, 10), 4)
    0.6309
    """
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:k]
    if not ideal:
        return 0.0
    dcg = sum(qrels.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]) if qrels.get(doc, 0) > 0)
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg


def recall_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    relevant = {d for d, g in qrels.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def mrr_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    for i, doc in enumerate(ranked[:k], start=1):
        if qrels.get(doc, 0) > 0:
            return 1.0 / i
    return 0.0


METRICS = ("nDCG@10", "Recall@10", "Recall@100", "MRR@10")


def score_run(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
    """Mean of each metric over the queries of ``run`` that have at least one relevant document.

    ``run``: query ID → document IDs best first (duplicates removed by the caller).
    """
    judged = [q for q in run if any(g > 0 for g in qrels.get(q, {}).values())]
    if not judged:
        return {m: 0.0 for m in METRICS}
    sums = dict.fromkeys(METRICS, 0.0)
    for q in judged:
        ranked, rel = run[q], qrels[q]
        sums["nDCG@10"] += ndcg_at_k(ranked, rel, 10)
        sums["Recall@10"] += recall_at_k(ranked, rel, 10)
        sums["Recall@100"] += recall_at_k(ranked, rel, 100)
        sums["MRR@10"] += mrr_at_k(ranked, rel, 10)
    return {m: round(v / len(judged), 4) for m, v in sums.items()}


def first_occurrence(ids: Sequence[str]) -> list[str]:
    """Deduplicate keeping the best (first) rank: chunk-level hits → document ranking."""
    return list(dict.fromkeys(ids))


def per_query_ndcg(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]],
                   k: int = 10) -> dict[str, float]:
    """nDCG@k of each query of ``run`` that has at least one relevant document (the queries
    :func:`score_run` averages over)."""
    return {q: ndcg_at_k(run[q], qrels[q], k) for q in run if any(g > 0 for g in qrels.get(q, {}).values())}


def paired_bootstrap(differences: Sequence[float], resamples: int = 10_000, seed: int = 0,
                     level: float = 0.95) -> tuple[float, float, float]:
    """Mean of per-query ``differences`` between two systems and its percentile bootstrap interval
    (Efron & Tibshirani 1993, ch. 13; queries resampled with replacement, ``resamples`` times, with a
    seeded generator so a run is reproducible; memory bounded by drawing in blocks). Returns ``(mean,
    low, high)``; an interval that holds 0 says the two systems are not told apart by these queries.
    With few queries (under ~30) the percentile interval is somewhat too narrow (Efron & Tibshirani
    1993, §13.3). No differences: ``(0, 0, 0)``.

    >>> paired_bootstrap([0.1] * 20)
    (0.1, 0.1, 0.1)

    Raises
    ------
    ValueError
        ``resamples`` < 1 or ``level`` outside (0, 1).
    """
    import numpy as np

    if resamples < 1 or not 0.0 < level < 1.0:
        raise ValueError(f"resamples must be >= 1 and level in (0, 1), got {resamples}, {level}")
    d = np.asarray(differences, dtype=np.float64)
    if not d.size:
        return 0.0, 0.0, 0.0
    rng = np.random.default_rng(seed)
    # Drawn in blocks: one (resamples × queries) index matrix would take 16 bytes per cell at once.
    block = max(1, 1_000_000 // d.size)
    means = np.concatenate([d[rng.integers(0, d.size, size=(min(block, resamples - start), d.size))].mean(axis=1)
                            for start in range(0, resamples, block)])
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return round(float(d.mean()), 4), round(float(low), 4), round(float(high), 4)
