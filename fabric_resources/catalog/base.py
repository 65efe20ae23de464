# Over 500 lines: every catalog statement, written once in the SQL both backends share; the backends add connections, locks and JSON functions only.
"""The catalog interface and the statements every backend runs.

The catalog is Fabric's small transactional state: registered roots, sources and their
observed state, acquisitions (which bytes a source had when), parse runs with their status and
per-parse verdicts, immutable releases and the one ``current`` pointer, small named state, and an
event log. Several processes use it at once (the Dagster daemon, run workers, queries; with a
shared backend, on several hosts), so every method is one short transaction.

:class:`Catalog` holds the statements, written once in the SQL that SQLite and PostgreSQL share
(``?`` placeholders, ``ON CONFLICT``, ``RETURNING``); a backend supplies connections,
transactions and the named lock (:meth:`Catalog.exclusive`). Transactions mean the same on both:
a plain one reads one snapshot; an ``immediate`` one is serialised with every other immediate
transaction of the catalog for its whole length (SQLite's write lock; a transaction-scoped
advisory lock on PostgreSQL), so a read-modify-write inside it never loses an update.
"""

from __future__ import annotations

import abc
import bisect
import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from fabric_resources.catalog.records import (RESTORE_REMEDY, CatalogDamagedError, Operation, ParseRun, ParseRunDigests,
                                              ParseRunOverview, Release, Root, RootOverlapError, SourceRow,
                                              StatusUpdate)
from fabric_resources.schema import LAST_TIME, OPERATION_STATUSES

#: Bound parameters per ``IN (...)`` statement; below SQLite's oldest default limit of 999
#: (SQLITE_MAX_VARIABLE_NUMBER before 3.32), so any linked SQLite accepts it.
_IDS_PER_STATEMENT = 500

_SOURCE_COLUMNS = SourceRow._fields
#: A row's next change number (catalog version 2's ``change_seq``), in the statement that writes it.
#: Every write of ``sources`` and ``parse_runs`` runs in an immediate transaction (the catalog's
#: write lock), so the numbers follow the order of the commits: a reader that has seen number n has
#: seen every row numbered below it.
_NEXT_SOURCE_SEQ = "(SELECT COALESCE(MAX(change_seq), 0) + 1 FROM sources)"
_NEXT_RUN_SEQ = "(SELECT COALESCE(MAX(change_seq), 0) + 1 FROM parse_runs)"


def in_batches(values: list) -> Iterator[tuple[list, str]]:
    """``values`` in slices of :data:`_IDS_PER_STATEMENT`, each with its ``?, ?, …`` placeholders
    for an ``IN (...)``."""
    for i in range(0, len(values), _IDS_PER_STATEMENT):
        batch = values[i:i + _IDS_PER_STATEMENT]
        yield batch, ", ".join("?" * len(batch))

#: The types of a release's source entry fields that readers sort, compare and fold (decoded JSON
#: holds these exact types; ``parse_id`` and ``media_type`` are required, the others may be absent).
_STR, _STR_OR_NONE, _INT_OR_NONE = frozenset({str}), frozenset({str, type(None)}), frozenset({int, type(None)})
_SOURCE_FIELD_TYPES = (("parse_id", _STR), ("media_type", _STR), ("source_hash", _STR_OR_NONE),
                       ("root", _STR_OR_NONE), ("lexical_digest", _STR_OR_NONE), ("language", _STR_OR_NONE),
                       ("mtime_ns", _INT_OR_NONE), ("size", _INT_OR_NONE))


def _sources_and_generation_sound(manifest: dict) -> bool:
    """Whether every source entry is an object whose fields have the types readers rely on
    (:data:`_SOURCE_FIELD_TYPES`) and the lexical generation, if named, is a string: an entry
    edited into a list, a null parse ID, a string date, a list for a language or a generation was a
    ``TypeError`` or ``AttributeError`` traceback from search (with filters), status and resolve."""
    for m in manifest["sources"].values():
        if type(m) is not dict:
            return False
        for key, types in _SOURCE_FIELD_TYPES:
            if type(m.get(key)) not in types:
                return False
    return type(manifest.get("lexical_generation")) in _STR_OR_NONE


def _release(release_id: int, created_at: float, text: str, *, summary: bool = False) -> Release:
    """A release row decoded. A manifest must be a JSON object whose ``sources`` and ``tables``
    are objects, each table's pinned version an integer or null (a summary, which has no
    ``sources``: its ``tables``): what every release Fabric
    publishes holds, and what every reader indexes. Anything else was written behind Fabric's back
    (it was a bare ``JSONDecodeError``, ``KeyError`` or ``AttributeError`` traceback from status,
    resolve, audit, lexical-health, snapshot create and ingest).

    Raises
    ------
    CatalogDamagedError
        If it is not.
    """
    try:
        manifest = json.loads(text)
    except (TypeError, ValueError):
        manifest = None
    need = ("tables",) if summary else ("sources", "tables")
    if not isinstance(manifest, dict) or not all(isinstance(manifest.get(k), dict) for k in need) or not all(
            v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in manifest["tables"].values()) or (
            not summary and not _sources_and_generation_sound(manifest)):
        typed = "" if summary else ", each source an object of typed fields, the index generation a name"
        raise CatalogDamagedError(f"release {release_id}'s {'summary' if summary else 'manifest'} in the catalog is "
                                  f"not a JSON object with its {' and '.join(need)} (table versions integers{typed}): "
                                  f"the catalog was altered; {RESTORE_REMEDY}")
    if not (_is(created_at, int) or _is(created_at, float)) or not 0 <= created_at <= LAST_TIME:
        raise damaged(f"release {release_id}'s created_at", float)
    return Release(release_id, created_at, manifest)


#: State: the highest release ID a catalog this one replaced had given (an in-place snapshot
#: restore records it); the next release is numbered above it.
RELEASE_ID_FLOOR = "release_id_floor"
_LOCK_NAME = re.compile(r"[a-z][a-z0-9-]{0,40}")


def checked_lock_name(name: str) -> str:
    """``name`` if it can name a lock (``activation``, ``ingest``: it becomes a file name).

    Raises
    ------
    ValueError
        Otherwise.
    """
    if not _LOCK_NAME.fullmatch(name):
        raise ValueError(f"not a lock name: {name!r}")
    return name


