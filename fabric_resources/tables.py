# Over 500 lines: every Lance read and write of the home goes through this one store (partition replace, compaction, versions, tags, the write lock, the removed-table guard), so the rules they share stay in one place.
"""Lance tables, one dataset per asset, every row keyed by ``parse_id``.

The tables live in a directory of the home or under an object-store URI (``s3://bucket/prefix``,
``storage.tables_uri``) opened with Lance's storage options. Writing a set of partitions replaces
exactly their rows in **one commit**: Lance's ``Update`` operation, which marks the partitions'
old rows deleted (deletion vectors on the fragments that hold them) and adds the new rows as new
fragments, committed against the version it was computed on (Lance's distributed-write API:
``write_fragments``, ``LanceFragment.delete``, ``LanceDataset.commit``). A writer that lost the
race to another commit on the same fragments gets Lance's retryable conflict and recomputes the
deletions on the newer version. So re-materializing is idempotent, and writers running at once — on
one host or several — each land whole or not at all; a delete then an append (two commits) let two
writers replacing the same parse both append (6 rows instead of 3). Two writers adding the same
*new* parse touch no common fragment, so Lance sees no conflict: local writers therefore take a
file lock per table from reading the partitions to the commit (writers of an object store on
several hosts are not serialised, and could each add it). Object stores need conditional
writes for this (S3 has them). Readers that must not see a write in progress read a pinned table
version (releases record them).

``merge_insert`` with ``when_not_matched_by_source_delete`` is one commit too, but it joins the
whole table on every write: 0.68 s against 0.02 s to replace one parse of a 100k-row vector table,
2.1 s against 0.5 s for 256 parses (measured here), and it needs keys unique per row.
"""

from __future__ import annotations

import json
import os
import random
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.compute as pc

from fabric_resources.identity import is_parse_id
from fabric_resources.locks import exclusive_lock
from fabric_resources.object_store import TableStoreUnavailableError, store_problem
from fabric_resources.schema import TABLES


#: Attempts of one partition replace against commits of other writers on the same fragments, with a
#: jittered backoff between them that grows to ``_MAX_BACKOFF_S``.
COMMIT_ATTEMPTS = 50
_MAX_BACKOFF_S = 1.0
#: Name of every table's BTREE index on ``parse_id`` (:meth:`TableStore.index_parse_ids`).
PARSE_ID_INDEX = "parse_id_idx"
#: Live rows from which a table gets its parse-ID index, and rows written since its last update
#: that bring it up to date. Below this a ``parse_id IN (…)`` filter scans the column in about a
#: millisecond; at 34,000 chunk rows (10,000 documents) a scan took 6.6 ms a read, the index 1.3 ms,
#: and bringing it up to date 0.12 s at 36,000 rows (docs/benchmarks.md, "Incremental updates").
PARSE_ID_INDEX_ROWS = 4096
#: Data fragments past which a table's small fragments are merged (:meth:`TableStore.merge_fragments`).
#: Every parse run appends one fragment per table (a full ingest of 10,000 documents left 45), and
#: every scan of a table pays per fragment: reading the ``parse_id`` column of 27,000 vector rows
#: took 21 ms in 45 fragments and 5 ms in 2 (docs/benchmarks.md, "Incremental updates").
MAX_FRAGMENTS = 16
#: A merge aims at this many fragments of equal rows (at least :data:`PARSE_ID_INDEX_ROWS` rows
#: each), and leaves fragments already that large alone: its cost follows the small fragments,
#: not the table, until the table has grown enough for its fragments to count as small again.
MERGED_FRAGMENTS = 8


class TableWriteConflict(RuntimeError):
    """A partition replace lost :data:`COMMIT_ATTEMPTS` races in a row (nothing of it was committed)."""


class TableRemovedError(RuntimeError):
    """A table the current release pins holds no file (its directory was removed): writing would
    create it afresh, and the next release would pin the new rows alone, every other parse's rows
    silently gone from it."""


class StorageOptionsError(ValueError):
    """A ``storage.tables_storage_options_file`` that is missing, not owner-only or not a JSON
    object of strings."""


def _in_list(parse_ids: Iterable[str]) -> str:
    ids = sorted(set(parse_ids))
    for p in ids:
        if not is_parse_id(p):
            # Parse IDs are hex digests; anything else must never reach a filter string.
            raise ValueError(f"not a parse ID: {p!r}")
    return ", ".join(f"'{p}'" for p in ids)


