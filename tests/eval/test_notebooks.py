"""The notebooks run top to bottom (their code cells, in one namespace, without Jupyter), and they
are stored executed by a real kernel: every code cell run once in order, no error, their tables and
figures inline (``image/png`` where a figure is drawn), no machine's paths in the outputs.

Re-executing them: ``.venv/bin/python notebooks/execute.py`` (README, "Notebooks").
"""

from __future__ import annotations

import base64
import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
IDS = [p.stem for p in NOTEBOOKS]

#: A code cell that makes a matplotlib figure; it must leave an ``image/png`` output.
DRAWS_FIGURE = re.compile(r"\bplt\.(subplots|figure)\(")
#: What a stored output must not carry: scratch homes, temp folders, home directories, this checkout.
MACHINE_PATHS = re.compile(r"fabric-nb-|fabric-notebooks-|/tmp/|/var/folders/|/home/|/root/|/Users/|"
                           + re.escape(str(ROOT)))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _code_cells(notebook: Path) -> list[dict]:
    return [c for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _texts(output: dict) -> list[str]:
    """Every text an output carries: a stream, a traceback, each text MIME type of a result."""
    if output["output_type"] == "stream":
        return ["".join(output["text"])]
    if output["output_type"] == "error":
        return ["\n".join(output["traceback"])]
    return ["".join(v) if isinstance(v, list) else v
            for mime, v in output.get("data", {}).items() if mime.startswith("text/")]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=IDS)
def test_notebook_runs(notebook, tmp_path, monkeypatch):
    """guards against: notebooks rotting as the API changes (each ends with assertions)."""
    monkeypatch.setenv("FABRIC_NOTEBOOK_HOME", str(tmp_path))
    monkeypatch.delenv("FABRIC_NOTEBOOK_FOLDER", raising=False)
    namespace: dict = {"__name__": "__notebook__"}
    for i, cell in enumerate(_code_cells(notebook)):
        exec(compile(_source(cell), f"{notebook.name}[{i}]", "exec"), namespace)
    assert "HOME" in namespace


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=IDS)
def test_notebook_is_stored_executed_in_order(notebook):
    """guards against: a notebook committed cleared, half run, run out of order or with a failing
    cell, so that GitHub or Jupyter shows no results (or stale ones next to edited code)."""
    cells = [c for c in _code_cells(notebook) if _source(c).strip()]
    assert cells
    assert [c["execution_count"] for c in cells] == list(range(1, len(cells) + 1)), (
        f"{notebook.name}: not executed top to bottom in one kernel; run .venv/bin/python notebooks/execute.py")
    for cell in cells:
        for output in cell["outputs"]:
            assert output["output_type"] != "error", f"{notebook.name} [{cell['execution_count']}]: {output['ename']}"
            assert not (output["output_type"] == "stream" and output["name"] == "stderr"), (
                f"{notebook.name} [{cell['execution_count']}] stored a warning or log: {''.join(output['text'])[:300]}")
    # Every notebook shows something: a table, a figure or printed figures, in most of its cells.
    assert sum(bool(c["outputs"]) for c in cells) >= len(cells) // 2, f"{notebook.name}: mostly without outputs"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=IDS)
def test_notebook_figures_are_inline(notebook):
    """guards against: a figure written only to a file (the reader on GitHub sees nothing), or a
    stored image that is not a PNG."""
    drawing = [c for c in _code_cells(notebook) if DRAWS_FIGURE.search(_source(c))]
    for cell in drawing:
        images = [o["data"]["image/png"] for o in cell["outputs"] if "image/png" in o.get("data", {})]
        assert len(images) == 1, f"{notebook.name} [{cell['execution_count']}]: {len(images)} inline PNGs, not one"
        png = base64.b64decode("".join(images[0]) if isinstance(images[0], list) else images[0])
        assert png.startswith(PNG_SIGNATURE) and len(png) > 10_000


def test_benchmark_notebook_draws_both_figures():
    """guards against: the plots notebook stored with its figures skipped (the repository holds the
    eval and query-scale results both plots read)."""
    (notebook,) = [p for p in NOTEBOOKS if p.stem == "03_benchmark_plots"]
    images = [o for c in _code_cells(notebook) for o in c["outputs"] if "image/png" in o.get("data", {})]
    assert len(images) == 2


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=IDS)
def test_notebook_outputs_hold_no_machine_paths(notebook):
    """guards against: stored outputs carrying the executing machine's temp folders, home directory
    or checkout path (junk in every diff, and a leak of where it ran)."""
    for cell in _code_cells(notebook):
        for output in cell["outputs"]:
            for text in _texts(output):
                found = MACHINE_PATHS.search(text)
                assert found is None, f"{notebook.name} [{cell['execution_count']}]: {found.group(0)!r} in {text[:300]!r}"


def test_benchmark_notebook_executes_in_a_real_kernel(tmp_path, monkeypatch):
    """guards against: a notebook that runs as plain Python but not in Jupyter (the inline figures,
    ``display``, the kernel's working directory) and against notebooks/execute.py itself breaking.
    The plots notebook: a few seconds; its PNGs go to the scratch folder, not docs/."""
    spec = importlib.util.spec_from_file_location("fabric_notebooks_execute", ROOT / "notebooks" / "execute.py")
    execute = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(execute)
    monkeypatch.setenv("FABRIC_NOTEBOOK_HOME", str(tmp_path))

    (notebook,) = [p for p in NOTEBOOKS if p.stem == "03_benchmark_plots"]
    stored = notebook.read_bytes()
    executed = execute.execute_notebook(notebook, timeout_s=120)
    cells = [c for c in executed.cells if c.cell_type == "code"]
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1))
    assert not [o for c in cells for o in c.outputs if o.output_type == "error"]
    assert len([o for c in cells for o in c.outputs if "image/png" in o.get("data", {})]) == 2
    assert sorted(p.name for p in tmp_path.glob("*.png")) == ["bench_latency.png", "bench_quality.png"]
    assert notebook.read_bytes() == stored  # execute_notebook writes nothing back; main() does


def test_benchmark_notebook_is_stored_with_the_results_it_reads():
    """guards against (hostile trial 11c): a result added to docs/bench-results (ann.json,
    incremental-10k.json, retention-corpus.json) without storing the plots notebook executed again,
    so that what GitHub shows was drawn from other files than the repository holds (the README:
    "after changing one, or the results it reads, store it executed again"). The notebook names
    every JSON file it reads or skips."""
    (notebook,) = [p for p in NOTEBOOKS if p.stem == "03_benchmark_plots"]
    shown = "\n".join(t for c in _code_cells(notebook) for o in c["outputs"] for t in _texts(o))
    missing = [p.name for p in sorted((ROOT / "docs" / "bench-results").glob("*.json")) if p.name not in shown]
    assert not missing, f"{missing} not in the stored outputs; run .venv/bin/python notebooks/execute.py"
