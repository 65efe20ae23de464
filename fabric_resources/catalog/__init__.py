"""The catalog: Fabric's small transactional state behind one interface (:class:`Catalog`).

Two backends run the same statements: :class:`SqliteCatalog` (one file in the home, the
default) and :class:`PostgresCatalog` (a schema in a PostgreSQL database that homes on several
hosts share; ``storage.catalog`` in ``config.json``). :func:`open_catalog` picks the configured one.
"""

from __future__ import annotations

from pathlib import Path

from fabric_resources.catalog.base import (ROW_COUNTS, Catalog, Connection, drop_verdicts, json_field, merge_verdicts,
                                           number_map, record_row_counts, row_counts, str_map, verdicts_of)
from fabric_resources.catalog.postgres import PostgresCatalog
from fabric_resources.catalog.migrations import LATEST_VERSION, MIGRATIONS, Migration
from fabric_resources.catalog.records import (CatalogDamagedError, CatalogMigrationError, CatalogMigrationNeededError, CatalogTooNewError,
                                              CatalogUnavailableError, CatalogVersionError, Operation, ParseRun,
                                              ParseRunOverview, Release, Root, RootOverlapError, SourceRow, StatusUpdate)
from fabric_resources.catalog.sqlite import SqliteCatalog
from fabric_resources.config import CatalogStorageConfig

__all__ = ["ROW_COUNTS", "Catalog", "CatalogDamagedError", "CatalogMigrationError", "CatalogMigrationNeededError", "CatalogTooNewError",
           "CatalogUnavailableError", "CatalogVersionError", "Connection", "LATEST_VERSION", "MIGRATIONS", "Migration",
           "Operation", "ParseRun", "ParseRunOverview", "PostgresCatalog", "Release", "Root", "RootOverlapError", "SourceRow",
           "SqliteCatalog", "StatusUpdate", "drop_verdicts", "json_field", "merge_verdicts", "number_map", "open_catalog",
           "record_row_counts", "row_counts", "str_map", "verdicts_of"]


def open_catalog(config: CatalogStorageConfig, sqlite_path: Path, *, read_only: bool = False) -> Catalog:
    """The catalog ``config`` names: SQLite at ``sqlite_path`` or PostgreSQL at ``config.url``.

    Raises
    ------
    CatalogUnavailableError
        If a PostgreSQL catalog cannot be reached.
    CatalogVersionError
        If the catalog's schema version is not this Fabric's (see :mod:`.migrations`).
    """
    if config.backend == "postgres":
        return PostgresCatalog(config.url, schema=config.schema_name, read_only=read_only)
    return SqliteCatalog(sqlite_path, read_only=read_only)
