"""The ``fabric`` command line.

Read commands (search, resolve, status) use ``fabric_query`` only; commands
that run the pipeline (ingest, quickstart, bench) import ``fabric_assets``
inside the command, so ``fabric search`` never loads Dagster.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from fabric_query.errors import FabricQueryError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, help="Fabric: retrieval with verifiable evidence.")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks that print figures and ratios.")
app.add_typer(bench_app, name="bench")
console = Console()
err = Console(stderr=True, soft_wrap=True)

HomeOption = Annotated[
    Optional[Path], typer.Option("--home", envvar="FABRIC_HOME", help="Fabric home (default ./.fabric).")
]


def _set_home(home: Optional[Path]) -> Path:
    from fabric_resources.home import home_path

    path = home_path(home)
    os.environ["FABRIC_HOME"] = str(path)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return path


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[red]error:[/red] {message}")
    raise typer.Exit(code)


@app.command()
def ingest(
    path: Annotated[Path, typer.Argument(help="A folder to register as a source root and ingest.")],
    home: HomeOption = None,
) -> None:
    """Register PATH, run the Dagster pipeline in-process to completion, print a summary.

    Exit codes: 0 every file found is searchable (or unsupported, or withheld by policy); 1 the
    ingest finished but some files failed to parse or were skipped (each listed with its reason),
    or search cannot run yet; 2 bad arguments; 3 a Dagster run failed (a fault of Fabric, not of
    a document: its parses are run again by the next ingest); 130 interrupted.
    """
    _set_home(home)
    code = _run_ingest(path)
    if code:
        raise typer.Exit(code)


#: ``fabric ingest`` exit codes (README, "Everyday use").
EXIT_INCOMPLETE, EXIT_RUN_FAILED = 1, 3


def _run_ingest(path: Path) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from fabric_assets.ingest import NotADirectoryRoot, ingest as run
    from fabric_resources.catalog import RootOverlapError
    from fabric_resources.home import FabricHome

    if not path.is_dir():
        _fail(f"{path} is not a directory")
    home = FabricHome()
    with Progress(
        TextColumn("[bold]ingesting (2 steps per document)"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), console=err
    ) as progress:
        task = progress.add_task("parse", total=None)

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        try:
            summary = run(path, home, progress=update)
        except (NotADirectoryRoot, RootOverlapError) as exc:
            _fail(str(exc))
        except KeyboardInterrupt:
            # 130 = 128 + SIGINT, the shell's convention for a command stopped by Ctrl-C.
            _fail("interrupted. An interrupted parse run activates nothing; the next `fabric ingest` "
                  "finishes the interrupted work.", code=130)
    s = summary.scan
    table = Table(title=f"ingest {path} → {home.root}", show_header=False)
    for label, value in [
        ("new / changed / deleted / moved", f"{len(s.new)} / {len(s.changed)} / {len(s.deleted)} / {len(s.moved)}"),
        ("unchanged content (touched)", str(len(s.touched))),
        ("re-parsed (parser settings changed)", str(len(s.reparsed))),
        ("re-chunked (chunking changed; not re-parsed)", str(len(summary.rechunked))),
        ("unsupported", ", ".join(f"{k} ({t})" for k, t in s.unsupported) or "none"),
        ("symlinks skipped", str(s.skipped_symlinks)),
        ("names not UTF-8 (skipped)", ", ".join(s.skipped_names) or "none"),
        ("skipped (see below)", str(len(s.skipped))),
        ("parse partitions run", str(len(s.parse_ids_to_run))
         + (f" + {len(summary.retried)} resumed after an interrupted run" if summary.retried else "")),
        ("failed to parse (see below)", f"{len(summary.failed)} ({sum(f.new for f in summary.failed)} in this ingest)"),
        ("Dagster runs", f"{len(summary.run_ids)} parse + 1 activation ({len(summary.failed_runs)} failed)"),
        ("release", f"{summary.activation.get('release_id')} (published: {summary.activation.get('published')})"),
        ("wall time", f"{summary.seconds:.1f} s"),
    ]:
        table.add_row(label, value)
    console.print(table)
    _print_status(home.root)
    _prepare_query_encoder(home.root)
    failed_runs = summary.failed_runs + summary.annotation_failed_runs
    if failed_runs:
        err.print(f"[red]error:[/red] {len(failed_runs)} Dagster run(s) failed ({', '.join(failed_runs)}): a fault of "
                  "Fabric, not of a document; see the run in `fabric ui`. Its parses stay pending and the next "
                  "`fabric ingest` runs them again.")
        return EXIT_RUN_FAILED
    if not summary.complete:
        err.print(f"[yellow]incomplete:[/yellow] {len(summary.failed)} source(s) failed to parse and "
                  f"{len(s.skipped)} path(s) were skipped, each listed above with its reason.")
        return EXIT_INCOMPLETE
    return 0


def _prepare_query_encoder(home: Path) -> None:
    """Export the local MiniLM query model now (once per machine) rather than in the first search."""
    from fabric_resources.home import FabricHome
    from fabric_resources.models.embedder import MiniLMEmbedder
    from fabric_resources.models.http_embedder import dense_backend
    from fabric_resources.models.minilm_onnx import QueryModelError, ensure_exported, exported_path

    encoder = dense_backend(FabricHome(home).config)
    if not isinstance(encoder, MiniLMEmbedder) or exported_path(encoder.identity).exists():
        return
    with err.status("preparing the query encoder (ONNX export of MiniLM, once per machine)"):
        try:
            ensure_exported(encoder.identity, encoder.max_seq_length)
        except QueryModelError as exc:
            _fail(f"ingest done, but search cannot run: {exc}", code=1)


def _print_status(home: Path) -> None:
    from fabric_query.api import Fabric

    st = Fabric(home).status()
    console.print(
        f"release {st.release_id}: {st.active_sources} active sources, {st.active_parses} active parses, "
        f"sources by state {st.sources_by_state}, pending {st.pending}"
    )
    for p in st.failed:
        console.print(f"  [red]failed[/red] {', '.join(p.sources)}: {p.reason} {p.detail or ''}".rstrip())
    for p in st.held:
        console.print(f"  [yellow]held[/yellow] {', '.join(p.sources)}: {p.reason}")
    for p in st.unfinished:
        console.print(f"  [yellow]unfinished[/yellow] {', '.join(p.sources)}: run still going or killed; "
                      "the next `fabric ingest` re-runs it")
    for p in st.partial:
        console.print(f"  [yellow]partly read[/yellow] {', '.join(p.sources)}: {p.detail}")
    for key, mt in st.unsupported:
        console.print(f"  [dim]unsupported[/dim] {key} ({mt})")
    for key, reason in st.skipped:
        console.print(f"  [yellow]skipped[/yellow] {key}: {reason}")
    if st.withheld:
        console.print(f"  withheld by policy: {len(st.withheld)} sources")


@app.command()
def search(
    query: Annotated[str, typer.Argument(help='Free text, "phrases", -excluded, path:/type:/after:/before:/source:')],
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1000)] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole EvidencePack as JSON.")] = False,
    home: HomeOption = None,
) -> None:
    """Search the current release and print the evidence."""
    from fabric_query.api import Fabric
    from fabric_query.release import VISIBLE_SOURCES_ONLY
    from fabric_resources.models.minilm_onnx import QueryModelError

    _set_home(home)
    try:
        pack = Fabric().search(query, limit=limit)
    except (FabricQueryError, QueryModelError) as exc:
        _fail(f"{type(exc).__name__}: {_esc(str(exc))}")
    if as_json:
        sys.stdout.write(pack.model_dump_json(indent=2) + "\n")
        return
    if pack.fallback_reason == VISIBLE_SOURCES_ONLY:
        err.print(f"[yellow]release {pack.release_id} names sources that are no longer visible (deleted or "
                  "withheld); answered from its visible sources only[/yellow]")
    elif pack.fallback_reason:
        err.print(f"[yellow]lexical index unusable ({pack.fallback_reason}); answered by scanning chunks[/yellow]")
    for channel, reason in pack.skipped_channels.items():
        err.print(f"[yellow]skipped {channel}: {_esc(reason)}[/yellow]")
    if not pack.results:
        console.print(f"no results (release {pack.release_id}, {pack.eligible_sources} eligible sources)")
    for hit in pack.results:
        c = hit.citation
        text = "".join(f"[bold yellow]{_esc(s.text)}[/bold yellow]" if s.highlighted else _esc(s.text)
                       for s in hit.highlights)
        console.print(f"[bold]{hit.rank}.[/bold] {c.source_key}  [dim]{' > '.join(hit.section_path)}[/dim]")
        console.print(f"   channels: {', '.join(f'{n}#{h.rank}' for n, h in hit.channels.items())}"
                      f"  parse {c.parse_id[:12]}  units {len(c.spans)}")
        console.print("   " + (text if len(hit.text) < 600 else text[:600] + "…"))


def _esc(text: str) -> str:
    from rich.markup import escape

    return escape(text)


@app.command()
def resolve(
    citation: Annotated[str, typer.Argument(help="Citation JSON, a file holding it, or - for stdin. "
                                                 "A hit or an EvidencePack (first hit) is accepted too.")],
    home: HomeOption = None,
) -> None:
    """Re-verify a citation: prints verified or stale (with what changed). Exit 1 when stale."""
    from fabric_query.api import Fabric
    from fabric_query.types import Citation

    _set_home(home)
    is_file = citation != "-" and Path(citation).is_file()
    raw = sys.stdin.read() if citation == "-" else (Path(citation).read_text() if is_file else citation)
    try:
        data = json.loads(raw)
    except ValueError as exc:
        where = "the file" if is_file or citation == "-" else "the argument (and there is no such file)"
        _fail(f"not JSON: {where}: {exc}")
    if not isinstance(data, dict):
        _fail("expected a JSON object: a citation, a hit or an EvidencePack")
    if "results" in data:
        if not data["results"]:
            _fail("the EvidencePack has no results")
        data = data["results"][0]
    data = data.get("citation", data)
    if not isinstance(data, dict):
        _fail("the citation must be a JSON object")
    try:
        parsed = Citation.model_validate(data)
    except ValidationError as exc:
        fields = ", ".join(".".join(str(p) for p in e["loc"]) for e in exc.errors())
        _fail(f"not a valid citation (missing or malformed: {fields})")
    try:
        result = Fabric().resolve(parsed)
    except (FabricQueryError, ValueError) as exc:
        _fail(f"{type(exc).__name__}: {_esc(str(exc))}")
    colour = "green" if result.status == "verified" else "red"
    console.print(f"[{colour}]{result.status}[/{colour}]")
    for c in result.checks:
        console.print(f"  {'ok ' if c.ok else 'NO '} {c.check}: {c.detail}")
    if result.status != "verified":
        raise typer.Exit(1)


@app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json")] = False,
    home: HomeOption = None,
) -> None:
    """Sources, active parses, failed parses with reasons, unsupported files."""
    from fabric_query.api import Fabric

    path = _set_home(home)
    try:
        if as_json:
            sys.stdout.write(Fabric(path).status().model_dump_json(indent=2) + "\n")
        else:
            _print_status(path)
    except FabricQueryError as exc:
        _fail(str(exc))


@app.command()
def quickstart(
    path: Annotated[Optional[Path], typer.Argument(help="Folder to ingest (default: a sample corpus Fabric writes).")] = None,
    query: Annotated[str, typer.Option("--query", "-q")] = "lighthouse keeper",
    home: HomeOption = None,
) -> None:
    """The main job: ingest a folder (or a written sample), answer a query, verify its first citation."""
    from fabric_query.api import Fabric

    home_dir = _set_home(home)
    if path is None:
        from fabric_assets.sample_corpus import write_sample_corpus

        path = write_sample_corpus(home_dir / "sample")
        console.print(f"wrote a sample corpus to {path}")
    code = _run_ingest(path)
    console.print(f"\n[bold]fabric search {query!r}[/bold]")
    search(query, limit=3, as_json=False, home=home_dir)
    pack = Fabric(home_dir).search(query, limit=1)
    if pack.results:
        result = Fabric(home_dir).resolve(pack.results[0].citation)
        console.print(f"\nresolve first citation → [bold]{result.status}[/bold]")
    if code:
        raise typer.Exit(code)


@app.command()
def ui(
    port: Annotated[int, typer.Option("--port")] = 3000,
    home: HomeOption = None,
) -> None:
    """Start the Dagster UI on this home's instance (same runs as `fabric ingest`)."""
    import subprocess

    path = _set_home(home)
    from fabric_resources.home import FabricHome

    FabricHome(path)  # writes dagster.yaml
    os.environ["DAGSTER_HOME"] = str(path / "dagster")
    workspace = Path(__file__).resolve().parent.parent / "workspace.yaml"
    cmd = ["dagster", "dev", "-w", str(workspace), "-h", "127.0.0.1", "-p", str(port)]
    console.print(f"DAGSTER_HOME={os.environ['DAGSTER_HOME']} {' '.join(cmd)}")
    raise typer.Exit(subprocess.call(cmd))


