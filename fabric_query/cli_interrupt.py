"""What a Ctrl-C of a ``fabric`` command leaves, said in one line with exit code 130.

Typer ends a ``KeyboardInterrupt`` raised in a command with exit 130 and no word, so a user could
not tell whether ``fabric snapshot create`` had made its snapshot or ``fabric cleanup`` had
removed anything. Each command declares what its interruption leaves with :func:`on_interrupt`;
the root app (:mod:`fabric_assets.cli.root`) wraps every command and prints
:func:`interrupted_line` on stderr. ``fabric ingest`` and ``fabric purge`` say their own (they
catch the interrupt inside). The standard library only: the read commands import it.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any, Callable, Union

#: The attribute :func:`on_interrupt` sets on a command's function (Typer's wrapper copies it).
ATTRIBUTE = "fabric_interrupted"

#: A command that only reads the home (caches it may write are its own and written whole).
READS = "nothing was changed (it only reads)"

#: A command that runs the pipeline (a Dagster run, an activation): a release is one catalog
#: transaction, so it is published whole or not at all.
PIPELINE_RUN = ("a release is published whole or not at all (`fabric status` shows which is current); the next "
                "`fabric ingest` finishes the work it left")

#: The line when a command declared nothing (every command does: tests/e2e/test_cli.py checks).
UNDECLARED = "what it had done stands; `fabric status` shows the home"

#: A Ctrl-C once the command's code had ended (returned, or said its error), as Click closes its
#: context (the root app); ``fabric_assets.cli`` writes the same words for one as Python exits,
#: without importing this module there (its handler must be in place at once).
AFTER_THE_END = "interrupted as fabric exited, after the command had ended: what it printed stands"

#: What an interruption leaves: a fixed text, or a function of the command's start (``time.time()``)
#: and its parameters (name to value, as Typer passed them) that reads the state it left.
Leaves = Union[str, Callable[[float, dict[str, Any]], str]]


def on_interrupt(leaves: Leaves) -> Callable:
    """Decorator for a command's function: ``leaves`` says what a Ctrl-C of it leaves, after
    "`fabric <command>` interrupted: " (no final full stop). Returns the function itself."""
    def mark(function: Callable) -> Callable:
        setattr(function, ATTRIBUTE, leaves)
        return function

    return mark


def interrupted_line(command: str, callback: Callable, started: float, params: dict[str, Any]) -> str:
    """The one line for ``fabric <command>`` interrupted: ``command`` is its name as typed
    (``snapshot create``), ``callback`` the function :func:`on_interrupt` marked (or a wrapper of
    it carrying its attributes), ``started`` the command's start (``time.time()``), ``params`` its
    parameters. A function that cannot read the state (the home unreadable now) gives a line that
    points at ``fabric status`` rather than a traceback."""
    leaves = getattr(callback, ATTRIBUTE, None)
    if leaves is None:
        what = UNDECLARED
    elif callable(leaves):
        try:
            what = leaves(started, params)
        except Exception:  # noqa: BLE001 - the state cannot be read now: the user is told where to look
            what = "`fabric status` shows what it left"
    else:
        what = leaves
    return f"`fabric {command}` interrupted: {what}."


def interrupted_again_line(command: str, callback: Callable) -> str:
    """The one line for a second Ctrl-C of ``fabric <command>`` that came while the first one's line
    was being made (:func:`interrupted_line` may read the home): the command's declared text when it
    is fixed, else ``fabric status`` as where to look; nothing is read (a read was what the second
    Ctrl-C cut short). Typer ended it with exit 130 and no line."""
    leaves = getattr(callback, ATTRIBUTE, None)
    what = leaves if isinstance(leaves, str) else "`fabric status` shows what it left"
    return f"`fabric {command}` interrupted again before it said what it left: {what}."


def interrupted_saying(line: str) -> None:
    """End with exit code 130 after ``error: line`` on stderr, what was written before it flushed
    first. A further Ctrl-C while it is written (stderr blocked: a paged `fabric … 2>&1 | less`)
    ends the process at once, 130 again: it was a KeyboardInterrupt traceback raised while the
    first was handled."""
    signal.signal(signal.SIGINT, lambda signum, frame: os._exit(130))
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, RuntimeError):  # closed, a closed pipe: nothing more goes there
            pass
    try:
        os.write(2, f"error: {line}\n".encode(sys.stderr.encoding if sys.stderr else "utf-8", "backslashreplace"))
    except OSError:
        pass
    raise SystemExit(130) from None
