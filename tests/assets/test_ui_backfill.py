"""A backfill launched from Dagster's UI over parse partitions, evaluated by Dagster's own backfill
daemon: its iteration run in-process against the home's instance (Fabric's event log), the runs it
launches executed synchronously, the backfill launched through the GraphQL mutation the UI sends.

Issue 18: "a backfill launched from the UI ends in an activation", never "completed with failures"
although every run succeeded. Dagster 1.13's backfill daemon counts a partition that a backfill
planned and no run materialized as failed (``_backfill_is_stalled``), so a stage the configuration
switches off must not be planned: it is in no job and in a group of its own, and the step it is
made from records it as skipped.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from dagster_ui import ASSET_NODES, daemon_workspace, partition_view, query, run_backfill, synchronous_instance

from fabric_assets.ingest import ingest as run_ingest
from fabric_assets.projections import COLBERT_MATRICES_ARE_FINITE_AND_COMPLETE, SWITCHED_OFF_GROUP
from fabric_resources.dagster_resources import FAKE_MODELS  # which model embeds is not what this is about

LOCATION = str(Path(__file__).resolve().parents[1] / "fake_models_location.py")
#: The runs' steps in the run's process: the multiprocess default spawns one process per step.
IN_PROCESS = {"execution": {"config": {"in_process": {}}}}
ANNOTATION_ASSETS = ("annotations", "graph_mentions", "graph_edges", "annotation_vectors")


def _skipped(instance: dg.DagsterInstance, asset: str) -> set[tuple[str, str, str]]:
    """(run ID, partition, step key) of every "skipped" event of ``asset``."""
    out = set()
    for r in instance.fetch_failed_materializations(dg.AssetKey(asset), limit=1000).records:
        event = r.event_log_entry.dagster_event
        assert event.event_specific_data.asset_materialization_failure.failure_type.value == "SKIPPED"
        out.add((r.run_id, r.partition_key, event.step_key))
    return out


def test_a_ui_backfill_of_parse_partitions_completes_successfully_with_stages_switched_off(tmp_path, fabric_home):
    """guards against: a backfill of the parse partitions launched from the UI ending "completed with
    failures" under the default configuration (ColBERT and annotation off) although every run
    succeeded, because its runs planned colbert_matrices and skipped it; the switched-off stages then
    losing what the skip recorded: the skipped event per partition saying which switch is off, and
    the "disabled" gate verdict activation needs.

    Both ways the UI launches one: the parse_job page (a job backfill, judged by its runs' status:
    it passed before too) and a group's page or the asset graph ("Materialize all" of the canonical
    and projections groups: a pure asset backfill of Dagster's hidden asset job, which ended
    COMPLETED_FAILED while colbert_matrices was in the projections group)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "coast.md").write_text("# Coast\n\nThe lighthouse keeper climbed the spiral stairs.\n")
    (src / "bread.txt").write_text("Sourdough bread needs flour, water and a patient baker.\n")
    first = run_ingest(src, fabric_home, models=FAKE_MODELS)
    assert first.complete
    (ingest_run,) = first.run_ids
    parses = sorted(s.parse_id for s in fabric_home.catalog.sources())
    instance = synchronous_instance(fabric_home.layout.dagster_home)

    with daemon_workspace(instance, LOCATION) as workspace:
        context = workspace.create_request_context()
        nodes = query(context, ASSET_NODES)["assetNodes"]
        in_groups = sorted(n["assetKey"]["path"][0] for n in nodes if n["groupName"] in ("canonical", "projections"))
        in_job = sorted(n["assetKey"]["path"][0] for n in nodes if "parse_job" in n["jobNames"])
        assert in_groups == in_job and "colbert_matrices" not in in_job, (in_groups, in_job)
        assert {n["assetKey"]["path"][0] for n in nodes if n["groupName"] == SWITCHED_OFF_GROUP} == {
            "colbert_matrices", *ANNOTATION_ASSETS}
        (location,) = context.code_location_names
        (repository,) = context.get_code_location(location).get_repositories()
        assets = [{"path": [k]} for k in in_job]
        common = {"assetSelection": assets, "partitionNames": parses, "fromFailure": False, "runConfigData": IN_PROCESS}
        by_job = run_backfill(workspace, {**common, "selector": {
            "partitionSetName": "parse_job_partition_set",
            "repositorySelector": {"repositoryLocationName": location, "repositoryName": repository}}})
        by_assets = run_backfill(workspace, common)
        views = {pid: partition_view(context, "colbert_matrices", pid) for pid in parses}

    runs = {}
    for backfill in (by_job, by_assets):
        found = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill.backfill_id}))
        assert found and all(r.status == dg.DagsterRunStatus.SUCCESS for r in found)
        runs[backfill.backfill_id] = [r.run_id for r in found]
    assert (by_job.status.value, by_assets.status.value) == ("COMPLETED_SUCCESS", "COMPLETED_SUCCESS")
    assert [r.job_name for r in instance.get_runs(filters=dg.RunsFilter(run_ids=runs[by_assets.backfill_id]))] == [
        "__ASSET_JOB"] * len(runs[by_assets.backfill_id])

    # What the instance records: no run planned or materialized the switched-off assets; the
    # step each is made from (colbert_windows, context_windows) recorded one skipped event per
    # partition of its run.
    backfill_runs = [run for ids in runs.values() for run in ids]
    every_run = [ingest_run, *backfill_runs]
    for run in every_run:
        planned = {e.dagster_event.event_specific_data.asset_key.to_user_string()
                   for e in instance.all_logs(run, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED)}
        assert planned == set(in_job), run
    for asset in ("colbert_matrices", *ANNOTATION_ASSETS):
        assert instance.fetch_materializations(dg.AssetKey(asset), limit=10).records == [], asset
    assert _skipped(instance, "colbert_matrices") == {(run, pid, "colbert_windows")
                                                      for run in every_run for pid in parses}
    for asset in ANNOTATION_ASSETS:
        assert _skipped(instance, asset) == {(run, pid, "context_windows") for run in every_run for pid in parses}
    # As the partition's page shows it: skipped (newest first), saying which switch is off; missing.
    for pid, view in views.items():
        assert [kind for kind, _ in view["events"]] == ["skipped"] * len(every_run), view
        assert {run for _, run in view["events"]} == set(every_run)
        assert all("late_interaction.enabled is false" in d for d in view["descriptions"]), view
        assert view["status"] == "missing", view
    # The gate read its verdict from the skip: both parses stay active.
    assert [r.verdicts[COLBERT_MATRICES_ARE_FINITE_AND_COMPLETE] for r in fabric_home.catalog.parse_runs(parses)] == [
        {"passed": True, "detail": "disabled"}] * 2
    assert sorted(m["parse_id"] for m in fabric_home.catalog.current_release().manifest["sources"].values()) == parses


    # Each backfill ends in an activation: a job backfill's runs through activate_after_parse_run, an
    # asset backfill's (Dagster's hidden asset job) through activate_after_asset_run, never both.
    from fabric_assets.sensors import activate_after_asset_run, activate_after_parse_run
    from fabric_resources.dagster_resources import FabricHomeResource

    def answer(sensor, run_id):
        run = instance.get_run_by_id(run_id)
        (event,) = instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_SUCCESS)
        ctx = dg.build_run_status_sensor_context(sensor.name, dagster_instance=instance, dagster_run=run,
                                                 dagster_event=event.dagster_event,
                                                 resources={"fabric": FabricHomeResource(home=str(fabric_home.root))})
        result = sensor(ctx)
        return "activation_job" if isinstance(result, dg.RunRequest) else None

    for run in runs[by_job.backfill_id]:
        assert answer(activate_after_parse_run, run) == "activation_job"
        assert answer(activate_after_asset_run, run) is None
    for run in runs[by_assets.backfill_id]:
        assert answer(activate_after_asset_run, run) == "activation_job"


