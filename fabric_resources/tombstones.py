"""The catalog side of a purge: tombstones (hashes only), forgetting rows, scrubbing the file.

A tombstone records what one purge removed without naming it: the SHA-256 of each purged source
key, the content hashes and the parse IDs (all digests already). It is written before anything is
removed (``completed_at`` NULL) so an interrupted purge can be finished from it. Forgetting deletes
every catalog row about the purged sources, then rewrites the database file so that no deleted
row survives in a free page or the write-ahead log.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import time
from collections.abc import Iterable
from typing import Any
from dataclasses import dataclass
from pathlib import Path

from fabric_resources.catalog import Catalog, SqliteCatalog
from fabric_resources.catalog.base import in_batches, json_field


@dataclass(frozen=True)
class Tombstone:
    """What one purge removed, by hashes only (``schema`` DDL, table ``tombstones``)."""

    tombstone_id: int
    purged_at: float
    selector: str
    source_key_hashes: tuple[str, ...]
    source_hashes: tuple[str, ...]
    parse_ids: tuple[str, ...]
    completed_at: float | None


def source_key_hash(source_key: str) -> str:
    """SHA-256 hex of a source key (UTF-8): what a tombstone keeps instead of the key."""
    return hashlib.sha256(source_key.encode("utf-8")).hexdigest()


def root_marker(label: str) -> str:
    """``root:<SHA-256 hex of the label>``: kept among a root purge's key hashes (never a key's
    hash: those are bare hex), so only the same label finishes it once the root's row is gone."""
    return "root:" + source_key_hash(label)


def add_tombstone(catalog: Catalog, selector: str, source_keys: Iterable[str], source_hashes: Iterable[str],
                  parse_ids: Iterable[str], markers: Iterable[str] = ()) -> int:
    """Record a purge about to start (``completed_at`` NULL); return its ID. ``markers``:
    :func:`root_marker` of the roots it purges, stored with the key hashes."""
    with catalog.transaction(immediate=True) as con:
        row = con.execute(
            "INSERT INTO tombstones(purged_at, selector, source_key_hashes, source_hashes, parse_ids) "
            "VALUES (?,?,?,?,?) RETURNING tombstone_id",
            (time.time(), selector, json.dumps(sorted({source_key_hash(k) for k in source_keys} | set(markers))),
             json.dumps(sorted(set(source_hashes))), json.dumps(sorted(set(parse_ids))))).fetchone()
        return int(row[0])


def complete_tombstone(catalog: Catalog, tombstone_id: int) -> None:
    with catalog.transaction(immediate=True) as con:
        con.execute("UPDATE tombstones SET completed_at = ? WHERE tombstone_id = ?", (time.time(), tombstone_id))


def tombstones(catalog: Catalog) -> list[Tombstone]:
    with catalog.transaction() as con:
        rows = con.execute("SELECT * FROM tombstones ORDER BY tombstone_id").fetchall()
    def listed(r: Any, column: str) -> tuple[str, ...]:
        return tuple(json_field(r[column], f"tombstone {r['tombstone_id']}'s {column}", list,
                                valid=lambda v: all(isinstance(x, str) for x in v)))

    return [Tombstone(r["tombstone_id"], r["purged_at"], r["selector"], listed(r, "source_key_hashes"),
                      listed(r, "source_hashes"), listed(r, "parse_ids"), r["completed_at"])
            for r in rows]


