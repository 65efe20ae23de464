# Over 500 lines: one ReleaseView whose lazily read projections share its lock, caches and failure memo.
"""A pinned release, loaded for querying.

``ReleaseView`` holds everything one release names — its manifest, the chunk
rows and vectors of its active parses at the table versions it recorded, and
its lexical index generation — so that a query which pinned it keeps one
consistent view however many activations happen meanwhile. Views are cached
per (home, release, hidden sources) in the process.

Today's visibility (:mod:`fabric_query.visibility`) applies to every release: a view holds only
the release's sources that are visible now. A release that names a source deleted or withheld
since (``hidden``) is *restricted*: its rows are read for its visible parses only, and its word
and substring channels run on an index built in memory from the release's lexical documents of
those parses, so BM25 document frequencies, counts and lengths are those of the visible
documents alone (``fallback_reason`` ``visible-sources-only``); the release's own index
generation, which counts the hidden documents, is never searched (a view restricted by withholding
alone opens it to learn whether it can serve, and scans when it cannot, as a home that never held
the withheld source would). The answer names that restriction
only when a source is hidden because it is deleted now (``gone``): a source withheld since moves
nothing an answer shows, not even the reason (a client would learn that something was withheld
after the release was published).

A table data file that cannot be read holding rows of none of the view's parses (a document
withheld since the release, written by its own ingest) is read around
(:mod:`fabric_resources.fragment_damage`): the view answers as in a home that never had it.
Otherwise a projection that cannot be read (a missing or corrupt Lance file, vector rows whose digest is
not the one the release recorded, an index whose documents are not the release's chunks) raises
:class:`ProjectionUnavailable` with a stable reason; the pipeline skips that channel and says
why. Where the release recorded each parse's vector digest, a parse whose rows do not give it is
left out of the vectors instead (:attr:`VectorSet.left_out`) and the channel serves the others.
Only unreadable chunk rows stop a query (:class:`~fabric_query.errors.ReleaseUnreadableError`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tantivy

from fabric_query.errors import FabricQueryError, ReleaseUnreadableError
from fabric_query.visibility import Visibility, current_visibility
from fabric_resources.catalog import Release
from fabric_resources.home import FabricHome
from fabric_resources.identity import text_hash
from fabric_resources.lexical_index import (
    SUBSTRING_TOKENIZER,
    WORD_TOKENIZER,
    IndexUnusable,
    OpenIndex,
    add_to_writer,
    index_documents,
    index_schema,
    substring_analyzer,
    word_analyzer,
)
from fabric_query.memory import settle_after_load
from fabric_resources.dense_index import normalise_rows, window_centroids
from fabric_resources.fragment_damage import unseen_check
from fabric_resources.schema import DENSE_DIM, SCHEMA_VERSION
from fabric_resources.storage_errors import storage_error_text
from fabric_resources.vector_digest import (
    MANIFEST_KEY,
    parse_digests,
    parses_not_matching,
    recorded_parse_digests,
    table_digest,
)

T = TypeVar("T")

#: ``fallback_reason`` of a restricted view (see the module docstring).
VISIBLE_SOURCES_ONLY = "visible-sources-only"
#: Tolerance on ``| ||v|| - 1 |`` when vectors have no recorded digest (as the write-side gate).
NORM_TOLERANCE = 1e-3

#: What a ReleaseUnreadableError over unreadable chunk rows tells the user to do. The remedy depends
#: on the damage (a data file cut short or lost: `fabric repair`; an unreadable index: `fabric
#: repair`; other cases: a snapshot restore), which `fabric status` tells apart; a re-ingest does
#: not repair a damaged file (ingests writing the table fail until then).
UNREADABLE_CHUNKS_REMEDY = ("`fabric status` names the damage and what repairs it "
                            "(`fabric repair` or a snapshot restore)")


class ProjectionUnavailable(Exception):
    """A table of the pinned release cannot serve.

    ``reason`` is stable: ``table-unreadable`` (Lance could not read it), ``table-mismatch``
    (its rows name chunks the release does not hold), ``vector-digest-mismatch`` (the rows are
    not those whose table digest the release recorded; a release with per-parse digests leaves
    out the damaged parses instead), ``vector-values-invalid`` (no digest recorded,
    and a vector is not finite or not unit norm).
    """

    def __init__(self, table: str, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {table}: {detail}")
        self.table = table
        self.reason = reason
        self.detail = detail

    def describe(self) -> str:
        return f"{self.reason}: {self.table}: {self.detail}"


def is_storage_failure(exc: BaseException) -> bool:
    """True for what Lance, Arrow and tantivy raise on missing or corrupt files: ``OSError``,
    ``ValueError`` (``ArrowInvalid`` among them), ``RuntimeError``, any ``ArrowException``, or a Rust
    panic (``PanicException``, a ``BaseException``). Other exceptions are bugs and propagate."""
    return (isinstance(exc, (OSError, ValueError, RuntimeError, pa.ArrowException))
            or type(exc).__name__ == "PanicException")


def open_generation(home: FabricHome, gen: str | None) -> tuple[OpenIndex, int, int] | IndexUnusable:
    """The lexical index generation ``gen`` opened, with its live documents and its chunk documents
    counted (a term query: a corrupt term dictionary fails here, ~1 ms), or why it cannot serve
    (``index-missing``, ``index-unreadable``, or what :meth:`LexicalIndex.open` raised)."""
    if not gen:
        return IndexUnusable("index-missing", "release names no lexical generation")
    try:
        index = home.lexical.open(gen)
    except IndexUnusable as exc:
        return exc
    try:
        return index, index.searcher.num_docs, index.chunk_documents
    except BaseException as exc:  # noqa: BLE001 - a corrupt segment panics in Rust
        if not is_storage_failure(exc):
            raise
        return IndexUnusable("index-unreadable", f"{gen}: {type(exc).__name__}: {exc}")


def guarded_read(table: str, read: Callable[[], T]) -> T:
    """``read()``, with a failure of the storage below it (:func:`is_storage_failure`) raised as
    :class:`ProjectionUnavailable`, so the query side answers from the other projections instead
    of crashing."""
    try:
        return read()
    except (ProjectionUnavailable, FabricQueryError):
        raise
    except BaseException as exc:  # noqa: BLE001 - filtered: only storage failures are converted
        if not is_storage_failure(exc):
            raise
        raise ProjectionUnavailable(table, "table-unreadable", storage_error_text(exc)) from exc


@dataclass(frozen=True)
class VectorSet:
    """Vectors of one table: ``matrix[i]`` (``(n, 384) float32``) belongs to chunk row ``rows[i]``.

    ``models``: the model identities recorded on the visible rows of the table. ``verified``: the
    rows matched the digest the release recorded (False for releases written before vector digests
    existed). ``left_out``: visible parses whose rows did not give the digest the release recorded
    for them (only where it recorded one per parse): none of their rows is in ``matrix``.
    """

    rows: np.ndarray
    matrix: np.ndarray
    models: frozenset[str] = frozenset()
    verified: bool = False
    left_out: frozenset[str] = frozenset()


@dataclass(frozen=True)
class WindowVectors:
    """Context-window vectors over one chunk-vector table.

    ``matrix[i]`` (``(m, 384) float32``, unit norm) is the L2-normalised mean of the vectors of
    window row ``rows[i]``'s member chunks (rows of ``ReleaseView.context_windows``); those members
    are ``VectorSet`` rows ``members[offsets[i]:offsets[i + 1]]`` of the same table, in reading
    order. Windows with no member in the table have no row. ``slot_of_chunk[r]`` is the index into
    ``matrix`` of view chunk row ``r``'s window (``-1``: no vector, or no window).
    """

    rows: np.ndarray
    matrix: np.ndarray
    offsets: np.ndarray
    members: np.ndarray
    slot_of_chunk: np.ndarray


def citing_order(item: tuple[str, Mapping[str, Any]]) -> tuple[bool, str]:
    """Sort key of a release's ``(source key, entry)``: sources that still hold the parse's bytes
    first, then by key. Of two files with the same text, one since overwritten (its entry has
    ``newer``), a citation names the one that still holds it."""
    key, meta = item
    return "newer" in meta, key


@dataclass
class ReleaseView:
    """One release as a query may see it now: its sources minus ``hidden`` (see the module docstring)."""

    home: FabricHome
    release: Release
    #: Source keys the release names that are not visible now (deleted, withheld or unknown).
    hidden: frozenset[str] = frozenset()
    #: Of ``hidden``, those not withheld now (deleted, or in another hidden state): the only
    #: restriction an answer names (:attr:`visible_sources_only`).
    gone: frozenset[str] = frozenset()
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _vector_sets: dict[str, "VectorSet"] = field(default_factory=dict, repr=False)
    _chunk_rows: OrderedDict[str, dict] = field(default_factory=OrderedDict, repr=False)
    _window_vectors: dict[str, "WindowVectors"] = field(default_factory=dict, repr=False)
    _failures: dict[str, ProjectionUnavailable] = field(default_factory=dict, repr=False)
    _memo: dict[object, object] = field(default_factory=dict, repr=False)
    _memo_lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    def memoised(self, key: object, compute: Callable[[], T], remember: tuple[type[BaseException], ...] = ()) -> T:
        """``compute()`` once per view for ``key`` (other modules' per-release state, such as the
        dense index: :mod:`fabric_query.dense_search`); an exception of a type in ``remember`` is
        remembered and raised again for ``key`` instead of computing again. One computation at a
        time per view (re-entrant: a computation may ask for another key)."""
        with self._memo_lock:
            if key not in self._memo:
                try:
                    self._memo[key] = ("ok", compute())
                except remember as exc:
                    self._memo[key] = ("failed", exc)
            kind, value = self._memo[key]
        if kind == "failed":
            raise value  # type: ignore[misc]
        return value  # type: ignore[return-value]

    def holds_vectors(self, table: str) -> bool:
        """Whether this view already read ``table``'s vectors or its ANN index (or remembers that
        it could not): it answers from what the files held then, not from what they hold now."""
        with self._lock:
            if table in self._vector_sets or table in self._failures:
                return True
        with self._memo_lock:
            return ("ann-index", table) in self._memo

    def table_rows(self, table: str) -> int:
        """Rows of ``table`` at the release's version, every parse's (Lance's manifest count: no
        data read); 0 when the release names no version of it."""
        version = self._table_version(table)
        if version is None:
            return 0
        return self.memoised(("table-rows", table), lambda: guarded_read(
            table, lambda: self.home.tables.count_rows(table, version)), (ProjectionUnavailable,))

    def _settle(self, rows: int) -> None:
        # Small views gain nothing from a freeze, and its one collection would cost more than they do.
        settle_after_load(self.home.config.query.gc_freeze and rows >= SETTLE_MIN_ROWS)

    @property
    def release_id(self) -> int:
        return self.release.release_id

    @property
    def restricted(self) -> bool:
        """True when the release names sources that are not visible now."""
        return bool(self.hidden)

    @property
    def visible_sources_only(self) -> bool:
        """Whether an answer says it was read from the release's visible sources only
        (``fallback_reason`` ``visible-sources-only``): the release names a source deleted since.
        A view restricted only by withheld sources says nothing: its answers equal those of a home
        that never held them, reasons included."""
        return bool(self.gone)

    @property
    def cache_key(self) -> tuple[str, int, frozenset[str]]:
        """Identity of this view for per-view caches elsewhere (graph, MaxSim maps)."""
        return (str(self.home.root), self.release_id, self.hidden)

    @cached_property
    def sources(self) -> dict[str, dict]:
        """Source key → manifest entry, for the release's sources that are visible now."""
        named = self.release.manifest["sources"]
        return named if not self.hidden else {k: v for k, v in named.items() if k not in self.hidden}

    @cached_property
    def sources_by_parse(self) -> dict[str, list[str]]:
        """Parse ID → the visible source keys holding it, in :func:`citing_order` (the first is
        the one a citation names)."""
        out: dict[str, list[str]] = {}
        for key, meta in sorted(self.sources.items(), key=citing_order):
            out.setdefault(meta["parse_id"], []).append(key)
        return out

    @cached_property
    def release_parse_ids(self) -> frozenset[str]:
        """Every parse the release names, visible or not (what its recorded digests cover)."""
        return frozenset(meta["parse_id"] for meta in self.release.manifest["sources"].values())

    def _table_version(self, table: str) -> int | None:
        return self.release.manifest["tables"].get(table)

    def read_active(self, table: str, columns: list[str], *, with_offsets: bool = False) -> pa.Table:
        """Rows of ``table`` of the view's parses at the release's version of it (``with_offsets``:
        and their ``_offset``, :meth:`fabric_resources.tables.TableStore.read_active_batches`).

        Raises
        ------
        ProjectionUnavailable
            ``table-unreadable`` when Lance cannot read it (the failure is remembered by the view).
        """
        failed = self._failures.get(table)
        if failed is not None:
            raise failed
        try:
            return guarded_read(table, lambda: self.home.tables.read_active(
                table, self._table_version(table), self.sources_by_parse, columns, with_offsets=with_offsets,
                unreadable_ok=unseen_check(self.home, table, self.sources_by_parse)))
        except ProjectionUnavailable as exc:
            self._failures[table] = exc
            raise

    @cached_property
    def chunks(self) -> pa.Table:
        """Chunk rows of the active parses, sorted by (parse_id, ordinal): ``parse_id``, ``chunk_id``,
        ``ordinal``, ``section_path``, ``token_count``, ``_offset`` (where the row is in the pinned
        table version), and ``text`` and ``fragments`` when :attr:`text_in_memory`. Otherwise the
        text stays on disk: :meth:`chunk` / :meth:`chunk_rows` read it for the chunks a query
        cites, :attr:`chunk_texts` for a scan.

        Raises
        ------
        ReleaseUnreadableError
            The chunk rows cannot be read: no channel could cite anything.
        """
        columns = [*VIEW_CHUNK_COLUMNS, *(("text", "fragments", "text_hash") if self.text_in_memory else ())]
        try:
            t = self.read_active("chunks", columns, with_offsets=True)
        except ProjectionUnavailable as exc:
            raise ReleaseUnreadableError(
                f"release {self.release_id}: {exc.describe()}; {UNREADABLE_CHUNKS_REMEDY}") from exc
        t = t.sort_by([("parse_id", "ascending"), ("ordinal", "ascending")])
        self._settle(t.num_rows)
        return t

    @cached_property
    def text_in_memory(self) -> bool:
        """Whether :attr:`chunks` holds the text: the pinned chunks table has at most
        ``query.text_in_memory_max_rows`` rows (every parse's; Lance's count, no data read). At 100k
        chunks the text is 61 MB of Arrow data, at a million ten times that."""
        try:
            rows = self.table_rows("chunks")
        except ProjectionUnavailable as exc:
            raise ReleaseUnreadableError(
                f"release {self.release_id}: {exc.describe()}; {UNREADABLE_CHUNKS_REMEDY}") from exc
        return rows <= self.home.config.query.text_in_memory_max_rows

    def _chunk_column(self, name: str) -> list:
        """Column ``name`` of the chunks table for every row of :attr:`chunks`, in its order (read
        whole: for the paths that need every chunk, the scan fallback and a few filters)."""
        if name in self.chunks.column_names:
            return self.chunks.column(name).to_pylist()
        try:
            t = self.read_active("chunks", ["chunk_id", name])
        except ProjectionUnavailable as exc:
            raise ReleaseUnreadableError(
                f"release {self.release_id}: {exc.describe()}; {UNREADABLE_CHUNKS_REMEDY}") from exc
        out: list = [None] * self.chunks.num_rows
        for row, value in zip(self.chunk_index.rows_of(t.column("chunk_id")).tolist(), t.column(name).to_pylist()):
            out[row] = value
        return out

    @cached_property
    def chunk_texts(self) -> list[str]:
        """Every chunk's text, in :attr:`chunks` order (read on first use: the scan fallback)."""
        return self._chunk_column("text")

    @cached_property
    def chunks_altered(self) -> frozenset[str]:
        """Every chunk whose text (:attr:`chunk_texts`) does not hash to its recorded ``text_hash``
        (read and hashed whole on first use, ~2 µs a chunk: the scan fallback, which reads every
        chunk's text anyway)."""
        hashes = self._chunk_column("text_hash")
        return frozenset(cid for cid, text, recorded in zip(self.chunks.column("chunk_id").to_pylist(),
                                                            self.chunk_texts, hashes) if text_hash(text) != recorded)

    @cached_property
    def chunk_fragments(self) -> list[list[dict]]:
        """Every chunk's fragments, in :attr:`chunks` order (read on first use: the graph channel,
        the ``confidence:`` filter)."""
        return self._chunk_column("fragments")

    @cached_property
    def chunk_index(self) -> "ChunkIndex":
        """chunk ID → row of :attr:`chunks` (a dict while :attr:`text_in_memory`, else a sorted array)."""
        index = ChunkIndex(self.chunks.column("chunk_id"), compact=not self.text_in_memory)
        self._settle(len(index))
        return index

    @cached_property
    def chunk_parse_ids(self) -> np.ndarray:
        return np.array(self.chunks.column("parse_id").to_pylist(), dtype=object)

    def vector_set(self, table: str) -> "VectorSet":
        """The release's vectors in ``table`` (``chunk_vectors`` or ``chunk_vectors_multilingual``).

        Where the release recorded each parse's digest (:mod:`fabric_resources.vector_digest`),
        the rows of the visible parses alone are read, and a parse whose rows do not give its
        digest is left out (``VectorSet.left_out``): the others serve, and a parse the view does
        not show is never read, so its damage moves nothing. Where it recorded a table digest only
        (older releases), the rows of every parse the release names are read and checked against
        it, and only those of visible chunks are kept. A release written before digests existed is
        checked for finite, unit-norm values only.

        Raises
        ------
        ProjectionUnavailable
            ``table-unreadable``, ``vector-digest-mismatch`` (table digest only) or
            ``vector-values-invalid``; the failure is remembered, so the table is not read again
            for this view.
        """
        with self._lock:
            cached = self._vector_sets.get(table)
            failed = self._failures.get(table)
        if cached is not None:
            return cached
        if failed is not None:
            raise failed
        try:
            vs = guarded_read(table, lambda: self._load_vectors(table))
        except ProjectionUnavailable as exc:
            with self._lock:
                self._failures[table] = exc
            raise
        with self._lock:
            self._vector_sets[table] = vs
        return vs

    def _load_vectors(self, table: str) -> "VectorSet":
        # Streamed batch by batch into the one matrix the view keeps: at 100k chunks, reading the
        # table whole and copying it out held 2-3x the matrix's 154 MB after the read.
        version = self._table_version(table)
        n = self.home.tables.count_rows(table, version) if version is not None else 0
        matrix = np.empty((n, DENSE_DIM), dtype=np.float32)
        rows = np.empty(n, dtype=np.int64)
        parse_ids: list[str] = []
        chunk_ids: list[str] = []
        models: list[str] = []
        at = 0
        per_parse = recorded_parse_digests(self.release.manifest, table, self.release_parse_ids)
        wanted = self.release_parse_ids if per_parse is None else frozenset(self.sources_by_parse)
        for batch in self.home.tables.read_active_batches(table, version, wanted,
                                                          ["parse_id", "chunk_id", "vector", "model"],
                                                          unreadable_ok=unseen_check(self.home, table, wanted)):
            k = batch.num_rows
            if at + k > n:
                raise ProjectionUnavailable(table, "table-mismatch", f"more rows than the {n} its version holds")
            ids = batch.column("chunk_id").to_pylist()
            rows[at:at + k] = self.chunk_index.rows_of(batch.column("chunk_id"))
            matrix[at:at + k] = batch.column("vector").flatten().to_numpy(zero_copy_only=False).reshape(-1, DENSE_DIM)
            parse_ids += batch.column("parse_id").to_pylist()
            chunk_ids += ids
            models += batch.column("model").to_pylist()
            at += k
        expected = (self.release.manifest.get(MANIFEST_KEY) or {}).get(table)
        left_out: set[str] = set()
        if per_parse is not None:
            # Each visible parse against its own digest: a damaged parse costs its own dense ranking only.
            left_out = parses_not_matching(parse_digests(parse_ids, chunk_ids, models, matrix[:at]), per_parse, wanted)
        elif expected is not None:
            found = table_digest(parse_digests(parse_ids, chunk_ids, models, matrix[:at]), self.release_parse_ids)
            if found != expected:
                raise ProjectionUnavailable(
                    table, "vector-digest-mismatch",
                    f"its {at} rows of release {self.release_id}'s parses do not match the digest the release "
                    "recorded (altered, damaged, deleted or added after they were written): `fabric repair` "
                    "re-derives rows deleted or added, a snapshot restore brings back altered ones")
        keep = rows[:at] >= 0
        if left_out:
            keep &= ~pc.is_in(pa.array(parse_ids, pa.string()), value_set=pa.array(sorted(left_out), pa.string())
                              ).to_numpy(zero_copy_only=False)
        kept_at = np.flatnonzero(keep)
        k = len(kept_at)
        if expected is None and k:
            bad = 0
            for b in range(0, k, 8192):
                block = matrix[kept_at[b:b + 8192]]
                norms = np.linalg.norm(np.where(np.isfinite(block), block, 0), axis=1)
                bad += int((~np.isfinite(block).all(axis=1) | (np.abs(norms - 1.0) > NORM_TOLERANCE)).sum())
            if bad:
                raise ProjectionUnavailable(table, "vector-values-invalid",
                                            f"{bad} vectors are not finite or not unit norm (no digest recorded)")
        visible_models = frozenset(pc.unique(pa.array(models, pa.string()).filter(pa.array(keep))).to_pylist())
        if k < at:
            # Compact in place, block by block: a kept row only moves towards the front, past rows
            # already copied, so no second copy of the matrix is ever held.
            for b in range(0, k, 8192):
                src = kept_at[b:b + 8192]
                matrix[b:b + len(src)] = matrix[src]
                rows[b:b + len(src)] = rows[src]
        matrix.resize((k, DENSE_DIM), refcheck=False)
        rows.resize(k, refcheck=False)
        self._settle(k)
        return VectorSet(rows=rows, matrix=matrix, models=visible_models, verified=expected is not None,
                         left_out=frozenset(left_out))

    @cached_property
    def context_windows(self) -> pa.Table:
        """Context-window rows of the active parses (``parse_id``, ``window_id``, ``ordinal``,
        ``chunk_ids``, ``section_path``), sorted by (parse_id, ordinal); empty when the manifest
        names no ``context_windows`` version.

        Raises
        ------
        ProjectionUnavailable
            The table cannot be read.
        """
        t = self.read_active("context_windows", ["parse_id", "window_id", "ordinal", "chunk_ids", "section_path"])
        t = t.sort_by([("parse_id", "ascending"), ("ordinal", "ascending")])
        self._settle(t.num_rows)
        return t

    @cached_property
    def context_window_of(self) -> "WindowOf":
        """chunk_id → (its context window's ID, that window's chunk IDs in reading order): a
        read-only mapping over :attr:`context_windows` (an array of window rows per chunk row, not a
        dict of tuples: at a million chunks that dict held ~250 MB).

        Raises
        ------
        ProjectionUnavailable
            The table cannot be read, or a window names a chunk the release does not hold
            (``table-mismatch``).
        """
        windows = self.context_windows
        lists = _one_array(windows.column("chunk_ids"))
        flat = pc.list_flatten(lists)
        parents = pc.list_parent_indices(lists).to_numpy()
        window_of_row = np.full(self.chunks.num_rows, -1, dtype=np.int32)
        rows = self.chunk_index.rows_of(flat)
        if (rows < 0).any():
            at = int(np.flatnonzero(rows < 0)[0])
            wid = windows.column("window_id")[int(parents[at])].as_py()
            raise ProjectionUnavailable("context_windows", "table-mismatch",
                                        f"window {wid} names chunk {flat[at].as_py()}, which the release does not hold")
        window_of_row[rows] = parents
        self._settle(len(flat))
        return WindowOf(self, window_of_row)

    def window_vectors(self, table: str) -> "WindowVectors":
        """Context-window centroids over the chunk vectors in ``table``, computed once per view.

        No model pass: MiniLM truncates inputs at 256 word pieces, while the mean of the member
        vectors covers the whole window.

        Raises
        ------
        ProjectionUnavailable
            ``table`` or ``context_windows`` cannot serve.
        """
        with self._lock:
            cached = self._window_vectors.get(table)
        if cached is not None:
            return cached
        vs = self.vector_set(table)
        self.context_window_of  # noqa: B018 - validates the windows against the chunks first
        position = np.full(self.chunks.num_rows + 1, -1, dtype=np.int64)  # last slot: unknown chunk
        position[vs.rows] = np.arange(len(vs.rows))
        ids = self.context_windows.column("chunk_ids").combine_chunks()
        flat = pc.list_flatten(ids)
        parents = pc.list_parent_indices(ids).to_numpy().astype(np.int64)
        chunk_rows = self.chunk_index.rows_of(flat)
        members = position[chunk_rows]
        keep = members >= 0
        members, parents = members[keep], parents[keep]
        rows, starts = np.unique(parents, return_index=True)
        if len(rows):
            counts = np.diff(np.append(starts, len(members)))
            # The dense index's builder and its exact re-scoring compute centroids with the same
            # two functions, so both paths score a window alike.
            good, matrix = normalise_rows(window_centroids(vs.matrix, members, counts))
            counts = counts[good]
            members = members[np.isin(parents, rows[good])]
            rows = rows[good]
            offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        else:
            matrix = np.zeros((0, DENSE_DIM), dtype=np.float32)
            offsets = np.zeros(1, dtype=np.int64)
        slot_of_chunk = np.full(self.chunks.num_rows, -1, dtype=np.int64)
        slot_of_chunk[vs.rows[members]] = np.repeat(np.arange(len(rows), dtype=np.int64), np.diff(offsets))
        wv = WindowVectors(rows=rows.astype(np.int64), matrix=np.ascontiguousarray(matrix), offsets=offsets,
                           members=members, slot_of_chunk=slot_of_chunk)
        self._settle(len(members))
        with self._lock:
            self._window_vectors[table] = wv
        return wv

    @cached_property
    def unit_offsets(self) -> dict[str, np.ndarray]:
        """parse ID → offsets of its rows in the pinned ``units`` table (what
        :meth:`fabric_resources.tables.TableStore.take` reads by), read once per view: the units a
        query cites are then a take of a few rows, not a filtered scan of the whole table (~50 ms a
        query at a million chunks). ~8 bytes a unit.

        Raises
        ------
        ProjectionUnavailable
            The table cannot be read.
        """
        t = self.read_active("units", ["parse_id"], with_offsets=True)
        if t.num_rows == 0:
            return {}
        encoded = pc.dictionary_encode(_one_array(t.column("parse_id")))
        codes = encoded.indices.to_numpy()
        order = np.argsort(codes, kind="stable")
        codes, offsets = codes[order], t.column("_offset").to_numpy()[order]
        starts = np.concatenate([[0], np.flatnonzero(np.diff(codes)) + 1])
        names = encoded.dictionary.to_pylist()
        out = {names[codes[a]]: part for a, part in zip(starts, np.split(offsets, starts[1:]))}
        self._settle(t.num_rows)
        return out

    def chunk(self, chunk_id: str) -> dict:
        """One chunk row as a dict (do not mutate it: rows are cached per view): ``parse_id``,
        ``chunk_id``, ``ordinal``, ``text``, ``fragments``, ``section_path``, ``token_count``, and
        ``altered`` (its text does not hash to its recorded ``text_hash``: see :meth:`altered`).

        Raises
        ------
        KeyError
            ``chunk_id`` is not a chunk of the view (callers check :attr:`chunk_index` first for
            IDs that come from a projection).
        ReleaseUnreadableError
            The chunk's text cannot be read from the pinned table version.
        """
        return self.chunk_rows([chunk_id])[chunk_id]

    def known_chunks(self, chunk_ids: list[str]) -> list[str]:
        """The IDs among ``chunk_ids`` that are chunks of this release, in order (one vectorised
        lookup: a membership test per ID costs a binary search each, ~6 µs in the compact index)."""
        if not chunk_ids:
            return []
        rows = self.chunk_index.rows_of(chunk_ids)
        return [cid for cid, row in zip(chunk_ids, rows.tolist()) if row >= 0]

    def chunk_rows(self, chunk_ids: list[str]) -> dict[str, dict]:
        """:meth:`chunk` for several chunks, reading those not cached in one take from the pinned
        table version (a query's hits and passage members: tens of rows).

        Raises
        ------
        KeyError, ReleaseUnreadableError
            As :meth:`chunk`.
        """
        with self._lock:
            out = {}
            for cid in chunk_ids:
                row = self._chunk_rows.get(cid)
                if row is not None:
                    self._chunk_rows.move_to_end(cid)
                    out[cid] = row
        missing = [cid for cid in dict.fromkeys(chunk_ids) if cid not in out]
        if not missing:
            return out
        rows = self.chunk_index.rows_of(missing)  # one binary search for all (a query's window members: hundreds)
        if (rows < 0).any():
            raise KeyError(missing[int(np.argmax(rows < 0))])
        slim = self.chunks.take(rows)
        decoded = slim.drop_columns(["_offset"]).to_pylist() if "_offset" in slim.column_names else slim.to_pylist()
        if self.text_in_memory:
            for row in decoded:
                row["altered"] = row.pop("text_hash") != text_hash(row["text"])
            with self._lock:
                for cid, row in zip(missing, decoded):
                    out[cid] = row
                    self._chunk_rows[cid] = row
                while len(self._chunk_rows) > MAX_CACHED_CHUNK_ROWS:
                    self._chunk_rows.popitem(last=False)
            return out
        offsets = slim.column("_offset").to_pylist()
        version = self._table_version("chunks")
        try:
            full = guarded_read("chunks", lambda: self.home.tables.take("chunks", version, offsets,
                                                                       ["chunk_id", "text", "fragments", "text_hash"]))
        except ProjectionUnavailable as exc:
            raise ReleaseUnreadableError(
                f"release {self.release_id}: {exc.describe()}; {UNREADABLE_CHUNKS_REMEDY}") from exc
        if full.column("chunk_id").to_pylist() != missing:
            raise ReleaseUnreadableError(f"release {self.release_id}: chunks: rows moved under the pinned version")
        texts, fragments = full.column("text").to_pylist(), full.column("fragments").to_pylist()
        recorded = full.column("text_hash").to_pylist()
        with self._lock:
            for i, (cid, row) in enumerate(zip(missing, decoded)):
                row.update(text=texts[i], fragments=fragments[i], altered=recorded[i] != text_hash(texts[i]))
                out[cid] = row
                self._chunk_rows[cid] = row
            while len(self._chunk_rows) > MAX_CACHED_CHUNK_ROWS:  # least recently used first
                self._chunk_rows.popitem(last=False)
        return out

    def altered(self, chunk_ids: list[str]) -> set[str]:
        """Those of ``chunk_ids`` whose stored text does not hash to the ``text_hash`` the chunker
        recorded beside it: rows rewritten behind Fabric's back, never served as evidence (each
        row is hashed once per view when :meth:`chunk_rows` first reads it, ~2 µs a chunk).

        Raises
        ------
        KeyError, ReleaseUnreadableError
            As :meth:`chunk`.
        """
        return {cid for cid, row in self.chunk_rows(chunk_ids).items() if row["altered"]}

    @cached_property
    def lexical(self) -> OpenIndex | IndexUnusable:
        """The index the word and substring channels search, or why none can serve (a fallback reason).

        Unrestricted: the pinned generation, checked to hold one live document per chunk of the
        release (``index-release-mismatch`` otherwise). Restricted: an in-memory index of the
        release's lexical documents of its visible parses (module docstring).
        """
        if self.restricted:
            # Restricted by withholding alone, the answer must be that of a home that never held the
            # source, whose index is this one: where it cannot serve (a read-only home, a generation
            # lost or damaged) that home scans, and so does this view, for the same reason; an
            # in-memory index's word hits would tell a reader a source was withheld since the release.
            unusable = self._generation() if not self.gone else None
            return unusable if isinstance(unusable, IndexUnusable) else self._visible_index()
        opened = self._generation()
        if isinstance(opened, IndexUnusable):
            return opened
        index, live, chunk_docs = opened
        gen = self.release.manifest.get("lexical_generation")
        if chunk_docs != self.chunks.num_rows:
            return IndexUnusable("index-release-mismatch", f"{gen} holds {chunk_docs} chunk documents "
                                 f"({live} in all), release {self.release_id} {self.chunks.num_rows} chunks")
        return index

    def _generation(self) -> tuple[OpenIndex, int, int] | IndexUnusable:
        manifest = self.release.manifest
        if manifest.get("schema_version") != SCHEMA_VERSION:
            return IndexUnusable("index-schema-mismatch", f"release written by schema {manifest.get('schema_version')}")
        return open_generation(self.home, manifest.get("lexical_generation"))

    def _visible_index(self) -> OpenIndex | IndexUnusable:
        try:
            docs = self.read_active("lexical_documents", ["parse_id", "chunk_id", "folded_text"])
        except ProjectionUnavailable as exc:
            return IndexUnusable("index-unreadable", exc.describe())
        if docs.num_rows != self.chunks.num_rows:
            return IndexUnusable("index-release-mismatch", f"{docs.num_rows} lexical documents for "
                                 f"{self.chunks.num_rows} chunks of release {self.release_id}'s visible sources")
        try:
            windows = self.context_windows
        except ProjectionUnavailable as exc:
            return IndexUnusable("index-unreadable", exc.describe())
        docs = index_documents(docs, windows)  # the serving index's window documents, for the visible parses
        schema = index_schema()
        index = tantivy.Index(schema)  # in memory
        index.register_tokenizer(WORD_TOKENIZER, word_analyzer())
        index.register_tokenizer(SUBSTRING_TOKENIZER, substring_analyzer())
        writer = index.writer(heap_size=64_000_000, num_threads=1)
        add_to_writer(writer, docs)
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        self._settle(docs.num_rows)
        return OpenIndex(f"release-{self.release_id}-visible", index, schema, index.searcher())


