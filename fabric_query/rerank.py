"""The rerank stage: a reranker reorders the head of the fused candidate list; the tail keeps its order.

Pure apart from the one ``reranker.score`` call; it never loads a model itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fabric_resources.models.reranker import Reranker


def rerank(
    query: str, candidates: Sequence[tuple[str, str]], reranker: "Reranker", pool: int
) -> list[tuple[str, float | None]]:
    """Reorder the first ``pool`` candidates by the reranker's score; keep the rest after them.

    Parameters
    ----------
    query : str
    candidates : sequence of (key, passage text)
        Best first (the fused order).
    reranker : Reranker
        Called once, with the passages of the first ``pool`` candidates (not at all when that
        head is empty).
    pool : int
        How many leading candidates are scored (``reranker.candidate_pool``); ``>= 0``.

    Returns
    -------
    list of (key, score)
        All candidates, each once: the scored head by score descending (ties keep their fused
        order), then the unscored tail in fused order with score ``None``.

    Raises
    ------
    ValueError
        ``pool < 0``, or the reranker returned a wrong number of scores or a non-finite score.

    >>> class ByLength:
    ...     identity = "len"
    ...     def score(self, query, passages):
    ...         return [float(len(p)) for p in passages]
    >>> rerank("q", [("a", "x"), ("b", "xxx"), ("c", "xx"), ("d", "xxxx")], ByLength(), pool=3)
    [('b', 3.0), ('c', 2.0), ('a', 1.0), ('d', None)]
    """
    if pool < 0:
        raise ValueError(f"pool must be >= 0, got {pool}")
    head = list(candidates[:pool])
    tail: list[tuple[str, float | None]] = [(key, None) for key, _ in candidates[pool:]]
    if not head:
        return tail
    raw = reranker.score(query, [text for _, text in head])
    try:
        scores = [float(s) for s in raw]
    except (TypeError, ValueError):
        raise ValueError(f"reranker {reranker.identity} returned scores that are not one number per passage") from None
    if len(scores) != len(head):
        raise ValueError(f"reranker {reranker.identity} returned {len(scores)} scores for {len(head)} passages")
    if not all(math.isfinite(s) for s in scores):
        raise ValueError(f"reranker {reranker.identity} returned a non-finite score")
    order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    return [(head[i][0], scores[i]) for i in order] + tail
