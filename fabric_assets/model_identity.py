"""Identities the projections depend on, and which active partitions are stale against them.

Every model projection row records the identity of the model that wrote it
(``name@version#weights-fingerprint...``). The same identities, and the chunking caps and the
annotation producer, enter the assets' Dagster code versions (:func:`identities`, read when the
definitions load, ``fabric_assets.definitions``), so changing a model (config or weights) marks
exactly the affected projections stale in the UI; :func:`stale_partitions` finds the active
parses whose stored rows were written by another model, and ``fabric ingest`` (or a backfill of
``reproject_job`` in the UI) recomputes them from the stored chunks and windows — no re-parse.
The models are those of a :class:`~fabric_resources.dagster_resources.ModelResources` bundle (the
configured ones unless a test binds the fakes).
"""

from __future__ import annotations

import pyarrow.compute as pc

from fabric_assets.annotations.planning import current_producer
from fabric_assets.projections import MODEL_PROJECTIONS, Identity, projection
from fabric_resources.config import FabricConfig
from fabric_resources.dagster_resources import CONFIGURED_MODELS, ModelResources
from fabric_resources.home import FabricHome
from fabric_resources.models.colbert import ColbertCheckpointError


def chunking_identity(config: FabricConfig) -> str:
    """The chunking caps, ``max<max_tokens>/<multilingual_max_tokens>`` (the tokenizer's identity is
    in every chunk ID already)."""
    return "max{0.max_tokens}/{0.multilingual_max_tokens}".format(config.chunking)


def identities(config: FabricConfig, models: ModelResources = CONFIGURED_MODELS) -> dict[Identity, str]:
    """The value of every :class:`~fabric_assets.projections.Identity` under ``config`` (no model is
    loaded). ColBERT is ``disabled`` when late interaction is off and ``invalid-checkpoint`` when
    its checkpoint is unusable: a bad checkpoint must not stop the definitions from loading (the
    asset raises the typed error when it runs)."""
    try:
        colbert = models.colbert.identity(config) or "disabled"
    except ColbertCheckpointError:
        colbert = "invalid-checkpoint"
    return {
        Identity.CHUNKER: chunking_identity(config),
        Identity.DENSE: models.dense.identity(config),
        Identity.MULTILINGUAL: models.multilingual.identity(config),
        Identity.COLBERT: colbert,
        Identity.ANNOTATOR: current_producer(config),
    }


def expected_identities(config: FabricConfig, models: ModelResources = CONFIGURED_MODELS) -> dict[str, str]:
    """Vector table → the identity its rows must carry under ``config``: every model projection
    whose model is in use (e5 with ``dense.multilingual``, ColBERT with late interaction).

    Raises
    ------
    ColbertCheckpointError
        With late interaction on and an unusable checkpoint.
    """
    roles = {Identity.DENSE: models.dense.identity(config),
             Identity.MULTILINGUAL: models.multilingual.identity(config) if config.dense.multilingual else None,
             Identity.COLBERT: models.colbert.identity(config)}
    out = {}
    for key in MODEL_PROJECTIONS:
        identity = roles[projection(key).identity]
        if identity is not None:
            out[key] = identity
    return out


def stale_partitions(home: FabricHome, parse_ids: set[str], models: ModelResources = CONFIGURED_MODELS
                     ) -> dict[str, list[str]]:
    """Per model projection, the parses among ``parse_ids`` with a row written by another model
    (or, for ColBERT matrices once late interaction is on, with windows but no matrices)."""
    stale: dict[str, list[str]] = {}
    for table, identity in expected_identities(home.config, models).items():
        if not parse_ids:
            continue
        wrong: set[str] = set()
        written: set[str] = set()
        if home.tables.exists(table):
            t = home.tables.read(table, parse_ids=sorted(parse_ids), columns=["parse_id", "model"])
            wrong = set(t.filter(pc.not_equal(t.column("model"), identity)).column("parse_id").to_pylist())
            written = set(t.column("parse_id").to_pylist())
        if table == "colbert_matrices" and home.tables.exists("colbert_windows"):
            # Enabling late interaction later: windows exist but no matrix was ever written for them
            # (while it was off the stage was skipped, so the table may not even exist).
            windowed = set(home.tables.read("colbert_windows", parse_ids=sorted(parse_ids),
                                            columns=["parse_id"]).column("parse_id").to_pylist())
            wrong |= windowed - written
        if wrong:
            stale[table] = sorted(wrong)
    return stale
