"""Fabric's SQLite event log (fabric_assets.event_log) records what Dagster's own does.

Real Dagster runs of a small parse-partitioned job, one per storage, compared record by record:
the run's own log, every asset's materialized partitions with their metadata, the latest
materialization, the planned events and the planned checks. The batched path must be a faster
way to write the same rows, never other rows.
"""


import textwrap
from pathlib import Path

import dagster as dg
import pytest

from fabric_assets import event_log
from fabric_assets.event_log import FabricSqliteEventLogStorage

PARSES = dg.DynamicPartitionsDefinition(name="parses")
KEYS = [f"p{i:03d}" for i in range(12)]
ASSETS = ("units", "chunks", "vectors")


def _asset(name: str, dep: str | None):
    @dg.asset(name=name, deps=[dep] if dep else [], partitions_def=PARSES,
              backfill_policy=dg.BackfillPolicy.single_run(),
              check_specs=[dg.AssetCheckSpec("rows_ok", asset=name)])
    def _a(context: dg.AssetExecutionContext):
        for pk in context.partition_keys:
            context.add_asset_metadata({"rows": int(pk[1:]) + len(name)}, partition_key=pk)
        yield dg.MaterializeResult(metadata={"lance_version": len(name)})
        yield dg.AssetCheckResult(check_name="rows_ok", passed=True)
    return _a


JOB = dg.Definitions(
    assets=[_asset(n, ASSETS[i - 1] if i else None) for i, n in enumerate(ASSETS)],
    jobs=[dg.define_asset_job("parse", partitions_def=PARSES)]).resolve_job_def("parse")


def _instance(folder: Path, fabric: bool) -> dg.DagsterInstance:
    folder.mkdir(parents=True, exist_ok=True)
    text = "telemetry:\n  enabled: false\n"
    if fabric:
        text += textwrap.dedent(f"""\
            event_log_storage:
              module: fabric_assets.event_log
              class: FabricSqliteEventLogStorage
              config:
                dagster_home: "{folder}"
            """)
    (folder / "dagster.yaml").write_text(text)
    return dg.DagsterInstance.from_config(str(folder))


