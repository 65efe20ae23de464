"""``fabric eval BEIR_DIR``: Fabric and the baselines a user would pick, in one run.

The collection goes through the real Dagster pipeline into a scratch home,
each corpus entry one source document (``<title>\\n\\n<text>`` as UTF-8 text).
Every query then runs through ``fabric_query`` (fused result, and each channel
alone from the pack's debug rankings). In the same process, over the very
same chunks: BM25 from ``bm25s``, flat cosine with the same embedder and
vectors, LanceDB's built-in full-text search alone and its hybrid search (FTS + vector, RRF)
(:mod:`fabric_assets.measurement.baselines`). Chunk rankings become document
rankings by first occurrence (a chunk of a text that several entries repeat ranks them all:
:func:`~fabric_assets.measurement.harness.document_ranker`). Queries split into dev and test halves
(:func:`fabric_assets.measurement.harness.in_split`).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from fabric_assets.ingest import ingest
from fabric_assets.measurement.baselines import Baselines
from fabric_assets.measurement.harness import (
    DEPTH, QueryVectorMemo, Split, as_free_text, claimed_work_dir, collection_is_cjk, document_ranker,
    judged_queries, load_beir, unscorable_judgements, write_corpus,
)
from fabric_assets.measurement.metrics import METRICS, paired_bootstrap, per_query_ndcg, score_run
from fabric_assets.measurement.tuning import FEEDBACK_WEIGHTS, WINDOW_MIX
from fabric_query import pipeline
from fabric_query.release import release_view
from fabric_resources.config import FabricConfig
from fabric_resources.home import FabricHome
from fabric_resources.models.embedder import shared_embedder
from fabric_resources.models.multilingual import shared_multilingual_embedder
from fabric_resources.models.reranker import reranker_from_config


def run_eval(
    folder: Path,
    *,
    limit_queries: int | None = None,
    split: Split = "test",
    config: FabricConfig | None = None,
    work_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Ingest a BEIR collection, run its queries through Fabric and the baselines, score them all.

    ``progress`` is called with one line as each step begins (the ingest, the baselines, the
    queries): ``fabric eval`` prints them, where it printed nothing for minutes.

    ``config`` (default: the embedded defaults) is written to the home's ``config.json`` before the
    ingest, also on a reused ``work_dir``.

    Returns a JSON-ready dict: collection, split, queries (those with a judgement above 0), documents,
    ``unscorable`` (:func:`~fabric_assets.measurement.harness.unscorable_judgements`), per-system metrics
    (``fabric`` fused, ``fabric:<channel>`` alone, baselines), ``versus_fabric`` (per system, fused
    minus it in nDCG@10 with a 95% paired bootstrap interval: :func:`versus_fabric`), ingest seconds,
    and mean query milliseconds per system.
    """
    say = progress or (lambda _line: None)
    collection = load_beir(folder)
    qids = judged_queries(collection, split)[:limit_queries]
    scratch = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="fabric-eval-"))
    try:
        with claimed_work_dir(scratch, collection):  # refuses a folder an eval did not make, or one in use
            home = FabricHome(scratch / "home")
            # Written on every run: a reused --work-dir home must not keep an earlier run's --config.
            home.layout.config_file.write_text((config or FabricConfig()).model_dump_json())
            names = write_corpus(collection, scratch / collection.name)
            say(f"ingesting {len(collection.corpus)} documents of {collection.name} through Dagster into "
                f"{home.root} (the longest step)")
            t0 = time.perf_counter()
            ingest(scratch / collection.name, home)
            ingest_s = time.perf_counter() - t0
            view = release_view(home, home.catalog.current_release())
            docs = document_ranker(view, collection, names)

            embedder = QueryVectorMemo(shared_embedder(home.config.dense.batch_size))
            multilingual = QueryVectorMemo(shared_multilingual_embedder())
            cjk = collection_is_cjk(collection)
            say(f"building the baselines over {view.chunks.num_rows} chunks")
            baselines = Baselines(view, scratch, cjk)
            baselines.build()
            query_encoder = multilingual if cjk else embedder
            runs: dict[str, dict[str, list[str]]] = {}
            millis: dict[str, float] = {}
            qvecs = query_encoder.encode_queries([collection.queries[q] for q in qids]) if qids else np.zeros((0, 384))
            reranker = reranker_from_config(home.config)
            variants = stage_variants(home.config, multilingual=cjk)
            base_config = home.config
            say(f"running {len(qids)} queries through Fabric, {len(variants)} stage variants and "
                f"{len(baselines.systems)} baselines")
            for i, q in enumerate(qids):
                text = collection.queries[q]
                t = time.perf_counter()
                pack = pipeline.search(home, as_free_text(text), embedder, limit=DEPTH, debug=True, reranker=reranker,
                                       multilingual=multilingual)
                millis["fabric"] = millis.get("fabric", 0.0) + (time.perf_counter() - t) * 1000
                runs.setdefault("fabric", {})[q] = docs(shown_chunks(pack))
                for channel, ranking in pack.channel_rankings.items():
                    runs.setdefault(f"fabric:{channel}", {})[q] = docs(ranking)
                for name, variant in variants.items():
                    home.__dict__["config"] = variant
                    try:
                        t = time.perf_counter()
                        vpack = pipeline.search(home, as_free_text(text), embedder, limit=DEPTH, debug=True,
                                                reranker=reranker if variant.reranker.backend != "none" else None,
                                                multilingual=multilingual)
                        millis[name] = millis.get(name, 0.0) + (time.perf_counter() - t) * 1000
                    finally:
                        home.__dict__["config"] = base_config
                    runs.setdefault(name, {})[q] = docs(shown_chunks(vpack))
                    for channel, ranking in vpack.channel_rankings.items():
                        runs.setdefault(f"{name}:{channel}", {})[q] = docs(ranking)
                for name, system in baselines.systems.items():
                    t = time.perf_counter()
                    ranking = system(text, qvecs[i])
                    millis[name] = millis.get(name, 0.0) + (time.perf_counter() - t) * 1000
                    runs.setdefault(name, {})[q] = docs(ranking)
            for name in runs:  # a channel that did not run for a query ranks nothing for it
                for q in qids:
                    runs[name].setdefault(q, [])
            return {
                "collection": collection.name,
                "split": split,
                "queries": len(qids),
                "documents": len(collection.corpus),
                "unscorable": unscorable_judgements(collection, split, qids),
                "chunks": view.chunks.num_rows,
                # Chunks flat cosine and LanceDB hybrid cannot see (another model's vector): Baselines.
                "chunks_without_query_model_vector": baselines.without_vector,
                "ingest_seconds": round(ingest_s, 1),
                "ndcg_gain": "linear (trec_eval/BEIR): rel / log2(rank + 1)",
                "metrics": {name: score_run(run, collection.qrels) for name, run in sorted(runs.items())},
                "versus_fabric": versus_fabric(runs, collection.qrels),
                "mean_query_ms": {k: round(v / max(1, len(qids)), 2) for k, v in sorted(millis.items())},
            }
    finally:
        if work_dir is None:
            shutil.rmtree(scratch, ignore_errors=True)


