"""The notebooks run top to bottom (their code cells, in one namespace, without Jupyter)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(notebook, tmp_path, monkeypatch):
    """guards against: notebooks rotting as the API changes (each ends with assertions)."""
    monkeypatch.setenv("FABRIC_NOTEBOOK_HOME", str(tmp_path))
    monkeypatch.delenv("FABRIC_NOTEBOOK_FOLDER", raising=False)
    cells = json.loads(notebook.read_text())["cells"]
    namespace: dict = {"__name__": "__notebook__"}
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), f"{notebook.name}[{i}]", "exec"), namespace)
    assert "HOME" in namespace