def _print_health(report, title: str) -> None:
    table = Table(title=f"{title}: {'healthy' if report.healthy else 'UNHEALTHY'} "
                        f"(release {report.release_id}, {report.generation})")
    for col in ("check", "expected", "actual", "ok"):
        table.add_column(col)
    if report.problem:
        table.add_row("index", "usable", report.problem, "NO")
    table.add_row("documents", str(report.expected_documents), str(report.actual_documents),
                  "yes" if report.expected_document_digest == report.actual_document_digest else "NO")
    table.add_row("document set digest", report.expected_document_digest[:16], report.actual_document_digest[:16], "")
    for f in report.fields:
        table.add_row(f"vocabulary[{f.field}]", f"{f.expected_terms} terms {f.expected_digest[:12]}",
                      f"{f.actual_terms} terms {f.actual_digest[:12]}", "yes" if f.ok else "NO")
    table.add_row("word-field tokens (BM25 lengths)", str(report.expected_word_tokens), str(report.actual_word_tokens),
                  "yes" if report.expected_word_tokens == report.actual_word_tokens else "NO")
    for f in report.fields:
        table.add_row(f"BM25 N, avgdl[{f.field}]", str(f.expected_bm25), str(f.actual_bm25),
                      "yes" if f.expected_bm25 == f.actual_bm25 else "NO")
    table.add_row("deleted documents still counted", "0", str(report.deleted_documents),
                  "yes" if report.deleted_documents == 0 else "NO")
    table.add_row("canonical digest", report.canonical_digest[:16], "", "")
    console.print(table)
    if report.missing_documents or report.unexpected_documents:
        console.print(f"missing: {list(report.missing_documents)}  unexpected: {list(report.unexpected_documents)}")
    for f in report.fields:
        if f.differing_terms:
            console.print(f"{f.field} terms differing: {list(f.differing_terms)}")


