"""Dagster jobs of the lifecycle actions, with typed config (the UI's Launchpad shows its fields).

Each op calls the same plain function as the CLI command; a refusal fails the run with the
refusal's message and removes nothing.
"""


# No `from __future__ import annotations`: Dagster reads the op's config annotation at decoration time.
import dagster as dg

from fabric_assets.lifecycle.purge import PurgeRefused, PurgeSelector, parse_before, purge
from fabric_assets.lifecycle.retention import cleanup
from fabric_resources.dagster_resources import FabricHomeResource


class PurgeConfig(dg.Config):
    """Exactly one of: ``source_keys`` (deleted sources, e.g. ``fs:notes/old.txt``), ``root`` (a
    root's label: every source under it, and the root is unregistered), ``before`` (``YYYY-MM-DD``:
    every deleted source last seen before it)."""

    source_keys: list[str] = []
    root: str = ""
    before: str = ""


@dg.op(description="Purge sources for good: bytes, rows and old table versions, index text, memo "
                   "entries, catalog rows (a tombstone with hashes only remains). See `fabric purge`.")
def purge_op(context: dg.OpExecutionContext, config: PurgeConfig, fabric: FabricHomeResource) -> dg.Output:
    try:
        selector = PurgeSelector(tuple(config.source_keys), config.root or None,
                                 parse_before(config.before) if config.before else None)
        report = purge(fabric.open(), selector, own_run_id=context.run_id)
    except (PurgeRefused, ValueError) as exc:
        raise dg.Failure(description=f"purge refused: {exc}") from None
    # Counts and hashes only: the event log is never purged, so it must hold no name nor text.
    return dg.Output(None, metadata={
        "tombstone_id": report.tombstone_id, "sources": len(report.plan.source_keys),
        "parse_ids": len(report.plan.parse_ids), "artifacts_removed": report.artifacts_removed,
        "rows_removed": sum(report.rows_removed.values()), "bytes_removed": report.bytes_removed,
        "release_id": report.release_id or 0, "releases_retired": len(report.releases_retired)})


@dg.job(description="Purge sources for good (typed config: source_keys | root | before).")
def purge_job() -> None:
    purge_op()


@dg.op(description="Apply the retention policy now (config section `retention`). See `fabric cleanup`.")
def cleanup_op(fabric: FabricHomeResource) -> dg.Output:
    report = cleanup(fabric.open())
    return dg.Output(None, metadata={
        "parses_removed": report.parses_removed, "waiting": report.waiting,
        "releases_removed": len(report.releases_removed), "generations_removed": len(report.generations_removed),
        "artifacts_removed": report.artifacts_removed, "bytes_removed": report.bytes_removed,
        "republished_release": report.republished or 0})


@dg.job(description="Remove what no retained release, snapshot or source needs (the retention policy).")
def cleanup_job() -> None:
    cleanup_op()


JOBS = [purge_job, cleanup_job]
