"""Unattended by default: with Dagster's own daemon running and no command typed, a new file is
picked up by the source sensor, parsed, activated by the activation sensor and searchable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabric_assets.definitions import build_definitions
from fabric_query import Fabric
from fabric_resources.config import FabricConfig
from fabric_resources.home import FabricHome

REPO = Path(__file__).resolve().parents[2]


def test_sensors_and_schedule_start_running_and_a_config_switch_skips_them(tmp_path, fabric_home):
    """guards against: the sensors and the health schedule starting switched off (nothing happens
    unattended), or no way to turn them off."""
    import dagster as dg

    defs = build_definitions(FabricConfig())
    assert {s.name: s.default_status for s in defs.sensors} == {
        n: dg.DefaultSensorStatus.RUNNING for n in ("source_change_sensor", "activate_after_parse_run",
                                                   "activate_after_asset_run", "annotate_after_activation",
                                                   "activate_after_annotation_run", "rederive_after_repair")}
    assert all(s.default_status == dg.DefaultScheduleStatus.RUNNING for s in defs.schedules)
    from fabric_assets.sensors import source_change_sensor
    from fabric_resources.dagster_resources import FabricHomeResource

    fabric_home.layout.config_file.write_text(json.dumps({"sources": {"unattended": False}}))
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("A file the switched-off sensor must not take in.\n")
    fabric_home.catalog.register_root(src)
    ctx = dg.build_sensor_context(instance=dg.DagsterInstance.ephemeral(),
                                  resources={"fabric": FabricHomeResource(home=str(fabric_home.root))})
    result = source_change_sensor(ctx)
    assert result.run_requests == [] and "unattended" in (result.skip_reason.skip_message or "")
    assert fabric_home.catalog.sources() == []  # it did not even scan


@pytest.mark.slow
def test_the_daemon_ingests_a_new_file_with_no_command_typed(tmp_path):
    """guards against: a file added while `fabric ui` / `dagster dev` runs never becoming searchable
    unless someone types `fabric ingest`."""
    # A smaller config keeps the test bounded (16 min under load with Dagster's multiprocess
    # executor, every step a process loading its model): the sensors' runs execute their steps in
    # the run's process, and one dense model.
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.json").write_text(json.dumps(
        {"sources": {"unattended_steps": "in_process"}, "dense": {"multilingual": False}}))
    home = FabricHome(tmp_path / "home")
    src = tmp_path / "notes"
    src.mkdir()
    (src / "first.txt").write_text("The lighthouse keeper climbed the spiral stairs.\n")
    home.catalog.register_root(src)  # `fabric ingest` once registered the folder; nothing runs it now
    env = {**os.environ, "DAGSTER_HOME": str(home.layout.dagster_home), "FABRIC_HOME": str(home.root),
           "HF_HUB_OFFLINE": "1"}
    log = open(tmp_path / "daemon.log", "wb")
    daemon = subprocess.Popen([str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w",
                               str(REPO / "workspace.yaml")], cwd=REPO, env=env,
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        (src / "second.txt").write_text("Sourdough bread needs flour, water and a patient baker.\n")
        deadline = time.monotonic() + 480
        found = []
        while time.monotonic() < deadline and not found:
            time.sleep(5)
            if home.catalog.current_release() is not None:
                found = [r.citation.source_key for r in Fabric(home.root).search("sourdough baker").results]
        assert "fs:notes/second.txt" in found, (tmp_path / "daemon.log").read_text(errors="replace")[-3000:]
        import dagster as dg

        with dg.DagsterInstance.from_config(str(home.layout.dagster_home)) as instance:
            runs = [r.dagster_run for r in instance.get_run_records()]
        # Started by the sensors (no command typed), executed by the configured executor.
        assert {r.job_name for r in runs} >= {"parse_job", "activation_job"}
        assert all(r.tags.get("dagster/sensor_name") for r in runs), [r.tags for r in runs]
        assert all(r.run_config.get("execution") == {"config": {"in_process": {}}} for r in runs)
        assert "fs:notes/first.txt" in {r.citation.source_key
                                        for r in Fabric(home.root).search("lighthouse keeper").results}
        # Freshness: the sensor's scans and the release's age show in status.
        status = Fabric(home.root).status()
        assert status.last_scan_at is not None and time.time() - status.last_scan_at < 600
        assert status.release_created_at is not None and status.pending == 0
        from typer.testing import CliRunner

        from fabric_assets.cli import app

        out = CliRunner().invoke(app, ["status", "--home", str(home.root)])
        assert "last scan" in out.output and "release published" in out.output, out.output
    finally:
        os.killpg(daemon.pid, 15)
        daemon.wait(timeout=60)
        log.close()


def test_a_run_the_daemon_launched_is_failed_once_its_processes_are_killed(tmp_path):
    """guards against: a run the daemon (or the UI) launched in a run worker of its own staying
    STARTED for good once its processes were killed together (SIGKILL of the session, a reboot):
    Dagster's default run launcher cannot check a worker's health, the run carried no owner tag,
    and every later purge and in-place restore waited for it. Its first step now names the worker
    (the pid Dagster's engine event gives) as the run's owner, which a purge then finds gone."""
    import signal

    import dagster as dg
    import psutil

    from fabric_assets.lifecycle.run_history import runs_in_progress
    from fabric_assets.run_owner import OWNER_TAG, worker_pid

    home = FabricHome(tmp_path / "home")
    src = tmp_path / "notes"
    src.mkdir()
    for i in range(12):
        (src / f"n{i:02d}.txt").write_text(f"Note {i}: the lighthouse keeper logged the tide and the fog.\n")
    env = {**os.environ, "DAGSTER_HOME": str(home.layout.dagster_home), "FABRIC_HOME": str(home.root),
           "HF_HUB_OFFLINE": "1"}
    subprocess.run([str(Path(sys.executable).parent / "fabric"), "ingest", str(src), "--home", str(home.root)],
                   env=env, check=True, capture_output=True, timeout=600)
    keys = sorted(r.parse_id for r in home.catalog.parse_runs())
    bin_dir = Path(sys.executable).parent
    # Queued as the UI's Launchpad queues it (one run over every partition: long enough to be killed).
    subprocess.run([str(bin_dir / "dagster"), "job", "launch", "-w", str(REPO / "workspace.yaml"), "-j",
                    "rechunk_job", "--tags", json.dumps({"dagster/asset_partition_range_start": keys[0],
                                                         "dagster/asset_partition_range_end": keys[-1]})],
                   cwd=REPO, env=env, check=True, capture_output=True, timeout=300)
    log = open(tmp_path / "daemon.log", "wb")
    daemon = subprocess.Popen([str(bin_dir / "dagster-daemon"), "run", "-w", str(REPO / "workspace.yaml")],
                              cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        with dg.DagsterInstance.from_config(str(home.layout.dagster_home)) as instance:
            (run,) = [r for r in instance.get_runs() if r.job_name == "rechunk_job"]
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                now = instance.get_run_by_id(run.run_id)
                if OWNER_TAG in now.tags or now.status in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE):
                    break
                time.sleep(0.5)
            run = instance.get_run_by_id(run.run_id)
            assert OWNER_TAG in run.tags, (tmp_path / "daemon.log").read_text(errors="replace")[-3000:]
            worker = psutil.Process(worker_pid(instance, run.run_id))
            assert run.tags[OWNER_TAG].split("|")[2] == str(worker.pid)
            doomed = [worker, *worker.children(recursive=True)]
            os.killpg(daemon.pid, signal.SIGKILL)  # the daemon, its code server: nothing left to notice
            for process in doomed:
                try:
                    process.kill()
                except psutil.NoSuchProcess:
                    pass
            psutil.wait_procs(doomed, timeout=30)
            daemon.wait(timeout=30)
            assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED  # what was left
            assert runs_in_progress(instance) == []  # what a purge or restore asks first
            assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE
    finally:
        if daemon.poll() is None:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait(timeout=60)
        log.close()
