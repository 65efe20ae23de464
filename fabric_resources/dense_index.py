# Over 500 lines: a dense index generation's format, build, verification, search and removal share its constants.
"""Approximate-nearest-neighbour (ANN) serving indexes over one release's dense vectors.

A **dense index generation** is built by activation (``fabric_assets.activation.dense_index``)
from the vector rows a release pins, for one vector table (``chunk_vectors`` or
``chunk_vectors_multilingual``). It lives beside the lexical generations, under
``<home>/indexes/dense/<table>/gen-NNNNNNNN/``:

* ``vectors.lance`` — the release's rows of the table (``pos``, ``parse_id``, ``chunk_id``,
  ``model``, ``vector``), sorted by (``parse_id``, ``chunk_id``); ``pos`` is the row's position in
  that order. It carries a Lance vector index (``IVF_RQ`` by default; ``IVF_PQ``, ``IVF_HNSW_SQ``
  or ``IVF_FLAT``; cosine metric) named :data:`INDEX_NAME`.
* ``windows.lance`` — one row per context window with at least one member vector (``pos``,
  ``parse_id``, ``window_id``, ``vector``: the L2-normalised mean of its members' vectors, as
  :func:`window_centroids` computes it), with the same kind of index: the section-guided route
  shortlists windows through it.
* :data:`META_FILE` — what was built: format, table, rows, the rows' vector digest
  (:mod:`fabric_resources.vector_digest`), the build settings and time.

A generation is a copy, not a view of the canonical table: compaction, cleanup and purges of the
canonical tables never move its rows, and it is removed as a whole (a purge rebuilds the current
one from the rows that remain, so no purged vector stays in any index file). The release manifest
records each table's generation, row count and digest under :data:`MANIFEST_KEY`; a reader serves
a generation only when its meta and the digest of its rows match the release
(:class:`DenseIndexUnusable` names why not). Candidates found through the index are always
re-scored exactly against the stored float32 vectors by the query side, so an approximate pass can
lose a candidate but never changes a score.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fabric_resources.schema import DENSE_DIM
from fabric_resources.storage_errors import storage_error_text

#: Release-manifest key: ``{table: record}`` (:meth:`DenseIndexStore.build`'s record, or one with
#: ``generation`` None and the reason none was built).
MANIFEST_KEY = "dense_indexes"
#: Vector tables that may carry an ANN index: those the dense channels search.
INDEXED_TABLES = ("chunk_vectors", "chunk_vectors_multilingual")
#: Bumped when a generation's layout changes meaning; a reader refuses another one.
FORMAT = "fabric-dense-ann-v1"
META_FILE = "fabric_dense_index.json"
VECTORS_DATASET = "vectors.lance"
WINDOWS_DATASET = "windows.lance"
INDEX_NAME = "vector_ann"
#: Rows per data file of a generation's datasets. Lance reads a file's vector column whole while
#: scanning it: one 1.5 GB file at a million rows peaked the reader's RSS at 1.75 GB, files of
#: 65,536 rows read one at a time at 363 MB (measured here, streaming every row once).
FILE_ROWS = 32_768
#: Fewer rows than this get no index: PQ trains 256 centroids per sub-vector (8 bits), and
#: below a few hundred rows the exact product costs microseconds anyway.
MIN_INDEX_ROWS = 256

_GEN = re.compile(r"^gen-(\d{8})$")

VECTOR_SCHEMA = pa.schema([
    pa.field("pos", pa.int64(), nullable=False),
    pa.field("parse_id", pa.string(), nullable=False),
    pa.field("chunk_id", pa.string(), nullable=False),
    pa.field("model", pa.string(), nullable=False),
    pa.field("vector", pa.list_(pa.float32(), DENSE_DIM), nullable=False),
])
WINDOW_SCHEMA = pa.schema([
    pa.field("pos", pa.int64(), nullable=False),
    pa.field("parse_id", pa.string(), nullable=False),
    pa.field("window_id", pa.string(), nullable=False),
    pa.field("vector", pa.list_(pa.float32(), DENSE_DIM), nullable=False),
])


class DenseIndexUnusable(Exception):
    """A release's dense index cannot serve; the dense channel answers with the exact product.

    ``reason`` is stable: ``dense-index-missing`` (none was built for a table the configuration
    wants one for, or its files are gone), ``dense-index-schema-mismatch`` (written by another
    format), ``dense-index-unreadable`` (Lance cannot open or search it, or its vector index is
    absent), ``dense-index-release-mismatch`` (its rows are not the release's: another digest or
    row count).
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail

    def describe(self) -> str:
        return f"{self.reason}: {self.detail}" if self.detail else self.reason


