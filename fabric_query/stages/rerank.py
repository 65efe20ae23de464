"""The rerank stage: a reranker reorders the head of the fused candidate list; the tail keeps its order.

:func:`rerank` is pure apart from the one ``reranker.score`` call; it never loads a model itself.
As a pipeline stage (:data:`RERANK`) it runs when the search has a reranker, over the passages
of the first ``max(reranker.candidate_pool, limit)`` candidates (:func:`rerank_input`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from fabric_query.assembly import assemble_passages
from fabric_query.stages.base import Rescored
from fabric_query.types import Passage

if TYPE_CHECKING:
    from fabric_query.context import QueryContext
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


def rerank_input(passage: Passage) -> str:
    """The reranker sees the passage's heading path, a blank line, then its canonical text."""
    heading = " / ".join(passage.section_path)
    return f"{heading}\n\n{passage.text}" if heading else passage.text


class RerankStage:
    """:func:`rerank` over the candidates' passages with the search's reranker."""

    name = "rerank"
    candidates_key = "reranked"

    def applies(self, ctx: "QueryContext") -> bool:
        return ctx.encoders.reranker is not None

    def run(self, ctx: "QueryContext", ranked: list[str]) -> Rescored:
        pool_ids = ranked[: max(ctx.config.reranker.candidate_pool, ctx.limit)]
        passages, _, _, passage_of = assemble_passages(
            ctx.view, pool_ids, ctx.sources_by_parse, ctx.config.passages.max_tokens, ctx.config.passages.max_units,
            ctx.windows.of)
        texts = [rerank_input(passages[passage_of[cid]]) for cid in pool_ids]
        reranked = rerank(ctx.parsed.positive_text, list(zip(pool_ids, texts)), ctx.encoders.reranker, len(pool_ids))
        return Rescored([cid for cid, _ in reranked] + ranked[len(pool_ids):],
                        {cid: sc for cid, sc in reranked if sc is not None},
                        [(cid, sc) for cid, sc in reranked if sc is not None])


RERANK = RerankStage()
