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


#: What the UI's "Launch backfill" sends (``LaunchAssetChoosePartitionsDialog``).
LAUNCH_BACKFILL = """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message stack } } }"""

#: The assets of the code location, as the asset graph and a group's page list them.
ASSET_NODES = "{ assetNodes { assetKey { path } groupName jobNames } }"


@contextmanager
def daemon_workspace(instance, python_file: str):
    """The workspace the daemon evaluates backfills in: the code location ``defs`` of
    ``python_file``, loaded in-process. ``instance`` should launch runs synchronously
    (:func:`synchronous_instance`), so each backfill iteration runs what it submits."""
    from dagster._core.remote_origin import InProcessCodeLocationOrigin
    from dagster._core.test_utils import InProcessTestWorkspaceLoadTarget, create_test_daemon_workspace_context
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

    origin = InProcessCodeLocationOrigin(LoadableTargetOrigin(python_file=python_file, attribute="defs"))
    with create_test_daemon_workspace_context(InProcessTestWorkspaceLoadTarget(origin), instance) as workspace:
        yield workspace


def synchronous_instance(dagster_home):
    """The instance of ``dagster_home`` (its ``dagster.yaml``: Fabric's event log) with Dagster's
    test run launcher, which executes a launched run in the calling process before returning, and
    the default coordinator, which launches at once instead of queueing for the run-queue daemon."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(dagster_home), overrides={
        "run_launcher": {"module": "dagster._core.launcher.sync_in_memory_run_launcher",
                         "class": "SyncInMemoryRunLauncher"},
        "run_coordinator": {"module": "dagster._core.run_coordinator", "class": "DefaultRunCoordinator"}}))


def run_backfill(workspace, params: dict, iterations: int = 10):
    """Launch a backfill as the UI does (``params``: ``LaunchBackfillParams``), then run the backfill
    daemon's iteration in-process until the backfill leaves ``REQUESTED`` (at most ``iterations``
    times); return it (``PartitionBackfill``: ``status``, ``backfill_id``)."""
    import logging

    from dagster._daemon.backfill import execute_backfill_iteration

    data = query(workspace.create_request_context(), LAUNCH_BACKFILL, params=params)["launchPartitionBackfill"]
    assert data["__typename"] == "LaunchBackfillSuccess", data
    instance = workspace.instance
    for _ in range(iterations):
        list(execute_backfill_iteration(workspace, logging.getLogger("backfill-daemon")))
        backfill = instance.get_backfill(data["backfillId"])
        if backfill.status.value != "REQUESTED":
            return backfill
    return instance.get_backfill(data["backfillId"])
