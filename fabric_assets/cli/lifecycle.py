# Over 500 lines: every lifecycle command (purge, cleanup, snapshots, parse actions, repair, audit) with its typed options and what it prints, one Typer group.
"""The ``fabric`` lifecycle commands: purge (and, as they land, retention, snapshots, operator
actions). Each calls the plain function in :mod:`fabric_assets.lifecycle` that its Dagster job
calls too, and imports it inside its body."""

from __future__ import annotations

import json
import time
from typing import Annotated, Optional

import typer

from fabric_query.cli import HomeOption, console, err, fail, json_argument, set_home
from fabric_query.cli_interrupt import PIPELINE_RUN, READS, on_interrupt
from fabric_query.cli_text import one_line, shown_key, typed
from fabric_resources.home_location import no_home_message

lifecycle_app = typer.Typer(help="Lifecycle commands: purge, cleanup, snapshot, parse, rebuild-projections, repair.")


def _as_printed(typed: list[str], keys: list[str]) -> list[str]:
    r"""Each typed key, or the one source key that ``fabric`` prints as it (:func:`one_line`).

    A file named with a control character (``ok[5m.txt``, a newline) is printed with it
    escaped, ``fs:n/ok\x1b[5m.txt``, and a key copied from that output named no source. A key
    that is a source's own, or that several sources print as, is left as typed.

    >>> _as_printed(["fs:n/ok\\x1b[5m.txt", "fs:n/a.txt"], ["fs:n/ok\x1b[5m.txt", "fs:n/a.txt"])
    ['fs:n/ok\x1b[5m.txt', 'fs:n/a.txt']
    """
    stored, printed = set(keys), {}
    for k in keys:
        for form in {one_line(k), shown_key(k)}:  # as status printed it, or before names were quoted
            printed.setdefault(form, []).append(k)
    return [k if k in stored or len(printed.get(k, ())) != 1 else printed[k][0] for k in typed]


