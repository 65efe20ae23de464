"""Warm query latency on one home, in a process that imports no Dagster (``fabric bench query``).

:func:`bench_query` is ``fabric bench query`` on ``--home``: the pipeline end to end and per
stage. :func:`measure` is the fresh query process of ``fabric bench query --chunks``
(:mod:`fabric_assets.measurement.bench_query` builds the homes and starts it): hybrid (the real
pipeline) against lexical-only, per route.

* **hybrid**: :meth:`fabric_query.Fabric.search`, i.e. :func:`fabric_query.pipeline.search`
  with every channel it runs by default; its per-stage times are the pack's ``timings``.
* **lexical-only**: :func:`lexical_only_search` — the same pipeline restricted to
  its word (with the configured feedback) and substring channels
  (``channels=LEXICAL_CHANNELS``): no query encoding and no dense search.

Queries are grouped by the route the pipeline gives them
(``needs_multilingual`` of the positive text: ``english`` → MiniLM,
``multilingual`` → multilingual-e5). Every query runs once untimed to warm
up (models load, the release view and index open), then ``repeat`` timed
passes, hybrid and lexical-only interleaved so machine noise hits both.

Run as ``python -m fabric_assets.measurement.query_latency --home H --queries Q.json``
(``Q.json``: a JSON list of query strings) to measure in a fresh process that
imports no Dagster; it prints the result as JSON. Times are measured, never asserted.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import psutil

from fabric_query.api import Fabric
from fabric_query.errors import NoReleaseError
from fabric_query.querylang import parse_query
from fabric_query.release import release_view
from fabric_query.types import StageTiming
from fabric_resources.language_routing import needs_multilingual

Route = Literal["english", "multilingual"]
PERCENTILES = (50, 95, 99)


@dataclass(frozen=True)
class LexicalAnswer:
    chunk_ids: tuple[str, ...]  # best first
    timings: tuple[StageTiming, ...]  # stages, then "total"


def route_of(query: str) -> Route:
    """The dense route the pipeline gives ``query``."""
    return "multilingual" if needs_multilingual(parse_query(query).positive_text) else "english"


#: The channels of the lexical-only path (``word`` brings its ``scan`` fallback with it).
LEXICAL_CHANNELS = frozenset({"word", "substring"})


def lexical_only_search(fabric: Fabric, query: str, limit: int | None = None) -> LexicalAnswer:
    """The pipeline with its lexical channels only: ``search(..., channels=LEXICAL_CHANNELS)``.

    Word (with the configured feedback) and substring channels, fusion, passages and evidence, as
    :func:`fabric_query.pipeline.search` runs them; no query encoding and no dense search. Its
    stage names are the pipeline's, so the two modes compare stage by stage.

    Raises
    ------
    NoReleaseError
        Nothing has been activated yet.
    ValueError
        The release's lexical index cannot serve (this benchmark measures the index path only).
    """
    pack = fabric.search(query, limit=limit, channels=LEXICAL_CHANNELS)
    if pack.fallback_reason is not None:
        raise ValueError(f"the lexical index cannot serve: {pack.fallback_reason}")
    return LexicalAnswer(tuple(h.chunk_id for h in pack.results), tuple(pack.timings))


def percentiles(values: list[float]) -> dict[str, float]:
    """p50/p95/p99 in ms (numpy's default linear interpolation); empty input gives {}."""
    if not values:
        return {}
    return {f"p{p}": round(float(np.percentile(values, p)), 2) for p in PERCENTILES}


def measure(home_dir: str | Path, queries: list[str], repeat: int = 3, limit: int | None = None) -> dict:
    """Warm latency of ``queries`` on the home at ``home_dir``; see the module docstring.

    Returns a JSON-ready dict: ``chunks`` (in the current release), ``queries``
    per route, ``runs`` per route and mode, ``routes[route][mode]`` with
    ``end_to_end_ms`` and ``stages_ms[stage]`` (p50/p95/p99),
    ``hybrid_over_lexical_p50`` per route, and the process's ``rss_mb`` (now,
    psutil) and ``peak_rss_mb`` (``ru_maxrss``).
    """
    fabric = Fabric(home_dir)
    home = fabric.home
    release = home.catalog.current_release()
    if release is None:
        raise NoReleaseError(f"no activated release in {home_dir}")
    routes = {q: route_of(q) for q in queries}
    for q in queries:  # warm-up: models, release view, index, caches
        fabric.search(q, limit=limit)
        lexical_only_search(fabric, q, limit)
    e2e: dict[tuple[str, str], list[float]] = {}
    stages: dict[tuple[str, str], dict[str, list[float]]] = {}

    def record(route: str, mode: str, total_ms: float, timings) -> None:
        e2e.setdefault((route, mode), []).append(total_ms)
        bucket = stages.setdefault((route, mode), {})
        for s in timings:
            if s.stage != "total":
                bucket.setdefault(s.stage, []).append(s.ms)

    for _ in range(repeat):
        for q in queries:
            t = time.perf_counter()
            pack = fabric.search(q, limit=limit)
            record(routes[q], "hybrid", (time.perf_counter() - t) * 1000, pack.timings)
            t = time.perf_counter()
            answer = lexical_only_search(fabric, q, limit)
            record(routes[q], "lexical", (time.perf_counter() - t) * 1000, answer.timings)
    out: dict = {
        "home": str(home.root),
        "release_id": release.release_id,
        "chunks": release_view(home, release).chunks.num_rows,
        "repeat": repeat,
        "queries": {r: sum(1 for v in routes.values() if v == r) for r in ("english", "multilingual")},
        "routes": {},
        "hybrid_over_lexical_p50": {},
    }
    for (route, mode), values in sorted(e2e.items()):
        out["routes"].setdefault(route, {})[mode] = {
            "runs": len(values),
            "end_to_end_ms": percentiles(values),
            "stages_ms": {k: percentiles(v) for k, v in stages[(route, mode)].items()},
        }
    for route, modes in out["routes"].items():
        if "hybrid" in modes and "lexical" in modes:
            out["hybrid_over_lexical_p50"][route] = round(
                modes["hybrid"]["end_to_end_ms"]["p50"] / max(modes["lexical"]["end_to_end_ms"]["p50"], 1e-6), 2)
    out["rss_mb"] = round(psutil.Process().memory_info().rss / 2**20, 1)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


DEFAULT_QUERIES = (
    "Miss Havisham", "truth universally acknowledged", "下人", "刘备", "April is the cruellest month",
    "Gregor Samsa", "山路", "Irina cuaderno", "lighthouse keeper", "table of contents",
)


def bench_query(fabric: Fabric, queries: list[str], repeat: int = 5) -> dict:
    """Run each query once to warm up, then ``repeat`` times; report ms percentiles.

    Returns ``{"queries", "runs", "end_to_end_ms": {p50, p95, p99}, "stages_ms": {stage: {p50, p95}},
    "rss_mb"}``; percentiles by numpy's default (linear) method.
    """
    for q in queries:
        fabric.search(q)
    totals: list[float] = []
    stages: dict[str, list[float]] = {}
    for _ in range(repeat):
        for q in queries:
            t0 = time.perf_counter()
            pack = fabric.search(q)
            totals.append((time.perf_counter() - t0) * 1000)
            for t in pack.timings:
                stages.setdefault(t.stage, []).append(t.ms)

    def pct(values: list[float], *ps: int) -> dict[str, float]:
        return {f"p{p}": round(float(np.percentile(values, p)), 2) for p in ps}

    return {
        "queries": len(queries),
        "runs": len(totals),
        "end_to_end_ms": pct(totals, 50, 95, 99),
        "stages_ms": {k: pct(v, 50, 95) for k, v in stages.items() if k != "total"},
        "rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", required=True)
    parser.add_argument("--queries", required=True, help="a JSON file holding a list of query strings")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args(argv)
    queries = json.loads(Path(args.queries).read_text(encoding="utf-8"))
    sys.stdout.write(json.dumps(measure(args.home, queries, args.repeat, args.limit)) + "\n")


if __name__ == "__main__":
    main()
