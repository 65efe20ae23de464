"""The catalog's versioned schema: the ordered migrations, and how an opener applies or checks them.

The catalog records its schema version in ``catalog_migrations`` (one row per applied migration,
``schema.CATALOG_MIGRATIONS_DDL``). Migration N takes version N-1 to N, in one transaction with
the row that records it, so a migration that fails leaves the catalog at N-1. Version 1 is the
schema main created before versioning (``schema.CATALOG_DDL``, all ``IF NOT EXISTS``): applying
it to a catalog that has those tables but no version adopts it unchanged, every row kept.

A writer opening the catalog (:func:`migrate`) applies what is missing, each step under the
catalog's write lock (SQLite's ``BEGIN IMMEDIATE``; the immediate transaction's advisory lock on
PostgreSQL) after reading the version again under it, so two writers opening an old catalog at
once migrate it once. A read-only opener (:func:`check`) migrates nothing and refuses a catalog
older than this Fabric. Both refuse a catalog newer than this Fabric.

To change the catalog, append a :class:`Migration` (SQL for each backend, column for column as
``schema.CATALOG_DDL_POSTGRES`` maps them) and leave version 1 as it is.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fabric_resources.catalog.records import CatalogMigrationError, CatalogMigrationNeededError, CatalogTooNewError
from fabric_resources.schema import (CATALOG_DDL, CATALOG_DDL_POSTGRES, CATALOG_MIGRATIONS_DDL,
                                     CATALOG_MIGRATIONS_DDL_POSTGRES)

VERSION_TABLE = "catalog_migrations"
#: A table every version has: present with no version table means a catalog from before versioning.
_LEGACY_MARKER = "releases"

#: What to run to migrate an older catalog: a writer's open does it, and ``fabric ingest`` opens
#: the catalog for writing first (its scan finds nothing to do on an unchanged folder).
MIGRATE_COMMAND = "fabric ingest PATH (PATH: one of the home's registered roots)"


@dataclass(frozen=True)
class Migration:
    """One step of the catalog schema: ``version`` - 1 to ``version``.

    ``sqlite`` and ``postgres`` are the step's statements on each backend (``;``-separated, no
    placeholders); they run in one transaction with the row that records the step.
    """

    version: int
    name: str
    sqlite: str
    postgres: str


#: Version 2: each release's manifest less its ``sources`` (``release_summaries``: a table of its
#: own, as SQLite reads through a row's earlier columns, here a manifest of megabytes, to reach a
#: later one), and which releases name each parse as intervals of release IDs (``release_parses``:
#: ``last_release`` NULL while the current release names it), both written when a release is
#: published, so retention and activation read what they decide on without parsing manifests that
#: name every source, and a release writes rows only for the parses that changed. Existing
#: releases are filled in from their manifests by the database's JSON functions: one interval per
#: release and parse, open for the current release's parses. And a change sequence on ``sources``
#: and ``parse_runs`` (``change_seq``: each write of a row gives it the table's highest number plus
#: one, under the write lock), so activation reads only the rows written since the release it
#: builds on (``fabric_assets.activation.activate``); rows from before read as 0.
_RELEASE_INDEX_SQLITE = """
CREATE TABLE IF NOT EXISTS release_summaries (
    release_id    INTEGER PRIMARY KEY,
    summary       TEXT NOT NULL
);
INSERT OR IGNORE INTO release_summaries(release_id, summary)
    SELECT release_id, json_remove(manifest, '$.sources') FROM releases;
CREATE TABLE IF NOT EXISTS release_parses (
    parse_id      TEXT NOT NULL,
    first_release INTEGER NOT NULL,
    last_release  INTEGER,
    PRIMARY KEY (parse_id, first_release)
);
INSERT OR IGNORE INTO release_parses(parse_id, first_release, last_release)
    SELECT json_extract(s.value, '$.parse_id'), r.release_id,
           CASE WHEN r.release_id = (SELECT release_id FROM pointer WHERE name = 'current') THEN NULL
                ELSE r.release_id END
    FROM releases r, json_each(r.manifest, '$.sources') s
    WHERE json_extract(s.value, '$.parse_id') IS NOT NULL;
