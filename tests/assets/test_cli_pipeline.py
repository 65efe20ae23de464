"""Pipeline commands (fabric_assets/cli/pipeline.py) given what a new user types: `fabric ui` run as
`.venv/bin/fabric ui` (the venv not activated, as the README shows it), a file as the home."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from fabric_assets.cli import app
from fabric_resources.home import FabricHome, HomeUnusableError


def test_ui_runs_this_interpreters_dagster_without_path(tmp_path, monkeypatch):
    """guards against: `.venv/bin/fabric ui` ending in a FileNotFoundError traceback when the venv's
    bin folder is not on PATH (it ran `dagster` looked up on PATH)."""
    calls = []
    monkeypatch.setattr(subprocess, "call", lambda cmd, *a, **k: calls.append(cmd) or 0)
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
    monkeypatch.setattr(subprocess, "call", lambda cmd, *a, **k: calls.append(cmd) or 0)
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
