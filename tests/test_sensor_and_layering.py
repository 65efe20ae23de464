"""The source sensor (via Dagster's build_sensor_context) and the package layering."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import dagster as dg

from fabric_assets.jobs import RANGE_END_TAG, RANGE_START_TAG
from fabric_assets.sensors import source_change_sensor
from fabric_resources.dagster_resources import FabricHomeResource

ROOT = Path(__file__).resolve().parents[1]


def _evaluate(instance, home_dir):
    ctx = dg.build_sensor_context(instance=instance, resources={"fabric": FabricHomeResource(home=str(home_dir))})
    return source_change_sensor(ctx)


def test_sensor_batches_many_partitions_per_run(tmp_path, fabric_home):
    """guards against: one run (one process) per document; duplicate partitions on a re-tick;
    deletions never reaching activation."""
    fabric_home.layout.config_file.write_text(json.dumps({"sources": {"partitions_per_run": 4}}))
    src = tmp_path / "src"
    src.mkdir()
    for i in range(10):
        (src / f"doc{i}.txt").write_text(f"Document number {i} talks about topic {i * 7}.\n")
    fabric_home.catalog.register_root(src)
    instance = dg.DagsterInstance.ephemeral()

    result = _evaluate(instance, fabric_home.root)
    (add,) = result.dynamic_partitions_requests
    assert len(add.partition_keys) == 10
    runs = result.run_requests
    assert [r.job_name for r in runs] == ["parse_job"] * 3
    instance.add_dynamic_partitions("parses", list(add.partition_keys))  # what the daemon applies
    order = list(add.partition_keys)
    covered = []
    for r in runs:
        start, end = order.index(r.tags[RANGE_START_TAG]), order.index(r.tags[RANGE_END_TAG])
        assert end - start + 1 <= 4
        covered += order[start:end + 1]
    assert sorted(covered) == sorted(order)

    # A second tick with no change adds nothing; pending work is re-requested under the same run keys.
    again = _evaluate(instance, fabric_home.root)
    assert again.dynamic_partitions_requests == []
    assert {r.run_key for r in again.run_requests} == {r.run_key for r in runs}

    # Deleting a file needs only an activation.
    for pid in order:
        fabric_home.catalog.set_parse_status(pid, "ready")
    (src / "doc3.txt").unlink()
    third = _evaluate(instance, fabric_home.root)
    assert [r.job_name for r in third.run_requests] == ["activation_job"]


def _imports(path: Path) -> set[str]:
    return {name.split(".")[0] for name in _imported_modules(path)}


def _imported_modules(path: Path) -> set[str]:
    """Every dotted name a module imports, at any depth of its code (``from a import b`` gives
    ``a`` and ``a.b``, since ``b`` may be a module). The packages use absolute imports only."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_import_direction():
    """guards against: Dagster leaking into the read side or into plain storage modules;
    fabric_resources depending on either package above it; fabric_query (its CLI included)
    depending on the write side."""
    for path in (ROOT / "fabric_query").rglob("*.py"):
        found = _imports(path)
        assert "dagster" not in found, path
        assert "fabric_assets" not in found, path  # the read commands too: the CLI root is on the write side
    for path in (ROOT / "fabric_resources").rglob("*.py"):
        found = _imports(path)
        assert not found & {"fabric_assets", "fabric_query"}, path
        if path.name != "dagster_resources.py":
            assert "dagster" not in found, path


def test_fabric_query_answers_without_dagster(tmp_path, fabric_home):
    """guards against: importing or running a query pulling Dagster into the process."""
    from conftest import ingest

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper wrote tide tables.\n")
    ingest(src, fabric_home)
    code = (
        "import sys\n"
        "from fabric_query import Fabric\n"
        f"pack = Fabric({str(fabric_home.root)!r}).search('lighthouse')\n"
        "assert pack.results, 'no results'\n"
        "bad = sorted(m for m in sys.modules if m == 'dagster' or m.startswith('dagster.') or m.startswith('fabric_assets'))\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


MEASUREMENT = "fabric_assets.measurement"
#: The top floor: the only code allowed to import the measurement package.
TOP_FLOOR = (ROOT / "fabric_assets" / "measurement", ROOT / "fabric_assets" / "cli")


def test_only_the_cli_imports_measurement():
    """guards against: product code (write side, storage, read side) depending on benchmarks,
    the evaluation harness or the stub chat server."""
    for package in ("fabric_assets", "fabric_resources", "fabric_query"):
        for path in (ROOT / package).rglob("*.py"):
            if any(floor in path.parents for floor in TOP_FLOOR):
                continue
            found = _imported_modules(path)
            assert not {m for m in found if m == MEASUREMENT or m.startswith(MEASUREMENT + ".")}, path


def _console_script() -> str:
    """``module:function`` of the ``fabric`` console script, as pyproject.toml declares it."""
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["fabric"]


def test_fabric_search_command_loads_neither_dagster_nor_measurement(tmp_path, fabric_home):
    """guards against: the console script's root (on the write side) pulling Dagster, the pipeline
    or the measurement package into a cold `fabric search`: only the CLI modules of fabric_assets load."""
    from conftest import ingest

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper wrote tide tables.\n")
    ingest(src, fabric_home)
    module, _, function = _console_script().partition(":")
    code = (
        "import atexit, importlib, json, sys\n"
        "atexit.register(lambda: print('MODULES', json.dumps(sorted(sys.modules)), file=sys.stderr))\n"
        f"sys.argv = ['fabric', 'search', 'lighthouse', '--home', {str(fabric_home.root)!r}]\n"
        f"getattr(importlib.import_module({module!r}), {function!r})()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "lighthouse" in proc.stdout and "a.txt" in proc.stdout
    line = next(x for x in proc.stderr.splitlines() if x.startswith("MODULES "))
    modules = json.loads(line[len("MODULES "):])
    assert not [m for m in modules if m == "dagster" or m.startswith("dagster.")]
    assert not [m for m in modules if m == MEASUREMENT or m.startswith(MEASUREMENT + ".")]
    assert {m for m in modules if m.split(".")[0] == "fabric_assets"} <= {
        "fabric_assets", "fabric_assets.cli", "fabric_assets.cli.pipeline", "fabric_assets.cli.measurement"}


def test_query_latency_process_loads_no_dagster():
    """guards against: the fresh query process of `fabric bench query --chunks` importing Dagster
    (its times and RSS would no longer be those of a query process)."""
    code = (
        "import sys\n"
        "import fabric_assets.measurement.query_latency\n"
        "bad = sorted(m for m in sys.modules if m == 'dagster' or m.startswith('dagster.'))\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