def _run(instance: dg.DagsterInstance, keys: list[str]) -> str:
    if not all(instance.has_dynamic_partition("parses", k) for k in keys):
        instance.add_dynamic_partitions("parses", keys)
    result = JOB.execute_in_process(instance=instance, tags={
        "dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]})
    assert result.success
    return result.run_id


def _record(instance: dg.DagsterInstance, run_ids: list[str]) -> dict:
    """Everything the UI and Fabric read back, with storage IDs and times left out."""
    out: dict = {"runs": []}
    for run_id in run_ids:
        out["runs"].append([(e.dagster_event_type.value, str(e.dagster_event.asset_key), e.dagster_event.partition)
                            for e in instance.all_logs(run_id) if e.is_dagster_event])
    for name in ASSETS:
        key = dg.AssetKey(name)
        mats = instance.fetch_materializations(key, limit=1000).records
        out[name] = {
            "materialized": sorted(instance.get_materialized_partitions(key)),
            "metadata": sorted((r.partition_key, r.asset_materialization.metadata["rows"].value,
                                r.asset_materialization.metadata["lance_version"].value) for r in mats),
            "latest": instance.get_latest_materialization_event(key).dagster_event.partition,
            "planned": sorted(r.partition_key for r in instance.get_event_records(dg.EventRecordsFilter(
                dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED, asset_key=key))),
            "checks": len(instance.event_log_storage.get_asset_check_execution_history(
                dg.AssetCheckKey(key, "rows_ok"), limit=1000)),
        }
    return out


def test_batched_writes_record_what_dagsters_own_storage_records(tmp_path, monkeypatch):
    """guards against: a batch writing only the run's shard (the asset pages and partition statuses,
    read from the index shard, would show nothing), losing per-partition metadata, the wrong
    latest materialization, or planned events and checks missing."""
    monkeypatch.setenv("DAGSTER_EVENT_BATCH_SIZE", "0")  # the stock path: one event at a time
    with _instance(tmp_path / "stock", fabric=False) as stock:
        expected = _record(stock, [_run(stock, KEYS), _run(stock, KEYS[3:7])])
    monkeypatch.setenv("DAGSTER_EVENT_BATCH_SIZE", "1000")
    batches: list[int] = []
    original = FabricSqliteEventLogStorage.store_event_batch

    def counting(self, events):
        batches.append(len(events))
        return original(self, events)

    monkeypatch.setattr(FabricSqliteEventLogStorage, "store_event_batch", counting)
    with _instance(tmp_path / "fabric", fabric=True) as fabric:
        assert isinstance(fabric.event_log_storage, FabricSqliteEventLogStorage)
        got = _record(fabric, [_run(fabric, KEYS), _run(fabric, KEYS[3:7])])
    assert max(batches) >= len(KEYS), "Dagster sent no batch: the batched path went untested"
    assert got == expected
    assert got["vectors"]["materialized"] == KEYS and len(got["vectors"]["metadata"]) == len(KEYS) + 4


def test_a_home_written_by_the_stock_storage_reads_the_same(tmp_path, monkeypatch):
    """guards against: existing homes losing their run history when Fabric's storage is named in
    their dagster.yaml (the shards must stay in Dagster's default folder)."""
    folder = tmp_path / "dagster"
    with _instance(folder, fabric=False) as stock:
        first = _run(stock, KEYS[:5])
        before = _record(stock, [first])
    with _instance(folder, fabric=True) as fabric:
        assert _record(fabric, [first]) == before
        second = _run(fabric, KEYS[5:8])
        after = _record(fabric, [first, second])
    assert after["chunks"]["materialized"] == KEYS[:8]


def test_engines_are_bounded_and_every_run_stays_readable(tmp_path, monkeypatch):
    """guards against: a long-lived daemon keeping an engine for every run it ever wrote."""
    monkeypatch.setattr(event_log, "ENGINES_KEPT", 2)
    with _instance(tmp_path / "d", fabric=True) as fabric:
        runs = [_run(fabric, [k]) for k in KEYS[:4]]
        storage = fabric.event_log_storage
        assert len(storage._engines) <= 2
        for run_id in runs:
            assert any(e.dagster_event_type == dg.DagsterEventType.RUN_SUCCESS for e in fabric.all_logs(run_id))


def test_a_batch_of_another_kind_is_refused_whole(tmp_path):
    """guards against: run-status events written through the batch path, which skips the run
    storage's bookkeeping for them."""
    with _instance(tmp_path / "d", fabric=True) as fabric:
        run_id = _run(fabric, KEYS[:1])
        logs = fabric.all_logs(run_id)
        status = [e for e in logs if e.dagster_event_type == dg.DagsterEventType.RUN_SUCCESS]
        planned = [e for e in logs if e.dagster_event_type == dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED]
        with pytest.raises(dg.DagsterInvariantViolationError, match="written in batches"):
            fabric.event_log_storage.store_event_batch(planned + status)
        assert len(fabric.all_logs(run_id)) == len(logs)


def _skipping_job():
    """A job whose second asset is switched off (skipped) as Fabric's optional stages are."""
    from fabric_assets.skips import report_skipped

    @dg.multi_asset(specs=[dg.AssetSpec("matrices", deps=["units"], skippable=True)], partitions_def=PARSES,
                    backfill_policy=dg.BackfillPolicy.single_run(), can_subset=True,
                    check_specs=[dg.AssetCheckSpec("rows_ok", asset="matrices")])
    def matrices(context: dg.AssetExecutionContext):
        report_skipped(context, ["matrices"], "late_interaction.enabled is false")
        return
        yield  # a generator that yields nothing

    return dg.Definitions(assets=[_asset("units", None), matrices],
                          jobs=[dg.define_asset_job("parse", partitions_def=PARSES)]).resolve_job_def("parse")


@pytest.mark.parametrize("batch", ["0", "1000"])
def test_skipped_partitions_are_stored_and_served_as_dagster_reads_them(tmp_path, monkeypatch, batch):
    """guards against: the "skipped" events of a switched-off stage lost (Dagster's own SQLite storage
    refuses them, and the UI's partition detail would show nothing), written to the run's shard only
    (the asset pages read the index shard), or not found by partition, in order, or page by page;
    either write path (one event at a time or a batch)."""
    monkeypatch.setenv("DAGSTER_EVENT_BATCH_SIZE", batch)
    job = _skipping_job()
    keys = KEYS[:5]
    with _instance(tmp_path / "fabric", fabric=True) as fabric:
        fabric.add_dynamic_partitions("parses", keys)
        tags = {"dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]}
        first = job.execute_in_process(instance=fabric, tags=tags)
        second = job.execute_in_process(instance=fabric, tags={**tags, "dagster/asset_partition_range_start": keys[3]})
        assert first.success and second.success
        key = dg.AssetKey("matrices")
        assert fabric.fetch_materializations(key, limit=100).records == []
        assert fabric.fetch_materializations(dg.AssetKey("units"), limit=100).records  # the rest of the run ran
        every = fabric.fetch_failed_materializations(key, limit=100).records
        assert [(r.run_id, r.partition_key) for r in every] == (
            [(second.run_id, k) for k in reversed(keys[3:])] + [(first.run_id, k) for k in reversed(keys)])
        failure = every[0].event_log_entry.dagster_event.event_specific_data.asset_materialization_failure
        assert failure.failure_type.value == "SKIPPED" and failure.metadata["skipped_because"].value.startswith(
            "late_interaction")
        mine = fabric.fetch_failed_materializations(dg.AssetRecordsFilter(asset_key=key, asset_partitions=[keys[4]]),
                                                    limit=100).records
        assert [r.run_id for r in mine] == [second.run_id, first.run_id]
        page = fabric.fetch_failed_materializations(key, limit=4)
        rest = fabric.fetch_failed_materializations(key, limit=100, cursor=page.cursor)
        assert page.has_more and [r.storage_id for r in page.records + rest.records] == [r.storage_id for r in every]
        assert sum(e.dagster_event_type == dg.DagsterEventType.ASSET_FAILED_TO_MATERIALIZE
                   for e in fabric.all_logs(first.run_id)) == len(keys)
    with _instance(tmp_path / "stock", fabric=False) as stock:  # what a stock (or PostgreSQL) instance does
        stock.add_dynamic_partitions("parses", keys)
        assert job.execute_in_process(instance=stock, tags=tags).success
        assert stock.fetch_failed_materializations(dg.AssetKey("matrices"), limit=100).records == []
