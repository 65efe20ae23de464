"""Annotation assets (group ``annotations``), partitioned by parse ID.

``context_windows → annotations → graph_mentions, graph_edges`` and ``annotations →
annotation_vectors``. They run after activation (``annotation_job``, requested by the
``annotate_after_activation`` sensor or by ``fabric ingest``) for active parses that have no
annotation verdict yet — and, with ``annotation.required_for_activation``, for parsed parses
whose other verdicts all passed, before they can activate. A new version of any of their tables
makes the next activation publish a release (``projections.POST_ACTIVATION_TABLES``). Which parses
need annotation is decided in ``planning``; the chat client comes from the ``annotator`` resource.

With ``annotation.enabled`` false (the default) every asset writes nothing and is *skipped* in
Dagster, not materialized (``PartitionStep.skip``): ``annotations`` yields no output, so Dagster
skips the ``graph`` and ``annotation_vectors`` steps of the same run; the producer (and ``openai``)
is never imported. A chain that fails after its retries
(endpoint down, malformed output) is left out, the chains that completed are written, and the
parse gets a failed ``annotations_are_complete`` verdict; window rows the producer refuses
(``ExcerptError``) write nothing and keep the parse's previous rows. Either way search is never
blocked, and activation only when annotation is required (the parse then waits, see
``gate.gate_status``; ``fabric ingest`` retries failed parses, the memo answering completed chains).
"""

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from fabric_assets.annotations.planning import current_producer
from fabric_assets.gate import Verdict
from fabric_assets.graph.build import graph_rows
from fabric_assets.partition_step import PartitionStep, optional_asset_args, spec
from fabric_assets.partitions import PARTITIONED
from fabric_assets.projections import ANNOTATION_VERDICT
from fabric_resources.dagster_resources import AnnotatorResource, DenseEncoderResource, FabricHomeResource
from fabric_resources.schema import ANNOTATION_VECTORS, ANNOTATIONS, DENSE_DIM, HomeLayout

#: Counters reported per parse and summed per run (``AnnotationStats``): HTTP requests, tokens of
#: the replies' ``usage``, chains answered by the memo, model items dropped as ungrounded, and
#: retries (chain restarts after malformed output + retried requests).
PRODUCER_COUNTERS = ("calls", "prompt_tokens", "completion_tokens", "memo_hits", "dropped_ungrounded", "retries",
                     "malformed_retries", "call_retries", "chain_failures")

#: The annotation memo (content × producer identity → output) lives beside the catalog; it
#: survives supersession, so unchanged text is never sent to the model twice. An entry goes when
#: retention, a purge or a restore removes the last parse that used it.
MEMO_FILE = HomeLayout(Path(".")).annotation_memo.name


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


# The producer identity (prompts, schemas, model, endpoint, excerpt sizing, generation settings) enters
# the code version (projections.Identity.ANNOTATOR).
@dg.multi_asset(**optional_asset_args(
    "annotations", "Grounded LLM annotations (entities, relations with quotes, summaries) of each parse's "
    "excerpts of indexing.excerpt_windows context windows; memoised by content × producer."))
def annotations(context: dg.AssetExecutionContext, fabric: FabricHomeResource,
                annotator: AnnotatorResource) -> Iterator:
    started = time.perf_counter()
    step = PartitionStep(context, fabric.open(), "annotations")
    if not step.enabled:
        step.skip()
        return
    # Imported here only, so that a home with annotation disabled never loads ``openai``.
    from fabric_assets.annotations.excerpts import ExcerptError
    from fabric_assets.annotations.producer import annotate_parse
    from fabric_resources.annotator.memo import AnnotationMemo

    home = step.home
    producer = current_producer(step.config)
    memo, client = AnnotationMemo(home.root / MEMO_FILE), annotator.client(step.config)
    written, outcomes = [], []
    totals = dict.fromkeys(PRODUCER_COUNTERS, 0)
    try:
        for pk, mine in step.by_parse(step.read("context_windows")):
            try:
                rows, stats = annotate_parse(mine, step.config, memo, client)
            except ExcerptError as exc:  # windows breaking the contract: this parse only, previous rows kept
                step.verdict(ANNOTATION_VERDICT, pk, {"passed": False, "producer": producer,
                                                      "detail": f"ExcerptError: {exc}"[:500]})
                outcomes.append(False)
                step.partition_metadata(pk, _metadata({"outcome": "excerpt-error", "windows": mine.num_rows}))
                continue
            written.append(pk)
            step.add_rows(rows.cast(ANNOTATIONS))
            verdict = _verdict(rows, stats, producer)
            step.verdict(ANNOTATION_VERDICT, pk, verdict)
            outcomes.append(verdict["passed"])
            counts = _counters(stats)
            totals = {k: totals[k] + counts[k] for k in PRODUCER_COUNTERS}
            kinds = Counter(rows.column("kind").to_pylist())
            step.partition_metadata(pk, _metadata({
                "outcome": "complete" if verdict["passed"] else "incomplete", "windows": mine.num_rows,
                "excerpts": stats.excerpts, **counts, "entities": kinds["entity"], "relations": kinds["relation"],
                "summaries": kinds["summary"], "wall_seconds": stats.wall_s}))
    finally:
        memo.close()
    # Chains that completed are kept even when others failed (their rows are grounded); a re-run
    # answers them from the memo and calls the model only for the failed ones. Only the parses
    # annotated are replaced: one refused by ExcerptError keeps its rows.
    version = step.write(written)["annotations"]
    step.run_metadata(_metadata({
        **totals, "parses_complete": sum(outcomes), "parses_incomplete": len(outcomes) - sum(outcomes),
        "rows": step.rows_added(), "lance_version": version if version is not None else -1,
        "wall_seconds": time.perf_counter() - started,
    }))
    yield from step.finish()