def _one_array(column: pa.ChunkedArray) -> pa.Array:
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


class ChunkIndex(Mapping):
    """chunk ID → row of :attr:`ReleaseView.chunks` (``ids[row]``).

    A dict, or with ``compact`` a sorted array of the IDs' UTF-8 bytes beside their rows: ~40
    bytes a chunk instead of ~190 (at a million chunks the dict held 188 MB), a lookup by binary
    search (microseconds). :meth:`rows_of` answers many IDs at once either way.
    """

    def __init__(self, ids: pa.Array | pa.ChunkedArray, compact: bool) -> None:
        self._ids = ids
        self._n = len(ids)
        if compact and self._n and pc.any(pc.match_substring(ids, "\x00")).as_py():
            compact = False  # NumPy's fixed-width bytes cannot tell "a" from "a\0" (never a real chunk ID)
        if not compact:
            self._dict: dict[str, int] | None = {cid: i for i, cid in enumerate(ids.to_pylist())}
            return
        self._dict = None
        raw = pc.cast(ids, pa.binary())
        self._width = max(1, int(pc.max(pc.binary_length(raw)).as_py() or 1))
        keys = np.array(raw.to_numpy(zero_copy_only=False), dtype=f"S{self._width}")
        order = np.argsort(keys, kind="stable")
        self._keys = keys[order]
        self._rows = order.astype(np.int64)
        # NumPy's fixed-width bytes drop trailing NULs: equal keys must have equal lengths too.
        self._lengths = pc.binary_length(raw).to_numpy(zero_copy_only=False)[order]

    def get(self, chunk_id, default=None):
        if self._dict is not None:
            return self._dict.get(chunk_id, default)
        if not isinstance(chunk_id, str):
            return default
        key = chunk_id.encode()
        if len(key) > self._width:
            return default
        packed = np.array(key, dtype=self._keys.dtype)  # compared as the stored keys are (NULs dropped)
        i = int(np.searchsorted(self._keys, packed))
        if i < self._n and self._keys[i] == packed and self._lengths[i] == len(key):
            return int(self._rows[i])
        return default

    def __getitem__(self, chunk_id: str) -> int:
        row = self.get(chunk_id)
        if row is None:
            raise KeyError(chunk_id)
        return row

    def __contains__(self, chunk_id) -> bool:
        return self.get(chunk_id) is not None

    def __len__(self) -> int:
        return self._n

    def __iter__(self):
        return iter(self._ids.to_pylist())

    def rows_of(self, ids) -> np.ndarray:
        """Rows of ``ids`` (a list or an Arrow string array), ``(len(ids),) int64``, ``-1`` for an
        ID that is not a chunk of the view."""
        if self._dict is not None:
            d = self._dict
            values = ids.to_pylist() if isinstance(ids, (pa.Array, pa.ChunkedArray)) else ids
            return np.fromiter((d.get(c, -1) for c in values), dtype=np.int64, count=len(values))
        arr = ids if isinstance(ids, (pa.Array, pa.ChunkedArray)) else pa.array(list(ids), pa.string())
        if len(arr) == 0 or self._n == 0:
            return np.full(len(arr), -1, dtype=np.int64)
        raw = pc.cast(arr, pa.binary())
        lengths = pc.binary_length(raw).to_numpy(zero_copy_only=False)
        keys = np.array(raw.to_numpy(zero_copy_only=False), dtype=f"S{self._width}")
        at = np.minimum(np.searchsorted(self._keys, keys), self._n - 1)
        hit = (self._keys[at] == keys) & (self._lengths[at] == lengths)
        return np.where(hit, self._rows[at], -1).astype(np.int64)


