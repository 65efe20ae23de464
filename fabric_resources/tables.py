"""Lance tables, one dataset per asset, every row keyed by ``parse_id``.

The tables live in a directory of the home or under an object-store URI (``s3://bucket/prefix``,
``storage.tables_uri``) opened with Lance's storage options. Writing a set of partitions replaces
exactly their rows in **one commit**: a ``merge_insert`` on the table's key columns
(``schema.TABLE_KEYS``) that updates matched rows, inserts new ones and deletes the partitions'
rows that are not written again (``when_not_matched_by_source_delete``). So re-materializing is
idempotent, and writers running at once — on one host or several — each commit whole: a commit
that lost the race is retried by Lance against the newer version (object stores need conditional
writes for that; S3 has them), never interleaved as a delete and an append would be (two writers
replacing the same parse that way left both appends). Readers that must not see a write in
progress read a pinned table version (releases record them).
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from functools import cached_property
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.compute as pc

from fabric_resources.schema import TABLE_KEYS, TABLES

_PARSE_ID = re.compile(r"[0-9a-f]{16,64}")


class StorageOptionsError(ValueError):
    """A ``storage.tables_storage_options_file`` that is missing, not owner-only or not a JSON
    object of strings."""


def _in_list(parse_ids: Iterable[str]) -> str:
    ids = sorted(set(parse_ids))
    for p in ids:
        if not _PARSE_ID.fullmatch(p):
            # Parse IDs are hex digests; anything else must never reach a filter string.
            raise ValueError(f"not a parse ID: {p!r}")
    return ", ".join(f"'{p}'" for p in ids)


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


class TableStore:
    """The Lance datasets under ``root`` (one per name in ``schema.TABLES``): a local directory
    (created) or an object-store URI, opened with ``storage_options``."""

    def __init__(self, root: str | os.PathLike, storage_options: dict[str, str] | None = None) -> None:
        text = str(root)
        self.remote = is_remote(text)
        self.root: Path | str = text.rstrip("/") if self.remote else Path(text.removeprefix("file://"))
        self.storage_options = dict(storage_options or {})
        self._known: set[str] = set()  # tables seen to exist (tables are never dropped)
        if not self.remote:
            self.root.mkdir(parents=True, exist_ok=True)

    @cached_property
    def _db(self):
        # Writers only: importing lancedb costs the read side ~30 MB of RSS for nothing.
        import lancedb

        return lancedb.connect(str(self.root), storage_options=self.storage_options or None)

    def uri(self, name: str) -> str:
        return f"{self.root}/{name}.lance" if self.remote else str(self.root / f"{name}.lance")

    def dataset(self, name: str, version: int | None = None) -> lance.LanceDataset | None:
        """Table ``name`` at ``version`` (default latest), or None if it was never written.

        Raises
        ------
        ValueError
            If the table exists but not at ``version`` (Lance's error).
        """
        if not self.remote:
            if not (self.root / f"{name}.lance").exists():
                return None
            return lance.dataset(self.uri(name), version=version)
        try:
            ds = lance.dataset(self.uri(name), version=version, storage_options=self.storage_options or None)
        except ValueError as exc:
            if name not in self._known and "was not found" in str(exc):
                return None
            raise
        self._known.add(name)
        return ds

    def exists(self, name: str) -> bool:
        if not self.remote:
            return (self.root / f"{name}.lance").exists()
        return name in self._known or self.dataset(name) is not None

    def _table(self, name: str):
        if name not in TABLES:
            raise KeyError(f"unknown table {name!r}")
        if self.exists(name):
            return self._db.open_table(name)
        try:
            table = self._db.create_table(name, schema=TABLES[name])
        except (ValueError, OSError):  # created by a concurrent writer (its commit won)
            if not self.exists(name):
                raise
            return self._db.open_table(name)
        self._known.add(name)
        return table

    def replace_partitions(self, name: str, parse_ids: Iterable[str], rows: pa.Table) -> int:
        """Replace all rows of ``parse_ids`` in table ``name`` by ``rows`` in one Lance commit;
        return the new version.

        Raises
        ------
        ValueError
            If ``rows`` holds a parse ID outside ``parse_ids`` or a malformed parse ID, or two
            rows with the same key (``schema.TABLE_KEYS``: a fault of the writer, as IDs are
            derived to be unique).
        """
        ids = set(parse_ids)
        rows = rows.cast(TABLES[name])
        stray = set(rows.column("parse_id").to_pylist()) - ids
        if stray:
            raise ValueError(f"rows for parse IDs not being replaced: {sorted(stray)[:3]}")
        keys = list(TABLE_KEYS[name])
        flt = f"parse_id IN ({_in_list(ids)})" if ids else None
        if rows.num_rows and rows.group_by(keys).aggregate([]).num_rows != rows.num_rows:
            raise ValueError(f"rows with the same key {tuple(keys)} in a write to {name}")
        table = self._table(name)
        if flt is None:
            return int(table.version)
        result = (table.merge_insert(keys).when_matched_update_all().when_not_matched_insert_all()
                  .when_not_matched_by_source_delete(flt).execute(rows))
        return int(result.version)

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

    def count_rows(self, name: str, version: int) -> int:
        """Rows of ``name`` at ``version`` (all parses; from the manifest, no data read)."""
        ds = self.dataset(name, version)
        return ds.count_rows() if ds is not None else 0

    def read_active_batches(
        self, name: str, version: int | None, parse_ids: Iterable[str], columns: list[str], batch_rows: int = 8192,
    ) -> Iterator[pa.RecordBatch]:
        """Rows of ``name`` at ``version`` whose ``parse_id`` is in ``parse_ids``, as record batches of
        ``columns`` (nothing when ``version`` is None or no parse is given).

        Streams: the parse filter runs batch by batch, so a reader that keeps a few of the table's
        parses never holds the whole table (the query side reads 100k-row tables this way).
        """
        wanted = pa.array(sorted(set(parse_ids)), pa.string())
        if version is None or len(wanted) == 0:
            return
        ds = self.dataset(name, version)
        if ds is None:
            return
        read = sorted(set(columns) | {"parse_id"})
        for batch in ds.to_batches(columns=read, batch_size=batch_rows):
            mask = pc.is_in(batch.column("parse_id"), wanted)
            if pc.all(mask).as_py() is False:
                batch = batch.filter(mask)
            if batch.num_rows:
                yield batch.select(columns)

    def read_active(self, name: str, version: int | None, parse_ids: Iterable[str], columns: list[str]) -> pa.Table:
        """:meth:`read_active_batches` as one table (``columns`` of the table's schema, possibly empty)."""
        batches = list(self.read_active_batches(name, version, parse_ids, columns))
        return pa.Table.from_batches(batches) if batches else TABLES[name].empty_table().select(columns)

