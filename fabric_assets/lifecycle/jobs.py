"""Dagster jobs of the lifecycle actions, with typed config (the UI's Launchpad shows its fields).

Each op calls the same plain function as the CLI command; a refusal fails the run with the
refusal's message and removes nothing.
"""


# No `from __future__ import annotations`: Dagster reads the op's config annotation at decoration time.
import json
from pathlib import Path

import dagster as dg
from dagster_duckdb import DuckDBResource

from fabric_assets.lifecycle.audit import AuditError, audit_passages, passages_in_release, passages_of
from fabric_assets.lifecycle.operator import (ActionResult, OperatorError, accept_held, discard_held,
                                              force_reparse, retry_failed)
from fabric_assets.lifecycle.purge import PurgeRefused, PurgeSelector, parse_before, purge
from fabric_assets.lifecycle.repair import RepairRefused, repair
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
        "tombstone_id": report.tombstone_id or 0, "sources": len(report.plan.source_keys),
        "parse_ids": len(report.plan.parse_ids), "artifacts_removed": report.artifacts_removed,
        "rows_removed": sum(report.rows_removed.values()), "bytes_removed": report.bytes_removed,
        "release_id": report.release_id or 0, "releases_retired": len(report.releases_retired)})


@dg.job(description="Purge sources for good (typed config: source_keys | root | before).")
def purge_job() -> None:
    purge_op()


@dg.op(description="Apply the retention policy now (config section `retention`). See `fabric cleanup`.")
def cleanup_op(context: dg.OpExecutionContext, fabric: FabricHomeResource) -> dg.Output:
    report = cleanup(fabric.open(), instance=context.instance)
    return dg.Output(None, metadata={
        "parses_removed": report.parses_removed, "waiting": report.waiting,
        "releases_removed": len(report.releases_removed), "generations_removed": len(report.generations_removed),
        "artifacts_removed": report.artifacts_removed, "bytes_removed": report.bytes_removed,
        "republished_release": report.republished or 0, "runs_removed": len(report.runs_removed)})


@dg.job(description="Remove what no retained release, snapshot or source needs (the retention policy).")
def cleanup_job() -> None:
    cleanup_op()


class ParseConfig(dg.Config):
    """One parse, by its ID (a ``parses`` partition key; `fabric status` lists held and failed ones)."""

    parse_id: str


class RetryConfig(dg.Config):
    """Failed parses to retry; empty: every failed parse a present source waits for."""

    parse_ids: list[str] = []


class SourceConfig(dg.Config):
    """One source, by its key, e.g. ``fs:notes/incident.md``."""

    source_key: str


def _result(result: ActionResult) -> dg.Output:
    return dg.Output(None, metadata={"parses": len(result.parse_ids), "status": result.status,
                                     "release_id": result.release_id or 0, "published": result.published})


def _operator(action, *args) -> dg.Output:
    try:
        return _result(action(*args))
    except OperatorError as exc:
        raise dg.Failure(description=str(exc)) from None


@dg.op(description="Accept a held parse as it is; it becomes its sources' active parse.")
def accept_op(config: ParseConfig, fabric: FabricHomeResource) -> dg.Output:
    return _operator(accept_held, fabric.open(), config.parse_id)


@dg.op(description="Discard a held parse; its sources keep their previous active parse.")
def discard_op(config: ParseConfig, fabric: FabricHomeResource) -> dg.Output:
    return _operator(discard_held, fabric.open(), config.parse_id)


@dg.op(description="Set failed parses back to pending; the source sensor or the next ingest runs them.")
def retry_op(config: RetryConfig, fabric: FabricHomeResource) -> dg.Output:
    return _operator(retry_failed, fabric.open(), config.parse_ids or None)


@dg.op(description="Mark a source's parse to be parsed again (forced); the source sensor or the next ingest runs it.")
def reparse_op(config: SourceConfig, fabric: FabricHomeResource) -> dg.Output:
    return _operator(force_reparse, fabric.open(), config.source_key)


@dg.job(description="Accept a held parse (typed config: parse_id).")
def accept_held_job() -> None:
    accept_op()


@dg.job(description="Discard a held parse (typed config: parse_id).")
def discard_held_job() -> None:
    discard_op()