class WindowOf(Mapping):
    """chunk_id → (window ID, the window's chunk IDs in reading order), for chunks in a window
    (:attr:`ReleaseView.context_window_of`). ``window_of_row[i]`` is the ``context_windows`` row
    of chunk row ``i`` (``-1``: none); values are built on access."""

    def __init__(self, view: ReleaseView, window_of_row: np.ndarray) -> None:
        self._view = view
        self._of = window_of_row
        # One array each (positional access into a chunked array searches its chunks); no copy
        # when the column is one chunk already, as after the view's sort.
        self._ids = _one_array(view.context_windows.column("window_id"))
        self._members = _one_array(view.context_windows.column("chunk_ids"))

    @property
    def window_of_row(self) -> np.ndarray:
        """``context_windows`` row of each view chunk row (``-1``: none); read-only."""
        view = self._of.view()
        view.flags.writeable = False
        return view

    def __getitem__(self, chunk_id: str) -> tuple[str, tuple[str, ...]]:
        i = self._view.chunk_index.get(chunk_id)
        w = -1 if i is None else int(self._of[i])
        if w < 0:
            raise KeyError(chunk_id)
        return self._ids[w].as_py(), tuple(self._members[w].as_py())

    def __iter__(self):
        ids = self._view.chunks.column("chunk_id")
        return (ids[int(i)].as_py() for i in np.flatnonzero(self._of >= 0))

    def __len__(self) -> int:
        return int((self._of >= 0).sum())