class Connection(Protocol):
    """What a transaction yields: ``execute`` and ``executemany`` with ``?`` placeholders; rows
    read by column name or position (``sqlite3.Row`` and its PostgreSQL equivalent)."""

    def execute(self, sql: str, args: Iterable[Any] = ...) -> Any: ...

    def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> Any: ...


class Catalog(abc.ABC):
    """Typed access to one catalog; :class:`~fabric_resources.catalog.sqlite.SqliteCatalog` and
    :class:`~fabric_resources.catalog.postgres.PostgresCatalog` implement it."""

    read_only: bool

    # Each backend's JSON functions, for reads that need a few fields of a large JSON column: the
    # database parses it in C instead of Python decoding all of it (every parse run's verdicts).
    #: A verdict's ``digest``; one ``?``, bound by :meth:`_verdict_digest_arg`.
    _VERDICT_DIGEST_SQL = "json_extract(NULLIF(verdicts, ''), ?)"
    #: The JSON type of the verdicts (``object`` as written; null when empty).
    _VERDICTS_TYPE_SQL = "json_type(NULLIF(verdicts, ''))"
    #: True where a text column (``{column}``) holds a JSON object, as Python's ``json`` reads it;
    #: false (or an error, on PostgreSQL) may still be one Python reads (NaN), or the empty text.
    #: ``json_valid`` first: SQLite's ``json_type`` raises for malformed JSON, and from 3.42 reads
    #: JSON5, which Python refuses; ``json_valid`` with no flags is RFC 8259 only. CASE evaluates
    #: lazily, so ``json_type`` never sees a value ``json_valid`` refused.
    _IS_JSON_OBJECT_SQL = "(CASE WHEN json_valid({column}) THEN json_type({column}) = 'object' ELSE 0 END)"

    @staticmethod
    def _verdict_digest_arg(name: str) -> str:
        if '"' in name:  # verdict names are the projections' check names; a quote cannot be one
            raise ValueError(f"not a verdict name: {name!r}")
        return '$."' + name + '".digest'

    @abc.abstractmethod
    def transaction(self, immediate: bool = False) -> AbstractContextManager[Connection]:
        """One short transaction; ``immediate`` serialises it with every other immediate one.

        Commits when the block ends, rolls back when it raises (and re-raises).
        """

    @abc.abstractmethod
    def exclusive(self, name: str, *, wait: bool = True) -> AbstractContextManager[None]:
        """Hold the catalog-wide lock ``name`` while the block runs; a second holder, in any
        process that uses this catalog, waits (``wait=False``: raises
        :class:`fabric_resources.locks.LockHeld` at once instead). The lock of a process that dies
        is dropped (the OS drops a file lock; PostgreSQL a session's locks when its connection
        closes). No catalog transaction stays open meanwhile."""

    @abc.abstractmethod
    def lock_held(self, name: str) -> bool:
        """Whether a live process holds the lock ``name`` (:meth:`exclusive`) now; waits for
        nothing and leaves the lock free. ``fabric status`` tells a running ingest from an
        interrupted one by it."""

    @abc.abstractmethod
    def initialized(self) -> bool:
        """True once the catalog's tables exist (something opened it for writing)."""

    @abc.abstractmethod
    def describe(self) -> str:
        """Where the catalog is, for messages (never a password)."""

    def close(self) -> None:
        """Close the connections this process keeps open for this catalog (none for SQLite)."""

    # -- roots ---------------------------------------------------------------
    def register_root(self, path: Path) -> Root:
        """Register a folder (idempotent). Its label is its base name, made unique if taken.

        Raises
        ------
        RootOverlapError
            If ``path`` is inside a registered root or contains one.
        """
        resolved = Path(path).resolve()
        with self.transaction(immediate=True) as con:
            rows = con.execute("SELECT * FROM roots").fetchall()
            for r in rows:
                if r["path"] == str(resolved):
                    return Root(r["root_id"], r["path"], r["label"])
            for r in rows:
                other = Path(r["path"])
                if resolved.is_relative_to(other) or other.is_relative_to(resolved):
                    raise RootOverlapError.between(resolved, other, r["label"])
            label = resolved.name or "root"
            if any(r["label"] == label for r in rows):
                label = f"{label}-{hashlib.sha256(str(resolved).encode()).hexdigest()[:6]}"
            root_id = con.execute(
                "INSERT INTO roots(path, label, registered_at) VALUES (?, ?, ?) RETURNING root_id",
                (str(resolved), label, time.time()),
            ).fetchone()[0]
            return Root(int(root_id), str(resolved), label)

    def roots(self) -> list[Root]:
        with self.transaction() as con:
            rows = con.execute("SELECT * FROM roots ORDER BY root_id").fetchall()
            return [Root(r["root_id"], r["path"], r["label"]) for r in rows]

    # -- sources -------------------------------------------------------------
    def sources(self, root_id: int | None = None, state: str | None = None, *,
                keys: Iterable[str] | None = None, parse_ids: Iterable[str] | None = None) -> list[SourceRow]:
        """Sources, by key (code-point order); only those of ``root_id``, in ``state``, with a key
        in ``keys`` or pointing at one of ``parse_ids`` when given. By ``keys`` or ``parse_ids``
        the lookup goes by index, so its cost follows what is asked for, not the catalog size."""
        # Columns named in the record's order: rows are built by position (half the cost of by
        # name at 10,000 sources, read by every scan, activation and cleanup).
        sql, args = f"SELECT {', '.join(_SOURCE_COLUMNS)} FROM sources WHERE 1=1", []
        if root_id is not None:
            sql += " AND root_id = ?"
            args.append(root_id)
        if state is not None:
            sql += " AND state = ?"
            args.append(state)
        if keys is not None and parse_ids is not None:
            raise ValueError("sources(): keys or parse_ids, not both")
        column, values = ("source_key", keys) if keys is not None else ("parse_id", parse_ids)
        with self.transaction() as con:
            if values is None:
                return list(map(SourceRow._make, con.execute(sql + " ORDER BY source_key", args).fetchall()))
            rows = []
            for batch, marks in in_batches(sorted(set(values))):
                rows += con.execute(sql + f" AND {column} IN ({marks})", [*args, *batch]).fetchall()
        return sorted((SourceRow(*r) for r in rows), key=lambda s: s.source_key)

    def sources_at_current(self) -> tuple[int | None, list[SourceRow]]:
        """The ``current`` pointer and every source (by key), read in one transaction: one
        snapshot on both backends, so a scan or an activation cannot fall between the two (the
        sources are as they were when that release was current)."""
        with self.transaction() as con:
            r = con.execute("SELECT release_id FROM pointer WHERE name = 'current'").fetchone()
            rows = con.execute(f"SELECT {', '.join(_SOURCE_COLUMNS)} FROM sources ORDER BY source_key").fetchall()
        return (r["release_id"] if r else None), list(map(SourceRow._make, rows))

    def source_overview(self) -> list[tuple[str, str, str, str | None]]:
        """``(source key, state, media type, parse ID)`` of every source, by key (as
        :meth:`sources`): what ``fabric status`` reads, without building the whole row (about
        half the cost of :meth:`sources` at 100k sources)."""
        with self.transaction() as con:
            return [(r[0], r[1], r[2], r[3]) for r in con.execute(
                "SELECT source_key, state, media_type, parse_id FROM sources ORDER BY source_key").fetchall()]

    def source_count(self) -> int:
        """The number of source rows (any state)."""
        with self.transaction() as con:
            return int(con.execute("SELECT COUNT(*) FROM sources").fetchone()[0])

    def source_states(self) -> list[tuple[str, str | None, str | None]]:
        """(state, parse ID, source hash) of every source: what a cleanup decides on, without
        building each source's row."""
        with self.transaction() as con:
            return [(r[0], r[1], r[2]) for r in con.execute("SELECT state, parse_id, source_hash FROM sources").fetchall()]

    def source_parse_ids(self, states: Iterable[str]) -> set[str]:
        """The parse IDs that sources in ``states`` point at (no source row built)."""
        wanted = sorted(set(states))
        with self.transaction() as con:
            rows = con.execute(f"SELECT DISTINCT parse_id FROM sources WHERE parse_id IS NOT NULL AND state IN "
                               f"({', '.join('?' * len(wanted))})", wanted).fetchall() if wanted else []
        return {r[0] for r in rows}

    def source_keys_by_parse(self, parse_ids: Iterable[str]) -> dict[str, list[str]]:
        """Parse ID → the keys of the sources (any state) whose current version it is, sorted; a
        parse no source points at is left out. By the ``sources(parse_id)`` index: the cost
        follows the IDs asked for."""
        ids = sorted(set(parse_ids))
        out: dict[str, list[str]] = {}
        with self.transaction() as con:
            for batch, marks in in_batches(ids):
                rows = con.execute(f"SELECT parse_id, source_key FROM sources WHERE parse_id IN ({marks}) "
                                   "ORDER BY source_key", batch).fetchall()
                for r in rows:
                    out.setdefault(r[0], []).append(r[1])
        return out

    def pointer_and_source_keys_in(self, states: Iterable[str]) -> tuple[int | None, set[str]]:
        """The ``current`` pointer and the keys of the sources whose state is one of ``states``, in
        one read transaction (the query path's per-query catalog read; the state index serves it)."""
        states = sorted(set(states))
        with self.transaction() as con:
            r = con.execute("SELECT release_id FROM pointer WHERE name = 'current'").fetchone()
            rows = con.execute(f"SELECT source_key FROM sources WHERE state IN ({', '.join('?' * len(states))})",
                               states).fetchall() if states else ()
            return (r["release_id"] if r else None), {row[0] for row in rows}

    def source(self, source_key: str) -> SourceRow | None:
        with self.transaction() as con:
            r = con.execute(f"SELECT {', '.join(_SOURCE_COLUMNS)} FROM sources WHERE source_key = ?",
                            (source_key,)).fetchone()
        return SourceRow._make(r) if r else None

    def change_marks(self) -> tuple[int, int]:
        """The highest change number of ``sources`` and of ``parse_runs`` (0 for none): every row
        written later gets a higher one."""
        with self.transaction() as con:
            a = con.execute("SELECT COALESCE(MAX(change_seq), 0) FROM sources").fetchone()[0]
            b = con.execute("SELECT COALESCE(MAX(change_seq), 0) FROM parse_runs").fetchone()[0]
        return int(a), int(b)

    def purge_mark(self) -> list[int]:
        """``[count, highest ID]`` of the purge tombstones: it moves whenever a purge deletes rows
        (the one way a source row leaves the catalog), which no change number can show."""
        with self.transaction() as con:
            r = con.execute("SELECT COUNT(*), COALESCE(MAX(tombstone_id), 0) FROM tombstones").fetchone()
        return [int(r[0]), int(r[1])]

    def sources_changed_after(self, change_seq: int) -> tuple[list[SourceRow], int]:
        """The sources written since change number ``change_seq`` (any state), by key, and the
        highest change number among them (``change_seq`` if none): what activation re-derives.
        By the ``change_seq`` index: the cost follows the rows written since."""
        with self.transaction() as con:
            rows = con.execute(f"SELECT {', '.join(_SOURCE_COLUMNS)}, change_seq FROM sources WHERE change_seq > ? "
                               "ORDER BY source_key", (change_seq,)).fetchall()
        return [SourceRow._make(r[:-1]) for r in rows], max((r[-1] for r in rows), default=change_seq)

    def upsert_source(self, con: Connection, row: SourceRow) -> None:
        """Insert or update ``row`` in ``con``, an immediate transaction (:meth:`transaction`): its
        change number is the table's highest plus one, which holds only under the write lock."""
        con.execute(
            f"""INSERT INTO sources({', '.join(_SOURCE_COLUMNS)}, change_seq)
               VALUES ({', '.join('?' * len(_SOURCE_COLUMNS))}, {_NEXT_SOURCE_SEQ})
               ON CONFLICT(source_key) DO UPDATE SET state=excluded.state,
                 media_type=excluded.media_type, mtime_ns=excluded.mtime_ns, size=excluded.size,
                 source_hash=excluded.source_hash, parse_id=excluded.parse_id,
                 last_seen=excluded.last_seen, change_seq=excluded.change_seq""",
            tuple(getattr(row, c) for c in _SOURCE_COLUMNS),
        )

    def record_acquisition(self, con: Connection, source_key: str, source_hash: str, mtime_ns: int, size: int) -> None:
        con.execute(
            "INSERT INTO acquisitions(source_key, source_hash, mtime_ns, size, observed_at) VALUES (?,?,?,?,?)",
            (source_key, source_hash, mtime_ns, size, time.time()),
        )

    def acquisitions(self, source_key: str) -> list[dict[str, Any]]:
        with self.transaction() as con:
            rows = con.execute(
                "SELECT * FROM acquisitions WHERE source_key = ? ORDER BY acquisition_id", (source_key,)
            ).fetchall()
            return [dict(r) for r in rows]

    # -- parse runs ----------------------------------------------------------
    def ensure_parse_run(
        self,
        con: Connection,
        *,
        parse_id: str,
        source_hash: str,
        media_type: str,
        parser_name: str,
        parser_version: str,
        parser_config_hash: str,
    ) -> bool:
        """Create a pending parse run unless one exists; True if created."""
        now = time.time()
        cur = con.execute(
            f"""INSERT INTO parse_runs(parse_id, source_hash, media_type, parser_name,
                 parser_version, parser_config_hash, status, created_at, updated_at, change_seq)
               VALUES (?,?,?,?,?,?,'pending',?,?,{_NEXT_RUN_SEQ}) ON CONFLICT(parse_id) DO NOTHING""",
            (parse_id, source_hash, media_type, parser_name, parser_version, parser_config_hash, now, now),
        )
        return cur.rowcount == 1

    def parse_run_states(self) -> list[tuple[str, str, str]]:
        """(parse ID, status, source hash) of every parse run, oldest first: what a cleanup decides
        on, without decoding each run's verdicts and counts."""
        with self.transaction() as con:
            rows = con.execute("SELECT parse_id, status, source_hash FROM parse_runs "
                               "ORDER BY created_at, parse_id").fetchall()
        return [(r["parse_id"], r["status"], r["source_hash"]) for r in rows]

    def parse_run_digests(self, verdict_names: Iterable[str], *, changed_after: int | None = None,
                          parse_ids: Iterable[str] | None = None) -> list[ParseRunDigests]:
        """Every parse run's status, language, the ``digest`` of each of ``verdict_names``
        (``None`` where absent) and its change number, oldest first: what activation decides on,
        with no verdicts decoded in Python. Only the runs written since change number
        ``changed_after``, or those of ``parse_ids``, when given (by index).

        Raises
        ------
        CatalogDamagedError
            A parse run's verdicts are not a JSON object (the row is named).
        """
        names = list(dict.fromkeys(verdict_names))
        picks = "".join(f", {self._VERDICT_DIGEST_SQL} AS d{i}" for i in range(len(names)))
        sql = f"SELECT parse_id, status, language, change_seq, {self._VERDICTS_TYPE_SQL}{picks} FROM parse_runs"
        args = [self._verdict_digest_arg(n) for n in names]
        try:
            with self.transaction() as con:
                if parse_ids is not None:
                    rows = []
                    for batch, marks in in_batches(sorted(set(parse_ids))):
                        rows += con.execute(sql + f" WHERE parse_id IN ({marks})", [*args, *batch]).fetchall()
                elif changed_after is not None:
                    rows = con.execute(sql + " WHERE change_seq > ?", [*args, changed_after]).fetchall()
                else:
                    rows = con.execute(sql + " ORDER BY created_at, parse_id", args).fetchall()
        except Exception:
            # The database's JSON functions refuse a verdicts value that is not JSON (SQLite's
            # "malformed JSON", PostgreSQL's invalid input): name the row instead, if that is why.
            if names:
                with self.transaction() as con:
                    for r in con.execute("SELECT parse_id, verdicts FROM parse_runs"):
                        verdicts_of(r["verdicts"], r["parse_id"])
            raise
        for r in rows:
            if r[4] not in (None, "object"):  # JSON of another type: the digests would read as absent
                raise damaged(f"parse run {r[0]}'s verdicts", dict)
        return [ParseRunDigests(r[0], r[1], r[2], {n: r[5 + i] for i, n in enumerate(names)}, r[3]) for r in rows]

    def parse_run(self, parse_id: str) -> ParseRun | None:
        with self.transaction() as con:
            r = con.execute("SELECT * FROM parse_runs WHERE parse_id = ?", (parse_id,)).fetchone()
        return _parse_run(r) if r else None

    def parse_runs(self, parse_ids: Iterable[str] | None = None, status: str | None = None) -> list[ParseRun]:
        """Parse runs (all, or only ``parse_ids``; optionally only of ``status``), oldest first.

        With ``parse_ids`` the lookup goes by primary key, so its cost follows the IDs asked
        for, not the catalog size (each Dagster asset of an incremental run asks for its few).
        """
        sql, args = "SELECT * FROM parse_runs WHERE 1=1", []
        if status is not None:
            sql += " AND status = ?"
            args.append(status)
        with self.transaction() as con:
            if parse_ids is None:
                return [_parse_run(r) for r in con.execute(sql + " ORDER BY created_at, parse_id", args).fetchall()]
            ids = sorted(set(parse_ids))
            rows = []
            for batch, marks in in_batches(ids):
                rows += con.execute(sql + f" AND parse_id IN ({marks})", [*args, *batch]).fetchall()
        return sorted((_parse_run(r) for r in rows), key=lambda r: (r.created_at, r.parse_id))

    def parse_run_overview(self) -> list[ParseRunOverview]:
        """Every parse run's identity, parser, status and counts (as JSON text), oldest first (as
        :meth:`parse_runs`): what ``fabric status`` reads.

        The verdicts (~1 kB of JSON a run, nothing status prints) and the counts are checked by the
        database to be JSON objects instead of being decoded in Python (decoding them was 4 s of
        status's 7.5 s at 100k runs); a value the database does not take for one is decoded in
        Python, so a damaged row raises exactly as :meth:`parse_runs` would, the same row first.

        Raises
        ------
        CatalogDamagedError
            A parse run's verdicts or counts are not a JSON object (the oldest such run).
        """
        columns = ParseRunOverview._fields[:-1]
        verdicts_ok = self._IS_JSON_OBJECT_SQL.format(column="verdicts")
        sql = (f"SELECT {', '.join(columns)}, counts, CASE WHEN {verdicts_ok} THEN NULL ELSE verdicts END, "
               f"{self._IS_JSON_OBJECT_SQL.format(column='counts')} FROM parse_runs ORDER BY created_at, parse_id")
        try:
            with self.transaction() as con:
                rows = con.execute(sql).fetchall()
        except Exception:
            # PostgreSQL's cast refuses text that is not JSON (and NaN, which Python reads): decode
            # every row as parse_runs() does, which names the damaged one or reads them all.
            return [ParseRunOverview(*(getattr(r, c) for c in columns), json.dumps(r.counts)) for r in self.parse_runs()]
        out = []
        for *fields, counts, verdicts_unchecked, counts_ok in rows:
            # What the database did not take for a JSON object is decoded as _parse_run decodes it,
            # verdicts first: it raises for the same row and column, or reads the value (NaN, "").
            if verdicts_unchecked is not None:
                verdicts_of(verdicts_unchecked, fields[0])
            if not counts_ok:
                counts = json.dumps(counts_of(counts, fields[0]))
            out.append(ParseRunOverview(*fields, counts))
        return out

    def parse_ids(self) -> set[str]:
        """Every parse ID that has a parse run (no verdicts decoded: the scan asks this per pass)."""
        with self.transaction() as con:
            return {r[0] for r in con.execute("SELECT parse_id FROM parse_runs").fetchall()}

    def set_parse_status(
        self,
        parse_id: str,
        status: str,
        *,
        reason: str | None = None,
        detail: str | None = None,
        counts: dict[str, Any] | None = None,
    ) -> None:
        self.set_parse_statuses([StatusUpdate(parse_id, status, reason, detail, counts)])

    def set_parse_statuses(self, updates: list[StatusUpdate]) -> None:
        """Apply many status changes in one transaction (one per asset run, not per partition)."""
        if not updates:
            return
        now = time.time()
        with self.transaction(immediate=True) as con:
            for u in updates:
                sets = ["status = ?", "updated_at = ?", "reason = ?", "detail = ?", f"change_seq = {_NEXT_RUN_SEQ}"]
                args = [u.status, now, u.reason, u.detail]
                if u.counts is not None:
                    counts = dict(u.counts)
                    if ROW_COUNTS not in counts:  # the row counts writers recorded outlive a status change
                        r = con.execute("SELECT counts FROM parse_runs WHERE parse_id = ?", (u.parse_id,)).fetchone()
                        kept = counts_of(r["counts"], u.parse_id).get(ROW_COUNTS) if r is not None else None
                        if kept is not None:
                            counts[ROW_COUNTS] = kept
                    sets.append("counts = ?")
                    args.append(json.dumps(counts, sort_keys=True))
                if u.language is not None:
                    sets.append("language = ?")
                    args.append(u.language)
                con.execute(f"UPDATE parse_runs SET {', '.join(sets)} WHERE parse_id = ?", [*args, u.parse_id])
            con.executemany(
                "INSERT INTO events(at, kind, parse_id, detail) VALUES (?,?,?,?)",
                [(now, f"parse-{u.status}", u.parse_id, json.dumps({"reason": u.reason, "detail": u.detail}))
                 for u in updates],
            )

    # -- releases ------------------------------------------------------------
    def current_release(self) -> Release | None:
        """The release the ``current`` pointer names, or None before the first one.

        Raises
        ------
        CatalogDamagedError
            If the pointer names a release the catalog lacks, or its manifest cannot be decoded.
        """
        with self.transaction() as con:
            p = con.execute("SELECT release_id FROM pointer WHERE name = 'current'").fetchone()
            r = con.execute("SELECT * FROM releases WHERE release_id = ?", (p["release_id"],)).fetchone() if p else None
        if p is not None and r is None:
            raise CatalogDamagedError.missing_current(p["release_id"])
        return _release(r["release_id"], r["created_at"], r["manifest"]) if r else None

    def current_release_id(self) -> int | None:
        """The ``current`` pointer alone (no manifest read): the query path's per-query check."""
        with self.transaction() as con:
            r = con.execute("SELECT release_id FROM pointer WHERE name = 'current'").fetchone()
        return r["release_id"] if r else None

    def has_release(self, release_id: int) -> bool:
        """Whether release ``release_id`` exists (not retired by retention or a purge); no manifest read."""
        if not _storable_id(release_id):
            return False
        with self.transaction() as con:
            return con.execute("SELECT 1 FROM releases WHERE release_id = ?", (release_id,)).fetchone() is not None

    def release_created_at(self, release_id: int) -> float | None:
        """When release ``release_id`` was published, or None when the catalog has no such release
        (no manifest read): with the ID it names one release, also across a home deleted and made
        again at the same path (whose IDs start at 1 again)."""
        if not _storable_id(release_id):
            return None
        with self.transaction() as con:
            r = con.execute("SELECT created_at FROM releases WHERE release_id = ?", (release_id,)).fetchone()
        return None if r is None else r[0]

    def release(self, release_id: int) -> Release | None:
        """Release ``release_id``, or None when the catalog has none of that ID (any integer: one
        past 64 bits, typed in a job's config, names none rather than raising ``OverflowError``)."""
        if not _storable_id(release_id):
            return None
        with self.transaction() as con:
            r = con.execute("SELECT * FROM releases WHERE release_id = ?", (release_id,)).fetchone()
        return _release(r["release_id"], r["created_at"], r["manifest"]) if r else None

    def releases(self, last: int | None = None) -> list[Release]:
        """Every release, oldest first; with ``last``, only the ``last`` most recent (a manifest pins
        every source, so decoding all of them costs the catalog's size times their count)."""
        with self.transaction() as con:
            if last is None:
                rows = con.execute("SELECT * FROM releases ORDER BY release_id").fetchall()
            else:
                rows = con.execute("SELECT * FROM releases ORDER BY release_id DESC LIMIT ?", (last,)).fetchall()[::-1]
            return [_release(r["release_id"], r["created_at"], r["manifest"]) for r in rows]

    def release_summaries(self, last: int | None = None) -> list[Release]:
        """:meth:`releases` with each manifest less its ``sources`` (tables, index generations,
        digests, re-publication): what retention and activation keep or remove by. Read from
        ``release_summaries``, written beside each manifest when it was published (catalog version
        2): no manifest is parsed. Use :meth:`release_parse_ids` for their parses."""
        sql = ("SELECT r.release_id, r.created_at, s.summary FROM releases r "
               "JOIN release_summaries s ON s.release_id = r.release_id ORDER BY r.release_id")
        with self.transaction() as con:
            if last is None:
                rows = con.execute(sql).fetchall()
            else:
                rows = con.execute(sql + " DESC LIMIT ?", (last,)).fetchall()[::-1]
        return [_release(r[0], r[1], r[2], summary=True) for r in rows]

    def release_summary(self, release_id: int) -> Release | None:
        """One release as :meth:`release_summaries` reads it (its manifest less its sources)."""
        with self.transaction() as con:
            r = con.execute("SELECT r.release_id, r.created_at, s.summary FROM releases r JOIN release_summaries s "
                            "ON s.release_id = r.release_id WHERE r.release_id = ?", (release_id,)).fetchone()
        return _release(r[0], r[1], r[2], summary=True) if r else None

    def release_parse_ids(self, release_ids: Iterable[int], among: Iterable[str] | None = None) -> set[str]:
        """The parse IDs the manifests of ``release_ids`` name (their union); with ``among``, only
        which of those parse IDs they name.

        Read from ``release_parses`` (the releases that name a parse, as intervals of release IDs
        written when each release was published): with ``among`` by index, so the cost follows the
        IDs asked about, not the releases' sources (a cleanup asks about the few parses no live
        source points at).
        """
        ids = sorted(set(release_ids))
        wanted = None if among is None else sorted(set(among))
        if not ids or wanted is not None and not wanted:
            return set()
        sql = "SELECT parse_id, first_release, last_release FROM release_parses"
        with self.transaction() as con:
            if wanted is None:
                rows = con.execute(sql).fetchall()
            else:
                rows = []
                for batch, marks in in_batches(wanted):
                    rows += con.execute(sql + f" WHERE parse_id IN ({marks})", batch).fetchall()
        out = set()
        for parse_id, first, last in rows:
            # The first asked-for release at or after ``first``: inside the interval if not past ``last``.
            i = bisect.bisect_left(ids, first)
            if i < len(ids) and (last is None or ids[i] <= last):
                out.add(parse_id)
        return out

    def publish_release(self, manifest: dict[str, Any], expected_current: int | None) -> Release:
        """Insert an immutable release and swap the ``current`` pointer, atomically.

        This compare-and-swap, in one immediate transaction, is what keeps two activations (on any
        hosts) from both publishing on the same base; :meth:`exclusive` only saves the loser's work.

        Raises
        ------
        RuntimeError
            If the current pointer moved since the caller read ``expected_current``
            (two activations raced; activation is meant to be serialised).
        """
        now = time.time()
        with self.transaction(immediate=True) as con:
            r = con.execute("SELECT release_id FROM pointer WHERE name='current'").fetchone()
            current = r["release_id"] if r else None
            if current != expected_current:
                raise RuntimeError(f"current release moved from {expected_current} to {current}")
            floor = con.execute("SELECT value FROM state WHERE name = ?", (RELEASE_ID_FLOOR,)).fetchone()
            top = con.execute("SELECT MAX(release_id) FROM releases").fetchone()[0]
            if floor is not None:
                floor = json_field(floor["value"], f"state row {RELEASE_ID_FLOOR!r}", int, valid=release_id_like)
            if floor is not None and (top is None or top < floor):
                # A release ID is never given twice (a pack names its release): after a snapshot
                # was restored in place, the IDs the replaced catalog had published stay used.
                release_id = int(con.execute(
                    "INSERT INTO releases(release_id, created_at, manifest) VALUES (?, ?, '{}') RETURNING release_id",
                    (floor + 1, now)).fetchone()[0])
            else:
                release_id = int(con.execute(
                    "INSERT INTO releases(created_at, manifest) VALUES (?, '{}') RETURNING release_id", (now,)
                ).fetchone()[0])
            manifest = {**manifest, "release_id": release_id, "created_at": now}
            summary = {k: v for k, v in manifest.items() if k != "sources"}
            con.execute("UPDATE releases SET manifest = ? WHERE release_id = ?",
                        (json.dumps(manifest, sort_keys=True), release_id))
            con.execute("INSERT INTO release_summaries(release_id, summary) VALUES (?, ?)",
                        (release_id, json.dumps(summary, sort_keys=True)))
            self._record_release_parses(con, release_id, expected_current, manifest)
            con.execute(
                "INSERT INTO pointer(name, release_id) VALUES ('current', ?) "
                "ON CONFLICT(name) DO UPDATE SET release_id = excluded.release_id",
                (release_id,),
            )
            con.execute(
                "INSERT INTO events(at, kind, detail) VALUES (?, 'release-published', ?)",
                (now, json.dumps({"release_id": release_id})),
            )
        return Release(release_id, now, manifest)

    @staticmethod
    def _record_release_parses(con: Connection, release_id: int, base: int | None, manifest: dict[str, Any]) -> None:
        """Move ``release_parses`` from the release ``base`` to ``release_id``: the intervals of
        the parses ``manifest`` no longer names end at ``base``, an interval starts for each parse
        it names anew. Only the changed parses are written; the open intervals are the current
        release's parses (the interval of a parse the new release names again stays open)."""
        named = {e["parse_id"] for e in manifest.get("sources", {}).values()
                 if isinstance(e, dict) and isinstance(e.get("parse_id"), str)}
        open_ = {r[0] for r in con.execute("SELECT parse_id FROM release_parses WHERE last_release IS NULL")}
        for batch, marks in in_batches(sorted(open_ - named)):
            con.execute("UPDATE release_parses SET last_release = ? WHERE last_release IS NULL "
                        f"AND parse_id IN ({marks})", [base if base is not None else release_id - 1, *batch])
        con.executemany("INSERT INTO release_parses(parse_id, first_release, last_release) VALUES (?, ?, NULL)",
                        [(p, release_id) for p in sorted(named - open_)])

    # -- state and events ----------------------------------------------------
    def state(self, name: str, kind: type | None = None, *, valid: Callable[[Any], bool] | None = None,
              remedy: str = RESTORE_REMEDY, memo: bool = False) -> Any:
        """The JSON value stored under ``name`` by :meth:`set_state`, or None.

        ``kind``: the type the value must have (``dict``, ``int``, …) when present, and ``valid``
        what else it must satisfy (its members' types: :func:`str_map`, :func:`number_map`); ``remedy``: what
        the error tells the operator to do (a report the next scan rewrites needs no restore);
        ``memo``: the value only saves work (a damaged one reads as None, so the work is redone
        and the caller writes it again).

        Raises
        ------
        CatalogDamagedError
            The stored value is not JSON, or not a ``kind`` (it was written behind Fabric's back: a
            ``JSONDecodeError`` traceback from status, ingest and the Python API before).
        """
        with self.transaction() as con:
            r = con.execute("SELECT value FROM state WHERE name = ?", (name,)).fetchone()
        try:
            return None if r is None else json_field(r["value"], f"state row {name!r}", kind, valid=valid,
                                                     remedy=remedy)
        except CatalogDamagedError:
            if memo:
                return None
            raise

    def set_state(self, name: str, value: Any) -> None:
        with self.transaction(immediate=True) as con:
            con.execute("INSERT INTO state(name, value) VALUES (?, ?) "
                        "ON CONFLICT(name) DO UPDATE SET value = excluded.value", (name, json.dumps(value)))

    def log_event(
        self, con: Connection, kind: str, *, source_key: str | None = None,
        parse_id: str | None = None, detail: dict[str, Any] | None = None,
    ) -> None:
        con.execute(
            "INSERT INTO events(at, kind, source_key, parse_id, detail) VALUES (?,?,?,?,?)",
            (time.time(), kind, source_key, parse_id, json.dumps(detail or {}, sort_keys=True)),
        )

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        sql, args = "SELECT * FROM events", []
        if kind:
            sql += " WHERE kind = ?"
            args.append(kind)
        with self.transaction() as con:
            return [dict(r) for r in con.execute(sql + " ORDER BY event_id", args).fetchall()]

    # -- admin operations (fabric serve) ----------------------------------------
    def create_operation(self, kind: str, params: dict[str, Any]) -> Operation:
        """A new ``pending`` Operation with a random 32-hex ID."""
        import secrets

        op_id = secrets.token_hex(16)
        with self.transaction(immediate=True) as con:
            con.execute("INSERT INTO operations(operation_id, kind, status, params, created_at) VALUES (?,?,?,?,?)",
                        (op_id, kind, "pending", json.dumps(params, sort_keys=True), time.time()))
        op = self.operation(op_id)
        assert op is not None
        return op

    def set_operation_status(self, operation_id: str, status: str, *, reason: str | None = None,
                             result: dict[str, Any] | None = None) -> None:
        """Move an Operation on: ``running`` stamps ``started_at``, ``succeeded`` / ``failed`` ``finished_at``.

        Raises
        ------
        ValueError
            ``status`` is not one of ``schema.OPERATION_STATUSES``.
        """
        if status not in OPERATION_STATUSES:
            raise ValueError(f"unknown operation status {status!r}")
        now = time.time()
        with self.transaction(immediate=True) as con:
            con.execute(
                "UPDATE operations SET status = ?, reason = COALESCE(?, reason), result = COALESCE(?, result), "
                "started_at = CASE WHEN ? = 'running' THEN ? ELSE started_at END, "
                "finished_at = CASE WHEN ? IN ('succeeded', 'failed') THEN ? ELSE finished_at END "
                "WHERE operation_id = ?",
                (status, reason, None if result is None else json.dumps(result, sort_keys=True),
                 status, now, status, now, operation_id))

    def operation(self, operation_id: str) -> Operation | None:
        with self.transaction() as con:
            r = con.execute("SELECT * FROM operations WHERE operation_id = ?", (operation_id,)).fetchone()
        if r is None:
            return None
        d = dict(r)
        d["params"] = json_field(d["params"] or "{}", f"operation {operation_id}'s params", dict)
        d["result"] = json_field(d["result"] or "{}", f"operation {operation_id}'s result", dict)
        return Operation(**d)

    def operations(self, status: str | None = None) -> list[Operation]:
        """Operations, oldest first (all, or those with ``status``)."""
        with self.transaction() as con:
            rows = con.execute("SELECT operation_id FROM operations" + (" WHERE status = ?" if status else "")
                               + " ORDER BY created_at", (status,) if status else ()).fetchall()
        return [op for r in rows if (op := self.operation(r["operation_id"])) is not None]