@lifecycle_app.command()
def purge(
    source: Annotated[Optional[list[str]], typer.Option("--source", help="A deleted source's key (repeatable), "
                                                         "e.g. fs:notes/old.txt.")] = None,
    root: Annotated[Optional[str], typer.Option("--root", help="A root's label: every source under it; "
                                                 "the root is unregistered.")] = None,
    before: Annotated[Optional[str], typer.Option("--before", help="YYYY-MM-DD: every deleted source last "
                                                   "seen before it.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would go; remove nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    home: HomeOption = None,
) -> None:
    """Remove sources for good: raw bytes, rows in every table and their old versions, text in
    every index generation, memo entries, catalog rows (a tombstone with hashes only remains).

    Exit codes: 0 purged (or nothing matched); 2 refused (a source still present, unknown, a
    snapshot pins old versions, a run in progress), nothing removed (a --dry-run that a snapshot
    or a run refuses lists what the purge would remove, then why it is refused); 130 interrupted (one line says
    whether the purge removed nothing, stopped part-way or had finished).
    """
    path = set_home(home)
    started, finished = time.time(), []
    try:
        _purge(path, source, root, before, dry_run, as_json, finished)
    except KeyboardInterrupt:
        # Anywhere in the command (its imports take seconds; the report comes after the purge):
        # Typer ended it with 130 and no word of what the purge had done.
        fail(_interrupted_purge(path, started, bool(finished)), code=130)


def _interrupted_purge(path, started: float, finished: bool) -> str:
    """What a purge interrupted by Ctrl-C leaves, in one line, from the home's tombstones.
    ``started``: the command's start (``time.time()``); ``finished``: whether the purge (or the
    dry run) had returned (its report was being printed)."""
    from fabric_resources.home import FabricHome
    from fabric_resources.tombstones import tombstones

    try:
        reader = FabricHome(path, read_only=True)
        tombs = tombstones(reader.catalog) if reader.exists() else []
    except Exception:  # noqa: BLE001 - a home that cannot be read now: status says why
        return "interrupted; `fabric status` says whether a purge was left unfinished."
    unfinished = [str(t.tombstone_id) for t in tombs if t.completed_at is None]
    if unfinished:
        return (f"interrupted: purge {', '.join(unfinished)} stopped part-way, so some of what it removes may still "
                "be in the home; run the same `fabric purge` again (any purge finishes it).")
    done = [t.tombstone_id for t in tombs if t.completed_at >= started]
    if finished or done:
        return (f"interrupted after the purge had ended{f' (purge {done[-1]}: what it removed is gone)' if done else ''}"
                "; its report was cut short: `fabric status` shows the home.")
    return "interrupted before the purge removed anything: nothing was removed."


def _purge(path, source: list[str] | None, root: str | None, before: str | None, dry_run: bool, as_json: bool,
           finished: list) -> None:
    """:func:`purge`'s work for the home at ``path``; ``finished`` gets an item once the purge (or
    the dry run) has returned."""
    from fabric_assets.lifecycle.purge import (PurgeRefused, PurgeSelector, check_purge, parse_before, plan_purge,
                                               purge as run)
    from fabric_resources.home import FabricHome

    reader = FabricHome(path, read_only=True)
    if not reader.exists():  # its catalog, wherever storage.catalog puts it
        fail(no_home_message(path))
    if source:  # as the terminal wrote them (a Latin-1 one), then as `fabric` prints keys
        source = _as_printed([typed(k) for k in source], [s.source_key for s in reader.catalog.sources()])
    root = typed(root) if root else root
    try:
        selector = PurgeSelector(tuple(source or ()), root, parse_before(before) if before else None)
    except ValueError as exc:
        fail(f"--before: {exc}")
    fabric_home = FabricHome(path)
    refused = None
    try:
        if dry_run:
            plan = plan_purge(fabric_home.catalog, selector)
            out = {"dry_run": True, "sources": list(plan.source_keys), "parse_ids": len(plan.parse_ids),
                   "source_hashes": len(plan.source_hashes), "shared_kept": len(plan.shared_kept)}
            try:
                check_purge(fabric_home, plan)  # refused as the purge would be: not "0, it would go"
            except PurgeRefused as exc:
                # What it would remove is shown all the same: whether to delete the snapshot that
                # refuses it is decided on that. The exit code stays the purge's (2).
                refused = out["refused"] = str(exc)
            finished.append(plan)
        else:
            report = run(fabric_home, selector)
            finished.append(report)
            plan = report.plan
            out = {"sources": list(plan.source_keys), "parse_ids": len(plan.parse_ids),
                   "artifacts_removed": report.artifacts_removed, "rows_removed": report.rows_removed,
                   "bytes_removed": report.bytes_removed, "memo_entries_removed": report.memo_entries_removed,
                   "releases_retired": report.releases_retired, "release_id": report.release_id,
                   "tombstone_id": report.tombstone_id, "shared_kept": len(plan.shared_kept),
                   "resumed": report.resumed}
    except PurgeRefused as exc:
        fail(f"purge refused: {exc}")
    except (OSError, ValueError) as exc:  # Lance / Arrow on a damaged table file (was a traceback)
        from fabric_resources.parsing.document import machine_fault_in

        if (fault := machine_fault_in(exc)) is not None:  # a full disk damages nothing: no restore to advise
            what = (f"{fault.strerror or fault} (errno {fault.errno})" if isinstance(fault, OSError)
                    else f"SQLite: {fault}")
            fail(f"purge stopped part-way: {what}; nothing is known to be damaged: free the resource and run "
                 "the same `fabric purge` again, it finishes the purge")
        fail(f"purge stopped part-way: a table or file of the home could not be read or rewritten "
             f"({type(exc).__name__}: {one_line(str(exc))[:300]}); `fabric status` names the unfinished purge: "
             "repair the home (`fabric snapshot restore`, or restore the file), then run the purge again")
    if as_json:
        console.print_json(json.dumps(out))
    else:
        _report(out)
    if refused is not None:
        fail(f"the real purge would be refused: {refused}")


def _report(out: dict) -> None:
    """``out`` (what ``--json`` prints) as ``name: value`` lines in words (trial 19c; they were Python
    reprs: ``{'chunks': 3}``, ``['fs:…']``, ``None``): no value, or an empty list or mapping, is
    ``none``; a list is comma-joined, each item as `fabric` prints keys; a mapping ``key value``
    pairs; a flag ``yes`` or ``no``; each on one line, however long."""

    def words(v) -> str:
        if v is None or v == [] or v == {} or v == ():
            return "none"
        if isinstance(v, bool):
            return "yes" if v else "no"
        if isinstance(v, dict):
            return ", ".join(f"{one_line(str(k))} {words(x)}" for k, x in v.items())
        if isinstance(v, (list, tuple, set)):
            return ", ".join(words(x) for x in v)
        return one_line(str(v))

    for k, v in out.items():  # one line each, unwrapped, for grep and cut
        console.print(f"{k}: {words(v)}", markup=False, soft_wrap=True)


@lifecycle_app.command()
@on_interrupt("what it had removed is gone and the rest waits for the next `fabric cleanup` (it removes only "
               "what no retained release or snapshot pins)")
def cleanup(
    as_json: Annotated[bool, typer.Option("--json")] = False,
    home: HomeOption = None,
) -> None:
    """Apply the retention policy (config section `retention`) now: old releases, superseded,
    failed and deleted parses past their limits. Never removes what a retained release or a
    snapshot pins."""
    from fabric_assets.lifecycle.retention import cleanup as run
    from fabric_resources.home import FabricHome

    path = set_home(home)
    if not FabricHome(path, read_only=True).exists():  # its catalog, wherever storage.catalog puts it
        fail(no_home_message(path))
    report = run(FabricHome(path))
    out = {"parses_removed": {k: len(v) for k, v in report.removed.items()}, "waiting": report.waiting,
           "releases_removed": report.releases_removed, "generations_removed": report.generations_removed,
           "artifacts_removed": report.artifacts_removed, "bytes_removed": report.bytes_removed,
           "memo_entries_removed": report.memo_entries_removed, "republished_release": report.republished, "dagster_runs_removed": len(report.runs_removed)}
    if as_json:
        console.print_json(json.dumps(out))
        return
    _report(out)


snapshot_app = typer.Typer(no_args_is_help=True, help="Snapshots: create, verify, restore, list, delete.")
lifecycle_app.add_typer(snapshot_app, name="snapshot")


def _opened(home, *, writes: bool = True):
    """The home at ``--home`` (exit 2 when there is none). A command that only reads it
    (``writes=False``) gets it read-only where it cannot be written; a writer is refused there with
    :class:`~fabric_resources.home.HomeReadOnlyError` (one line, exit 2)."""
    from fabric_resources.home import FabricHome, HomeReadOnlyError

    path = set_home(home)
    reader = FabricHome(path, read_only=True)
    if not reader.exists():  # its catalog, wherever storage.catalog puts it
        fail(no_home_message(path))
    try:
        return FabricHome(path)
    except HomeReadOnlyError:
        if writes:
            raise
        return reader


def _interrupted_snapshot(started: float, params: dict) -> str:
    """What ``fabric snapshot create`` interrupted leaves (:mod:`fabric_query.cli_interrupt`)."""
    from fabric_assets.lifecycle.snapshots import half_made_snapshots, list_snapshots
    from fabric_resources.home import FabricHome

    home = FabricHome(set_home(params.get("home")), read_only=True)
    made = [s.snapshot_id for s in list_snapshots(home) if s.created_at >= started]
    if made:
        return f"snapshot {made[-1]} had been made: it is complete (`fabric snapshot list`)"
    part = (" (the part made is listed as INCOMPLETE until the next `fabric snapshot create` or `delete` removes it)"
            if half_made_snapshots(home) else "")
    return f"the snapshot was not made{part}; the home itself is unchanged"


def _interrupted_restore(started: float, params: dict) -> str:
    """What ``fabric snapshot restore`` interrupted leaves (:mod:`fabric_query.cli_interrupt`)."""
    from fabric_assets.lifecycle.snapshots import RESTORE_EVENT
    from fabric_resources.home import FabricHome

    sid, into = params.get("snapshot_id"), params.get("into")
    if into:  # built beside the folder and renamed into place last; an interrupt removes the stage
        from pathlib import Path

        from fabric_resources.schema import HomeLayout

        try:  # renamed into place already (a catalog written since the start: not one refused as there)
            done = HomeLayout(Path(into)).catalog_file.stat().st_mtime >= started
        except OSError:
            done = False
        if done:
            return f"snapshot {sid} had been restored into {into}: it is complete; the home is unchanged"
        return f"nothing was restored into {into} (a restore into a folder is all or nothing); the home is unchanged"
    home = FabricHome(set_home(params.get("home")), read_only=True)
    if home.layout.restore_pending.exists():
        return (f"the in-place restore stopped part-way: run the same `fabric snapshot restore {sid}` again to "
                "finish it")
    if any(e["at"] >= started for e in home.catalog.events(RESTORE_EVENT)):
        return f"the home had been restored to snapshot {sid}: the restore is complete"
    return "the restore had not changed the home yet: it is as it was"


@snapshot_app.command("create")
@on_interrupt(_interrupted_snapshot)
def snapshot_create(note: Annotated[str, typer.Option("--note")] = "", home: HomeOption = None) -> None:
    """Snapshot the current release: catalog copy, Lance tags, hard links of the index and artifacts."""
    from fabric_assets.lifecycle.snapshots import SnapshotError, create

    try:
        info = create(_opened(home), note)
    except SnapshotError as exc:
        fail(str(exc))
    console.print(f"snapshot {info.snapshot_id} of release {info.release_id} at {info.path}", markup=False)


@snapshot_app.command("verify")
@on_interrupt(READS)
def snapshot_verify(snapshot_id: int, deep: Annotated[bool, typer.Option("--deep", help="Also rebuild the "
                    "lexical index and recompute vector digests from the pinned rows.")] = False,
                    home: HomeOption = None) -> None:
    """Check every hash (and, with --deep, the index and vector digests). Exit 1 when damaged (its manifest
    too), 2 when there is no such snapshot."""
    from fabric_assets.lifecycle.snapshots import SnapshotDamagedError, SnapshotError, verify

    try:
        report = verify(_opened(home, writes=False), snapshot_id, deep=deep)
    except SnapshotError as exc:
        fail(str(exc), 1 if isinstance(exc, SnapshotDamagedError) else 2)
    for problem in report.problems:
        console.print(f"damaged: {problem}", markup=False)
    for note in report.notes:
        console.print(f"not checked: {note}", markup=False)
    console.print(f"snapshot {snapshot_id}: {'ok' if report.ok else 'DAMAGED'} ({report.files_checked} files"
                  f"{', deep' if deep else ''})", markup=False)
    if not report.ok:
        raise typer.Exit(1)


@snapshot_app.command("restore")
@on_interrupt(_interrupted_restore)
def snapshot_restore(snapshot_id: int, into: Annotated[Optional[str], typer.Option(
                     "--into", help="A new home to restore into (default: this home).")] = None,
                     home: HomeOption = None) -> None:
    """Put the snapshot back (no parse, no model call, no Dagster run)."""
    from pathlib import Path

    from fabric_assets.lifecycle.snapshots import RESTORE_EVENT, SnapshotError, restore

    if into == "":
        # `--into "$DEST"` with DEST unset: read as no --into, it restored this home in place and
        # forgot everything ingested since the snapshot.
        fail("--into names no folder (an empty argument: an unset shell variable?); give the new home's folder, "
             "or leave --into out to restore this home in place")
    try:
        restored = restore(_opened(home), snapshot_id, Path(into) if into is not None else None)
    except SnapshotError as exc:
        fail(str(exc))
    console.print(f"restored snapshot {snapshot_id} into {restored.root}", markup=False)
    if into is None:
        last = json.loads(restored.catalog.events(RESTORE_EVENT)[-1]["detail"])
        if last["sources_forgotten"] or last["parses_forgotten"]:
            console.print(f"forgot what came after it: {last['sources_forgotten']} source(s), "
                          f"{last['parses_forgotten']} parse(s), {last['artifacts_removed']} stored file(s); files "
                          "still in their folders come back with the next ingest", markup=False)


@snapshot_app.command("list")
@on_interrupt(READS)
def snapshot_list(home: HomeOption = None) -> None:
    """The home's snapshots, one per line: number, release, creation time (UTC, ISO 8601) and note
    (and those whose manifest is unreadable, as damaged)."""
    from datetime import datetime, timezone

    from fabric_assets.lifecycle.snapshots import listing

    listed, damaged, half_made = listing(_opened(home, writes=False))
    if not (listed or damaged or half_made):  # it printed nothing (trial 20g); stdout stays one line a snapshot
        err.print("no snapshots (`fabric snapshot create` makes one)", markup=False)
    for s in listed:
        at = datetime.fromtimestamp(s.created_at, timezone.utc).isoformat(timespec="seconds")
        # A note can come from `POST /v1/admin/snapshot`: no terminal escapes, one line.
        console.print(f"{s.snapshot_id}\trelease {s.release_id}\t{at}\t{one_line(s.note or '')}", markup=False)
    for sid in damaged:
        console.print(f"{sid}\tDAMAGED: manifest missing or unreadable (`fabric snapshot delete {sid}`)", markup=False)
    for sid in half_made:
        console.print(f"{sid}\tINCOMPLETE: stopped while it was made; the next `fabric snapshot create` or "
                      "`delete`, or `fabric purge`, removes it", markup=False)


def _interrupted_delete(started: float, params: dict) -> str:
    """What ``fabric snapshot delete`` interrupted leaves (:mod:`fabric_query.cli_interrupt`)."""
    from fabric_assets.lifecycle.snapshots import snapshot_present
    from fabric_resources.home import FabricHome

    sid = params.get("snapshot_id")
    # As `delete` sees it (a second delete of a gone snapshot says "no snapshot", which the line
    # must not send the user to).
    if not snapshot_present(FabricHome(set_home(params.get("home")), read_only=True), sid):
        return f"snapshot {sid} had been deleted: it is gone"
    return ("the snapshot may be partly deleted: run the same `fabric snapshot delete` again (the home's own files "
            "are not touched)")


@snapshot_app.command("delete")
@on_interrupt(_interrupted_delete)
def snapshot_delete(snapshot_id: int, home: HomeOption = None) -> None:
    """Remove a snapshot (its tags and links; the home's own files stay)."""
    from fabric_assets.lifecycle.snapshots import SnapshotError, delete

    try:
        delete(_opened(home), snapshot_id)
    except SnapshotError as exc:
        fail(str(exc))
    console.print(f"deleted snapshot {snapshot_id}", markup=False)


parse_app = typer.Typer(no_args_is_help=True, help="Operator actions on parses: accept, discard, retry, reparse.")
lifecycle_app.add_typer(parse_app, name="parse")


def _action(action, *args) -> None:
    from fabric_assets.lifecycle.operator import OperatorError

    try:
        result = action(*args)
    except OperatorError as exc:
        fail(str(exc))
    console.print(f"{len(result.parse_ids)} parse(s) now {result.status}"
                  + (f"; release {result.release_id} (published: {result.published})" if result.release_id else ""),
                  markup=False)
    return result


def _run_marked(home, parse_ids: list[str]) -> None:
    """Run what the action on ``parse_ids`` marked; the failures named are theirs (a source that
    failed before, untouched by the action, is counted, not listed as if this run failed it)."""
    from fabric_assets.lifecycle.rebuild import run_marked

    summary = run_marked(home)
    if summary is not None:
        acted = set(parse_ids)
        ours = [f for f in summary.failed if f.parse_id in acted]
        others = len(summary.failed) - len(ours)
        console.print(f"ran {len(summary.scan.parse_ids_to_run)} parse(s); release "
                      f"{summary.activation.get('release_id')}; failed: "
                      f"{', '.join(f'{shown_key(f.source_key)} ({one_line(f.reason)})' for f in ours) or 'none'}"
                      + (f" ({others} other source(s) failed earlier: see `fabric status`)" if others else ""),
                      markup=False)
        if summary.failed_runs:
            raise typer.Exit(3)


@parse_app.command("accept")
@on_interrupt(PIPELINE_RUN)
def parse_accept(parse_id: str, home: HomeOption = None) -> None:
    """Accept a held parse as it is: it becomes its sources' active parse (an activation runs)."""
    from fabric_assets.lifecycle.operator import accept_held

    _action(accept_held, _opened(home), parse_id)


@parse_app.command("discard")
@on_interrupt(PIPELINE_RUN)
def parse_discard(parse_id: str, home: HomeOption = None) -> None:
    """Discard a held parse: failed with reason `discarded`; its sources keep their previous parse."""
    from fabric_assets.lifecycle.operator import discard_held

    _action(discard_held, _opened(home), parse_id)


@parse_app.command("retry")
@on_interrupt(PIPELINE_RUN)
def parse_retry(parse_ids: Annotated[Optional[list[str]], typer.Argument(help="Failed parse IDs (default: all "
                "that a present source waits for).")] = None, home: HomeOption = None) -> None:
    """Clear failures: failed parses go back to pending and are parsed again now."""
    from fabric_assets.lifecycle.operator import retry_failed

    fabric_home = _opened(home)
    result = _action(retry_failed, fabric_home, parse_ids or None)
    _run_marked(fabric_home, result.parse_ids)


@parse_app.command("reparse")
@on_interrupt(PIPELINE_RUN)
def parse_reparse(source_key: str, home: HomeOption = None) -> None:
    """Force a re-parse of a source's current bytes, now (the same parse ID unless the parser or its settings
    changed since: then the current parser's)."""
    from fabric_assets.lifecycle.operator import force_reparse

    fabric_home = _opened(home)
    result = _action(force_reparse, fabric_home, source_key)
    _run_marked(fabric_home, result.parse_ids)


@lifecycle_app.command("rebuild-projections")
@on_interrupt(PIPELINE_RUN)
def rebuild_projections_cmd(home: HomeOption = None) -> None:
    """Rebuild chunks and every projection made from them for every active parse, from the stored
    units (no re-parse), then activate. From the UI: a backfill of `rechunk_job`."""
    from fabric_assets.lifecycle.rebuild import rebuild_projections

    rebuilt, failed = rebuild_projections(_opened(home))
    console.print(f"rebuilt {len(rebuilt)} parse(s); failed runs: {', '.join(failed) or 'none'}", markup=False)
    if failed:
        raise typer.Exit(3)


@lifecycle_app.command("repair")
@on_interrupt("run `fabric repair` again: it finds what is still damaged (a release is published whole or "
               "not at all; `fabric status` shows which is current)")
def repair_cmd(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what is damaged and what would be "
                                           "re-derived; change nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    home: HomeOption = None,
) -> None:
    """Repair table data files that are lost, emptied or cut short, without a snapshot: drop the
    damaged fragments, re-derive the rows they held from the stored bytes (re-parse), units
    (re-chunk) or windows (annotate), then publish a release over the repaired tables. Rows deleted
    or added outside Fabric (every file readable) are re-derived the same way.

    Exit codes: 0 repaired (or nothing damaged); 1 the release left still cannot be read in full,
    or a source failed its re-derivation (see `fabric status`); 2 refused (a table's manifest
    cannot be read, the object store cannot be used, the stored bytes a re-parse needs are lost and
    no unchanged file on disk holds them), nothing changed; 3 a pipeline run failed (a fault of Fabric; the next `fabric ingest` resumes
    it).
    """
    from fabric_assets.lifecycle.repair import RepairRefused, repair
    from fabric_query.cli import print_status
    from fabric_resources.object_store import TableStoreUnavailableError

    fabric_home = _opened(home)
    try:
        report = repair(fabric_home, dry_run=dry_run)
    except (RepairRefused, TableStoreUnavailableError) as exc:
        fail(f"{exc}; nothing was changed")
    tables = [{"table": d.table, "fragments": {str(k): v for k, v in sorted(d.fragments.items())},
               "indices": d.indices, "parse_ids": d.parse_ids, "rederivation": d.rederivation,
               "rows_changed": ({"missing": d.changed.missing, "extra": d.changed.extra} if d.changed else None),
               "altered": d.altered, "unserved": d.unserved}
              for d in report.plan.tables]
    restored = [r.source_key for r in report.plan.restore]
    if as_json and dry_run:
        console.print_json(json.dumps({"dry_run": True, "tables": tables, "restored": restored,
                                       "resumed": report.resumed}))
        return
    # With --json, standard output is the one JSON document below: the lines a person reads go only
    # to a terminal (printed before it, they made the output unparseable).
    say = (lambda line: None) if as_json else (lambda line: console.print(line, markup=False))
    for d in report.plan.tables:
        frags = ", ".join(f"{k} ({v})" for k, v in sorted(d.fragments.items()))
        damage = ([f"fragment(s) {frags}; {len(d.parse_ids)} parse(s) to re-derive by {d.rederivation}"
                   + (f" ({len(d.unserved)} more no source serves now: re-derived if one takes it back)"
                      if d.unserved else "")]
                  if d.fragments else [])
        if d.changed:
            damage.append(f"{d.changed.missing} row(s) fewer and {d.changed.extra} more than written (changed outside "
                          f"Fabric); {len(d.parse_ids)} parse(s) to re-derive by {d.rederivation}")
        if d.altered:
            damage.append(f"{len(d.altered)} parse(s) whose vectors no longer match the digest written with them "
                          f"(altered); re-derive by {d.rederivation}")
        if d.indices:
            damage.append(f"index(es) {', '.join(d.indices)} damaged: dropped (a later write builds the parse-ID "
                          "index again)")
        say(f"{d.table}: " + "; ".join(damage) + ("" if dry_run else f"; now version {report.versions[d.table]}"))
    if restored:
        say(f"stored bytes of {len(restored)} file(s) unreadable: " + ("they would be stored" if dry_run else "stored")
            + f" again from the unchanged file(s) on disk ({', '.join(restored[:3])}"
            + (", …)" if len(restored) > 3 else ")"))
    if not report.plan.tables:
        say("no damaged table data file")
    if report.resumed:
        say(f"{len(report.resumed)} parse(s) left marked by an earlier repair or run (killed before their "
            "re-derivation ended): " + ("they would be re-derived" if dry_run else "re-deriving them"))
    if dry_run:
        return
    summary = None
    if report.plan.tables or report.resumed:
        from fabric_assets.lifecycle.rebuild import run_marked
        from fabric_resources.parsing.document import machine_fault_in

        try:
            summary = run_marked(fabric_home)
        except Exception as exc:  # Dagster wraps what a step raised
            fault = machine_fault_in(exc)
            if fault is None:
                raise
            fail(f"{fault}: the damaged fragments are dropped and their parses marked; free the resource and "
                 "run `fabric ingest`, it re-derives them", code=3)
    also = ingested_beside(summary)
    if also:
        say(also)
    from fabric_assets.lifecycle.repair import republish_damaged_pins

    republished = None
    if not failed_runs_of(summary):
        republished = republish_damaged_pins(fabric_home)
        if republished is not None:
            say(f"release {republished}: the current release again, over table versions that read")
    if as_json:
        from fabric_query.api import Fabric

        st = Fabric(fabric_home.root).status()
    else:
        st = print_status(fabric_home.root)
    failed_runs = failed_runs_of(summary)
    # A source that failed before, untouched by the repair, is not the repair's failure.
    rederived = set(report.plan.marks()) | set(report.resumed)
    failed = [f.source_key for f in (summary.failed if summary else []) if f.parse_id in rederived]
    if as_json:
        for t in tables:
            t["version"] = report.versions.get(t["table"])
        console.print_json(json.dumps({"tables": tables, "release_id": st.release_id, "republished": republished,
                                       "restored": restored, "resumed": report.resumed,
                                       "failed_runs": failed_runs, "unreadable_tables": list(st.unreadable_tables),
                                       "failed": failed}))
    if failed_runs:
        fail(f"{len(failed_runs)} Dagster run(s) failed ({', '.join(failed_runs)}): the marked parses stay "
             "marked and the next `fabric ingest` re-derives them", code=3)
    if st.unreadable_tables:
        # With --json nothing is listed above: `fabric status` lists them either way.
        fail("the current release still pins table data that cannot be read (see `fabric status`)", code=1)
    if failed:
        fail(f"{len(failed)} source(s) failed their re-derivation (see `fabric status`)", code=1)


def ingested_beside(summary) -> str | None:
    """What the repair's pipeline run (an ingest of the registered roots) took in beyond the repair:
    the roots' changes since the last ingest and the sources an older parser made (an upgraded
    Fabric re-parses them), or None. A repair said nothing of them (stop 45 left it open)."""
    if summary is None:
        return None
    s = summary.scan
    moved = {k for pair in s.moved for k in pair}
    parts = [f"{n} {what}" for n, what in ((len(set(s.new) - moved), "new"), (len(s.changed), "changed"),
                                            (len(set(s.returned) - moved), "came back unchanged"),
                                            (len(set(s.deleted) - moved), "deleted"), (len(s.moved), "moved"),
                                            (len(s.reparsed), "re-parsed by this Fabric's parsers (parser version "
                                             "or settings changed)")) if n]
    if not parts:
        return None
    return ("the repair's ingest of the registered roots also took in source(s): " + ", ".join(parts)
            + " (what `fabric ingest` would have done)")


def failed_runs_of(summary) -> list[str]:
    return (summary.failed_runs + summary.annotation_failed_runs) if summary else []


def _cited(data) -> list:
    """The citations of a pack (every hit's; the rest of the pack is not read, as by `resolve`), a
    hit, a citation or a list of those, validated by the read side's types so that a malformed one
    is a typed error naming the fields (one line), not a crash nor pydantic's report quoting the text."""
    from pydantic import ValidationError

    from fabric_query.types import Citation

    def citation(value, where: str):
        try:
            return Citation.model_validate(value)
        except ValidationError as exc:
            fields = ", ".join(".".join(filter(None, (where, *map(str, e["loc"])))) or "(citation)" for e in exc.errors())
            raise ValueError(f"missing or malformed: {fields}") from None

    if isinstance(data, list):
        return [c for item in data for c in _cited(item)]
    if isinstance(data, dict) and "results" in data:
        if not isinstance(data["results"], list):
            raise ValueError("its results are not a list")
        return [citation(h.get("citation") if isinstance(h, dict) else h, f"results.{i}.citation")
                for i, h in enumerate(data["results"])]
    return [citation(data.get("citation", data) if isinstance(data, dict) else data, "")]


@lifecycle_app.command()
@on_interrupt(READS)
def audit(
    citation: Annotated[str, typer.Argument(help="Citation, hit or EvidencePack JSON, a file holding it, or "
                                                 "`-` for standard input (a pack: every hit).")],
    as_json: Annotated[bool, typer.Option("--json")] = False,
    home: HomeOption = None,
) -> None:
    """Lineage of each cited passage: source bytes (hash, path, size, mtime as recorded), parser,
    chunker, embedding models, annotation producers, and per table the one Dagster run and
    materialization that wrote the rows the cited release pins. Exit 2 when the home cannot say."""
    from dataclasses import asdict

    from fabric_assets.lifecycle.audit import AuditError, audit_passages, passages_of
    from fabric_assets.lifecycle.run_history import home_instance
    from fabric_resources.home import FabricHome

    path = set_home(home)
    data = json_argument(citation)
    try:
        cited = _cited(data)
    except ValueError as exc:
        fail(f"not a citation or pack: {exc}")
    if not cited:
        fail("the pack has no hits: nothing to audit")
    if not FabricHome(path, read_only=True).exists():  # its catalog, wherever storage.catalog puts it
        fail(no_home_message(path))
    fabric_home = FabricHome(path)
    try:
        passages = passages_of([json.loads(c.model_dump_json()) for c in cited])
        reports = audit_passages(fabric_home, passages, home_instance(fabric_home))
    except AuditError as exc:
        fail(f"audit: {exc}")
    if as_json:
        console.print_json(json.dumps([asdict(r) for r in reports]))
        return
    for n, r in enumerate(reports, 1):
        s, p, c = r.source, r.parser, r.chunk
        console.print(f"[{n}] release {r.release_id} {shown_key(r.source_key)} chunk {r.chunk_id}", markup=False)
        console.print(f"  source: sha256 {s.source_hash}, {shown_key(s.path) if s.path else '(purged)'}, {s.size} bytes, "
                      f"mtime_ns {s.mtime_ns}, {s.media_type}", markup=False)
        console.print(f"  parser: {p.name} {p.version} (config {p.config_hash[:12]}), language {p.language}",
                      markup=False)
        match = {True: "matches the citation", False: "DIFFERS from the citation", None: "no cited hash"}
        console.print(f"  chunker: {c.chunker}, {c.token_count} tokens, text sha256 {c.text_hash[:12]} "
                      f"({match[c.text_hash_matches]})", markup=False)
        for e in r.embeddings:
            console.print(f"  embedding: {e.table}: {e.model}", markup=False)
        if not r.embeddings:
            console.print("  embedding: none", markup=False)
        for a in r.annotations:
            console.print(f"  annotations: {a.annotations} by producer {a.producer} (model "
                          f"{a.configured_model or 'not recorded: the configured producer differs'}), "
                          f"{len(a.memo_keys)} memo entr{'y' if len(a.memo_keys) == 1 else 'ies'}", markup=False)
        if not r.annotations:
            console.print("  annotations: none", markup=False)
        for w in r.writers:
            if w.run_id is None:  # was "written by run - (materialization -, version None)", nothing said
                console.print(f"  {w.table} v{w.pinned_version}: writer not recorded: this home's Dagster storage "
                              "holds no materialization of that partition at or below the pinned version (a home "
                              "restored from a snapshot starts a new one; or its event log was lost)", markup=False)
                continue
            console.print(f"  {w.table} v{w.pinned_version}: written by run {w.run_id} "
                          f"(materialization {w.storage_id or '-'}, version {w.written_version})"
                          + ("" if w.run_recorded else ": NO RUN RECORD: the event log names this run, but this "
                             "home's Dagster run storage no longer holds it (runs.db lost or replaced); the run "
                             "cannot be checked"), markup=False)