def shown_chunks(pack) -> list[str]:
    """The chunk IDs a reader of ``pack`` is shown, best first: each hit, then the copies of its text
    listed under it (``Hit.same_text``), which take no place of their own (``query.collapse_same_text``)."""
    return [cid for h in pack.results for cid in (h.chunk_id, *(c.chunk_id for c in h.same_text))]


def versus_fabric(runs: dict[str, dict[str, list[str]]], qrels) -> dict[str, dict]:
    """Per system other than ``fabric``: fused nDCG@10 minus the system's, as the mean of per-query
    differences with its 95% paired bootstrap interval (:func:`paired_bootstrap`): ``{"delta": d,
    "ci95": [low, high]}``. Negative: the system beat Fabric on these queries; an interval holding 0:
    these queries do not tell the two apart."""
    fused = per_query_ndcg(runs.get("fabric", {}), qrels)
    out = {}
    for name, run in sorted(runs.items()):
        if name == "fabric":
            continue
        other = per_query_ndcg(run, qrels)
        delta, low, high = paired_bootstrap([fused[q] - other[q] for q in fused if q in other])
        out[name] = {"delta": delta, "ci95": [low, high]}
    return out


def stage_variants(config: FabricConfig, multilingual: bool = False) -> dict[str, FabricConfig]:
    """Query-time stage configurations scored beside the configured one, on the same home.

    Each flips one stage of ``config``: section-guided dense, the dense channel's window mix (off, or
    :data:`WINDOW_MIX` when off), its vector feedback (off, or the first of :data:`FEEDBACK_WEIGHTS`),
    floor demotion (both routes), function words as word matches (``+function-words``: a chunk holding
    only `what`, `to`, ... of the query matches), MaxSim (when a checkpoint is
    configured), the reranker (when one is configured); for a ``multilingual`` (CJK) collection
    also the e5 route's section-guided dense and its fusion (convex vs RRF). Ingest-time choices (chunk caps, the
    multilingual model) need their own home and are compared across runs.
    """
    q = config.query
    out = {} if multilingual else {
        ("fabric[-section]" if q.section_guided else "fabric[+section]"):
            config.model_copy(update={"query": q.model_copy(update={"section_guided": not q.section_guided})}),
        ("fabric[-window]" if q.dense_window_weight else "fabric[+window]"):
            config.model_copy(update={"query": q.model_copy(
                update={"dense_window_weight": 0.0 if q.dense_window_weight else WINDOW_MIX})}),
        ("fabric[-feedback]" if q.dense_feedback_weight else "fabric[+feedback]"):
            config.model_copy(update={"query": q.model_copy(
                update={"dense_feedback_weight": 0.0 if q.dense_feedback_weight else FEEDBACK_WEIGHTS[0]})}),
    }
    out["fabric[-demotion]" if q.floor_demotion else "fabric[+demotion]"] = config.model_copy(
        update={"query": q.model_copy(update={"floor_demotion": not q.floor_demotion})})
    out["fabric[+function-words]" if not q.function_word_matches else "fabric[-function-words]"] = config.model_copy(
        update={"query": q.model_copy(update={"function_word_matches": not q.function_word_matches})})
    if multilingual:
        out["fabric[+section-multilingual]" if not q.section_guided_multilingual else "fabric[-section-multilingual]"] = \
            config.model_copy(update={"query": q.model_copy(
                update={"section_guided_multilingual": not q.section_guided_multilingual})})
        other = "rrf" if q.multilingual_fusion == "convex" else "convex"
        out[f"fabric[{other}-multilingual]"] = config.model_copy(
            update={"query": q.model_copy(update={"multilingual_fusion": other})})
    if config.late_interaction.enabled:
        out["fabric[-maxsim]"] = config.model_copy(
            update={"late_interaction": config.late_interaction.model_copy(update={"enabled": False})})
    if config.reranker.backend != "none":
        out["fabric[-rerank]"] = config.model_copy(
            update={"reranker": config.reranker.model_copy(update={"backend": "none"})})
    return out


def markdown_table(result: dict) -> str:
    """The metrics as a markdown table, Fabric first, then its channels and stage variants, then baselines."""
    rows = sorted(result["metrics"].items(), key=lambda kv: (not kv[0].startswith("fabric"), kv[0]))
    versus = result.get("versus_fabric", {})
    head = (f"| system ({result['collection']}, {result['split']} split, {result['queries']} queries) | "
            + " | ".join(METRICS) + " | ms/query | fabric − this, nDCG@10 [95% CI] |")
    sep = "|---" * (len(METRICS) + 3) + "|"
    lines = [head, sep]
    for name, m in rows:
        ms = result["mean_query_ms"].get(name, result["mean_query_ms"].get("fabric") if name.startswith("fabric:") else None)
        ms_text = "" if name.startswith("fabric:") else f"{ms:.1f}" if ms is not None else ""
        v = versus.get(name)
        v_text = f"{v['delta']:+.4f} [{v['ci95'][0]:+.4f}, {v['ci95'][1]:+.4f}]" if v else ""
        lines.append(f"| {name} | " + " | ".join(f"{m[k]:.4f}" for k in METRICS) + f" | {ms_text} | {v_text} |")
    return "\n".join(lines)
