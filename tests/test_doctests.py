"""The ``>>>`` examples in the packages' docstrings run here (issue 14, item 6): an example that no
longer matches its code fails CI. Every module of the three packages whose source holds ``>>>`` is
collected, so a new example runs without being registered."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("fabric_assets", "fabric_resources", "fabric_query")


def _modules_with_examples() -> list[str]:
    names = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if ">>>" in path.read_text(encoding="utf-8"):
                parts = list(path.relative_to(ROOT).with_suffix("").parts)
                names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = _modules_with_examples()


def test_examples_are_found():
    """guards against: a collector that finds nothing, so no example runs and this file passes empty."""
    assert len(MODULES) >= 15 and "fabric_query.fusion" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name):
    """guards against: a docstring example that is wrong or that no longer runs."""
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=True)
    assert result.attempted > 0, f"{name}: '>>>' in the source but no example collected"
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed (output above)"
