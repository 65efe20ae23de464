"""Rebuild every projection from canonical records, and run what the operator actions marked.

Unlike the rest of :mod:`fabric_assets.lifecycle` these run Dagster jobs in-process (through
:mod:`fabric_assets.ingest`), so no Dagster job imports this module (that would be an import
circle: the definitions import the lifecycle jobs). From the UI, the same rebuild is a backfill of
``rechunk_job`` over the ``parses`` partitions.
"""

from __future__ import annotations

from fabric_assets.ingest import IngestSummary, dagster_instance, ingest, ingest_lock, run_activation, run_rechunk
from fabric_resources.dagster_resources import CONFIGURED_MODELS, ModelResources
from fabric_resources.home import FabricHome


def run_marked(home: FabricHome, models: ModelResources = CONFIGURED_MODELS) -> IngestSummary | None:
    """Scan every registered root and run what is pending (parses an operator action marked among
    them), then activate: what ``fabric ingest`` does, without registering a new root. None when
    the home has no root."""
    roots = home.catalog.roots()
    return ingest(roots[0].path, home, models=models) if roots else None


def rebuild_projections(home: FabricHome, models: ModelResources = CONFIGURED_MODELS) -> tuple[list[str], list[str]]:
    """Recompute chunks and every projection made from them, for every active parse, from the stored
    units (``rechunk_job``: no re-parse), then activate. Returns (parse IDs rebuilt, failed run IDs).
    """
    with ingest_lock(home):
        current = home.catalog.current_release()
        active = sorted({m["parse_id"] for m in current.manifest["sources"].values()}) if current else []
        instance = dagster_instance(home)
        _, failed, rebuilt = run_rechunk(home, instance, resume=active, models=models)
        if not failed:
            # A failed run left its parses `parsed`, their rows half rewritten in place: activating
            # now published a release without them (every source, for a whole rebuild). The
            # current release keeps serving; the next rebuild or ingest resumes them.
            run_activation(home, instance, models)
        return rebuilt, failed