#: The columns of :attr:`ReleaseView.chunks` besides ``text`` and ``fragments`` (held only while
#: :attr:`ReleaseView.text_in_memory`).
VIEW_CHUNK_COLUMNS = ("parse_id", "chunk_id", "ordinal", "section_path", "token_count")

#: Loads of at least this many rows settle the garbage collector (``fabric_query.memory``).
SETTLE_MIN_ROWS = 20_000

#: Chunk rows (with their text) kept per view once read, least recently used out first (a hit's row
#: is read by several stages of one query, popular chunks by many queries, and the word channel
#: re-scores every member of its ~130 candidate windows: ~500 rows a pass). ~1.2 KB a row.
MAX_CACHED_CHUNK_ROWS = 50_000

_VIEWS: dict[tuple[str, int, frozenset[str], frozenset[str]], ReleaseView] = {}
_VIEWS_LOCK = threading.Lock()
#: Views kept per process (the current and the one before it, typically).
MAX_CACHED_VIEWS = 4

_RELEASES: dict[tuple[str, int], Release] = {}
#: Per (home, release, withheld patterns): the release's source keys those patterns withhold.
_WITHHELD: dict[tuple[str, int, tuple[str, ...]], frozenset[str]] = {}


def hidden_sources(home: FabricHome, release: Release,
                   visibility: Visibility) -> tuple[frozenset[str], frozenset[str]]:
    """The source keys ``release`` names that ``visibility`` does not admit, and those of them that
    are not withheld (:attr:`ReleaseView.gone`).

    Per query this is a set intersection with the catalog's hidden keys; the pattern match over
    the release's keys is done once per (release, patterns).
    """
    named = release.manifest["sources"]
    deleted = frozenset(k for k in visibility.hidden_keys if k in named)
    if not visibility.withheld:
        return deleted, deleted
    key = (str(home.root), release.release_id, visibility.withheld)
    with _VIEWS_LOCK:
        withheld = _WITHHELD.get(key)
    if withheld is None:
        withheld = frozenset(k for k in named if visibility.is_withheld(k))
        with _VIEWS_LOCK:
            _WITHHELD[key] = withheld
            while len(_WITHHELD) > 4 * MAX_CACHED_VIEWS:
                _WITHHELD.pop(next(iter(_WITHHELD)))
    return deleted | withheld, deleted - withheld