@dataclass(frozen=True)
class BuildSpec:
    """How a generation's vector indexes are built (recorded in its meta and the manifest).

    ``num_partitions`` IVF partitions (``rows / partition_rows``, at least 1, at most ``rows``);
    ``num_sub_vectors`` PQ sub-vectors (``IVF_PQ`` only, must divide 384); ``num_bits`` bits per
    dimension of the RaBitQ codes (``IVF_RQ`` only).
    """

    index_type: str
    num_partitions: int
    num_sub_vectors: int | None
    metric: str = "cosine"
    num_bits: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_spec(index_type: str, rows: int, partition_rows: int, pq_sub_vectors: int, rq_bits: int = 1) -> BuildSpec:
    """The :class:`BuildSpec` for ``rows`` vectors.

    Raises
    ------
    ValueError
        ``pq_sub_vectors`` does not divide the vector dimension (384).
    """
    if index_type == "IVF_PQ" and DENSE_DIM % pq_sub_vectors:
        raise ValueError(f"pq_sub_vectors {pq_sub_vectors} does not divide the dimension {DENSE_DIM}")
    partitions = max(1, min(rows, round(rows / partition_rows)))
    return BuildSpec(index_type, partitions, pq_sub_vectors if index_type == "IVF_PQ" else None,
                     num_bits=rq_bits if index_type == "IVF_RQ" else None)


