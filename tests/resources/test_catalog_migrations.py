"""The catalog's versioned schema and durability, on SQLite and PostgreSQL alike: a catalog that
main wrote before versioning opens with every row, a newer one is refused, a read-only opener of
an older one is told what to run, a failed migration changes nothing, two writers migrate once,
and SQLite commits with ``synchronous=FULL``."""

from __future__ import annotations

import json
import multiprocessing as mp
import sqlite3
import uuid
from pathlib import Path

import pytest

from fabric_resources.catalog import (MIGRATIONS, CatalogMigrationError, CatalogMigrationNeededError,
                                      CatalogTooNewError, Migration, PostgresCatalog, SqliteCatalog)
from fabric_resources.schema import CATALOG_DDL, CATALOG_DDL_POSTGRES

#: The runner's tests migrate from version 1 to a test step 2 (this Fabric's own later steps have
#: their own tests below).
V1 = MIGRATIONS[:1]
#: A second version for the tests: one column and one row, so "applied once" is countable.
V2 = Migration(
    2, "test-note",
    sqlite="ALTER TABLE sources ADD COLUMN note TEXT;\n"
           "INSERT INTO events(at, kind, detail) VALUES (0, 'test-migrated', '{}');\n",
    postgres="ALTER TABLE sources ADD COLUMN note TEXT COLLATE \"C\";\n"
             "INSERT INTO events(at, kind, detail) VALUES (0, 'test-migrated', '{}');\n",
)
#: Version 2 that fails at its last statement, after changing the schema and a row.
V2_FAILING = Migration(
    2, "test-failing",
    sqlite="ALTER TABLE sources ADD COLUMN note TEXT;\nUPDATE roots SET label = 'changed';\n"
           "CREATE TABLE extra (x INTEGER);\nSELECT * FROM no_such_table;\n",
    postgres="ALTER TABLE sources ADD COLUMN note TEXT;\nUPDATE roots SET label = 'changed';\n"
             "CREATE TABLE extra (x BIGINT);\nSELECT * FROM no_such_table;\n",
)
# Holds the write lock long enough that every racing writer has read the old version first.
_SLOW = {"sqlite": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) "
                   "SELECT count(*) FROM c;\n",
         "postgres": "SELECT pg_sleep(1.5);\n"}
V2_SLOW = Migration(2, "test-note-slow", sqlite=_SLOW["sqlite"] + V2.sqlite, postgres=_SLOW["postgres"] + V2.postgres)

# One row in every table of version 1, as main wrote them (raw SQL: no Catalog method runs).
_ROWS = [
    "INSERT INTO roots(root_id, path, label, registered_at) VALUES (1, '/data/notes', 'notes', 1733000000.25)",
    "INSERT INTO sources VALUES ('notes/a.txt', 1, 'a.txt', 'present', 'text/plain', 1733000000123456789, 10, "
    "'h1', 'p1', 1733000000.5, 1733000001.5)",
    "INSERT INTO acquisitions(source_key, source_hash, mtime_ns, size, observed_at) "
    "VALUES ('notes/a.txt', 'h1', 1733000000123456789, 10, 1733000000.5)",
    "INSERT INTO parse_runs VALUES ('p1', 'h1', 'text/plain', 'text', '1', 'c', 'en', 'ready', NULL, NULL, "
    "'{\"g\": {\"passed\": true}}', '{\"units\": 3}', 1733000000.5, 1733000001.5)",
    "INSERT INTO releases(release_id, created_at, manifest) VALUES (1, 1733000002.0, '{\"release_id\": 1, \"sources\": {}, \"tables\": {}}')",
    "INSERT INTO pointer(name, release_id) VALUES ('current', 1)",
    "INSERT INTO state(name, value) VALUES ('last_scan', '{\"at\": 1733000000.5}')",
    "INSERT INTO events(at, kind, source_key, parse_id, detail) "
    "VALUES (1733000002.0, 'release-published', NULL, NULL, '{\"release_id\": 1}')",
    "INSERT INTO tombstones(purged_at, selector, source_key_hashes, source_hashes, parse_ids, "
    "completed_at) VALUES (1733000003.0, 'source', '[\"k\"]', '[\"h0\"]', '[\"p0\"]', 1733000004.0)",
    "INSERT INTO operations(operation_id, kind, status, params, created_at) "
    "VALUES ('00ff', 'ingest', 'succeeded', '{}', 1733000005.0)",
]
_TABLES = ("roots", "sources", "acquisitions", "parse_runs", "releases", "pointer", "state", "events",
           "tombstones", "operations")