@app.command("lexical-health")
def lexical_health_cmd(home: HomeOption = None) -> None:
    """Compare the serving index with an independent reconstruction from canonical chunks. Exit 1 if unhealthy."""
    from fabric_query.api import Fabric
    from fabric_resources.lexical_health import lexical_health

    path = _set_home(home)
    try:
        report = lexical_health(Fabric(path).home)
    except (FabricQueryError, ValueError) as exc:
        _fail(str(exc))
    _print_health(report, "lexical health")
    if not report.healthy:
        raise typer.Exit(1)


@app.command("lexical-repair")
def lexical_repair_cmd(home: HomeOption = None) -> None:
    """Rebuild the serving index from canonical tables only (no re-parse, no re-embedding)."""
    from fabric_assets.activation.repair import lexical_repair
    from fabric_query.api import Fabric

    path = _set_home(home)
    try:
        report = lexical_repair(Fabric(path).home)
    except (FabricQueryError, ValueError) as exc:
        _fail(str(exc))
    _print_health(report.before, "before")
    _print_health(report.after, "after")
    console.print(f"published release {report.release_id}; canonical digest unchanged: {report.canonical_unchanged}")
    if not (report.after.healthy and report.canonical_unchanged):
        raise typer.Exit(1)


@app.command("eval")
def eval_cmd(
    beir_dir: Annotated[Path, typer.Argument(help="A BEIR folder: corpus.jsonl, queries.jsonl, qrels/test.tsv.")],
    limit_queries: Annotated[Optional[int], typer.Option("--limit-queries", min=1)] = None,
    split: Annotated[str, typer.Option(help="test (reported), dev (tuning) or all.")] = "test",
    config: Annotated[Optional[Path], typer.Option(help="A Fabric config JSON to evaluate.")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json-out")] = None,
    work_dir: Annotated[Optional[Path], typer.Option(
        "--work-dir", help="Keep the scratch home here and reuse it (re-ingest is a no-op scan).")] = None,
) -> None:
    """Ingest a BEIR collection through Dagster and score Fabric, its channels and baselines."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from fabric_assets.evaluation.harness import markdown_table, run_eval
    from fabric_resources.config import FabricConfig

    if split not in ("test", "dev", "all"):
        _fail("--split must be test, dev or all")
    if not (beir_dir / "corpus.jsonl").exists():
        _fail(f"{beir_dir} has no corpus.jsonl")
    cfg = FabricConfig.load(config) if config else None
    result = run_eval(beir_dir, limit_queries=limit_queries, split=split, config=cfg,  # type: ignore[arg-type]
                      work_dir=work_dir)
    if json_out:
        json_out.write_text(json.dumps(result, indent=2))
    console.print(markdown_table(result), markup=False)  # variant names like [rrf-multilingual] are not markup
    console.print(f"ingest {result['ingest_seconds']} s, {result['documents']} documents, {result['chunks']} chunks; "
                  f"nDCG gain: {result['ndcg_gain']}")


@bench_app.command("ingest")
def bench_ingest_cmd(
    path: Annotated[Path, typer.Argument(help="Folder to ingest into a scratch home.")],
    split: Annotated[Optional[int], typer.Option(help="Cut the folder's text into N files of 2–8 KB first.")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Ingest figures: counts, time by asset, orchestration overhead, ratio to a bare encode, peak RSS."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from fabric_assets.bench import as_dict, bench_ingest

    result = as_dict(bench_ingest(path, split=split))
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
        return
    table = Table(title="fabric bench ingest", show_header=False)
    for k, v in result.items():
        table.add_row(k, json.dumps(v) if isinstance(v, dict) else str(v))
    console.print(table)


@app.command("eval-tune")
def eval_tune_cmd(
    beir_dir: Annotated[Path, typer.Argument(help="A BEIR folder.")],
    work_dir: Annotated[Path, typer.Option("--work-dir", help="Scratch home to create or reuse.")],
    top: Annotated[int, typer.Option(min=1)] = 10,
    limit_queries: Annotated[Optional[int], typer.Option("--limit-queries", min=1)] = None,
    quick: Annotated[bool, typer.Option(help="Two feedback settings (off; 20 terms from 5 chunks) instead of four; "
                                              "RRF k 20 or 60, weights 0.5/1/1.5.")] = False,
) -> None:
    """Grid-search fusion (RRF k and weights; convex weights for CJK), word-channel feedback, bigram BM25
    k1/b (CJK) and section-guided dense on the dev half."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from fabric_assets.evaluation.harness import tune_fusion

    feedback = ((0, 10, 0.5), (20, 5, 0.5)) if quick else ((0, 10, 0.5), (10, 10, 0.3), (10, 10, 0.5), (20, 5, 0.5))
    grid = {"ks": (20, 60), "weights": (0.5, 1.0, 1.5)} if quick else {}
    for row in tune_fusion(beir_dir, work_dir, limit_queries=limit_queries, feedback=feedback, **grid)[:top]:
        console.print(json.dumps(row))


SharedOption = Annotated[Path, typer.Option("--shared", help="The ../shared folder (real corpus and eval sets).")]
JsonOutOption = Annotated[Optional[Path], typer.Option("--json-out", help="Also write the result as JSON here.")]


def _print_rows(title: str, rows: list[dict[str, str]]) -> None:
    table = Table(title=title)
    for col in (rows[0] if rows else {}):
        table.add_column(col)
    for row in rows:
        table.add_row(*row.values())
    console.print(table)


def _write_json(result: dict, json_out: Optional[Path]) -> None:
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result, indent=2) + "\n")
        console.print(f"wrote {json_out}")


