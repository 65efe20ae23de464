"""The package layering (issue 14, item 6): the import graph of the three packages, walked statically,
and what a cold process loads.

Allowed: ``fabric_assets → fabric_resources ← fabric_query``; ``fabric_assets.cli`` (the console
script's root) may import ``fabric_query``; only ``fabric_assets.cli`` and the measurement package
itself import ``fabric_assets.measurement``. Forbidden: any import from ``fabric_query`` or
``fabric_resources`` into ``fabric_assets``, from ``fabric_resources`` into ``fabric_query``, from
the write side's product code into ``fabric_query``, Dagster outside the write side (but
``fabric_resources/dagster_resources.py``), and any import circle between modules — lazy imports
inside functions included, since a lazy import is still a dependency.

The checker is run on the real tree and on a copy of it with one deliberate bad import each, so a
checker that stopped seeing an edge would fail here too.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fabric_assets", "fabric_resources", "fabric_query")
MEASUREMENT = "fabric_assets.measurement"
CLI = "fabric_assets.cli"


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module → the modules (of the three packages, or the top name of any other) it imports,
    at any depth of its code. ``from a import b`` is an edge to ``a.b`` when that is a module, else
    to ``a``; a dotted name resolves to its longest prefix that is a module of the tree."""
    modules = {_module_name(root, p): p for pkg in PACKAGES for p in (root / pkg).rglob("*.py")}

    def resolve(name: str) -> str:
        if name.split(".")[0] not in PACKAGES:
            return name.split(".")[0]
        while name not in modules and "." in name:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                edges.update(resolve(a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{path}: the packages use absolute imports only"
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    edges.add(resolve(full if full in modules else node.module))
        graph[name] = edges - {name}
    return graph


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start] & graph.keys())))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child] & graph.keys()))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Every forbidden edge and every circle of ``graph``, as readable lines (empty: the layering holds)."""
    out = []
    for module, edges in sorted(graph.items()):
        for target in sorted(edges):
            if _in(module, "fabric_query") and _in(target, "fabric_assets"):
                out.append(f"read side imports the write side: {module} → {target}")
            if _in(module, "fabric_resources") and (_in(target, "fabric_assets") or _in(target, "fabric_query")):
                out.append(f"storage and models import a package above them: {module} → {target}")
            if (_in(module, "fabric_assets") and not _in(module, CLI) and not _in(module, MEASUREMENT)
                    and _in(target, "fabric_query")):
                out.append(f"write-side product code imports the read side: {module} → {target}")
            if _in(target, MEASUREMENT) and not (_in(module, CLI) or _in(module, MEASUREMENT)):
                out.append(f"product code imports measurement: {module} → {target}")
            if target == "dagster" and not (_in(module, "fabric_assets")
                                            or module == "fabric_resources.dagster_resources"):
                out.append(f"Dagster outside the write side: {module} → dagster")
    out.extend("import circle: " + " ↔ ".join(c) for c in circles(graph))
    return out


def test_the_layering_holds():
    """guards against: any forbidden edge or circle in the product's import graph."""
    graph = import_graph(ROOT)
    assert len(graph) > 100 and "fabric_query.pipeline" in graph["fabric_query.api"]
    assert violations(graph) == []


BAD_IMPORTS = [
    ("fabric_query/_bad.py", "from fabric_assets.ingest import ingest_path\n",
     "read side imports the write side: fabric_query._bad → fabric_assets.ingest"),
    ("fabric_query/_bad.py", "def later():\n    import fabric_assets.jobs\n",
     "read side imports the write side: fabric_query._bad → fabric_assets.jobs"),
    ("fabric_resources/_bad.py", "from fabric_assets import gate\n",
     "storage and models import a package above them: fabric_resources._bad → fabric_assets.gate"),
    ("fabric_resources/_bad.py", "import fabric_query.fusion\n",
     "storage and models import a package above them: fabric_resources._bad → fabric_query.fusion"),
    ("fabric_assets/_bad.py", "from fabric_query.fusion import rrf\n",
     "write-side product code imports the read side: fabric_assets._bad → fabric_query.fusion"),
    ("fabric_assets/chunks/_bad.py", "from fabric_assets.measurement import metrics\n",
     "product code imports measurement: fabric_assets.chunks._bad → fabric_assets.measurement.metrics"),
    ("fabric_query/_bad.py", "import dagster\n", "Dagster outside the write side: fabric_query._bad → dagster"),
    ("fabric_resources/text_folding.py", "\ndef _circle():\n    from fabric_resources import lexical_index\n", None),
]


@pytest.mark.parametrize("path, code, expected", BAD_IMPORTS, ids=[f"{p}:{c.split()[1]}" for p, c, _ in BAD_IMPORTS])
def test_the_checker_fails_on_a_deliberate_bad_import(tmp_path, path, code, expected):
    """guards against: a checker that passes everything — each forbidden kind of edge, added to a copy
    of the real tree, is reported (the product itself is never touched)."""
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / path
    if expected is None:  # a circle: lexical_index imports text_folding, which now imports it back lazily
        assert "fabric_resources.text_folding" in import_graph(tmp_path)["fabric_resources.lexical_index"]
        target.write_text(target.read_text(encoding="utf-8") + code, encoding="utf-8")
        found = violations(import_graph(tmp_path))
        # word_segmentation (imported by lexical_index, importing text_folding) closes the same circle.
        assert found == ["import circle: fabric_resources.lexical_index ↔ fabric_resources.text_folding ↔ "
                         "fabric_resources.word_segmentation"], found
    else:
        target.write_text(code, encoding="utf-8")
        assert violations(import_graph(tmp_path)) == [expected]


def test_fabric_query_answers_without_dagster(tmp_path, fabric_home):
    """guards against: importing or running a query pulling Dagster or the write side into the process."""
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
    assert not [m for m in modules if _in(m, MEASUREMENT)]
    assert {m for m in modules if m.split(".")[0] == "fabric_assets"} <= {
        "fabric_assets", "fabric_assets.cli", "fabric_assets.cli.root", "fabric_assets.cli.pipeline",
        "fabric_assets.cli.measurement", "fabric_assets.cli.lifecycle", "fabric_assets.cli.server"}


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


def test_no_long_module_without_its_reason_and_no_benchmark_at_a_package_root():
    """guards against: a module growing past 500 lines unremarked (its first line must say
    ``# Over 500 lines: <why>``), and benchmarks landing beside the product instead of in the
    measurement package."""
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            lines = path.read_text(encoding="utf-8").splitlines()
            if len(lines) > 500:
                assert lines[0].startswith("# Over 500 lines: ") and len(lines[0]) > 30, path
        assert not list((ROOT / pkg).glob("bench*.py")), pkg
        assert not list((ROOT / pkg).glob("*_bench.py")), pkg
