"""The dense channels: exact cosine search over one vector table of the release, directly and
guided by context windows.

``dense`` searches ``chunk_vectors`` with the dense role's model (MiniLM or HTTP) for queries in
Latin script; ``dense_multilingual`` searches ``chunk_vectors_multilingual`` with multilingual-e5
for queries routed to it (``fabric_resources.language_routing``). A query vector is only compared
with vectors of the model that encodes it: a table holding another model's vectors skips the
channel with a named reason.

Section-guided route (seed 003, query pipeline "Channels"): the query vector shortlists context
windows; each nominates its best member chunks; the direct and section-guided lists merge by
equal-weight RRF into one dense ranking whose provenance keeps both routes and the window's
section path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal, TypedDict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fabric_query.channels.base import ChannelResult, ChannelRun, ranked
from fabric_query.fusion import FusionMethod, rrf
from fabric_query.release import ProjectionUnavailable, ReleaseView
from fabric_resources.models.multilingual import shared_multilingual_embedder

if TYPE_CHECKING:
    from fabric_query.context import QueryContext
    from fabric_resources.config import QueryConfig
    from fabric_resources.models.embedder import Encoder


def dense_channel(
    view: ReleaseView, query_vector: np.ndarray, eligible: set[str] | None, depth: int, table: str = "chunk_vectors"
) -> ChannelResult:
    """``query_vector``: ``(384,) float32`` unit-norm, from the model that wrote ``table``.

    Only chunks with a vector in ``table`` are candidates; ineligible chunks never enter the ranking.
    """
    vs = view.vector_set(table)
    if vs.matrix.shape[0] == 0:
        return []
    scores = vs.matrix @ query_vector.astype(np.float32)
    if eligible is not None:
        pids = view.chunk_parse_ids[vs.rows]
        scores = np.where(np.fromiter((p in eligible for p in pids), dtype=bool, count=len(scores)), scores, -np.inf)
    k = min(depth + 32, len(scores))
    top = np.argpartition(-scores, k - 1)[:k]
    ids = view.chunks.column("chunk_id")
    return ranked([(ids[int(vs.rows[i])].as_py(), float(scores[i])) for i in top if np.isfinite(scores[i])], depth)


def vector_models(view: ReleaseView, table: str) -> frozenset[str]:
    """Model identities recorded on the view's rows of ``table`` (loaded once per view).

    A query vector is only comparable with vectors of the same model; the pipeline skips the
    channel with a named reason when these differ from its query encoder's identity.

    Raises
    ------
    fabric_query.release.ProjectionUnavailable
        The table cannot serve (unreadable, or its rows do not match the release's digest).
    """
    return view.vector_set(table).models

Route = Literal["direct", "section"]


class DenseProvenance(TypedDict):
    """How one chunk of the merged dense ranking was found.

    ``routes`` lists the routes that found it (``"direct"`` before ``"section"``);
    ``direct_rank`` / ``section_rank`` are its 1-based ranks in each (``None`` if absent);
    ``window_id`` / ``window_section_path`` name the context window that nominated it
    (``None`` unless the section route found it).
    """

    routes: tuple[Route, ...]
    direct_rank: int | None
    section_rank: int | None
    window_id: str | None
    window_section_path: tuple[str, ...] | None


def section_route(
    view: ReleaseView,
    query_vector: np.ndarray,
    eligible: set[str] | None,
    table: str = "chunk_vectors",
    candidate_limit: int = 20,
    per_window: int = 2,
) -> list[tuple[str, float, int]]:
    """Chunks nominated by the context windows nearest the query.

    The ``candidate_limit`` eligible windows with the highest cosine between ``query_vector``
    (``(384,) float32``, unit norm, from the model that wrote ``table``) and the window vector
    (:meth:`ReleaseView.window_vectors`) are shortlisted, best first, ties by window ID. Each
    nominates up to ``per_window`` of its own member chunks that have a vector in ``table``,
    by chunk cosine (ties by chunk ID). Ineligible parses are masked before any ranking.

    Returns
    -------
    list of ``(chunk_id, chunk_cosine, window_row)``: windows in shortlist order, each window's
    nominees best first; ``window_row`` indexes ``view.context_windows``. Empty when the
    release has no context windows.
    """
    wv = view.window_vectors(table)
    if wv.matrix.shape[0] == 0:
        return []
    q = query_vector.astype(np.float32)
    scores = wv.matrix @ q
    if eligible is not None:
        admitted = pc.is_in(view.context_windows.column("parse_id"), value_set=pa.array(sorted(eligible), pa.string()))
        scores = np.where(admitted.to_numpy(zero_copy_only=False)[wv.rows], scores, -np.inf)
    window_ids = view.context_windows.column("window_id")
    k = min(candidate_limit, len(scores))
    # A margin of 32 past the cut lets exact ties at the cut break by window ID (as dense_channel does).
    pool = np.argpartition(-scores, min(k + 32, len(scores)) - 1)[: k + 32]
    shortlist = ranked(
        [(window_ids[int(wv.rows[i])].as_py(), float(scores[i])) for i in pool if np.isfinite(scores[i])], k
    )
    slot_of = {window_ids[int(wv.rows[i])].as_py(): int(i) for i in pool}
    vs = view.vector_set(table)
    chunk_ids = view.chunks.column("chunk_id")
    out: list[tuple[str, float, int]] = []
    for wid, _ in shortlist:
        i = slot_of[wid]
        members = wv.members[wv.offsets[i]:wv.offsets[i + 1]]
        cos = vs.matrix[members] @ q
        nominees = ranked([(chunk_ids[int(vs.rows[m])].as_py(), float(s)) for m, s in zip(members, cos)], per_window)
        out.extend((cid, s, int(wv.rows[i])) for cid, s in nominees)
    return out


def section_guided_dense(
    view: ReleaseView,
    query_vector: np.ndarray,
    eligible: set[str] | None,
    depth: int,
    table: str = "chunk_vectors",
    candidate_limit: int = 20,
    per_window: int = 2,
    rrf_k: int = 60,
) -> tuple[ChannelResult, dict[str, DenseProvenance]]:
    """One dense ranking from the direct route (:func:`dense_channel`) and :func:`section_route`.

    The two chunk lists merge by equal-weight RRF (:func:`fabric_query.fusion.rrf`, constant
    ``rrf_k``, total tie-break) and are cut to ``depth``. Defaults are ``QueryConfig``'s.

    Returns
    -------
    ranking : list of ``(chunk_id, rrf_score)``, best first, at most ``depth``.
    provenance : chunk ID → :class:`DenseProvenance`, for every chunk in ``ranking``.
    """
    direct = dense_channel(view, query_vector, eligible, depth, table)
    section = section_route(view, query_vector, eligible, table, candidate_limit, per_window)
    direct_ids = [cid for cid, _ in direct]
    section_ids = [cid for cid, _, _ in section]
    merged = rrf({"direct": direct_ids, "section": section_ids}, k=rrf_k)[:depth]
    direct_rank = {cid: r for r, cid in enumerate(direct_ids, start=1)}
    section_at = {cid: (r, row) for r, (cid, _, row) in enumerate(section, start=1)}
    windows = view.context_windows
    provenance: dict[str, DenseProvenance] = {}
    for cid, _ in merged:
        s = section_at.get(cid)
        routes: tuple[Route, ...] = tuple(
            name for name, found in (("direct", cid in direct_rank), ("section", s is not None)) if found
        )
        provenance[cid] = DenseProvenance(
            routes=routes,
            direct_rank=direct_rank.get(cid),
            section_rank=s[0] if s else None,
            window_id=windows.column("window_id")[s[1]].as_py() if s else None,
            window_section_path=tuple(windows.column("section_path")[s[1]].as_py() or ()) if s else None,
        )
    return merged, provenance


# ---------------------------------------------------------------------------
# The channels
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryVector:
    """A dense channel's query vector for one query: ``vector`` (``(384,) float32``, unit norm)
    encoded by the model ``model``, or why the channel's table cannot be compared with it
    (``skipped``; ``vector`` and ``model`` are then ``None``)."""

    vector: np.ndarray | None
    model: str | None
    skipped: str | None = None


@dataclass(frozen=True)
class DenseChannel:
    """A dense channel over ``table``, for Latin-script queries or (``multilingual``) the others."""

    name: str
    table: str
    multilingual: bool
    hard_constraint_carrier: ClassVar[bool] = False  # a cosine cannot prove a phrase or an exclusion
    fallback: ClassVar[None] = None

    @property
    def stage(self) -> str:
        return self.name

    def applies(self, ctx: "QueryContext") -> bool:
        if ctx.multilingual_text != self.multilingual:
            return False
        return not self.multilingual or ctx.config.dense.multilingual

    def encoder(self, ctx: "QueryContext") -> "Encoder":
        if not self.multilingual:
            return ctx.encoders.dense
        return ctx.encoders.multilingual or shared_multilingual_embedder()

    def run(self, ctx: "QueryContext") -> ChannelRun:
        qv = query_vector(ctx, self)
        if qv.skipped is not None:
            return ChannelRun.skip(qv.skipped)
        q = ctx.config.query
        section = q.section_guided_multilingual if self.multilingual else q.section_guided
        if section and ctx.windows.skipped is None:
            ranking, provenance = section_guided_dense(
                ctx.view, qv.vector, ctx.eligible, ctx.depth, self.table, q.section_candidate_limit,
                q.section_passages_per_window, q.rrf_k)
            return ChannelRun(ranking, provenance)
        return ChannelRun(dense_channel(ctx.view, qv.vector, ctx.eligible, ctx.depth, self.table))

    def fusion(self, config: "QueryConfig") -> FusionMethod | None:
        # The convex weights were tuned for the e5 mix (JSQuAD dev); the MiniLM mix fuses by RRF.
        return FusionMethod(config.multilingual_fusion) if self.multilingual else None


def query_vector(ctx: "QueryContext", channel: DenseChannel) -> QueryVector:
    """``channel``'s query vector for ``ctx`` (checked and encoded once per query, on first use).

    The stored vectors' model identities are checked first (:func:`vector_models`): the query is
    encoded only when the table holds no vector of another model. Laps ``encode_query`` (or
    ``encode_query_multilingual``) on the query's clock.
    """
    return ctx.per_query(("query-vector", channel.name), lambda: _encode(ctx, channel))


def _encode(ctx: "QueryContext", channel: DenseChannel) -> QueryVector:
    encoder = channel.encoder(ctx)
    try:
        stored = vector_models(ctx.view, channel.table)
    except ProjectionUnavailable as exc:
        return QueryVector(None, None, exc.describe())
    if stored and stored != {encoder.identity}:
        return QueryVector(None, None, (
            f"model-mismatch: {channel.table} holds vectors of {sorted(stored)}, the query encoder is "
            f"{encoder.identity}; re-run the projection (fabric ingest re-embeds stale partitions)"))
    vector = encoder.encode_queries([ctx.parsed.positive_text])[0]
    ctx.clock.lap("encode_query_multilingual" if channel.multilingual else "encode_query")
    return QueryVector(vector, encoder.identity)


DENSE = DenseChannel("dense", "chunk_vectors", multilingual=False)
DENSE_MULTILINGUAL = DenseChannel("dense_multilingual", "chunk_vectors_multilingual", multilingual=True)


DENSE_CHANNELS = {c.name: c for c in (DENSE, DENSE_MULTILINGUAL)}


def hit_cosines(ctx: "QueryContext", channel_name: str, chunk_ids: list[str]) -> dict[str, float]:
    """Cosine between ``channel_name``'s query vector and each of ``chunk_ids`` that has a vector in
    its table (for the dense floor: section-guided scores are RRF, not cosines). Empty when the
    channel is not a dense one or encoded nothing for this query (its query vector is reused)."""
    channel = DENSE_CHANNELS.get(channel_name)
    if channel is None:
        return {}
    qv = query_vector(ctx, channel)
    if qv.vector is None:
        return {}
    vs = ctx.view.vector_set(channel.table)
    index = ctx.view.chunk_index
    out = {}
    for cid in chunk_ids:
        # A scan of the row array per hit (~1 ms at 100k chunks) beats a per-query reverse map.
        found = np.flatnonzero(vs.rows == index.get(cid, -1))
        if found.size:
            out[cid] = float(vs.matrix[int(found[0])] @ qv.vector.astype(np.float32))
    return out