def pinned_view(home: FabricHome, release_id: int | None = None) -> ReleaseView | None:
    """The view of ``release_id`` (default: the current release) under today's visibility, or None
    when nothing is activated or the release does not exist.

    Per query: the pointer, the catalog's hidden source keys, a ``stat`` of the config file and
    the release's publication time (for a release other than the current one: whether it still
    exists; for any: that it is the release cached under its ID, not one of a home deleted and made
    again at the same path); a release's manifest is parsed once per process (releases are
    immutable, but retention and purges retire them).

    Raises
    ------
    fabric_resources.config.ConfigError
        The config file changed and is not valid any more (today's withheld patterns are unknown).
    fabric_resources.catalog.CatalogDamagedError
        The current pointer names a release the catalog lacks, or a manifest cannot be decoded.
    """
    pointer, visibility = current_visibility(home)
    rid = release_id if release_id is not None else pointer
    if rid is None:
        return None
    rkey = (str(home.root), rid)
    published = home.catalog.release_created_at(rid)
    if rid != pointer and published is None:
        # Retired since this process cached it (retention, or a purge, which retires every release
        # that named what it removed): its cached rows may hold purged text, so they go too.
        _forget_release(rkey)
        return None
    with _VIEWS_LOCK:
        release = _RELEASES.get(rkey)
    if release is not None and release.created_at != published:
        # Another home's release of this ID at this path (the home deleted, or moved away, and made
        # again: its IDs start at 1 again): the cached one names other files, rows and text.
        _forget_release(rkey)
        release = None
    if release is None:
        release = home.catalog.release(rid)
        if release is None and rid == pointer:
            from fabric_resources.catalog import CatalogDamagedError

            raise CatalogDamagedError.missing_current(rid)
        if release is None:
            return None
        if not all(isinstance(release.manifest.get(k), dict) for k in ("tables", "sources")):
            from fabric_resources.catalog.records import RESTORE_REMEDY, CatalogDamagedError

            raise CatalogDamagedError(f"release {rid}'s manifest in the catalog lacks its tables or sources: the "
                                      f"catalog was altered; {RESTORE_REMEDY}")
        with _VIEWS_LOCK:
            _RELEASES[rkey] = release
            while len(_RELEASES) > 4 * MAX_CACHED_VIEWS:
                _RELEASES.pop(next(iter(_RELEASES)))
    return release_view(home, release, *hidden_sources(home, release, visibility))