def _is(value: Any, kind: type) -> bool:
    return isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))


def str_map(value: dict) -> bool:
    """Every key and value a string (a report keyed by source key, say)."""
    return all(isinstance(v, str) for v in value.values())


def number_map(value: dict) -> bool:
    """Every value a finite number (times, by key)."""
    return all((_is(v, int) or _is(v, float)) and math.isfinite(v) for v in value.values())


def release_id_like(value: int) -> bool:
    """An integer a catalog's 64-bit ID column holds, with room for the next one."""
    return 0 <= value < 2 ** 63 - 1


def json_field(text: Any, what: str, kind: type | None = None, *, valid: Callable[[Any], bool] | None = None,
               remedy: str = RESTORE_REMEDY) -> Any:
    """``text``, a JSON column of the catalog, decoded; ``what`` names the row in the error,
    ``remedy`` what to do about it.

    Raises
    ------
    CatalogDamagedError
        ``text`` is not JSON, or (``kind`` given) its value is not a ``kind`` (a bool is not an int),
        or (``valid`` given) ``valid(value)`` is false.
    """
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        pass
    else:
        if (kind is None or _is(value, kind)) and (valid is None or valid(value)):
            return value
    raise damaged(what, kind, shaped=valid is not None, remedy=remedy)


def damaged(what: str, kind: type | None = None, *, shaped: bool = False,
            remedy: str = RESTORE_REMEDY) -> CatalogDamagedError:
    """The error for the catalog value ``what`` that is not JSON of type ``kind`` (``shaped``: of
    its expected shape), telling the operator ``remedy``."""
    expected = "JSON" if kind is None else "a JSON " + {dict: "object", list: "array", int: "integer", str: "string",
                                                         float: "number"}.get(kind, kind.__name__)
    shape = " of the expected shape" if shaped else ""
    return CatalogDamagedError(f"{what} in the catalog is not {expected}{shape}: the catalog was altered; {remedy}")


