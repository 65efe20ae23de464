"""Dagster's run history under retention, over real Dagster runs: what no retained release needs
goes (run rows, events, per-run event-log files), the runs that wrote pinned rows stay."""

from __future__ import annotations

import json
import os

import dagster as dg
from conftest import ingest

from fabric_assets.lifecycle.run_history import RELEASE_ASSET
from fabric_resources.home import FabricHome

VERSIONS = [f"The lighthouse keeper logged storm number {v} in the green ledger of the tide.\n" for v in range(3)]
BREAD = "Sourdough bread needs flour, water and a patient baker.\n"


def _home(fabric_home, **retention) -> FabricHome:
    fabric_home.layout.config_file.write_text(json.dumps({"retention": retention}))
    return FabricHome(fabric_home.root)


def _writers(instance: dg.DagsterInstance, partitions: set[str]) -> set[str]:
    """Run of the latest materialization of each of ``partitions``, over every asset."""
    runs = set()
    for record in instance.get_asset_records():
        latest = {}
        for r in instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=record.asset_entry.asset_key),
                                                 limit=10_000).records:
            if r.partition_key in partitions:
                latest.setdefault(r.partition_key, r.run_id)
        runs |= set(latest.values())
    return runs


def _edits(tmp_path, home: FabricHome) -> list[list[str]]:
    src = tmp_path / "src"
    src.mkdir()
    (src / "bread.txt").write_text(BREAD)
    per_ingest = []
    for text in VERSIONS:
        (src / "light.txt").write_text(text)
        summary = ingest(src, home)
        assert summary.failed_runs == []
        per_ingest.append([*summary.run_ids, summary.activation_run_id])
    return per_ingest


def test_cleanup_prunes_runs_no_retained_release_needs(tmp_path, fabric_home):
    """guards against: Dagster's run history growing with every ingest (2.76x the fresh home's
    size in the bounded-disk bench); pruning the run that wrote the rows the release pins (a
    lineage audit needs it) or the current release's activation run."""
    home = _home(fabric_home, releases=1, release_days=0, superseded_days=0, deleted_days=0, failed_days=0, runs_days=0)
    per_ingest = _edits(tmp_path, home)
    home = FabricHome(home.root)
    release = home.catalog.current_release()
    pinned = {m["parse_id"] for m in release.manifest["sources"].values()}
    os.environ["DAGSTER_HOME"] = str(home.layout.dagster_home)
    with dg.DagsterInstance.from_config(str(home.layout.dagster_home)) as instance:
        left = {r.dagster_run.run_id for r in instance.get_run_records()}
        writers = _writers(instance, pinned)
        # bread.txt's parse ran in the first ingest only: that run stays, as does the last one.
        assert writers and writers <= left
        assert set(per_ingest[0][:-1]) & writers
        assert per_ingest[-1][-1] in left  # the activation that published the current release
        published = {r.run_id for r in instance.fetch_materializations(RELEASE_ASSET, limit=100).records}
        assert published <= left
        # The first ingest's activation and the second ingest's parse run wrote nothing retained.
        gone = {per_ingest[0][-1], *per_ingest[1][:-1]} - writers - published
        assert gone and not gone & left
        shards = home.layout.dagster_home / "history" / "runs"
        for run_id in gone:
            assert instance.get_run_by_id(run_id) is None
            assert not (shards / f"{run_id}.db").exists()
            assert not instance.all_logs(run_id)
            assert not (home.layout.dagster_home / "storage" / run_id).exists()  # captured step logs


def test_runs_younger_than_runs_days_are_kept(tmp_path, fabric_home):
    """guards against: the default retention deleting the recent run history the UI shows."""
    home = _home(fabric_home, releases=1, release_days=0, superseded_days=0, deleted_days=0, failed_days=0)
    per_ingest = _edits(tmp_path, home)
    os.environ["DAGSTER_HOME"] = str(home.layout.dagster_home)
    with dg.DagsterInstance.from_config(str(home.layout.dagster_home)) as instance:
        left = {r.dagster_run.run_id for r in instance.get_run_records()}
    assert {run for runs in per_ingest for run in runs} <= left