def _skipped(exc: Exception) -> None:
    err.print(f"[yellow]skipped:[/yellow] {exc}")
    raise typer.Exit(2)


@bench_app.command("incremental")
def bench_incremental_cmd(
    path: Annotated[Path, typer.Argument(help="Folder whose text files supply the documents.")],
    sizes: Annotated[str, typer.Option(help="Comma-separated corpus sizes.")] = "1000,2000",
    doc_bytes: Annotated[int, typer.Option(min=100, help="Characters per document.")] = 1_000,
    rounds: Annotated[int, typer.Option(min=1, help="Changes timed per size (the median is reported).")] = 3,
    json_out: JsonOutOption = None,
) -> None:
    """Time from one edit + one delete + one add to the new release, at several corpus sizes (warm process)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from fabric_assets.bench import bench_incremental, incremental_rows

    if not path.is_dir():
        _skipped(FileNotFoundError(f"{path} is not a folder (../shared is provided on project machines and in CI)"))
    try:
        result = bench_incremental(path, tuple(int(s) for s in sizes.split(",")), doc_bytes, rounds)
    except ValueError as exc:
        _fail(str(exc))
    _print_rows("fabric bench incremental (seconds)", incremental_rows(result))
    console.print(f"growth {result['ratio_change_largest_to_smallest']} (target ≤ "
                  f"{result['target_ratio_change_largest_to_smallest']}), share of the smallest full ingest "
                  f"{result['ratio_change_to_full_ingest_smallest']:.2%} (target ≤ "
                  f"{result['target_ratio_change_to_full_ingest_smallest']:.0%})")
    _write_json(result, json_out)


@bench_app.command("scale")
def bench_scale_cmd(
    documents: Annotated[int, typer.Option(min=2, help="Tiny distinct documents = parse partitions.")] = 10_000,
    shared: SharedOption = Path("../shared"),
    work_dir: Annotated[Optional[Path], typer.Option(
        "--work-dir", help="Keep the corpus and home here (must not hold a home yet); default: scratch, removed.")] = None,
    ui: Annotated[bool, typer.Option("--ui/--no-ui", help="Start dagster-webserver and time GraphQL queries.")] = True,
    ui_repeat: Annotated[int, typer.Option(min=1)] = 3,
    json_out: JsonOutOption = None,
) -> None:
    """Dagster at many partitions: one sensor tick, the parse runs (Dagster overhead per partition), the UI."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from fabric_assets.bench_scale import bench_scale, summary_rows
    from fabric_assets.scaling_corpus import SharedCorpusMissing

    try:
        result = bench_scale(shared, documents, work_dir=work_dir, ui=ui, ui_repeat=ui_repeat,
                             log=lambda m: err.print(f"[dim]{m}[/dim]"))
    except SharedCorpusMissing as exc:
        _skipped(exc)
    except FileExistsError as exc:
        _fail(str(exc))
    _print_rows(f"fabric bench scale --documents {documents}", summary_rows(result))
    _write_json(result, json_out)


