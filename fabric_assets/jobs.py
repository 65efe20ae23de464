"""Jobs: parse projections for a range of parse partitions; activation; re-derivation after a
chunker or model change. Their selections come from the projection registry.

A stage the home's configuration switches off is not in ``parse_job``, ``reproject_job`` or
``rechunk_job``: the definitions put its assets in ``projections.SWITCHED_OFF_GROUP``, which these
selections leave out, so the same job objects (the sensors name them) resolve to the assets of the
configuration the code location loaded. A run then does not plan what it would not materialize
(Dagster's backfill daemon counts such a planned partition as failed); the step the stage is made
from records it as skipped instead (``PartitionStep.finish``). ``annotation_job`` is the annotation
stage itself and keeps its assets: run by hand while annotation is off, its steps skip and say so.
"""

import dagster as dg

from fabric_assets.partitions import PARSES
from fabric_assets.projections import ANNOTATION_PROJECTIONS, MODEL_PROJECTIONS, RECHUNKED, SWITCHED_OFF_GROUP, Stage

RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"

#: The assets of the stages the loaded configuration switches off.
_SWITCHED_OFF = dg.AssetSelection.groups(SWITCHED_OFF_GROUP)

parse_job = dg.define_asset_job(
    "parse_job",
    # A switched-off projection is in SWITCHED_OFF_GROUP, not in its stage's group.
    selection=dg.AssetSelection.groups(Stage.CANONICAL.value, Stage.PROJECTIONS.value),
    partitions_def=PARSES,
    description="Parse, chunk, index-prepare and embed a range of parse partitions in one run.",
)

activation_job = dg.define_asset_job(
    "activation_job",
    # Health rebuilds a whole index: it runs on its own schedule, never inside an activation.
    selection=dg.AssetSelection.assets("release").without_checks(),
    description="Publish a release from the parses that passed their gate.",
)

annotation_job = dg.define_asset_job(
    "annotation_job",
    # By key, not by group: switched off, the assets leave their group but stay in this job.
    selection=dg.AssetSelection.assets(*ANNOTATION_PROJECTIONS),
    partitions_def=PARSES,
    description="Annotate a range of parse partitions, then build their entity graph rows and annotation vectors.",
)

#: Model projections only: a model change recomputes exactly these (``projections.MODEL_PROJECTIONS``).
reproject_job = dg.define_asset_job(
    "reproject_job",
    selection=dg.AssetSelection.assets(*MODEL_PROJECTIONS) - _SWITCHED_OFF,
    partitions_def=PARSES,
    description="Recompute model projections of a range of parse partitions from stored chunks and windows "
                "(after a model change; no re-parse). Backfill it over all partitions from the UI, or let "
                "`fabric ingest` run it for the stale ones.",
)

rechunk_job = dg.define_asset_job(
    "rechunk_job",
    # Every parse-job projection made from chunks (the registry's graph), so a new one is never left out.
    selection=dg.AssetSelection.assets(*RECHUNKED) - _SWITCHED_OFF,
    partitions_def=PARSES,
    description="Re-chunk a range of parse partitions from their stored units and recompute every projection "
                "made from chunks (after a chunking change; no re-parse). `fabric ingest` runs it for the parses "
                "whose chunks were cut under another chunker; a backfill from the UI works too.",
)

lexical_health_job = dg.define_asset_job(
    "lexical_health_job",
    selection=dg.AssetSelection.checks_for_assets("release"),
    description="Compare the serving index with an independent reconstruction (fabric lexical-health).",
)

def _unattended(context: dg.ScheduleEvaluationContext) -> bool:
    # The home the code location serves (definitions.defs reads the same path).
    from fabric_resources.config import FabricConfig
    from fabric_resources.home import home_path

    return FabricConfig.load(home_path() / "config.json").sources.unattended


lexical_health_schedule = dg.ScheduleDefinition(job=lexical_health_job, cron_schedule="0 3 * * *",
                                                default_status=dg.DefaultScheduleStatus.RUNNING,
                                                should_execute=_unattended)
