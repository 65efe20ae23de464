"""Sensors: source changes → parse partitions and runs; finished parse runs → activation;
activation → annotation runs (when enabled) → activation again."""


import hashlib
from collections.abc import Mapping

import dagster as dg
from dagster._core.storage.tags import RUN_KEY_TAG

from fabric_assets.annotations.planning import parses_needing_annotation
from fabric_assets.jobs import (RANGE_END_TAG, RANGE_START_TAG, activation_job, annotation_job, parse_job,
                                rechunk_job, reproject_job)
from fabric_assets.lifecycle.jobs import repair_job
from fabric_assets.partitions import PARSES
from fabric_assets.projections import PROJECTIONS
from fabric_assets.run_planning import partition_ranges
from fabric_assets.sources.scan import awaited_parse_ids, scan
from fabric_resources.dagster_resources import FabricHomeResource
from fabric_resources.locks import LockHeld

#: Why a tick skips when ``sources.unattended`` is false (the sensors start running by default).
OFF = "sources.unattended is false in the home's config.json"
#: Why a source sensor tick skips while another holds the catalog's ``sources`` lock. Waiting for
#: it (a cleanup or purge may hold it for minutes) overran Dagster's sensor timeout.
SOURCES_BUSY = ("a cleanup, purge, snapshot restore or another scan holds the catalog's sources lock; "
                "the next tick scans")


def steps_config(home) -> dict:
    """Run config choosing the executor of the runs a sensor requests (``sources.unattended_steps``;
    the definitions keep Dagster's default executor, which takes either)."""
    mode = home.config.sources.unattended_steps
    return {} if mode == "multiprocess" else {"execution": {"config": {mode: {}}}}


def range_tags(keys: list[str]) -> dict[str, str]:
    return {RANGE_START_TAG: keys[0], RANGE_END_TAG: keys[-1]}


#: Up to this many pending parses are each looked up in Dagster's partitions rather than reading
#: all of them (a change of a few files in a folder of 10,000).
_LOOKUP_AT_MOST = 64


def run_budget(home, parse_ids: list[str]) -> dict:
    """The byte bound on the runs over ``parse_ids`` (``sources.bytes_per_run``) and each parse's
    source size in bytes, as :func:`plan_parse_runs` and :func:`runs_over` take them."""
    sizes: dict[str, int] = {}
    for s in home.catalog.sources(parse_ids=parse_ids) if parse_ids else ():
        sizes[s.parse_id] = max(sizes.get(s.parse_id, 0), s.size or 0)
    return {"sizes": sizes, "max_bytes": home.config.sources.bytes_per_run}


def plan_parse_runs(instance: dg.DagsterInstance, pending: list[str], per_run: int,
                    sizes: Mapping[str, int] | None = None,
                    max_bytes: int | None = None) -> tuple[list[str], list[list[str]]]:
    """New partition keys to add and the runs (contiguous ranges) that cover ``pending``, at most
    ``per_run`` keys and (with ``sizes``) ``max_bytes`` each (:func:`partition_ranges`).

    Raises
    ------
    ValueError
        If ``per_run`` or ``max_bytes`` is not positive.
    """
    if per_run < 1:
        raise ValueError("per_run must be positive")
    pending = list(dict.fromkeys(pending))
    if len(pending) <= _LOOKUP_AT_MOST and not any(instance.has_dynamic_partition(PARSES.name, k) for k in pending):
        # All new: they are added after every existing key, in this order, so they are contiguous
        # (what partition_ranges finds over them, without reading every partition key).
        return pending, partition_ranges(pending, pending, per_run, sizes, max_bytes)
    existing = list(instance.get_dynamic_partitions(PARSES.name))
    known = set(existing)
    new_keys = [p for p in pending if p not in known]
    return new_keys, partition_ranges(existing + new_keys, pending, per_run, sizes, max_bytes)


#: Runs the sensor requests again for one set of parses still pending after a finished run.
RETRIES = 3