@bench_app.command("lexical")
def bench_lexical_cmd(
    corpus: Annotated[Path, typer.Argument(help="Folder whose .txt files supply real text (e.g. ../shared/corpus).")],
    chunks: Annotated[int, typer.Option(min=100)] = 100_000,
    repeat: Annotated[int, typer.Option(min=1)] = 20,
) -> None:
    """Lexical path latency vs bare tantivy searches of the same queries on one index (p50/p95, ratio)."""
    from fabric_query.lexical_bench import bench_lexical, corpus_texts

    texts = corpus_texts(corpus)
    if not texts:
        _fail(f"no .txt files under {corpus}")
    sys.stdout.write(json.dumps(bench_lexical(texts, chunks, repeat), indent=2) + "\n")


@bench_app.command("lexical-update")
def bench_lexical_update_cmd(
    corpus: Annotated[Path, typer.Argument(help="Folder whose .txt files supply real text (e.g. ../shared/corpus).")],
    sizes: Annotated[str, typer.Option(help="Comma-separated chunk counts.")] = "4000,20000",
    rounds: Annotated[int, typer.Option(min=1)] = 5,
) -> None:
    """One edit + one delete + one add written to the serving index: exact BM25 statistics vs deletes kept vs a rebuild."""
    from fabric_assets.bench_lexical_update import bench_lexical_update
    from fabric_query.lexical_bench import corpus_texts

    texts = corpus_texts(corpus)
    if not texts:
        _fail(f"no .txt files under {corpus}")
    result = bench_lexical_update(texts, tuple(int(s) for s in sizes.split(",")), rounds)
    sys.stdout.write(json.dumps(result, indent=2) + "\n")