@dg.job(description="Clear failures: failed parses back to pending (typed config: parse_ids, empty = all).")
def retry_failed_job() -> None:
    retry_op()


@dg.job(description="Force a re-parse of a source (typed config: source_key).")
def reparse_job() -> None:
    reparse_op()


@dg.op(description="Drop the table fragments whose data file is lost, emptied or cut short and mark the "
                   "parses whose rows they held for re-derivation. See `fabric repair`, which also runs "
                   "the re-derivation; here the next `fabric ingest` does (or backfills over the partitions "
                   "listed: parse_job for reparse, rechunk_job for rechunk, annotation_job for annotate).")
def repair_op(fabric: FabricHomeResource) -> dg.Output:
    from fabric_resources.object_store import TableStoreUnavailableError

    try:
        report = repair(fabric.open())
    except (RepairRefused, TableStoreUnavailableError) as exc:
        raise dg.Failure(description=f"repair refused: {exc}; nothing was changed") from None
    marks = report.plan.marks(unserved=False)  # an unserved parse is re-derived once a source takes it back
    # Table names, fragment IDs and parse IDs only (partition keys): no source name nor text.
    return dg.Output(None, metadata={
        "tables": dg.MetadataValue.json({d.table: sorted(d.fragments) for d in report.plan.tables}),
        "restored_files": dg.MetadataValue.int(len(report.plan.restore)),  # a count: source names stay out
        **{f"{how}_partitions": dg.MetadataValue.json(sorted(p for p, h in marks.items() if h == how))
           for how in ("reparse", "rechunk", "annotate")}})


@dg.job(description="Repair damaged table data files without a snapshot: drop them, mark what they held "
                    "for re-derivation (see `fabric repair`).")
def repair_job() -> None:
    repair_op()


class AuditConfig(dg.Config):
    """Exactly one of: ``pack_path`` (an EvidencePack, hit or citation JSON file on the machine the
    run executes on: every hit), ``chunk_ids`` (chunk IDs of release ``release_id``, 0 = the
    current one). Identifiers only, so that the run's config holds no document text."""

    pack_path: str = ""
    release_id: int = 0
    chunk_ids: list[str] = []


@dg.op(description="Lineage of cited passages: source bytes, parser, chunker, models, annotation producers "
                   "and the run that wrote each pinned table's rows. See `fabric audit`.")
def audit_op(context: dg.OpExecutionContext, config: AuditConfig, fabric: FabricHomeResource,
             duckdb: DuckDBResource) -> dg.Output:
    home = fabric.open()
    try:
        if bool(config.pack_path) == bool(config.chunk_ids):
            raise AuditError("give exactly one of pack_path and chunk_ids")
        if config.pack_path:
            path = Path(config.pack_path)
            try:
                # A device or FIFO is never read, as by `fabric audit` (/dev/zero has no end and
                # filled the run's memory; a FIFO nobody writes held the run for good).
                if not path.is_file():
                    raise AuditError("pack_path is not a regular file: give an EvidencePack, hit or citation "
                                     "JSON file")
                data = json.loads(path.read_text())
            except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nesting too deep to decode
                raise AuditError(f"cannot read pack_path: {type(exc).__name__}") from None
            passages = passages_of(data)
        else:
            passages = passages_in_release(home, config.release_id, config.chunk_ids)
        reports = audit_passages(home, passages, context.instance, duckdb)
    except AuditError as exc:
        raise dg.Failure(description=f"audit: {exc.redacted}") from None
    # Hashes and identifiers only (no source key, path nor text): the event log is never purged.
    runs = sorted({w.run_id for r in reports for w in r.writers if w.run_id})
    return dg.Output(None, metadata={
        "passages": len(reports), "parses": len({r.parse_id for r in reports}), "writer_runs": len(runs),
        "unwritten_tables": sum(w.run_id is None for r in reports for w in r.writers),
        "lineage": dg.MetadataValue.json([r.identifiers() for r in reports])})


@dg.job(description="Lineage audit of a pack or of chunks of a release (typed config: pack_path | "
                    "release_id + chunk_ids).")
def audit_job() -> None:
    audit_op()


JOBS = [purge_job, cleanup_job, accept_held_job, discard_held_job, retry_failed_job, reparse_job, repair_job,
        audit_job]
