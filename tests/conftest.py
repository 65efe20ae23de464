"""Shared fixtures: the ../shared folder, isolated Fabric homes, in-process ingest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SHARED = Path(__file__).resolve().parents[2] / "shared"
CORPUS = SHARED / "corpus"
EVAL = SHARED / "eval"


def need_shared(path: Path = CORPUS) -> Path:
    if not path.exists():
        pytest.skip(f"{path} not present (../shared is provided on project machines and in CI)")
    return path


@pytest.fixture
def fabric_home(tmp_path, monkeypatch):
    """A fresh Fabric home (and its Dagster instance) under tmp_path."""
    from fabric_resources.home import FabricHome

    home_dir = tmp_path / "home"
    monkeypatch.setenv("FABRIC_HOME", str(home_dir))
    monkeypatch.setenv("DAGSTER_HOME", str(home_dir / "dagster"))
    return FabricHome(home_dir)


def ingest(path: Path, home):
    """Run `fabric ingest` in-process (real Dagster runs in the home's instance)."""
    from fabric_assets.ingest import ingest as run

    os.environ["DAGSTER_HOME"] = str(home.layout.dagster_home)
    return run(path, home)
