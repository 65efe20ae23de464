"""Model identities of the projections, and which active partitions are stale against them.

Every projection row records the identity of the model that wrote it
(``name@version#weights-fingerprint...``). The same identities enter the assets'
Dagster code versions, so changing a model (config or weights) marks exactly the
affected projections stale in the UI; :func:`stale_partitions` finds the active
parses whose stored rows were written by another model, and ``fabric ingest`` (or a
backfill of ``reproject_job`` in the UI) recomputes them from the stored chunks and
windows — no re-parse.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import pyarrow.compute as pc

from fabric_resources.config import FabricConfig
from fabric_resources.home import DEFAULT_HOME, FabricHome


@cache
def definitions_config() -> FabricConfig:
    """The configuration of the home the Dagster definitions serve (``FABRIC_HOME``), read once per
    process, when the definitions load (code versions are fixed at that moment anyway)."""
    return FabricConfig.load(Path(os.environ.get("FABRIC_HOME", DEFAULT_HOME)) / "config.json")


def dense_identity(config: FabricConfig) -> str:
    """Identity of the model behind ``chunk_vectors`` (no model is loaded to compute it)."""
    if config.dense.backend == "http":
        from fabric_resources.models.http_embedder import http_identity

        return http_identity(config.dense.http)
    from fabric_resources.models.embedder import shared_embedder

    return shared_embedder(config.dense.batch_size).identity


def multilingual_identity(config: FabricConfig) -> str:
    from fabric_resources.models.multilingual import shared_multilingual_embedder

    return shared_multilingual_embedder().identity


def colbert_identity(config: FabricConfig) -> str | None:
    li = config.late_interaction
    if not li.enabled:
        return None
    from fabric_resources.models.colbert import ColbertEncoder

    return ColbertEncoder(li.checkpoint, config.indexing.colbert_max_tokens, li.query_max_tokens).identity


def expected_identities(config: FabricConfig) -> dict[str, str]:
    """Vector table → the identity its rows must carry under ``config``."""
    out = {"chunk_vectors": dense_identity(config), "annotation_vectors": dense_identity(config)}
    if config.dense.multilingual:
        out["chunk_vectors_multilingual"] = multilingual_identity(config)
    colbert = colbert_identity(config)
    if colbert:
        out["colbert_matrices"] = colbert
    return out


def stale_partitions(home: FabricHome, parse_ids: set[str]) -> dict[str, list[str]]:
    """Per model projection, the parses among ``parse_ids`` with a row written by another model
    (or, for ColBERT matrices once late interaction is on, with windows but no matrices)."""
    stale: dict[str, list[str]] = {}
    for table, identity in expected_identities(home.config).items():
        if not home.tables.exists(table) or not parse_ids:
            continue
        t = home.tables.read(table, parse_ids=sorted(parse_ids), columns=["parse_id", "model"])
        wrong = set(t.filter(pc.not_equal(t.column("model"), identity)).column("parse_id").to_pylist())
        if table == "colbert_matrices" and home.tables.exists("colbert_windows"):
            # Enabling late interaction later: windows exist but no matrix was ever written for them.
            windowed = set(home.tables.read("colbert_windows", parse_ids=sorted(parse_ids),
                                            columns=["parse_id"]).column("parse_id").to_pylist())
            wrong |= windowed - set(t.column("parse_id").to_pylist())
        if wrong:
            stale[table] = sorted(wrong)
    return stale
