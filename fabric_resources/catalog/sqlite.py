"""The embedded catalog: one SQLite file in WAL mode with ``synchronous=FULL`` (the default; one host).

Connections wait on locks (``busy_timeout``) instead of failing; ``BEGIN IMMEDIATE`` takes the
write lock up front, which serialises immediate transactions. The named locks of
:meth:`SqliteCatalog.exclusive` are ``flock`` files beside the database, which holds on the one
host whose file system has the file — as the database itself does. Opening it for writing
migrates its schema (:mod:`fabric_resources.catalog.migrations`); a read-only open checks it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from fabric_resources.catalog import migrations as schema_migrations
from fabric_resources.catalog.base import Catalog, checked_lock_name
from fabric_resources.catalog.records import CatalogUnavailableError
from fabric_resources.home_location import read_only_file_system
from fabric_resources.locks import exclusive_lock, lock_held
from fabric_resources.schema import LOCK_NAME
from fabric_resources.storage_errors import sqlite_storage_fault


class SqliteCatalog(Catalog):
    """The catalog database at ``path``: created and migrated to the latest schema version unless
    ``read_only``; ``migrations`` are the schema's steps (tests inject others).

    Raises
    ------
    CatalogTooNewError
        If a newer Fabric wrote the catalog.
    CatalogMigrationNeededError
        If ``read_only`` and an older Fabric wrote it (the message says what to run).
    CatalogMigrationError
        If a migration fails (the catalog keeps the version it had before that step).
    """

    backend = "sqlite"
    #: FULL: a commit is on disk when it returns. Under WAL, NORMAL may lose the last commits
    #: on power loss (SQLite docs, "synchronous"): an activation's pointer swap that the
    #: published files already follow, or a purge's tombstone. Measured cost (`fabric bench
    #: catalog`, docs/benchmarks.md, 2026-12-02, 2 shared cores, ext4): a scan commit's median
    #: 9.81 -> 10.08 ms (+0.26 ms, 1.03x); the write paths of 500 parses 1.04x; an ingest of the
    #: sample corpus makes 80 commits, so ~0.02 s of its 14.4 s (its measured ratio, 0.97x, is
    #: within the noise). Not too much: FULL. `fabric bench catalog` sets it to compare.
    synchronous = "FULL"

    def __init__(self, path: Path, *, read_only: bool = False,
                 migrations: Sequence[schema_migrations.Migration] = schema_migrations.MIGRATIONS) -> None:
        self.path = Path(path)
        self.read_only = read_only
        if read_only:
            if self.path.exists():  # a home nothing wrote yet is found missing where it is used
                schema_migrations.check(self, migrations)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = self._connect(create=True)
        try:
            con.execute("PRAGMA journal_mode=WAL")  # persistent; not allowed inside a transaction
        finally:
            con.close()
        schema_migrations.migrate(self, migrations)

    def _connect(self, *, create: bool = False) -> sqlite3.Connection:
        # Only the opening writer creates the file: a connection made later to a catalog since
        # moved or deleted (its home renamed under a running server) made a new, empty one in its
        # place, and every reader then saw a home with nothing ingested.
        mode = "ro" if self.read_only else "rwc" if create else "rw"
        # A home on read-only media (a read-only mount of a copy, a snapshot's file system): SQLite
        # cannot make the WAL index a reader needs there, and nothing can write the file either,
        # so it is read as immutable (SQLite docs, "URI filenames": immutable=1).
        fixed = "&immutable=1" if self.read_only and read_only_file_system(self.path.parent) else ""
        try:
            con = sqlite3.connect(f"{self.path.absolute().as_uri()}?mode={mode}{fixed}", uri=True, timeout=30.0)
        except sqlite3.OperationalError:
            if self.path.exists():
                raise
            raise CatalogUnavailableError(f"the catalog {self.path} is gone: its home was moved or deleted while "
                                          "in use") from None
        con.row_factory = sqlite3.Row
        try:
            con.execute("PRAGMA busy_timeout=30000")
            con.execute(f"PRAGMA synchronous={self.synchronous}")  # per connection, not stored in the file
        except sqlite3.OperationalError as exc:
            con.close()
            # The first statement reads the file and maps its WAL index (-shm), which a full disk
            # cannot hold: that is the storage's fault, not damage (trial 15, stop 48).
            fault = sqlite_storage_fault(exc, self.path.parent)
            if fault is None:
                raise
            raise CatalogUnavailableError(fault) from exc
        return con

    @contextmanager
    def held_open(self) -> Iterator[None]:
        """Hold one idle connection for the block (a server's lifetime). SQLite removes a WAL
        database's index file (``-shm``) when its last connection closes, and every request of
        a server opens its own: on a full disk the next one could not make it again, and every
        search failed although a read writes nothing (trial 15, stop 48). An idle connection
        holds no read transaction, so it never blocks a checkpoint. A catalog that cannot be
        opened now is left to the requests to report."""
        try:
            con = self._connect()
        except (sqlite3.Error, CatalogUnavailableError):
            con = None
        try:
            yield
        finally:
            if con is not None:
                con.close()

    def _table_names(self, con: sqlite3.Connection) -> set[str]:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def _run_script(self, con: sqlite3.Connection, sql: str) -> None:
        # executescript() would COMMIT first; statement by statement keeps the step in one transaction.
        statement = ""
        for line in sql.splitlines(keepends=True):
            statement += line
            if sqlite3.complete_statement(statement):
                con.execute(statement)
                statement = ""
        if statement.strip() and not statement.strip().startswith("--"):
            con.execute(statement)  # raises on an unterminated statement, as executescript would

    @contextmanager
    def transaction(self, immediate: bool = False) -> Iterator[sqlite3.Connection]:
        con = self._connect()
        try:
            con.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
            yield con
            con.execute("COMMIT")
        except BaseException:
            # SQLite ends the transaction itself on some errors (SQLITE_FULL): a ROLLBACK then raised
            # "cannot rollback - no transaction is active" in place of the full disk (trial 21c).
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
        finally:
            con.close()

    def exclusive(self, name: str, *, wait: bool = True):
        return exclusive_lock(self.path.parent / LOCK_NAME.format(name=checked_lock_name(name)), wait=wait)

    def lock_held(self, name: str) -> bool:
        return lock_held(self.path.parent / LOCK_NAME.format(name=checked_lock_name(name)))

    def initialized(self) -> bool:
        return self.path.exists()

    def describe(self) -> str:
        return f"sqlite:{self.path}"