@dg.multi_asset(
    **PARTITIONED,
    specs=[
        spec("graph_mentions", "Entity mentions per parse: normalised entity_key shared across documents, "
             "the name as written, the supporting spans."),
        spec("graph_edges", "Relation edges per parse: normalised subject/predicate/object, the "
             "supporting spans of their quotes."),
    ],
    name="graph",
    description="The cross-document entity graph rows of each parse (fabric_assets.graph.build).",
)
def graph(context: dg.AssetExecutionContext, fabric: FabricHomeResource) -> Iterator:
    started = time.perf_counter()
    step = PartitionStep(context, fabric.open(), "graph_mentions", "graph_edges")
    if not step.enabled:  # run on its own (with annotations in the run, Dagster skips this step)
        step.skip()
        return
    mentions, edges = graph_rows(step.read("annotations"))
    step.add_rows(mentions, "graph_mentions")
    step.add_rows(edges, "graph_edges")
    versions = step.write(step.live)
    m_pids, m_keys = mentions.column("parse_id").to_pylist(), mentions.column("entity_key").to_pylist()
    edge_count = Counter(edges.column("parse_id").to_pylist())
    for pk in step.live:
        step.partition_metadata(pk, _metadata({
            "mentions": m_pids.count(pk), "entities": len({k for p, k in zip(m_pids, m_keys) if p == pk})}),
            "graph_mentions")
        step.partition_metadata(pk, _metadata({"edges": edge_count[pk]}), "graph_edges")
    wall = time.perf_counter() - started
    step.run_metadata(_metadata({
        "rows": mentions.num_rows, "entities": len(set(mentions.column("entity_key").to_pylist())),
        "lance_version": versions["graph_mentions"], "wall_seconds": wall}), "graph_mentions")
    step.run_metadata(_metadata({
        "rows": edges.num_rows, "lance_version": versions["graph_edges"], "wall_seconds": wall}), "graph_edges")
    yield from step.finish()


@dg.multi_asset(**optional_asset_args(
    "annotation_vectors", "Dense vectors (384-d, unit norm, the chunk_vectors model of dense.backend) of summary "
    "and relation annotation texts: the annotation-embedding route of the graph channel."))
def annotation_vectors(context: dg.AssetExecutionContext, fabric: FabricHomeResource,
                       dense: DenseEncoderResource) -> Iterator:
    started = time.perf_counter()
    step = PartitionStep(context, fabric.open(), "annotation_vectors")
    if not step.enabled:  # run on its own (with annotations in the run, Dagster skips this step)
        step.skip()
        return
    ann = step.read("annotations", columns=["parse_id", "annotation_id", "kind", "text"])
    ann = ann.filter(pc.is_in(ann.column("kind"), pa.array(["summary", "relation"])))
    embedder = dense.encoder(step.config)  # the chunk_vectors model: one query vector serves both
    t0 = time.perf_counter()
    vectors = embedder.encode_passages(ann.column("text").to_pylist())
    encode_s = time.perf_counter() - t0
    step.add_rows(pa.table(
        {
            "parse_id": ann.column("parse_id"),
            "annotation_id": ann.column("annotation_id"),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), DENSE_DIM),
            "model": [embedder.identity] * ann.num_rows,
        },
        schema=ANNOTATION_VECTORS,
    ))
    version = step.write(step.live)["annotation_vectors"]
    per_parse = Counter(ann.column("parse_id").to_pylist())
    for pk in step.live:
        step.partition_metadata(pk, _metadata({"rows": per_parse[pk], "model": embedder.identity}))
    step.run_metadata(_metadata({
        "rows": step.rows_added(), "model": embedder.identity, "lance_version": version,
        "encode_seconds": encode_s, "wall_seconds": time.perf_counter() - started}))
    yield from step.finish()