def parse_run_key(instance: dg.DagsterInstance, home, keys: list[str], prefix: str = "parse") -> str:
    """The run key of a parse run over the pending parses ``keys``.

    The daemon launches a run key once, whatever that run's outcome. So the key is the same while
    those parses are untouched and a run of them is in progress, new when they were set pending
    again (``retry_failed_job``: their catalog rows' ``updated_at`` enter the key), and new when the
    last run under it finished and left them pending (a run that failed, was killed or cancelled),
    at most :data:`RETRIES` times. One key per set of parses never ran them again unattended.
    ``prefix`` names the kind of run (``resume``: :func:`resume_requests`)."""
    stamps = sorted(r.updated_at for r in home.catalog.parse_runs(keys))
    base = f"{prefix}:" + hashlib.sha256((",".join(keys) + f"@{stamps[-1] if stamps else ''}").encode()).hexdigest()[:24]
    for attempt in range(RETRIES + 1):
        key = base if attempt == 0 else f"{base}:{attempt}"
        runs = instance.get_runs(dg.RunsFilter(tags={RUN_KEY_TAG: key}), limit=1)
        if not runs or not runs[0].is_finished:
            return key
    return key


def parse_work_in_progress(instance: dg.DagsterInstance) -> list[str]:
    """IDs of the runs in progress (queued, starting, started, cancelling, or just made) that may be
    writing parse partitions: every job's but the activation's. While one is, a parse ``parsed``
    with verdicts missing may be its own work, not an interrupted run's."""
    from fabric_assets.run_owner import UNFINISHED, fail_orphaned_runs, never_launched

    fail_orphaned_runs(instance)
    return [r.dagster_run.run_id for r in instance.get_run_records(dg.RunsFilter(statuses=list(UNFINISHED)))
            if r.dagster_run.job_name != activation_job.name and not never_launched(r)]


def partitions_in_progress(instance: dg.DagsterInstance) -> tuple[dict[str, str], list[str]]:
    """What the runs of :func:`parse_work_in_progress` are writing: ``({parse ID: run ID}, [IDs of
    the runs whose partitions cannot be told])`` — a run over no partition tag or range (a job run
    from the UI over every partition) may be writing any parse."""
    covered: dict[str, str] = {}
    untold: list[str] = []
    for run_id in parse_work_in_progress(instance):
        run = instance.get_run_by_id(run_id)
        keys = run_partitions(instance, run) if run is not None else []
        if not keys:
            untold.append(run_id)
        for key in keys:
            covered.setdefault(key, run_id)
    return covered, untold


def resume_requests(instance: dg.DagsterInstance, home, exclude: set[str]) -> list[dg.RunRequest]:
    """Runs that finish the parses a run left ``parsed`` with verdicts missing (a run terminated
    from the UI, failed or killed after its units step) when no run that could be writing them is
    in progress: ``rechunk_job`` for those missing only verdicts made from chunks, ``parse_job``
    for the others, as ``fabric ingest`` does. Without them such parses waited for a typed
    ``fabric ingest``: their files were in no release while the daemon ran (hostile trial 13b).
    Each set is asked again under a new run key at most :data:`RETRIES` times after a finished run."""
    from fabric_assets.lifecycle.repair import awaited_unfinished, rechunk_only

    missing = {p: names for p, names in awaited_unfinished(home).items() if p not in exclude}
    if not missing or parse_work_in_progress(instance):
        return []
    requests = []
    per_run = home.config.sources.partitions_per_run
    for job, wanted in ((rechunk_job, sorted(p for p, n in missing.items() if rechunk_only(n))),
                        (parse_job, sorted(p for p, n in missing.items() if not rechunk_only(n)))):
        for keys in runs_over(instance, wanted, per_run, **run_budget(home, wanted)) if wanted else ():
            requests.append(dg.RunRequest(job_name=job.name, run_key=parse_run_key(instance, home, keys, "resume"),
                                          tags=range_tags(keys), run_config=steps_config(home)))
    return requests


