"""Dense pseudo-relevance feedback: the MiniLM dense channel searched a second time, its query
vector moved towards the documents the first pass ranked best.

Rocchio's feedback (J. J. Rocchio, "Relevance feedback in information retrieval", The SMART
Retrieval System, 1971) applied to the query vector, as Li et al. measure it for dense retrievers
("Pseudo Relevance Feedback with Deep Language Models and Dense Retrievers: Successes and
Pitfalls", ACM TOIS 41(3), 2023): ``q' = normalise(q + w · mean(f_1 … f_k))``, where ``f_i`` is the
context-window vector (:meth:`fabric_query.release.ReleaseView.window_vectors`) of the best chunk of
each of the first ``k`` documents (``query.dense_feedback_documents``) of the first pass and ``w`` is
``query.dense_feedback_weight``.

The first pass is every channel's ranking fused by plain RRF (k 60, weight 1 each), whatever
``query.rrf_k`` and ``query.channel_weights`` say, so the feedback documents carry the lexical
channels' evidence into the dense ranking (feedback from the dense ranking alone lowered CACM:
docs/ranking.md) and do not depend on the fusion settings (``fabric eval-tune`` re-fuses one pass
under many). Feedback runs only when a lexical channel matched something: with no lexical match the
first pass is the dense channel's own neighbours (so at least one feedback document must be a lexical
match with a MiniLM vector). The e5 route takes none (it lowered JSQuAD).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from fabric_query.channels.base import ChannelRun
from fabric_query.channels.dense import DENSE, QueryVector, channel_source, query_vector
from fabric_query.dense_search import ExactSource
from fabric_query.evidence import LEXICAL_CHANNELS
from fabric_query.fusion import rrf
from fabric_query.release import ProjectionUnavailable
from fabric_resources.dense_index import DenseIndexUnusable

if TYPE_CHECKING:
    from fabric_query.context import QueryContext
    from fabric_query.dense_search import DenseSource

#: RRF constant of the first pass that chooses the feedback documents (Cormack et al., SIGIR 2009).
FEEDBACK_RRF_K = 60
#: Candidate documents examined per feedback document wanted, so that documents with no vector in the
#: MiniLM table (text routed to e5 only) are passed over for the next ones.
CANDIDATES_PER_DOCUMENT = 4


@dataclass(frozen=True)
class DenseFeedback:
    """The dense channel's second pass (``run``: its ranking under the moved vector) and the chunks
    whose context windows moved it (``chunk_ids``, first-pass order; empty with ``skipped``), or
    why feedback that was asked for could not run (``skipped``; ``run`` is then ``None``)."""

    run: ChannelRun | None
    chunk_ids: tuple[str, ...] = ()
    skipped: str | None = None


def feedback_chunks(rankings: Mapping[str, Sequence[str]], parse_of: Callable[[str], str | None],
                    documents: int) -> list[str]:
    """The best chunk of each of the first ``documents`` parses of the plain RRF of ``rankings``
    (channel → chunk IDs, best first; :data:`FEEDBACK_RRF_K`), in fused order. ``parse_of`` gives a
    chunk's parse ID (``None``: not in the release; skipped)."""
    chosen: list[str] = []
    seen: set[str] = set()
    for chunk_id, _ in rrf(rankings, k=FEEDBACK_RRF_K):
        parse = parse_of(chunk_id)
        if parse is None or parse in seen:
            continue
        seen.add(parse)
        chosen.append(chunk_id)
        if len(chosen) == documents:
            break
    return chosen


def moved_vector(query: np.ndarray, feedback: np.ndarray, weight: float) -> np.ndarray:
    """Rocchio's moved query: ``normalise(query + weight · mean(feedback rows))``.

    ``query``: ``(d,)`` unit norm; ``feedback``: ``(k, d)``, ``k >= 1``, unit rows; ``weight >= 0``.
    Returns ``(d,) float32`` of unit norm (``query`` itself when the sum is the zero vector).
    """
    moved = query.astype(np.float64) + weight * feedback.astype(np.float64).mean(axis=0)
    norm = float(np.linalg.norm(moved))
    return (moved / norm).astype(np.float32) if norm > 0.0 else query.astype(np.float32)


def dense_feedback(ctx: "QueryContext", rankings: Mapping[str, Sequence[str]]) -> DenseFeedback | None:
    """The MiniLM dense channel's second pass for ``ctx``, or ``None`` when none is due: feedback
    off, the dense channel did not rank, or no feedback document carries lexical evidence.

    ``rankings``: the first pass's channel rankings as fusion sees them (after hard constraints).
    The feedback documents are the first ``query.dense_feedback_documents`` of the plain RRF that
    have a vector in the MiniLM table (a document routed to e5 only has none and is passed over, among
    the first :data:`CANDIDATES_PER_DOCUMENT` × that many); at least one of them must be ranked by a
    lexical channel, else they are the dense channel's own neighbours and nothing is fed back. The
    second pass searches under the same filters, depth and settings (window mix, section route, exact
    product or ANN index) as the first. Without context windows (the projection cannot serve) it is
    skipped with the reason. Laps ``dense_feedback`` once it has read vectors.
    """
    q = ctx.config.query
    if q.dense_feedback_weight <= 0.0 or not rankings.get(DENSE.name):
        return None
    if not any(rankings.get(name) for name in LEXICAL_CHANNELS):
        return None
    if ctx.windows.skipped is not None:
        return DenseFeedback(None, skipped=f"context-windows-unavailable: {ctx.windows.skipped}")
    qv = query_vector(ctx, DENSE)
    found = channel_source(ctx, DENSE)
    if qv.vector is None or found.source is None:
        return None
    try:
        return _second_pass(ctx, rankings, qv, found.source)
    finally:
        ctx.clock.lap("dense_feedback")


def _second_pass(ctx: "QueryContext", rankings: Mapping[str, Sequence[str]], qv: QueryVector,
                 source: "DenseSource") -> DenseFeedback | None:
    q = ctx.config.query
    index, parse_ids = ctx.view.chunk_index, ctx.view.chunk_parse_ids

    def parse_of(chunk_id: str) -> str | None:
        return str(parse_ids[index[chunk_id]]) if chunk_id in index else None

    candidates = feedback_chunks(rankings, parse_of, CANDIDATES_PER_DOCUMENT * q.dense_feedback_documents)
    rows = [index[c] for c in candidates]
    try:
        try:
            by_row = source.window_vectors(rows)
        except DenseIndexUnusable:  # the index failed: the same centroids from the table
            by_row = ExactSource(ctx.view, DENSE.table).window_vectors(rows)
    except ProjectionUnavailable as exc:
        return DenseFeedback(None, skipped=exc.describe())
    chosen = [c for c in candidates if index[c] in by_row][: q.dense_feedback_documents]
    lexical = {parse_of(c) for name in LEXICAL_CHANNELS for c in rankings.get(name, ())}
    if not any(parse_of(c) in lexical for c in chosen):
        return None
    vectors = np.stack([by_row[index[c]] for c in chosen])
    moved = QueryVector(moved_vector(qv.vector, vectors, q.dense_feedback_weight), qv.model)
    run = DENSE.run_vector(ctx, moved)
    if ctx.excluded_chunks and run.skipped is None:  # a chunk-level filter (confidence:), as the first pass
        run = replace(run, ranking=ctx.admitted(run.ranking))
    return DenseFeedback(run, tuple(chosen))
