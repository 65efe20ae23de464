"""`fabric bench scale` and `fabric bench incremental` at tiny sizes: structure and invariants, never times."""

from __future__ import annotations

import pytest
from conftest import CORPUS, SHARED, need_shared
from typer.testing import CliRunner

from fabric_assets.cli import app

runner = CliRunner()


@pytest.mark.parametrize("args", [
    ["bench", "scale", "--documents", "30"],
    ["bench", "query", "--chunks", "200"],
])
def test_benchmarks_say_why_they_skip_without_shared(tmp_path, args):
    """guards against: a traceback, or a silent empty result, when ../shared is absent."""
    missing = tmp_path / "no-shared"
    result = runner.invoke(app, [*args, "--shared", str(missing), *(["--cache-dir", str(tmp_path / "c")]
                                                                     if "query" in args else [])])
    assert result.exit_code == 2, result.output
    assert "skipped" in result.output and str(missing) in result.output.replace("\n", "")
    assert "Traceback" not in result.output


@pytest.mark.slow
def test_scale_bench_partitions_match_documents_and_the_ui_sees_them():
    """guards against: the sensor dropping or duplicating partitions at scale; runs that do not cover
    every partition; a UI that does not answer or reports another partition count."""
    need_shared(SHARED / "eval" / "cranfield")
    from fabric_assets.measurement.bench_scale import bench_scale, summary_rows

    result = bench_scale(need_shared(SHARED), 30, ui=True, ui_repeat=1)
    s, r = result["sensor"], result["runs"]
    assert s["dynamic_partitions_added"] == 30 == result["registered_partitions"] == r["partitions"]
    assert s["parse_run_requests"] == s["run_requests"] == 1  # 30 partitions fit one run (256 per run)
    assert s["second_tick_partitions_added"] == 0 and s["second_tick_run_requests"] == 1
    assert s["steady_tick_run_requests"] == 0
    assert r["parse_runs"] == 1 and r["failed_runs"] == 0 and r["release_published"]
    b = r["breakdown_s"]
    assert b["dagster"] == pytest.approx(b["outside_steps"] + b["in_step_after_first_materialization"], abs=0.02)
    assert r["events_per_partition"] > 0
    ui = result["ui"]["queries"]
    assert ui["chunks_partition_keys"]["partition_keys"] == 30
    assert ui["chunks_partition_stats"]["numPartitions"] == 30
    assert ui["chunks_partition_stats"]["numMaterialized"] == 30
    assert ui["chunks_partition_statuses"]["materialized"] == 30
    assert ui["asset_nodes"]["assets"] >= 7
    assert ui["runs"]["runs"] == 2  # one parse run, one activation
    assert summary_rows(result)[0]["value"] == "30 = 30"
    # The UI above read every partition through the same dagster.yaml: Fabric's event log wrote them.
    assert result["event_log"] == "FabricSqliteEventLogStorage"


@pytest.mark.slow
def test_incremental_bench_rounds_reach_a_release_that_reflects_them():
    """guards against: timing a change that never reached a release; ratios computed from the wrong runs."""
    from fabric_assets.measurement.bench_incremental import bench_incremental, incremental_rows

    result = bench_incremental(need_shared(CORPUS), sizes=(5, 6), doc_bytes=300, rounds=2)
    assert [r["documents"] for r in result["runs"]] == [5, 6]
    for r in result["runs"]:
        assert r["release_published"] and r["release_reflects_change"]
        assert r["parse_partitions_per_round"] == 2  # the edited and the added document; the deletion parses nothing
        assert len(r["change_rounds_seconds"]) == 2
        assert r["change_to_release_seconds"] in r["change_rounds_seconds"]
    first, last = result["runs"]
    assert first["change_digest"] == last["change_digest"], "the sizes were timed on different changes"
    assert result["ratio_change_largest_to_smallest"] == pytest.approx(
        last["change_to_release_seconds"] / first["change_to_release_seconds"], rel=0.01)
    assert result["target_ratio_change_largest_to_smallest"] == 1.2
    assert result["target_ratio_change_to_full_ingest_smallest"] == 0.05
    assert len(incremental_rows(result)) == 2
