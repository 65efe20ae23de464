"""Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009): rank-only, total tie-break."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def rrf(
    rankings: Mapping[str, Sequence[str]], k: int = 60, weights: Mapping[str, float] | None = None
) -> list[tuple[str, float]]:
    """Fuse ranked lists of IDs (best first) by ``score(d) = Σ_c w_c / (k + rank_c(d))``, ranks 1-based,
    ``w_c`` from ``weights`` (default 1.0: plain RRF).

    Raw channel scores never enter. Ties break by the best single rank, then by ID,
    so the order is total and deterministic.

    >>> rrf({"a": ["x", "y"], "b": ["y", "z"]}, k=60)[0][0]
    'y'
    """
    terms: dict[str, list[float]] = {}
    best: dict[str, int] = {}
    for channel, ids in rankings.items():
        w = 1.0 if weights is None else weights.get(channel, 1.0)
        for rank, doc in enumerate(ids, start=1):
            terms.setdefault(doc, []).append(w / (k + rank))
            best[doc] = min(best.get(doc, rank), rank)
    # fsum is correctly rounded, so equal exact sums give equal floats whatever the channel order.
    scores = {doc: math.fsum(t) for doc, t in terms.items()}
    return sorted(scores.items(), key=lambda kv: (-kv[1], best[kv[0]], kv[0]))
