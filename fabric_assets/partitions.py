"""The one partitioning of Fabric's canonical and projection assets: by parse ID."""

import warnings

import dagster as dg

# backfill_policy is marked beta in Dagster 1.13; it is what makes one run cover many partitions.
warnings.filterwarnings("ignore", category=dg.BetaWarning)

PARSES = dg.DynamicPartitionsDefinition(name="parses")

#: Keyword arguments shared by every parse-partitioned asset: many partitions per run.
PARTITIONED = dict(partitions_def=PARSES, backfill_policy=dg.BackfillPolicy.single_run())