def _kept(batch: pa.RecordBatch, wanted: pa.Array, offset: int, with_offsets: bool) -> pa.RecordBatch | None:
    """The rows of ``batch`` (the first at live-row ``offset``) whose ``parse_id`` is in ``wanted``
    (with their ``_offset`` column when asked), or None when none is."""
    if with_offsets:
        batch = batch.append_column("_offset", pa.array(range(offset, offset + batch.num_rows), pa.int64()))
    mask = pc.is_in(batch.column("parse_id"), wanted)
    if pc.all(mask).as_py() is False:
        batch = batch.filter(mask)
    return batch if batch.num_rows else None


def live_rows(fragment: lance.LanceFragment) -> int:
    """The live rows of ``fragment`` as its manifest records them (its files are not read)."""
    meta = fragment.metadata
    deleted = meta.deletion_file.num_deleted_rows if meta.deletion_file is not None else 0
    return int(meta.physical_rows) - int(deleted or 0)


def is_remote(uri: str | os.PathLike) -> bool:
    """True for an object-store URI (``s3://…``); a path or ``file://`` URI is local."""
    text = str(uri)
    return "://" in text and not text.startswith("file://")


def load_storage_options_file(path: str | os.PathLike) -> dict[str, str]:
    """The JSON object of strings in ``path`` (object-store credentials, so owner-only like ssh keys).

    Raises
    ------
    StorageOptionsError
        If the file is absent, not a regular file, grants any permission to group or others, or
        is not a JSON object whose values are strings. The message never shows a value.
    """
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        raise StorageOptionsError(f"storage options file {p}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise StorageOptionsError(f"storage options file {p} is not a regular file")
    if st.st_mode & 0o077:
        raise StorageOptionsError(f"storage options file {p} has mode {stat.S_IMODE(st.st_mode):o}; "
                                  "it must be owner-only (chmod 600)")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise StorageOptionsError(f"storage options file {p} is not valid JSON") from None
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise StorageOptionsError(f"storage options file {p} must hold a JSON object of strings")
    return data


def table_lock_name(name: str) -> str:
    """The catalog lock name (``Catalog.exclusive``) that serialises writers of table ``name``."""
    return "table-" + name.replace("_", "-")


class TableStore:
    """The Lance datasets under ``root`` (one per name in ``schema.TABLES``): a local directory
    (created) or an object-store URI, opened with ``storage_options``."""

    def __init__(self, root: str | os.PathLike, storage_options: dict[str, str] | None = None,
                 remote_write_lock: Callable[[str], AbstractContextManager[None]] | None = None) -> None:
        """``remote_write_lock(table)``: the lock that serialises writers of an object-store table
        (the home passes the catalog's named lock, which on PostgreSQL holds across hosts); without
        one, writers of an object store are not serialised."""
        self.remote_write_lock = remote_write_lock
        text = str(root)
        self.remote = is_remote(text)
        self.root: Path | str = text.rstrip("/") if self.remote else Path(text.removeprefix("file://"))
        self.storage_options = dict(storage_options or {})
        self._known: set[str] = set()  # tables seen to exist (tables are never dropped)
        if not self.remote:
            self.root.mkdir(parents=True, exist_ok=True)

    def uri(self, name: str) -> str:
        return f"{self.root}/{name}.lance" if self.remote else str(self.root / f"{name}.lance")

    def dataset(self, name: str, version: int | None = None) -> lance.LanceDataset | None:
        """Table ``name`` at ``version`` (default latest), or None if it was never written (a local
        directory that holds nothing yet: its creator has not committed).

        Raises
        ------
        ValueError
            If the table exists but not at ``version``, or cannot be opened (Lance's error); or a
            ``version`` is asked of a local table that holds no file (its directory removed: a
            release pinned it, so it was written).
        """
        if not self.remote and name not in self._known and not self._local_has_files(name):
            if version is not None:
                raise ValueError(f"{name} version {version} was not found: the table holds no file")
            return None
        try:
            ds = lance.dataset(self.uri(name), version=version, storage_options=self.storage_options or None)
        except ValueError as exc:
            # Only a remote table never written reads as absent; a pinned version that is gone, or
            # a local table with files but no readable version, is damage and says so.
            if self.remote and version is None and name not in self._known and "was not found" in str(exc):
                return None
            raise
        self._known.add(name)
        return ds

    def _local_has_files(self, name: str) -> bool:
        """A local table directory holds something (a creator makes the directory before it commits
        version 1, and writes no data file for an empty table)."""
        path = self.root / f"{name}.lance"
        for folder in (path / "_versions", path / "data"):
            try:
                with os.scandir(folder) as entries:  # the first entry is enough (a table keeps many versions)
                    if next(entries, None) is not None:
                        return True
            except (FileNotFoundError, NotADirectoryError):
                continue
        return False

    def check_available(self) -> None:
        """Raise :class:`TableStoreUnavailableError` when the tables are on an object store that
        cannot be used (one request; a store with no table yet is fine). A local store passes.

        A missing bucket reads to Lance as a table never written, so without this an ingest ran
        its whole pipeline (minutes of retried writes) before failing with a traceback.
        """
        if not self.remote:
            return
        try:
            lance.dataset(self.uri("units"), storage_options=self.storage_options or None)
        except (OSError, ValueError) as exc:
            problem = store_problem(exc)
            if problem is not None:
                raise TableStoreUnavailableError(
                    f"the tables at {self.root} cannot be used: {problem}; "
                    "check storage.tables_uri, the bucket and its credentials (docs/scale.md)",
                    problem=problem) from None

    def exists(self, name: str) -> bool:
        """Whether table ``name`` was ever written (local: files in its directory, without opening it)."""
        if not self.remote:
            return name in self._known or self._local_has_files(name)
        return name in self._known or self.dataset(name) is not None

    def _ensure_table(self, name: str) -> None:
        """Create table ``name`` empty unless it exists.

        The create is one commit of version 1 that is never retried: Lance's ``mode="create"``
        retries a creator that lost the race as an ``Overwrite`` on top of the winner, which erases
        whatever another writer committed in between (measured on S3: two creators, a version 2
        that overwrote version 1). A losing creator here fails, finds the table, and goes on.
        """
        if name not in TABLES:
            raise KeyError(f"unknown table {name!r}")
        if self._opens(name):
            return
        try:
            # V2 manifest paths: opening the latest version on an object store lists one prefix
            # instead of every version (Lance's docs).
            lance.LanceDataset.commit(self.uri(name), lance.LanceOperation.Overwrite(TABLES[name], []),
                                      storage_options=self.storage_options or None,
                                      enable_v2_manifest_paths=True, max_retries=0)
        except (OSError, ValueError):
            for _ in range(100):  # the winner's version 1 may still be on its way (local rename)
                if self._opens(name):
                    break
                time.sleep(0.05)
            else:
                raise
        self._known.add(name)

    def _opens(self, name: str) -> bool:
        try:
            return self.dataset(name) is not None
        except ValueError:  # a local creator's manifest not yet in place
            return False

    def replace_partitions(self, name: str, parse_ids: Iterable[str], rows: pa.Table) -> int:
        """Replace all rows of ``parse_ids`` in table ``name`` by ``rows`` in one Lance commit;
        return the version that holds them (the current one when nothing changed).

        Raises
        ------
        ValueError
            If ``rows`` holds a parse ID outside ``parse_ids`` or a malformed parse ID.
        TableWriteConflict
            If other writers' commits won :data:`COMMIT_ATTEMPTS` times in a row.
        """
        from lance.fragment import write_fragments

        ids = set(parse_ids)
        schema = TABLES[name]
        rows = rows.cast(schema)
        stray = set(rows.column("parse_id").to_pylist()) - ids
        if stray:
            raise ValueError(f"rows for parse IDs not being replaced: {sorted(stray)[:3]}")
        flt = f"parse_id IN ({_in_list(ids)})" if ids else None
        self._ensure_table(name)
        options = self.storage_options or None
        base = self.dataset(name)
        # Written once, uncommitted; every attempt commits these same files.
        new = write_fragments(rows, base, schema=schema, storage_options=options) if rows.num_rows else []
        with self._write_lock(name):
            return self._commit_replace(name, flt, new)

    def _write_lock(self, name: str):
        """One local writer at a time between reading a table's partitions and committing their
        replacement: two writers adding the *same new* partition modify no common fragment, so
        Lance sees no conflict and both land (the rows doubled, seen when the daemon's parse run and
        `fabric ingest` ran one parse at once). Writers of an object store hold
        ``remote_write_lock(name)`` when the store was given one (the file lock would bind one host)."""
        if not self.remote:
            return exclusive_lock(self.root / f"{name}.lance.write.lock")
        return self.remote_write_lock(name) if self.remote_write_lock is not None else nullcontext()

    def _commit_replace(self, name: str, flt: str | None, new: list) -> int:
        from lance.commit import CommitConflictError

        options = self.storage_options or None
        for attempt in range(COMMIT_ATTEMPTS):
            ds = self.dataset(name)  # the latest: a version read before the lock misses a writer's rows
            removed, updated = [], []
            if flt is not None:
                # One scan finds the fragments holding the partitions' rows (row address = fragment
                # ID << 32 | offset); only those get a new deletion vector.
                hits = ds.to_table(columns=[], filter=flt, with_row_address=True).column("_rowaddr")
                for fragment_id in sorted(set(pc.shift_right(hits, 32).to_pylist())):
                    metadata = ds.get_fragment(fragment_id).delete(flt)
                    if metadata is None:
                        removed.append(fragment_id)
                    else:
                        updated.append(metadata)
            if not (removed or updated or new):
                return int(ds.version)
            operation = lance.LanceOperation.Update(removed_fragment_ids=removed, updated_fragments=updated,
                                                    new_fragments=new)
            try:
                return int(lance.LanceDataset.commit(self.uri(name), operation, read_version=ds.version,
                                                     storage_options=options).version)
            except CommitConflictError:
                time.sleep(random.uniform(0, min(_MAX_BACKOFF_S, 0.01 * 2 ** attempt)))
        raise TableWriteConflict(f"{name}: {COMMIT_ATTEMPTS} commits lost to concurrent writers")

    def version(self, name: str) -> int | None:
        ds = self.dataset(name)
        return int(ds.version) if ds is not None else None

    def read(
        self,
        name: str,
        *,
        parse_ids: Iterable[str] | None = None,
        version: int | None = None,
        columns: list[str] | None = None,
    ) -> pa.Table:
        """Rows of ``name`` (optionally only ``parse_ids``) at ``version`` (default latest).

        Raises
        ------
        ValueError
            If a parse ID is not a hex digest.
        """
        flt = f"parse_id IN ({_in_list(parse_ids)})" if parse_ids is not None else None
        schema = TABLES[name]
        empty = schema.empty_table().select(columns) if columns else schema.empty_table()
        if flt == "parse_id IN ()":
            return empty
        ds = self.dataset(name, version)
        if ds is None:
            return empty
        return ds.to_table(columns=columns, filter=flt)

    def read_batches(
        self,
        name: str,
        *,
        parse_ids: Iterable[str],
        version: int | None = None,
        columns: list[str],
        batch_rows: int = 8192,
    ) -> Iterator[pa.RecordBatch]:
        """:meth:`read` of ``parse_ids`` as a stream of record batches of at most ``batch_rows``
        rows: a reader that keeps few of the rows never holds them all.

        Raises
        ------
        ValueError
            If a parse ID is not a hex digest.
        """
        flt = f"parse_id IN ({_in_list(parse_ids)})"
        if flt == "parse_id IN ()":
            return
        ds = self.dataset(name, version)
        if ds is None:
            return
        yield from ds.to_batches(columns=columns, filter=flt, batch_size=batch_rows)

    def parse_ids_written_after(self, name: str, fragment_id: int | None) -> tuple[set[str], int | None]:
        """The parse IDs of the rows of ``name`` (latest version) in data fragments numbered above
        ``fragment_id`` (None: every fragment), and the highest fragment number there now (None:
        no fragment, or no table).

        Lance numbers a table's fragments in commit order and never reuses a number (a removed
        fragment's number stays taken; a compaction writes new numbers), so a caller that keeps the
        returned number reads next time only the fragments committed since.
        """
        ds = self.dataset(name)
        if ds is None:
            return set(), fragment_id
        fragments = ds.get_fragments()
        newest = max((f.fragment_id for f in fragments), default=None)
        fresh = [f for f in fragments if fragment_id is None or f.fragment_id > fragment_id]
        if not fresh:
            return set(), newest if newest is not None else fragment_id
        ids = ds.scanner(columns=["parse_id"], fragments=fresh).to_table().column("parse_id")
        return set(pc.unique(ids).to_pylist()), newest

    def parse_ids_rewritten_since(self, name: str, version: int) -> set[str]:
        """The parse IDs with rows at ``version`` of ``name`` whose rows in the latest version are
        not those: some sit in a fragment ``version`` does not have (written again since, e.g. a
        re-parse of the same bytes, whose re-encoded vectors may differ in the last bit), or their
        count differs (rows deleted since). Reads the ``parse_id`` column of both versions.

        Raises
        ------
        TableStoreUnavailableError, OSError, ValueError, RuntimeError
            As any scan of the table.
        """
        then = self.parse_row_counts(name, version)
        if not then:
            return set()
        old = {f.fragment_id for f in self.dataset(name, version).get_fragments()}
        latest = self.dataset(name)
        fresh = [f for f in latest.get_fragments() if f.fragment_id not in old]
        written = set()
        if fresh:
            ids = latest.scanner(columns=["parse_id"], fragments=fresh).to_table().column("parse_id")
            written = set(pc.unique(ids).to_pylist())
        now = self.parse_row_counts(name)
        return {p for p, n in then.items() if p in written or now.get(p) != n}

    def count_rows(self, name: str, version: int) -> int:
        """Rows of ``name`` at ``version`` (all parses; from the manifest, no data read)."""
        ds = self.dataset(name, version)
        return ds.count_rows() if ds is not None else 0

    def read_active_batches(
        self, name: str, version: int | None, parse_ids: Iterable[str], columns: list[str], batch_rows: int = 8192,
        *, with_offsets: bool = False, unreadable_ok: Callable[[lance.LanceDataset], Iterable[int]] | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Rows of ``name`` at ``version`` whose ``parse_id`` is in ``parse_ids``, as record batches of
        ``columns`` (nothing when ``version`` is None or no parse is given).

        Streams: the parse filter runs batch by batch, so a reader that keeps a few of the table's
        parses never holds the whole table (the query side reads 100k-row tables this way).
        ``with_offsets``: a last column ``_offset`` (int64) holds each row's offset among the live
        rows of that version in scan order — what :meth:`take` reads by.

        ``unreadable_ok``: asked with the dataset when the scan fails on the data (not the store),
        it names the fragments the reader may read on without (those holding none of its rows:
        :func:`fabric_resources.fragment_damage.unseen_check`); the rest are then read fragment by
        fragment, offsets still counting the skipped fragments' rows. When it names none, or
        without it, the scan's error is raised.
        """
        wanted = pa.array(sorted(set(parse_ids)), pa.string())
        if version is None or len(wanted) == 0:
            return
        ds = self.dataset(name, version)
        if ds is None:
            return
        read = sorted(set(columns) | {"parse_id"})
        out = [*columns, "_offset"] if with_offsets else columns
        seen = 0  # live rows of the version passed so far, in scan order
        try:
            for batch in ds.to_batches(columns=read, batch_size=batch_rows, scan_in_order=True):
                kept = _kept(batch, wanted, seen, with_offsets)
                seen += batch.num_rows
                if kept is not None:
                    yield kept.select(out)
            return
        except (OSError, ValueError, RuntimeError) as exc:  # RuntimeError: "Encountered corrupt file"
            if unreadable_ok is None or store_problem(exc) is not None:
                raise
            skip = set(unreadable_ok(ds))
            if not skip:
                raise
        # A rare path (a data file lost or cut short): the fragments after the rows already
        # yielded, one scan each, the unreadable ones counted by their manifest's rows only.
        start = 0
        for fragment in ds.get_fragments():
            n = live_rows(fragment)
            if fragment.fragment_id in skip or start + n <= seen:
                start += n
                continue
            at = start
            for batch in ds.scanner(columns=read, fragments=[fragment], batch_size=batch_rows,
                                    scan_in_order=True).to_batches():
                if at + batch.num_rows <= seen:  # yielded before the scan failed
                    at += batch.num_rows
                    continue
                if at < seen:
                    batch, at = batch.slice(seen - at), seen
                kept = _kept(batch, wanted, at, with_offsets)
                at += batch.num_rows
                if kept is not None:
                    yield kept.select(out)
            start += n

    def take(self, name: str, version: int, offsets: Iterable[int], columns: list[str]) -> pa.Table:
        """Rows of ``name`` at ``version`` at ``offsets`` (``_offset`` of :meth:`read_active_batches`),
        in the order given: a few rows of a large pinned table without scanning it."""
        ds = self.dataset(name, version)
        if ds is None:
            raise ValueError(f"table {name} was never written")
        return ds.take(list(offsets), columns=columns)

    def read_active(self, name: str, version: int | None, parse_ids: Iterable[str], columns: list[str], *,
                    with_offsets: bool = False,
                    unreadable_ok: Callable[[lance.LanceDataset], Iterable[int]] | None = None) -> pa.Table:
        """:meth:`read_active_batches` as one table (``columns`` of the table's schema, possibly empty)."""
        batches = list(self.read_active_batches(name, version, parse_ids, columns, with_offsets=with_offsets,
                                                unreadable_ok=unreadable_ok))
        if batches:
            return pa.Table.from_batches(batches)
        empty = TABLES[name].empty_table().select(columns)
        return empty.append_column("_offset", pa.array([], pa.int64())) if with_offsets else empty

    # -- lifecycle (purge, retention, snapshots) ------------------------------
    def tags(self, name: str) -> dict[str, int]:
        """Lance tags of ``name``: ``{tag: version}`` (snapshots pin table versions with tags)."""
        if not self.exists(name):
            return {}
        return {tag: int(v["version"]) for tag, v in self.dataset(name).tags.list().items()}

    def delete_partitions(self, name: str, parse_ids: Iterable[str]) -> int | None:
        """Delete every row of ``parse_ids`` from the latest version of ``name``; return the version
        after it (None when the table does not exist). Older versions still hold the rows until
        :meth:`compact_and_forget` runs.

        Raises
        ------
        ValueError
            If a parse ID is not a hex digest.
        """
        ids = set(parse_ids)
        if not self.exists(name):
            return None
        ds = self.dataset(name)
        if ids:
            ds.delete(f"parse_id IN ({_in_list(ids)})")
        return int(self.dataset(name).version)

    def damaged_fragments(self, name: str) -> dict[int, str]:
        """Fragment ID → ``"missing"`` or ``"damaged"`` for each fragment of the latest version of
        ``name`` whose data or deletion file Lance cannot read: missing, shorter than the manifest
        records, or without a readable footer (``LanceFragment.validate``, the per-fragment form of
        the check ``fabric status`` runs). ``{}`` when the table was never written. Bytes altered
        inside a file are not seen (the vector digests and chunk text hashes catch those on read).

        Raises
        ------
        TableStoreUnavailableError
            If the object store itself cannot be used (nothing is said about the data then).
        ValueError, OSError, RuntimeError
            If the table's manifest cannot be read (Lance's errors; a fragment list is all this
            can repair).
        """
        ds = self.dataset(name)
        out: dict[int, str] = {}
        for fragment in ([] if ds is None else ds.get_fragments()):
            try:
                fragment.validate()
            except (OSError, ValueError, RuntimeError) as exc:  # RuntimeError: "Encountered corrupt file"
                problem = store_problem(exc)
                if problem is not None:
                    raise TableStoreUnavailableError(f"the tables at {self.root} cannot be used: {problem}",
                                                     problem=problem) from None
                out[fragment.fragment_id] = "missing" if "not found" in str(exc).lower() else "damaged"
        return out

    def version_problem(self, name: str, version: int) -> str | None:
        """Why table ``name`` cannot be read at ``version``, or None: ``"not found"`` or the error's
        type when its manifest cannot be opened; ``"data file missing"`` / ``"data file damaged"``
        when one of its data files is missing, shorter than the manifest records or has no
        readable footer (Lance's ``validate``, ~1 ms a table locally); ``"index <names> damaged"``
        (:meth:`damaged_indices`). Bytes altered inside a data file are not seen here.

        Raises
        ------
        TableStoreUnavailableError
            If the object store itself cannot be used (nothing is said about the data then).
        """
        opened = False
        try:
            ds = self.dataset(name, version)
            opened = True
            if ds is None:
                return None
            ds.validate()
            damaged = self.damaged_indices(name, version)
            return f"index {', '.join(damaged)} damaged" if damaged else None
        except TableStoreUnavailableError:
            raise
        except (ValueError, OSError, RuntimeError) as exc:  # RuntimeError: Lance's "Encountered corrupt file"
            problem = store_problem(exc)
            if problem is not None:
                raise TableStoreUnavailableError(f"the tables at {self.root} cannot be used: {problem}",
                                                 problem=problem) from None
            missing = "not found" in str(exc).lower()
            if opened:  # the manifest read, a data file not
                return "data file " + ("missing" if missing else "damaged")
            return "not found" if missing else type(exc).__name__

    def damaged_indices(self, name: str, version: int | None = None) -> list[str]:
        """The names of the indexes of ``name`` at ``version`` (default latest) whose files Lance
        cannot read (missing, emptied, cut short). ``validate`` reads no index file, yet every
        read or write that filters by ``parse_id`` goes through its index and fails on one. ``[]``
        when the table was never written.

        Raises
        ------
        TableStoreUnavailableError
            If the object store itself cannot be used.
        ValueError, OSError, RuntimeError
            If the table's manifest cannot be read.
        """
        ds = self.dataset(name, version)
        out = []
        for index in ([] if ds is None else ds.list_indices()):
            try:
                ds.stats.index_stats(index["name"])  # opens the index's files (its pages are not read)
            except (OSError, ValueError, RuntimeError) as exc:
                problem = store_problem(exc)
                if problem is not None:
                    raise TableStoreUnavailableError(f"the tables at {self.root} cannot be used: {problem}",
                                                     problem=problem) from None
                out.append(index["name"])
        return sorted(out)

    def drop_indices(self, name: str, index_names: Iterable[str]) -> int:
        """Drop the indexes ``index_names`` of the latest version of ``name`` (one commit each,
        without reading them); return the new version. An index is an access path, never a source
        of truth: the rows stay, and :meth:`index_parse_ids` builds the parse-ID index again."""
        with self._write_lock(name):
            for index_name in sorted(set(index_names)):
                self.dataset(name).drop_index(index_name)
            return int(self.dataset(name).version)

    def fragment_parse_ids(self, name: str, skip: Iterable[int] = ()) -> list[tuple[int, list[str]]]:
        """``(fragment ID, parse ID of each live row in row order)`` for every fragment of the
        latest version of ``name`` but those in ``skip``, in fragment-ID order (the order writes
        and merges created them in). ``[]`` when the table was never written."""
        ds = self.dataset(name)
        skipped = set(skip)
        out = []
        for fragment in ([] if ds is None else ds.get_fragments()):
            if fragment.fragment_id in skipped:
                continue
            column = fragment.to_table(columns=["parse_id"]).column("parse_id")
            out.append((fragment.fragment_id, column.to_pylist()))
        return out

    def parse_row_counts(self, name: str, version: int | None = None) -> dict[str, int]:
        """Parse ID → its live rows in ``name`` at ``version`` (the latest by default); ``{}`` when
        the table was never written. Reads the ``parse_id`` column only, streamed (~6 ms for 11k
        rows locally).

        Raises
        ------
        TableStoreUnavailableError, OSError, ValueError, RuntimeError
            As any scan of the table (its store cannot be used, a data file cannot be read).
        """
        ds = self.dataset(name, version)
        if ds is None:
            return {}
        # Streamed (the column of a million chunks stays out of memory); each batch's counts are
        # summed in Arrow and turned into Python objects once: merging them parse by parse in
        # Python was most of this at 100k parses.
        parts = [pc.value_counts(batch.column("parse_id"))
                 for batch in ds.to_batches(columns=["parse_id"], batch_size=65536) if batch.num_rows]
        if not parts:
            return {}
        vc = pa.Table.from_arrays([pa.concat_arrays([p.field("values") for p in parts]),
                                   pa.concat_arrays([p.field("counts") for p in parts])], names=["parse_id", "n"])
        n = "n"
        if len(parts) > 1:  # a parse's rows may lie in several batches
            vc, n = vc.group_by("parse_id").aggregate([("n", "sum")]), "n_sum"
        return dict(zip(vc.column("parse_id").to_pylist(), vc.column(n).to_pylist()))

    def drop_fragments(self, name: str, fragment_ids: Iterable[int]) -> int:
        """Remove the fragments ``fragment_ids`` from the latest version of ``name`` in one commit,
        without reading them (their files may be unreadable); return the new version. Their rows
        are gone from it; older versions keep referencing the files.

        Raises
        ------
        KeyError
            If a fragment ID is not one of the latest version's (nothing is committed).
        """
        ids = sorted(set(fragment_ids))
        with self._write_lock(name):
            ds = self.dataset(name)
            present = {f.fragment_id for f in ds.get_fragments()}
            unknown = [i for i in ids if i not in present]
            if unknown:
                raise KeyError(f"{name}: no fragment {unknown[0]} in version {ds.version}")
            if not ids:
                return int(ds.version)
            operation = lance.LanceOperation.Update(removed_fragment_ids=ids)
            return int(lance.LanceDataset.commit(self.uri(name), operation, read_version=ds.version,
                                                 storage_options=self.storage_options or None).version)

    def index_parse_ids(self, name: str, min_rows: int | None = None) -> str | None:
        """Keep table ``name``'s BTREE index on ``parse_id`` in step with its rows, so that reading
        or replacing a few parses' rows looks them up instead of scanning every fragment's
        ``parse_id`` column (which grows with the corpus). Creates it once the table holds
        ``min_rows`` live rows (default :data:`PARSE_ID_INDEX_ROWS`); brings it up to date (Lance's
        ``optimize_indices``) once ``min_rows`` rows sit in fragments it does not cover. Returns
        ``"created"``, ``"updated"`` or None (nothing to do, no table, or a concurrent commit won:
        left as it was).

        The index is an access path, never a source of truth: Lance answers a filter from it for
        the fragments it covers, scans the others, and masks deleted rows either way; each call is
        one commit of a new table version with the same rows.
        """
        from lance.commit import CommitConflictError

        min_rows = PARSE_ID_INDEX_ROWS if min_rows is None else min_rows
        ds = self.dataset(name)
        if ds is None:
            return None
        try:
            if not any(i["name"] == PARSE_ID_INDEX for i in ds.list_indices()):
                if ds.count_rows() < min_rows:
                    return None
                ds.create_scalar_index("parse_id", "BTREE", name=PARSE_ID_INDEX)
                return "created"
            if ds.stats.index_stats(PARSE_ID_INDEX)["num_unindexed_rows"] < min_rows:
                return None
            ds.optimize.optimize_indices(index_names=[PARSE_ID_INDEX])
            return "updated"
        except (CommitConflictError, OSError):
            # Another writer committed meanwhile (Lance reports some conflicts as IO errors): the
            # next call tries again; the rows are the same either way.
            return None

    def merge_fragments(self, name: str, max_fragments: int | None = None) -> bool:
        """Merge the small data fragments of ``name`` (latest version) once it has more than
        ``max_fragments`` (default :data:`MAX_FRAGMENTS`); True when a merge was committed (a new
        table version of the same rows, the parse-ID index remapped onto it by Lance).

        Fragments of fewer than ``max(PARSE_ID_INDEX_ROWS, rows // MERGED_FRAGMENTS)`` rows are
        merged (Lance's ``compact_files`` with that ``target_rows_per_fragment``; Lance's default
        deletion threshold); larger ones are left as they are. False when there is nothing to do, no
        table, or another writer's commit won (the next call tries again; the rows are the same
        either way).
        """
        from lance.commit import CommitConflictError

        max_fragments = MAX_FRAGMENTS if max_fragments is None else max_fragments
        ds = self.dataset(name)
        if ds is None or len(ds.get_fragments()) <= max_fragments:
            return False
        target = max(PARSE_ID_INDEX_ROWS, ds.count_rows() // MERGED_FRAGMENTS)
        try:
            done = ds.optimize.compact_files(target_rows_per_fragment=target)
        except (CommitConflictError, OSError):  # as in index_parse_ids
            return False
        return done.fragments_removed > 0

    def compact(self, name: str) -> int | None:
        """Rewrite every data file of ``name`` that holds a deleted row (Lance keeps deleted rows in
        their files, masked by deletion files, until a compaction materialises the deletions), and
        merge small files; return the latest version (None when the table does not exist)."""
        if not self.exists(name):
            return None
        ds = self.dataset(name)
        # Threshold 0: any deleted row at all rewrites its file (Lance's default waits for 10 %).
        ds.optimize.compact_files(materialize_deletions=True, materialize_deletions_threshold=0.0)
        return int(self.dataset(name).version)

    def forget_versions(self, name: str, keep: Iterable[int] = (), *, delete_unverified: bool = True) -> int:
        """Remove every version of ``name`` but the latest, those in ``keep`` and tagged ones, and the
        files only they reference; return the bytes removed.

        With ``delete_unverified`` (a purge) files no version references are removed too, however
        young (Lance otherwise keeps them 7 days, as they may be a concurrent writer's), so no writer
        may be adding to the table meanwhile: the purge holds the ingest and activation locks and
        refuses while a Dagster run is in progress. Without it (retention, which may run beside
        parse runs) only files of the removed versions go.
        """
        if not self.exists(name):
            return 0
        import datetime

        ds = self.dataset(name)
        keep = set(keep) | set(self.tags(name).values()) | {int(ds.version)}
        doomed = [int(v["version"]) for v in ds.versions() if int(v["version"]) not in keep]
        if not doomed:
            return 0
        if not (keep - {int(ds.version)}):
            stats = ds.cleanup_old_versions(older_than=datetime.timedelta(0), delete_unverified=delete_unverified)
        else:
            stats = ds.cleanup_old_versions(versions=doomed, delete_unverified=delete_unverified)
        return int(stats.bytes_removed)
