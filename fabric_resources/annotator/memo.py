"""The annotation memo: grounded chain outputs keyed by source content × producer identity.

One SQLite file (WAL, short transactions, ``busy_timeout``), so several processes and threads
may share it. A key (the annotation producer's ``memo_key``, on the write side) covers the
excerpt's fragment texts, its section path, the chain and the producer identity, but no unit
IDs: the same text elsewhere, or unchanged after a re-parse, finds the entry and is re-attributed
to its own units. Payloads are JSON objects; their offsets are relative to the excerpt's
fragments (fragment index + offsets in its text), never to units.

Each entry also records the parses that used it (stored it, or found it): retention, a purge and
an in-place restore forget an entry with the last parse that used it
(``fabric_assets.lifecycle.forgetting``), whether or not that parse's annotation rows were
ever written (a run stopped after its chains were memoised writes none).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["AnnotationMemo", "MemoEntry"]

_DDL = """
CREATE TABLE IF NOT EXISTS annotation_memo (
    memo_key   TEXT PRIMARY KEY,
    producer   TEXT NOT NULL,
    chain      TEXT NOT NULL,
    payload    TEXT NOT NULL,
    created_at REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS memo_uses (
    memo_key TEXT NOT NULL,
    parse_id TEXT NOT NULL,
    PRIMARY KEY (memo_key, parse_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS memo_uses_by_parse ON memo_uses (parse_id);
"""


@dataclass(frozen=True)
class MemoEntry:
    """A stored chain output: its key, producer identity, chain name and JSON payload."""

    memo_key: str
    producer: str
    chain: str
    payload: dict[str, Any]


class AnnotationMemo:
    """``AnnotationMemo(path)``: open (creating) the memo database at ``path``.

    Thread-safe (one connection behind a lock; each operation is a few microseconds of SQLite
    work, so calling it from an event loop is fine); process-safe through SQLite WAL.

    Raises
    ------
    sqlite3.Error
        If the file cannot be opened or created.
    """

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=busy_timeout_s, check_same_thread=False,
                                   isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_DDL)

    def get(self, memo_key: str, *, parse_id: str | None = None) -> MemoEntry | None:
        """The entry under ``memo_key``, or ``None``; found, ``parse_id`` is recorded as a user."""
        with self._lock:
            row = self._db.execute(
                "SELECT producer, chain, payload FROM annotation_memo WHERE memo_key = ?", (memo_key,)
            ).fetchone()
            if row is not None and parse_id is not None:
                self._db.execute("INSERT OR IGNORE INTO memo_uses (memo_key, parse_id) VALUES (?, ?)",
                                 (memo_key, parse_id))
        if row is None:
            return None
        return MemoEntry(memo_key, row[0], row[1], json.loads(row[2]))

    def put(self, memo_key: str, payload: Mapping[str, Any], *, producer: str, chain: str,
            parse_id: str | None = None) -> None:
        """Store ``payload`` (JSON-serialisable) under ``memo_key``, replacing any entry, and
        record ``parse_id`` as its user (one transaction).

        Raises
        ------
        TypeError
            If ``payload`` is not JSON-serialisable.
        """
        text = json.dumps(payload, ensure_ascii=False, sort_keys=True)
        with self._lock, self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "INSERT OR REPLACE INTO annotation_memo (memo_key, producer, chain, payload, created_at)"
                " VALUES (?, ?, ?, ?, ?)", (memo_key, producer, chain, text, time.time()),
            )
            if parse_id is not None:
                self._db.execute("INSERT OR IGNORE INTO memo_uses (memo_key, parse_id) VALUES (?, ?)",
                                 (memo_key, parse_id))

    def unowned_keys(self) -> set[str]:
        """Keys no use is recorded for (entries memoised before uses were recorded)."""
        with self._lock:
            return {k for (k,) in self._db.execute(
                "SELECT memo_key FROM annotation_memo m WHERE NOT EXISTS "
                "(SELECT 1 FROM memo_uses u WHERE u.memo_key = m.memo_key)")}

    def record_uses(self, uses: Iterable[tuple[str, str]]) -> None:
        """Record each ``(memo_key, parse_id)`` whose entry exists (one transaction)."""
        with self._lock, self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("INSERT OR IGNORE INTO memo_uses (memo_key, parse_id) SELECT ?, ? WHERE EXISTS "
                                 "(SELECT 1 FROM annotation_memo WHERE memo_key = ?)",
                                 [(k, p, k) for k, p in uses])

    def keys_used_by(self, parse_ids: Iterable[str]) -> set[str]:
        """The keys whose recorded users include one of ``parse_ids``."""
        return {k for (k,) in self._batched("SELECT memo_key FROM memo_uses WHERE parse_id IN ({})",
                                            parse_ids)}

    def users_of(self, memo_keys: Iterable[str]) -> dict[str, set[str]]:
        """``{key: recorded users}`` for those of ``memo_keys`` that have any."""
        users: dict[str, set[str]] = {}
        for key, parse_id in self._batched("SELECT memo_key, parse_id FROM memo_uses WHERE memo_key IN ({})",
                                           memo_keys):
            users.setdefault(key, set()).add(parse_id)
        return users

    def delete(self, memo_keys: Iterable[str], *, parse_ids: Iterable[str] = ()) -> int:
        """Remove the entries under ``memo_keys`` (retention, a purge, a restore) with their
        recorded users, and every use ``parse_ids`` recorded; return how many entries were there.
        Deleted pages are zeroed (``secure_delete``); rewrite the file afterwards to drop them from
        the WAL."""
        keys, parses = sorted(set(memo_keys)), sorted(set(parse_ids))
        removed = 0
        with self._lock, self._db:
            self._db.execute("PRAGMA secure_delete=ON")
            self._db.execute("BEGIN IMMEDIATE")
            for i in range(0, len(keys), 500):
                batch = keys[i:i + 500]
                marks = ", ".join("?" * len(batch))
                cur = self._db.execute(f"DELETE FROM annotation_memo WHERE memo_key IN ({marks})", batch)
                removed += cur.rowcount
                self._db.execute(f"DELETE FROM memo_uses WHERE memo_key IN ({marks})", batch)
            for i in range(0, len(parses), 500):
                batch = parses[i:i + 500]
                self._db.execute(f"DELETE FROM memo_uses WHERE parse_id IN ({', '.join('?' * len(batch))})", batch)
        return removed

    def _batched(self, sql: str, values: Iterable[str]) -> list[tuple]:
        """``sql`` (one ``IN ({})``) run over ``values`` in batches of 500 (SQLite's variable limit
        is 999 on older builds)."""
        values = sorted(set(values))
        out: list[tuple] = []
        with self._lock:
            for i in range(0, len(values), 500):
                batch = values[i:i + 500]
                out += self._db.execute(sql.format(", ".join("?" * len(batch))), batch).fetchall()
        return out

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM annotation_memo").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> "AnnotationMemo":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
