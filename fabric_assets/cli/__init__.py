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


def _restart_in_utf8_mode() -> None:
    """Run this command again in Python's UTF-8 mode (PEP 540) when file names decode otherwise.

    Under a locale whose encoding is not UTF-8 (``LC_ALL=en_US.ISO-8859-1``) Python decodes file
    names in that encoding: the file ``日本語.txt`` was scanned as ``fs:notes/æ\x97¥æ\x9c¬èª\x9e.txt``
    (a move to a key no filter, citation or later UTF-8 run agrees with) and a name that is not
    UTF-8 was taken in rather than skipped. Source keys are UTF-8 whatever the locale. The terminal
    keeps its own encoding (``PYTHONIOENCODING``); processes the command starts (``fabric ui``'s
    Dagster) inherit both settings.
    """
    if sys.flags.utf8_mode or sys.getfilesystemencoding().lower().replace("-", "") == "utf8":
        return
    import os

    os.environ["PYTHONUTF8"] = "1"
    if sys.stdout is not None and not os.environ.get("PYTHONIOENCODING"):
        os.environ["PYTHONIOENCODING"] = sys.stdout.encoding
    sys.stdout.flush() if sys.stdout is not None else None
    os.execv(sys.executable, [sys.executable, "-X", "utf8", *sys.orig_argv[1:]])


def main() -> None:
    """Run ``fabric``: the fast path for a search a running server can answer, else the full CLI.

    A Ctrl-C before a command's own code runs (the imports, Typer building the commands: a second
    or more) is one line and exit code 130, never a ``KeyboardInterrupt`` traceback; within a
    command, the command says what the interrupt left (:mod:`fabric_query.cli_interrupt`)."""
    try:
        _main()
    except KeyboardInterrupt:
        from fabric_query.cli_interrupt import interrupted_saying

        interrupted_saying("interrupted before the command changed anything.")
    finally:
        _interrupts_at_exit_said()



def _interrupts_at_exit_said() -> None:
    """From here the command has ended: a Ctrl-C while Python exits (its atexit callbacks, two dozen
    after an ingest) was an ``Exception ignored in atexit callback`` traceback. It is one line now,
    and exit code 130; the callbacks left undone free only what the process's end frees."""
    import os
    import signal

    def said(signum: int, frame: object) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe, a closed stream: nothing more to say there
                pass
        os.write(2, b"error: interrupted as fabric exited, after the command had ended: what it printed stands.\n")
        os._exit(130)

    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not ignored (`fabric ... &` in a script)
        signal.signal(signal.SIGINT, said)


def _main() -> None:
    _restart_in_utf8_mode()
    from fabric_query.cli_fast import run as run_fast
    from fabric_query.cli_text import escape_what_streams_cannot_encode, stdout_closed

    escape_what_streams_cannot_encode(sys.stdout, sys.stderr)

    try:
        code = run_fast(sys.argv[1:])
    except BrokenPipeError:  # `fabric search … | head -1` through a server: as the full CLI ends it
        stdout_closed()
    if code is not None:
        raise SystemExit(code)
    from fabric_assets.cli.root import run

    run()


def __getattr__(name: str) -> object:
    # ``from fabric_assets.cli import app`` (the Typer app, as tests and CliRunner use it) loads the
    # full CLI on first use, so the console script's own import stays cheap (PEP 562).
    if name == "app":
        from fabric_assets.cli.root import app

        globals()["app"] = app
        return app
    raise AttributeError(f"module 'fabric_assets.cli' has no attribute {name!r}")
