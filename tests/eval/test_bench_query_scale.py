"""`fabric bench query --chunks`: a tiny scaling home, its cache, the query process, the lexical-only path."""

from __future__ import annotations

import pytest
from conftest import SHARED, need_shared

from fabric_assets.measurement.bench_query import (
    benchmark_queries, growth, prepare_scaling_home, run_query_process, stage_rows, summary_rows,
)
from fabric_assets.measurement.scaling_corpus import load_english_pool


def test_growth_divides_each_size_by_the_smallest():
    def row(target, chunks, p50, p95, rss):
        fig = {"end_to_end_ms": {"p50": p50, "p95": p95, "p99": p95}, "stages_ms": {}}
        return {"target_chunks": target, "chunks": chunks,
                "latency": {"routes": {"english": {"hybrid": fig}}, "rss_mb": rss}}

    g = growth([row(100, 100, 10.0, 20.0, 500.0), row(1000, 1000, 15.0, 50.0, 750.0)])
    assert g == {"1000/100": {"chunks": 10.0, "rss": 1.5, "end_to_end": {"english": {"hybrid": {"p50": 1.5, "p95": 2.5}}}}}
    assert growth([row(100, 100, 10.0, 20.0, 500.0)]) == {}


@pytest.mark.slow
def test_tiny_scaling_home_is_cached_and_measured(tmp_path):
    """guards against: a rebuild on every run; a chunk count far from the target; a query process that
    fails or mixes routes; a lexical-only path that ranks differently from the pipeline's lexical channels."""
    need_shared(SHARED / "eval" / "cranfield")
    pool = load_english_pool(need_shared(SHARED))
    built = prepare_scaling_home(tmp_path / "cache", 200, pool, chunks_per_document=50)
    m = built.manifest
    assert not built.reused and m["ingested"]
    assert m["chunks"] == m["chunks_planned"]  # the planner packs exactly as the pipeline does
    assert 200 <= m["chunks"] < 250
    assert m["documents"] == m["documents_planned"] == len(list((built.directory / "scaling").rglob("*.txt")))
    assert m["chunks_routed_multilingual"] == 0
    again = prepare_scaling_home(tmp_path / "cache", 200, pool, chunks_per_document=50)
    assert again.reused and again.directory == built.directory

    queries = benchmark_queries(SHARED, english=2, multilingual=1)
    assert len(queries) == 3
    result = run_query_process(built.home, queries, repeat=1)
    assert result["chunks"] == m["chunks"]
    assert result["queries"] == {"english": 2, "multilingual": 1}
    for route in ("english", "multilingual"):
        for mode in ("hybrid", "lexical"):
            fig = result["routes"][route][mode]
            assert fig["runs"] == result["queries"][route]
            assert set(fig["end_to_end_ms"]) == {"p50", "p95", "p99"}
            assert "lexical" in fig["stages_ms"]
    assert "encode_query" in result["routes"]["english"]["hybrid"]["stages_ms"]
    assert "encode_query_multilingual" in result["routes"]["multilingual"]["hybrid"]["stages_ms"]
    assert "encode_query" not in result["routes"]["english"]["lexical"]["stages_ms"]
    assert result["rss_mb"] > 0
    summary = {"sizes": [{"chunks": m["chunks"], "latency": result}]}
    assert len(summary_rows(summary)) == 4
    assert {r["stage"] for r in stage_rows(summary)} >= {"lexical", "encode_query", "encode_query_multilingual"}

    # The lexical-only path ranks as RRF over the pipeline's own lexical channel rankings.
    from fabric_query import Fabric
    from fabric_query.fusion import rrf
    from fabric_assets.measurement.query_latency import lexical_only_search

    fabric = Fabric(built.home)
    cfg = fabric.home.config.query
    for q in queries:
        pack = fabric.search(q, debug=True)
        lexical = {k: v for k, v in pack.channel_rankings.items() if k in ("word", "substring")}
        expected = tuple(cid for cid, _ in rrf(lexical, cfg.rrf_k, cfg.channel_weights))[:cfg.default_limit]
        assert lexical_only_search(fabric, q).chunk_ids == expected
