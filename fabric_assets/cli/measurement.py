# Over 500 lines: every measurement command (eval, eval-tune, each bench) with its typed options and one-line refusals, one Typer group.
"""The ``fabric`` measurement commands: eval, eval-tune and ``bench ...``.

Each imports :mod:`fabric_assets.measurement` (and through it the write side, Dagster and the
models) inside its body, so registering these commands in the root app costs ``fabric search``
nothing. The figures they print are described in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from fabric_query.cli import HomeOption, console, err, fail, home_option, set_home
from fabric_query.cli_interrupt import on_interrupt
from fabric_query.errors import FabricQueryError

measurement_app = typer.Typer(help="Evaluation and benchmarks (each imports fabric_assets.measurement in its body).")
#: A bench interrupted: it reports its figures only at its end.
MEASURED = ("no figures were printed or written; the next run measures again, reusing what a --work-dir or "
            "--cache-dir holds")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks that print figures and ratios.")
measurement_app.add_typer(bench_app, name="bench")


@measurement_app.command("eval")
@on_interrupt("no scores were printed or written; its scratch home is removed (a --work-dir "
               "keeps it for the next run)")
def eval_cmd(
    beir_dir: Annotated[Path, typer.Argument(help="A BEIR folder: corpus.jsonl, queries.jsonl, qrels/test.tsv.")],
    limit_queries: Annotated[Optional[int], typer.Option("--limit-queries", min=1)] = None,
    split: Annotated[str, typer.Option(help="test (reported), dev (tuning) or all.")] = "test",
    config: Annotated[Optional[Path], typer.Option(help="A Fabric config JSON to evaluate.")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json-out")] = None,
    work_dir: Annotated[Optional[Path], typer.Option(
        "--work-dir", help="Keep the scratch home here and reuse it (re-ingest is a no-op scan); a folder "
        "fabric eval did not make, or one another eval is using, is refused.")] = None,
) -> None:
    """Ingest a BEIR collection through Dagster and score Fabric, its channels and baselines."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from fabric_assets.measurement.eval_run import markdown_table, run_eval
    from fabric_assets.measurement.harness import BeirFormatError, WorkDirError
    from fabric_resources.config import FabricConfig

    if split not in ("test", "dev", "all"):
        fail("--split must be test, dev or all")
    if not (beir_dir / "corpus.jsonl").exists():
        fail(f"{beir_dir} has no corpus.jsonl")
    if config and not (config.exists() or config.is_symlink()):
        # FabricConfig.load reads a missing file as the defaults (a home's config.json): a mistyped
        # --config scored the defaults and printed them as the file's figures.
        fail(f"--config {config}: no such file")
    cfg = FabricConfig.load(config) if config else None
    try:
        result = run_eval(beir_dir, limit_queries=limit_queries, split=split, config=cfg,  # type: ignore[arg-type]
                          work_dir=work_dir, progress=lambda line: err.print(line, markup=False, highlight=False))
    except (BeirFormatError, WorkDirError) as exc:
        fail(str(exc))
    if json_out:
        json_out.write_text(json.dumps(result, indent=2))
    # Variant names like [rrf-multilingual] are not markup; soft_wrap: a Markdown row cut at the
    # terminal's (or a file's 80-column) width is no table row any more.
    console.print(markdown_table(result), markup=False, soft_wrap=True)
    console.print(f"ingest {result['ingest_seconds']} s, {result['documents']} documents, {result['chunks']} chunks; "
                  f"nDCG gain: {result['ndcg_gain']}")
    if result["chunks_without_query_model_vector"]:
        console.print(f"note: {result['chunks_without_query_model_vector']} chunks have another model's vector (a "
                      "mixed-language collection): flat-cosine and lancedb-hybrid cannot rank them; bm25s and "
                      "lancedb-fts index every chunk", markup=False)
    missing, untexted = result["unscorable"]["missing_documents"], result["unscorable"]["queries_without_text"]
    if missing or untexted:
        console.print(f"note: {missing} relevant judgements name documents absent from corpus.jsonl (counted as "
                      f"relevant, never retrieved, as in trec_eval); {untexted} judged queries of the split have no "
                      "text in queries.jsonl (not run)", markup=False)


