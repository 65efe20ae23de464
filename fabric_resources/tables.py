"""Lance tables, one dataset per asset, every row keyed by ``parse_id``.

Writing a set of partitions replaces exactly their rows (delete, then append),
so re-materializing is idempotent. Readers that must not see a write in
progress read a pinned table version (releases record them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import cached_property
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.compute as pc

from fabric_resources.schema import TABLES

_PARSE_ID = re.compile(r"[0-9a-f]{16,64}")


def _in_list(parse_ids: Iterable[str]) -> str:
    ids = sorted(set(parse_ids))
    for p in ids:
        if not _PARSE_ID.fullmatch(p):
            # Parse IDs are hex digests; anything else must never reach a filter string.
            raise ValueError(f"not a parse ID: {p!r}")
    return ", ".join(f"'{p}'" for p in ids)


class TableStore:
    """The Lance datasets under ``root`` (one per name in ``schema.TABLES``)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    @cached_property
    def _db(self):
        # Writers only: importing lancedb costs the read side ~30 MB of RSS for nothing.
        import lancedb

        return lancedb.connect(str(self.root))

    def uri(self, name: str) -> str:
        return str(self.root / f"{name}.lance")

    def exists(self, name: str) -> bool:
        return (self.root / f"{name}.lance").exists()

    def _table(self, name: str):
        if name not in TABLES:
            raise KeyError(f"unknown table {name!r}")
        if self.exists(name):
            return self._db.open_table(name)
        try:
            return self._db.create_table(name, schema=TABLES[name])
        except ValueError:  # created by a concurrent writer
            return self._db.open_table(name)

    def replace_partitions(self, name: str, parse_ids: Iterable[str], rows: pa.Table) -> int:
        """Replace all rows of ``parse_ids`` in table ``name`` by ``rows``; return the new version.

        Raises
        ------
        ValueError
            If ``rows`` holds a parse ID outside ``parse_ids`` or a malformed parse ID.
        """
        ids = set(parse_ids)
        rows = rows.cast(TABLES[name])
        stray = set(rows.column("parse_id").to_pylist()) - ids
        if stray:
            raise ValueError(f"rows for parse IDs not being replaced: {sorted(stray)[:3]}")
        table = self._table(name)
        if ids:
            table.delete(f"parse_id IN ({_in_list(ids)})")
        if rows.num_rows:
            table.add(rows)
        return int(table.version)

    def version(self, name: str) -> int | None:
        return int(self._table(name).version) if self.exists(name) else None

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
        if not self.exists(name):
            return TABLES[name].empty_table().select(columns) if columns else TABLES[name].empty_table()
        if flt == "parse_id IN ()":
            schema = TABLES[name]
            return schema.empty_table().select(columns) if columns else schema.empty_table()
        ds = lance.dataset(self.uri(name), version=version)
        return ds.to_table(columns=columns, filter=flt)

    def count_rows(self, name: str, version: int) -> int:
        """Rows of ``name`` at ``version`` (all parses; from the manifest, no data read)."""
        return lance.dataset(self.uri(name), version=version).count_rows() if self.exists(name) else 0

    def read_active_batches(
        self, name: str, version: int | None, parse_ids: Iterable[str], columns: list[str], batch_rows: int = 8192,
    ) -> Iterator[pa.RecordBatch]:
        """Rows of ``name`` at ``version`` whose ``parse_id`` is in ``parse_ids``, as record batches of
        ``columns`` (nothing when ``version`` is None or no parse is given).

        Streams: the parse filter runs batch by batch, so a reader that keeps a few of the table's
        parses never holds the whole table (the query side reads 100k-row tables this way).
        """
        wanted = pa.array(sorted(set(parse_ids)), pa.string())
        if version is None or len(wanted) == 0 or not self.exists(name):
            return
        read = sorted(set(columns) | {"parse_id"})
        for batch in lance.dataset(self.uri(name), version=version).to_batches(columns=read, batch_size=batch_rows):
            mask = pc.is_in(batch.column("parse_id"), wanted)
            if pc.all(mask).as_py() is False:
                batch = batch.filter(mask)
            if batch.num_rows:
                yield batch.select(columns)

    def read_active(self, name: str, version: int | None, parse_ids: Iterable[str], columns: list[str]) -> pa.Table:
        """:meth:`read_active_batches` as one table (``columns`` of the table's schema, possibly empty)."""
        batches = list(self.read_active_batches(name, version, parse_ids, columns))
        return pa.Table.from_batches(batches) if batches else TABLES[name].empty_table().select(columns)

    # -- lifecycle (purge, retention, snapshots) ------------------------------
    def tags(self, name: str) -> dict[str, int]:
        """Lance tags of ``name``: ``{tag: version}`` (snapshots pin table versions with tags)."""
        if not self.exists(name):
            return {}
        return {tag: int(v["version"]) for tag, v in lance.dataset(self.uri(name)).tags.list().items()}

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
        ds = lance.dataset(self.uri(name))
        if ids:
            ds.delete(f"parse_id IN ({_in_list(ids)})")
        return int(lance.dataset(self.uri(name)).version)

    def compact(self, name: str) -> int | None:
        """Rewrite every data file of ``name`` that holds a deleted row (Lance keeps deleted rows in
        their files, masked by deletion files, until a compaction materialises the deletions), and
        merge small files; return the latest version (None when the table does not exist)."""
        if not self.exists(name):
            return None
        ds = lance.dataset(self.uri(name))
        # Threshold 0: any deleted row at all rewrites its file (Lance's default waits for 10 %).
        ds.optimize.compact_files(materialize_deletions=True, materialize_deletions_threshold=0.0)
        return int(lance.dataset(self.uri(name)).version)

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

        ds = lance.dataset(self.uri(name))
        keep = set(keep) | set(self.tags(name).values()) | {int(ds.version)}
        doomed = [int(v["version"]) for v in ds.versions() if int(v["version"]) not in keep]
        if not doomed:
            return 0
        if not (keep - {int(ds.version)}):
            stats = ds.cleanup_old_versions(older_than=datetime.timedelta(0), delete_unverified=delete_unverified)
        else:
            stats = ds.cleanup_old_versions(versions=doomed, delete_unverified=delete_unverified)
        return int(stats.bytes_removed)
