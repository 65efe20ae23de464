"""Pruning Dagster's run history under retention: the runs no retained release needs.

Dagster keeps every run and its event log for ever (in the home's ``dagster/`` folder: a run row,
an index of asset events and, with the default SQLite storage, one event-log file per run). With
a cleanup after every activation the home's own data stays bounded, but this history grows with
every ingest (issue 18's bounded-disk measure: 3.6x a fresh ingest after five rounds of edits).

A finished run is deleted (:meth:`dagster.DagsterInstance.delete_run`, which removes its row and
its events) once it is older than ``retention.runs_days`` *and* no retained record needs it. Needed
(never deleted):

* the run of the latest materialization of every partition a retained release or a present
  source pins (the parse partitions), per asset: it wrote the rows the release pins, which a
  lineage audit names;
* the run of the latest materialization of every unpartitioned asset but ``release``, and every
  run that materialized the ``release`` asset of a retained release (its ``release_id`` metadata);
* runs not finished (queued, started, cancelling): the cleanup itself runs inside one.

The per-run event-log file of SQLite storage is removed with the run (``delete_run`` empties it
but leaves the file), and so are the run's captured step logs (the compute log manager's folder
of the run). SQLite keeps the pages of deleted rows in its files (and reuses them): once more
than a tenth of the event index's pages are free it is vacuumed, or left for the next cleanup
when another process holds it. Deleting a run also deletes the materializations the UI shows for
its partitions, which is why only the latest one of each pinned partition decides.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Collection

import dagster as dg

#: Shard of the SQLite event-log storage that indexes every run's asset events (dagster's name).
INDEX_SHARD = "index"
#: Vacuum the event index once this share of its pages is free.
VACUUM_FREE_SHARE = 0.1
#: Asset whose materialization metadata names the release it published (fabric_assets.activation).
RELEASE_ASSET = dg.AssetKey("release")
_PAGE = 1000


def home_instance(home) -> dg.DagsterInstance:
    """The home's persistent instance (as ``fabric_assets.ingest.dagster_instance``; that module
    imports the definitions, which import the lifecycle jobs, which import this)."""
    os.environ["DAGSTER_HOME"] = str(home.layout.dagster_home)
    return dg.DagsterInstance.get()


def runs_in_progress(instance: dg.DagsterInstance, own_run_id: str | None = None, limit: int = 6) -> list[str]:
    """IDs of up to ``limit`` runs not finished (queued, starting, started, cancelling, made and about
    to be launched) other than
    ``own_run_id``: what a purge or an in-place restore, which rewrite every table, must wait for.
    A run whose process on this host is gone is marked failed first, not waited for
    (:func:`fabric_assets.run_owner.fail_orphaned_runs`)."""
    from fabric_assets.run_owner import UNFINISHED, fail_orphaned_runs, never_launched

    fail_orphaned_runs(instance)
    # A run made and never launched (a failed Launchpad launch) runs nothing: it refused every purge
    # and in-place restore for good, and the UI cannot terminate it (hostile trial 13b).
    return [r.dagster_run.run_id for r in instance.get_run_records(dg.RunsFilter(statuses=list(UNFINISHED)))
            if r.dagster_run.run_id != own_run_id and not never_launched(r)][:limit]


def _records(instance: dg.DagsterInstance, records_filter) -> list:
    out, cursor = [], None
    while True:
        page = instance.fetch_materializations(records_filter, limit=_PAGE, cursor=cursor)
        out.extend(page.records)
        if not page.has_more:
            return out
        cursor = page.cursor


def needed_runs(instance: dg.DagsterInstance, pinned_partitions: Collection[str],
                retained_release_ids: Collection[int]) -> set[str]:
    """Run IDs a retained record needs (see the module docstring)."""
    pinned, releases = set(pinned_partitions), set(retained_release_ids)
    needed: set[str] = set()
    for record in instance.get_asset_records():
        key = record.asset_entry.asset_key
        latest: dict[str | None, str] = {}
        # Newest first: the first record of a partition is its latest materialization.
        for r in _records(instance, dg.AssetRecordsFilter(asset_key=key)):
            partition = r.partition_key
            # The release asset's runs are kept by the releases they published, not by recency.
            if (partition is None and key != RELEASE_ASSET) or partition in pinned:
                latest.setdefault(partition, r.run_id)
            if key == RELEASE_ASSET:
                meta = r.asset_materialization.metadata if r.asset_materialization else {}
                value = getattr(meta.get("release_id"), "value", None)
                if value in releases:
                    needed.add(r.run_id)
        needed.update(latest.values())
    return needed


def prune_runs(instance: dg.DagsterInstance, pinned_partitions: Collection[str],
               retained_release_ids: Collection[int], older_than_s: float, now: float | None = None) -> list[str]:
    """Delete finished runs created more than ``older_than_s`` seconds before ``now`` that no
    retained record needs; return their IDs (oldest first).

    Parameters
    ----------
    instance
        The home's Dagster instance.
    pinned_partitions
        Parse IDs (``parses`` partition keys) a retained release or a present source pins.
    retained_release_ids
        Releases the retention keeps.
    older_than_s
        ``retention.runs_days`` in seconds; a run younger than that is kept whatever it did.
    """
    now = time.time() if now is None else now
    finished = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
    before = dg.RunsFilter(statuses=finished,
                           created_before=_utc(now - older_than_s))
    candidates = [r.dagster_run.run_id for r in instance.get_run_records(before, ascending=True)]
    if not candidates:
        return []
    keep = needed_runs(instance, pinned_partitions, retained_release_ids)
    storage = instance.event_log_storage
    shard = getattr(storage, "path_for_shard", None)  # SQLite storage: one event-log file per run
    logs = instance.compute_log_manager
    deleted = []
    for run_id in candidates:
        if run_id in keep:
            continue
        instance.delete_run(run_id)
        deleted.append(run_id)
        if hasattr(logs, "delete_logs"):
            logs.delete_logs(prefix=[run_id])
        if shard is not None:
            path = shard(run_id)
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(path + suffix):
                    os.unlink(path + suffix)
    if deleted and shard is not None:
        vacuum_if_sparse(shard(INDEX_SHARD))
    return deleted


def vacuum_if_sparse(path: str, free_share: float = VACUUM_FREE_SHARE) -> bool:
    """``VACUUM`` the SQLite file at ``path`` when more than ``free_share`` of its pages are free;
    True if it did. A file another connection holds (``database is locked`` within 5 s) is left as
    it is: its free pages are reused by later writes, and the next cleanup tries again."""
    if not os.path.exists(path):
        return False
    con = sqlite3.connect(path, timeout=5, isolation_level=None)
    try:
        free = con.execute("PRAGMA freelist_count").fetchone()[0]
        pages = con.execute("PRAGMA page_count").fetchone()[0]
        if not pages or free / pages <= free_share:
            return False
        con.execute("VACUUM")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        con.close()


def _utc(seconds: float):
    import datetime as dt

    return dt.datetime.fromtimestamp(seconds, tz=dt.timezone.utc)
