"""Lineage audit over real Dagster runs: two runs of the same partition, and the audit names the
one that wrote the rows each release pins (joined on the Lance version)."""

from __future__ import annotations

import json
import os

import dagster as dg
import pytest
from conftest import ingest
from typer.testing import CliRunner

from fabric_assets.cli import app
from fabric_assets.lifecycle.audit import AuditError, audit_citation
from fabric_assets.lifecycle.operator import force_reparse
from fabric_assets.lifecycle.rebuild import run_marked
from fabric_query import Fabric
from fabric_resources.home import FabricHome

LIGHTHOUSE = "The lighthouse keeper climbed the spiral stairs every evening.\n"


def test_audit_names_the_one_run_that_wrote_the_pinned_rows(tmp_path, fabric_home):
    """guards against: an audit that lists every run of the partition and cannot say which one
    wrote the rows a release pins (the old notebook's answer)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(LIGHTHOUSE)
    first_runs = ingest(src, fabric_home).run_ids
    c1 = Fabric(fabric_home.root).search("lighthouse keeper").results[0].citation
    force_reparse(fabric_home, "fs:src/light.txt")
    second = run_marked(FabricHome(fabric_home.root))
    assert second.failed_runs == [] and second.run_ids
    c2 = Fabric(fabric_home.root).search("lighthouse keeper").results[0].citation
    assert c2.parse_id == c1.parse_id and c2.release_id != c1.release_id  # same partition, two runs

    home = FabricHome(fabric_home.root)
    os.environ["DAGSTER_HOME"] = str(home.layout.dagster_home)
    with dg.DagsterInstance.from_config(str(home.layout.dagster_home)) as instance:
        wrote = {r.run_id for r in instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("chunks"), asset_partitions=[c1.parse_id]),
            limit=100).records}
        assert len(wrote) == 2  # both runs materialized the partition
        a1, a2 = audit_citation(home, c1, instance), audit_citation(home, c2, instance)
        assert a1.source_hash == home.catalog.parse_run(c1.parse_id).source_hash and a1.parser
        for audit, expected in ((a1, set(first_runs)), (a2, set(second.run_ids))):
            chunks = next(w for w in audit.writers if w.table == "chunks")
            assert chunks.run_id in expected and chunks.run_id in wrote
            assert chunks.written_version <= chunks.pinned_version
            assert instance.get_run_by_id(chunks.run_id).status == dg.DagsterRunStatus.SUCCESS
        assert {w.run_id for w in a1.writers if w.table == "chunks"} != {w.run_id for w in a2.writers
                                                                           if w.table == "chunks"}
        with pytest.raises(AuditError, match="not retained"):
            audit_citation(home, c1.model_copy(update={"release_id": 999}), instance)
    out = CliRunner().invoke(app, ["audit", c1.model_dump_json(), "--json", "--home", str(home.root)])
    assert out.exit_code == 0, out.output
    assert {w["table"]: w["run_id"] for w in json.loads(out.output)["writers"]} == {
        w.table: w.run_id for w in a1.writers}
