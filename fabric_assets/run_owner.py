"""Which process runs a Dagster run: the tag every in-process run carries, and runs whose process is gone.

Fabric runs its jobs in-process (``execute_in_process``: ``fabric ingest``, ``fabric serve``'s
operations), so a process killed mid-run (SIGKILL, a power cut) leaves its run ``STARTED`` in the
instance for good: nothing else will ever end it, and a purge or an in-place restore, which wait
for runs in progress, were refused for good. Each such run is tagged with its owner (host name,
boot ID, process ID and that process's start ticks, so a reused process ID is not taken for the owner);
:func:`fail_orphaned_runs` marks a run failed once its owner, on this host, is gone.

A run the Dagster daemon or UI launched runs in a run worker process of its own, which Dagster names
in the run's first engine event ("Started process for run (pid: N)."); :func:`adopt_run`, called as
each step sets up the ``fabric`` resource (:class:`RunFabricHomeResource`, the definitions' one), tags the run with that process (replacing a tag copied
from a parent run by a re-execution). Dagster's default run launcher cannot check a run worker's
health, so such a run killed (SIGKILL, a reboot) stayed ``STARTED`` for good too. A run without the
tag (an older Fabric's, or one killed before its first step began) is left as it is: nothing here
can tell whether its process lives.
"""

from __future__ import annotations

import os
import socket
import time
from functools import lru_cache

import dagster as dg
import psutil

from fabric_resources.dagster_resources import FabricHomeResource
from fabric_resources.process_identity import boot_id, start_ticks

#: Run tag: ``<host>|<boot ID>|<pid>|<start ticks>`` of the process running the run (Linux's
#: ``/proc/sys/kernel/random/boot_id`` and field 22 of ``/proc/<pid>/stat``: clock ticks since
#: boot, which no wall-clock step moves, as ``psutil``'s ``create_time`` does). ``?`` where the
#: system has no procfs: such a run's owner cannot be told, and it is never called gone.
OWNER_TAG = "fabric/owner"
#: What to do about unfinished runs, as a refusal that waits for them says it.
WAIT_REMEDY = ("wait for them to finish (a run whose Fabric process or run worker was killed is marked failed by "
               "itself; one killed before its first step, or an older Fabric's, can be ended in the UI: `fabric ui`, "
               "Runs, the run, Terminate)")
#: Statuses of a run that has not ended.
UNFINISHED = (dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.QUEUED,
              dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.CANCELING)
#: A run still ``NOT_STARTED`` this many seconds after it was made was never launched and never will
#: be: its launch failed after the run was made (a Launchpad partition range naming keys that do not
#: exist), and the UI cannot terminate it ("could not be terminated due to having status NOT_STARTED").
NEVER_LAUNCHED_S = 300.0


def never_launched(record, now: float | None = None) -> bool:
    """Whether run record ``record`` (``RunRecord``) is a run that was made and never launched
    (:data:`NEVER_LAUNCHED_S`): nothing runs it, so nothing waits for it. A run made more than that
    *after* now was made while the clock ran ahead and has been set back since: its age cannot be
    told, and waiting for the clock to catch up could take months."""
    if record.dagster_run.status != dg.DagsterRunStatus.NOT_STARTED:
        return False
    return abs((time.time() if now is None else now) - record.create_timestamp.timestamp()) > NEVER_LAUNCHED_S


def _owner(pid: int) -> str | None:
    """The owner value of process ``pid`` on this host and boot, or ``None`` when it does not
    exist; its start is ``?`` where it cannot be read (no procfs)."""
    ticks = start_ticks(pid)
    if ticks is None:
        if psutil.pid_exists(pid) and not os.path.exists("/proc/self/stat"):
            return f"{socket.gethostname()}|{boot_id()}|{pid}|?"
        return None
    return f"{socket.gethostname()}|{boot_id()}|{pid}|{ticks}"


@lru_cache(maxsize=1)
def _own(pid: int) -> str:
    return _owner(pid) or f"{socket.gethostname()}|?|{pid}|?"


def owner_tags() -> dict[str, str]:
    """The tags that name this process as a run's owner (merge them into the run's tags)."""
    return {OWNER_TAG: _own(os.getpid())}


def orphaned(run: dg.DagsterRun) -> bool:
    """Whether ``run``'s owner (its :data:`OWNER_TAG`) ran on this host and is gone: this host
    rebooted since, no process has its ID, or the one that has started at another tick (the ID
    was reused). ``False`` without the tag, for another host's run, or where its start cannot be
    told."""
    parts = run.tags.get(OWNER_TAG, "").split("|")
    if len(parts) != 4:
        return False
    host, boot, pid, ticks = parts
    if host != socket.gethostname() or "?" in (boot, ticks) or not (pid.isascii() and pid.isdigit() and len(pid) <= 10):
        return False
    if boot != boot_id():
        return True  # started before this boot: no process of it is left
    return _owner(int(pid)) != run.tags[OWNER_TAG]


#: How Dagster's run worker names itself in a run's event log (``dagster api execute_run`` and the
#: code server's run subprocess both write it before the first step, with the ``pid`` as metadata).
WORKER_STARTED = "Started process for run (pid: "


def worker_pid(instance: dg.DagsterInstance, run_id: str) -> int | None:
    """The process ID of the run worker that runs ``run_id`` (the last one Dagster's engine events
    name: a resumed run names its new worker), or None for a run executed in the launching process
    (``execute_in_process``, which writes no such event)."""
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT, limit=1000).records
    pid = None
    for record in records:
        event = record.event_log_entry.dagster_event
        if event is None or not (event.message or "").startswith(WORKER_STARTED):
            continue
        value = event.engine_event_data.metadata.get("pid") if event.engine_event_data else None
        text = getattr(value, "value", None)
        if isinstance(text, str) and text.isascii() and text.isdigit() and len(text) <= 10:
            pid = int(text)
    return pid


def adopt_run(instance: dg.DagsterInstance | None, run_id: str | None) -> str | None:
    """Tag run ``run_id`` with its run worker as owner (:func:`worker_pid`) when the tag names
    another process or none; return the owner tagged, or None when nothing changed (no such run, a
    run executed in its launching process, whose launcher tagged it, or a worker not on this host:
    called from the run's steps, which run beside it)."""
    if instance is None or not run_id:
        return None
    run = instance.get_run_by_id(run_id)
    pid = worker_pid(instance, run_id) if run is not None else None
    owner = _owner(pid) if pid is not None else None
    if owner is None or run.tags.get(OWNER_TAG) == owner:
        return None
    instance.add_run_tags(run_id, {OWNER_TAG: owner})
    return owner


class RunFabricHomeResource(FabricHomeResource):
    """The ``fabric`` resource of Fabric's definitions: a :class:`FabricHomeResource` that, as each
    step sets it up, names the run's worker process as the run's owner (:func:`adopt_run`), so a
    run the daemon or the UI launched whose worker is killed is marked failed instead of left
    ``STARTED`` for good."""

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        adopt_run(context.instance, context.run_id)


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


__all__ = ["OWNER_TAG", "UNFINISHED", "RunFabricHomeResource", "WAIT_REMEDY", "WORKER_STARTED", "adopt_run", "fail_orphaned_runs", "orphaned",
           "owner_tags", "worker_pid"]