CREATE INDEX IF NOT EXISTS release_parses_last ON release_parses(last_release);
ALTER TABLE sources ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE parse_runs ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS sources_change ON sources(change_seq);
CREATE INDEX IF NOT EXISTS parse_runs_change ON parse_runs(change_seq);
"""
_RELEASE_INDEX_POSTGRES = """
CREATE TABLE IF NOT EXISTS release_summaries (
    release_id    BIGINT PRIMARY KEY,
    summary       TEXT COLLATE "C" NOT NULL
);
INSERT INTO release_summaries(release_id, summary)
    SELECT release_id, (manifest::jsonb - 'sources')::text FROM releases ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS release_parses (
    parse_id      TEXT COLLATE "C" NOT NULL,
    first_release BIGINT NOT NULL,
    last_release  BIGINT,
    PRIMARY KEY (parse_id, first_release)
);
INSERT INTO release_parses(parse_id, first_release, last_release)
    SELECT DISTINCT s.value ->> 'parse_id', r.release_id,
           CASE WHEN r.release_id = (SELECT release_id FROM pointer WHERE name = 'current') THEN NULL
                ELSE r.release_id END
    FROM releases r, json_each(r.manifest::json -> 'sources') s
    WHERE s.value ->> 'parse_id' IS NOT NULL ON CONFLICT DO NOTHING;
CREATE INDEX IF NOT EXISTS release_parses_last ON release_parses(last_release);
ALTER TABLE sources ADD COLUMN change_seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE parse_runs ADD COLUMN change_seq BIGINT NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS sources_change ON sources(change_seq);
CREATE INDEX IF NOT EXISTS parse_runs_change ON parse_runs(change_seq);
"""

#: Version 3: a parse an operator accepted before acceptances were recorded (status ``ready``,
#: reason ``accepted``, no ``accepted_by_operator`` verdict: ``fabric_assets.gate.ACCEPTED_VERDICT``)
#: gets the record, listing its verdicts failing now (the annotation verdict aside, as
#: ``gate.acceptance`` writes it). Without it, the first re-derivation that records its verdicts
#: afresh (a re-chunk after a chunking change, a re-parse backfilled from the UI) held it again
#: on the same failing check and its file left the release. Verdicts that are not a JSON object
#: are left as they are (SQLite; they are reported where they are read).
_ACCEPTANCES_SQLITE = """
UPDATE parse_runs SET verdicts = json_set(verdicts, '$.accepted_by_operator', json_object(
        'passed', json('true'), 'detail', 'accepted by an operator',
        'accepted', json((SELECT json_group_array(key) FROM (
            SELECT j.key AS key FROM json_each(parse_runs.verdicts) j
            WHERE j.key != 'annotations_are_complete'
              AND (CASE WHEN j.type = 'object' THEN json_type(j.value, '$.passed') END) IS NOT 'true'
            ORDER BY j.key)))))
    WHERE status = 'ready' AND reason = 'accepted'
      AND CASE WHEN NOT json_valid(verdicts) THEN 0 WHEN json_type(verdicts) != 'object' THEN 0
               ELSE json_type(verdicts, '$.accepted_by_operator') IS NULL END;
"""
_ACCEPTANCES_POSTGRES = """
UPDATE parse_runs SET verdicts = (verdicts::jsonb || jsonb_build_object('accepted_by_operator', jsonb_build_object(
        'passed', true, 'detail', 'accepted by an operator',
        'accepted', COALESCE((SELECT jsonb_agg(j.key ORDER BY j.key) FROM jsonb_each(parse_runs.verdicts::jsonb) j
                              WHERE j.key <> 'annotations_are_complete'
                                AND (j.value -> 'passed') IS DISTINCT FROM 'true'::jsonb), '[]'::jsonb))))::text
    WHERE status = 'ready' AND reason = 'accepted' AND jsonb_typeof(verdicts::jsonb) = 'object'
      AND NOT (verdicts::jsonb ? 'accepted_by_operator');
"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial", CATALOG_DDL, CATALOG_DDL_POSTGRES),
    Migration(2, "release-index-and-change-sequence", _RELEASE_INDEX_SQLITE, _RELEASE_INDEX_POSTGRES),
    Migration(3, "record-older-acceptances", _ACCEPTANCES_SQLITE, _ACCEPTANCES_POSTGRES),
)
#: The catalog schema version this Fabric reads and writes.
LATEST_VERSION = MIGRATIONS[-1].version


