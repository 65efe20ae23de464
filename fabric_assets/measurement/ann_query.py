"""The query process of ``fabric bench ann``: warm hybrid queries and the dense stage on one home,
in a process that imports no Dagster (its times and RSS are a query process's).

``python -m fabric_assets.measurement.ann_query --home H --queries Q.json --repeat R --out OUT.json
[--exact EXACT.json]`` runs every query once to warm up (models, release view, index), then
``repeat`` timed passes of :meth:`fabric_query.Fabric.search` (the default pipeline, with the home's
``query.dense_search``). Per query it also keeps the dense channel's direct ranking (top 100, the
channel depth, with exact cosines) and the hybrid top 10, computed on the source the pipeline used
for that query (:func:`fabric_query.dense_search.dense_source`). Given ``--exact`` (the same file
written by a run with ``mode: exact`` on the same home), it reports recall@10 and recall@100 of the
approximate direct ranking against the exact one (tie-aware: :func:`recall`), the overlap of the
dense channel's merged top 10 (direct + section-guided) and of the hybrid top 10; ``--recall-queries``
adds queries measured for recall only. Times are measured,
never asserted. A last pass empties the view's cache of chunk rows before each query
(``end_to_end_cold_rows_ms``): the cost of reading the cited chunks' text from the table.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import psutil

from fabric_query.api import Fabric
from fabric_query.channels.dense import DENSE, DENSE_MULTILINGUAL, SECTION_RRF_K, dense_channel, section_guided_dense
from fabric_query.dense_search import dense_source
from fabric_query.querylang import parse_query
from fabric_query.release import pinned_view
from fabric_assets.measurement.query_latency import route_of
from fabric_resources.models.multilingual import shared_multilingual_embedder

PERCENTILES = (50, 95, 99)


def percentiles(values: list[float]) -> dict[str, float]:
    """p50/p95/p99 in ms (numpy's default linear interpolation); empty input gives {}."""
    if not values:
        return {}
    return {f"p{p}": round(float(np.percentile(values, p)), 2) for p in PERCENTILES}


def recall(found: list[tuple[str, float]], exact: list[tuple[str, float]], k: int, tie: float = 1e-6) -> float | None:
    """Recall@k of ``found`` against ``exact`` (each ``(chunk_id, exact cosine)``, best first), tie-aware:
    a found chunk counts when it is in the exact top k or scores at least the exact k-th score less
    ``tie`` (equal vectors — the same text twice — tie, and either is a right answer). Divided by
    ``min(k, len(exact))``; None when ``exact`` is empty."""
    want = exact[:k]
    if not want:
        return None
    ids, kth = {c for c, _ in want}, want[-1][1]
    return sum(1 for c, s in found[:k] if c in ids or s >= kth - tie) / len(want)


def measure(home_dir: str | Path, queries: list[str], repeat: int = 3, exact: dict | None = None,
            recall_queries: list[str] | None = None) -> dict:
    """See the module docstring. Returns a JSON-ready dict: ``mode``, ``sources`` (dense source per
    route), ``dense_fallback_reasons``, ``end_to_end_ms`` / ``stages_ms`` per route (p50/p95/p99),
    ``rankings`` (per query: direct dense top 100 and hybrid top 10), ``recall`` (with ``exact``),
    ``rss_mb`` (psutil, after the runs), ``rss_max_sampled_mb`` (after the warm-up and each pass),
    ``rss_anon_mb`` / ``rss_file_mb`` (``/proc``: heap vs mapped files, e.g. the word index's
    pages), ``first_query_s`` (view, index check and model load)."""
    fabric = Fabric(home_dir)
    config = fabric.home.config.query.dense_search
    route = {q: route_of(q) for q in queries}
    t0 = time.perf_counter()
    fabric.search(queries[0])  # loads the view, the index (and checks it) and the model
    first_s = time.perf_counter() - t0
    for q in queries[1:]:
        fabric.search(q)
    # RSS sampled after the warm-up and after each pass (ru_maxrss is not used: Linux keeps a
    # process's peak across exec, so a child started by a large parent inherits the parent's).
    samples = [psutil.Process().memory_info().rss]
    e2e: dict[str, list[float]] = {}
    stages: dict[str, dict[str, list[float]]] = {}
    hybrid_top: dict[str, list[str]] = {}
    kinds: dict[str, set[str]] = {}
    reasons: set[str] = set()
    for _ in range(repeat):
        for q in queries:
            t = time.perf_counter()
            pack = fabric.search(q)
            e2e.setdefault(route[q], []).append((time.perf_counter() - t) * 1000)
            bucket = stages.setdefault(route[q], {})
            for s in pack.timings:
                if s.stage != "total":
                    bucket.setdefault(s.stage, []).append(s.ms)
            hybrid_top[q] = [h.chunk_id for h in pack.results]
            if pack.dense_search:
                kinds.setdefault(route[q], set()).add(pack.dense_search)
            if pack.dense_fallback_reason:
                reasons.add(pack.dense_fallback_reason)
        samples.append(psutil.Process().memory_info().rss)
    view = pinned_view(fabric.home)
    # One more pass with the view's cache of chunk rows emptied before each query: every hit's and
    # passage member's text is then read from the table (the view keeps no chunk text), as for a
    # query whose chunks no recent query cited.
    cold: dict[str, list[float]] = {}
    for q in queries:
        view._chunk_rows.clear()
        t = time.perf_counter()
        fabric.search(q)
        cold.setdefault(route[q], []).append((time.perf_counter() - t) * 1000)
    # Per query of the recall set (default: the timed ones), on the source the pipeline uses (no
    # timing here): the direct dense ranking (the ANN pass, with exact cosines) and the dense
    # channel's merged ranking (direct + section-guided, what fusion sees).
    qcfg = fabric.home.config.query
    recall_set = list(dict.fromkeys([*queries, *(recall_queries or [])]))
    route.update({q: route_of(q) for q in recall_set})
    direct: dict[str, list[tuple[str, float]]] = {}
    merged: dict[str, list[str]] = {}
    for q in recall_set:
        channel = DENSE_MULTILINGUAL if route[q] == "multilingual" else DENSE
        encoder = fabric.encoder if channel is DENSE else shared_multilingual_embedder()
        vector = encoder.encode_queries([parse_query(q).positive_text])[0]
        source, _ = dense_source(view, channel.table, config)
        direct[q] = [(c, s) for c, s in dense_channel(view, vector, None, 100, channel.table, source)]
        if channel is DENSE and qcfg.section_guided:
            merged[q] = [c for c, _ in section_guided_dense(
                view, vector, None, 100, channel.table, qcfg.section_candidate_limit,
                qcfg.section_passages_per_window, SECTION_RRF_K, source)[0]]
    out: dict = {
        "home": str(fabric.home.root), "mode": config.mode, "config": config.model_dump(mode="json"),
        "release_id": view.release_id, "chunks": view.chunks.num_rows, "repeat": repeat,
        "queries": {r: sum(1 for v in route.values() if v == r) for r in ("english", "multilingual")},
        "first_query_s": round(first_s, 2),
        "sources": {r: sorted(k) for r, k in kinds.items()}, "dense_fallback_reasons": sorted(reasons),
        "end_to_end_ms": {r: percentiles(v) for r, v in e2e.items()},
        "end_to_end_cold_rows_ms": {r: percentiles(v) for r, v in cold.items()},
        "stages_ms": {r: {k: percentiles(v) for k, v in b.items()} for r, b in stages.items()},
        "rankings": {q: {"route": route[q], "direct": direct[q], "merged": merged.get(q, []),
                         "hybrid": hybrid_top.get(q, [])} for q in recall_set},
        "recall_queries": {r: sum(1 for q in recall_set if route[q] == r) for r in ("english", "multilingual")},
    }
    if exact:
        per: dict[str, dict[str, list[float]]] = {}
        for q in recall_set:
            ref = exact["rankings"].get(q)
            if not ref:
                continue
            r = per.setdefault(route[q], {"recall@10": [], "recall@100": [], "dense_top10_overlap": [],
                                          "hybrid_top10_overlap": []})
            for k in (10, 100):
                value = recall(direct[q], ref["direct"], k)
                if value is not None:
                    r[f"recall@{k}"].append(value)
            if ref.get("merged") and merged.get(q):
                r["dense_top10_overlap"].append(len(set(merged[q][:10]) & set(ref["merged"][:10])) / len(ref["merged"][:10]))
            if ref.get("hybrid") and hybrid_top.get(q):
                r["hybrid_top10_overlap"].append(len(set(hybrid_top[q]) & set(ref["hybrid"])) / len(ref["hybrid"]))
        out["recall"] = {route_: {k: {"mean": round(float(np.mean(v)), 4), "min": round(float(np.min(v)), 4),
                                      "queries": len(v)} for k, v in r.items() if v} for route_, r in per.items()}
    samples.append(psutil.Process().memory_info().rss)
    out["rss_mb"] = round(samples[-1] / 2**20, 1)
    out["rss_max_sampled_mb"] = round(max(samples) / 2**20, 1)
    status = {line.split(":")[0]: int(line.split()[1]) for line in open("/proc/self/status")
              if line.startswith(("RssAnon", "RssFile"))} if Path("/proc/self/status").exists() else {}
    out["rss_anon_mb"] = round(status.get("RssAnon", 0) / 1024, 1)
    out["rss_file_mb"] = round(status.get("RssFile", 0) / 1024, 1)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True)
    parser.add_argument("--queries", required=True, help="a JSON file holding a list of query strings")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", required=True, help="where the JSON result is written")
    parser.add_argument("--exact", default=None, help="the result of a mode-exact run on the same home")
    parser.add_argument("--recall-queries", default=None, help="a JSON list of further queries for recall only")
    args = parser.parse_args(argv)
    queries = json.loads(Path(args.queries).read_text(encoding="utf-8"))
    exact = json.loads(Path(args.exact).read_text(encoding="utf-8")) if args.exact else None
    more = json.loads(Path(args.recall_queries).read_text(encoding="utf-8")) if args.recall_queries else None
    Path(args.out).write_text(json.dumps(measure(args.home, queries, args.repeat, exact, more)), encoding="utf-8")


if __name__ == "__main__":
    main()