@dg.sensor(
    jobs=[parse_job, rechunk_job, activation_job],
    minimum_interval_seconds=30,
    description="Scans registered roots; adds a parse partition per new content and starts batched runs.",
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def source_change_sensor(context: dg.SensorEvaluationContext, fabric: FabricHomeResource) -> dg.SensorResult:
    home = fabric.open()
    if not home.config.sources.unattended:
        return dg.SensorResult(skip_reason=OFF)
    try:
        report = scan(home, wait=False)
    except LockHeld:
        return dg.SensorResult(skip_reason=SOURCES_BUSY)
    new_keys, runs = plan_parse_runs(context.instance, report.parse_ids_to_run, home.config.sources.partitions_per_run,
                                     **run_budget(home, report.parse_ids_to_run))
    requests = [
        dg.RunRequest(
            job_name=parse_job.name,
            run_key=parse_run_key(context.instance, home, keys),
            tags=range_tags(keys),
            run_config=steps_config(home),
        )
        for keys in runs
    ]
    requests += resume_requests(context.instance, home, set(report.parse_ids_to_run))
    if report.needs_activation and not requests:
        # Deletions and moves need no parse, only a new release. A scan reports a change once.
        requests.append(dg.RunRequest(job_name=activation_job.name, run_config=steps_config(home)))
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[PARSES.build_add_request(new_keys)] if new_keys else [],
    )


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    monitored_jobs=[parse_job, reproject_job, rechunk_job],
    request_job=activation_job,
    description="Activates whatever passed its gate once a parse run finishes.",
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def activate_after_parse_run(context: dg.RunStatusSensorContext, fabric: FabricHomeResource):
    home = fabric.open()
    if not home.config.sources.unattended:
        return dg.SkipReason(OFF)
    if (why := left_in_part(context.instance, home, context.dagster_run)) is not None:
        return dg.SkipReason(why)
    return dg.RunRequest(run_key=f"activate-after:{context.dagster_run.run_id}", run_config=steps_config(home))


def run_partitions(instance: dg.DagsterInstance, run: dg.DagsterRun) -> list[str]:
    """The ``parses`` partition keys of ``run`` (its partition tag, or its range's keys)."""
    from dagster._core.storage.tags import PARTITION_NAME_TAG

    if run.tags.get(PARTITION_NAME_TAG):
        return [run.tags[PARTITION_NAME_TAG]]
    start, end = run.tags.get(RANGE_START_TAG), run.tags.get(RANGE_END_TAG)
    if not (start and end):
        return []
    keys = list(instance.get_dynamic_partitions(PARSES.name))
    if start not in keys or end not in keys:
        return []
    return keys[keys.index(start):keys.index(end) + 1]


def left_in_part(instance: dg.DagsterInstance, home, run: dg.DagsterRun) -> str | None:
    """Why not to activate after ``run``: it left parses the current release serves re-derived in
    part (``parsed`` with verdicts missing: ``chunks`` alone materialized after a chunking change).
    An activation now would leave their files out of the release until they are whole; without it
    the release keeps serving their old rows, and the run the source sensor asks for over them
    (:func:`resume_requests`) is followed by an activation. ``None`` otherwise."""
    from fabric_assets.lifecycle.repair import awaited_unfinished

    current = home.catalog.current_release()
    mine = set(run_partitions(instance, run)) if current is not None else set()
    if not mine:
        return None
    served = {m["parse_id"] for m in current.manifest["sources"].values()}
    part = sorted(mine & served & set(awaited_unfinished(home)))
    if not part:
        return None
    return (f"the run left {len(part)} served parse(s) re-derived in part ({', '.join(part[:3])}); the release keeps "
            "serving them, and the source sensor's run over them activates once they are whole")


#: Dagster's hidden asset job: what a backfill or "Materialize" launched from an asset group's page or
#: the asset graph runs (one per partitions definition: ``__ASSET_JOB``, ``__ASSET_JOB_0``, ...).
HIDDEN_ASSET_JOB = "__ASSET_JOB"
#: Every asset partitioned by parse ID (the registry's projections).
PARSE_PARTITIONED = frozenset(p.key for p in PROJECTIONS)


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    request_job=activation_job,
    description="Activates whatever passed its gate once a run of Dagster's own asset job (a backfill or "
    "materialization launched from an asset group's page or the asset graph) wrote parse partitions.",
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def activate_after_asset_run(context: dg.RunStatusSensorContext, fabric: FabricHomeResource):
    # No monitored_jobs: the sensor sees every run of this code location, and answers only those of
    # the hidden asset job; the named jobs have their own sensors (activate_after_parse_run,
    # activate_after_annotation_run), so a run is never activated twice.
    run = context.dagster_run
    if not run.job_name.startswith(HIDDEN_ASSET_JOB):
        return dg.SkipReason(f"{run.job_name} is a named job")
    if not {k.to_user_string() for k in (run.asset_selection or ())} & PARSE_PARTITIONED:
        return dg.SkipReason("the run wrote no parse partition")
    home = fabric.open()
    if not home.config.sources.unattended:
        return dg.SkipReason(OFF)
    if (why := left_in_part(context.instance, home, run)) is not None:
        return dg.SkipReason(why)
    return dg.RunRequest(run_key=f"activate-after:{run.run_id}", run_config=steps_config(home))


