"""A pinned release, loaded for querying.

``ReleaseView`` holds everything one release names — its manifest, the chunk
rows and vectors of its active parses at the table versions it recorded, and
its lexical index generation — so that a query which pinned it keeps one
consistent view however many activations happen meanwhile. Views are cached
per (home, release) in the process.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fabric_resources.catalog import Release
from fabric_resources.home import FabricHome
from fabric_resources.lexical_index import IndexUnusable, OpenIndex
from fabric_resources.memory import settle_after_load
from fabric_resources.schema import DENSE_DIM, SCHEMA_VERSION


@dataclass(frozen=True)
class VectorSet:
    """Vectors of one table: ``matrix[i]`` (``(n, 384) float32``) belongs to chunk row ``rows[i]``."""

    rows: np.ndarray
    matrix: np.ndarray


@dataclass(frozen=True)
class WindowVectors:
    """Context-window vectors over one chunk-vector table.

    ``matrix[i]`` (``(m, 384) float32``, unit norm) is the L2-normalised mean of the vectors of
    window row ``rows[i]``'s member chunks (rows of ``ReleaseView.context_windows``); those members
    are ``VectorSet`` rows ``members[offsets[i]:offsets[i + 1]]`` of the same table, in reading
    order. Windows with no member in the table have no row.
    """

    rows: np.ndarray
    matrix: np.ndarray
    offsets: np.ndarray
    members: np.ndarray


@dataclass
class ReleaseView:
    home: FabricHome
    release: Release
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _vector_sets: dict[str, "VectorSet"] = field(default_factory=dict, repr=False)
    _chunk_rows: dict[str, dict] = field(default_factory=dict, repr=False)
    _window_vectors: dict[str, "WindowVectors"] = field(default_factory=dict, repr=False)

    def _settle(self, rows: int) -> None:
        # Small views gain nothing from a freeze, and its one collection would cost more than they do.
        settle_after_load(self.home.config.query.gc_freeze and rows >= SETTLE_MIN_ROWS)

    @property
    def release_id(self) -> int:
        return self.release.release_id

    @property
    def sources(self) -> dict[str, dict]:
        return self.release.manifest["sources"]

    @cached_property
    def sources_by_parse(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for key, meta in sorted(self.sources.items()):
            out.setdefault(meta["parse_id"], []).append(key)
        return out

    @cached_property
    def chunks(self) -> pa.Table:
        """Chunk rows of the active parses, sorted by (parse_id, ordinal)."""
        t = self.home.tables.read_active(
            "chunks", self.release.manifest["tables"].get("chunks"), self.sources_by_parse,
            ["parse_id", "chunk_id", "ordinal", "text", "fragments", "section_path", "token_count"],
        )
        t = t.sort_by([("parse_id", "ascending"), ("ordinal", "ascending")])
        self._settle(t.num_rows)
        return t

    @cached_property
    def chunk_index(self) -> dict[str, int]:
        return {cid: i for i, cid in enumerate(self.chunks.column("chunk_id").to_pylist())}

    @cached_property
    def chunk_parse_ids(self) -> np.ndarray:
        return np.array(self.chunks.column("parse_id").to_pylist(), dtype=object)

    def vector_set(self, table: str) -> "VectorSet":
        """The release's vectors in ``table`` (``chunk_vectors`` or ``chunk_vectors_multilingual``)."""
        with self._lock:
            cached = self._vector_sets.get(table)
        if cached is not None:
            return cached
        # Streamed batch by batch into the one matrix the view keeps: at 100k chunks, reading the
        # table whole and copying it out held 2-3x the matrix's 154 MB after the read.
        version = self.release.manifest["tables"].get(table)
        n = self.home.tables.count_rows(table, version) if version is not None else 0
        matrix = np.empty((n, DENSE_DIM), dtype=np.float32)
        rows = np.empty(n, dtype=np.int64)
        at = 0
        for batch in self.home.tables.read_active_batches(table, version, self.sources_by_parse, ["chunk_id", "vector"]):
            index = np.fromiter((self.chunk_index.get(c, -1) for c in batch.column("chunk_id").to_pylist()),
                                dtype=np.int64, count=batch.num_rows)
            values = batch.column("vector").flatten().to_numpy(zero_copy_only=False).reshape(-1, DENSE_DIM)
            keep = index >= 0
            k = int(keep.sum())
            matrix[at:at + k] = values[keep]
            rows[at:at + k] = index[keep]
            at += k
        matrix.resize((at, DENSE_DIM), refcheck=False)
        rows.resize(at, refcheck=False)
        self._settle(at)
        vs = VectorSet(rows=rows, matrix=matrix)
        with self._lock:
            self._vector_sets[table] = vs
        return vs

    @cached_property
    def context_windows(self) -> pa.Table:
        """Context-window rows of the active parses (``parse_id``, ``window_id``, ``ordinal``,
        ``chunk_ids``, ``section_path``), sorted by (parse_id, ordinal); empty when the manifest
        names no ``context_windows`` version."""
        t = self.home.tables.read_active(
            "context_windows", self.release.manifest["tables"].get("context_windows"), self.sources_by_parse,
            ["parse_id", "window_id", "ordinal", "chunk_ids", "section_path"],
        )
        return t.sort_by([("parse_id", "ascending"), ("ordinal", "ascending")])

    @cached_property
    def context_window_of(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """chunk_id → (its context window's ID, that window's chunk IDs in reading order)."""
        out: dict[str, tuple[str, tuple[str, ...]]] = {}
        windows = self.context_windows
        for wid, members in zip(windows.column("window_id").to_pylist(), windows.column("chunk_ids").to_pylist()):
            members = tuple(members)
            for cid in members:
                out[cid] = (wid, members)
        self._settle(len(out))
        return out

    def window_vectors(self, table: str) -> "WindowVectors":
        """Context-window centroids over the chunk vectors in ``table``, computed once per view.

        No model pass: MiniLM truncates inputs at 256 word pieces, while the mean of the member
        vectors covers the whole window.
        """
        with self._lock:
            cached = self._window_vectors.get(table)
        if cached is not None:
            return cached
        vs = self.vector_set(table)
        position = np.full(self.chunks.num_rows + 1, -1, dtype=np.int64)  # last slot: unknown chunk
        position[vs.rows] = np.arange(len(vs.rows))
        ids = self.context_windows.column("chunk_ids").combine_chunks()
        flat = pc.list_flatten(ids).to_pylist()
        parents = pc.list_parent_indices(ids).to_numpy().astype(np.int64)
        chunk_rows = np.fromiter((self.chunk_index.get(c, -1) for c in flat), dtype=np.int64, count=len(flat))
        members = position[chunk_rows]
        keep = members >= 0
        members, parents = members[keep], parents[keep]
        rows, starts = np.unique(parents, return_index=True)
        if len(rows):
            counts = np.diff(np.append(starts, len(members)))
            sums = np.zeros((len(rows), vs.matrix.shape[1]), dtype=np.float32)
            # One pass per member position: total work = total members, and no (n_members, 384)
            # copy (np.add.reduceat / np.add.at were 3-5x slower on 100k chunks).
            for j in range(int(counts.max())):
                at = np.flatnonzero(counts > j)
                sums[at] += vs.matrix[members[starts[at] + j]]
            norms = np.linalg.norm(sums, axis=1)
            good = norms > 0
            counts = counts[good]
            members = members[np.isin(parents, rows[good])]
            rows, matrix = rows[good], (sums[good] / norms[good, None]).astype(np.float32)
            offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        else:
            matrix = np.zeros((0, DENSE_DIM), dtype=np.float32)
            offsets = np.zeros(1, dtype=np.int64)
        wv = WindowVectors(rows=rows.astype(np.int64), matrix=np.ascontiguousarray(matrix), offsets=offsets,
                           members=members)
        self._settle(len(members))
        with self._lock:
            self._window_vectors[table] = wv
        return wv

    def chunk(self, chunk_id: str) -> dict:
        """One chunk row as a dict (do not mutate it: rows are cached per view)."""
        row = self._chunk_rows.get(chunk_id)
        if row is None:
            i = self.chunk_index[chunk_id]
            row = {name: self.chunks.column(name)[i].as_py() for name in self.chunks.column_names}
            if len(self._chunk_rows) < MAX_CACHED_CHUNK_ROWS:
                self._chunk_rows[chunk_id] = row
        return row

    @cached_property
    def lexical(self) -> OpenIndex | IndexUnusable:
        """The pinned index generation, or why it cannot serve (a fallback reason)."""
        manifest = self.release.manifest
        if manifest.get("schema_version") != SCHEMA_VERSION:
            return IndexUnusable("index-schema-mismatch", f"release written by schema {manifest.get('schema_version')}")
        gen = manifest.get("lexical_generation")
        if not gen:
            return IndexUnusable("index-missing", "release names no lexical generation")
        try:
            return self.home.lexical.open(gen)
        except IndexUnusable as exc:
            return exc


#: Loads of at least this many rows settle the garbage collector (``fabric_resources.memory``).
SETTLE_MIN_ROWS = 20_000

#: Chunk rows kept per view once read (a hit's row is read by several stages of one query).
MAX_CACHED_CHUNK_ROWS = 20_000

_VIEWS: dict[tuple[str, int], ReleaseView] = {}
_VIEWS_LOCK = threading.Lock()
#: Views kept per process (the current and the one before it, typically).
MAX_CACHED_VIEWS = 4


def pinned_view(home: FabricHome, release_id: int | None = None) -> ReleaseView | None:
    """The view of ``release_id`` (default: the current release), or None when nothing is activated.

    Only the pointer is read per query; a release's manifest is parsed once per process
    (releases are immutable).
    """
    rid = release_id if release_id is not None else home.catalog.current_release_id()
    if rid is None:
        return None
    with _VIEWS_LOCK:
        view = _VIEWS.get((str(home.root), rid))
    if view is not None:
        return view
    release = home.catalog.release(rid)
    return release_view(home, release) if release is not None else None


def release_view(home: FabricHome, release: Release) -> ReleaseView:
    key = (str(home.root), release.release_id)
    with _VIEWS_LOCK:
        view = _VIEWS.get(key)
        if view is None:
            view = ReleaseView(home, release)
            _VIEWS[key] = view
            while len(_VIEWS) > MAX_CACHED_VIEWS:
                _VIEWS.pop(next(iter(_VIEWS)))
        return view
