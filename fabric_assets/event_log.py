"""Dagster's SQLite event log, with the per-event costs that do not belong to an event taken out.

Why: at many small documents Dagster's bookkeeping, not Fabric's work, was most of a parse run:
~20 events per partition at ~17–20 ms each (``docs/benchmarks.md``, "Dagster at many
partitions"). Profiled (py-spy, ``fabric bench scale --documents 100``), that time is not the
SQLite writes themselves. :class:`dagster._core.storage.event_log.SqliteEventLogStorage`
creates a new SQLAlchemy engine for every connection (so the dialect is initialised and every
statement compiled again, each time: SQLAlchemy's compiled cache belongs to the engine), asks
SQLite whether the tag table exists and which columns the asset table has on every asset
event (two more engines and a schema read), and stores a batch of events one event, and two
transactions, at a time.

:class:`FabricSqliteEventLogStorage` is the same storage on the same files, the same schema
and the same rows, with three changes:

- one engine per shard, kept (at most :data:`ENGINES_KEPT`, least recently used first out);
  still ``NullPool``, so no connection, and no file handle, stays open between uses, as before;
- the schema answers that cannot change back (a table or column that exists) are remembered;
- :meth:`~FabricSqliteEventLogStorage.store_event_batch` writes a batch in one transaction per
  shard: all its rows into the run's shard, then the asset rows into the index shard.

And one addition: it stores and serves Dagster's "asset failed to materialize" events, which the
stock SQL storages refuse (``can_store_asset_failure_events``) and answer with nothing
(``fetch_failed_materializations``). Fabric reports a stage switched off by the configuration as
such an event of type ``SKIPPED`` (:mod:`fabric_assets.skips`), which the UI shows as "Skipped".
They are asset events like observations: a row in the run's shard and one in the index shard.

Dagster sends batches (the planned events of a run; the materializations of one output over
many partitions) only when ``DAGSTER_EVENT_BATCH_SIZE`` is set; constructing this storage sets
it to :data:`EVENT_BATCH_SIZE` in the process unless it is already set (``0`` turns batching
off). It is named in the ``dagster.yaml`` Fabric writes (:mod:`fabric_resources.dagster_instance`),
Dagster's own extension point, so the daemon, the webserver and every run worker use it.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from dagster import AssetKey, AssetRecordsFilter, DagsterEventType, EventLogEntry, EventRecordsFilter
from dagster._config import StringSource
from dagster._core.event_api import EventRecordsResult
from dagster._core.events import ASSET_CHECK_EVENTS, ASSET_EVENTS, BATCH_WRITABLE_EVENTS
from dagster._core.storage.event_log import SqliteEventLogStorage
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable
from dagster._core.storage.event_log.sql_event_log import enforce_max_records_limit
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME
from dagster._core.storage.sql import create_engine
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._serdes import ConfigurableClassData
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

#: Engines kept per storage: the index shard plus the run shards most recently written.
ENGINES_KEPT = 32

#: Events per batch when this storage turns batching on: a run's planned events (one per asset
#: and partition) go in batches of this many; one output's materializations over a run's
#: partitions (256 by default, ``sources.partitions_per_run``) in one.
EVENT_BATCH_SIZE = 1000

#: Rows per multi-row ``INSERT``: 7 bound values per event row, far below SQLite's limit of
#: 32,766 bound parameters (3.32+).
_ROWS_PER_INSERT = 500


def _events_dir(dagster_home: str) -> str:
    # Dagster's default place for the event log of an instance at `dagster_home`
    # (dagster._core.instance.ref._event_logs_directory), so existing run shards are found.
    return os.path.join(dagster_home, "history", "runs", "")


class FabricSqliteEventLogStorage(SqliteEventLogStorage):
    """:class:`~dagster._core.storage.event_log.SqliteEventLogStorage` with engines kept per
    shard, schema checks remembered and a batch written in one transaction per shard.

    Config (``dagster.yaml``): ``dagster_home``, the instance's folder; the shards live in
    ``<dagster_home>/history/runs/``, Dagster's default, so a home written by the stock storage
    reads the same. Raises what the stock storage raises.
    """

    def __init__(self, dagster_home: str, inst_data: ConfigurableClassData | None = None):
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        self._engines_lock = threading.Lock()
        self._tables_seen: set[str] = set()
        self._asset_key_index_cols = False
        os.environ.setdefault("DAGSTER_EVENT_BATCH_SIZE", str(EVENT_BATCH_SIZE))
        super().__init__(_events_dir(dagster_home), inst_data=inst_data)

    @classmethod
    def config_type(cls) -> dict:
        return {"dagster_home": StringSource}

    @classmethod
    def from_config_value(cls, inst_data: ConfigurableClassData | None, config_value: dict
                          ) -> "FabricSqliteEventLogStorage":  # ty: ignore[invalid-method-override]
        return cls(inst_data=inst_data, **config_value)

    # --- engines -------------------------------------------------------------------------

    def _engine(self, shard: str) -> Engine:
        with self._engines_lock:
            engine = self._engines.get(shard)
            if engine is not None:
                self._engines.move_to_end(shard)
                return engine
            engine = create_engine(self.conn_string_for_shard(shard), poolclass=NullPool,
                                   connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
            self._engines[shard] = engine
            while len(self._engines) > ENGINES_KEPT:
                self._engines.popitem(last=False)[1].dispose()
            return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        # As the stock method (one lock per storage; the shard's schema made on first use; one
        # transaction per block), with the shard's engine kept instead of made and disposed.
        with self._db_lock:
            engine = self._engine(shard)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def has_table(self, table_name: str) -> bool:
        if table_name in self._tables_seen:
            return True
        with self._engine(INDEX_SHARD_NAME).connect() as conn:
            found = bool(conn.dialect.has_table(conn, table_name))
        if found:
            self._tables_seen.add(table_name)
        return found

    def _has_asset_key_index_cols_on_connection(self, conn: Connection) -> bool:
        if not self._asset_key_index_cols:
            self._asset_key_index_cols = super()._has_asset_key_index_cols_on_connection(conn)
        return self._asset_key_index_cols

    def delete_events(self, run_id: str) -> None:
        super().delete_events(run_id)
        # The shard's file may be removed next (retention does): forget its engine and schema, so
        # a later write to the same run ID makes the schema again instead of failing.
        with self._engines_lock:
            engine = self._engines.pop(run_id, None)
        if engine is not None:
            engine.dispose()
        self._initialized_dbs.discard(run_id)

    def wipe(self) -> None:
        super().wipe()
        self._tables_seen.clear()
        self._asset_key_index_cols = False

    def dispose(self) -> None:
        super().dispose()
        with self._engines_lock:
            for engine in self._engines.values():
                engine.dispose()
            self._engines.clear()

    # --- asset failures (skipped stages) --------------------------------------------------

    @property
    def can_store_asset_failure_events(self) -> bool:
        return True

    def fetch_failed_materializations(self, records_filter: AssetKey | AssetRecordsFilter, limit: int,
                                      cursor: str | None = None, ascending: bool = False) -> EventRecordsResult:
        """Records of ``ASSET_FAILED_TO_MATERIALIZE`` events (newest first unless ``ascending``),
        read from the index shard as Dagster's ``fetch_observations`` reads observations."""
        enforce_max_records_limit(limit)
        kind = DagsterEventType.ASSET_FAILED_TO_MATERIALIZE
        if isinstance(records_filter, AssetRecordsFilter):
            event_filter = records_filter.to_event_records_filter(event_type=kind, cursor=cursor, ascending=ascending)
        else:
            before, after = EventRecordsFilter.get_cursor_params(cursor, ascending)
            event_filter = EventRecordsFilter(event_type=kind, asset_key=records_filter, before_cursor=before,
                                              after_cursor=after)
        return self._get_event_records_result(event_filter, limit, cursor, ascending)

    # --- batches -------------------------------------------------------------------------

    def store_event_batch(self, events: Sequence[EventLogEntry]) -> None:
        """Store ``events`` (Dagster's batch-writable kinds only: asset materializations,
        observations, failures to materialize, planned materializations and planned checks) as
        :meth:`store_event` would one by one, in one transaction per shard.

        Rows go first into each run's shard, then the asset ones are mirrored into the index
        shard (with their tags and the asset table's latest-event columns, in event order), then
        the planned checks are recorded. If a later step fails, the rows already committed stay:
        Dagster then stores the batch again event by event, so a run's own log may show those
        events twice; the index shard, which the asset pages and partition statuses read, is
        written once. Raises ``DagsterInvariantViolationError`` for a kind outside the batchable
        ones (nothing written)."""
        from dagster._core.errors import DagsterInvariantViolationError

        events = list(events)
        if not events:
            return
        kinds = {e.dagster_event_type for e in events}
        if not kinds <= BATCH_WRITABLE_EVENTS:
            raise DagsterInvariantViolationError(
                f"only {sorted(k.value for k in BATCH_WRITABLE_EVENTS)} are written in batches, "
                f"got {sorted(k.value for k in kinds - BATCH_WRITABLE_EVENTS)}")
        rows = [self._event_to_row(e) for e in events]
        by_run: dict[str, list[dict[str, Any]]] = {}
        for e, row in zip(events, rows):
            by_run.setdefault(e.run_id, []).append(row)
        for run_id, run_rows in by_run.items():
            with self.run_connection(run_id) as conn:
                for start in range(0, len(run_rows), _ROWS_PER_INSERT):
                    conn.execute(SqlEventLogStorageTable.insert(), run_rows[start:start + _ROWS_PER_INSERT])

        indexed = [(e, row) for e, row in zip(events, rows)
                   if e.dagster_event_type in ASSET_EVENTS or e.dagster_event_type in ASSET_CHECK_EVENTS]
        if not indexed:
            return
        ids: list[int] = []
        with self.index_connection() as conn:
            insert = SqlEventLogStorageTable.insert()
            for e, row in indexed:
                event_id = conn.execute(insert, row).inserted_primary_key[0]
                if event_id is None:
                    raise DagsterInvariantViolationError("Cannot store asset event tags for null event id.")
                ids.append(event_id)
            assets = [(e, i) for (e, _), i in zip(indexed, ids) if e.dagster_event_type in ASSET_EVENTS]
            if assets:
                self._store_asset_event_tags(conn, [e for e, _ in assets], [i for _, i in assets])
                for e, event_id in assets:
                    self._store_asset_event(conn, e, event_id)
        for (e, _), event_id in zip(indexed, ids):
            if e.dagster_event_type in ASSET_CHECK_EVENTS:
                self.store_asset_check_event(e, event_id)