def verdicts_of(text: Any, parse_id: str) -> dict[str, Any]:
    """A ``parse_runs.verdicts`` value decoded (raises :class:`CatalogDamagedError` as :func:`json_field`)."""
    return json_field(text or "{}", f"parse run {parse_id}'s verdicts", dict)


def _parse_run(r: Any) -> ParseRun:
    """A ``parse_runs`` row decoded.

    Raises
    ------
    CatalogDamagedError
        Its ``verdicts`` or ``counts`` is not a JSON object.
    """
    d = dict(r)
    d.pop("change_seq", None)  # the row's change number (catalog version 2), not part of the record
    d["verdicts"] = verdicts_of(d["verdicts"], d["parse_id"])
    d["counts"] = counts_of(d["counts"], d["parse_id"])
    return ParseRun(**d)


def _storable_id(value: int) -> bool:
    """Whether ``value`` fits the catalog's integer columns (signed 64 bits, SQLite's and
    PostgreSQL's BIGINT): a row ID outside them names no row."""
    return -(2 ** 63) <= value < 2 ** 63


def merge_verdicts(catalog: Catalog, verdicts: dict[str, dict[str, Any]], regated: Iterable[str] = ()) -> None:
    """Add gate verdicts ``{parse_id: {name: {"passed": bool, "detail": str}}}``, one transaction.

    ``regated``: the verdict names the gate reads. A ``ready`` or ``held`` parse one of whose
    ``regated`` verdicts changes outcome here (passed ↔ failed, or a first one that fails) goes back
    to ``parsed`` in the same transaction (reason ``regate``), so the next activation gates it again
    on the verdicts now recorded. A run that re-derives a gated parse in place without going through
    ``fabric ingest`` (a backfill of ``rechunk_job`` or ``reproject_job``, one asset materialized from
    the UI) would otherwise leave a newly failing parse ``ready`` and published. An outcome that
    stays the same changes no status: a held parse an operator accepted stays accepted.

    Raises
    ------
    KeyError
        If a parse ID has no parse run.
    """
    regated = set(regated)
    with catalog.transaction(immediate=True) as con:
        now = time.time()
        events = []
        for parse_id, named in verdicts.items():
            r = con.execute("SELECT verdicts, status FROM parse_runs WHERE parse_id = ?", (parse_id,)).fetchone()
            if r is None:
                raise KeyError(parse_id)
            before = verdicts_of(r["verdicts"], parse_id)
            merged = {**before, **named}
            changed = sorted(k for k in regated & named.keys()
                             if bool(named[k].get("passed")) != bool(before.get(k, {"passed": True}).get("passed")))
            if r["status"] in ("ready", "held") and changed:
                detail = (f"was {r['status']}; " + ", ".join(
                    f"{k} {'passes' if named[k].get('passed') else 'fails'}" for k in changed)
                    + " since: the next activation gates it again")
                con.execute(f"UPDATE parse_runs SET verdicts = ?, status = 'parsed', reason = 'regate', detail = ?, "
                            f"updated_at = ?, change_seq = {_NEXT_RUN_SEQ} WHERE parse_id = ?",
                            (json.dumps(merged, sort_keys=True), detail, now, parse_id))
                events.append((now, "parse-parsed", parse_id, json.dumps({"reason": "regate", "detail": detail})))
                continue
            con.execute(
                f"UPDATE parse_runs SET verdicts = ?, updated_at = ?, change_seq = {_NEXT_RUN_SEQ} WHERE parse_id = ?",
                (json.dumps(merged, sort_keys=True), now, parse_id),
            )
        if events:
            con.executemany("INSERT INTO events(at, kind, parse_id, detail) VALUES (?,?,?,?)", events)