@bench_app.command("ingest")
@on_interrupt(MEASURED)
def bench_ingest_cmd(
    path: Annotated[Path, typer.Argument(help="Folder to ingest into a scratch home.")],
    split: Annotated[Optional[int], typer.Option(help="Cut the folder's text into N files of 2–8 KB first.")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Ingest figures: counts, time by asset, orchestration overhead, ratio to a bare encode, peak RSS."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from fabric_assets.measurement.bench_ingest import as_dict, bench_ingest

    result = as_dict(bench_ingest(path, split=split))
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
        return
    table = Table(title="fabric bench ingest", show_header=False)
    for k, v in result.items():
        if k != "formats":
            table.add_row(k, json.dumps(v) if isinstance(v, dict) else str(v))
    console.print(table)
    if result["formats"]:
        per_format = Table(title="parse per format (each file once, the home's parser settings)")
        columns = ("files", "failed", "pages", "units", "parse_s", "pages_per_s", "units_per_s")
        for col in ("parser", *columns):
            per_format.add_column(col)
        for name, row in result["formats"].items():
            per_format.add_row(name, *(str(row[c]) for c in columns))
        console.print(per_format)


@measurement_app.command("eval-tune")
@on_interrupt("no scores were printed or written; the --work-dir homes are kept for the next run")
def eval_tune_cmd(
    beir_dirs: Annotated[list[Path], typer.Argument(help="BEIR folders (every retrieval collection to choose on).")],
    work_dir: Annotated[Path, typer.Option("--work-dir", help="Scratch homes: <work-dir>/<collection>/home, as "
                                                              "`fabric eval --work-dir <work-dir>/<collection>`.")],
    limit_queries: Annotated[Optional[int], typer.Option("--limit-queries", min=1,
                                                         help="At most this many dev queries per collection.")] = None,
    quick: Annotated[bool, typer.Option(help="A small grid (feedback off/idf, no stop words, section-guided on, "
                                              "RRF k 60) for a smoke run.")] = False,
    json_out: Annotated[Optional[Path], typer.Option("--json-out")] = None,
) -> None:
    """Choose the query-time defaults on the dev halves of all the collections at once: by the worst
    collection's margin over the best baseline or channel (leximin), then the best mean margin within
    one paired standard error of that; leave-one-collection-out beside it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from fabric_assets.measurement.harness import BeirFormatError, WorkDirError
    from fabric_assets.measurement.tuning import Grid, tune

    for d in beir_dirs:
        if not (d / "corpus.jsonl").exists():
            fail(f"{d} has no corpus.jsonl")
    grid = (Grid(feedback=("off", "idf"), query_term_frequency=(False,), stopwords=("none",), section_guided=(True,),
                 bigram_bm25=((0.5, 0.3),), dense_window_weight=(0.0,), dense_feedback=(0.0,), rrf_k=(60,))
            if quick else Grid())
    try:
        result = tune(beir_dirs, work_dir, grid, limit_queries=limit_queries)
    except (BeirFormatError, WorkDirError) as exc:
        fail(str(exc))
    if json_out:
        json_out.write_text(json.dumps(result, indent=2))
    names = [c["name"] for c in result["collections"]]
    rows = []
    for label, row in [("chosen", result["chosen"]), ("leximin", result["leximin"]),
                       ("current defaults", result["defaults"])] + [
            (f"chosen without {n}", result["leave_one_out"][n]) for n in names]:
        if row is None:
            continue
        rows.append({"point": label, **{n: f"{row['margins'][n]:+.4f}" for n in names},
                     "worst": f"{row['worst_margin']:+.4f}", "mean": f"{row['mean_margin']:+.4f}",
                     "settings": json.dumps({**row["passes"], **row["fusion"]})})
    _print_rows(f"margin of fused nDCG@10 over the best baseline or channel, dev halves ({result['points']} points)",
                rows)
    console.print(f"defaults reproduced: {'yes' if result['defaults_reproduced'] else 'no'}")


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
@on_interrupt(MEASURED)
def bench_incremental_cmd(
    path: Annotated[Path, typer.Argument(help="Folder whose text files supply the documents.")],
    sizes: Annotated[str, typer.Option(help="Comma-separated corpus sizes.")] = "1000,2000",
    doc_bytes: Annotated[int, typer.Option(min=100, help="Characters per document.")] = 1_000,
    rounds: Annotated[int, typer.Option(min=1, help="Changes timed per size (the median is reported).")] = 3,
    json_out: JsonOutOption = None,
) -> None:
    """Time from one edit + one delete + one add to the new release, at several corpus sizes (warm process)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from fabric_assets.measurement.bench_incremental import bench_incremental, incremental_rows

    if not path.is_dir():
        _skipped(FileNotFoundError(f"{path} is not a folder (../shared is provided on project machines and in CI)"))
    try:
        result = bench_incremental(path, tuple(int(s) for s in sizes.split(",")), doc_bytes, rounds)
    except ValueError as exc:
        fail(str(exc))
    _print_rows("fabric bench incremental (seconds)", incremental_rows(result))
    console.print(f"growth {result['ratio_change_largest_to_smallest']} (target ≤ "
                  f"{result['target_ratio_change_largest_to_smallest']}), share of the smallest full ingest "
                  f"{result['ratio_change_to_full_ingest_smallest']:.2%} (target ≤ "
                  f"{result['target_ratio_change_to_full_ingest_smallest']:.0%})")
    _write_json(result, json_out)


@bench_app.command("retention")
@on_interrupt(MEASURED)
def bench_retention_cmd(
    path: Annotated[Path, typer.Argument(help="A corpus folder (its .txt and .md files are edited).")],
    edits: Annotated[int, typer.Option(min=1, help="Rounds of edits, each followed by an ingest.")] = 5,
    work_dir: Annotated[Optional[Path], typer.Option(
        "--work-dir", help="Keep the corpora and homes here; default: scratch, removed.")] = None,
    json_out: JsonOutOption = None,
) -> None:
    """Bounded disk: edit every text file N times with re-ingests, cleanup on; home size vs a fresh ingest."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from fabric_assets.measurement.bench_retention import bench_retention, retention_rows

    if not path.is_dir():
        _skipped(FileNotFoundError(f"{path} is not a folder (../shared is provided on project machines and in CI)"))
    result = bench_retention(path, edits, work_dir)
    _print_rows("fabric bench retention (bytes)", retention_rows(result))
    console.print(f"{result['text_files_edited']} text files edited {edits} times; edited home / fresh ingest = "
                  f"{result['ratio']} (target ≤ {result['target_ratio']}); without Dagster's storage "
                  f"{result['ratio_without_dagster']}")
    _write_json(result, json_out)


@bench_app.command("walk")
@on_interrupt(MEASURED)
def bench_walk_cmd(
    folders: Annotated[int, typer.Option(min=1, help="Folders in the scratch tree (one file each).")] = 20_000,
    repeat: Annotated[int, typer.Option(min=1, help="Walks per variant, alternating (the best is reported).")] = 5,
    json_out: JsonOutOption = None,
) -> None:
    """The scan's walk of a source tree, with and without its Fabric-home check (ratio)."""
    from fabric_assets.measurement.bench_walk import bench_walk, walk_rows

    row = walk_rows(bench_walk(folders, repeat))
    console.print(f"{row['folders']} folders, {row['files']} files: walk {row['with_check_ms']:.0f} ms, without the "
                  f"home check {row['without_check_ms']:.0f} ms, ratio {row['ratio']:.2f} "
                  f"({row['per_folder_us']:.1f} µs per folder)", markup=False)
    if json_out:
        json_out.write_text(json.dumps(row, indent=2) + "\n")


@bench_app.command("catalog")
@on_interrupt(MEASURED)
def bench_catalog_cmd(
    parses: Annotated[int, typer.Option(min=1, help="New files whose catalog writes are replayed.")] = 500,
    repeat: Annotated[int, typer.Option(min=1, help="Rounds per mode, alternating (medians reported).")] = 3,
    ingest: Annotated[Optional[Path], typer.Option(
        help="Also ingest this folder per mode (default: the sample corpus).")] = None,
    no_ingest: Annotated[bool, typer.Option("--no-ingest", help="Only the write paths.")] = False,
    work_dir: Annotated[Optional[Path], typer.Option(
        "--work-dir", help="Where the scratch catalogs go (measure on the file system homes live on).")] = None,
    json_out: JsonOutOption = None,
) -> None:
    """SQLite catalog durability: synchronous=FULL vs NORMAL on its write paths and an ingest, one process."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import tempfile

    from fabric_assets.measurement.bench_catalog import bench_catalog, catalog_rows
    from fabric_assets.sample_corpus import write_sample_corpus

    with tempfile.TemporaryDirectory(prefix="fabric-bench-corpus-") as tmp:
        folder = None if no_ingest else (ingest or write_sample_corpus(Path(tmp) / "sample")).resolve()
        result = bench_catalog(parses, repeat, folder, work_dir)
    _print_rows("fabric bench catalog (seconds unless named)", catalog_rows(result))
    line = (f"write paths FULL / NORMAL = {result['write_paths_ratio']}, median scan commit "
            f"{result['scan_commit_median_ratio']} ({result['full_extra_ms_per_commit']:+} ms per commit)")
    if "ingest" in result:
        line += (f"; ingest FULL / NORMAL = {result['ingest_ratio']} (commits x extra cost = "
                 f"{result['ingest_full_extra_s_estimate']} s of {result['ingest']['FULL']['seconds']} s)")
    console.print(line)
    _write_json(result, json_out)


@bench_app.command("scale")
@on_interrupt(MEASURED)
def bench_scale_cmd(
    documents: Annotated[int, typer.Option(min=2, help="Tiny distinct documents = parse partitions.")] = 10_000,
    shared: SharedOption = Path("../shared"),
    work_dir: Annotated[Optional[Path], typer.Option(
        "--work-dir", help="Keep the corpus and home here (must not hold a home yet); default: scratch, removed.")] = None,
    ui: Annotated[bool, typer.Option("--ui/--no-ui", help="Start dagster-webserver and time GraphQL queries.")] = True,
    ui_repeat: Annotated[int, typer.Option(min=1)] = 3,
    stock_event_log: Annotated[bool, typer.Option(
        "--stock-event-log", help="Baseline: Dagster's own SQLite event log instead of Fabric's.")] = False,
    json_out: JsonOutOption = None,
) -> None:
    """Dagster at many partitions: one sensor tick, the parse runs (Dagster overhead per partition), the UI."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from fabric_assets.measurement.bench_scale import bench_scale, summary_rows
    from fabric_assets.measurement.scaling_corpus import SharedCorpusMissing

    try:
        result = bench_scale(shared, documents, work_dir=work_dir, ui=ui, ui_repeat=ui_repeat,
                             stock_event_log=stock_event_log, log=lambda m: err.print(f"[dim]{m}[/dim]"))
    except SharedCorpusMissing as exc:
        _skipped(exc)
    except FileExistsError as exc:
        fail(str(exc))
    _print_rows(f"fabric bench scale --documents {documents}", summary_rows(result))
    _write_json(result, json_out)


@bench_app.command("lexical")
@on_interrupt(MEASURED)
def bench_lexical_cmd(
    corpus: Annotated[Path, typer.Argument(help="Folder whose .txt files supply real text (e.g. ../shared/corpus).")],
    chunks: Annotated[int, typer.Option(min=100)] = 100_000,
    repeat: Annotated[int, typer.Option(min=1)] = 20,
) -> None:
    """Lexical path latency vs bare tantivy searches of the same queries on one index (p50/p95, ratio)."""
    from fabric_assets.measurement.bench_lexical import bench_lexical, corpus_texts

    texts = corpus_texts(corpus)
    if not texts:
        fail(f"no .txt files under {corpus}")
    sys.stdout.write(json.dumps(bench_lexical(texts, chunks, repeat), indent=2) + "\n")


@bench_app.command("lexical-update")
@on_interrupt(MEASURED)
def bench_lexical_update_cmd(
    corpus: Annotated[Path, typer.Argument(help="Folder whose .txt files supply real text (e.g. ../shared/corpus).")],
    sizes: Annotated[str, typer.Option(help="Comma-separated chunk counts.")] = "4000,20000",
    rounds: Annotated[int, typer.Option(min=1)] = 5,
) -> None:
    """One edit + one delete + one add written to the serving index: exact BM25 statistics vs deletes kept vs a rebuild."""
    from fabric_assets.measurement.bench_lexical_update import bench_lexical_update
    from fabric_assets.measurement.bench_lexical import corpus_texts

    texts = corpus_texts(corpus)
    if not texts:
        fail(f"no .txt files under {corpus}")
    result = bench_lexical_update(texts, tuple(int(s) for s in sizes.split(",")), rounds)
    sys.stdout.write(json.dumps(result, indent=2) + "\n")


@bench_app.command("storage")
@on_interrupt(MEASURED)
def bench_storage_cmd(
    path: Annotated[Optional[Path], typer.Argument(help="Folder to ingest (default: the sample corpus).")] = None,
    repeat: Annotated[int, typer.Option(min=1)] = 1,
) -> None:
    """Ingest on the embedded storage vs PostgreSQL + moto S3 on loopback, in one run (docs/scale.md)."""
    from fabric_assets.measurement.bench_storage import main

    raise typer.Exit(main([*([str(path)] if path else []), "--repeat", str(repeat)]))


@bench_app.command("query")
@on_interrupt(MEASURED)
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
    from fabric_assets.measurement.query_latency import DEFAULT_QUERIES, bench_query

    if chunks:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from fabric_assets.measurement.bench_query import bench_query_scale, growth_rows, stage_rows, summary_rows
        from fabric_assets.measurement.scaling_corpus import SharedCorpusMissing

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
    path = set_home(home)
    try:
        result = bench_query(Fabric(path), list(queries or DEFAULT_QUERIES), repeat)
    except FabricQueryError as exc:
        fail(str(exc))
    sys.stdout.write(json.dumps(result, indent=2) + "\n")
    if json_out:  # stdout is the JSON itself here: no "wrote" line on it
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result, indent=2) + "\n")