class _Raw:
    """Raw SQL on one test catalog, beside (not through) the Catalog classes."""

    def __init__(self, backend: str, tmp_path: Path, request) -> None:
        self.backend = backend
        if backend == "sqlite":
            self.path = tmp_path / "catalog.sqlite3"
        else:
            self.url = request.getfixturevalue("postgres_catalog_db")
            self.schema = f"t_{uuid.uuid4().hex[:12]}"

    def run(self, statements: list[str]) -> None:
        if self.backend == "sqlite":
            con = sqlite3.connect(self.path)
            with con:
                for s in statements:
                    con.execute(s)
            con.close()
            return
        import psycopg2

        con = psycopg2.connect(self.url, options=f"-c search_path={self.schema}")
        try:
            with con, con.cursor() as cur:
                for s in statements:
                    cur.execute(s)
        finally:
            con.close()

    def query(self, sql: str) -> list[tuple]:
        if self.backend == "sqlite":
            con = sqlite3.connect(self.path)
            try:
                return [tuple(r) for r in con.execute(sql).fetchall()]
            finally:
                con.close()
        import psycopg2

        con = psycopg2.connect(self.url, options=f"-c search_path={self.schema}")
        try:
            with con.cursor() as cur:
                cur.execute(sql)
                return [tuple(r) for r in cur.fetchall()]
        finally:
            con.close()

    def build_version_1(self) -> None:
        """Today's main: the version-1 DDL run at open, no version recorded, one row per table."""
        if self.backend == "sqlite":
            con = sqlite3.connect(self.path)
            con.execute("PRAGMA journal_mode=WAL")
            con.executescript(CATALOG_DDL)
            con.close()
            self.run(_ROWS)
        else:
            self.run([f'CREATE SCHEMA "{self.schema}"', CATALOG_DDL_POSTGRES, *_ROWS])

    def dump(self) -> dict[str, list[tuple]]:
        return {t: sorted(self.query(f"SELECT * FROM {t}"), key=repr) for t in _TABLES}

    def versions(self) -> list[int]:
        return [r[0] for r in self.query("SELECT version FROM catalog_migrations ORDER BY version")]

    def columns(self, table: str) -> list[str]:
        if self.backend == "sqlite":
            return [r[1] for r in self.query(f"PRAGMA table_info({table})")]
        return [r[0] for r in self.query(
            f"SELECT column_name FROM information_schema.columns WHERE table_schema = '{self.schema}' "
            f"AND table_name = '{table}' ORDER BY ordinal_position")]

    def open(self, *, read_only: bool = False, migrations=V1, request=None):
        if self.backend == "sqlite":
            return SqliteCatalog(self.path, read_only=read_only, migrations=migrations)
        from fabric_resources.catalog import postgres

        postgres._ready.clear()  # each open here stands for a new process, which checks the version
        catalog = PostgresCatalog(self.url, schema=self.schema, read_only=read_only, migrations=migrations)
        if request is not None:
            request.addfinalizer(catalog.close)
        return catalog


@pytest.fixture(params=["sqlite", "postgres"])
def raw(request, tmp_path):
    return _Raw(request.param, tmp_path, request)


def test_a_version_1_catalog_from_before_versioning_opens_migrates_and_keeps_every_row(raw, request):
    """guards against: a home written by today's main (tables, no version) opening with its rows
    changed or lost, not recorded as version 1, or missing a later migration's column."""
    raw.build_version_1()
    before = raw.dump()
    assert all(before.values())  # one row in every table
    catalog = raw.open(request=request)
    assert raw.versions() == [1]
    assert raw.dump() == before
    assert catalog.current_release().release_id == 1 and catalog.roots()[0].label == "notes"
    catalog.close()
    raw.open(migrations=(*V1, V2), request=request).close()
    assert raw.versions() == [1, 2]
    assert "note" in raw.columns("sources")
    after = raw.dump()
    assert after["sources"] == [(*row, None) for row in before["sources"]]
    assert after["events"] == sorted([*before["events"], *raw.query("SELECT * FROM events WHERE kind = 'test-migrated'")],
                                     key=repr)
    assert {t: v for t, v in after.items() if t not in ("sources", "events")} == \
        {t: v for t, v in before.items() if t not in ("sources", "events")}


def test_a_fresh_catalog_records_the_latest_version(raw, request):
    """guards against: a new home created without a recorded schema version."""
    raw.open(migrations=MIGRATIONS, request=request).close()
    assert raw.versions() == [m.version for m in MIGRATIONS]