class Migratable(Protocol):
    """What a backend offers the runner (``SqliteCatalog``, ``PostgresCatalog``)."""

    backend: str  # "sqlite" or "postgres": which SQL of a Migration it runs

    def transaction(self, immediate: bool = False) -> Any: ...

    def describe(self) -> str: ...

    def _table_names(self, con: Any) -> set[str]: ...

    def _run_script(self, con: Any, sql: str) -> None: ...


def checked_migrations(migrations: Sequence[Migration]) -> tuple[Migration, ...]:
    """``migrations`` if they number 1, 2, ... in order.

    Raises
    ------
    ValueError
        Otherwise (a gap, a duplicate or an empty list).
    """
    migrations = tuple(migrations)
    if not migrations or [m.version for m in migrations] != list(range(1, len(migrations) + 1)):
        raise ValueError(f"migrations must be versions 1..N in order, got {[m.version for m in migrations]}")
    return migrations


def recorded_version(catalog: Migratable, con: Any) -> tuple[int, bool]:
    """The catalog's schema version and whether it is recorded, read in transaction ``con``.

    ``(0, False)``: no tables yet; ``(1, False)``: main's tables from before versioning.
    """
    tables = catalog._table_names(con)
    if VERSION_TABLE in tables:
        row = con.execute(f"SELECT MAX(version) FROM {VERSION_TABLE}").fetchone()
        return int(row[0] or 0), True
    return (1 if _LEGACY_MARKER in tables else 0), False


def _too_new(catalog: Migratable, found: int, latest: int) -> CatalogTooNewError:
    return CatalogTooNewError(
        f"catalog {catalog.describe()} is at schema version {found}, newer than version {latest} that this "
        f"Fabric knows (a newer Fabric wrote it): upgrade Fabric", catalog=catalog.describe(), found=found,
        supported=latest)


def check(catalog: Migratable, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """The version of a catalog opened read-only, if this Fabric can read it (0: no tables yet).

    Raises
    ------
    CatalogTooNewError
        If the catalog is newer than ``migrations`` know.
    CatalogMigrationNeededError
        If it is older: the message says what to run (:data:`MIGRATE_COMMAND`).
    """
    latest = migrations[-1].version
    with catalog.transaction() as con:
        found, _ = recorded_version(catalog, con)
    if found > latest:
        raise _too_new(catalog, found, latest)
    if 0 < found < latest:
        raise CatalogMigrationNeededError(
            f"catalog {catalog.describe()} is at schema version {found}; this Fabric reads version {latest}. "
            f"Migrate it by opening it for writing once: run `{MIGRATE_COMMAND}`", catalog=catalog.describe(),
            found=found, supported=latest)
    return found


def migrate(catalog: Migratable, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Bring the catalog to the latest version of ``migrations``, one transaction per step.

    Returns the version it is at (the latest). An up-to-date catalog costs one read transaction.

    Raises
    ------
    CatalogTooNewError
        If the catalog is newer than ``migrations`` know (nothing is changed).
    CatalogMigrationError
        If a step fails; that step is rolled back, the steps before it stay applied.
    """
    migrations = checked_migrations(migrations)
    latest = migrations[-1].version
    with catalog.transaction() as con:  # the common case, without taking the write lock
        found, recorded = recorded_version(catalog, con)
    if found > latest:
        raise _too_new(catalog, found, latest)
    if recorded and found == latest:
        return found
    while True:
        with catalog.transaction(immediate=True) as con:
            # Read again under the write lock: another writer may have migrated meanwhile.
            found, recorded = recorded_version(catalog, con)
            if found > latest:
                raise _too_new(catalog, found, latest)
            if recorded and found == latest:
                return found
            # An unrecorded catalog (empty, or from before versioning) gets step 1, whose
            # CREATE ... IF NOT EXISTS adopts existing tables as they are.
            step = migrations[found if recorded else 0]
            postgres = catalog.backend == "postgres"
            try:
                if not recorded:
                    catalog._run_script(con, CATALOG_MIGRATIONS_DDL_POSTGRES if postgres else CATALOG_MIGRATIONS_DDL)
                catalog._run_script(con, step.postgres if postgres else step.sqlite)
            except Exception as exc:
                raise CatalogMigrationError(
                    f"catalog {catalog.describe()}: migration {step.version} ({step.name}) failed, the catalog "
                    f"stays at version {found if recorded else 0}: {type(exc).__name__}: {exc}") from exc
            con.execute(f"INSERT INTO {VERSION_TABLE}(version, name, applied_at) VALUES (?, ?, ?)",
                        (step.version, step.name, time.time()))
