"""The embedded catalog: one SQLite file in WAL mode (the default; one host).

Connections wait on locks (``busy_timeout``) instead of failing; ``BEGIN IMMEDIATE`` takes the
write lock up front, which serialises immediate transactions. The named locks of
:meth:`SqliteCatalog.exclusive` are ``flock`` files beside the database, which holds on the one
host whose file system has the file — as the database itself does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fabric_resources.catalog.base import Catalog, checked_lock_name
from fabric_resources.locks import exclusive_lock
from fabric_resources.schema import CATALOG_DDL, LOCK_NAME


class SqliteCatalog(Catalog):
    """The catalog database at ``path`` (created, with its tables, unless ``read_only``)."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            con = self._connect()
            try:
                con.execute("PRAGMA journal_mode=WAL")
                con.executescript(CATALOG_DDL)
            finally:
                con.close()

    def _connect(self) -> sqlite3.Connection:
        if self.read_only:
            con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30.0)
        else:
            con = sqlite3.connect(self.path, timeout=30.0)
        con.row_factory = sqlite3.Row
        con.execute("PRAGMA busy_timeout=30000")
        # WAL + NORMAL: never corrupts, may lose the last commits on power loss (SQLite docs);
        # a lost status is recomputed by the next run, so per-commit fsync is not worth its cost.
        con.execute("PRAGMA synchronous=NORMAL")
        return con

    @contextmanager
    def transaction(self, immediate: bool = False) -> Iterator[sqlite3.Connection]:
        con = self._connect()
        try:
            con.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
            yield con
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        finally:
            con.close()

    def exclusive(self, name: str):
        return exclusive_lock(self.path.parent / LOCK_NAME.format(name=checked_lock_name(name)))

    def initialized(self) -> bool:
        return self.path.exists()

    def describe(self) -> str:
        return f"sqlite:{self.path}"
