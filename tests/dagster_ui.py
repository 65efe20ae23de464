"""What Dagster's UI shows, asked the way the UI asks: GraphQL over the code location that
``workspace.yaml`` names (``fabric_assets.definitions:defs``), loaded in-process for the home in
``$FABRIC_HOME`` against its instance. No webserver; the same resolvers the webserver runs."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

#: The events of one partition of an asset, as the asset's partition detail lists them.
PARTITION_EVENTS = """query($key: [String!]!, $pk: String!) { assetOrError(assetKey: {path: $key}) { ... on Asset {
  assetEventHistory(partitions: [$pk], limit: 100, eventTypeSelectors: [MATERIALIZATION, OBSERVATION,
                                                                         FAILED_TO_MATERIALIZE]) {
    results { __typename
      ... on MaterializationEvent { runId timestamp }
      ... on FailedToMaterializeEvent { runId timestamp materializationFailureType description } } }
  definition { assetPartitionStatuses { ... on DefaultPartitionStatuses {
      materializedPartitions failedPartitions materializingPartitions unmaterializedPartitions } }
    assetChecksOrError { ... on AssetChecks { checks { name executionForLatestMaterialization { status runId } } } }
  } } } }"""

#: The steps of a run, as the run page's Gantt chart colours them.
RUN_STEPS = """query($id: ID!) { runOrError(runId: $id) { ... on Run { stepStats { stepKey status } } } }"""


@contextmanager
def ui(instance):
    """A request context of the home's code location (``$FABRIC_HOME``) on ``instance``."""
    from dagster._core.test_utils import in_process_test_workspace
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

    origin = LoadableTargetOrigin(module_name="fabric_assets.definitions", attribute="defs")
    with in_process_test_workspace(instance, origin) as context:
        yield context


def query(context, text: str, **variables: Any) -> dict:
    """The ``data`` of one GraphQL query (raises on GraphQL errors)."""
    from dagster_graphql.test.utils import execute_dagster_graphql

    return execute_dagster_graphql(context, text, variables).data


def partition_view(context, asset: str, partition: str) -> dict:
    """What the asset's partition detail shows: ``events`` (newest first: ``(kind, run ID)`` with kind
    ``materialized`` or ``skipped``/``failed``), ``status`` (materialized, failed, materializing or
    missing) and ``checks`` (check name → status of its latest execution)."""
    data = query(context, PARTITION_EVENTS, key=[asset], pk=partition)["assetOrError"]
    events = sorted(data["assetEventHistory"]["results"], key=lambda e: -float(e["timestamp"]))
    statuses = data["definition"]["assetPartitionStatuses"]
    status = next((name for name, field in (("materialized", "materializedPartitions"),
                                            ("failed", "failedPartitions"),
                                            ("materializing", "materializingPartitions"))
                   if partition in statuses[field]), "missing")
    checks = {c["name"]: (c["executionForLatestMaterialization"] or {}).get("status")
              for c in data["definition"]["assetChecksOrError"]["checks"]}
    return {
        "events": [("materialized" if e["__typename"] == "MaterializationEvent"
                    else e["materializationFailureType"].lower(), e["runId"]) for e in events],
        "descriptions": [e.get("description") for e in events],
        "status": status,
        "checks": checks,
    }


def run_steps(context, run_id: str) -> dict[str, str]:
    """Step key → status (SUCCESS, FAILURE, SKIPPED, IN_PROGRESS) on the run page."""
    data = query(context, RUN_STEPS, id=run_id)["runOrError"]
    return {s["stepKey"]: s["status"] for s in data["stepStats"]}
