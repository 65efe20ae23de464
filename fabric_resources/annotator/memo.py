"""The annotation memo: grounded chain outputs keyed by source content × producer identity.

One SQLite file (WAL, short transactions, ``busy_timeout``), so several processes and threads
may share it. A key (the annotation producer's ``memo_key``, on the write side) covers the
excerpt's fragment texts, its section path, the chain and the producer identity, but no unit
IDs: the same text elsewhere, or unchanged after a re-parse, finds the entry and is re-attributed
to its own units. Payloads are JSON objects; their offsets are relative to the excerpt's
fragments (fragment index + offsets in its text), never to units.
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

    def get(self, memo_key: str) -> MemoEntry | None:
        """The entry under ``memo_key``, or ``None``."""
        with self._lock:
            row = self._db.execute(
                "SELECT producer, chain, payload FROM annotation_memo WHERE memo_key = ?", (memo_key,)
            ).fetchone()
        if row is None:
            return None
        return MemoEntry(memo_key, row[0], row[1], json.loads(row[2]))

    def put(self, memo_key: str, payload: Mapping[str, Any], *, producer: str, chain: str) -> None:
        """Store ``payload`` (JSON-serialisable) under ``memo_key``, replacing any entry.

        Raises
        ------
        TypeError
            If ``payload`` is not JSON-serialisable.
        """
        text = json.dumps(payload, ensure_ascii=False, sort_keys=True)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO annotation_memo (memo_key, producer, chain, payload, created_at)"
                " VALUES (?, ?, ?, ?, ?)", (memo_key, producer, chain, text, time.time()),
            )

    def delete(self, memo_keys: Iterable[str]) -> int:
        """Remove the entries under ``memo_keys`` (a purge); return how many were there. Deleted
        pages are zeroed (``secure_delete``); rewrite the file afterwards to drop them from the WAL."""
        keys = sorted(set(memo_keys))
        removed = 0
        with self._lock:
            self._db.execute("PRAGMA secure_delete=ON")
            for i in range(0, len(keys), 500):
                batch = keys[i:i + 500]
                cur = self._db.execute(
                    f"DELETE FROM annotation_memo WHERE memo_key IN ({', '.join('?' * len(batch))})", batch)
                removed += cur.rowcount
        return removed

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
