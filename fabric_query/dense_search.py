# Over 500 lines: the DenseSource protocol and both its sources (exact product, ANN index), read side by side because they must answer alike.
"""Where the dense channels find their candidates: the exact product over every vector of the
release, or the release's ANN index (:mod:`fabric_resources.dense_index`) with every candidate
re-scored exactly.

:func:`dense_source` chooses, per vector table, from ``query.dense_search``: ``exact`` always
takes the product; ``ann`` takes the index; ``auto`` takes it for a table of at least
``auto_min_rows`` release rows. When the index is wanted but cannot serve — none was built, its
files are gone or damaged, its rows are not the release's — the exact product answers and the
reason is returned (``EvidencePack.dense_fallback_reason``): an index is never silently
substituted, and never silently skipped.

Both sources answer the same three questions with **exact** cosines (``float32`` dot products of
the stored unit vectors with the query vector): the best chunks, the best context windows with
their members, and the cosines of given chunks. The approximate pass only chooses which rows are
scored. Eligibility is applied before ranking in both: the exact product masks ineligible rows
to ``-inf``; the index search hands Lance the eligible rows' addresses as a pre-filter
(``row_addr_allowlist`` / ``blocklist``, applied before its nearest-neighbour ranking) and every
candidate is checked against the same mask again before it is scored, so an ineligible chunk can
never be ranked whatever the index returns. When a pre-filtered search returns fewer candidates
than asked while more eligible rows exist, the eligible rows are scored exactly instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fabric_query.release import ProjectionUnavailable, ReleaseView, is_storage_failure
from fabric_resources.dense_index import (
    MANIFEST_KEY,
    MIN_INDEX_ROWS,
    DenseIndexUnusable,
    OpenDenseIndex,
    RowsDigest,
    nearest,
    normalise_rows,
    take_vectors,
    unreadable,
    window_centroids,
)
from fabric_resources.schema import DENSE_DIM
from fabric_resources.vector_digest import MANIFEST_KEY as VECTOR_DIGESTS
from fabric_resources.vector_digest import parses_not_matching, recorded_parse_digests, table_digest

if TYPE_CHECKING:
    from fabric_resources.config import DenseSearchConfig

#: Rows scored per block when eligible rows are scored exactly from the index's dataset.
_EXACT_BLOCK_ROWS = 65_536


@dataclass(frozen=True)
class WindowCandidate:
    """A shortlisted context window: its row in ``view.context_windows``, its exact cosine (the
    query against the L2-normalised mean of its members' vectors), and its members that have a
    vector (view chunk rows, reading order) with their vectors ``(m, 384) float32``."""

    window_row: int
    score: float
    member_rows: np.ndarray
    member_vectors: np.ndarray


class DenseSource(Protocol):
    """Exact cosines over one vector table of a view, found by the product or by an index."""

    #: ``"exact"`` or ``"ann"``.
    kind: str

    @property
    def models(self) -> frozenset[str]:
        """Model identities of the table's visible rows."""
        ...

    @property
    def left_out(self) -> frozenset[str]:
        """Visible parses whose rows are not those the release recorded a digest of: never ranked,
        never scored (:attr:`fabric_query.release.VectorSet.left_out`)."""
        ...

    @property
    def index_left_out(self) -> frozenset[str]:
        """The parses of :attr:`left_out` whose stored vectors may be sound: the ANN index was built
        from rows giving their digest and its own rows of them no longer do (``fabric
        dense-index-repair`` rebuilds it from the stored vectors; ``fabric repair`` reads the
        tables only, so it finds nothing to mend). Empty for the exact product."""
        ...

    def top_chunks(self, query: np.ndarray, eligible: frozenset[str] | set[str] | None, k: int
                   ) -> list[tuple[int, float]]:
        """Up to ``k`` eligible ``(view chunk row, cosine)``, unordered: the ``k`` best for the
        product, the best the index finds for ``ann``."""
        ...

    def window_shortlist(self, query: np.ndarray, eligible: frozenset[str] | set[str] | None, k: int
                         ) -> list[WindowCandidate]:
        """The ``k`` best eligible windows, best first (ties by window ID)."""
        ...

    def cosines(self, query: np.ndarray, chunk_rows: list[int]) -> dict[int, float]:
        """Cosine of each of ``chunk_rows`` that has a vector in the table."""
        ...

    def window_cosines(self, query: np.ndarray, chunk_rows: list[int]) -> dict[int, float]:
        """Cosine of the query with the context window of each of ``chunk_rows`` (the L2-normalised
        mean of the window's member vectors), for chunks in a window with a vector in the table."""
        ...

    def window_vectors(self, chunk_rows: list[int]) -> dict[int, np.ndarray]:
        """The context window's vector of each of ``chunk_rows`` (``(384,) float32``, unit norm: the
        L2-normalised mean of its members' vectors), or the chunk's own vector when it is in no window
        with a vector; chunks with neither are left out."""
        ...


def _eligible_mask(parse_ids: np.ndarray, eligible: frozenset[str] | set[str]) -> np.ndarray:
    return np.fromiter((p in eligible for p in parse_ids), dtype=bool, count=len(parse_ids))


def _ranked_windows(view: ReleaseView, scored: list[tuple[int, float]], k: int) -> list[tuple[int, float]]:
    ids = view.context_windows.column("window_id")
    return sorted(((row, s) for row, s in scored if np.isfinite(s)), key=lambda p: (-p[1], ids[p[0]].as_py()))[:k]


@dataclass
class ExactSource:
    """The product over the view's vector matrix (:meth:`ReleaseView.vector_set`) and window
    centroids (:meth:`ReleaseView.window_vectors`), loaded once per view."""

    view: ReleaseView
    table: str
    kind: str = "exact"

    @property
    def models(self) -> frozenset[str]:
        return self.view.vector_set(self.table).models

    @property
    def left_out(self) -> frozenset[str]:
        return self.view.vector_set(self.table).left_out

    @property
    def index_left_out(self) -> frozenset[str]:
        return frozenset()

    def top_chunks(self, query, eligible, k):
        vs = self.view.vector_set(self.table)
        if vs.matrix.shape[0] == 0:
            return []
        scores = vs.matrix @ query.astype(np.float32)
        if eligible is not None:
            scores = np.where(_eligible_mask(self.view.chunk_parse_ids[vs.rows], eligible), scores, -np.inf)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        return [(int(vs.rows[i]), float(scores[i])) for i in top if np.isfinite(scores[i])]

    def window_shortlist(self, query, eligible, k):
        view = self.view
        wv = view.window_vectors(self.table)
        if wv.matrix.shape[0] == 0:
            return []
        q = query.astype(np.float32)
        scores = wv.matrix @ q
        if eligible is not None:
            admitted = pc.is_in(view.context_windows.column("parse_id"), value_set=pa.array(sorted(eligible), pa.string()))
            scores = np.where(admitted.to_numpy(zero_copy_only=False)[wv.rows], scores, -np.inf)
        # A margin of 32 past the cut lets exact ties at the cut break by window ID (as top_chunks' callers do).
        pool = np.argpartition(-scores, min(k + 32, len(scores)) - 1)[: k + 32]
        slot_of = {int(wv.rows[i]): int(i) for i in pool}
        vs = view.vector_set(self.table)
        out = []
        for row, score in _ranked_windows(view, [(int(wv.rows[i]), float(scores[i])) for i in pool], k):
            i = slot_of[row]
            members = wv.members[wv.offsets[i]:wv.offsets[i + 1]]
            out.append(WindowCandidate(row, score, vs.rows[members], vs.matrix[members]))
        return out

    def cosines(self, query, chunk_rows):
        vs = self.view.vector_set(self.table)
        if not chunk_rows:
            return {}
        # One pass over the row array for all of them: the floor asks for a channel's whole depth.
        found = np.flatnonzero(np.isin(vs.rows, np.asarray(chunk_rows, dtype=vs.rows.dtype)))
        scores = vs.matrix[found] @ query.astype(np.float32)
        out: dict[int, float] = {}
        for i, score in zip(found.tolist(), scores.tolist()):
            out.setdefault(int(vs.rows[i]), float(score))
        return out

    def window_cosines(self, query, chunk_rows):
        wv = self.view.window_vectors(self.table)
        slots = {row: int(wv.slot_of_chunk[row]) for row in chunk_rows if 0 <= row < len(wv.slot_of_chunk)}
        slots = {row: slot for row, slot in slots.items() if slot >= 0}
        if not slots:
            return {}
        scores = wv.matrix[list(slots.values())] @ query.astype(np.float32)
        return {row: float(s) for row, s in zip(slots, scores)}

    def window_vectors(self, chunk_rows):
        wv = self.view.window_vectors(self.table)
        out = {row: wv.matrix[int(wv.slot_of_chunk[row])] for row in chunk_rows
               if 0 <= row < len(wv.slot_of_chunk) and wv.slot_of_chunk[row] >= 0}
        vs = self.view.vector_set(self.table)
        for row in chunk_rows:
            if row not in out:
                found = np.flatnonzero(vs.rows == row)
                if found.size:
                    out[row] = vs.matrix[int(found[0])]
        return out


@dataclass(frozen=True)
class AnnIndex:
    """A release's dense index generation, checked against the release and mapped onto a view.

    Index rows are identified by ``pos`` (their position in the generation). ``rows[pos]`` is the
    view's chunk row (``-1``: a source not visible now); ``parse_ord[pos]`` indexes ``parses``;
    ``addresses[pos]`` is the Lance row address (pre-filters); ``position[chunk_row]`` is the
    reverse map (``-1``: no vector). The ``window_*`` arrays are the same for ``windows.lance``
    (``window_rows[wpos]``: the row of ``view.context_windows``). ``left_out``: visible parses
    whose rows did not give the digest the release recorded for them; their rows and windows are
    mapped to ``-1``, as a hidden source's. ``index_left_out``: those of them activation indexed
    (not in its record's ``left_out``): built from rows giving their digest, the damage is the
    index's own (a row's bytes, a relabelled row), mended by rebuilding it.
    """

    index: OpenDenseIndex
    rows: np.ndarray
    parse_ord: np.ndarray
    parses: tuple[str, ...]
    addresses: np.ndarray
    position: np.ndarray
    models: frozenset[str]
    window_rows: np.ndarray
    window_parse_ord: np.ndarray
    window_addresses: np.ndarray
    ord_of: dict[str, int] = field(repr=False, default_factory=dict)
    #: ``rows >= 0`` and ``window_rows >= 0``, or None where every row is visible (computed once).
    visible: np.ndarray | None = None
    window_visible: np.ndarray | None = None
    left_out: frozenset[str] = frozenset()
    index_left_out: frozenset[str] = frozenset()


def load_ann_index(view: ReleaseView, table: str) -> AnnIndex:
    """Open ``table``'s index generation of ``view``'s release and check it (once per view:
    :meth:`ReleaseView.memoised`).

    Every row of ``vectors.lance`` is read once, streamed: the per-parse digests
    (:mod:`fabric_resources.vector_digest`) of its rows must give the table digest the release
    recorded (or, for a release that recorded none, the one the index was built with), and it
    may hold no parse the release does not name. Where the release recorded each parse's digest,
    a visible parse whose rows do not give it is left out (``AnnIndex.left_out``) and the rest
    serve; a hidden parse's rows are never served, so their digest is not asked. A generation
    activation built without some damaged parses (its record's ``left_out``) holds no row of them:
    those parses are left out the same way, if visible. Memory kept: ~36
    bytes per row (the maps).

    Raises
    ------
    DenseIndexUnusable
        See the class (:mod:`fabric_resources.dense_index`).
    """
    manifest = view.release.manifest
    record = (manifest.get(MANIFEST_KEY) or {}).get(table)
    rid = view.release_id
    if not isinstance(record, dict) or not record.get("generation"):
        why = record.get("skipped") if isinstance(record, dict) else None
        # Rebuilding reads the same rows and skips again: the vectors must be mended first.
        remedy = ("its vectors are not those the release recorded: `fabric repair` re-derives them (or a snapshot "
                  "restore brings them back) and the release it publishes builds the index"
                  if why == "vector-digest-mismatch" else "run `fabric dense-index-repair`")
        raise DenseIndexUnusable("dense-index-missing", f"{table}: release {rid} has no index"
                                 + (f" ({why})" if why else "") + f"; {remedy}")
    expected = (manifest.get(VECTOR_DIGESTS) or {}).get(table)
    built_from = expected
    left = record.get("left_out")
    if left and expected is not None:
        # Built without the parses whose rows did not give their digest: it must hold every other
        # parse's recorded rows (_mapped leaves out those parses as the exact product does).
        per_parse = recorded_parse_digests(manifest, table, view.release_parse_ids)
        if per_parse is None or not isinstance(left, list) or not set(left) <= set(per_parse):
            raise DenseIndexUnusable("dense-index-release-mismatch", f"{table}/{record['generation']}: leaves out "
                                     f"parses release {rid} does not record")
        built_from = table_digest({p: d for p, d in per_parse.items() if p not in set(left)}, per_parse)
    if expected is not None and record.get("digest") != built_from:
        raise DenseIndexUnusable("dense-index-release-mismatch", f"{table}/{record['generation']}: built from other "
                                 f"rows than release {rid} pins")
    opened = view.home.dense_indexes.open(table, record)
    try:
        return _mapped(view, table, opened, record, expected or record.get("digest"))
    except DenseIndexUnusable:
        raise
    except BaseException as exc:  # noqa: BLE001 - Lance panics (a BaseException) on corrupt files
        raise unreadable(f"{table}/{opened.generation}", exc) from exc


def _mapped(view: ReleaseView, table: str, opened: OpenDenseIndex, record: dict, digest: str | None) -> AnnIndex:
    gen = f"{table}/{opened.generation}"
    n = int(record["rows"])
    release_parses = view.release_parse_ids
    chunk_index, chunk_parse_ids = view.chunk_index, view.chunks.column("parse_id")
    rows = np.empty(n, dtype=np.int64)
    addresses = np.empty(n, dtype=np.uint64)
    parse_ord = np.empty(n, dtype=np.int32)
    ord_of: dict[str, int] = {}
    digests = RowsDigest(release_parses, gen)
    models: set[tuple[str, str]] = set()  # (parse, model) of visible rows
    at = 0
    for batch in opened.batches(["pos", "parse_id", "chunk_id", "model", "vector"]):
        k = batch.num_rows
        if at + k > n or not np.array_equal(batch.column("pos").to_numpy(), np.arange(at, at + k)):
            raise DenseIndexUnusable("dense-index-release-mismatch", f"{gen}: rows are not the {n} it recorded, in order")
        addresses[at:at + k] = batch.column("_rowaddr").to_numpy()
        rows[at:at + k] = chunk_index.rows_of(batch.column("chunk_id"))
        labels = batch.column("parse_id").to_pylist()
        for i, p in enumerate(labels):
            o = ord_of.get(p)
            if o is None:
                o = ord_of[p] = len(ord_of)
            parse_ord[at + i] = o
        visible = rows[at:at + k] >= 0
        # A row labelled with another parse than its chunk's (a damaged parse-ID byte) is never
        # served: parses are left out by label, and its chunk's parse may be one of them.
        at_rows = np.flatnonzero(visible)
        mislabelled = np.zeros(k, dtype=bool)
        mislabelled[at_rows] = pc.not_equal(chunk_parse_ids.take(pa.array(rows[at:at + k][at_rows])),
                                            batch.column("parse_id").take(pa.array(at_rows))).to_numpy(
                                                zero_copy_only=False)
        if mislabelled.any():
            rows[at:at + k][mislabelled] = -1
            visible &= ~mislabelled
        if visible.any():
            pairs = pa.table({"p": batch.column("parse_id"), "m": batch.column("model")}).filter(pa.array(visible))
            models.update(zip(*pairs.group_by(["p", "m"]).aggregate([]).to_pydict().values()))
        digests.add(batch)
        at += k
    if at != n:
        raise DenseIndexUnusable("dense-index-release-mismatch", f"{gen}: {at} rows, the release recorded {n}")
    found = digests.finish()
    per_parse = recorded_parse_digests(view.release.manifest, table, release_parses) if digest is not None else None
    left_out: set[str] = set()
    if per_parse is not None and found != digest:
        # As the exact product does (ReleaseView.vector_set): a damaged parse costs its own rows
        # only. A hidden parse's rows are mapped to -1 already (never ranked), so its damage is
        # not asked about: a reason would tell a reader that something hidden is there.
        left_out = parses_not_matching(digests.per_parse, per_parse, view.sources_by_parse)
        bad = np.fromiter((ord_of[p] for p in left_out if p in ord_of), dtype=np.int32)
        rows[np.isin(parse_ord, bad)] = -1
    elif digest is not None and found != digest:
        raise DenseIndexUnusable("dense-index-release-mismatch", f"{gen}: its rows' digest is not release "
                                 f"{view.release_id}'s ({table}); rebuild it (`fabric dense-index-repair`)")
    position = np.full(view.chunks.num_rows, -1, dtype=np.int64)
    seen = rows >= 0
    position[rows[seen]] = np.flatnonzero(seen)

    m = int(record.get("windows") or 0)
    window_rows = np.full(m, -1, dtype=np.int64)
    window_parse_ord = np.full(m, -1, dtype=np.int32)
    window_addresses = np.zeros(m, dtype=np.uint64)
    if m:
        try:
            windows = view.context_windows
        except ProjectionUnavailable:
            windows = None  # no section route then (ctx.windows says why); the direct route still serves
        row_of = ({w: i for i, w in enumerate(windows.column("window_id").to_pylist())} if windows is not None else {})
        wat = 0
        for batch in opened.window_batches(["pos", "parse_id", "window_id"]):
            k = batch.num_rows
            if wat + k > m:
                raise DenseIndexUnusable("dense-index-release-mismatch", f"{gen}: more windows than the {m} it recorded")
            window_addresses[wat:wat + k] = batch.column("_rowaddr").to_numpy()
            window_rows[wat:wat + k] = np.fromiter((row_of.get(w, -1) for w in batch.column("window_id").to_pylist()),
                                                   dtype=np.int64, count=k)
            window_parse_ord[wat:wat + k] = np.fromiter((ord_of.get(p, -1) for p in batch.column("parse_id").to_pylist()),
                                                        dtype=np.int32, count=k)
            wat += k
        if left_out:
            window_rows[np.isin(window_parse_ord, bad)] = -1
    visible, window_visible = rows >= 0, window_rows >= 0
    return AnnIndex(index=opened, rows=rows, parse_ord=parse_ord, parses=tuple(ord_of), addresses=addresses,
                    position=position, models=frozenset(m for p, m in models if p not in left_out),
                    window_rows=window_rows, window_parse_ord=window_parse_ord, window_addresses=window_addresses,
                    ord_of=ord_of, visible=None if visible.all() else visible,
                    window_visible=None if window_visible.all() else window_visible, left_out=frozenset(left_out),
                    index_left_out=frozenset(left_out - set(record.get("left_out") or ())))


def _allowed(ann: AnnIndex, ords: np.ndarray, visible: np.ndarray | None, eligible) -> np.ndarray | None:
    """Boolean mask of the rows a query may rank (visible and of an eligible parse); ``None``: all."""
    if eligible is None:
        return visible
    wanted = np.fromiter((ann.ord_of[p] for p in eligible if p in ann.ord_of), dtype=np.int32)
    mask = np.isin(ords, wanted)
    if visible is not None:
        mask &= visible
    return None if mask.all() else mask


def probes(nprobes: int, partitions: int) -> int:
    """IVF partitions to search: ``nprobes``, or with 0 a quarter of ``partitions`` (rounded up).

    A quarter was where recall@10 reached 1.0 on the 1M-row simulation (MiniLM Cranfield questions
    against passages: question vectors lie apart from passage vectors, so their neighbours spread
    over more partitions than a passage's; docs/benchmarks.md, "Dense search at a million chunks").
    """
    return nprobes if nprobes > 0 else max(1, -(-partitions // 4))


def _prefilter(mask: np.ndarray | None, addresses: np.ndarray) -> tuple[bytes | None, bytes | None]:
    """(allowlist, blocklist) for Lance: the smaller of the two sets, serialised."""
    if mask is None:
        return None, None
    from lance.dataset import serialize_row_addrs

    n_ok = int(mask.sum())
    if n_ok <= len(mask) - n_ok:
        return serialize_row_addrs(addresses[mask].tolist()), None
    return None, serialize_row_addrs(addresses[~mask].tolist())


def _guarded(table: str, generation: str, run):
    """``run()``, with a failure of the index's storage while searching raised as
    :class:`DenseIndexUnusable` (``dense-index-unreadable``): the channel then answers exactly."""
    try:
        return run()
    except DenseIndexUnusable:
        raise
    except BaseException as exc:  # noqa: BLE001 - filtered: only storage failures are converted
        if not is_storage_failure(exc):
            raise
        raise unreadable(f"{table}/{generation}: while searching", exc) from exc


def search_failures(view: ReleaseView) -> dict[str, str]:
    """Vector table → why its index failed while a query searched it (then every later query of the
    view answers exactly, with that reason)."""
    return view.memoised("ann-search-failures", dict)


@dataclass
class AnnSource:
    """Candidates from the release's ANN index, re-scored exactly (module docstring).

    Raises (from its methods)
    ------
    DenseIndexUnusable
        ``dense-index-unreadable`` when Lance fails while searching or reading the index.
    """

    view: ReleaseView
    table: str
    ann: AnnIndex
    config: "DenseSearchConfig"
    kind: str = "ann"

    @property
    def models(self) -> frozenset[str]:
        return self.ann.models

    @property
    def left_out(self) -> frozenset[str]:
        return self.ann.left_out

    @property
    def index_left_out(self) -> frozenset[str]:
        return self.ann.index_left_out

    def _search(self, ds, q: np.ndarray, k: int, mask: np.ndarray | None, addresses: np.ndarray, partitions: int
                ) -> tuple[np.ndarray, np.ndarray]:
        """(pos, stored vectors) of at most ``k`` rows of ``ds`` (an index of ``partitions`` IVF
        partitions) allowed by ``mask``; exact over the allowed rows when the pre-filtered search
        falls short."""
        n_allowed = len(addresses) if mask is None else int(mask.sum())
        k = min(k, n_allowed)
        if k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros((0, DENSE_DIM), dtype=np.float32)
        cfg = self.config
        allow, block = _prefilter(mask, addresses)
        pos, vectors = _guarded(self.table, self.ann.index.generation, lambda: nearest(
            ds, q, k, nprobes=probes(cfg.nprobes, partitions), refine_factor=cfg.refine_factor, ef=cfg.hnsw_ef,
            allow=allow, block=block))
        if mask is not None:  # never rank a row the filters exclude, whatever the index returned
            keep = mask[pos]
            pos, vectors = pos[keep], vectors[keep]
        if len(pos) < k:
            return self._exact_rows(ds, q, k, np.flatnonzero(mask) if mask is not None else np.arange(n_allowed))
        return pos, vectors

    def _take(self, ds, positions: np.ndarray) -> np.ndarray:
        return _guarded(self.table, self.ann.index.generation, lambda: take_vectors(ds, positions))

    def _exact_rows(self, ds, q: np.ndarray, k: int, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        best_pos = np.zeros(0, dtype=np.int64)
        best_vec = np.zeros((0, DENSE_DIM), dtype=np.float32)
        for b in range(0, len(candidates), _EXACT_BLOCK_ROWS):
            block = candidates[b:b + _EXACT_BLOCK_ROWS]
            pos = np.concatenate([best_pos, block])
            vec = np.concatenate([best_vec, self._take(ds, block)])
            s = vec @ q
            top = np.argpartition(-s, min(k, len(s)) - 1)[:k] if len(s) > k else np.arange(len(s))
            best_pos, best_vec = pos[top], vec[top]
        return best_pos, best_vec

    def top_chunks(self, query, eligible, k):
        ann = self.ann
        q = query.astype(np.float32)
        mask = _allowed(ann, ann.parse_ord, ann.visible, eligible)
        pos, vectors = self._search(ann.index.vectors, q, max(k, self.config.candidates), mask, ann.addresses,
                                    ann.index.meta["spec"]["num_partitions"])
        scores = vectors @ q
        return [(int(ann.rows[p]), float(s)) for p, s in zip(pos, scores) if ann.rows[p] >= 0]

    def window_shortlist(self, query, eligible, k):
        ann, view = self.ann, self.view
        if ann.index.windows is None or not len(ann.window_rows):
            return []
        q = query.astype(np.float32)
        mask = _allowed(ann, ann.window_parse_ord, ann.window_visible, eligible)
        wpos, _ = self._search(ann.index.windows, q, k + 32, mask, ann.window_addresses,
                               (ann.index.meta.get("window_spec") or {}).get("num_partitions", 1))
        window_rows = [int(ann.window_rows[p]) for p in wpos if ann.window_rows[p] >= 0]
        scores, member_pos_arr, vectors, starts = self._rescored_windows(window_rows, q)
        slot = {row: i for i, row in enumerate(window_rows)}
        out = []
        for row, score in _ranked_windows(view, [(r, float(s)) for r, s in zip(window_rows, scores)], k):
            i = slot[row]
            members = member_pos_arr[starts[i]:starts[i + 1]]
            out.append(WindowCandidate(row, score, ann.rows[members], vectors[starts[i]:starts[i + 1]]))
        return out

    def _rescored_windows(self, window_rows: list[int], q: np.ndarray
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Exact cosines of ``window_rows`` (rows of ``view.context_windows``): each centroid again
        from its members' stored vectors, with the function the exact path uses (a stored centroid
        only chooses candidates). Returns the scores (``-inf``: no member vector), the members'
        index positions and vectors in reading order, and each window's start among them."""
        member_pos_arr, vectors, starts, good, unit = self._exact_centroids(window_rows)
        scores = np.full(len(window_rows), -np.inf, dtype=np.float32)
        scores[good] = unit @ q
        return scores, member_pos_arr, vectors, starts

    def _exact_centroids(self, window_rows: list[int]
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The members' index positions and vectors (reading order), each window's start among them,
        and the unit centroids of the windows that have a member vector (``good`` marks them)."""
        ann, view = self.ann, self.view
        chunk_ids = view.context_windows.column("chunk_ids")
        members = [chunk_ids[row].as_py() for row in window_rows]
        rows = view.chunk_index.rows_of([c for m in members for c in m])
        positions = np.where(rows >= 0, ann.position[np.maximum(rows, 0)], -1)
        owner = np.repeat(np.arange(len(members)), [len(m) for m in members])
        kept = positions >= 0  # members with a vector in this table, in reading order
        member_pos_arr, owner = positions[kept], owner[kept]
        counts_arr = np.bincount(owner, minlength=len(members)).astype(np.int64)
        vectors = self._take(ann.index.vectors, member_pos_arr)
        good, unit = normalise_rows(window_centroids(vectors, np.arange(len(member_pos_arr)), counts_arr))
        starts = np.concatenate([[0], np.cumsum(counts_arr)]).astype(np.int64)
        return member_pos_arr, vectors, starts, good, unit

    def window_cosines(self, query, chunk_rows):
        window_of_row = self.view.context_window_of.window_of_row
        of = {row: int(window_of_row[row]) for row in chunk_rows if 0 <= row < len(window_of_row)}
        window_rows = sorted({w for w in of.values() if w >= 0})
        if not window_rows:
            return {}
        scores, *_ = self._rescored_windows(window_rows, query.astype(np.float32))
        by_window = {w: float(s) for w, s in zip(window_rows, scores) if np.isfinite(s)}
        return {row: by_window[w] for row, w in of.items() if w in by_window}

    def window_vectors(self, chunk_rows):
        window_of_row = self.view.context_window_of.window_of_row
        of = {row: int(window_of_row[row]) for row in chunk_rows if 0 <= row < len(window_of_row)}
        window_rows = sorted({w for w in of.values() if w >= 0})
        centroid: dict[int, np.ndarray] = {}
        if window_rows:
            *_, good, unit = self._exact_centroids(window_rows)
            centroid = dict(zip(np.asarray(window_rows)[good].tolist(), unit))
        out = {row: centroid[w] for row, w in of.items() if w in centroid}
        rest = [row for row in chunk_rows if row not in out and 0 <= row < len(self.ann.position)
                and self.ann.position[row] >= 0]
        if rest:
            vectors = self._take(self.ann.index.vectors, np.asarray([self.ann.position[r] for r in rest], dtype=np.int64))
            out.update(zip(rest, vectors))
        return out

    def cosines(self, query, chunk_rows):
        ann = self.ann
        pos = [(row, int(ann.position[row])) for row in chunk_rows if 0 <= row < len(ann.position)]
        pos = [(row, p) for row, p in pos if p >= 0]
        if not pos:
            return {}
        vectors = self._take(ann.index.vectors, np.asarray([p for _, p in pos], dtype=np.int64))
        scores = vectors @ query.astype(np.float32)
        return {row: float(s) for (row, _), s in zip(pos, scores)}


def wants_index(view: ReleaseView, table: str, config: "DenseSearchConfig") -> bool:
    """Whether ``config`` asks for ``table``'s index on ``view``'s release (``auto``: by the row
    count the release recorded for it, else by the table's row count at the pinned version).

    A restricted view (its release names sources withheld or deleted since) decides by its visible
    rows, as the activation would have for a release without those sources (an index from
    ``MIN_INDEX_ROWS`` rows, with ``auto`` from ``auto_min_rows``): decided by the release's rows,
    rows of a withheld document turned ``dense_search`` from ``exact`` to ``ann``, which told a
    client that something had been withheld since the release (trial 23c)."""
    if config.mode == "exact":
        return False
    if view.restricted:
        rows = view.memoised(("visible-rows", table), lambda: view.read_active(table, ["parse_id"]).num_rows,
                             (ProjectionUnavailable,))
        return rows >= MIN_INDEX_ROWS and (config.mode == "ann" or rows >= config.auto_min_rows)
    record = (view.release.manifest.get(MANIFEST_KEY) or {}).get(table)
    if isinstance(record, dict) and record.get("skipped") == "too-few-rows":
        return False  # nothing to index: the product over so few rows costs microseconds
    if config.mode == "ann":
        return True
    rows = record.get("rows") if isinstance(record, dict) else None
    if not isinstance(rows, int):
        rows = view.table_rows(table)
    return rows >= config.auto_min_rows


def dense_source(view: ReleaseView, table: str, config: "DenseSearchConfig") -> tuple[DenseSource, str | None]:
    """The source the dense channel over ``table`` searches, and why the exact product answers in
    place of a wanted index (``"<reason>: <detail>"``; ``None`` when nothing was substituted).

    Raises
    ------
    ProjectionUnavailable
        The table's row count cannot be read (the channel is skipped, as for any unreadable table).
    """
    if not wants_index(view, table, config):
        return ExactSource(view, table), None
    failed = search_failures(view).get(table)
    if failed is not None:
        return ExactSource(view, table), failed
    try:
        ann = view.memoised(("ann-index", table), lambda: load_ann_index(view, table), (DenseIndexUnusable,))
    except DenseIndexUnusable as exc:
        return ExactSource(view, table), exc.describe()
    return AnnSource(view, table, ann, config), None
