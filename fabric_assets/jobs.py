"""Jobs: parse projections for a range of parse partitions; activation."""

import dagster as dg

from fabric_assets.partitions import PARSES

RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"

parse_job = dg.define_asset_job(
    "parse_job",
    selection=dg.AssetSelection.groups("canonical", "projections")
    | dg.AssetSelection.assets("parse_gate"),
    partitions_def=PARSES,
    description="Parse, chunk, index-prepare and embed a range of parse partitions in one run.",
)

activation_job = dg.define_asset_job(
    "activation_job",
    selection=dg.AssetSelection.assets("release"),
    description="Publish a release from the parses that passed their gate.",
)