#: The key of ``parse_runs.counts`` under which :func:`record_row_counts` keeps each table's rows.
ROW_COUNTS = "rows"


def counts_of(text: Any, parse_id: str) -> dict[str, Any]:
    """A ``parse_runs.counts`` value decoded (raises :class:`CatalogDamagedError` as :func:`json_field`)."""
    return json_field(text or "{}", f"parse run {parse_id}'s counts", dict)


def record_row_counts(catalog: Catalog, rows: dict[str, dict[str, int]]) -> None:
    """Record ``{table: {parse_id: rows}}``, the number of rows each parse has in each table after a
    write of its partitions (0 included), in ``parse_runs.counts["rows"]``, one transaction; unknown
    parse IDs are ignored. ``fabric repair`` reads them to tell a parse whose rows a damaged data
    file held from one that never had any (:func:`row_counts`).

    Raises
    ------
    CatalogDamagedError
        If a parse run's ``counts`` is not a JSON object.
    """
    by_parse: dict[str, dict[str, int]] = {}
    for table, counts in rows.items():
        for parse_id, n in counts.items():
            by_parse.setdefault(parse_id, {})[table] = int(n)
    if not by_parse:
        return
    with catalog.transaction(immediate=True) as con:
        for parse_id in sorted(by_parse):
            r = con.execute("SELECT counts FROM parse_runs WHERE parse_id = ?", (parse_id,)).fetchone()
            if r is None:
                continue
            counts = counts_of(r["counts"], parse_id)
            tables = counts.get(ROW_COUNTS)
            counts[ROW_COUNTS] = {**(tables if isinstance(tables, dict) else {}), **by_parse[parse_id]}
            # No change_seq bump: the counts change nothing activation reads.
            con.execute("UPDATE parse_runs SET counts = ? WHERE parse_id = ?",
                        (json.dumps(counts, sort_keys=True), parse_id))