def test_version_2_fills_each_release_summary_and_parses_from_its_manifest(raw, request):
    """guards against: releases published before ``releases.summary`` and ``release_parses``
    existed reading as naming no parse (retention would remove the parses they pin) or losing
    their tables and generations; and the migration changing any other row."""
    raw.build_version_1()
    sources = {"fs:notes/a.txt": {"parse_id": "p1", "root": "/data/notes"},
               "fs:notes/b.txt": {"parse_id": "p2", "root": "/data/notes"},
               "fs:notes/c.txt": {"parse_id": "p1", "root": "/data/notes"}}
    manifest = {"release_id": 2, "sources": sources, "tables": {"chunks": 4}, "lexical_generation": "g1"}
    raw.run(["INSERT INTO releases(release_id, created_at, manifest) VALUES (2, 1733000009.0, '"
             + json.dumps(manifest) + "')"])
    before = raw.dump()
    catalog = raw.open(migrations=MIGRATIONS, request=request)
    assert raw.versions() == [m.version for m in MIGRATIONS]
    # Release 1 is current and names no parse; release 2 (not current) names p1 and p2.
    assert sorted(raw.query("SELECT * FROM release_parses")) == [("p1", 2, 2), ("p2", 2, 2)]
    summaries = {r.release_id: r.manifest for r in catalog.release_summaries()}
    assert summaries == {1: {"release_id": 1, "tables": {}}, 2: {k: v for k, v in manifest.items() if k != "sources"}}
    assert catalog.release_parse_ids([1, 2]) == {"p1", "p2"}
    assert catalog.release_parse_ids([1, 2], among=["p2", "p9"]) == {"p2"}
    assert catalog.release_parse_ids([1], among=["p1"]) == set()
    after = raw.dump()  # every row kept; sources and parse runs gain their change number, 0
    assert after["sources"] == [(*row, 0) for row in before["sources"]]
    assert after["parse_runs"] == [(*row, 0) for row in before["parse_runs"]]
    assert {t: v for t, v in after.items() if t not in ("sources", "parse_runs")} == \
        {t: v for t, v in before.items() if t not in ("sources", "parse_runs")}
    if raw.backend == "sqlite":
        catalog.close()


def test_version_3_records_the_acceptance_of_parses_an_older_fabric_accepted(raw, request):
    """guards against: a parse an operator accepted before acceptances were recorded (ready, reason
    accepted, no ``accepted_by_operator`` verdict) held again on the same failing check by the first
    re-derivation after an upgrade (a re-chunk after a chunking change: its file left the release);
    and the migration changing a held parse, an acceptance already recorded or another table."""
    from fabric_assets.gate import acceptance, gate_status
    from fabric_assets.projections import ANNOTATION_VERDICT

    raw.build_version_1()
    verdicts = {"unit_ids_are_unique": {"passed": False, "detail": "1 duplicate unit_id"},
                "chunk_ids_are_unique": {"passed": True, "detail": "3 unique"},
                ANNOTATION_VERDICT: {"passed": False, "detail": "not annotated"}}
    recorded = {**verdicts, **acceptance(verdicts)}
    rows = [("p-accepted", "ready", "accepted", verdicts), ("p-held", "held", "gate:unit_ids_are_unique", verdicts),
            ("p-recorded", "ready", "accepted", recorded)]
    raw.run([f"INSERT INTO parse_runs(parse_id, source_hash, media_type, parser_name, parser_version, "
             f"parser_config_hash, status, reason, verdicts, counts, created_at, updated_at) VALUES ('{pid}', 'h', "
             f"'text/plain', 'text', '1', 'c', '{status}', '{reason}', '{json.dumps(v)}', '{{}}', 1.0, 2.0)"
             for pid, status, reason, v in rows])
    before = raw.dump()
    catalog = raw.open(migrations=MIGRATIONS, request=request)
    assert raw.versions() == [m.version for m in MIGRATIONS]
    runs = {r.parse_id: r for r in catalog.parse_runs([pid for pid, *_ in rows])}
    assert runs["p-accepted"].verdicts == recorded  # as `fabric parse accept` records it today
    assert gate_status(runs["p-accepted"].verdicts, ("unit_ids_are_unique",))[0] == "ready"
    assert gate_status(verdicts, ("unit_ids_are_unique",))[0] == "held"  # what a re-derivation did without it
    assert runs["p-held"].verdicts == verdicts and runs["p-held"].status == "held"
    assert runs["p-recorded"].verdicts == recorded
    assert runs["p-accepted"].status == "ready" and runs["p-accepted"].reason == "accepted"
    after = raw.dump()
    assert {t: v for t, v in after.items() if t not in ("sources", "parse_runs")} == \
        {t: v for t, v in before.items() if t not in ("sources", "parse_runs")}
    if raw.backend == "sqlite":
        catalog.close()