def forget(catalog: Catalog, source_keys: Iterable[str], parse_ids: Iterable[str], source_hashes: Iterable[str],
           release_ids: Iterable[int] = (), root_ids: Iterable[int] = ()) -> None:
    """Delete every catalog row about ``source_keys``, ``parse_ids`` and ``source_hashes`` (sources,
    acquisitions, parse runs, events naming them), the releases ``release_ids`` (their manifests
    name the purged sources) and the roots ``root_ids``, in one transaction; then, for a SQLite
    catalog, rewrite the database file so the deleted rows leave no bytes behind
    (``secure_delete``, ``VACUUM``, a truncating WAL checkpoint)."""
    keys, pids, hashes = sorted(set(source_keys)), sorted(set(parse_ids)), sorted(set(source_hashes))
    rels, roots = sorted(set(release_ids)), sorted(set(root_ids))
    with catalog.transaction(immediate=True) as con:
        if isinstance(catalog, SqliteCatalog):
            con.execute("PRAGMA secure_delete=ON")
        _redact_operations(con, keys, roots)
        for sql, values in (("DELETE FROM sources WHERE source_key IN ({})", keys),
                            ("DELETE FROM acquisitions WHERE source_key IN ({})", keys),
                            ("DELETE FROM acquisitions WHERE source_hash IN ({})", hashes),
                            ("DELETE FROM events WHERE source_key IN ({})", keys),
                            ("DELETE FROM events WHERE parse_id IN ({})", pids),
                            ("DELETE FROM parse_runs WHERE parse_id IN ({})", pids),
                            ("DELETE FROM parse_runs WHERE source_hash IN ({})", hashes),
                            ("DELETE FROM release_parses WHERE parse_id IN ({})", pids),
                            ("DELETE FROM release_summaries WHERE release_id IN ({})", rels),
                            ("DELETE FROM releases WHERE release_id IN ({})", rels),
                            ("DELETE FROM roots WHERE root_id IN ({})", roots)):
            for batch, marks in in_batches(values):
                con.execute(sql.format(marks), batch)
    # PostgreSQL keeps deleted tuples until its own VACUUM reclaims them (autovacuum); only the
    # SQLite file is rewritten here (docs/scale.md).
    if isinstance(catalog, SqliteCatalog):
        scrub(catalog.path)


#: What an admin operation's record (``fabric serve``) says in place of a purged name.
REDACTED = "(purged)"


def _redact_operations(con: Any, source_keys: list[str], root_ids: list[int]) -> None:
    """The server's operation records that name a purged source or root (a purge's own
    ``source_keys`` or ``root``, an ingest's path, failed sources and skipped files, a re-parse's
    key, a reason) name it no more: each such string reads :data:`REDACTED`. (A purge over HTTP
    kept the purged keys in its own record.)"""
    in_text = set(source_keys)  # replaced inside free text too (a reason); a bare label only as a whole value
    labels: set[str] = set()
    prefixes: list[str] = []
    for batch, marks in in_batches(root_ids):
        for r in con.execute(f"SELECT path, label FROM roots WHERE root_id IN ({marks})", batch).fetchall():
            in_text.add(r["path"])
            labels.add(r["label"])
            prefixes.append(f"fs:{r['label']}/")
    names = in_text | labels
    if not names:
        return
    pattern = re.compile("|".join([*(re.escape(n) for n in sorted(in_text, key=len, reverse=True)),
                                   *(re.escape(p) + r"\S*" for p in prefixes)]))

    def redacted(value: Any) -> Any:
        if isinstance(value, str):
            return REDACTED if value in names or value.startswith(tuple(prefixes)) else value
        if isinstance(value, list):
            return [redacted(v) for v in value]
        if isinstance(value, dict):
            return {k: redacted(v) for k, v in value.items()}
        return value

    for r in con.execute("SELECT operation_id, params, result, reason FROM operations").fetchall():
        new = []
        for column in ("params", "result"):
            try:
                value = json.loads(r[column]) if r[column] is not None else None
            except ValueError:  # a damaged record: its text, names replaced
                new.append(pattern.sub(REDACTED, r[column]))
                continue
            new.append(r[column] if redacted(value) == value else json.dumps(redacted(value)))
        new.append(pattern.sub(REDACTED, r["reason"]) if r["reason"] is not None else None)
        if new != [r["params"], r["result"], r["reason"]]:
            con.execute("UPDATE operations SET params = ?, result = ?, reason = ? WHERE operation_id = ?",
                        (*new, r["operation_id"]))


def scrub(path: Path) -> None:
    """Rewrite the SQLite database at ``path`` so no deleted row survives in a free page or in the
    write-ahead log (``VACUUM`` copies live rows only; ``wal_checkpoint(TRUNCATE)`` empties the WAL)."""
    con = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    try:
        con.execute("PRAGMA busy_timeout=30000")
        con.execute("PRAGMA secure_delete=ON")
        con.execute("VACUUM")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()
