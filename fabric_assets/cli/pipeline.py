"""The ``fabric`` commands that run the pipeline: ingest, quickstart, ui, lexical-repair, dense-index-repair.

Each imports the write side (and Dagster) inside its body, so registering these commands in the
root app costs ``fabric search`` nothing.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from fabric_query.cli import (LISTED_AT_MOST, HomeOption, console, err, fail, print_health, print_status, search,
                              set_home)
from fabric_query.cli_interrupt import on_interrupt
from fabric_query.cli_text import one_line, shown_key, typed
from fabric_query.errors import FabricQueryError
from fabric_resources.home_location import no_home_message

pipeline_app = typer.Typer(help="Commands that run the pipeline (they import Dagster inside the command).")


@pipeline_app.command()
def ingest(
    path: Annotated[Path, typer.Argument(help="A folder to register as a source root and ingest.")],
    home: HomeOption = None,
) -> None:
    """Register PATH, run the Dagster pipeline in-process to completion, print a summary.

    Exit codes: 0 every file found is searchable (or unsupported, or withheld by policy); 1 the
    ingest finished but some files failed to parse or were skipped (each listed with its reason),
    or search cannot run yet (the query encoder, or a table of the release that cannot be read);
    2 bad arguments; 3 a Dagster run failed (a fault of Fabric, not of a document: its parses are
    run again by the next ingest); 130 interrupted.
    """
    set_home(home)
    code = _ingest_saying_interrupts(path)
    if code:
        raise typer.Exit(code)


def _ingest_saying_interrupts(path: Path) -> int:
    """:func:`_run_ingest`; a Ctrl-C anywhere in it (its imports take seconds; the summary and the
    query encoder's preparation come after the release) is one line saying what it left
    (:func:`_interrupted_ingest`) and exit code 130 (128 + SIGINT, the shell's convention). Typer
    ended most of them with 130 and no word, and the one message there said "activates nothing"
    even after the release was published."""
    started, finished = time.time(), []
    try:
        return _run_ingest(path, finished)
    except KeyboardInterrupt:
        fail(_interrupted_ingest(started, bool(finished)), code=130)


def _interrupted_ingest(started: float, finished: bool) -> str:
    """What an ingest interrupted by Ctrl-C leaves, in one line. ``started``: the command's start
    (``time.time()``); ``finished``: whether the ingest itself had returned (the summary was being
    printed). Whether a release was published since ``started`` is read from the catalog: an
    interrupted activation published its release or did not (one catalog transaction)."""
    from fabric_resources.home import FabricHome

    try:
        reader = FabricHome(read_only=True)
        release = reader.catalog.current_release() if reader.exists() else None
    except Exception:  # noqa: BLE001 - a home that cannot be read now: status says why
        return "interrupted; `fabric status` says what the home serves now."
    if finished:
        return (f"interrupted after the ingest finished (release {release.release_id if release else 'none'} is "
                "current); its summary was cut short: `fabric status` shows the home.")
    if release is not None and release.created_at >= started:
        return (f"interrupted after release {release.release_id} was published: it is active and searches serve it; "
                "the next `fabric ingest` finishes any work left.")
    serving = f"release {release.release_id} as before" if release is not None else "nothing yet (no release)"
    return (f"interrupted before a release was published: an interrupted ingest activates nothing, searches "
            f"serve {serving}; the next `fabric ingest` finishes the interrupted work.")


#: ``fabric ingest`` exit codes (README, "Everyday use").
EXIT_INCOMPLETE, EXIT_RUN_FAILED = 1, 3


def _run_ingest(path: Path, finished: list) -> int:
    """Ingest ``path`` and print its summary; return the exit code. ``finished`` gets an item once
    the ingest itself has returned."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from fabric_assets.ingest import NotADirectoryRoot, admissible_root, ingest as run
    from fabric_assets.sources.walk import not_a_folder
    from fabric_resources.catalog import RootOverlapError
    from fabric_resources.home import FabricHome
    from fabric_resources.parsing.document import exception_chain, machine_fault_in
    from fabric_resources.tables import TableRemovedError

    from fabric_resources.home_location import home_path

    if not path.is_dir() and not home_path(None).exists():
        # With a home, ingest decides: a registered root that is gone is still scanned (its files
        # become access_lost), any other path is refused by it (NotADirectoryRoot).
        fail(not_a_folder(path))
    home = FabricHome()
    try:  # before the progress bar: a refused path is one line
        admissible_root(path, home)
    except (NotADirectoryRoot, RootOverlapError) as exc:
        fail(str(exc))
    progress = Progress(TextColumn("[bold]ingesting (2 steps per document)"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=err)
    task = progress.add_task("parse", total=None)

    def update(done: int, total: int) -> None:
        progress.update(task, completed=done, total=total)
        # Shown from the first count on (start is idempotent): with nothing to parse (a re-chunk, or an
        # activation alone) there is no bar, where one of `0/0` stood while the re-chunk ran.
        progress.start()

    started_at = time.time()
    try:
        try:
            summary = run(path, home, progress=update)
            finished.append(summary)
        finally:
            # Stopped before any error is printed: stopping draws the bar once more, and below the
            # error ("interrupted") it read as an ingest still running, stuck at its last count.
            if progress.live.is_started:  # stopping one never started prints an empty line
                progress.stop()
    except (NotADirectoryRoot, RootOverlapError) as exc:
        fail(str(exc))
    except Exception as exc:
        # Dagster wraps the error a step raised.
        removed = next((e for e in exception_chain(exc) if isinstance(e, TableRemovedError)), None)
        if removed is not None:
            fail(f"{removed}: nothing was published", code=EXIT_RUN_FAILED)
        fault = machine_fault_in(exc)
        if fault is None:
            raise
        # Disk full (the home, the catalog, Dagster's database), a file-size limit, no
        # descriptors: the machine's, not any document's.
        what = (f"{fault.strerror or fault} (errno {fault.errno}{f': {fault.filename}' if fault.filename else ''})"
                if isinstance(fault, OSError) else f"SQLite: {fault}")
        fail(f"{what}: no document was failed for it; free the resource and run `fabric ingest` "
             "again, it finishes the work.", code=EXIT_RUN_FAILED)
    s = summary.scan
    # The scan lists a moved file's new key as new and its old key as deleted too; a move is one change.
    new = len(set(s.new) - {k for _, k in s.moved})
    deleted = len(set(s.deleted) - {k for k, _ in s.moved})
    table = Table(title=f"ingest {path} → {home.root}", show_header=False)
    # The folder's key prefix: a second folder of the same name is `notes-<6 hex>`, which
    # `path:notes/` and `prefix:notes/` do not name.
    root = next((r for r in home.catalog.roots() if r.path == str(path.resolve())), None)
    for label, value in [
        *([("source keys", escape(shown_key(f"fs:{root.label}/…")))] if root is not None else []),
        ("new / changed / deleted / moved", f"{new} / {len(s.changed)} / {deleted} / {len(s.moved)}"),
        ("unchanged content (touched)", str(len(s.touched))),
        ("came back unchanged (parse reused)", str(len(set(s.returned) - {k for _, k in s.moved}))),
        ("re-parsed (parser version or settings changed)", str(len(s.reparsed))),
        ("re-chunked (chunking changed; not re-parsed)", str(len(summary.rechunked_by_change))),
        ("unsupported (new or changed)",
         escape(_capped([f"{shown_key(k)} ({one_line(t)})" for k, t in s.unsupported])) or "none"),
        ("symlinks skipped", str(s.skipped_symlinks)),
        ("names not UTF-8 (skipped)", escape(_capped([shown_key(n) for n in s.skipped_names])) or "none"),
        ("skipped (see below)", str(len(s.skipped))),
        ("parse partitions run", str(len([p for p in s.parse_ids_to_run if p not in summary.left_to_runs]))
         + (f" + {len(summary.retried)} resumed after an interrupted run" if summary.retried else "")),
        *([("left to Dagster runs in progress",
            f"{len(summary.left_to_runs)} parse(s), run(s) {', '.join(sorted(set(summary.left_to_runs.values()))[:3])}: "
            "their release follows that run (the daemon's activation, or the next `fabric ingest`)")]
          if summary.left_to_runs else []),
        ("failed to parse (see below)", f"{len(summary.failed)} ({sum(f.new for f in summary.failed)} in this ingest)"),
        ("Dagster runs", " + ".join([f"{len(summary.run_ids)} parse",
                                     *(f"{len(ids)} {kind}" for kind, ids in (
                                         ("re-chunk", summary.rechunk_run_ids),
                                         ("re-projection", summary.reproject_run_ids),
                                         ("annotation", summary.annotation_run_ids)) if ids),
                                     "1 activation"])
         + f" ({len(summary.failed_runs) + len(summary.annotation_failed_runs)} failed)"),
        ("release", _release_row(home, summary.activation, started_at)),
        ("wall time", f"{summary.seconds:.1f} s"),
    ]:
        table.add_row(label, value)
    console.print(table)
    st = print_status(home.root)
    _prepare_query_encoder(home.root)
    if summary.activation.get("cleanup_snapshots_problem"):  # the release stands; the retention is held back
        err.print("[yellow]warning:[/yellow] the cleanup after the activation kept every release and index "
                  f"generation: {escape(one_line(summary.activation['cleanup_snapshots_problem']))}")
    failed_runs = summary.failed_runs + summary.annotation_failed_runs
    if failed_runs:
        # A damaged data file fails every write of its table: running the ingest again cannot help.
        then = ("Table data the release pins cannot be read (listed above): run `fabric repair`, which "
                "re-derives the lost rows and these parses." if st.unreadable_tables else
                "Its parses stay pending and the next `fabric ingest` runs them again.")
        err.print(f"[red]error:[/red] {len(failed_runs)} Dagster run(s) failed ({', '.join(failed_runs)}): a fault of "
                  f"Fabric, not of a document; see the run in `fabric ui`. {then}")
        return EXIT_RUN_FAILED
    if st.unreadable_tables:
        # Nothing to write can still leave a home that cannot answer: an ingest is not "done" then.
        err.print(f"[red]incomplete:[/red] the current release pins {len(st.unreadable_tables)} table(s) that "
                  "cannot be read (listed above): search cannot answer in full.")
        return EXIT_INCOMPLETE
    if st.rows_changed:
        # Every file readable, so nothing above failed: yet the release answers without those rows.
        err.print(f"[red]incomplete:[/red] {len(st.rows_changed)} table(s) hold other rows than Fabric wrote "
                  "(listed above): run `fabric repair`, which re-derives them.")
        return EXIT_INCOMPLETE
    if not summary.complete:
        err.print(f"[yellow]incomplete:[/yellow] {len(summary.failed)} source(s) failed to parse and "
                  f"{len(s.skipped)} path(s) were skipped, each listed above with its reason.")
        return EXIT_INCOMPLETE
    return 0


def _release_row(home, activation: dict, started_at: float) -> str:
    """The summary's release row: the release this ingest activated and, where another replaced it
    before the summary is printed, that it is not current any more and which is: a `fabric snapshot
    restore` run beside the ingest waits for the ingest's lock and goes the moment it is free, so
    the release this ingest published may already be replaced (and forgotten) by then."""
    from fabric_assets.lifecycle.snapshots import RESTORE_EVENT

    rid = activation.get("release_id")
    row = f"{rid} (published: {activation.get('published')})"
    current = home.catalog.current_release_id()
    if rid is None or current == rid:
        return row
    if any(e["at"] >= started_at for e in home.catalog.events(RESTORE_EVENT)):
        return (f"{row}; not current any more: a `fabric snapshot restore` that waited for this ingest put "
                f"release {current} back since and forgot what came after its snapshot, this ingest's work "
                "included (files still in their folders come back with the next `fabric ingest`)")
    return f"{row}; not current any more: release {current} replaced it since (another activation)"


def _capped(names: list[str]) -> str:
    """The first ``LISTED_AT_MOST`` of ``names``, then how many more (a folder of 3,000 logs printed
    6,000 lines of summary, each file named; hostile trial 12a)."""
    more = len(names) - LISTED_AT_MOST
    return ", ".join(names[:LISTED_AT_MOST]) + (f", … and {more} more" if more > 0 else "")


def _prepare_query_encoder(home: Path) -> None:
    """Export the local MiniLM query model now (once per machine) rather than in the first search."""
    from fabric_resources.home import FabricHome
    from fabric_resources.models.embedder import MiniLMEmbedder
    from fabric_resources.models.http_embedder import dense_backend
    from fabric_resources.models.minilm_onnx import QueryModelError, ensure_exported, exported_path

    encoder = dense_backend(FabricHome(home).config)
    try:
        if not isinstance(encoder, MiniLMEmbedder) or exported_path(encoder.identity).exists():
            return
        with err.status("preparing the query encoder (ONNX export of MiniLM, once per machine)"):
            ensure_exported(encoder.identity, encoder.max_seq_length)
    except QueryModelError as exc:  # the export failed, or there is no cache folder to put it in
        fail(f"ingest done, but search cannot run: {exc}", code=1)


def sample_folder(home_dir: Path) -> Path:
    """Where ``quickstart`` writes its sample corpus: ``<home>-sample`` beside the home
    (``./.fabric`` → ``./.fabric-sample``)."""
    return home_dir.parent / f"{home_dir.name}-sample"


@pipeline_app.command()
@on_interrupt(lambda started, params: _interrupted_ingest(started, False))
def quickstart(
    path: Annotated[Optional[Path], typer.Argument(help="Folder to ingest (default: a sample corpus Fabric writes).")] = None,
    query: Annotated[str, typer.Option("--query", "-q")] = "lighthouse keeper",
    home: HomeOption = None,
) -> None:
    """The main job: ingest a folder (or a written sample), answer a query, verify its first citation."""
    from fabric_query.api import Fabric
    from fabric_query.errors import QuerySyntaxError
    from fabric_query.querylang import parse_query

    home_dir = set_home(home)
    query = typed(query)  # as the terminal wrote it (a Latin-1 one), as `fabric search` reads it
    try:  # before the ingest, not after it: a query that cannot run is known now
        parse_query(query)
    except QuerySyntaxError as exc:
        fail(f"{type(exc).__name__}: {exc}")
    if path is None:
        from fabric_assets.sample_corpus import write_sample_corpus
        from fabric_resources.home import FabricHome

        FabricHome(home_dir)  # a home that cannot be made (a file) fails now, not after the sample is written

        # Beside the home, never inside it: the home is never a source (its catalog and admin token
        # would become searchable), so a sample inside it would be refused.
        path = write_sample_corpus(sample_folder(home_dir))
        console.print(f"wrote a sample corpus to {path}")
    code = _ingest_saying_interrupts(path)
    console.print(f"\n[bold]fabric search {escape(one_line(repr(query)))}[/bold]")  # the user's text: no markup
    search(query, limit=3, as_json=False, home=home_dir)
    pack = Fabric(home_dir).search(query, limit=1)
    if pack.results:
        result = Fabric(home_dir).resolve(pack.results[0].citation)
        console.print(f"\nresolve first citation → [bold]{result.status}[/bold]")
    if code:
        raise typer.Exit(code)


@pipeline_app.command()
@on_interrupt("nothing was changed (the Dagster UI had not started)")
def ui(
    port: Annotated[int, typer.Option("--port")] = 3000,
    home: HomeOption = None,
) -> None:
    """Start the Dagster UI on this home's instance (same runs as `fabric ingest`)."""
    from fabric_assets.cli.supervise import run_until_stopped

    path = set_home(home)
    from fabric_resources.home import FabricHome

    if not FabricHome(path, read_only=True).exists():  # a mistyped --home: no empty home made for it
        fail(f"{no_home_message(path)} (the UI's sensor watches the folders it registers)")
    FabricHome(path)  # writes dagster.yaml
    os.environ["DAGSTER_HOME"] = str(path / "dagster")
    workspace = Path(__file__).resolve().parents[2] / "workspace.yaml"
    # This interpreter's Dagster, not a `dagster` looked up on PATH: `.venv/bin/fabric ui` is run
    # without the venv activated (README), where PATH holds no `dagster` (a FileNotFoundError).
    cmd = [sys.executable, "-m", "dagster", "dev", "-w", str(workspace), "-h", "127.0.0.1", "-p", str(port)]
    console.print(f"DAGSTER_HOME={os.environ['DAGSTER_HOME']} {' '.join(cmd)}")
    raise typer.Exit(run_until_stopped(cmd))


@pipeline_app.command("lexical-repair")
@on_interrupt("a release is published whole or not at all (`fabric status` shows which is current); run it "
               "again to finish the repair")
def lexical_repair_cmd(home: HomeOption = None) -> None:
    """Rebuild the serving index from canonical tables only (no re-parse, no re-embedding); a
    healthy index is left as it is and no release is published."""
    from fabric_assets.activation.repair import lexical_repair
    from fabric_query.api import Fabric

    path = set_home(home)
    try:
        report = lexical_repair(Fabric(path).home)
    except (FabricQueryError, ValueError) as exc:
        fail(str(exc))
    print_health(report.before, "before")
    if not report.published:
        console.print(f"nothing to repair: the index matches the canonical tables; release {report.release_id} "
                      "stays current")
        return
    print_health(report.after, "after")
    console.print(f"published release {report.release_id}; canonical digest unchanged: {report.canonical_unchanged}")
    if not (report.after.healthy and report.canonical_unchanged):
        raise typer.Exit(1)


@pipeline_app.command("dense-index-repair")
@on_interrupt("a release is published whole or not at all (`fabric status` shows which is current); run it "
               "again to finish the repair")
def dense_index_repair_cmd(home: HomeOption = None) -> None:
    """Rebuild the current release's dense ANN indexes from its pinned vector rows (no re-embedding);
    an index that reads whole and holds the release's rows is kept, and with every one kept no release
    is published."""
    from fabric_assets.activation.dense_index import skip_words
    from fabric_assets.activation.repair import dense_index_repair
    from fabric_query.api import Fabric

    path = set_home(home)
    try:
        fabric_home = Fabric(path).home
        report = dense_index_repair(fabric_home)
    except (FabricQueryError, ValueError) as exc:
        fail(str(exc))
    config = fabric_home.config.query.dense_search
    for table, record in sorted(report.after.items()):
        if not record.get("generation"):  # none built: say why and what answers, not a bare code
            console.print(f"{table}: {escape(skip_words(config, record))}")
            continue
        old = (report.before.get(table) or {}).get("generation") or "none"
        if old == record["generation"]:
            console.print(f"{table}: {old}, {record['rows']:,} rows: sound (read whole), kept")
            continue
        left = record.get("left_out") or ()
        console.print(f"{table}: {old} -> {record['generation']}, {record['rows']:,} rows, {record['build_seconds']} s"
                      + (f" ({len(left)} parses left out: their vectors are not those recorded; `fabric repair`)"
                         if left else ""))
    if not report.published:
        console.print(f"nothing to repair; release {report.release_id} stays current")
        return
    console.print(f"published release {report.release_id}")
