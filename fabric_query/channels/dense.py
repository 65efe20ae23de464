"""The dense channels: cosine search over one vector table of the release, directly and guided
by context windows.

``dense`` searches ``chunk_vectors`` with the dense role's model (MiniLM or HTTP) for queries in
Latin script; ``dense_multilingual`` searches ``chunk_vectors_multilingual`` with multilingual-e5
for queries routed to it (``fabric_resources.language_routing``). A query vector is only compared
with vectors of the model that encodes it: a table holding another model's vectors skips the
channel with a named reason.

Candidates come from the exact product over the table or from the release's ANN index
(:mod:`fabric_query.dense_search`, ``query.dense_search``); scores are exact cosines either way, and
a wanted index that cannot serve is replaced by the product with ``dense_fallback_reason`` saying why.

Window mix (``query.dense_window_weight``, off by default): a chunk's score mixes its own cosine
with its context window's (:func:`window_smoothed_dense`).

Section-guided route (seed 003, query pipeline "Channels"): the query vector shortlists context
windows; each nominates its best member chunks; the direct and section-guided lists merge by
equal-weight RRF into one dense ranking whose provenance keeps both routes and the window's
section path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal, TypedDict

import numpy as np

from fabric_query.channels.base import ChannelResult, ChannelRun, ranked
from fabric_query.dense_search import DenseSource, ExactSource, dense_source, search_failures
from fabric_resources.dense_index import DenseIndexUnusable
from fabric_query.fusion import FusionMethod, rrf
from fabric_query.release import ProjectionUnavailable, ReleaseView
from fabric_resources.models.multilingual import shared_multilingual_embedder

if TYPE_CHECKING:
    from fabric_query.context import QueryContext
    from fabric_resources.config import QueryConfig
    from fabric_resources.models.embedder import Encoder


def dense_channel(
    view: ReleaseView, query_vector: np.ndarray, eligible: set[str] | None, depth: int, table: str = "chunk_vectors",
    source: DenseSource | None = None,
) -> ChannelResult:
    """``query_vector``: ``(384,) float32`` unit-norm, from the model that wrote ``table``.

    Only chunks with a vector in ``table`` are candidates; ineligible chunks never enter the ranking.
    ``source`` finds the candidates (:mod:`fabric_query.dense_search`; default the exact product);
    every score is an exact cosine whichever finds them.
    """
    source = source or ExactSource(view, table)
    ids = view.chunks.column("chunk_id")
    return ranked([(ids[row].as_py(), score) for row, score in source.top_chunks(query_vector, eligible, depth + 32)],
                  depth)


def window_smoothed_dense(
    view: ReleaseView, query_vector: np.ndarray, eligible: set[str] | None, depth: int, weight: float,
    table: str = "chunk_vectors", source: DenseSource | None = None,
) -> ChannelResult:
    """Dense ranking of chunks by their own cosine mixed with their context window's.

    A chunk's score is ``(1 - weight) * cos(q, chunk) + weight * cos(q, window)``, the window's
    vector being the L2-normalised mean of its members' vectors (:meth:`ReleaseView.window_vectors`);
    a chunk outside any window scores its own cosine, so a one-chunk document is ranked as by
    :func:`dense_channel`. It is the passage-plus-document evidence of Callan (SIGIR 1994) for a
    dense model: a short chunk holds part of a document (the title in one chunk, the body in the
    next), and the window lets the chunks of a document that matches as a whole rank together
    (docs/ranking.md measures it on five collections). ``weight`` in [0, 1]; 0 is
    :func:`dense_channel`.

    Candidates are the ``depth + 32`` nearest eligible chunks and the members of the ``depth + 32``
    nearest eligible windows (``source``: the exact product or the release's index); every score is
    exact. Returns ``(chunk_id, score)`` best first, ties by chunk ID, at most ``depth``.
    """
    source = source or ExactSource(view, table)
    if weight <= 0.0:
        return dense_channel(view, query_vector, eligible, depth, table, source)
    q = query_vector.astype(np.float32)
    own: dict[int, float] = dict(source.top_chunks(q, eligible, depth + 32))
    window: dict[int, float] = {}
    for w in source.window_shortlist(q, eligible, depth + 32):
        for row, cos in zip(w.member_rows, w.member_vectors @ q):
            own.setdefault(int(row), float(cos))
            window[int(row)] = w.score
    window.update(source.window_cosines(q, [row for row in own if row not in window]))
    ids = view.chunks.column("chunk_id")
    return ranked([(ids[row].as_py(), (1.0 - weight) * cos + weight * window.get(row, cos))
                   for row, cos in own.items()], depth)


def vector_models(view: ReleaseView, table: str, source: DenseSource | None = None) -> frozenset[str]:
    """Model identities recorded on the view's rows of ``table`` (loaded once per view).

    A query vector is only comparable with vectors of the same model; the pipeline skips the
    channel with a named reason when these differ from its query encoder's identity.

    Raises
    ------
    fabric_query.release.ProjectionUnavailable
        The table cannot serve (unreadable, or its rows do not match the release's digest).
    """
    return (source or ExactSource(view, table)).models

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
    source: DenseSource | None = None,
) -> list[tuple[str, float, int]]:
    """Chunks nominated by the context windows nearest the query.

    The ``candidate_limit`` eligible windows with the highest cosine between ``query_vector``
    (``(384,) float32``, unit norm, from the model that wrote ``table``) and the window vector
    (the L2-normalised mean of its members' vectors: :meth:`ReleaseView.window_vectors`) are
    shortlisted, best first, ties by window ID. Each nominates up to ``per_window`` of its own
    member chunks that have a vector in ``table``, by chunk cosine (ties by chunk ID). Ineligible
    parses are masked before any ranking. ``source`` finds the windows (default: the exact product).

    Returns
    -------
    list of ``(chunk_id, chunk_cosine, window_row)``: windows in shortlist order, each window's
    nominees best first; ``window_row`` indexes ``view.context_windows``. Empty when the
    release has no context windows.
    """
    source = source or ExactSource(view, table)
    q = query_vector.astype(np.float32)
    chunk_ids = view.chunks.column("chunk_id")
    out: list[tuple[str, float, int]] = []
    for w in source.window_shortlist(q, eligible, candidate_limit):
        cos = w.member_vectors @ q
        nominees = ranked([(chunk_ids[int(r)].as_py(), float(c)) for r, c in zip(w.member_rows, cos)], per_window)
        out.extend((cid, c, w.window_row) for cid, c in nominees)
    return out


#: The RRF constant merging the direct and section routes inside the dense channel (Cormack et al.'s
#: 60): fixed, not ``query.rrf_k``, so the channel's list does not change with the fusion's constant and
#: ``fabric eval-tune`` can re-fuse one pass under every fusion.
SECTION_RRF_K = 60


def section_guided_dense(
    view: ReleaseView,
    query_vector: np.ndarray,
    eligible: set[str] | None,
    depth: int,
    table: str = "chunk_vectors",
    candidate_limit: int = 20,
    per_window: int = 2,
    rrf_k: int = SECTION_RRF_K,
    source: DenseSource | None = None,
    window_weight: float = 0.0,
) -> tuple[ChannelResult, dict[str, DenseProvenance]]:
    """One dense ranking from the direct route (:func:`window_smoothed_dense` with
    ``window_weight``; 0 is :func:`dense_channel`) and :func:`section_route`.

    The two chunk lists merge by equal-weight RRF (:func:`fabric_query.fusion.rrf`, constant
    ``rrf_k``, total tie-break) and are cut to ``depth``. Defaults are ``QueryConfig``'s (``rrf_k``:
    :data:`SECTION_RRF_K`, what a search uses); both
    routes search ``source`` (default: the exact product).

    Returns
    -------
    ranking : list of ``(chunk_id, rrf_score)``, best first, at most ``depth``.
    provenance : chunk ID → :class:`DenseProvenance`, for every chunk in ``ranking``.
    """
    source = source or ExactSource(view, table)
    direct = window_smoothed_dense(view, query_vector, eligible, depth, window_weight, table, source)
    section = section_route(view, query_vector, eligible, table, candidate_limit, per_window, source)
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

    def runs_beside(self, ctx: "QueryContext") -> bool:
        """Beside the word search when an ANN index serves: its encode (ONNX) and index search
        (Lance) run outside the GIL, so at a million chunks the query takes 42 instead of 60 ms p50
        (docs/benchmarks.md). The exact product is not: at 100,000 chunks its BLAS product and the
        encode took both cores from the word search, which then slowed more than was saved."""
        if not self.applies(ctx):
            return False
        found = channel_source(ctx, self)
        return found.source is not None and found.source.kind == "ann"

    def run(self, ctx: "QueryContext") -> ChannelRun:
        qv = query_vector(ctx, self)
        if qv.skipped is not None:
            return ChannelRun.skip(qv.skipped)
        return self.run_vector(ctx, qv)

    def run_vector(self, ctx: "QueryContext", qv: "QueryVector") -> ChannelRun:
        """The channel's ranking for ``qv`` (the query's own vector, or one moved by feedback:
        :mod:`fabric_query.channels.dense_feedback`), under the query's filters and settings."""
        try:
            return self._ranked(ctx, qv, channel_source(ctx, self))
        except DenseIndexUnusable as exc:  # the index failed while searching: the product answers
            search_failures(ctx.view)[self.table] = exc.describe()
            return self._ranked(ctx, qv, FoundSource(ExactSource(ctx.view, self.table), exc.describe()))

    def _ranked(self, ctx: "QueryContext", qv: "QueryVector", found: "FoundSource") -> ChannelRun:
        q = ctx.config.query
        section = q.section_guided_multilingual if self.multilingual else q.section_guided
        # Without context windows (the projection cannot serve: ctx.windows says why) a chunk has
        # no window to mix in, so it scores its own cosine.
        weight = 0.0 if ctx.windows.skipped is not None else (
            q.dense_window_weight_multilingual if self.multilingual else q.dense_window_weight)
        if section and ctx.windows.skipped is None:
            ranking, provenance = section_guided_dense(
                ctx.view, qv.vector, ctx.eligible, ctx.depth, self.table, q.section_candidate_limit,
                q.section_passages_per_window, SECTION_RRF_K, found.source, weight)
            return ChannelRun(ranking, provenance, dense_fallback_reason=found.fallback_reason,
                              dense_search=found.source.kind, dense_left_out=found.source.left_out,
                              dense_index_left_out=found.source.index_left_out)
        return ChannelRun(
            window_smoothed_dense(ctx.view, qv.vector, ctx.eligible, ctx.depth, weight, self.table, found.source),
            dense_fallback_reason=found.fallback_reason, dense_search=found.source.kind,
            dense_left_out=found.source.left_out, dense_index_left_out=found.source.index_left_out)

    def fusion(self, config: "QueryConfig") -> FusionMethod | None:
        # The convex weights were tuned for the e5 mix (JSQuAD dev); the MiniLM mix fuses by RRF.
        return FusionMethod(config.multilingual_fusion) if self.multilingual else None


@dataclass(frozen=True)
class FoundSource:
    """The source a dense channel searches for one query (:func:`fabric_query.dense_search.dense_source`),
    or why its table cannot serve (``skipped``; ``source`` is then ``None``)."""

    source: DenseSource | None
    fallback_reason: str | None = None
    skipped: str | None = None


def channel_source(ctx: "QueryContext", channel: DenseChannel) -> FoundSource:
    """``channel``'s candidate source for ``ctx``: chosen once per query, on first use."""
    return ctx.per_query(("dense-source", channel.name), lambda: _source(ctx, channel))


def _source(ctx: "QueryContext", channel: DenseChannel) -> FoundSource:
    try:
        source, reason = dense_source(ctx.view, channel.table, ctx.config.query.dense_search)
    except ProjectionUnavailable as exc:
        return FoundSource(None, skipped=exc.describe())
    return FoundSource(source, reason)


def model_mismatch(table: str, stored: frozenset[str], identity: str) -> str | None:
    """Why a dense channel over ``table`` is skipped when its rows hold vectors of ``stored`` (model
    identities) and its query encoder is ``identity`` (``"model-mismatch: …"``), or None when they
    agree (or the table holds no vector): a search and ``fabric status`` give the same words."""
    if not stored or stored == {identity}:
        return None
    return (f"model-mismatch: {table} holds vectors of {sorted(stored)}, the query encoder is "
            f"{identity}; re-run the projection (fabric ingest re-embeds stale partitions)")


def query_vector(ctx: "QueryContext", channel: DenseChannel) -> QueryVector:
    """``channel``'s query vector for ``ctx`` (checked and encoded once per query, on first use).

    The stored vectors' model identities are checked first (:func:`vector_models`, from the
    channel's source): the query is encoded only when the table holds no vector of another model.
    Laps ``encode_query`` (or ``encode_query_multilingual``) on the query's clock.
    """
    return ctx.per_query(("query-vector", channel.name), lambda: _encode(ctx, channel))


def _encode(ctx: "QueryContext", channel: DenseChannel) -> QueryVector:
    encoder = channel.encoder(ctx)
    found = channel_source(ctx, channel)
    if found.source is None:
        return QueryVector(None, None, found.skipped)
    try:
        stored = vector_models(ctx.view, channel.table, found.source)
    except ProjectionUnavailable as exc:
        return QueryVector(None, None, exc.describe())
    mismatch = model_mismatch(channel.table, stored, encoder.identity)
    if mismatch is not None:
        return QueryVector(None, None, mismatch)
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
    found = channel_source(ctx, channel)
    if found.source is None:
        return {}
    index = ctx.view.chunk_index
    rows = {cid: index[cid] for cid in chunk_ids if cid in index}
    try:
        by_row = found.source.cosines(qv.vector, list(rows.values()))
    except DenseIndexUnusable:  # the index failed after the channel ran: the same cosines from the table
        by_row = ExactSource(ctx.view, channel.table).cosines(qv.vector, list(rows.values()))
    return {cid: by_row[row] for cid, row in rows.items() if row in by_row}