@bench_app.command("query")
def bench_query_cmd(
    queries: Annotated[Optional[list[str]], typer.Argument(help="Queries (default: a fixed mixed-language set; "
                                                                "with --chunks: Cranfield + JSQuAD questions).")] = None,
    repeat: Annotated[int, typer.Option(min=1)] = 5,
    home: HomeOption = None,
    chunks: Annotated[Optional[list[int]], typer.Option(
        "--chunks", min=10, help="Corpus size to build (repeatable): measure on scaling corpora, not on --home.")] = None,
    cache_dir: Annotated[Path, typer.Option("--cache-dir", help="Where scaling corpora and homes are kept and reused.")]
        = Path(".fabric-bench"),
    shared: SharedOption = Path("../shared"),
    english_queries: Annotated[int, typer.Option(min=0, help="Cranfield questions (with --chunks).")] = 50,
    multilingual_queries: Annotated[int, typer.Option(min=0, help="JSQuAD questions (with --chunks).")] = 10,
    chunks_per_document: Annotated[int, typer.Option(min=1)] = 50,
    json_out: JsonOutOption = None,
) -> None:
    """Warm query latency (p50/p95/p99) through fabric_query, on --home or on scaling corpora (--chunks).

    With --chunks N (repeatable): a corpus of distinct documents recombined from real English text is built
    and ingested once per size under --cache-dir (reused later), then a fresh query process measures hybrid
    vs lexical-only per route and stage; growth factors compare the sizes."""
    from fabric_query.api import Fabric
    from fabric_query.benchmark import DEFAULT_QUERIES, bench_query

    if chunks:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from fabric_assets.bench_query_scale import bench_query_scale, growth_rows, stage_rows, summary_rows
        from fabric_assets.scaling_corpus import SharedCorpusMissing

        try:
            result = bench_query_scale(
                chunks, cache_dir, shared, english_queries=english_queries, multilingual_queries=multilingual_queries,
                queries=list(queries) if queries else None, repeat=repeat, chunks_per_document=chunks_per_document,
                log=lambda m: err.print(f"[dim]{m}[/dim]"))
        except SharedCorpusMissing as exc:
            _skipped(exc)
        q = result["queries"]
        _print_rows(f"fabric bench query (warm; {q.get('english', 0)} English + {q.get('multilingual', 0)} "
                    f"multilingual queries × {repeat}): end to end", summary_rows(result))
        _print_rows("per stage, ms (pack.timings; lexical = lexical-only path)", stage_rows(result))
        if result["growth"]:
            _print_rows("growth against the smallest size (same run)", growth_rows(result))
        _write_json(result, json_out)
        return
    path = _set_home(home)
    try:
        result = bench_query(Fabric(path), list(queries or DEFAULT_QUERIES), repeat)
    except FabricQueryError as exc:
        _fail(str(exc))
    sys.stdout.write(json.dumps(result, indent=2) + "\n")