def vectors_held(home: FabricHome, release_id: int, tables: Iterable[str]) -> bool:
    """Whether a view of ``release_id`` this process keeps has read the vectors (or ANN index) of
    one of ``tables`` (:meth:`ReleaseView.holds_vectors`); a check answered by such a view is not
    an answer about the files as they lie now (a running server's view, loaded before they changed)."""
    with _VIEWS_LOCK:
        views = [v for k, v in _VIEWS.items() if k[:2] == (str(home.root), release_id)]
    return any(v.holds_vectors(t) for v in views for t in tables)


def _forget_release(rkey: tuple[str, int]) -> None:
    """Drop every cached manifest, view and withheld set of release ``rkey`` (home, release ID)."""
    with _VIEWS_LOCK:
        _RELEASES.pop(rkey, None)
        for cache in (_VIEWS, _WITHHELD):
            for key in [k for k in cache if k[:2] == rkey]:
                del cache[key]


def release_view(home: FabricHome, release: Release, hidden: frozenset[str] = frozenset(),
                 gone: frozenset[str] = frozenset()) -> ReleaseView:
    """The (cached) view of ``release`` without the sources in ``hidden`` (``gone``: those of them
    not withheld, :attr:`ReleaseView.gone`).

    Callers that serve users go through :func:`pinned_view`, which applies today's visibility;
    this entry point is for tools that read a release as it was published (evaluation, benchmarks).
    """
    key = (str(home.root), release.release_id, frozenset(hidden), frozenset(gone))
    with _VIEWS_LOCK:
        view = _VIEWS.get(key)
        if view is None:
            view = ReleaseView(home, release, frozenset(hidden), frozenset(gone))
            _VIEWS[key] = view
            while len(_VIEWS) > MAX_CACHED_VIEWS:
                _VIEWS.pop(next(iter(_VIEWS)))
        return view
