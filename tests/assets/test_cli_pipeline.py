"""Pipeline commands (fabric_assets/cli/pipeline.py) given what a new user types: `fabric ui` run as
`.venv/bin/fabric ui` (the venv not activated, as the README shows it), a file as the home."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from typer.testing import CliRunner

from fabric_assets.cli import app
from fabric_resources.home import FabricHome, HomeUnusableError


def test_ui_runs_this_interpreters_dagster_without_path(tmp_path, monkeypatch):
    """guards against: `.venv/bin/fabric ui` ending in a FileNotFoundError traceback when the venv's
    bin folder is not on PATH (it ran `dagster` looked up on PATH)."""
    calls = []
    monkeypatch.setattr("fabric_assets.cli.supervise.run_until_stopped", lambda cmd, *a, **k: calls.append(cmd) or 0)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    FabricHome(tmp_path / "home").catalog  # a home something was ingested into has its catalog
    out = CliRunner().invoke(app, ["ui", "--port", "3999", "--home", str(tmp_path / "home")])
    assert out.exit_code == 0, out.output
    (cmd,) = calls
    assert cmd[:4] == [sys.executable, "-m", "dagster", "dev"]
    assert cmd[cmd.index("-p") + 1] == "3999" and cmd[cmd.index("-h") + 1] == "127.0.0.1"


def test_ui_on_a_missing_home_is_refused_and_makes_nothing(tmp_path, monkeypatch):
    """guards against (hostile trial 11c): `fabric ui --home <typo>` making an empty home (its
    `dagster/` folder) and opening a UI with nothing in it, where `fabric status` says there is no home."""
    calls = []
    monkeypatch.setattr("fabric_assets.cli.supervise.run_until_stopped", lambda cmd, *a, **k: calls.append(cmd) or 0)
    out = CliRunner().invoke(app, ["ui", "--home", str(tmp_path / "typo")])
    assert out.exit_code == 2 and "no Fabric home at" in out.output, out.output
    assert not calls and not (tmp_path / "typo").exists()


def test_quickstart_with_a_file_as_home_writes_no_sample(tmp_path):
    """guards against (hostile trial 11c): `fabric quickstart --home notes/a.txt` writing its sample
    corpus to `notes/a.txt-sample` (beside the "home", inside the user's folder) before failing on
    the home."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.txt").write_text("a note\n", encoding="utf-8")
    out = CliRunner().invoke(app, ["quickstart", "--home", str(folder / "a.txt")])
    # The console script (fabric_assets.cli.root.run) prints this error as one line, exit 2.
    assert isinstance(out.exception, HomeUnusableError), out.output
    assert sorted(p.name for p in folder.iterdir()) == ["a.txt"]


def test_quickstart_prints_a_query_holding_markup_as_typed(tmp_path):
    """guards against (hostile trial 13a): `fabric quickstart DIR --query 'lighthouse [/x]'` ingesting
    the folder and then failing on its own heading line with a rich `MarkupError` traceback (the query
    was printed as markup), before the search ran."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.txt").write_text("The lighthouse keeper logged the tide.\n", encoding="utf-8")
    out = CliRunner().invoke(app, ["quickstart", str(folder), "--query", "lighthouse [/x]",
                                   "--home", str(tmp_path / "home")], env={"HF_HUB_OFFLINE": "1"})
    assert out.exit_code == 0 and out.exception is None, (out.exception, out.output)
    assert "fabric search 'lighthouse [/x]'" in out.output and "verified" in out.output


#: Stands in for `dagster dev`: a Python server that starts a service of its own (in its process
#: group), stops both on KeyboardInterrupt, and maps SIGTERM to what SIGINT does, as Dagster does.
CHILD = """
import os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.getsignal(signal.SIGINT))
service = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[1], "w").write(f"{os.getpid()} {service.pid} {signal.getsignal(signal.SIGINT) is signal.SIG_IGN}")
try:
    time.sleep(600)
