"""Which file a parse partition is, where Dagster's UI shows and searches it, and forgetting it.

Every run over parse partitions is tagged ``fabric/source:<source key> = <parse ID>`` for each
source whose version one of its partitions is (``fabric_resources.run_tags``: why tags, and the key
format); an activation run also tags the sources it activates onto a partition no run has tagged
them with (a moved or copied file reuses its partition without a parse run). The UI's Runs page
finds them under Filter → Tag by typing part of the file name.

A file name is as private as its text: after ``fabric purge`` no byte of it may remain under the
home. Tags are rows of their own in Dagster's run storage (``run_tags``), copied into the run's
stored body (``runs.run_body``); nothing else of Dagster holds them (they are added from inside the
run, never through a sensor's run request, which a tick would keep). :func:`forget_source_tags`
deletes both copies, on SQLite (then rewrites ``runs.db`` so no freed page or WAL frame keeps them)
and on PostgreSQL (dagster-postgres: rows deleted; their dead tuples go with PostgreSQL's own
VACUUM, as the catalog's do). Dagster has no API that removes a tag, so this goes through its SQL
run storage's tables; the materialization metadata in the event log never names a source, so the
event log needs no rewriting.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import dagster as dg

from fabric_resources.run_tags import SOURCE_TAG_PREFIX, source_key_of_tag, source_tag_key
from fabric_resources.tombstones import scrub, source_key_hash

#: Tag keys per query when asking which tags exist (SQL ``IN`` lists stay short).
_KEYS_PER_QUERY = 500


def tag_run(instance: dg.DagsterInstance, run_id: str, sources: Mapping[str, str], *,
            only_untagged: bool = False) -> int:
    """Add the source tag of each ``source key → parse ID`` in ``sources`` to run ``run_id``; return
    how many were added. Tags the run already carries are not written again (every step of a run
    calls this). ``only_untagged``: leave out pairs some run already carries (an activation tags
    only what no parse run did). Nothing happens for a run the instance does not hold (an asset
    invoked outside a run)."""
    wanted = {source_tag_key(k): pid for k, pid in sources.items()}
    if only_untagged and wanted:
        keys = sorted(wanted)
        for i in range(0, len(keys), _KEYS_PER_QUERY):
            for key, values in instance.get_run_tags(tag_keys=keys[i:i + _KEYS_PER_QUERY]):
                if wanted.get(key) in values:
                    wanted.pop(key)
    run = instance.get_run_by_id(run_id) if wanted else None
    if run is None:
        return 0
    new = {k: v for k, v in wanted.items() if run.tags.get(k) != v}
    if new:
        instance.add_run_tags(run_id, new)
    return len(new)


def _sql_run_storage(instance: dg.DagsterInstance):
    """The SQL run storage under ``instance`` (SQLite or dagster-postgres; unwrapped from the
    composite storage a ``storage:`` section of dagster.yaml makes).

    Raises
    ------
    TypeError
        If the run storage is not one of Dagster's SQL storages (its tags could not be removed).
    """
    from dagster._core.storage.runs.sql_run_storage import SqlRunStorage

    storage = instance.run_storage
    inner = getattr(storage, "_storage", None)  # LegacyRunStorage wraps a DagsterStorage
    if not isinstance(storage, SqlRunStorage) and inner is not None:
        storage = inner.run_storage
    if not isinstance(storage, SqlRunStorage):
        raise TypeError(f"{type(storage).__name__} is not a SQL run storage: Fabric cannot remove its source tags")
    return storage


def _redacted(value, hashes: set[str]):
    """``value`` (a run config) with every string that is a source key hashing to one of ``hashes``
    replaced by ``purged:<its hash>``; the same object when nothing matched."""
    if isinstance(value, str):
        digest = source_key_hash(value)
        return f"purged:{digest}" if digest in hashes else value
    if isinstance(value, Mapping):
        out = {k: _redacted(v, hashes) for k, v in value.items()}
        return value if all(out[k] is value[k] for k in value) else out
    if isinstance(value, (list, tuple)):
        items = [_redacted(v, hashes) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else type(value)(items)
    return value


def forget_source_tags(instance: dg.DagsterInstance, *, source_key_hashes: Iterable[str] = (),
                       parse_ids: Iterable[str] = (), rewrite_file: bool = True) -> int:
    """Remove every source tag whose source key hashes to one of ``source_key_hashes``
    (``tombstones.source_key_hash``: a purge keeps only those) or whose partition is one of
    ``parse_ids``, from every run (rows of a run no longer held included); and replace every source
    key hashing to one of ``source_key_hashes`` in a run's config (``purge_job``'s own
    ``source_keys``, ``reparse_job``'s ``source_key``) by ``purged:<hash>``. Return how many tag
    rows were removed. On SQLite the rows are deleted with ``secure_delete`` (their pages zeroed) and,
    with ``rewrite_file``, the run database is then rewritten (``tombstones.scrub``: ``VACUUM`` and a
    truncated WAL; it needs the file to itself for a moment, which a purge has, no run being in
    progress; the retention cleanup runs beside the daemon and leaves the file as it is).

    Raises
    ------
    TypeError
        If the instance's run storage is not a SQL one.
    sqlite3.OperationalError
        If the rewrite waited 30 s for another connection to let go of the file.
    """
    import sqlalchemy as db
    from dagster._core.storage.runs.schema import RunsTable, RunTagsTable
    from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
    from dagster._serdes import serialize_value
    from dagster_shared.record import copy

    hashes, pids = set(source_key_hashes), set(parse_ids)
    if not hashes and not pids:
        return 0
    storage = _sql_run_storage(instance)
    query = db.select(RunTagsTable.c.id, RunTagsTable.c.run_id, RunTagsTable.c.key, RunTagsTable.c.value).where(
        RunTagsTable.c.key.startswith(SOURCE_TAG_PREFIX, autoescape=True))
    with storage.connect() as conn:
        rows = conn.execute(query).fetchall()
    doomed: dict[str, dict[int, str]] = {}
    for row_id, run_id, key, value in rows:
        if value in pids or source_key_hash(source_key_of_tag(key) or "") in hashes:
            doomed.setdefault(run_id, {})[row_id] = key
    configs = {}
    if hashes:
        for run in storage.get_runs():
            redacted = _redacted(run.run_config, hashes)
            if redacted is not run.run_config:
                configs[run.run_id] = redacted
    sqlite = isinstance(storage, SqliteRunStorage)
    for run_id in sorted(set(doomed) | set(configs)):
        tags = doomed.get(run_id, {})
        run = instance.get_run_by_id(run_id)
        with storage.connect() as conn:
            if sqlite:  # freed pages are zeroed, not left holding the names until a VACUUM
                conn.exec_driver_sql("PRAGMA secure_delete=ON")
            if run is not None:
                gone = set(tags.values())
                body = run.with_tags({k: v for k, v in run.tags.items() if k not in gone})
                if run_id in configs:
                    body = copy(body, run_config=configs[run_id])
                conn.execute(RunsTable.update().where(RunsTable.c.run_id == run_id).values(
                    run_body=serialize_value(body)))
            if tags:
                conn.execute(RunTagsTable.delete().where(RunTagsTable.c.id.in_(sorted(tags))))
    if (doomed or configs) and sqlite and rewrite_file:
        from pathlib import Path

        from sqlalchemy.engine import make_url

        scrub(Path(make_url(storage._conn_string).database))  # noqa: SLF001 (the file's path)
    return sum(len(t) for t in doomed.values())