def window_centroids(matrix: np.ndarray, members: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Unnormalised sums of window members' vectors, one window per row.

    ``matrix``: ``(n, d) float32``; ``members``: row indices of ``matrix``, window after window in
    reading order; ``counts``: members per window (``counts.sum() == len(members)``). Returns the
    ``(len(counts), d) float32`` sums, accumulated in member order (the same float32 additions,
    in the same order, whichever windows are summed together: the exact and the approximate
    dense paths compute equal centroids). Callers normalise by :func:`normalise_rows`.
    """
    m = len(counts)
    sums = np.zeros((m, matrix.shape[1]), dtype=np.float32)
    if m == 0:
        return sums
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    # One pass per member position: total work = total members, and no (n_members, d) copy
    # (np.add.reduceat / np.add.at were 3-5x slower on 100k chunks).
    for j in range(int(counts.max())):
        at = np.flatnonzero(counts > j)
        sums[at] += matrix[members[starts[at] + j]]
    return sums


def normalise_rows(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(``good``, unit rows): ``good`` marks rows of non-zero norm; the second is ``sums[good]``
    divided by their L2 norms, ``float32``."""
    norms = np.linalg.norm(sums, axis=1)
    good = norms > 0
    return good, (sums[good] / norms[good, None]).astype(np.float32)


def _vectors(column: pa.ChunkedArray | pa.Array, n: int) -> np.ndarray:
    if n == 0:
        return np.zeros((0, DENSE_DIM), dtype=np.float32)
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return np.asarray(arr.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(n, DENSE_DIM)


def sort_vector_rows(rows: pa.Table) -> pa.Table:
    """``rows`` (``parse_id``, ``chunk_id``, ``model``, ``vector``) sorted by (parse_id, chunk_id),
    with ``pos`` = the position in that order, as :data:`VECTOR_SCHEMA`."""
    rows = rows.select(["parse_id", "chunk_id", "model", "vector"])
    rows = rows.take(pc.sort_indices(rows, sort_keys=[("parse_id", "ascending"), ("chunk_id", "ascending")]))
    return pa.table({"pos": pa.array(np.arange(rows.num_rows, dtype=np.int64)), **{c: rows.column(c) for c in
                                                                                  rows.column_names}},
                    schema=VECTOR_SCHEMA)


def window_rows(vectors: pa.Table, windows: pa.Table) -> pa.Table:
    """Window centroid rows (:data:`WINDOW_SCHEMA`) of ``windows`` (``parse_id``, ``window_id``,
    ``chunk_ids``) over ``vectors`` (:func:`sort_vector_rows`'s output), sorted by (parse_id,
    window_id). Members without a vector are left out; a window with none has no row."""
    position = {cid: i for i, cid in enumerate(vectors.column("chunk_id").to_pylist())}
    windows = windows.take(pc.sort_indices(windows, sort_keys=[("parse_id", "ascending"), ("window_id", "ascending")]))
    members, counts = [], []
    for ids in windows.column("chunk_ids").to_pylist():
        found = [position[c] for c in ids if c in position]
        members += found
        counts.append(len(found))
    counts_arr = np.asarray(counts, dtype=np.int64)
    sums = window_centroids(_vectors(vectors.column("vector"), vectors.num_rows), np.asarray(members, dtype=np.int64),
                            counts_arr)
    good, unit = normalise_rows(sums)
    kept = windows.filter(pa.array(good))
    return pa.table({
        "pos": pa.array(np.arange(kept.num_rows, dtype=np.int64)),
        "parse_id": kept.column("parse_id"),
        "window_id": kept.column("window_id"),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(unit.ravel(), pa.float32()), DENSE_DIM),
    }, schema=WINDOW_SCHEMA)


class DenseIndexStore:
    """Dense index generations under ``root`` (one folder per vector table)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, table: str, generation: str) -> Path:
        if table not in INDEXED_TABLES or not _GEN.match(generation):
            raise ValueError(f"not a dense index generation: {table}/{generation}")
        return self.root / table / generation

    def generations(self, table: str) -> list[str]:
        """Complete generations of ``table`` (those with a meta file), oldest first."""
        d = self.root / table
        if not d.is_dir():
            return []
        return sorted(p.name for p in d.iterdir() if _GEN.match(p.name) and (p / META_FILE).exists())

    def build(self, table: str, rows: pa.Table, windows: pa.Table | None, spec: BuildSpec, digest: str | None,
              generation: str | None = None, left_out: Iterable[str] = ()) -> dict[str, Any]:
        """Write a new generation of ``table`` from ``rows`` and ``windows``; return its record.

        ``rows``: the release's vector rows of ``table`` (``parse_id``, ``chunk_id``, ``model``,
        ``vector``), any order; ``windows``: its context windows (``parse_id``, ``window_id``,
        ``chunk_ids``) or None; ``digest``: the rows' table digest (recorded; the reader checks
        the release's). ``generation``: rebuild that generation in place (a snapshot restore or
        repair keeps the name a release records); default a new one, numbered above every other.
        ``left_out``: active parses whose rows were not given (they did not give their recorded
        digest), recorded as ``left_out`` when there are any.
        Written beside its place and renamed into it, so a reader never sees half of one.
        Memory: the rows twice (the sort) and the window centroids.

        Raises
        ------
        ValueError
            Fewer than :data:`MIN_INDEX_ROWS` rows, or a bad ``generation`` name.
        """
        if rows.num_rows < MIN_INDEX_ROWS:
            raise ValueError(f"{rows.num_rows} rows: an index needs at least {MIN_INDEX_ROWS}")
        import lance

        started = time.perf_counter()
        base = self.root / table
        base.mkdir(parents=True, exist_ok=True)
        if generation is None:
            taken = [int(m.group(1)) for p in base.iterdir() if (m := _GEN.match(p.name))]
            generation = f"gen-{max(taken, default=0) + 1:08d}"
        target = self.path(table, generation)
        tmp = base / f".{generation}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            vectors = sort_vector_rows(rows)
            window_table = window_rows(vectors, windows) if windows is not None else None
            lance.write_dataset(vectors, str(tmp / VECTORS_DATASET), schema=VECTOR_SCHEMA, max_rows_per_file=FILE_ROWS)
            del rows
            _create_index(lance.dataset(str(tmp / VECTORS_DATASET)), spec)
            n_windows, wspec = 0, None
            if window_table is not None and window_table.num_rows:
                n_windows = window_table.num_rows
                lance.write_dataset(window_table, str(tmp / WINDOWS_DATASET), schema=WINDOW_SCHEMA,
                                    max_rows_per_file=FILE_ROWS)
                if n_windows >= MIN_INDEX_ROWS:
                    # As many rows per partition as the chunk index.
                    wspec = BuildSpec(spec.index_type, max(1, min(n_windows, round(
                        n_windows * spec.num_partitions / max(vectors.num_rows, 1)))), spec.num_sub_vectors, spec.metric,
                        spec.num_bits)
                    _create_index(lance.dataset(str(tmp / WINDOWS_DATASET)), wspec)
            record = {"format": FORMAT, "generation": generation, "table": table, "rows": vectors.num_rows,
                      "windows": n_windows, "digest": digest, "spec": spec.as_dict(),
                      "window_spec": wspec.as_dict() if wspec else None,
                      "build_seconds": round(time.perf_counter() - started, 3)}
            if left_out:
                record["left_out"] = sorted(left_out)
            (tmp / META_FILE).write_text(json.dumps(record, sort_keys=True))
            old = base / f".{generation}.old"
            shutil.rmtree(old, ignore_errors=True)
            if target.exists():
                os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return record

    def meta(self, table: str, generation: str) -> dict[str, Any]:
        """The generation's meta file.

        Raises
        ------
        DenseIndexUnusable
            ``dense-index-missing`` (no such generation) or ``dense-index-unreadable``.
        """
        path = self.path(table, generation) / META_FILE
        if not path.exists():
            raise DenseIndexUnusable("dense-index-missing", f"{table}/{generation}")
        try:
            meta = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise DenseIndexUnusable("dense-index-unreadable", f"{table}/{generation}: {exc}") from exc
        if not isinstance(meta, dict):
            raise DenseIndexUnusable("dense-index-unreadable", f"{table}/{generation}: meta is not an object")
        return meta

    def open(self, table: str, record: Mapping[str, Any]) -> "OpenDenseIndex":
        """Open the generation ``record`` (a manifest record) names, checking its meta against it.

        The rows themselves are checked by the reader (:meth:`OpenDenseIndex.batches`, digest).

        Raises
        ------
        DenseIndexUnusable
            See the class; never any other storage error.
        """
        generation = record.get("generation")
        if not isinstance(generation, str) or not _GEN.match(generation):
            raise DenseIndexUnusable("dense-index-missing", f"{table}: the release names no index generation")
        meta = self.meta(table, generation)
        if meta.get("format") != FORMAT:
            raise DenseIndexUnusable("dense-index-schema-mismatch",
                                     f"{table}/{generation} has format {meta.get('format')}, the reader {FORMAT}")
        for key in ("rows", "digest", "windows", "spec", "left_out"):
            if meta.get(key) != record.get(key):
                raise DenseIndexUnusable("dense-index-release-mismatch",
                                         f"{table}/{generation}: its {key} is not the one the release recorded")
        import lance

        path = self.path(table, generation)
        try:
            vectors = lance.dataset(str(path / VECTORS_DATASET))
            windows = lance.dataset(str(path / WINDOWS_DATASET)) if meta["windows"] else None
            for name, ds, n in (("vectors", vectors, meta["rows"]), ("windows", windows, meta["windows"])):
                if ds is None:
                    continue
                if ds.count_rows() != n:
                    raise DenseIndexUnusable("dense-index-release-mismatch",
                                             f"{table}/{generation}: {name} holds {ds.count_rows()} rows, not {n}")
                if n >= MIN_INDEX_ROWS and not any(i.name == INDEX_NAME for i in ds.describe_indices()):
                    raise DenseIndexUnusable("dense-index-unreadable", f"{table}/{generation}: {name} has no vector index")
        except DenseIndexUnusable:
            raise
        except BaseException as exc:  # noqa: BLE001 - Lance panics (a BaseException) on corrupt files
            raise unreadable(f"{table}/{generation}", exc) from exc
        return OpenDenseIndex(table, generation, meta, vectors, windows)

    def remove_generations(self, keep: Mapping[str, Iterable[str]]) -> list[str]:
        """Delete every generation not in ``keep`` (table → generation names); return
        ``table/generation`` of each removed."""
        removed = []
        for table in INDEXED_TABLES:
            wanted = set(keep.get(table, ()))
            d = self.root / table
            if not d.is_dir():
                continue
            for p in sorted(d.iterdir()):
                if p.name not in wanted and (_GEN.match(p.name) or p.name.endswith((".tmp", ".old"))):
                    shutil.rmtree(p, ignore_errors=True)
                    if _GEN.match(p.name):
                        removed.append(f"{table}/{p.name}")
        return removed


def _create_index(ds, spec: BuildSpec) -> None:
    kwargs: dict[str, Any] = {"num_partitions": spec.num_partitions}
    if spec.num_sub_vectors:
        kwargs["num_sub_vectors"] = spec.num_sub_vectors
    if spec.num_bits:
        kwargs["num_bits"] = spec.num_bits
    ds.create_index("vector", spec.index_type, name=INDEX_NAME, metric=spec.metric, **kwargs)


def unreadable(where: str, exc: BaseException) -> DenseIndexUnusable:
    """``exc``, a failure while reading the index at ``where``, as ``dense-index-unreadable`` (Lance
    panics with a BaseException on a corrupt file); an interrupt or a MemoryError is raised as is.
    The reason (``fabric status``'s ``dense_index_problems``, a pack's ``dense_fallback_reason``)
    quotes Lance's message without the Rust source location it ends with (a path of the machine
    that built Lance: :func:`~fabric_resources.storage_errors.storage_error_text`)."""
    if isinstance(exc, (KeyboardInterrupt, SystemExit, MemoryError)):
        raise exc
    return DenseIndexUnusable("dense-index-unreadable", f"{where}: {storage_error_text(exc, 300)}")


def kept_generations(manifests: Iterable[Mapping[str, Any]]) -> dict[str, set[str]]:
    """Table → the generations the given release manifests name (what retention keeps)."""
    out: dict[str, set[str]] = {}
    for m in manifests:
        for table, record in (m.get(MANIFEST_KEY) or {}).items():
            if isinstance(record, Mapping) and isinstance(record.get("generation"), str):
                out.setdefault(table, set()).add(record["generation"])
    return out


@dataclass
class OpenDenseIndex:
    """One opened generation: its two Lance datasets (``windows`` None when it has none)."""

    table: str
    generation: str
    meta: dict[str, Any]
    vectors: Any
    windows: Any

    def batches(self, columns: list[str], batch_rows: int = 8192) -> Iterator[pa.RecordBatch]:
        """Rows of ``vectors.lance`` in ``pos`` order, with their ``_rowaddr``; one data file at a
        time (:data:`FILE_ROWS`)."""
        yield from self.vectors.to_batches(columns=columns, batch_size=batch_rows, with_row_address=True,
                                           scan_in_order=True, fragment_readahead=1)

    def check_files(self) -> None:
        """Read what a search opens of each dataset: every data file's footer (``validate``) and the
        vector index's files (a few ms a table; the rows themselves: :func:`generation_digest`).

        Raises
        ------
        DenseIndexUnusable
            ``dense-index-unreadable``, quoting Lance.
        """
        for ds in (self.vectors, self.windows):
            if ds is None:
                continue
            try:
                ds.validate()
                if any(i.name == INDEX_NAME for i in ds.describe_indices()):
                    ds.stats.index_stats(INDEX_NAME)  # opens the index's files
            except BaseException as exc:  # noqa: BLE001 - Lance panics on corrupt files
                raise unreadable(f"{self.table}/{self.generation}", exc) from exc

    def window_batches(self, columns: list[str], batch_rows: int = 8192) -> Iterator[pa.RecordBatch]:
        """Rows of ``windows.lance`` in ``pos`` order, with their ``_rowaddr`` (none without windows)."""
        if self.windows is None:
            return
        yield from self.windows.to_batches(columns=columns, batch_size=batch_rows, with_row_address=True,
                                           scan_in_order=True, fragment_readahead=1)


class RowsDigest:
    """The vector digest (:mod:`fabric_resources.vector_digest`) of a generation's rows, fed batch
    by batch in ``pos`` order (:meth:`OpenDenseIndex.batches`), holding one parse's rows at a time.

    Raises (from :meth:`add`)
    ------
    DenseIndexUnusable
        ``dense-index-release-mismatch``: a parse's rows are not contiguous (generations are sorted
        by parse), or a parse outside ``parse_ids``; the reason names no parse.
    """

    def __init__(self, parse_ids: Iterable[str], label: str) -> None:
        self.parse_ids = frozenset(parse_ids)
        self.label = label
        self.per_parse: dict[str, str] = {}
        self._carry: pa.Table | None = None

    def _digest(self, t: pa.Table) -> None:
        from fabric_resources.vector_digest import parse_digests

        for pid, d in parse_digests(t.column("parse_id"), t.column("chunk_id"), t.column("model"),
                                    _vectors(t.column("vector"), t.num_rows)).items():
            # No parse ID in the reason: it reaches every reader's fallback reason, and the ID may be
            # a withheld source's (or bytes of a damaged file).
            if pid not in self.parse_ids:
                raise DenseIndexUnusable("dense-index-release-mismatch",
                                         f"{self.label}: holds rows of a parse the release does not name")
            if pid in self.per_parse:
                raise DenseIndexUnusable("dense-index-release-mismatch", f"{self.label}: a parse's rows are not "
                                         "contiguous (a generation is sorted by parse)")
            self.per_parse[pid] = d

    def add(self, batch: pa.RecordBatch) -> None:
        """Feed ``batch`` (``parse_id``, ``chunk_id``, ``model``, ``vector``, any other columns)."""
        if batch.num_rows == 0:
            return
        t = pa.Table.from_batches([batch.select(["parse_id", "chunk_id", "model", "vector"])])
        t = pa.concat_tables([self._carry, t]) if self._carry is not None else t
        # The batch's last parse may continue in the next batch: digest it once complete.
        start = pc.index(t.column("parse_id"), t.column("parse_id")[-1]).as_py()
        if start > 0:
            self._digest(t.slice(0, start))
        self._carry = t.slice(start)

    def finish(self) -> str:
        """The table digest over ``parse_ids`` (a parse with no row counts as empty)."""
        from fabric_resources.vector_digest import table_digest

        if self._carry is not None and self._carry.num_rows:
            self._digest(self._carry)
            self._carry = None
        return table_digest(self.per_parse, self.parse_ids)


def generation_digest(index: "OpenDenseIndex", parse_ids: Iterable[str]) -> str:
    """The vector digest of ``index``'s rows over ``parse_ids`` (every row read once, streamed).

    Raises
    ------
    DenseIndexUnusable
        See :class:`RowsDigest`.
    """
    digest = RowsDigest(parse_ids, f"{index.table}/{index.generation}")
    for batch in index.batches(["parse_id", "chunk_id", "model", "vector"]):
        digest.add(batch)
    return digest.finish()


def nearest(ds, query: np.ndarray, k: int, *, nprobes: int, refine_factor: int, ef: int,
            allow: bytes | None = None, block: bytes | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` rows of ``ds`` nearest ``query`` by its vector index: (``pos`` ``(m,) int64``,
    their stored vectors ``(m, 384) float32``), ``m <= k``, in Lance's (approximate) order.

    ``allow`` / ``block``: serialised row-address sets (``lance.dataset.serialize_row_addrs``) that
    Lance applies *before* ranking, so a row outside ``allow`` or inside ``block`` is never a
    candidate. With either, every IVF partition may be probed (``maximum_nprobes`` unbounded), so
    a selective filter still fills ``k`` when enough rows pass it. ``ef`` (HNSW indexes) is raised
    to ``k × refine_factor`` where it is smaller (Lance refuses a smaller one).
    """
    # HNSW answers at most ef of its candidates, and Lance asks it for k × refine_factor of them.
    nn: dict[str, Any] = {"column": "vector", "q": np.asarray(query, dtype=np.float32), "k": int(k),
                          "minimum_nprobes": int(nprobes), "refine_factor": int(refine_factor),
                          "ef": max(int(ef), int(k) * int(refine_factor)), "use_index": True}
    if allow is None and block is None:
        nn["maximum_nprobes"] = int(nprobes)
    scanner = ds.scanner(columns=["pos", "vector"], nearest=nn, prefilter=allow is not None or block is not None,
                         row_addr_allowlist=allow, row_addr_blocklist=block, disable_scoring_autoprojection=True)
    t = scanner.to_table()
    return (t.column("pos").to_numpy().astype(np.int64, copy=False), _vectors(t.column("vector"), t.num_rows))


def take_vectors(ds, positions: np.ndarray) -> np.ndarray:
    """Stored vectors of rows ``positions`` (``pos`` values, which are row offsets: generations are
    written once, in ``pos`` order), ``(len(positions), 384) float32`` in the given order."""
    if len(positions) == 0:
        return np.zeros((0, DENSE_DIM), dtype=np.float32)
    order = np.argsort(positions, kind="stable")
    t = ds.take(np.asarray(positions, dtype=np.int64)[order].tolist(), columns=["vector"])
    out = np.empty((len(positions), DENSE_DIM), dtype=np.float32)
    out[order] = _vectors(t.column("vector"), t.num_rows)
    return out
