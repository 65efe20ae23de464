"""The one partitioning of Fabric's canonical and projection assets: by parse ID."""

import dagster as dg

PARSES = dg.DynamicPartitionsDefinition(name="parses")

#: Keyword arguments shared by every parse-partitioned asset: many partitions per run.
PARTITIONED = dict(partitions_def=PARSES, backfill_policy=dg.BackfillPolicy.single_run())
