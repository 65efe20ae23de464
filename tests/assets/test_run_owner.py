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


def test_a_launchpad_run_that_never_launched_blocks_no_purge_or_restore(tmp_path, fabric_home, monkeypatch):
    """guards against (hostile trial 13b): a `parse_job` launched from the Launchpad with a partition
    range naming keys that do not exist is refused by Dagster after the run was made, which stays
    NOT_STARTED for good; runs_in_progress counted it, so every purge and in-place restore was refused
    ("Dagster run(s) in progress … end it in the UI: Terminate"), and the UI cannot terminate a run
    that never started. Now such a run, older than ``NEVER_LAUNCHED_S``, is not waited for; a run
    just made (about to be launched) still is."""
    from dagster_ui import query, ui

    from fabric_assets.ingest import ingest as run_ingest
    from fabric_resources.dagster_resources import FAKE_MODELS

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper logged the tide.\n")
    assert run_ingest(src, fabric_home, models=FAKE_MODELS).complete
    instance = home_instance(fabric_home)
    with ui(instance) as context:
        (location,) = context.code_location_names
        (repository,) = context.get_code_location(location).get_repositories()
        launched = query(context, """mutation($p: ExecutionParams!) { launchPipelineExecution(executionParams: $p) {
            __typename ... on PythonError { message } } }""", p={
            "selector": {"repositoryLocationName": location, "repositoryName": repository, "pipelineName": "parse_job"},
            "mode": "default", "runConfigData": {}, "executionMetadata": {"tags": [
                {"key": "dagster/asset_partition_range_start", "value": "aaa"},
                {"key": "dagster/asset_partition_range_end", "value": "zzz"}]}})["launchPipelineExecution"]
        assert launched["__typename"] == "PythonError" and "Nonexistent partition keys" in launched["message"]
        (left,) = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.NOT_STARTED]))
        terminated = query(context, """mutation($id: String!) { terminateRun(runId: $id) { __typename } }""",
                           id=left.run_id)["terminateRun"]
        assert terminated["__typename"] != "TerminateRunSuccess"  # the remedy the refusal named cannot be applied
    assert runs_in_progress(instance) == [left.run_id]  # just made: it may be about to be launched
    monkeypatch.setattr("fabric_assets.run_owner.NEVER_LAUNCHED_S", -1.0)  # ... and now made long ago
    assert runs_in_progress(instance) == []
    started = _started(instance, {})
    assert runs_in_progress(instance) == [started]


def test_a_run_made_while_the_clock_ran_ahead_is_not_waited_for_after_it_is_set_back():
    """guards against (hostile trial 16a): a run made and never launched while the clock ran a day
    ahead, then the clock set back, refused every purge and in-place restore until the clock caught up
    (its age read as negative). A run just made, or made seconds ahead (clock skew), is still waited for."""
    from datetime import datetime, timezone
    from types import SimpleNamespace

    from fabric_assets.run_owner import NEVER_LAUNCHED_S, never_launched

    now = 1_800_000_000.0

    def made(at: float, status=dg.DagsterRunStatus.NOT_STARTED):
        return SimpleNamespace(dagster_run=SimpleNamespace(status=status),
                               create_timestamp=datetime.fromtimestamp(at, timezone.utc))

    assert never_launched(made(now - NEVER_LAUNCHED_S - 1), now)
    assert never_launched(made(now + 86_400), now)
    assert not never_launched(made(now), now)
    assert not never_launched(made(now + 10), now)
    assert not never_launched(made(now - 10), now)
    assert not never_launched(made(now + 86_400, dg.DagsterRunStatus.STARTED), now)