def _two_files_ingested(tmp_path, fabric_home):
    """A folder of two files ingested (fake models); returns it and the parse IDs."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "coast.md").write_text("# Coast\n\nThe lighthouse keeper climbed the spiral stairs.\n")
    (src / "bread.txt").write_text("Sourdough bread needs flour, water and a patient baker.\n")
    assert run_ingest(src, fabric_home, models=FAKE_MODELS).complete
    return src, sorted(s.parse_id for s in fabric_home.catalog.sources())


def test_partition_keys_added_by_hand_that_are_no_parse_ids_do_not_fail_a_backfill_of_every_partition(
        tmp_path, fabric_home):
    """guards against: one key added by hand to the ``parses`` partitions from the UI (a typo, a path,
    quote marks, 10,000 characters) failing every backfill over all partitions: the single run of
    the backfill reached the table filters with it, which refuse anything but a parse ID
    (``ValueError: not a parse ID``), so no real partition was re-derived either (hostile trial 10b).
    Now such a key is left out of the run's steps, with a warning; the real partitions are
    re-derived, once each."""
    from fabric_assets.activation.activate import activate

    src, parses = _two_files_ingested(tmp_path, fabric_home)
    rows_before = {t: fabric_home.tables.read(t, parse_ids=parses).num_rows
                   for t in ("units", "chunks", "chunk_vectors")}
    instance = synchronous_instance(fabric_home.layout.dagster_home)
    junk = ["junk", "x' OR '1'='1", "../../etc/passwd", "k" * 10_000, "A" * 32]
    instance.add_dynamic_partitions("parses", junk)

    with daemon_workspace(instance, LOCATION) as workspace:
        context = workspace.create_request_context()
        (location,) = context.code_location_names
        (repository,) = context.get_code_location(location).get_repositories()
        backfill = run_backfill(workspace, {
            "selector": {"partitionSetName": "parse_job_partition_set",
                         "repositorySelector": {"repositoryLocationName": location, "repositoryName": repository}},
            "allPartitions": True, "fromFailure": False, "runConfigData": IN_PROCESS})

    (run,) = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill.backfill_id}))
    assert (backfill.status.value, run.status) == ("COMPLETED_SUCCESS", dg.DagsterRunStatus.SUCCESS)
    warnings = [e.user_message for e in instance.all_logs(run.run_id) if "are not parse IDs" in (e.user_message or "")]
    assert warnings and all("k" * 41 not in w for w in warnings)  # a 10,000-character key is cut short
    # Every real partition was re-derived once, its rows neither doubled nor lost; the release serves both.
    assert {t: fabric_home.tables.read(t, parse_ids=parses).num_rows for t in rows_before} == rows_before
    activate(fabric_home)
    assert [r.status for r in fabric_home.catalog.parse_runs(parses)] == ["ready", "ready"]
    assert sorted(m["parse_id"] for m in fabric_home.catalog.current_release().manifest["sources"].values()) == parses


def test_projections_materialized_before_their_units_do_not_let_a_parse_through_the_gate(tmp_path, fabric_home):
    """guards against: the UI materializing the assets made from units for a new file's partition
    before its units (a downstream asset without its upstream), then ``units`` alone: the first run
    recorded passing verdicts over no rows (no chunk is a unique chunk), so the parse was ready once
    its units were written and the release served a file with no chunk: "searchable", and nothing
    in it found (hostile trial 10b). Now a step made from units computes nothing for a parse still
    pending; the parse waits with its verdicts missing and the next ingest finishes it."""
    from fabric_assets.activation.activate import activate
    from fabric_assets.ingest import _run_config, job
    from fabric_assets.sources.scan import scan
    from fabric_query import Fabric

    src = tmp_path / "src"
    src.mkdir()
    (src / "coast.md").write_text("# Coast\n\nThe lighthouse keeper climbed the spiral stairs.\n")
    assert run_ingest(src, fabric_home, models=FAKE_MODELS).complete
    (src / "late.txt").write_text("The ferry to the island left without the postman.\n")
    (pid,) = scan(fabric_home).parse_ids_to_run
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions("parses", [pid])
    parse_job = job(fabric_home, "parse_job", FAKE_MODELS)

    def launch(*assets: str) -> None:  # one partition, the assets picked as on the asset graph
        assert parse_job.execute_in_process(instance=instance, partition_key=pid, run_config=_run_config(fabric_home),
                                            asset_selection=[dg.AssetKey(a) for a in assets]).success

    launch("chunks", "lexical_documents", "chunk_vectors", "chunk_vectors_multilingual", "context_windows",
           "colbert_windows")
    (run,) = fabric_home.catalog.parse_runs([pid])
    assert (run.status, run.verdicts) == ("pending", {})
    launch("source_bytes", "units", "relationships")
    activate(fabric_home)
    (run,) = fabric_home.catalog.parse_runs([pid])
    assert run.status == "parsed"
    assert "fs:src/late.txt" not in fabric_home.catalog.current_release().manifest["sources"]

    summary = run_ingest(src, fabric_home, models=FAKE_MODELS)
    assert summary.complete and summary.rechunked == [pid]
    assert fabric_home.catalog.current_release().manifest["sources"]["fs:src/late.txt"]["parse_id"] == pid
    assert fabric_home.tables.read("chunks", parse_ids=[pid]).num_rows == 1
    assert [h.citation.source_key for h in Fabric(fabric_home.root).search("ferry postman").results] == [
        "fs:src/late.txt"]


def test_a_parse_partition_deleted_by_hand_is_re_chunked_after_a_chunking_change_and_stays_served(
        tmp_path, fabric_home):
    """guards against: an active parse's partition deleted by hand in the UI, then a chunking change:
    the re-chunk planned its runs over the partitions that exist, so that parse was set to be
    re-chunked and never was; it left the release, and every ingest after said it was complete
    while the file was not searchable (hostile trial 10b). Now a parse a run must cover gets its
    partition back first (re-chunk, re-projection, annotation runs, as the parse runs did)."""
    import json

    src, parses = _two_files_ingested(tmp_path, fabric_home)
    coast = next(s.parse_id for s in fabric_home.catalog.sources() if s.source_key == "fs:src/coast.md")
    instance = dg.DagsterInstance.get()
    instance.delete_dynamic_partition("parses", coast)

    fabric_home.layout.config_file.write_text(json.dumps({"chunking": {"max_tokens": 24}}))
    fabric_home.__dict__.pop("config", None)  # FabricHome caches its config
    summary = run_ingest(src, fabric_home, models=FAKE_MODELS)
    assert summary.complete and sorted(summary.rechunked) == parses
    assert [r.status for r in fabric_home.catalog.parse_runs(parses)] == ["ready", "ready"]
    assert sorted(m["parse_id"] for m in fabric_home.catalog.current_release().manifest["sources"].values()) == parses
    chunkers = fabric_home.tables.read("chunks", parse_ids=[coast], columns=["chunker"]).column("chunker").to_pylist()
    assert chunkers and all(c.endswith(":max24") for c in chunkers)
    assert coast in instance.get_dynamic_partitions("parses")


def test_chunks_alone_materialized_after_a_chunking_change_never_publishes_new_chunks_beside_old_projections(
        tmp_path, fabric_home):
    """guards against (hostile trial 13b): after a chunking change the UI shows ``chunks`` stale, and
    ``chunks`` alone materialized for an active partition (the asset graph) cut it under the new
    chunker (other chunk IDs) while its lexical documents, vectors and windows stayed those of the
    old chunks. Every verdict still passed, the parse stayed ready, and the next activation (any
    file change) published the new chunks beside the old projections: the serving index no longer
    the release's (every query on the scan fallback), its windows naming chunks the release does
    not hold. Now the parse goes back to ``parsed`` with the verdicts of what is made from chunks
    dropped, and no activation follows that run: the release keeps serving its old rows (an
    activation for another reason leaves the file out meanwhile, never half of it), the source
    sensor asks for a ``rechunk_job`` over it, and after that run the release serves the new chunks
    with projections made from them."""
    import json

    from fabric_assets.activation.activate import activate
    from fabric_assets.ingest import _run_config, job
    from fabric_assets.sensors import activate_after_parse_run, source_change_sensor
    from fabric_assets.sources.scan import scan
    from fabric_query import Fabric
    from fabric_resources.dagster_resources import FabricHomeResource
    from fabric_resources.lexical_health import lexical_health

    src, parses = _two_files_ingested(tmp_path, fabric_home)
    coast = next(s.parse_id for s in fabric_home.catalog.sources() if s.source_key == "fs:src/coast.md")
    before = set(fabric_home.tables.read("chunks", parse_ids=[coast]).column("chunk_id").to_pylist())
    fabric_home.layout.config_file.write_text(json.dumps({"chunking": {"max_tokens": 24}}))
    fabric_home.__dict__.pop("config", None)  # FabricHome caches its config
    instance = dg.DagsterInstance.get()
    partial = job(fabric_home, "parse_job", FAKE_MODELS).execute_in_process(
        instance=instance, partition_key=coast, run_config=_run_config(fabric_home),
        asset_selection=[dg.AssetKey("chunks")])
    assert partial.success
    assert set(fabric_home.tables.read("chunks", parse_ids=[coast]).column("chunk_id").to_pylist()) != before
    (run,) = fabric_home.catalog.parse_runs([coast])
    assert (run.status, run.reason) == ("parsed", "rederive")

    def activation_after(run_id: str) -> bool:  # what activate_after_parse_run answers to the run
        (event,) = instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_SUCCESS)
        ctx = dg.build_run_status_sensor_context(
            activate_after_parse_run.name, dagster_instance=instance, dagster_run=instance.get_run_by_id(run_id),
            dagster_event=event.dagster_event, resources={"fabric": FabricHomeResource(home=str(fabric_home.root))})
        return isinstance(activate_after_parse_run(ctx), dg.RunRequest)

    # No activation after it: one would leave the file out until the re-chunk; the release serves its old rows.
    assert not activation_after(partial.run_id)

    (src / "new.txt").write_text("The ferry to the island left without the postman.\n")
    scan(fabric_home)
    activate(fabric_home)  # what any activation does next: a deletion, another file, the asset-run sensor
    health = lexical_health(fabric_home)
    assert health.healthy, (health.problem, [f.field for f in health.fields if not f.ok])
    assert "fs:src/coast.md" not in fabric_home.catalog.current_release().manifest["sources"]

    ctx = dg.build_sensor_context(instance=instance, resources={"fabric": FabricHomeResource(home=str(fabric_home.root))})
    resume = [r for r in source_change_sensor(ctx).run_requests if r.job_name == "rechunk_job"]
    assert [(r.tags["dagster/asset_partition_range_start"], r.tags["dagster/asset_partition_range_end"])
            for r in resume] == [(coast, coast)]
    resumed = job(fabric_home, "rechunk_job", FAKE_MODELS).execute_in_process(
        instance=instance, partition_key=coast, run_config=_run_config(fabric_home))
    assert resumed.success and activation_after(resumed.run_id)
    activate(fabric_home)
    assert fabric_home.catalog.current_release().manifest["sources"]["fs:src/coast.md"]["parse_id"] == coast
    assert lexical_health(fabric_home).healthy
    pack = Fabric(fabric_home.root).search("lighthouse keeper")
    assert [h.citation.source_key for h in pack.results][:1] == ["fs:src/coast.md"]
    # (the dense channel is skipped for the fake encoder's vectors, whatever this test does)
    assert pack.fallback_reason is None and "context_windows" not in pack.skipped_channels, pack.skipped_channels

    # The setting changed back: the next ingest re-chunks what the UI cut under the other one (it
    # found the settings it had last checked under and re-chunked nothing).
    fabric_home.layout.config_file.unlink()
    fabric_home.__dict__.pop("config", None)
    summary = run_ingest(src, fabric_home, models=FAKE_MODELS)
    assert summary.complete and summary.rechunked == [coast]
    assert {c.split(":")[-1] for c in fabric_home.tables.read("chunks", parse_ids=parses).column("chunker").to_pylist()
            } == {"max128"}
