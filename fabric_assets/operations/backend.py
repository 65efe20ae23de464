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
        "seconds": round(summary.seconds, 3),
    }
    if summary.failed_runs:
        raise _Failed(f"dagster-run-failed: {', '.join(summary.failed_runs)}", result)
    return result


def _lexical_repair(home: FabricHome, _params: dict[str, Any]) -> dict[str, Any]:
    from fabric_assets.activation.repair import lexical_repair

    report = lexical_repair(home)
    result = {"release_id": report.release_id, "healthy": report.after.healthy,
              "canonical_unchanged": report.canonical_unchanged}
    if not (report.after.healthy and report.canonical_unchanged):
        raise _Failed("repair-unhealthy: the rebuilt index does not match the canonical tables", result)
    return result


class _Failed(Exception):
    """An operation that ran to the end but did not succeed; ``result`` is still recorded."""

    def __init__(self, reason: str, result: dict[str, Any]) -> None:
        super().__init__(reason)
        self.result = result


#: Kind → work. The lifecycle issue adds re-parse, accept, discard, purge, snapshot, restore here.
WORK: dict[str, Callable[[FabricHome, dict[str, Any]], dict[str, Any]]] = {
    "ingest": _ingest,
    "lexical-repair": _lexical_repair,
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
            ``kind`` is not one this backend runs, or an ingest ``path`` is not a directory.
        """
        if kind not in WORK:
            raise ValueError(f"unknown operation {kind!r}")
        if kind == "ingest" and not Path(params.get("path", "")).is_dir():
            raise ValueError(f"ingest: {params.get('path')!r} is not a directory on the server's machine")
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