except KeyboardInterrupt:
    service.terminate()
    service.wait()
    open(sys.argv[1] + ".stopped", "w").write("SIGINT")
"""

#: `fabric ui` as a script starts it (`fabric ui &`: SIGINT ignored), running the child above.
PARENT = """
import signal, sys
from fabric_assets.cli.supervise import run_until_stopped
if sys.argv[3] == "ignore-sigint":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
sys.exit(run_until_stopped([sys.executable, sys.argv[1], sys.argv[2]], grace_s=20))
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _started(tmp_path, child: str, sigint: str = "default", parent_code: str = PARENT):
    """`fabric ui`'s stand-in (``parent_code``) running ``child``, once the child wrote its ready file:
    ``(parent process, ready file)``."""
    (tmp_path / "child.py").write_text(child)
    ready = tmp_path / "ready"
    parent = subprocess.Popen([sys.executable, "-c", parent_code, str(tmp_path / "child.py"), str(ready), sigint],
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    deadline = time.monotonic() + 60
    while not (ready.exists() and ready.read_text()) and time.monotonic() < deadline and parent.poll() is None:
        time.sleep(0.1)
    return parent, ready


@pytest.mark.parametrize("sigint", ["ignore-sigint", "default"])
@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGHUP])
def test_ui_stops_dagster_dev_and_its_services_when_it_is_told_to_stop(tmp_path, sigint, signo):
    """guards against (trial 16c, left open until stop 50): `kill <fabric ui>` leaving `dagster dev`
    and every service it started running (the parent died at once; nothing told the child), and
    `fabric ui &` from a script, where SIGINT is ignored and Dagster maps SIGTERM to SIGINT's
    ignored disposition, leaving a `dagster dev` nothing but SIGKILL could stop."""
    parent, ready = _started(tmp_path, CHILD, sigint)
    try:
        child_pid, service_pid, ignored = ready.read_text().split()
        assert ignored == "False"  # the child starts with SIGINT at its default
        parent.send_signal(signo)
        assert parent.wait(timeout=30) == 128 + signo
        assert (tmp_path / "ready.stopped").read_text() == "SIGINT"  # a graceful stop, not a kill
        assert not _alive(int(child_pid)) and not _alive(int(service_pid))
    finally:
        parent.kill()


def test_a_child_that_ignores_the_stop_has_its_group_killed_after_the_grace_time(tmp_path):
    """guards against: a child that never stops on SIGINT keeping `fabric ui` (and itself) up for good."""
    child = ("import os, signal, sys, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
             "open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)")
    parent, ready = _started(tmp_path, child, parent_code=PARENT.replace("grace_s=20", "grace_s=1"))
    try:
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=30) == 128 + signal.SIGTERM
        assert not _alive(int(ready.read_text()))
    finally:
        parent.kill()


def _state(pid: int) -> str:
    """The process state letter of ``pid`` (``T``: stopped), from ``/proc/<pid>/stat``."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _wait_state(pid: int, wanted: set[str], timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while (state := _state(pid)) not in wanted and time.monotonic() < deadline:
        time.sleep(0.05)
    return state


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_ctrl_z_stops_dagster_dev_with_ui_and_fg_lets_both_go_on(tmp_path):
    """guards against (stop 50's note): Ctrl-Z stopping `fabric ui` alone while `dagster dev`, in its
    own process group (not the terminal's foreground group), and its services kept running."""
    parent, ready = _started(tmp_path, CHILD)
    try:
        pids = [parent.pid] + [int(p) for p in ready.read_text().split()[:2]]
        parent.send_signal(signal.SIGTSTP)
        assert [_wait_state(p, {"T"}) for p in pids] == ["T", "T", "T"]
        parent.send_signal(signal.SIGCONT)
        assert all(_wait_state(p, {"S", "R"}) in {"S", "R"} for p in pids)
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=30) == 128 + signal.SIGTERM
        assert not _alive(pids[1]) and not _alive(pids[2])
    finally:
        parent.kill()
