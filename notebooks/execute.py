"""Execute the notebooks in a real Jupyter kernel and store them with their outputs, in place.

Run from anywhere, with the project's interpreter (``fabric`` itself is not needed, only the dev
extras: nbclient, nbformat, ipykernel)::

    .venv/bin/python notebooks/execute.py                      # every notebooks/*.ipynb
    .venv/bin/python notebooks/execute.py notebooks/03_benchmark_plots.ipynb

Each notebook runs top to bottom in a fresh ``python3`` kernel (the interpreter's own ipykernel),
with ``notebooks/`` as its working directory, ``HF_HUB_OFFLINE=1`` (nothing is downloaded), and
``TMPDIR`` pointing at a scratch folder removed afterwards (the scratch Fabric homes that
notebooks 01 and 02 make with :func:`tempfile.mkdtemp` go with it). ``FABRIC_NOTEBOOK_HOME`` and
``FABRIC_NOTEBOOK_FOLDER`` are passed on as they are; left unset, notebook 03 rewrites
``docs/bench_quality.png`` and ``docs/bench_latency.png``, as when run by hand.

What is stored is made to re-run with a small diff: no per-cell timing metadata, cell ids kept,
and a notebook whose cell raises is left as it was on disk (the error is printed, exit status 1).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

NOTEBOOKS = Path(__file__).resolve().parent

#: Seconds one cell may run (notebook 01 ingests the sample corpus through Dagster: ~30 s on 2 cores).
CELL_TIMEOUT_S = 600


def execute_notebook(path: Path, *, env: dict[str, str] | None = None,
                     timeout_s: int = CELL_TIMEOUT_S) -> nbformat.NotebookNode:
    """The notebook at ``path`` executed top to bottom in a fresh ``python3`` kernel (not written).

    ``env``: the kernel's environment (default: this process's); ``HF_HUB_OFFLINE=1`` and a
    scratch ``TMPDIR``, removed when the kernel has stopped, are set on top of it.

    Raises
    ------
    nbclient.exceptions.CellExecutionError
        If a cell raises (its traceback is in the message).
    """
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="fabric-notebooks-") as scratch:
        kernel_env = {**(os.environ if env is None else env), "HF_HUB_OFFLINE": "1", "TMPDIR": scratch}
        client = NotebookClient(nb, kernel_name="python3", timeout=timeout_s, record_timing=False,
                                resources={"metadata": {"path": str(path.parent)}})
        client.execute(env=kernel_env)
    return nb


def main(argv: list[str] | None = None) -> int:
    """Execute each notebook named (default: every ``notebooks/*.ipynb``) and write it back."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebooks/*.ipynb")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(NOTEBOOKS.glob("*.ipynb"))
    failed = 0
    for path in paths:
        print(f"executing {path.name} …", flush=True)
        try:
            nb = execute_notebook(path.resolve())
        except CellExecutionError as exc:
            print(f"{path.name}: a cell failed; the file is left as it was\n{exc}", file=sys.stderr)
            failed += 1
            continue
        nbformat.write(nb, path)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