def runs_over(instance: dg.DagsterInstance, wanted: list[str], per_run: int,
              sizes: Mapping[str, int] | None = None, max_bytes: int | None = None) -> list[list[str]]:
    """The runs (contiguous ranges of ``parses`` partitions, at most ``per_run`` keys each) that
    cover ``wanted``. A wanted parse whose partition is gone (deleted by hand in the UI) is added
    again first, after every other key: ranges over the existing partitions alone left it out of
    every run, and a re-chunk or re-projection that never ran kept its source out of every release
    while the ingest said it was complete.

    Raises
    ------
    ValueError
        If ``per_run`` is not positive.
    """
    new_keys, runs = plan_parse_runs(instance, wanted, per_run, sizes, max_bytes)
    if new_keys:
        instance.add_dynamic_partitions(PARSES.name, new_keys)
    return runs


def plan_annotation_runs(instance: dg.DagsterInstance, wanted: list[str], per_run: int) -> list[list[str]]:
    """Contiguous ranges of ``parses`` partitions that cover ``wanted`` (:func:`runs_over`)."""
    return runs_over(instance, wanted, per_run)


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    monitored_jobs=[activation_job],
    request_job=annotation_job,
    description="With annotation.enabled: annotates newly active parses (and, when annotation is required "
    "for activation, parsed ones waiting for it) that have no annotation verdict yet.",
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def annotate_after_activation(context: dg.RunStatusSensorContext, fabric: FabricHomeResource):
    home = fabric.open()
    if not home.config.sources.unattended:
        return dg.SkipReason(OFF)
    wanted = parses_needing_annotation(home)
    if not wanted:
        return dg.SkipReason("annotation disabled" if not home.config.annotation.enabled else "nothing to annotate")
    # The run key names the parse set: a set whose run failed is not re-requested on every activation
    # (`fabric ingest` retries failed annotations).
    return [
        dg.RunRequest(run_key="annotate:" + hashlib.sha256(",".join(keys).encode()).hexdigest()[:24],
                      tags=range_tags(keys), run_config=steps_config(home))
        for keys in plan_annotation_runs(context.instance, wanted, home.config.sources.partitions_per_run)
    ]


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    monitored_jobs=[annotation_job],
    request_job=activation_job,
    description="Publishes the new annotation and graph table versions once an annotation run finishes.",
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def activate_after_annotation_run(context: dg.RunStatusSensorContext, fabric: FabricHomeResource):
    home = fabric.open()
    if not home.config.sources.unattended:
        return dg.SkipReason(OFF)
    return dg.RunRequest(run_key=f"activate-after:{context.dagster_run.run_id}", run_config=steps_config(home))


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    monitored_jobs=[repair_job],
    request_jobs=[rechunk_job, activation_job],
    description="Re-derives what a repair_job marked: rechunk_job runs over the parses it set to re-chunk "
    "(the source sensor re-parses those it set pending), else an activation, which the annotation sensor "
    "follows for parses whose annotations it marked.",
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def rederive_after_repair(context: dg.RunStatusSensorContext, fabric: FabricHomeResource):
    from fabric_assets.lifecycle.repair import rechunk_marked

    home = fabric.open()
    if not home.config.sources.unattended:
        return dg.SkipReason(OFF)
    run_id = context.dagster_run.run_id
    marked = rechunk_marked(home)
    runs = runs_over(context.instance, marked, home.config.sources.partitions_per_run, **run_budget(home, marked))
    if runs:
        return [dg.RunRequest(job_name=rechunk_job.name, run_key=f"rechunk-after:{run_id}:{i}", tags=range_tags(keys),
                              run_config=steps_config(home)) for i, keys in enumerate(runs)]
    if awaited_parse_ids(home.catalog, among=[r.parse_id for r in home.catalog.parse_runs(status="pending")]):
        # An activation now would leave the marked sources out until they are parsed again.
        return dg.SkipReason("the source sensor re-parses what the repair set pending; its run activates")
    return dg.RunRequest(job_name=activation_job.name, run_key=f"activate-after:{run_id}", run_config=steps_config(home))

