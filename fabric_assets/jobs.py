"""Jobs: parse projections for a range of parse partitions; activation; re-derivation after a
chunker or model change."""

import dagster as dg

from fabric_assets.partitions import PARSES

RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"

parse_job = dg.define_asset_job(
    "parse_job",
    selection=dg.AssetSelection.groups("canonical", "projections"),
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
    selection=dg.AssetSelection.groups("annotations"),
    partitions_def=PARSES,
    description="Annotate a range of parse partitions, then build their entity graph rows and annotation vectors.",
)

#: Projections computed by a model from stored chunks/windows: a model change recomputes exactly these.
MODEL_PROJECTIONS = ("chunk_vectors", "chunk_vectors_multilingual", "colbert_matrices", "annotation_vectors")

reproject_job = dg.define_asset_job(
    "reproject_job",
    selection=dg.AssetSelection.assets(*MODEL_PROJECTIONS),
    partitions_def=PARSES,
    description="Recompute model projections of a range of parse partitions from stored chunks and windows "
                "(after a model change; no re-parse). Backfill it over all partitions from the UI, or let "
                "`fabric ingest` run it for the stale ones.",
)

rechunk_job = dg.define_asset_job(
    "rechunk_job",
    # Every projection made from chunks, found from the graph so that a new one is never left out.
    selection=dg.AssetSelection.assets("chunks").downstream() & dg.AssetSelection.groups("projections"),
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

lexical_health_schedule = dg.ScheduleDefinition(job=lexical_health_job, cron_schedule="0 3 * * *")
