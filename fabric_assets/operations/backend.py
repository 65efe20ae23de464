"""The admin backend: Operation rows in the catalog, work in a small pool of its own.

Each operation is recorded ``pending`` before :meth:`PipelineAdmin.submit` returns, moves to
``running`` when a worker takes it, and ends ``succeeded`` with its result (Dagster run IDs,
counts) or ``failed`` with a reason: an exception is the reason, never a dead server. Pipeline
work is the same code the CLI runs: ``ingest`` executes the real Dagster jobs in-process against
``<home>/dagster`` (one ingest per home at a time: a second waits on the home's ingest lock), so
the Dagster UI shows the runs. ``lexical-repair`` rebuilds the serving index from canonical
tables (:mod:`fabric_assets.activation.repair`; not a Dagster job).

Operations left ``pending`` or ``running`` by a server that stopped are marked ``failed``
(``server-stopped``) when the next backend opens the home: nothing is running them any more.
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from fabric_resources.catalog import Operation
from fabric_resources.home import FabricHome

log = logging.getLogger(__name__)
#: Reason given to operations a stopped server left unfinished.
SERVER_STOPPED = "server-stopped"


def _ingest(home: FabricHome, params: dict[str, Any]) -> dict[str, Any]:
    from fabric_assets.ingest import NotADirectoryRoot, ingest

    try:
        summary = ingest(Path(params["path"]), home)
    except NotADirectoryRoot as exc:
        raise ValueError(str(exc)) from None
    result = {
        "run_ids": summary.run_ids, "failed_runs": summary.failed_runs,
        "activation_run_id": summary.activation_run_id, "release_id": summary.activation.get("release_id"),
        "complete": summary.complete, "failed_sources": [f.source_key for f in summary.failed],
        # What else makes it incomplete: paths the scan found but could not take in, with why.
        "skipped": [{"path": key, "reason": reason} for key, reason in summary.scan.skipped[:1000]],
        "seconds": round(summary.seconds, 3),
    }
    if summary.failed_runs:
        raise _Failed(f"dagster-run-failed: {', '.join(summary.failed_runs)}", result)
    return result


def _lexical_repair(home: FabricHome, _params: dict[str, Any]) -> dict[str, Any]:
    from fabric_assets.activation.repair import lexical_repair

    report = lexical_repair(home)
    result = {"release_id": report.release_id, "published": report.published, "healthy": report.after.healthy,
              "canonical_unchanged": report.canonical_unchanged}
    if not (report.after.healthy and report.canonical_unchanged):
        raise _Failed("repair-unhealthy: the rebuilt index does not match the canonical tables", result)
    return result


class _Failed(Exception):
    """An operation that ran to the end but did not succeed; ``result`` is still recorded."""

    def __init__(self, reason: str, result: dict[str, Any]) -> None:
        super().__init__(reason)
        self.result = result


def _lifecycle_job(home: FabricHome, name: str, op: str, config: dict[str, Any] | None) -> dict[str, Any]:
    """Run the lifecycle job ``name`` (typed config ``config`` for ``op``; None: an op without) on the home's instance,
    as the UI's Launchpad would; a failed run (a refusal: the job's ``dg.Failure``) is a failed
    operation with the refusal's message."""
    from fabric_assets.ingest import _run_config, dagster_instance, job
    from fabric_assets.run_owner import owner_tags

    definition = job(home, name)
    run_config = {**_run_config(home, failures_raised=True),
                  **({"ops": {op: {"config": config}}} if config is not None else {})}
    result = definition.execute_in_process(instance=dagster_instance(home), run_config=run_config,
                                           raise_on_error=False, tags=owner_tags())
    out = {"run_id": result.run_id}
    if not result.success:
        failures = [e.step_failure_data for e in result.all_events if e.is_step_failure]
        refusal = failures[0].user_failure_data if failures else None
        if refusal is not None and refusal.description:
            # The job's dg.Failure: a refusal, in its own words ("purge refused: ...", "no parse X").
            raise _Failed(refusal.description, out)
        error = failures[0].error if failures else None
        raise _Failed(f"dagster-run-failed: {error.message.strip() if error else 'the run failed'}", out)
    return out


def _parse_state(home: FabricHome, parse_id: str) -> dict[str, Any]:
    run = home.catalog.parse_run(parse_id)
    return {"parse_id": parse_id, "parse_status": run.status if run else None,
            "release_id": home.catalog.current_release_id()}


def _accept(home: FabricHome, params: dict[str, Any]) -> dict[str, Any]:
    out = _lifecycle_job(home, "accept_held_job", "accept_op", {"parse_id": params["parse_id"]})
    return {**out, **_parse_state(home, params["parse_id"])}


def _discard(home: FabricHome, params: dict[str, Any]) -> dict[str, Any]:
    out = _lifecycle_job(home, "discard_held_job", "discard_op", {"parse_id": params["parse_id"]})
    return {**out, **_parse_state(home, params["parse_id"])}


def _then_run_marked(home: FabricHome, out: dict[str, Any]) -> dict[str, Any]:
    # The action only marks parses pending; the scan that runs them is what `fabric parse` runs next.
    from fabric_assets.lifecycle.rebuild import run_marked

    summary = run_marked(home)
    if summary is None:
        return out
    result = {**out, "run_ids": summary.run_ids, "activation_run_id": summary.activation_run_id,
              "release_id": summary.activation.get("release_id"), "failed_runs": summary.failed_runs}
    if summary.failed_runs:
        raise _Failed(f"dagster-run-failed: {', '.join(summary.failed_runs)}", result)
    return result


