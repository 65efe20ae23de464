"""The one Dagster ``Definitions`` of Fabric.

``workspace.yaml`` points at :func:`defs`, a ``@dg.definitions`` loader: Dagster calls it when the
code location loads (``fabric ui``, a run worker), and only then is ``$FABRIC_HOME/config.json``
read. Importing this module reads nothing. The configuration enters the definitions through the
assets' code versions (model identities, chunking caps, the annotation producer:
``projections.code_version``), so a model or chunker change shows exactly the affected
projections stale in the UI once the code location reloads; and through the stages it switches
off (``projections.switched_off``): their assets move to the ``switched_off`` group, tagged with
the switch, so the jobs (``jobs``), which leave that group out, never plan them and a backfill
of a group does not count their unmaterialized partitions as failures.

``fabric ingest`` builds the definitions of the home it runs on (:func:`build_definitions`), with
the configured models or, in unit tests, the fakes.
"""

from __future__ import annotations

import dagster as dg
from dagster_duckdb import DuckDBResource

from fabric_assets.activation.assets import lexical_index_matches_canonical, release
from fabric_assets.annotations.assets import annotation_vectors, annotations, graph
from fabric_assets.chunks.assets import chunks, lexical_documents
from fabric_assets.console_logger import console_logger
from fabric_assets.dense.assets import chunk_vectors, chunk_vectors_multilingual
from fabric_assets.jobs import (activation_job, annotation_job, lexical_health_job, lexical_health_schedule,
                                parse_job, rechunk_job, reproject_job)
from fabric_assets.late.assets import colbert_matrices
from fabric_assets.lifecycle.jobs import JOBS as LIFECYCLE_JOBS
from fabric_assets.model_identity import identities
from fabric_assets.parse.assets import source_bytes, units_and_relationships
from fabric_assets.projections import SWITCH_TAG, SWITCHED_OFF_GROUP, Identity, code_version, projection, switched_off
from fabric_assets.run_owner import RunFabricHomeResource
from fabric_assets.sensors import (activate_after_annotation_run, activate_after_asset_run, activate_after_parse_run,
                                   annotate_after_activation, rederive_after_repair, source_change_sensor)
from fabric_assets.windows.assets import colbert_windows, context_windows
from fabric_resources.config import FabricConfig
from fabric_resources.dagster_resources import CONFIGURED_MODELS, ModelResources
from fabric_resources.home import home_path

ASSETS = (source_bytes, units_and_relationships, chunks, lexical_documents, chunk_vectors, chunk_vectors_multilingual,
          context_windows, colbert_windows, colbert_matrices, release, annotations, graph, annotation_vectors)


def build_definitions(config: FabricConfig, models: ModelResources = CONFIGURED_MODELS,
                      home: str = "") -> dg.Definitions:
    """Fabric's definitions under ``config``: every asset with its code version, the jobs, sensors
    and schedule, the home resource (``home``; ``""``: ``$FABRIC_HOME`` when a run opens it, and
    ``fabric ingest`` names the home in each run's config) and one resource per model role from
    ``models``. Built once per process for each set of code versions."""
    return _definitions(tuple(sorted(identities(config, models).items())), switched_off(config), models, home)


_BUILT: dict[tuple, dg.Definitions] = {}


def _spec(spec: dg.AssetSpec, found: dict[Identity, str], off: tuple[str, ...]) -> dg.AssetSpec:
    """``spec`` with its code version under the configuration; a switched-off one in
    ``SWITCHED_OFF_GROUP``, tagged with its switch."""
    key = spec.key.to_user_string()
    spec = spec.replace_attributes(code_version=code_version(key, found))
    if key not in off:
        return spec
    return spec.replace_attributes(group_name=SWITCHED_OFF_GROUP,
                                   tags={**spec.tags, SWITCH_TAG: projection(key).enabled_by})


def _definitions(values: tuple[tuple[Identity, str], ...], off: tuple[str, ...], models: ModelResources,
                 home: str) -> dg.Definitions:
    # Keyed by everything the definitions depend on, so that the ingests of one process share them.
    key = (values, off, models.name, home)
    if key not in _BUILT:
        found = dict(values)
        assets = [a.map_asset_specs(lambda s: _spec(s, found, off)) for a in ASSETS]
        _BUILT[key] = dg.Definitions(
            assets=assets,
            asset_checks=[lexical_index_matches_canonical],
            jobs=[parse_job, activation_job, lexical_health_job, annotation_job, reproject_job, rechunk_job,
                  *LIFECYCLE_JOBS],
            schedules=[lexical_health_schedule],
            sensors=[source_change_sensor, activate_after_parse_run, activate_after_asset_run,
                     annotate_after_activation,
                     activate_after_annotation_run, rederive_after_repair],
            # In memory: the lineage audit (audit_job) registers Arrow views in it and writes nothing.
            resources={"fabric": RunFabricHomeResource(home=home), "duckdb": DuckDBResource(database=":memory:"),
                       **models.resources()},
            # Dagster's own console logger, less an interrupt's stack traces (Ctrl-C of `fabric ingest`).
            loggers={"console": console_logger},
        )
    return _BUILT[key]


@dg.definitions
def defs() -> dg.Definitions:
    """What ``workspace.yaml`` loads: the definitions of ``$FABRIC_HOME`` (default ``./.fabric``),
    its configuration read now, at load time."""
    home = home_path()
    return build_definitions(FabricConfig.load(home / "config.json"), CONFIGURED_MODELS, str(home))
