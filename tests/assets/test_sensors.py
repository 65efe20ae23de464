"""The source sensor (via Dagster's build_sensor_context). The package layering is tests/test_layering.py."""

from __future__ import annotations

import json

import dagster as dg

from fabric_assets.jobs import RANGE_END_TAG, RANGE_START_TAG
from fabric_assets.sensors import source_change_sensor
from fabric_resources.dagster_resources import FabricHomeResource


def _evaluate(instance, home_dir):
    ctx = dg.build_sensor_context(instance=instance, resources={"fabric": FabricHomeResource(home=str(home_dir))})
    return source_change_sensor(ctx)


def test_sensor_batches_many_partitions_per_run(tmp_path, fabric_home):
    """guards against: one run (one process) per document; duplicate partitions on a re-tick;
    deletions never reaching activation."""
    fabric_home.layout.config_file.write_text(json.dumps({"sources": {"partitions_per_run": 4}}))
    src = tmp_path / "src"
    src.mkdir()
    for i in range(10):
        (src / f"doc{i}.txt").write_text(f"Document number {i} talks about topic {i * 7}.\n")
    fabric_home.catalog.register_root(src)
    instance = dg.DagsterInstance.ephemeral()

    result = _evaluate(instance, fabric_home.root)
    (add,) = result.dynamic_partitions_requests
    assert len(add.partition_keys) == 10
    runs = result.run_requests
    assert [r.job_name for r in runs] == ["parse_job"] * 3
    instance.add_dynamic_partitions("parses", list(add.partition_keys))  # what the daemon applies
    order = list(add.partition_keys)
    covered = []
    for r in runs:
        start, end = order.index(r.tags[RANGE_START_TAG]), order.index(r.tags[RANGE_END_TAG])
        assert end - start + 1 <= 4
        covered += order[start:end + 1]
    assert sorted(covered) == sorted(order)

    # A second tick with no change adds nothing; pending work is re-requested under the same run keys.
    again = _evaluate(instance, fabric_home.root)
    assert again.dynamic_partitions_requests == []
    assert {r.run_key for r in again.run_requests} == {r.run_key for r in runs}

    # Deleting a file needs only an activation.
    for pid in order:
        fabric_home.catalog.set_parse_status(pid, "ready")
    (src / "doc3.txt").unlink()
    third = _evaluate(instance, fabric_home.root)
    assert [r.job_name for r in third.run_requests] == ["activation_job"]
