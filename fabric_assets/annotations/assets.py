"""Annotation assets (group ``annotations``), partitioned by parse ID.

``context_windows → annotations → graph_mentions, graph_edges`` and ``annotations →
annotation_vectors``. They run after activation (``annotation_job``, requested by the
``annotate_after_activation`` sensor or by ``fabric ingest``) for active parses that have no
annotation verdict yet — and, with ``annotation.required_for_activation``, for parsed parses
whose other verdicts all passed, before they can activate. A new version of any of their tables
makes the next activation publish a release (``activation.activate.POST_ACTIVATION_TABLES``).

With ``annotation.enabled`` false every asset writes nothing and says ``disabled`` in its
metadata; the producer (and ``openai``) is never imported. A chain that fails after its retries
(endpoint down, malformed output) is left out, the chains that completed are written, and the
parse gets a failed ``annotations_are_complete`` verdict; window rows the producer refuses
(``ExcerptError``) write nothing and keep the parse's previous rows. Either way search is never
blocked, and activation only when annotation is required (the parse then waits, see
``gate.gate_status``; ``fabric ingest`` retries failed parses, the memo answering completed chains).
"""

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from fabric_assets.gate import ANNOTATION_VERDICT, REQUIRED_VERDICTS, Verdict, gate_status
from fabric_assets.graph.build import graph_rows
from fabric_assets.model_identity import definitions_config, dense_identity
from fabric_assets.partitions import PARTITIONED
from fabric_assets.verdicts import live_parse_ids, record_and_summarise
from fabric_resources.config import FabricConfig
from fabric_resources.dagster_resources import FabricHomeResource
from fabric_resources.home import FabricHome
from fabric_resources.schema import ANNOTATION_VECTORS, ANNOTATIONS, DENSE_DIM

#: Counters reported per parse and summed per run (``AnnotationStats``): HTTP requests, tokens of
#: the replies' ``usage``, chains answered by the memo, model items dropped as ungrounded, and
#: retries (chain restarts after malformed output + retried requests).
PRODUCER_COUNTERS = ("calls", "prompt_tokens", "completion_tokens", "memo_hits", "dropped_ungrounded", "retries",
                     "malformed_retries", "call_retries", "chain_failures")

#: The annotation memo (content × producer identity → output) lives beside the catalog; it
#: survives supersession, so unchanged text is never sent to the model twice.
MEMO_FILE = "annotation_memo.sqlite3"


_CONFIG = definitions_config()


def current_producer(config: FabricConfig) -> str:
    """The producer identity annotations of ``config`` are made by ("disabled" when off)."""
    if not config.annotation.enabled:
        return "disabled"
    from fabric_assets.annotations.producer import producer_identity

    return producer_identity(config.annotation, config.indexing)


def parses_needing_annotation(home: FabricHome, *, retry_failed: bool = False) -> list[str]:
    """Parse IDs to annotate, in parse-run creation order; ``[]`` when annotation is disabled.

    Candidates are the parses active in the current release and, with
    ``annotation.required_for_activation``, ``parsed`` parses whose every other required verdict
    passed (their projections are complete). A candidate is returned when it has no
    ``annotations_are_complete`` verdict yet, or (``retry_failed``) its last attempt failed.
    """
    cfg = home.config.annotation
    if not cfg.enabled:
        return []
    producer = current_producer(home.config)
    release = home.catalog.current_release()
    active = {m["parse_id"] for m in release.manifest["sources"].values()} if release else set()
    out = []
    for run in home.catalog.parse_runs():
        waiting = (cfg.required_for_activation and run.status == "parsed"
                   and gate_status(run.verdicts, REQUIRED_VERDICTS) == ("ready", []))
        if run.parse_id not in active and not waiting:
            continue
        verdict = run.verdicts.get(ANNOTATION_VERDICT)
        if (verdict is None or verdict.get("producer") != producer
                or (retry_failed and not verdict.get("passed"))):
            out.append(run.parse_id)
    return out


def _metadata(values: dict[str, Any]) -> dict[str, dg.MetadataValue]:
    """Typed metadata (ints and floats show as numbers in the UI and plot over time)."""
    out: dict[str, dg.MetadataValue] = {}
    for k, v in values.items():
        if isinstance(v, bool) or isinstance(v, str):
            out[k] = dg.MetadataValue.text(str(v))
        elif isinstance(v, int):
            out[k] = dg.MetadataValue.int(v)
        elif isinstance(v, float):
            out[k] = dg.MetadataValue.float(round(v, 3))
        else:
            out[k] = dg.MetadataValue.text(str(v))
    return out


def _disabled(context: dg.AssetExecutionContext, asset_keys: list[str]) -> None:
    for key in asset_keys:
        for pk in context.partition_keys:
            context.add_asset_metadata({"annotation": "disabled"}, asset_key=key, partition_key=pk)


