"""`fabric ui` (fabric_assets/cli/pipeline.py): the README runs it as `.venv/bin/fabric ui`, with the
venv not activated."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from fabric_assets.cli import app


def test_ui_runs_this_interpreters_dagster_without_path(tmp_path, monkeypatch):
    """guards against: `.venv/bin/fabric ui` ending in a FileNotFoundError traceback when the venv's
    bin folder is not on PATH (it ran `dagster` looked up on PATH)."""
    calls = []
    monkeypatch.setattr(subprocess, "call", lambda cmd, *a, **k: calls.append(cmd) or 0)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    out = CliRunner().invoke(app, ["ui", "--port", "3999", "--home", str(tmp_path / "home")])
    assert out.exit_code == 0, out.output
    (cmd,) = calls
    assert cmd[:4] == [sys.executable, "-m", "dagster", "dev"]
    assert cmd[cmd.index("-p") + 1] == "3999" and cmd[cmd.index("-h") + 1] == "127.0.0.1"
