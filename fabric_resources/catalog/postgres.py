"""The shared catalog: the same tables in a PostgreSQL schema, for homes on several hosts.

Statements are :class:`~fabric_resources.catalog.base.Catalog`'s; this module maps their
transactions onto PostgreSQL so they mean what they mean on SQLite:

* a plain transaction is ``REPEATABLE READ``: every statement in it reads one snapshot, as a
  SQLite read transaction does (the query path reads the pointer and the hidden sources together);
* an immediate transaction is ``READ COMMITTED`` behind ``pg_advisory_xact_lock`` on one key per
  catalog, so immediate transactions run one at a time, each seeing every earlier one's commit
  (SQLite's single writer): a read-modify-write (verdicts, the release pointer's
  compare-and-swap) never loses an update. Transactions stay short; readers never wait;
* :meth:`PostgresCatalog.exclusive` is a session-level ``pg_advisory_lock`` on a connection of its
  own, held with no transaction open; PostgreSQL drops it when that connection ends, so a killed
  holder frees it (TCP keepalives bound how long a vanished host keeps it).

Connections come from a small pool per process (a forked or spawned worker opens its own).
Opening for writing migrates the schema (:mod:`fabric_resources.catalog.migrations`) in
immediate transactions, so two hosts opening an old catalog at once migrate it once; a
read-only open checks the version. PostgreSQL commits durably by default (``synchronous_commit``
is the server's setting, left as the server has it).
Text columns use the ``"C"`` collation so ``ORDER BY`` compares code points, as SQLite does.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from fabric_resources.catalog import migrations as schema_migrations
from fabric_resources.catalog.base import Catalog, checked_lock_name
from fabric_resources.catalog.records import CatalogUnavailableError
from fabric_resources.locks import LockHeld

#: Connections one process keeps per catalog; a thread past that waits for one.
POOL_SIZE = 8

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# Connection settings: fail fast when the server is unreachable, notice a vanished peer within
# about a minute (30 s idle + 3 probes 10 s apart), so its session locks are dropped.
_CONNECT = {"connect_timeout": 10, "keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10,
            "keepalives_count": 3, "application_name": "fabric"}

_pools: dict[tuple[int, str, str], "_Pool"] = {}
_pools_lock = threading.Lock()
# (url, schema, version) that this process has migrated or found at that version.
_ready: set[tuple[str, str, int]] = set()


def libpq_url(url: str) -> str:
    """``url`` as libpq reads it (SQLAlchemy's ``+psycopg2`` driver suffix removed)."""
    return re.sub(r"^postgres(ql)?\+psycopg2://", "postgresql://", url)


def sqlalchemy_url(url: str) -> str:
    """``url`` as SQLAlchemy 2.1 reads it with psycopg2 (a bare ``postgresql://`` means psycopg 3)."""
    return re.sub(r"^postgres(ql)?(\+psycopg2)?://", "postgresql+psycopg2://", url)


def describe_url(url: str) -> str:
    """``host:port/dbname`` of ``url`` (no user, no password), for messages."""
    import psycopg2.extensions

    try:
        d = psycopg2.extensions.parse_dsn(libpq_url(url))
    except psycopg2.ProgrammingError:
        return "postgres:(unparsable URL)"
    return f"postgres:{d.get('host', 'localhost')}:{d.get('port', 5432)}/{d.get('dbname', '')}"


def _key(*parts: str) -> int:
    """A signed 64-bit advisory-lock key from ``parts`` (PostgreSQL's ``bigint`` key space)."""
    return int.from_bytes(hashlib.sha256(":".join(("fabric", *parts)).encode()).digest()[:8], "big", signed=True)


def _pg_sql(sql: str) -> str:
    # psycopg2 placeholders; a literal % would otherwise be read as one.
    return sql.replace("%", "%%").replace("?", "%s")


class _Connection:
    """A transaction's connection as the shared statements use it (``?`` placeholders)."""

    def __init__(self, con: Any) -> None:
        self._con = con

    def execute(self, sql: str, args: Iterable[Any] = ()) -> Any:
        import psycopg2.extras

        cur = self._con.cursor(cursor_factory=psycopg2.extras.DictCursor)
        cur.execute(_pg_sql(sql), tuple(args))
        return cur

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> Any:
        import psycopg2.extras

        cur = self._con.cursor()
        psycopg2.extras.execute_batch(cur, _pg_sql(sql), [tuple(r) for r in rows])
        return cur


class _Pool:
    """Up to :data:`POOL_SIZE` connections, opened when first needed and kept open between
    transactions; a thread past the limit waits for one. (psycopg2's own pools keep no idle
    connection above ``minconn`` and raise instead of waiting.)"""

    def __init__(self, connect: Any) -> None:
        self._connect = connect
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(POOL_SIZE)
        self._closed = False

    def get(self) -> Any:
        import psycopg2

        self._slots.acquire()
        try:
            with self._lock:
                con = self._idle.pop() if self._idle else None
            if con is None or con.closed:
                con = psycopg2.connect(**self._connect)
            return con
        except BaseException:
            self._slots.release()
            raise

    def put(self, con: Any, close: bool) -> None:
        try:
            with self._lock:
                keep = not (close or con.closed or self._closed)
                if keep:
                    self._idle.append(con)
            if not keep:
                con.close()
        finally:
            self._slots.release()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for con in idle:
            con.close()


class PostgresCatalog(Catalog):
    """The catalog in schema ``schema`` of the PostgreSQL database at ``url`` (a libpq URL,
    ``postgresql://user@host:port/db``; a password comes from ``~/.pgpass`` or ``PGPASSWORD``).
    Unless ``read_only``, the schema is created when missing and migrated to the latest version;
    ``migrations`` are the schema's steps (tests inject others).

    Raises
    ------
    CatalogUnavailableError
        If the server cannot be reached or refuses the connection.
    ValueError
        If ``schema`` is not a lower-case SQL identifier.
    CatalogTooNewError
        If a newer Fabric wrote the catalog.
    CatalogMigrationNeededError
        If ``read_only`` and an older Fabric wrote it (the message says what to run).
    CatalogMigrationError
        If a migration fails (the catalog keeps the version it had before that step).
    """

    backend = "postgres"

    _VERDICT_DIGEST_SQL = "(NULLIF(verdicts, '')::json -> ? ->> 'digest')"
    _VERDICTS_TYPE_SQL = "json_typeof(NULLIF(verdicts, '')::json)"
    # Text that is not JSON fails the statement: Catalog.parse_run_overview then decodes in Python.
    _IS_JSON_OBJECT_SQL = "COALESCE(json_typeof(NULLIF({column}, '')::json) = 'object', false)"

    @staticmethod
    def _verdict_digest_arg(name: str) -> str:
        return name

    def __init__(self, url: str, *, schema: str = "fabric", read_only: bool = False,
                 migrations: Sequence[schema_migrations.Migration] = schema_migrations.MIGRATIONS) -> None:
        if not _SCHEMA_NAME.fullmatch(schema):
            raise ValueError(f"not a schema name: {schema!r}")
        self.url = libpq_url(url)
        self.schema = schema
        self.read_only = read_only
        self._write_key = _key(schema, "write")
        ready = (self.url, schema, migrations[-1].version)
        if ready in _ready:
            return
        if read_only:
            if schema_migrations.check(self, migrations) == 0:
                return  # no tables yet: nothing to remember
        else:
            schema_migrations.migrate(self, migrations)
        _ready.add(ready)

    # -- connections ---------------------------------------------------------
    def _connect_args(self) -> dict[str, Any]:
        return {"dsn": self.url, "options": f"-c search_path={self.schema}", **_CONNECT}

    def _connect(self) -> Any:
        import psycopg2

        try:
            con = psycopg2.connect(**self._connect_args())
        except psycopg2.OperationalError as exc:
            raise CatalogUnavailableError(f"catalog {self.describe()}: {_first_line(exc)}") from None
        con.autocommit = True  # transactions are explicit BEGIN ... COMMIT, as on SQLite
        return con

    def _pool(self) -> _Pool:
        key = (os.getpid(), self.url, self.schema)
        with _pools_lock:
            pool = _pools.get(key)
            if pool is None:
                pool = _pools[key] = _Pool(self._connect_args())
            return pool

    def _begin(self, immediate: bool) -> tuple[_Pool, Any]:
        """A pooled connection inside a new transaction; a pooled connection that died (a server
        restart) is replaced once, before anything ran in it."""
        import psycopg2

        pool = self._pool()
        for attempt in (0, 1):
            try:
                con = pool.get()
            except psycopg2.OperationalError as exc:
                raise CatalogUnavailableError(f"catalog {self.describe()}: {_first_line(exc)}") from None
            try:
                con.autocommit = True
                with con.cursor() as cur:
                    if immediate:
                        cur.execute("BEGIN ISOLATION LEVEL READ COMMITTED" + (" READ ONLY" if self.read_only else ""))
                        cur.execute("SELECT pg_advisory_xact_lock(%s)", (self._write_key,))
                    else:
                        cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ" + (" READ ONLY" if self.read_only else ""))
                return pool, con
            except (psycopg2.OperationalError, psycopg2.InterfaceError) as exc:
                pool.put(con, close=True)
                if attempt:
                    raise CatalogUnavailableError(f"catalog {self.describe()}: {_first_line(exc)}") from None
        raise AssertionError("unreachable")

    @contextmanager
    def transaction(self, immediate: bool = False) -> Iterator[_Connection]:
        import psycopg2

        pool, con = self._begin(immediate)
        broken = False
        try:
            yield _Connection(con)
            with con.cursor() as cur:
                cur.execute("COMMIT")
        except BaseException:
            try:
                with con.cursor() as cur:
                    cur.execute("ROLLBACK")
            except psycopg2.Error:
                broken = True
            raise
        finally:
            pool.put(con, close=broken)

    def _table_names(self, con: _Connection) -> set[str]:
        rows = con.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = ?",
                           (self.schema,)).fetchall()
        return {r[0] for r in rows}

    def _run_script(self, con: _Connection, sql: str) -> None:
        # Inside the immediate transaction (its advisory lock serialises migrating writers, and
        # concurrent CREATE ... IF NOT EXISTS could otherwise still collide in PostgreSQL's catalogs).
        with con._con.cursor() as cur:
            cur.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
            cur.execute(sql)

    # -- the interface -------------------------------------------------------
    @contextmanager
    def exclusive(self, name: str, *, wait: bool = True) -> Iterator[None]:
        import psycopg2

        key = _key(self.schema, "lock", checked_lock_name(name))
        con = self._connect()
        owner = os.getpid()
        held = True
        try:
            with con.cursor() as cur:
                if wait:
                    cur.execute("SELECT pg_advisory_lock(%s)", (key,))
                else:
                    cur.execute("SELECT pg_try_advisory_lock(%s)", (key,))
                    held = cur.fetchone()[0]
            if not held:
                raise LockHeld(f"the catalog lock {name!r} of {self.describe()} is held by another session")
            yield
        finally:
            if os.getpid() != owner:  # a forked child's copy: the session and its lock are the parent's
                _drop_inherited(con)
            else:
                try:
                    if held:
                        with con.cursor() as cur:
                            cur.execute("SELECT pg_advisory_unlock(%s)", (key,))
                except psycopg2.Error:
                    pass  # a dead connection holds no lock any more
                con.close()

    def lock_held(self, name: str) -> bool:
        key = _key(self.schema, "lock", checked_lock_name(name))
        con = self._connect()
        try:
            with con.cursor() as cur:
                cur.execute("SELECT pg_try_advisory_lock(%s)", (key,))
                free = cur.fetchone()[0]
                if free:
                    cur.execute("SELECT pg_advisory_unlock(%s)", (key,))
            return not free
        finally:
            con.close()

    def initialized(self) -> bool:
        with self.transaction() as con:
            return con.execute("SELECT to_regclass(?)", (f'"{self.schema}".releases',)).fetchone()[0] is not None

    def describe(self) -> str:
        return f"{describe_url(self.url)} schema {self.schema}"

    def close(self) -> None:
        with _pools_lock:
            pool = _pools.pop((os.getpid(), self.url, self.schema), None)
        if pool is not None:
            pool.close()


def _drop_inherited(con: Any) -> None:
    """Close a forked child's copy of ``con`` without touching the session, which is the parent's
    (with the advisory locks it holds): the child's unlock, or the Terminate message libpq sends on
    closing, ended the parent's lock while it still worked under it. The socket is first swapped
    for ``/dev/null``, where that message goes."""
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        os.dup2(devnull, con.fileno())
    finally:
        os.close(devnull)
    con.close()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