@bench_app.command("annotate")
def bench_annotate_cmd(
    excerpts: Annotated[int, typer.Option(min=1, help="Excerpts of the synthetic parse (Cranfield text).")] = 1_000,
    delay: Annotated[float, typer.Option(min=0.0, help="The stub server's time per call, seconds.")] = 0.05,
    concurrency: Annotated[int, typer.Option(min=1, help="annotation.concurrency of the main run.")] = 8,
    baseline_excerpts: Annotated[Optional[int], typer.Option(
        min=0, help="Excerpts of the concurrency-1 baseline (default excerpts/10; 0 skips it).")] = None,
    shared: SharedOption = Path("../shared"),
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON instead of tables.")] = False,
) -> None:
    """Annotation against a stub chat server on loopback: re-parse memo hits, Fabric's overhead per call,
    wall time against the server-bound lower bound (calls × delay / concurrency), and a concurrency-1 baseline."""
    from fabric_assets.bench_annotation import bench_annotate, summary_rows
    from fabric_assets.scaling_corpus import SharedCorpusMissing

    try:
        result = bench_annotate(excerpts, delay, concurrency, shared=shared, baseline_excerpts=baseline_excerpts)
    except SharedCorpusMissing as exc:
        _skipped(exc)
    except ValueError as exc:
        _fail(str(exc))
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
        return
    _print_rows(f"fabric bench annotate --excerpts {excerpts} --delay {delay} --concurrency {concurrency}",
                summary_rows(result))
    first, load = result["first"], result["machine"]
    console.print(f"re-parse: {result['reparse']['calls']} calls, memo hits {result['reparse']['memo_hit_rate']:.0%}; "
                  f"server busy {first['server_busy_s']:.2f} s, mean in flight {first['server_mean_in_flight']} of "
                  f"{concurrency}; wall/bound vs baseline {result['ratio_first_to_baseline']}; Fabric CPU at the "
                  f"server's rate {first['cpu_cores_needed_at_server_rate']} cores; load "
                  f"{load['load_avg_before'][0]} → {load['load_avg_after'][0]} on {load['cpus']} CPUs")


def main() -> None:
    from fabric_resources.config import ConfigError

    try:
        app()
    except ConfigError as exc:  # raised lazily, when a command first reads the home's config
        err.print(f"error: {exc}", markup=False)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
