"""The run-scoped memo of dynamic partition keys: one read per run, never a stale answer about
a write this process made, the instance restored afterwards."""

import dagster as dg
import pytest

from fabric_assets.partition_memo import partition_key_memo

NAME = "memo_test_parses"
PARTS = dg.DynamicPartitionsDefinition(name=NAME)


@pytest.fixture
def instance(tmp_path):
    with dg.DagsterInstance.local_temp(str(tmp_path)) as inst:
        yield inst


@pytest.fixture
def reads(instance, monkeypatch):
    """Counts the storage reads of every key of a definition (what the memo exists to save)."""
    count = [0]
    storage = instance.event_log_storage
    original = storage.get_dynamic_partitions

    def counted(name):
        count[0] += 1
        return original(name)

    monkeypatch.setattr(storage, "get_dynamic_partitions", counted)
    return count


@dg.asset(partitions_def=PARTS, backfill_policy=dg.BackfillPolicy.single_run())
def seen(context: dg.AssetExecutionContext) -> None:
    for key in context.partition_keys:
        context.add_asset_metadata({"key": key}, partition_key=key)


@dg.asset(partitions_def=PARTS, backfill_policy=dg.BackfillPolicy.single_run(), deps=[seen])
def downstream(context: dg.AssetExecutionContext) -> None:
    for key in context.partition_keys:
        context.add_asset_metadata({"run_keys": ",".join(context.partition_keys)}, partition_key=key)


JOB = dg.Definitions(assets=[seen, downstream]).resolve_implicit_global_asset_job_def()


def _run_range(instance, start: str, end: str):
    tags = {"dagster/asset_partition_range_start": start, "dagster/asset_partition_range_end": end}
    return JOB.execute_in_process(instance=instance, tags=tags)


def test_a_run_reads_the_keys_once_and_materializes_exactly_its_range(instance, reads):
    keys = [f"p{i:03d}" for i in range(50)]
    instance.add_dynamic_partitions(NAME, keys)
    reads[0] = 0
    without = _run_range(instance, "p010", "p012")
    loads_without = reads[0]
    reads[0] = 0
    with partition_key_memo(instance):
        result = _run_range(instance, "p020", "p022")
    assert result.success and without.success
    assert loads_without > 3, "Dagster no longer reloads the keys per run; the memo may be unnecessary"
    assert reads[0] == 1
    for node in ("seen", "downstream"):
        assert {m.partition for m in result.asset_materializations_for_node(node)} == {"p020", "p021", "p022"}
    assert {m.metadata["run_keys"].value for m in result.asset_materializations_for_node("downstream")} == {
        "p020,p021,p022"}


def test_a_write_through_the_instance_keeps_the_memo_equal_to_storage(instance, reads):
    """guards against: a memo that misses this process's own added key, lists a held key again,
    keeps a deleted one, or reloads every key after each addition (what it exists to save)."""
    instance.add_dynamic_partitions(NAME, ["a", "b"])
    with partition_key_memo(instance):
        assert instance.get_dynamic_partitions(NAME) == ["a", "b"]
        reads[0] = 0
        instance.add_dynamic_partitions(NAME, ["c", "b", "d"])  # b is held already
        assert instance.get_dynamic_partitions(NAME) == ["a", "b", "c", "d"]
        assert instance.has_dynamic_partition(NAME, "d")
        assert reads[0] == 0
        instance.delete_dynamic_partition(NAME, "a")
        assert instance.get_dynamic_partitions(NAME) == ["b", "c", "d"]
        assert not instance.has_dynamic_partition(NAME, "a")
    assert instance.get_dynamic_partitions(NAME) == ["b", "c", "d"]  # storage agrees


def test_a_key_added_by_another_process_is_still_found(instance, tmp_path):
    instance.add_dynamic_partitions(NAME, ["a"])
    with partition_key_memo(instance):
        assert instance.get_dynamic_partitions(NAME) == ["a"]
        # A second instance on the same storage stands for the sensor in another process.
        with dg.DagsterInstance.from_ref(instance.get_ref()) as other:
            other.add_dynamic_partitions(NAME, ["late"])
        assert instance.has_dynamic_partition(NAME, "late")
        assert not instance.has_dynamic_partition(NAME, "never")


def test_callers_cannot_mutate_the_memo(instance):
    instance.add_dynamic_partitions(NAME, ["a"])
    with partition_key_memo(instance):
        instance.get_dynamic_partitions(NAME).append("x")
        assert instance.get_dynamic_partitions(NAME) == ["a"]


def test_the_instance_is_restored_also_after_an_error_and_nesting_shares_the_memo(instance, reads):
    instance.add_dynamic_partitions(NAME, ["a"])
    reads[0] = 0
    with pytest.raises(RuntimeError):
        with partition_key_memo(instance):
            with partition_key_memo(instance):
                instance.get_dynamic_partitions(NAME)
            instance.get_dynamic_partitions(NAME)
            assert reads[0] == 1
            raise RuntimeError("boom")
    assert not {"get_dynamic_partitions", "has_dynamic_partition", "add_dynamic_partitions"} & set(vars(instance))
    reads[0] = 0
    instance.get_dynamic_partitions(NAME)
    instance.get_dynamic_partitions(NAME)
    assert reads[0] == 2