def _open_producer(home: FabricHome):
    """``annotate_parse``, the memo and the chat client — imported here only, so a home with
    annotation disabled never loads ``openai``."""
    from fabric_resources.annotator.client import ChatClient
    from fabric_resources.annotator.memo import AnnotationMemo
    from fabric_assets.annotations.producer import annotate_parse

    return annotate_parse, AnnotationMemo(home.root / MEMO_FILE), ChatClient.from_config(home.config.annotation)


def _counters(stats) -> dict[str, int]:
    """``PRODUCER_COUNTERS`` of one ``AnnotationStats``."""
    return {
        "calls": stats.calls, "prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.completion_tokens,
        "memo_hits": stats.memo_hits, "dropped_ungrounded": stats.dropped_ungrounded.total,
        "retries": stats.malformed_retries + stats.call_retries, "malformed_retries": stats.malformed_retries,
        "call_retries": stats.call_retries, "chain_failures": len(stats.failures),
    }


def _verdict(rows: pa.Table, stats, producer: str) -> Verdict:
    """Passed when every chain of every excerpt completed (fresh or from the memo); records the
    producer so a model or prompt change makes the parse need annotation again."""
    if stats.failures:
        first = stats.failures[0]
        return {"passed": False, "producer": producer,
                "detail": f"{len(stats.failures)} of {stats.chains} chains failed, e.g. "
                f"{first.chain} of excerpt {first.excerpt_ordinal}: {first.reason}: {first.detail}"[:500]}
    return {"passed": True, "producer": producer,
            "detail": f"{rows.num_rows} annotations from {stats.excerpts} excerpts"}


@dg.asset(
    **PARTITIONED,
    deps=["context_windows"],
    group_name="annotations",
    # The producer identity (prompts, schemas, model, endpoint, excerpt sizing, generation settings).
    code_version=f"annotations-v1:{current_producer(_CONFIG)}",
    check_specs=[dg.AssetCheckSpec(ANNOTATION_VERDICT, asset="annotations")],
    description="Grounded LLM annotations (entities, relations with quotes, summaries) of each parse's "
    "excerpts of indexing.excerpt_windows context windows; memoised by content × producer.",
)
def annotations(context: dg.AssetExecutionContext, fabric: FabricHomeResource) -> Iterator:
    home = fabric.open()
    started = time.perf_counter()
    if not home.config.annotation.enabled:
        _disabled(context, ["annotations"])
        yield dg.MaterializeResult(metadata={"annotation": "disabled"})
        yield dg.AssetCheckResult(check_name=ANNOTATION_VERDICT, asset_key="annotations", passed=True,
                                  metadata={"annotation": "disabled"})
        return
    from fabric_assets.annotations.excerpts import ExcerptError

    live = live_parse_ids(home, list(context.partition_keys))
    annotate_parse, memo, client = _open_producer(home)
    windows = home.tables.read("context_windows", parse_ids=live)
    written, tables, verdicts = [], [], {}
    totals = dict.fromkeys(PRODUCER_COUNTERS, 0)
    try:
        for pk in live:
            mine = windows.filter(pc.equal(windows.column("parse_id"), pk))
            try:
                rows, stats = annotate_parse(mine, home.config, memo, client)
            except ExcerptError as exc:  # windows breaking the contract: this parse only, previous rows kept
                verdicts[pk] = {"passed": False, "producer": current_producer(home.config), "detail": f"ExcerptError: {exc}"[:500]}
                context.add_asset_metadata(_metadata({"outcome": "excerpt-error", "windows": mine.num_rows}),
                                           partition_key=pk)
                continue
            written.append(pk)
            tables.append(rows)
            verdicts[pk] = _verdict(rows, stats, current_producer(home.config))
            counts = _counters(stats)
            totals = {k: totals[k] + counts[k] for k in PRODUCER_COUNTERS}
            kinds = Counter(rows.column("kind").to_pylist())
            context.add_asset_metadata(_metadata({
                "outcome": "complete" if verdicts[pk]["passed"] else "incomplete", "windows": mine.num_rows,
                "excerpts": stats.excerpts, **counts, "entities": kinds["entity"], "relations": kinds["relation"],
                "summaries": kinds["summary"], "wall_seconds": stats.wall_s}), partition_key=pk)
    finally:
        memo.close()
    out = pa.concat_tables(tables).cast(ANNOTATIONS) if tables else ANNOTATIONS.empty_table()
    # Chains that completed are kept even when others failed (their rows are grounded); a re-run
    # answers them from the memo and calls the model only for the failed ones.
    version = home.tables.replace_partitions("annotations", written, out) if written else None
    yield dg.MaterializeResult(metadata=_metadata({
        **totals, "parses_complete": sum(v["passed"] for v in verdicts.values()),
        "parses_incomplete": sum(not v["passed"] for v in verdicts.values()), "rows": out.num_rows,
        "lance_version": version if version is not None else -1, "wall_seconds": time.perf_counter() - started,
    }))
    yield record_and_summarise(home, ANNOTATION_VERDICT, "annotations", verdicts)