@bench_app.command("ann")
@on_interrupt(MEASURED)
def bench_ann_cmd(
    target_rows: Annotated[int, typer.Option("--target-rows", min=1000, help="Chunk vectors to grow to.")] = 1_000_000,
    chunks: Annotated[int, typer.Option("--chunks", min=10, help="Size of the scaling home grown from "
                                        "(built through the real pipeline once, as `bench query --chunks`).")] = 100_000,
    home: Annotated[Optional[Path], typer.Option(
        "--home", parser=home_option, metavar="<path>", help="Grow this home's release instead of a scaling home.")]
        = None,
    cache_dir: Annotated[Path, typer.Option("--cache-dir", help="Where scaling and grown homes are kept and reused.")]
        = Path(".fabric-bench"),
    shared: SharedOption = Path("../shared"),
    index_type: Annotated[Optional[list[str]], typer.Option(
        "--index-type", help="ANN setting to measure (repeatable): IVF_PQ, IVF_RQ, IVF_HNSW_SQ or IVF_FLAT, "
        "as query.dense_search.index_type (default: the config's).")]
        = None,
    setting: Annotated[Optional[list[str]], typer.Option(
        "--setting", help="A query.dense_search JSON object to measure (repeatable; overrides --index-type).")] = None,
    english_queries: Annotated[int, typer.Option(min=1, help="Cranfield questions.")] = 50,
    multilingual_queries: Annotated[int, typer.Option(min=0, help="JSQuAD questions.")] = 10,
    recall_queries: Annotated[int, typer.Option(
        "--recall-queries", min=0, help="Cranfield questions whose dense rankings are compared (not timed).")] = 225,
    repeat: Annotated[int, typer.Option(min=1)] = 3,
    seed: Annotated[int, typer.Option()] = 0,
    lexical_segment_documents: Annotated[Optional[int], typer.Option(
        "--lexical-segment-documents", min=1, help="Build the grown release's word index with segments of at most "
        "this many documents (default: the product's 1,024).")] = None,
    json_out: JsonOutOption = None,
) -> None:
    """The dense channel at a million chunks: real vectors grown by seeded perturbation, exact product vs
    the ANN first pass with exact re-scoring (p50/p95, recall@10, index build time, query RSS; one run).

    The method is in fabric_assets/measurement/bench_ann.py; the figures in docs/benchmarks.md."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from fabric_assets.measurement.bench_ann import bench_ann, summary_rows
    from fabric_assets.measurement.bench_query import benchmark_queries, prepare_scaling_home
    from fabric_assets.measurement.scaling_corpus import SharedCorpusMissing, load_english_pool

    def log(m: str) -> None:
        err.print(f"[dim]{m}[/dim]")

    try:
        queries = benchmark_queries(shared, english_queries, multilingual_queries)
        more = benchmark_queries(shared, recall_queries, 0) if recall_queries else []
        if home is None:
            built = prepare_scaling_home(cache_dir, chunks, load_english_pool(shared), log=log)
            if not built.manifest.get("ingested"):
                fail(f"the ingest of {built.directory} did not complete")
            source = built.home
        else:
            source = home
    except SharedCorpusMissing as exc:
        _skipped(exc)
    settings = [json.loads(s) for s in setting] if setting else [{"index_type": t} for t in (index_type or [])] or None
    result = bench_ann(source, cache_dir / "ann", queries, target_rows=target_rows, settings=settings, repeat=repeat,
                       seed=seed, recall_queries=more, lexical_segment_documents=lexical_segment_documents, log=log)
    _print_rows(f"fabric bench ann ({result['grown']['rows']['chunk_vectors']:,} vectors grown from "
                f"{result['grown']['source_rows']:,}; {len(queries)} queries × {repeat})", summary_rows(result))
    for a in result["ann"]:
        console.print(f"{a['build']['record']['spec']}: ratios ANN / exact {json.dumps(a['ratios'])}")
    _write_json(result, json_out)


@bench_app.command("annotate")
@on_interrupt(MEASURED)
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
    from fabric_assets.measurement.bench_annotate import bench_annotate, summary_rows
    from fabric_assets.measurement.scaling_corpus import SharedCorpusMissing

    try:
        result = bench_annotate(excerpts, delay, concurrency, shared=shared, baseline_excerpts=baseline_excerpts)
    except SharedCorpusMissing as exc:
        _skipped(exc)
    except ValueError as exc:
        fail(str(exc))
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


@bench_app.command("serve")
@on_interrupt(MEASURED)
def bench_serve_cmd(
    queries: Annotated[Optional[list[str]], typer.Argument(help="Queries (default: the fixed mixed-language set).")] = None,
    requests: Annotated[int, typer.Option(min=1, help="Searches per concurrency level and path.")] = 200,
    cli_runs: Annotated[int, typer.Option(min=1, help="Cold `fabric search` processes, with and without a server.")] = 5,
    home: HomeOption = None,
    json_out: JsonOutOption = None,
) -> None:
    """HTTP API vs in-process API (p50/p95, throughput at concurrency 1, 4, 16) and a cold CLI search
    with and without a running server, on one home in one run."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from fabric_assets.measurement.bench_serve import bench_serve, serve_rows

    path = set_home(home)
    try:
        result = bench_serve(path, queries, requests=requests, cli_runs=cli_runs, log=err.print)
    except (FabricQueryError, RuntimeError) as exc:
        fail(str(exc))
    _print_rows("fabric bench serve", serve_rows(result))
    t = result["targets"]
    console.print(f"HTTP overhead at p50, concurrency 1 (paired): {result['http_overhead_p50_ms_c1']:.2f} ms "
                  f"(target ≤ {t['http_overhead_p50_ms_c1']}); CLI through the server p50 "
                  f"{result['cli']['with_server']['p50_ms']:.1f} ms (target ≤ {t['cli_with_server_p50_ms']}); "
                  f"request errors at concurrency 16: {result['errors_c16']} (503 from the gate not counted)")
    _write_json(result, json_out)
