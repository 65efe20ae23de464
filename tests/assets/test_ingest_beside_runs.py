"""`fabric ingest` while a run the daemon or the UI launched is writing parses: the ingest leaves
those parses to that run and says so, instead of running them a second time beside it."""

from __future__ import annotations

import uuid

import dagster as dg
from conftest import ingest
from typer.testing import CliRunner

from fabric_assets.cli import app
from fabric_assets.jobs import RANGE_END_TAG, RANGE_START_TAG
from fabric_assets.lifecycle.run_history import home_instance
from fabric_query import Fabric


def _in_progress(instance: dg.DagsterInstance, tags: dict[str, str]) -> str:
    """A parse run the daemon launched and is running (no owner tag: its process cannot be told)."""
    run = dg.DagsterRun(job_name="parse_job", run_id=str(uuid.uuid4()), status=dg.DagsterRunStatus.STARTED, tags=tags)
    instance.add_run(run)
    return run.run_id


def test_an_ingest_leaves_to_a_run_in_progress_the_parses_it_covers(tmp_path, fabric_home):
    """guards against (trial 13b): `fabric ingest` while the daemon's parse run was in progress ran
    that run's parses again, beside it, and called them "resumed after an interrupted run"; a rule
    that leaves every pending parse to any run in progress (the other file must still be parsed)."""
    from fabric_assets.sources.scan import scan

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper logged the tide.\n", encoding="utf-8")
    ingest(src, fabric_home)
    (src / "late.txt").write_text("The ferry to the island left without the postman.\n", encoding="utf-8")
    (late,) = scan(fabric_home).parse_ids_to_run  # what the source sensor found and launched a run over
    instance = home_instance(fabric_home)
    instance.add_dynamic_partitions("parses", [late])
    busy = _in_progress(instance, {RANGE_START_TAG: late, RANGE_END_TAG: late})
    (src / "other.txt").write_text("Sourdough needs a lively starter.\n", encoding="utf-8")

    out = CliRunner().invoke(app, ["ingest", str(src), "--home", str(fabric_home.root)])
    assert out.exit_code == 0, out.output
    assert "left to Dagster runs in progress" in out.output and busy[:8] in out.output, out.output
    assert "resumed" not in out.output, out.output
    assert fabric_home.catalog.parse_runs([late])[0].status == "pending"  # not run a second time
    served = fabric_home.catalog.current_release().manifest["sources"]
    assert "fs:src/other.txt" in served and "fs:src/late.txt" not in served

    instance.delete_run(busy)  # the run ended without parsing it: the next ingest does
    out = CliRunner().invoke(app, ["ingest", str(src), "--home", str(fabric_home.root)])
    assert out.exit_code == 0 and "left to Dagster runs" not in out.output, out.output
    assert [h.citation.source_key for h in Fabric(fabric_home.root).search("ferry postman").results][:1] == [
        "fs:src/late.txt"]