def _reparse(home: FabricHome, params: dict[str, Any]) -> dict[str, Any]:
    out = _lifecycle_job(home, "reparse_job", "reparse_op", {"source_key": params["source_key"]})
    return _then_run_marked(home, out)


def _retry(home: FabricHome, params: dict[str, Any]) -> dict[str, Any]:
    out = _lifecycle_job(home, "retry_failed_job", "retry_op", {"parse_ids": list(params["parse_ids"])})
    return _then_run_marked(home, out)


def _repair(home: FabricHome, _params: dict[str, Any]) -> dict[str, Any]:
    # The job drops and marks (the UI's form); the re-derivation and the release follow, as `fabric repair`.
    from fabric_assets.lifecycle.repair import republish_damaged_pins

    out = _then_run_marked(home, _lifecycle_job(home, "repair_job", "repair_op", None))
    republished = republish_damaged_pins(home)
    return {**out, "release_id": republished or home.catalog.current_release_id()}


def _purge(home: FabricHome, params: dict[str, Any]) -> dict[str, Any]:
    config = {"source_keys": list(params["source_keys"]), "root": params["root"] or "",
              "before": params["before"] or ""}
    out = _lifecycle_job(home, "purge_job", "purge_op", config)
    return {**out, "release_id": home.catalog.current_release_id()}


def _snapshot(home: FabricHome, params: dict[str, Any]) -> dict[str, Any]:
    # Not a Dagster job (as `fabric snapshot create`): hard links and Lance tags, no pipeline work.
    from fabric_assets.lifecycle.snapshots import create

    info = create(home, params["note"])
    return {"snapshot_id": info.snapshot_id, "release_id": info.release_id}


def _restore(home: FabricHome, params: dict[str, Any]) -> dict[str, Any]:
    from fabric_assets.lifecycle.snapshots import RESTORE_EVENT, SnapshotError, restore

    into = Path(params["into"]) if params["into"] else None
    try:
        target = restore(home, params["snapshot_id"], into)
    except SnapshotError as exc:
        raise _Failed(f"restore-refused: {exc}", {}) from None
    result = {"home": str(target.root), "release_id": target.catalog.current_release_id()}
    if into is None:  # in place: what it forgot of what came after the snapshot (counts)
        result["forgotten"] = json.loads(target.catalog.events(RESTORE_EVENT)[-1]["detail"])
    return result


#: Kind → work (each kind's body is ``fabric_query.server.admin.BODIES[kind]``).
WORK: dict[str, Callable[[FabricHome, dict[str, Any]], dict[str, Any]]] = {
    "ingest": _ingest,
    "lexical-repair": _lexical_repair,
    "accept": _accept,
    "discard": _discard,
    "re-parse": _reparse,
    "retry": _retry,
    "purge": _purge,
    "snapshot": _snapshot,
    "restore": _restore,
    "repair": _repair,
}


class PipelineAdmin:
    """Runs admin operations for one home (see the module docstring).

    Parameters
    ----------
    home
        The Fabric home (its catalog holds the Operation rows).
    workers
        Operations run at once (``server.admin_workers``).
    """

    def __init__(self, home: FabricHome, workers: int = 1) -> None:
        self.home = home
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fabric-admin")
        for stale in (*home.catalog.operations("pending"), *home.catalog.operations("running")):
            home.catalog.set_operation_status(stale.operation_id, "failed", reason=SERVER_STOPPED)

    def kinds(self) -> tuple[str, ...]:
        return tuple(WORK)

    def submit(self, kind: str, params: dict[str, Any]) -> str:
        """Record a ``pending`` Operation and queue it; its ID.

        Raises
        ------
        ValueError
            ``kind`` is not one this backend runs, or an ingest ``path`` is not a directory, is
            ``/`` or a system folder, or is the home or inside it.
        """
        if kind not in WORK:
            raise ValueError(f"unknown operation {kind!r}")
        if kind == "ingest":
            from fabric_assets.ingest import NotADirectoryRoot, admissible_root

            try:  # RootOverlapError (the home or inside it) is a ValueError too: answered 400
                admissible_root(params.get("path", ""), self.home)
            except NotADirectoryRoot as exc:  # not a directory, or the file system's root or a system folder
                raise ValueError(f"ingest: {exc} (on the server's machine)") from None
        op = self.home.catalog.create_operation(kind, params)
        self._pool.submit(self._run, op)
        return op.operation_id

    def _run(self, op: Operation) -> None:
        catalog = self.home.catalog
        catalog.set_operation_status(op.operation_id, "running")
        try:
            # A fresh home object per operation: its config is re-read, as a new `fabric ingest` would.
            result = WORK[op.kind](FabricHome(self.home.root), op.params)
        except _Failed as exc:
            catalog.set_operation_status(op.operation_id, "failed", reason=str(exc), result=exc.result)
        except BaseException as exc:  # noqa: BLE001 - any fault fails this operation, not the server
            log.exception("operation %s (%s) failed", op.operation_id, op.kind)
            catalog.set_operation_status(op.operation_id, "failed", reason=f"{type(exc).__name__}: {exc}")
        else:
            catalog.set_operation_status(op.operation_id, "succeeded", result=result)

    def operation(self, operation_id: str) -> dict[str, Any] | None:
        op = self.home.catalog.operation(operation_id)
        return None if op is None else asdict(op)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
