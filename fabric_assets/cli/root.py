"""The ``fabric`` Typer app: the full command line behind :func:`fabric_assets.cli.main`.

It mounts three sets of commands at the top level (``fabric search``, not ``fabric read search``):

* the read commands, :data:`fabric_query.cli.read_app` (search, resolve, status,
  lexical-health): ``fabric_query`` and ``fabric_resources`` only;
* the pipeline commands, :data:`fabric_assets.cli.pipeline.pipeline_app` (ingest, quickstart,
  ui, lexical-repair): the write side and Dagster;
* the lifecycle commands, :data:`fabric_assets.cli.lifecycle.lifecycle_app` (purge):
  :mod:`fabric_assets.lifecycle`;
* the measurement commands, :data:`fabric_assets.cli.measurement.measurement_app` (eval,
  eval-tune, ``bench ...``): :mod:`fabric_assets.measurement`;
* the server commands, :data:`fabric_assets.cli.server.server_app` (serve, mcp): the read side's
  :mod:`fabric_query.server` with the write side's admin backend.

Each command imports its side inside its body, so ``fabric search`` loads neither Dagster nor
``fabric_assets.measurement`` (tests/test_layering.py checks it in a fresh process).
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import time

import typer
from typer.core import TyperGroup

from fabric_assets.cli.lifecycle import lifecycle_app
from fabric_assets.cli.measurement import measurement_app
from fabric_assets.cli.pipeline import pipeline_app
from fabric_assets.cli.server import server_app
from fabric_query.cli import err, read_app
from fabric_query.cli_interrupt import AFTER_THE_END, interrupted_again_line, interrupted_line, interrupted_saying
from fabric_query.cli_text import error_line, stdout_closed, uses_colour


#: The command this process runs, once its own code runs (:func:`_begin`): its ``name``, its
#: ``callback`` and the ``moment``: ``running``; ``saying`` (the line of a Ctrl-C being made);
#: ``said``; ``ended`` (returned or raised). Empty before: a Ctrl-C Typer caught then changed nothing.
_command: dict = {}


class _Commands(TyperGroup):
    """The root group: a command whose reader closed stdout (``fabric status | head -1``) ends as
    :func:`~fabric_query.cli_text.stdout_closed` says (exit 141), not as Click ends it (exit 1,
    ``resolve``'s "stale"). It is caught here, inside Click's own handler. Its commands' summaries
    are one paragraph each (:func:`_summaries`). A Ctrl-C before a command's code runs is one line."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _summaries(self)
        _marked(self, "")

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            stdout_closed()

    def main(self, *args, **kwargs):
        # Help (`fabric --help | true`, `fabric search --help | head -1`) is printed while Click
        # parses the arguments, before ``invoke``: rich's console and Click end a broken pipe
        # there with exit 1, raised while handling the BrokenPipeError (its ``__context__``).
        _command.clear()  # one command a process; tests run many
        try:
            return super().main(*args, **kwargs)
        except SystemExit as exc:
            if exc.code == 1 and isinstance(exc.__context__, BrokenPipeError):
                stdout_closed()
            if exc.code == 130 and isinstance(getattr(exc.__context__, "__cause__", None), KeyboardInterrupt):
                # Typer ends a Ctrl-C it catches (`raise Exit(130) from` it) with no word: one in its
                # parsing of the arguments (it imports pydantic there, a second) came before any
                # command's code; a second one while the first's line was made (it may read the
                # home), or one as Click closed a command that had ended, came after (exit 130 and
                # no line, stop 55 left it open). Once the command's line was said, nothing more.
                moment = _command.get("moment")
                line = ("interrupted before the command changed anything." if moment is None else
                        f"{AFTER_THE_END}." if moment == "ended" else
                        None if moment == "said" else
                        interrupted_again_line(_command["name"], _command["callback"]))
                if line is not None:
                    err.print(f"error: {line}", markup=False)
            raise


def _summaries(group: TyperGroup) -> None:
    """Give each command of ``group`` (and of its groups) the first paragraph of its help, on one
    line, as the summary a group's help lists: Typer's rich help keeps a docstring's line breaks
    there, which cut the summaries of `fabric --help` mid-sentence (trial 19c)."""
    for command in group.commands.values():
        if command.short_help is None and command.help:
            command.short_help = " ".join(inspect.cleandoc(command.help).split("\n\n")[0].split())
        if isinstance(command, TyperGroup):  # snapshot, parse, bench
            _summaries(command)


def _marked(group: TyperGroup, prefix: str) -> None:
    """Wrap each command's callback of ``group`` (and of its groups; ``prefix``: their names so
    far, as typed) in :func:`_begin`."""
    for name, command in group.commands.items():
        if isinstance(command, TyperGroup):
            _marked(command, f"{prefix}{name} ")
        elif command.callback is not None:
            command.callback = functools.partial(_begin, f"{prefix}{name}", command.callback)


def _begin(name: str, callback, *args, **kwargs):
    """Run a command's ``callback``, :data:`_command` set first. A Ctrl-C in it is the one line the
    command declared (:mod:`fabric_query.cli_interrupt`) and exit 130: Typer ended it with 130 and
    no word of what the command had done."""
    _command.update(name=name, callback=callback, moment="running")
    started = time.time()
    try:
        result = callback(*args, **kwargs)
    except KeyboardInterrupt:
        _command["moment"] = "saying"
        line = error_line(interrupted_line(name, callback, started, kwargs), colour=uses_colour(sys.stderr))
        sys.stderr.write(line)
        _command["moment"] = "said"
        raise typer.Exit(130) from None
    except BaseException:
        _command["moment"] = "ended"
        raise
    _command["moment"] = "ended"
    return result


app = typer.Typer(cls=_Commands, add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Fabric: retrieval with verifiable evidence.")
app.add_typer(pipeline_app)
app.add_typer(read_app)
app.add_typer(measurement_app)
app.add_typer(lifecycle_app)
app.add_typer(server_app)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"fabric {version('fabric')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Fabric: retrieval with verifiable evidence."""


def run() -> None:
    """Run the full ``fabric`` CLI; an invalid or unreadable home configuration, a home path that
    cannot hold a home (a file, or under one), a catalog of a schema version this Fabric cannot
    open (newer; older, read-only; a failed migration), a damaged catalog (SQLite file, or a release row), a
    PostgreSQL catalog that cannot be reached or opened (server down, no such database or role, a
    refused password), tables on an object store that cannot be used (bucket missing, credentials
    refused, unreachable), a Dagster instance on PostgreSQL that cannot be used, a damaged Dagster
    SQLite database, or a SQLite database the storage fails (a full disk: named as such, never as
    damage), or a home whose snapshots folder is not a folder (a file, a broken or looping link), is
    one line on stderr and exit code 2 (Dagster's own retry warnings may come first)."""
    try:
        app()
    except Exception as exc:
        line = None
        try:
            line = _one_line(exc)
            if line is None:
                raise
            err.print(f"error: {line}", markup=False)
        except KeyboardInterrupt:
            # The command had run to this error (and may have changed the home before it): a Ctrl-C
            # while it was said (stderr blocked: a paused pager) came after it. It said "interrupted
            # before the command changed anything", the error itself lost with the write it cut (trial 24d).
            interrupted_saying(f"{line} (interrupted as this was said; the command had ended with it)" if line
                               else f"{AFTER_THE_END}.")
        raise SystemExit(2) from None


def _one_line(exc: Exception) -> str | None:
    """The line (without ``error: ``) that says a command's error ``exc``, when it is one
    :func:`run` names; else None."""
    # Raised lazily, when a command first reads the home's config or opens its catalog, so the
    # modules are loaded by then; importing them here up front cost every command ~200 ms of
    # pydantic model building.
    config = sys.modules.get("fabric_resources.config")
    records = sys.modules.get("fabric_resources.catalog.records")
    home = sys.modules.get("fabric_resources.home_location")  # HomeUnusableError's, loaded by every command
    tables = sys.modules.get("fabric_resources.object_store")
    ocr = sys.modules.get("fabric_resources.parsing.pdf.ocr")
    snapshots = sys.modules.get("fabric_assets.lifecycle.snapshots")
    known = tuple(t for t in (config and config.ConfigError, records and records.CatalogVersionError,
                              ocr and ocr.OcrProbeFailed, snapshots and snapshots.SnapshotError,
                              tables and tables.TableStoreUnavailableError,
                              records and records.CatalogMigrationError, records and records.CatalogDamagedError,
                              records and records.CatalogUnavailableError, home and home.HomeUnusableError) if t)
    sqlite3 = sys.modules.get("sqlite3")
    alchemy = sys.modules.get("sqlalchemy.exc")
    database = exc.orig if alchemy is not None and isinstance(exc, alchemy.DatabaseError) else exc
    if sqlite3 is not None and isinstance(database, sqlite3.DatabaseError):
        # A full disk or a failing one is not a damaged file (the catalog's or Dagster's).
        from fabric_resources.storage_errors import sqlite_storage_fault

        fault = sqlite_storage_fault(database, os.environ.get("FABRIC_HOME") or ".")
        if fault is not None:
            return fault
    if sqlite3 is not None and isinstance(exc, sqlite3.DatabaseError):
        # A truncated or overwritten catalog.sqlite3 ("database disk image is malformed", "file is
        # not a database"): every command read it and printed a traceback.
        return (f"the home's catalog cannot be read ({type(exc).__name__}: {exc}): it is damaged or not a "
                "Fabric catalog; restore the home from a copy or a snapshot's catalog.sqlite3")
    if (sqlite3 is not None and alchemy is not None and isinstance(exc, alchemy.DatabaseError)
            and type(exc.orig) is sqlite3.DatabaseError):
        # The same damage in Dagster's SQLite storage (runs.db, the event log): a SQLAlchemy
        # traceback from ingest, cleanup and audit, the run-history step of every activation.
        return (f"Dagster's storage under the home's dagster/ folder cannot be read ({exc.orig}): a "
                "database there is damaged or not a database; restore it from a copy, or move it aside "
                "(the history of Dagster's runs, and the lineage `fabric audit` reads from it, go with it)")
    pg = sys.modules.get("dagster_postgres.utils")
    if pg is not None and isinstance(exc, pg.DagsterPostgresException):
        # The Dagster instance's PostgreSQL (storage.dagster) refused or did not answer after
        # dagster-postgres's retries: its own message ("too many retries") hides why.
        cause = getattr(exc.__cause__, "orig", None) or exc.__cause__ or exc
        why = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
        return (f"the Dagster instance's PostgreSQL database cannot be used ({why}); check "
                "storage.dagster.url (else storage.catalog.url) and the server")
    return str(exc) if known and isinstance(exc, known) else None