def test_a_newer_catalog_is_refused_naming_both_versions(raw, request):
    """guards against: a home written by a newer Fabric opening silently (for writing or reading)."""
    raw.open(request=request).close()
    raw.run(["INSERT INTO catalog_migrations(version, name, applied_at) VALUES (7, 'from-the-future', 0)"])
    before = raw.dump()
    for read_only in (False, True):
        with pytest.raises(CatalogTooNewError) as err:
            raw.open(read_only=read_only, request=request)
        message = str(err.value)
        assert "version 7" in message and "version 1" in message
        assert "upgrade Fabric" in message
        assert (err.value.found, err.value.supported) == (7, 1)
    assert raw.dump() == before and raw.versions() == [1, 7]


def test_a_read_only_open_of_an_older_catalog_says_what_to_run(raw, request):
    """guards against: a query process reading an older catalog (missing what this Fabric needs)
    silently, or failing without saying how to migrate it; and a reader migrating anything."""
    raw.build_version_1()
    raw.open(request=request).close()  # version 1, recorded
    with pytest.raises(CatalogMigrationNeededError) as err:
        raw.open(read_only=True, migrations=(*V1, V2), request=request)
    message = str(err.value)
    assert "version 1" in message and "version 2" in message and "`fabric ingest PATH" in message
    assert raw.versions() == [1] and "note" not in raw.columns("sources")
    # A catalog of today's main (version 1, never recorded) reads as version 1 without a migration.
    other = _Raw(raw.backend, request.getfixturevalue("tmp_path") / "other", request)
    if raw.backend == "sqlite":
        other.path.parent.mkdir()
    other.build_version_1()
    assert other.open(read_only=True, request=request).current_release().release_id == 1
    assert "catalog_migrations" not in {r[0] for r in other.query(
        "SELECT name FROM sqlite_master WHERE type = 'table'" if raw.backend == "sqlite" else
        f"SELECT table_name FROM information_schema.tables WHERE table_schema = '{other.schema}'")}


def test_a_migration_that_fails_midway_leaves_the_old_version(raw, request):
    """guards against: a half-applied migration (a column added, a row changed, a table created)
    left behind by a step that failed, or the version moving without its step."""
    raw.build_version_1()
    raw.open(request=request).close()
    before = raw.dump()
    with pytest.raises(CatalogMigrationError) as err:
        raw.open(migrations=(*V1, V2_FAILING), request=request)
    assert "migration 2" in str(err.value) and "stays at version 1" in str(err.value)
    assert raw.versions() == [1]
    assert "note" not in raw.columns("sources") and raw.columns("extra") == []
    assert raw.dump() == before
    raw.open(migrations=(*V1, V2), request=request).close()  # a fixed step then applies
    assert raw.versions() == [1, 2]


def _open_racing(backend: str, where: str, schema: str, gate, migrations) -> None:
    gate.wait(60)
    if backend == "sqlite":
        SqliteCatalog(Path(where), migrations=migrations)
    else:
        PostgresCatalog(where, schema=schema, migrations=migrations).close()


def test_two_writers_opening_an_old_catalog_migrate_it_once(raw, request):
    """guards against: racing writers (processes, or hosts on one PostgreSQL) that each read the
    old version and apply the same step twice (a duplicate column fails, a data step runs twice)."""
    raw.build_version_1()
    raw.open(request=request).close()
    ctx = mp.get_context("spawn")
    gate = ctx.Event()
    where = str(raw.path) if raw.backend == "sqlite" else raw.url
    schema = "" if raw.backend == "sqlite" else raw.schema
    procs = [ctx.Process(target=_open_racing, args=(raw.backend, where, schema, gate, (*V1, V2_SLOW)))
             for _ in range(3)]
    for p in procs:
        p.start()
    gate.set()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert raw.versions() == [1, 2]
    assert raw.query("SELECT count(*) FROM events WHERE kind = 'test-migrated'") == [(1,)]


def test_sqlite_commits_with_synchronous_full(tmp_path):
    """guards against: the catalog committing with synchronous=NORMAL, under which WAL may lose the
    last commits (an activation's pointer swap, a purge's tombstone) on power loss."""
    catalog = SqliteCatalog(tmp_path / "catalog.sqlite3")
    for opened in (catalog, SqliteCatalog(tmp_path / "catalog.sqlite3", read_only=True)):
        for immediate in (False, True):
            if opened.read_only and immediate:
                continue
            with opened.transaction(immediate=immediate) as con:
                assert con.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL (SQLite docs)
    con = sqlite3.connect(tmp_path / "catalog.sqlite3")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()
