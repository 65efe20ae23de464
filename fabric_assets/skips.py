"""A stage the configuration switches off is *skipped* in Dagster, not materialized empty.

Dagster's own way to say "this asset was planned in the run and deliberately not materialized" is
an optional output that is not yielded (``output_required=False`` on ``@asset``, ``skippable=True``
on an ``AssetSpec``): the step succeeds, no materialization is recorded, the asset's checks end
*skipped* (the run finished without evaluating them) and every downstream step that needs the
asset is itself skipped (``STEP_SKIPPED``), so its body never runs. Fabric's stages that are off by
default (``projections.Projection.enabled_by``: late interaction, annotation) are declared so.

What the UI then shows for the asset's partitions is "missing" — and, per partition, the event
Dagster defines for exactly this case: :class:`~dagster._core.definitions.events.AssetMaterializationFailure`
with ``failure_type=SKIPPED`` ("not materialized, but this is an acceptable outcome, like an
optional asset"), which the asset's event list and partition detail show as **Skipped**, grey, with
its description (why). Open-source Dagster never emits that event and its SQL storages refuse it
(``can_store_asset_failure_events`` is false); :func:`report_skipped` emits it and Fabric's SQLite
event log (:mod:`fabric_assets.event_log`) stores and serves it. On a PostgreSQL instance the
instance drops it, and the partitions show as missing only.

Dagster imports beyond its public API are kept to this module and :mod:`fabric_assets.event_log`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import dagster as dg
from dagster._core.definitions.events import (AssetMaterializationFailure, AssetMaterializationFailureReason,
                                              AssetMaterializationFailureType)
from dagster._core.events import (AssetFailedToMaterializeData, DagsterEvent, DagsterEventBatchMetadata,
                                  DagsterEventType, generate_event_batch_id)

#: Metadata key of a skipped event: the configuration switch that is off.
SKIPPED_BECAUSE = "skipped_because"


def skipped_events(job_name: str, step_key: str, asset_keys: Iterable[str], partition_keys: Sequence[str],
                   reason: str) -> list[DagsterEvent]:
    """One ``ASSET_FAILED_TO_MATERIALIZE`` event of type ``SKIPPED`` per asset and partition (one
    per asset when ``partition_keys`` is empty), described by ``reason``. Built as Dagster's
    ``DagsterEvent.build_asset_failed_to_materialize_event`` builds it, but with a message that
    says skipped (the run log shows it; Dagster's says "failed to materialize")."""
    partitions: Sequence[str | None] = list(partition_keys) or [None]
    events = []
    for key in asset_keys:
        for pk in partitions:
            failure = AssetMaterializationFailure(
                asset_key=key, partition=pk, failure_type=AssetMaterializationFailureType.SKIPPED,
                # Dagster's reasons name failures; a stage switched off is none of them.
                reason=AssetMaterializationFailureReason.UNKNOWN,
                description=f"skipped: {reason}", metadata={SKIPPED_BECAUSE: reason})
            events.append(DagsterEvent(
                event_type_value=DagsterEventType.ASSET_FAILED_TO_MATERIALIZE.value, job_name=job_name,
                message=f"Asset {key} skipped (not materialized): {reason}",
                event_specific_data=AssetFailedToMaterializeData(failure), step_key=step_key))
    return events


def report_skipped(context: dg.AssetExecutionContext, asset_keys: Iterable[str], reason: str) -> int:
    """Record in the run's event log that ``asset_keys`` were skipped for every partition of the
    run (see the module docstring); return how many events were reported. The events go to the
    instance in one batch (one transaction with Fabric's SQLite event log); an instance whose
    storage cannot hold them drops them."""
    step_key = context.get_step_execution_context().step.key
    events = skipped_events(context.job_name, step_key, asset_keys, list(context.partition_keys), reason)
    batch = generate_event_batch_id()
    for i, event in enumerate(events):
        context.instance.report_dagster_event(event, run_id=context.run_id,
                                              batch_metadata=DagsterEventBatchMetadata(batch, i == len(events) - 1))
    context.log.info(f"{', '.join(asset_keys)} skipped (not materialized): {reason}")
    return len(events)
