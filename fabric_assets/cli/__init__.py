"""The ``fabric`` command line: the console script's root (``[project.scripts] fabric``).

:func:`main` first offers the arguments to :func:`fabric_query.cli_fast.run`, which answers a
plain ``fabric search`` through a running ``fabric serve`` of the home with the standard library
only (a cold process in tens of milliseconds instead of half a second of imports). Everything
else, and every case that path is unsure of, runs the full Typer app,
:data:`fabric_assets.cli.root.app` (also importable as ``fabric_assets.cli.app``). This module
imports nothing heavy at load time.
"""

from __future__ import annotations

import sys
from typing import Any


def main() -> None:
    """Run ``fabric``: the fast path for a search a running server can answer, else the full CLI."""
    from fabric_query.cli_fast import run as run_fast
    from fabric_query.cli_text import escape_what_streams_cannot_encode

    escape_what_streams_cannot_encode(sys.stdout, sys.stderr)

    code = run_fast(sys.argv[1:])
    if code is not None:
        raise SystemExit(code)
    from fabric_assets.cli.root import run

    run()


def __getattr__(name: str) -> Any:
    # ``from fabric_assets.cli import app`` (the Typer app, as tests and CliRunner use it) loads the
    # full CLI on first use, so the console script's own import stays cheap (PEP 562).
    if name == "app":
        from fabric_assets.cli.root import app

        globals()["app"] = app
        return app
    raise AttributeError(f"module 'fabric_assets.cli' has no attribute {name!r}")
