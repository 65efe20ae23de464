"""Runs whose process is gone: a Dagster run left ``STARTED`` by a killed process is marked failed
and blocks no purge or restore; a live owner's run, or one whose owner cannot be told, still does."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid

import dagster as dg

from fabric_assets.lifecycle.run_history import home_instance, runs_in_progress
from fabric_assets.run_owner import OWNER_TAG, orphaned, owner_tags


def _started(instance: dg.DagsterInstance, tags: dict[str, str]) -> str:
    run = dg.DagsterRun(job_name="parse_job", run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.STARTED,
                        tags=tags)
    instance.add_run(run)
    return run.run_id


def test_a_run_whose_process_was_killed_is_failed_and_blocks_nothing(fabric_home):
    """guards against (hostile trial 6, 2026-12-05): `fabric serve` killed with SIGKILL during an
    ingest left its parse run STARTED for good, and every later purge and in-place restore was
    refused ("Dagster run(s) in progress … wait for them to finish") with nothing to wait for."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        from fabric_assets import run_owner

        owner = run_owner._owner(child.pid)
        instance = home_instance(fabric_home)
        killed = _started(instance, {OWNER_TAG: owner})
        untold = _started(instance, {})  # an older Fabric's run, or the UI's: its process cannot be told
        assert set(runs_in_progress(instance)) == {killed, untold}  # the owner lives: still in progress
        child.kill()
        child.wait()
        assert runs_in_progress(instance) == [untold]
        run = instance.get_run_by_id(killed)
        assert run.status == dg.DagsterRunStatus.FAILURE
        assert instance.get_run_by_id(untold).status == dg.DagsterRunStatus.STARTED
        failure = [e for e in instance.all_logs(killed) if e.dagster_event and e.dagster_event.is_run_failure]
        assert failure and "is gone" in failure[0].message
    finally:
        child.kill()


def test_an_owner_is_this_process_only_while_it_lives_with_the_same_start(monkeypatch):
    """guards against: a process ID reused by another process passing for the run's owner; a run
    of another host, or of a process whose start cannot be told, being failed from here; a live
    owner called gone after the wall clock steps (hostile trial 7: psutil's create_time is boot
    time plus ticks, and boot time is recomputed from the wall clock)."""
    import psutil

    from fabric_resources.process_identity import boot_id, start_ticks

    host, pid, boot = socket.gethostname(), os.getpid(), boot_id()

    def run(owner: str) -> dg.DagsterRun:
        return dg.DagsterRun(job_name="j", run_id=str(uuid.uuid4()), tags={OWNER_TAG: owner})

    mine = run(owner_tags()[OWNER_TAG])
    assert mine.tags[OWNER_TAG] == f"{host}|{boot}|{pid}|{start_ticks(pid)}"
    monkeypatch.setattr(psutil, "boot_time", lambda: 0.0)  # a clock step moves psutil's boot time
    assert not orphaned(mine)
    assert orphaned(run(f"{host}|{boot}|{pid}|1"))  # this pid, another start: reused
    assert orphaned(run(f"{host}|another-boot|{pid}|{start_ticks(pid)}"))  # before a reboot
    for untold in (f"not-{host}|{boot}|1|1", f"{host}|{boot}|\u00b2|x", f"{host}|?|{pid}|?", f"{host}|{pid}|1.0", ""):
        assert not orphaned(run(untold)), untold


def test_a_run_worker_named_by_dagster_becomes_the_owner_replacing_a_copied_tag(fabric_home):
    """guards against: a re-executed run carrying its parent's owner tag (a process that may live:
    the run would be waited for after its own worker died; or be gone: a live run failed), and a
    run executed in its launching process being re-tagged (no worker event: its launcher's tag
    stays)."""
    from dagster._core.events import EngineEventData

    from fabric_assets.run_owner import adopt_run, worker_pid

    instance = home_instance(fabric_home)
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        copied = _started(instance, owner_tags())  # this process: alive for the whole test
        run = instance.get_run_by_id(copied)
        # Exactly what `dagster api execute_run` and the code server's run subprocess write.
        instance.report_engine_event(f"Started process for run (pid: {worker.pid}).", run,
                                     EngineEventData.in_process(worker.pid))
        in_process = _started(instance, owner_tags())
        assert worker_pid(instance, copied) == worker.pid and worker_pid(instance, in_process) is None
        assert adopt_run(instance, copied) is not None and adopt_run(instance, copied) is None  # once
        assert adopt_run(instance, in_process) is None
        assert instance.get_run_by_id(in_process).tags[OWNER_TAG] == owner_tags()[OWNER_TAG]
        worker.kill()
        worker.wait()
        assert runs_in_progress(instance) == [in_process]
        assert instance.get_run_by_id(copied).status == dg.DagsterRunStatus.FAILURE
    finally:
        worker.kill()
