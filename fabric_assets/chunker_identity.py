"""Chunker identity, and which parses' chunks were cut by another chunker than configured.

Chunk boundaries depend on the tokenizer and the token cap of the document's route
(``chunks.assets.chunker_identity``, ``chunk_cap``), and every chunk row records the identity it
was cut under. A changed ``chunking`` setting leaves the stored chunks of existing parses cut
under the old one; :func:`stale_chunk_partitions` finds them, and ``fabric ingest`` (or a backfill
of ``rechunk_job`` in the UI) re-chunks them and recomputes every projection made from chunks —
no re-parse: units and relationships stay as they are. The same pattern as
``model_identity`` and ``reproject_job`` for a model change; what a re-chunk recomputes is the
registry's (``projections.RECHUNKED``, ``RECHUNK_VERDICTS``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from fabric_assets.chunks.assets import chunk_cap, chunker_identity
from fabric_resources.config import FabricConfig
from fabric_resources.dagster_resources import CONFIGURED_MODELS, ModelResources
from fabric_resources.home import FabricHome

#: Parses whose routing is decided per batch (their unit texts are read to decide it).
_BATCH = 256


def tokenizer_identity(config: FabricConfig, models: ModelResources = CONFIGURED_MODELS) -> str:
    """The tokenizer chunks are measured with (the ``tokenizer`` role: MiniLM's, whatever
    ``dense.backend`` says); no model is loaded."""
    return models.tokenizer.tokenizer(config).identity


def chunker_settings(config: FabricConfig, models: ModelResources = CONFIGURED_MODELS) -> dict[str, Any]:
    """Everything the chunker identity of a parse can depend on under ``config``, and the packing
    rule's version (``CHUNKER_VERSION``): a Fabric whose chunker changed re-chunks every active
    parse at its next ingest (it compared the settings only, so upgraded homes kept chunks cut by
    the old rule for good; hostile trial 13c)."""
    from fabric_assets.chunking import fine_chunks

    return {
        "chunker": fine_chunks.CHUNKER_VERSION,
        "tokenizer": tokenizer_identity(config, models),
        "max_tokens": config.chunking.max_tokens,
        "multilingual_max_tokens": config.chunking.multilingual_max_tokens,
        "multilingual": config.dense.multilingual,
    }


def stale_chunk_partitions(home: FabricHome, parse_ids: set[str], models: ModelResources = CONFIGURED_MODELS
                           ) -> list[str]:
    """The parses among ``parse_ids`` whose stored chunks were cut under another chunker
    identity than ``home.config`` gives them, sorted. Parses without chunks are never stale.

    Only when both routes' identities are possible (multilingual on, two different caps) and a
    parse's chunks carry one of them are its unit texts read, to route it as the chunks asset does.
    """
    if not parse_ids or not home.tables.exists("chunks"):
        return []
    config = home.config
    tokenizer = tokenizer_identity(config, models)
    caps = {config.chunking.max_tokens}
    if config.dense.multilingual:
        caps.add(config.chunking.multilingual_max_tokens)
    possible = {chunker_identity(tokenizer, cap) for cap in caps}
    rows = home.tables.read("chunks", parse_ids=sorted(parse_ids), columns=["parse_id", "chunker"])
    cut: dict[str, set[str]] = {}
    for pid, chunker in zip(rows.column("parse_id").to_pylist(), rows.column("chunker").to_pylist()):
        cut.setdefault(pid, set()).add(chunker)
    stale = {p for p, chunkers in cut.items() if len(chunkers) != 1 or not chunkers <= possible}
    if len(possible) > 1:
        routed = sorted(set(cut) - stale)
        for i in range(0, len(routed), _BATCH):
            batch = routed[i:i + _BATCH]
            units = home.tables.read("units", parse_ids=batch, columns=["parse_id", "text"])
            for pid in batch:
                texts = units.filter(pc.equal(units.column("parse_id"), pa.scalar(pid))).column("text").to_pylist()
                if cut[pid] != {chunker_identity(tokenizer, chunk_cap(config, texts))}:
                    stale.add(pid)
    return sorted(stale)