@dg.multi_asset(
    **PARTITIONED,
    specs=[
        dg.AssetSpec("graph_mentions", deps=["annotations"], group_name="annotations",
                     description="Entity mentions per parse: normalised entity_key shared across documents, "
                     "the name as written, the supporting spans."),
        dg.AssetSpec("graph_edges", deps=["annotations"], group_name="annotations",
                     description="Relation edges per parse: normalised subject/predicate/object, the "
                     "supporting spans of their quotes."),
    ],
    name="graph",
    code_version="graph-v1",
    description="The cross-document entity graph rows of each parse (fabric_assets.graph.build).",
)
def graph(context: dg.AssetExecutionContext, fabric: FabricHomeResource) -> Iterator:
    home = fabric.open()
    started = time.perf_counter()
    if not home.config.annotation.enabled:
        _disabled(context, ["graph_mentions", "graph_edges"])
        for key in ("graph_mentions", "graph_edges"):
            yield dg.MaterializeResult(asset_key=key, metadata={"annotation": "disabled"})
        return
    live = live_parse_ids(home, list(context.partition_keys))
    mentions, edges = graph_rows(home.tables.read("annotations", parse_ids=live))
    versions = {"graph_mentions": home.tables.replace_partitions("graph_mentions", live, mentions),
                "graph_edges": home.tables.replace_partitions("graph_edges", live, edges)}
    m_pids, m_keys = mentions.column("parse_id").to_pylist(), mentions.column("entity_key").to_pylist()
    edge_count = Counter(edges.column("parse_id").to_pylist())
    for pk in live:
        context.add_asset_metadata(_metadata({
            "mentions": m_pids.count(pk), "entities": len({k for p, k in zip(m_pids, m_keys) if p == pk})}),
            asset_key="graph_mentions", partition_key=pk)
        context.add_asset_metadata(_metadata({"edges": edge_count[pk]}), asset_key="graph_edges", partition_key=pk)
    wall = time.perf_counter() - started
    yield dg.MaterializeResult(asset_key="graph_mentions", metadata=_metadata({
        "rows": mentions.num_rows, "entities": len(set(mentions.column("entity_key").to_pylist())),
        "lance_version": versions["graph_mentions"], "wall_seconds": wall}))
    yield dg.MaterializeResult(asset_key="graph_edges", metadata=_metadata({
        "rows": edges.num_rows, "lance_version": versions["graph_edges"], "wall_seconds": wall}))


@dg.asset(
    **PARTITIONED,
    deps=["annotations"],
    group_name="annotations",
    code_version=f"annotation-vectors-v1:{dense_identity(_CONFIG)}",
    description="Dense vectors (384-d, unit norm, the chunk_vectors model of dense.backend) of summary and relation "
    "annotation texts: the annotation-embedding route of the graph channel.",
)
def annotation_vectors(context: dg.AssetExecutionContext, fabric: FabricHomeResource) -> Iterator:
    home = fabric.open()
    started = time.perf_counter()
    if not home.config.annotation.enabled:
        _disabled(context, ["annotation_vectors"])
        yield dg.MaterializeResult(metadata={"annotation": "disabled"})
        return
    live = live_parse_ids(home, list(context.partition_keys))
    ann = home.tables.read("annotations", parse_ids=live, columns=["parse_id", "annotation_id", "kind", "text"])
    ann = ann.filter(pc.is_in(ann.column("kind"), pa.array(["summary", "relation"])))
    embedder = fabric.dense_encoder()  # the chunk_vectors model: one query vector serves both
    t0 = time.perf_counter()
    vectors = embedder.encode_passages(ann.column("text").to_pylist())
    encode_s = time.perf_counter() - t0
    rows = pa.table(
        {
            "parse_id": ann.column("parse_id"),
            "annotation_id": ann.column("annotation_id"),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), DENSE_DIM),
            "model": [embedder.identity] * ann.num_rows,
        },
        schema=ANNOTATION_VECTORS,
    )
    version = home.tables.replace_partitions("annotation_vectors", live, rows)
    per_parse = Counter(ann.column("parse_id").to_pylist())
    for pk in live:
        context.add_asset_metadata(_metadata({"rows": per_parse[pk], "model": embedder.identity}), partition_key=pk)
    yield dg.MaterializeResult(metadata=_metadata({
        "rows": rows.num_rows, "model": embedder.identity, "lance_version": version,
        "encode_seconds": encode_s, "wall_seconds": time.perf_counter() - started}))