def row_counts(run: ParseRun | ParseRunOverview) -> dict[str, int]:
    """Table → the rows ``run`` had in it when its partition was last written
    (:func:`record_row_counts`); a table missing was not written since Fabric began recording
    (an older Fabric's parse), or its count is not a number."""
    tables = run.counts.get(ROW_COUNTS)
    if not isinstance(tables, dict):
        return {}
    # ``type(n) is int``: a decoded JSON number is an int or a float, true/false a bool (a
    # subclass of int); one test instead of two, for status's 100k runs of 8 tables.
    return {t: n for t, n in tables.items() if type(n) is int and n >= 0}


def drop_verdicts(catalog: Catalog, parse_ids: Iterable[str], names: Iterable[str]) -> None:
    """Remove the gate verdicts ``names`` of ``parse_ids`` (their projections are about to be
    recomputed in place), one transaction; unknown parse IDs are ignored."""
    names = set(names)
    with catalog.transaction(immediate=True) as con:
        now = time.time()
        for parse_id in sorted(set(parse_ids)):
            r = con.execute("SELECT verdicts FROM parse_runs WHERE parse_id = ?", (parse_id,)).fetchone()
            if r is None:
                continue
            kept = {k: v for k, v in verdicts_of(r["verdicts"], parse_id).items() if k not in names}
            con.execute(
                f"UPDATE parse_runs SET verdicts = ?, updated_at = ?, change_seq = {_NEXT_RUN_SEQ} WHERE parse_id = ?",
                (json.dumps(kept, sort_keys=True), now, parse_id),
            )

