"""The one Dagster ``Definitions`` of Fabric (workspace.yaml points here)."""

import dagster as dg

from fabric_assets.activation.assets import lexical_index_matches_canonical, release
from fabric_assets.annotations.assets import annotation_vectors, annotations, graph
from fabric_assets.chunks.assets import chunks, lexical_documents
from fabric_assets.dense.assets import chunk_vectors, chunk_vectors_multilingual
from fabric_assets.jobs import (activation_job, annotation_job, lexical_health_job, lexical_health_schedule,
                                parse_job, rechunk_job, reproject_job)
from fabric_assets.late.assets import colbert_matrices
from fabric_assets.parse.assets import source_bytes, units_and_relationships
from fabric_assets.sensors import (activate_after_annotation_run, activate_after_parse_run,
                                   annotate_after_activation, source_change_sensor)
from fabric_assets.windows.assets import colbert_windows, context_windows
from fabric_resources.dagster_resources import FabricHomeResource

defs = dg.Definitions(
    assets=[source_bytes, units_and_relationships, chunks, lexical_documents, chunk_vectors, chunk_vectors_multilingual,
            context_windows, colbert_windows, colbert_matrices, release, annotations, graph, annotation_vectors],
    asset_checks=[lexical_index_matches_canonical],
    jobs=[parse_job, activation_job, lexical_health_job, annotation_job, reproject_job, rechunk_job],
    schedules=[lexical_health_schedule],
    sensors=[source_change_sensor, activate_after_parse_run, annotate_after_activation,
             activate_after_annotation_run],
    resources={"fabric": FabricHomeResource()},
)
