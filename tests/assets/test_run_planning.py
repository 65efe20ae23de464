"""Tests for fabric_assets.run_planning.partition_ranges."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_assets.run_planning import partition_ranges

KEYS = [f"k{i}" for i in range(10)]


def test_contiguous_run():
    """guards against: a contiguous range being split without reason."""
    assert partition_ranges(KEYS, ["k2", "k3", "k4"], 10) == [["k2", "k3", "k4"]]


def test_per_run_cap():
    """guards against: runs longer than per_run (off-by-one at the cap)."""
    assert partition_ranges(KEYS, KEYS[:7], 3) == [["k0", "k1", "k2"], ["k3", "k4", "k5"], ["k6"]]
    assert partition_ranges(KEYS, KEYS[:3], 3) == [["k0", "k1", "k2"]]
    assert partition_ranges(KEYS, KEYS[:4], 1) == [["k0"], ["k1"], ["k2"], ["k3"]]


def test_gap_splits_runs():
    """guards against: a run spanning a key that is not wanted (the range would materialize it)."""
    assert partition_ranges(KEYS, ["k1", "k2", "k4", "k5", "k9"], 10) == [["k1", "k2"], ["k4", "k5"], ["k9"]]


def test_unknown_keys_ignored():
    """guards against: KeyError on keys not (yet) registered as partitions, or them being emitted."""
    assert partition_ranges(KEYS, ["nope", "k1", "zz", "k2"], 10) == [["k1", "k2"]]
    assert partition_ranges(KEYS, ["nope"], 10) == []


def test_wanted_order_and_duplicates_do_not_matter():
    """guards against: runs following the order of `wanted` instead of partition order, or duplicates."""
    assert partition_ranges(KEYS, ["k3", "k1", "k2", "k3", "k1"], 10) == [["k1", "k2", "k3"]]


def test_partition_order_is_ordered_keys_not_lexicographic():
    """guards against: sorting keys by name instead of by position in ordered_keys."""
    ordered = ["z", "a", "m"]
    assert partition_ranges(ordered, ["m", "a", "z"], 10) == [["z", "a", "m"]]
    assert partition_ranges(ordered, ["z", "m"], 10) == [["z"], ["m"]]


def test_empty():
    """guards against: crashes or an empty run for nothing wanted."""
    assert partition_ranges(KEYS, [], 5) == []
    assert partition_ranges([], ["a"], 5) == []


@pytest.mark.parametrize("per_run", [0, -1])
def test_per_run_must_be_positive(per_run):
    """guards against: an infinite loop or empty runs with a non-positive cap."""
    with pytest.raises(ValueError):
        partition_ranges(KEYS, KEYS, per_run)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(alphabet="abcdefgh", min_size=1, max_size=3), unique=True, max_size=30),
    st.lists(st.text(alphabet="abcdefghxyz", min_size=1, max_size=3), max_size=40),
    st.integers(min_value=1, max_value=8),
)
def test_partition_ranges_property(ordered, wanted, per_run):
    """guards against: a wanted key dropped or duplicated, a non-contiguous run, cap overflow, unsorted runs,
    or an unnecessary split (two adjacent runs that could have been one)."""
    runs = partition_ranges(ordered, wanted, per_run)
    pos = {k: i for i, k in enumerate(ordered)}
    flat = [k for r in runs for k in r]
    assert sorted(flat) == sorted(set(wanted) & set(ordered))  # each wanted known key exactly once
    assert len(flat) == len(set(flat))
    for r in runs:
        assert 1 <= len(r) <= per_run
        ps = [pos[k] for k in r]
        assert ps == list(range(ps[0], ps[0] + len(r)))  # contiguous in partition order
    starts = [pos[r[0]] for r in runs]
    assert starts == sorted(starts)
    for a, b in zip(runs, runs[1:]):
        # a new run starts only at a gap or because the previous run is full
        assert pos[b[0]] != pos[a[-1]] + 1 or len(a) == per_run


def test_planning_few_new_parses_equals_planning_from_every_partition():
    """guards against: the shortcut for a few new parses (no read of every partition key) planning
    other runs than ordering every partition would: new keys out of order, an existing key taken
    for new, or duplicates."""
    import dagster as dg

    from fabric_assets.partitions import PARSES
    from fabric_assets.sensors import plan_parse_runs

    with dg.DagsterInstance.ephemeral() as instance:
        existing = [f"{i:032x}" for i in range(10)]
        instance.add_dynamic_partitions(PARSES.name, existing)
        for pending, per_run in ((["f" * 32, "e" * 32, "f" * 32], 1), (["f" * 32, "e" * 32, "d" * 32], 2),
                                 ([existing[3], "e" * 32], 2), ([existing[4], existing[5]], 4), ([], 3)):
            everything = list(instance.get_dynamic_partitions(PARSES.name))
            new = [k for k in dict.fromkeys(pending) if k not in everything]
            expected = (new, partition_ranges(everything + new, pending, per_run))
            assert plan_parse_runs(instance, pending, per_run) == expected, (pending, per_run)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(alphabet="abcdefgh", min_size=1, max_size=3), unique=True, max_size=30),
    st.lists(st.text(alphabet="abcdefghxyz", min_size=1, max_size=3), max_size=40),
    st.integers(min_value=1, max_value=8),
    st.dictionaries(st.text(alphabet="abcdefgh", min_size=1, max_size=3), st.integers(0, 100)),
    st.integers(min_value=1, max_value=150),
)
def test_a_byte_bound_caps_each_run_but_a_lone_large_key(ordered, wanted, per_run, sizes, max_bytes):
    """guards against (trial 11b): runs planned by key count only, so a run of a few large files held
    them all in every step (three 20 MB files peaked at 2.5 GB); and a bound that drops or splits
    more than it must."""
    runs = partition_ranges(ordered, wanted, per_run, sizes, max_bytes)
    pos = {k: i for i, k in enumerate(ordered)}
    flat = [k for r in runs for k in r]
    assert sorted(flat) == sorted(set(wanted) & set(ordered)) and len(flat) == len(set(flat))
    held = [sum(sizes.get(k, 0) for k in r) for r in runs]
    for r, total in zip(runs, held):
        assert 1 <= len(r) <= per_run
        assert total <= max_bytes or len(r) == 1  # over the bound only alone
    for (a, ta), b in zip(zip(runs, held), runs[1:]):
        # a new run starts only at a gap, a full run, or where the next key would pass the bound
        assert pos[b[0]] != pos[a[-1]] + 1 or len(a) == per_run or ta + sizes.get(b[0], 0) > max_bytes
    assert partition_ranges(ordered, wanted, per_run, sizes, None) == partition_ranges(ordered, wanted, per_run)


def test_ingest_plans_runs_within_the_byte_bound(tmp_path, monkeypatch):
    """The bound as ingest applies it: files of 3 KB under a 7 KB bound run two at a time."""
    import dagster as dg
    from conftest import ingest

    from fabric_resources.home import FabricHome

    home = FabricHome(tmp_path / "home")
    home.layout.config_file.write_text('{"sources": {"bytes_per_run": 7000}}')
    home = FabricHome(tmp_path / "home")
    monkeypatch.setenv("DAGSTER_HOME", str(home.layout.dagster_home))
    src = tmp_path / "notes"
    src.mkdir()
    for i in range(5):
        (src / f"n{i}.txt").write_text(f"Note {i}. " + "The keeper logged the tide. " * 110)
    ingest(src, home)
    with dg.DagsterInstance.from_config(str(home.layout.dagster_home)) as instance:
        parse_runs = [r for r in instance.get_runs() if r.job_name == "parse_job"]
    assert len(parse_runs) == 3, [r.tags for r in parse_runs]  # 2 + 2 + 1 files
    assert len(home.catalog.current_release().manifest["sources"]) == 5
