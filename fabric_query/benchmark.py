"""``fabric bench query``: warm query latency through ``fabric_query``, per stage and end to end."""

from __future__ import annotations

import resource
import time

import numpy as np

from fabric_query.api import Fabric

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
