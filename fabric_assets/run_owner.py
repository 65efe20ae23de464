"""Which process runs a Dagster run: the tag every in-process run carries, and runs whose process is gone.

Fabric runs its jobs in-process (``execute_in_process``: ``fabric ingest``, ``fabric serve``'s
operations), so a process killed mid-run (SIGKILL, a power cut) leaves its run ``STARTED`` in the
instance for good: nothing else will ever end it, and a purge or an in-place restore, which wait
for runs in progress, were refused for good. Each such run is tagged with its owner (host name,
process ID and that process's start time, so a reused process ID is not taken for the owner);
:func:`fail_orphaned_runs` marks a run failed once its owner, on this host, is gone. A run without
the tag (an older Fabric's, or one the Dagster UI launched in a run worker of its own) is left as
it is: nothing here can tell whether its process lives.
"""

from __future__ import annotations

import os
import socket
from functools import lru_cache

import dagster as dg
import psutil

#: Run tag: ``<host>|<pid>|<process start, Unix seconds to 0.01>`` of the process running the run.
OWNER_TAG = "fabric/owner"
#: What to do about unfinished runs, as a refusal that waits for them says it.
WAIT_REMEDY = ("wait for them to finish (a run whose Fabric process was killed is marked failed by itself; one "
               "the Dagster UI launched, or an older Fabric's, can be ended in the UI: `fabric ui`, Runs, the run, "
               "Terminate)")
#: Statuses of a run that has not ended.
UNFINISHED = (dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.QUEUED,
              dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.CANCELING)


def _owner(pid: int) -> str | None:
    """The owner value of process ``pid`` on this host, or ``None`` when it does not exist."""
    try:
        started = psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
        return None
    return f"{socket.gethostname()}|{pid}|{started:.2f}"


@lru_cache(maxsize=1)
def _own(pid: int) -> str:
    return _owner(pid) or f"{socket.gethostname()}|{pid}|?"


def owner_tags() -> dict[str, str]:
    """The tags that name this process as a run's owner (merge them into the run's tags)."""
    return {OWNER_TAG: _own(os.getpid())}


def orphaned(run: dg.DagsterRun) -> bool:
    """Whether ``run``'s owner (its :data:`OWNER_TAG`) ran on this host and is gone: no process
    with its ID, or one started at another time (the ID was reused). ``False`` without the tag or
    for another host's run."""
    value = run.tags.get(OWNER_TAG, "")
    host, _, rest = value.partition("|")
    pid, _, started = rest.partition("|")
    if host != socket.gethostname() or not pid.isascii() or not pid.isdigit() or started == "?":
        return False
    return _owner(int(pid)) != value


def fail_orphaned_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark failed every unfinished run whose owner is gone (:func:`orphaned`); return their IDs.
    Each gets a run-failure event saying why, as the Dagster UI shows it."""
    failed = []
    for record in instance.get_run_records(dg.RunsFilter(statuses=list(UNFINISHED))):
        run = record.dagster_run
        if orphaned(run):
            instance.report_run_failed(run, message=f"the process that ran it ({run.tags[OWNER_TAG]}) is gone: "
                                                    "killed before the run ended (Fabric marks it failed)")
            failed.append(run.run_id)
    return failed


__all__ = ["OWNER_TAG", "UNFINISHED", "WAIT_REMEDY", "fail_orphaned_runs", "orphaned", "owner_tags"]
