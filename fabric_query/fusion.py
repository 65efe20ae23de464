"""Fusion of channel rankings: reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009),
rank-only, and a min-max normalised convex combination of channel scores (CombSUM over min-max
normalised scores, Fox & Shaw, TREC-2 1994; analysed for hybrid retrieval by Bruch, Gai & Ingber,
ACM TOIS 2023), with BM25-scored channels normalised against their floor 0 instead of the list
minimum (:data:`LEXICAL_FLOORS`). Both break ties totally: best single rank, then ID.

:func:`fuse` applies the :class:`~fabric_resources.config.FusionMethod` a search selected (the
method its channels ask for, :meth:`fabric_query.channels.base.Channel.fusion`; RRF otherwise)
with the weights of ``QueryConfig``, then moves the hits a dense floor calls unrelated after the
rest (:func:`demote`, ``query.floor_demotion``).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

from fabric_resources.config import FusionMethod, QueryConfig

__all__ = ["FusionMethod", "LEXICAL_FLOORS", "convex", "demote", "fuse", "rrf"]

#: The lowest score each BM25-scored channel can give. :func:`fuse`'s convex combination normalises
#: these channels against it, so the weakest lexical match keeps a positive share: min-max gave it 0,
#: which ranked the only other chunk holding a one-character query term (``鍵``) below dense-only
#: chunks (issue 19). Dense channels stay min-max: e5's cosines span about 0.75-0.95, so a floor of
#: -1 would flatten them (research/issue19 measured JSQuAD dev 0.9261 against 0.9399).
LEXICAL_FLOORS: Mapping[str, float] = {"word": 0.0, "substring": 0.0, "scan": 0.0}


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


def convex(
    channels: Mapping[str, Sequence[tuple[str, float]]], weights: Mapping[str, float], default_weight: float = 0.0,
    floors: Mapping[str, float] | None = None,
) -> list[tuple[str, float]]:
    """Fuse ``(id, score)`` lists (best first) by ``Σ_c w_c · (s_c(d) − lo_c) / (max_c − lo_c)``.

    ``lo_c`` is the channel's floor from ``floors`` (the lowest score it can give, e.g. 0 for BM25:
    theoretical-minimum normalisation, "TM2C2" in Bruch, Gai & Ingber, ACM TOIS 2023) or, for a
    channel without one, the minimum of the list it returned (min-max). Normalised values are
    clipped at 0; a list whose scores all equal its floor or each other normalises to 1.0; a
    document absent from a channel gets 0 there. ``w_c`` from ``weights`` (``default_weight`` for
    unlisted channels). Unlike :func:`rrf` this uses the raw
    scores, so it rewards a channel that is confident by a wide margin; the weights must be
    tuned per channel mix (see ``QueryConfig.multilingual_fusion``).

    >>> convex({"a": [("x", 10.0), ("y", 8.0), ("w", 5.0)], "b": [("y", 0.9), ("z", 0.1)]}, {"a": 0.5, "b": 0.5})[0][0]
    'y'
    """
    terms: dict[str, list[float]] = {}
    best: dict[str, int] = {}
    for channel, pairs in channels.items():
        w = weights.get(channel, default_weight)
        if not pairs:
            continue
        lo = floors[channel] if floors is not None and channel in floors else min(s for _, s in pairs)
        hi = max(s for _, s in pairs)
        for rank, (doc, score) in enumerate(pairs, start=1):
            terms.setdefault(doc, []).append(w * (max(0.0, (score - lo) / (hi - lo)) if hi > lo else 1.0))
            best[doc] = min(best.get(doc, rank), rank)
    scores = {doc: math.fsum(t) for doc, t in terms.items()}
    return sorted(scores.items(), key=lambda kv: (-kv[1], best[kv[0]], kv[0]))


def demote(fused: Sequence[tuple[str, float]], below: Collection[str]) -> list[tuple[str, float]]:
    """``fused`` with the IDs in ``below`` moved after all the others, each group in its own order
    and every score kept (so scores no longer fall monotonically across the boundary).

    ``below`` holds the hits no lexical channel matched whose every dense cosine is under its
    channel's floor (``query.dense_floors``, :attr:`fabric_query.types.Hit.below_dense_floor`): a
    rank-based fusion gives a dense-only neighbour at rank *r* ``w / (k + r)`` whatever its cosine,
    so without this an unrelated neighbour outranks a lexical match the dense model cannot rank.

    >>> demote([("a", 0.3), ("b", 0.2), ("c", 0.1)], {"a"})
    [('b', 0.2), ('c', 0.1), ('a', 0.3)]
    """
    if not below:
        return list(fused)
    return [p for p in fused if p[0] not in below] + [p for p in fused if p[0] in below]


def fuse(
    method: FusionMethod | str,
    rankings: Mapping[str, Sequence[str]],
    scored: Mapping[str, Sequence[tuple[str, float]]],
    config: QueryConfig,
    below_floor: Collection[str] = (),
) -> list[tuple[str, float]]:
    """Fuse channel lists by ``method``: :func:`rrf` over ``rankings`` (IDs best first) with
    ``config.rrf_k`` and ``config.channel_weights``, or :func:`convex` over ``scored`` (the same
    lists with each channel's scores) with ``config.convex_weights``, BM25 channels against
    :data:`LEXICAL_FLOORS`; then, when ``config.floor_demotion``, :func:`demote` the IDs in
    ``below_floor``.

    Raises
    ------
    ValueError
        ``method`` is not a :class:`FusionMethod` value.
    """
    if FusionMethod(method) is FusionMethod.CONVEX:
        fused = convex(scored, config.convex_weights, floors=LEXICAL_FLOORS)
    else:
        fused = rrf(rankings, config.rrf_k, config.channel_weights)
    return demote(fused, below_floor) if config.floor_demotion else fused
