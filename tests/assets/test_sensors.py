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


def test_parses_left_pending_by_a_finished_run_or_a_retry_get_a_run_key_the_daemon_launches(tmp_path, fabric_home):
    """guards against (hostile trial 9): one run key per set of pending parses. The daemon launches
    a run key once, whatever that run's outcome, so parses whose unattended run failed (a fault of
    Fabric, the run killed) or that `retry_failed_job` set pending again after a finished run were
    requested under a key it skipped on every tick: never run again with no command typed. A run
    still in progress keeps its key (no second run of the same parses)."""
    from dagster._core.storage.tags import RUN_KEY_TAG

    from fabric_assets.sensors import RETRIES

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper logged the tide.\n")
    fabric_home.catalog.register_root(src)
    instance = dg.DagsterInstance.ephemeral()
    first = _evaluate(instance, fabric_home.root)
    instance.add_dynamic_partitions("parses", list(first.dynamic_partitions_requests[0].partition_keys))
    (request,) = first.run_requests

    @dg.op
    def boom():
        raise RuntimeError("the parse run's process ran out of disk")

    @dg.job
    def stand_in():  # stands for the parse run the daemon launched under that key
        boom()

    in_progress = instance.create_run_for_job(stand_in, tags={RUN_KEY_TAG: request.run_key})
    assert [r.run_key for r in _evaluate(instance, fabric_home.root).run_requests] == [request.run_key]
    instance.delete_run(in_progress.run_id)
    seen = {request.run_key}
    for _ in range(RETRIES):
        stand_in.execute_in_process(instance=instance, tags={RUN_KEY_TAG: request.run_key}, raise_on_error=False)
        (again,) = _evaluate(instance, fabric_home.root).run_requests
        assert again.run_key not in seen  # a key the daemon has not launched: the parses run again
        seen.add(again.run_key)
        request = again
    # Retried by the operator after a run under every key: a new key again.
    (pid,) = [r.parse_id for r in fabric_home.catalog.parse_runs(status="pending")]
    fabric_home.catalog.set_parse_status(pid, "failed", reason="ocr-unavailable")
    fabric_home.catalog.set_parse_status(pid, "pending")
    (retried,) = _evaluate(instance, fabric_home.root).run_requests
    assert retried.run_key not in seen


def test_parses_a_terminated_run_left_parsed_are_finished_by_the_sensor_not_only_by_an_ingest(tmp_path, fabric_home,
                                                                                              monkeypatch):
    """guards against (hostile trial 13b): a parse run terminated from the UI (or failed, or killed)
    after its units step left its parses ``parsed`` with verdicts missing; the source sensor asked
    for pending parses only, so with the daemon running those files stayed out of every release
    (``fabric status``: "unfinished") until someone typed ``fabric ingest``. Now the sensor asks for
    a ``rechunk_job`` over them (``parse_job`` when units are missing too), but never while a run
    that may be writing them is in progress, and the run it asks for makes them searchable."""
    from fabric_assets.activation.activate import activate
    from fabric_assets.ingest import _run_config, job
    from fabric_assets.ingest import ingest as run_ingest
    from fabric_query import Fabric
    from fabric_resources.dagster_resources import FAKE_MODELS

    src = tmp_path / "src"
    src.mkdir()
    (src / "coast.md").write_text("# Coast\n\nThe lighthouse keeper climbed the spiral stairs.\n")
    assert run_ingest(src, fabric_home, models=FAKE_MODELS).complete
    (src / "late.txt").write_text("The ferry to the island left without the postman.\n")
    instance = dg.DagsterInstance.get()
    first = _evaluate(instance, fabric_home.root)
    (pid,) = first.dynamic_partitions_requests[0].partition_keys
    instance.add_dynamic_partitions("parses", [pid])
    (request,) = first.run_requests
    # The sensor's parse run, terminated once its units were written: what it leaves.
    parse_job = job(fabric_home, "parse_job", FAKE_MODELS)
    assert parse_job.execute_in_process(
        instance=instance, partition_key=pid, run_config=_run_config(fabric_home),
        tags={"dagster/run_key": request.run_key},
        asset_selection=[dg.AssetKey(a) for a in ("source_bytes", "units", "relationships")]).success
    assert fabric_home.catalog.parse_runs([pid])[0].status == "parsed"

    @dg.op
    def noop():
        pass

    @dg.job
    def stand_in():  # a run in progress that may be writing the parse (a backfill, the UI's)
        noop()

    busy = instance.create_run_for_job(stand_in, status=dg.DagsterRunStatus.STARTED)
    assert _evaluate(instance, fabric_home.root).run_requests == []
    instance.delete_run(busy.run_id)
    # A run made long ago and never launched (a Launchpad launch that failed) is not waited for.
    never = instance.create_run_for_job(stand_in, status=dg.DagsterRunStatus.NOT_STARTED)
    assert _evaluate(instance, fabric_home.root).run_requests == []  # just made: about to be launched
    monkeypatch.setattr("fabric_assets.run_owner.NEVER_LAUNCHED_S", -1.0)  # ... and now made long ago
    (resume,) = _evaluate(instance, fabric_home.root).run_requests
    instance.delete_run(never.run_id)
    assert resume.job_name == "rechunk_job"
    assert (resume.tags[RANGE_START_TAG], resume.tags[RANGE_END_TAG]) == (pid, pid)
    assert [r.run_key for r in _evaluate(instance, fabric_home.root).run_requests] == [resume.run_key]

    rechunk = job(fabric_home, "rechunk_job", FAKE_MODELS)
    assert rechunk.execute_in_process(instance=instance, partition_key=pid, run_config=_run_config(fabric_home),
                                      tags={"dagster/run_key": resume.run_key}).success
    activate(fabric_home)  # what activate_after_parse_run requests after a rechunk_job run
    assert fabric_home.catalog.current_release().manifest["sources"]["fs:src/late.txt"]["parse_id"] == pid
    assert [h.citation.source_key for h in Fabric(fabric_home.root).search("ferry postman").results] == [
        "fs:src/late.txt"]
    assert _evaluate(instance, fabric_home.root).run_requests == []



def test_a_tick_beside_a_cleanup_purge_or_restore_skips_with_a_reason_and_the_next_scans(tmp_path, any_home):
    """guards against (trial 23g): the source sensor's scan waiting for the catalog's `sources` lock,
    which a cleanup, a purge or an in-place snapshot restore holds for their whole (maybe long)
    length: the tick overran Dagster's sensor timeout. Now the tick skips at once with a reason that
    names the lock, and the next tick, the lock free, scans."""
    import threading

    from fabric_resources.schema import SOURCES_LOCK

    home = any_home
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("A harbour master counted herring boats at dawn.\n")
    home.catalog.register_root(src)
    instance = dg.DagsterInstance.ephemeral()
    ticks: list = []
    with home.catalog.exclusive(SOURCES_LOCK):  # as a cleanup, purge or restore in another process holds it
        tick = threading.Thread(target=lambda: ticks.append(_evaluate(instance, home.root)), daemon=True)
        tick.start()
        tick.join(timeout=20)
        waited = tick.is_alive()
    tick.join()
    assert not waited, "the tick waited for the sources lock"
    (skipped,) = ticks
    assert skipped.run_requests == [] and skipped.dynamic_partitions_requests == []
    assert "sources" in (skipped.skip_reason.skip_message or "")
    assert home.catalog.sources() == []  # nothing recorded: the next tick finds the file new

    again = _evaluate(instance, home.root)
    assert [r.job_name for r in again.run_requests] == ["parse_job"]
    assert [s.source_key for s in home.catalog.sources()] == ["fs:src/a.txt"]
