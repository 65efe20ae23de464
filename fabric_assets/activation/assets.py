"""The unpartitioned release asset (activation reads the per-parse gate verdicts) and its health check.

Its deps are the registry's ``RELEASE_INPUTS``: every projection whose verdicts the release gates
on or whose table version it pins, so the UI lineage shows all of them feeding the release.
"""

from typing import Any

import dagster as dg

from fabric_assets.activation.activate import ActivationReport, activate
from fabric_assets.projections import RELEASE_INPUTS
from fabric_assets.source_tags import tag_run
from fabric_resources.dagster_resources import FabricHomeResource
from fabric_resources.lexical_health import lexical_health


@dg.asset(
    deps=[dg.AssetDep(name, partition_mapping=dg.AllPartitionMapping()) for name in RELEASE_INPUTS],
    group_name="activation",
    description="The current release: one active parse per source, table versions, index generation.",
)
def release(context: dg.AssetExecutionContext, fabric: FabricHomeResource) -> dg.MaterializeResult:
    home = fabric.open()
    report = activate(home)
    # A moved or copied file is activated onto a partition no parse run tagged with its name.
    tag_run(context.instance, context.run_id, dict(report.activated), only_untagged=True)
    cleaned = {}
    if report.published and home.config.retention.after_activation:
        from fabric_assets.lifecycle.retention import cleanup

        # The release stands whatever the snapshots folder is: a broken link there keeps every
        # release and generation (what the snapshots pin is unknown) and is reported, not raised.
        done = cleanup(home, instance=context.instance, without_snapshots=True)
        cleaned = {"cleanup_parses_removed": done.parses_removed, "cleanup_releases_removed": len(done.releases_removed),
                   "cleanup_bytes_removed": done.bytes_removed, "cleanup_runs_removed": len(done.runs_removed)}
        if done.snapshots_problem is not None:
            context.log.warning(f"cleanup kept every release and index generation: {done.snapshots_problem}")
            cleaned["cleanup_snapshots_problem"] = done.snapshots_problem
        if done.republished:  # the release re-published over compacted table versions
            report.release_id = done.republished
    return dg.MaterializeResult(metadata={
        **release_changes(report),
        "lexical_generation": report.lexical_generation or "",
        # Generation (or why none), rows and build time per vector table: no document text.
        "dense_indexes": dg.MetadataValue.json({t: {k: r.get(k) for k in ("generation", "skipped", "rows", "build_seconds")
                                                    if r.get(k) is not None} for t, r in report.dense_indexes.items()}),
        "activation_seconds": round(report.seconds, 3),
        **cleaned,
    })


def release_changes(report: ActivationReport) -> dict[str, Any]:
    """What a release changed, for its materialization: sources added (a first active parse),
    replaced (a new parse over an older one) and removed, as counts, and the parse IDs each way.

    Source keys are left out on purpose: Dagster's event log is not rewritten by a purge, so it
    holds hashes and counts only (a purged file's name must not outlive it there). The names are
    in the run's tags (:mod:`fabric_assets.source_tags`), which a purge removes.
    """
    replaced = {k for k, _ in report.superseded}
    added = [pid for k, pid in report.activated if k not in replaced]
    new_over_old = [pid for k, pid in report.activated if k in replaced]
    return {
        "release_id": report.release_id or 0,
        "published": report.published,
        "activated": len(report.activated),
        "superseded": len(report.superseded),
        "deactivated": len(report.deactivated),
        "sources_added": len(added),
        "sources_replaced": len(new_over_old),
        "sources_removed": len(report.deactivated),
        "parses_added": dg.MetadataValue.json(sorted(added)),
        "parses_replacing": dg.MetadataValue.json(sorted(new_over_old)),
        "parses_superseded": dg.MetadataValue.json(sorted(pid for _, pid in report.superseded)),
    }


@dg.asset_check(
    asset=release,
    description="The serving index equals an independent reconstruction from canonical chunks "
    "(document set and per-field vocabulary); see `fabric lexical-health`.",
)
def lexical_index_matches_canonical(fabric: FabricHomeResource) -> dg.AssetCheckResult:
    report = lexical_health(fabric.open())
    return dg.AssetCheckResult(
        passed=report.healthy,
        metadata={
            "release_id": report.release_id,
            "generation": report.generation or "",
            "problem": report.problem or "",
            "expected_documents": report.expected_documents,
            "actual_documents": report.actual_documents,
            "canonical_digest": report.canonical_digest,
            "fields_differing": ", ".join(f.field for f in report.fields if not f.ok),
        },
    )
