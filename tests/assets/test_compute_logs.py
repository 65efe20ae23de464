"""The compute-log manager of a home's Dagster instance: its mirroring children leave a Ctrl-C to
Fabric (no ``KeyboardInterrupt`` traceback from Dagster's ``watch_orphans.py`` under ``fabric
ingest``'s "interrupted")."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import dagster as dg

from fabric_assets.compute_logs import FabricComputeLogManager
from fabric_resources.config import StorageConfig
from fabric_resources.dagster_instance import write_instance_yaml


def _children() -> dict[int, str]:
    """This process's child processes: pid -> command line."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == os.getpid():
                out[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return out


def _sigint_blocked_or_ignored(pid: int) -> bool:
    fields = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                  if ":\t" in line)
    bit = 1 << (signal.SIGINT - 1)
    return bool((int(fields["SigBlk"], 16) | int(fields["SigIgn"], 16)) & bit)


def test_a_homes_compute_log_children_do_not_take_the_terminals_ctrl_c_and_this_process_does(tmp_path):
    """guards against (trial 20c): a Ctrl-C of `fabric ingest` reached Dagster's `tail` and
    `watch_orphans.py` children (the terminal signals the whole process group), and each watcher
    printed a KeyboardInterrupt traceback. The home's instance uses Fabric's manager; the children
    it starts have SIGINT blocked (checked in /proc, not by timing), while this process's mask is
    as it was, inside the capture and after."""
    write_instance_yaml(tmp_path / "dagster", StorageConfig())
    with dg.DagsterInstance.from_config(str(tmp_path / "dagster")) as instance:
        manager = instance.compute_log_manager
        assert isinstance(manager, FabricComputeLogManager)
        assert Path(manager._base_dir) == (tmp_path / "dagster" / "storage").resolve()  # Dagster's default folder
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    with manager.capture_logs(["run", "step"]):
        started = {pid: cmd for pid, cmd in _children().items() if "watch_orphans" in cmd or "tail" in cmd}
        assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == mask
        assert any("watch_orphans" in cmd for cmd in started.values()), started
        assert {pid: _sigint_blocked_or_ignored(pid) for pid in started} == {pid: True for pid in started}
    assert signal.pthread_sigmask(signal.SIG_BLOCK, set()) == mask and signal.SIGINT not in mask
