"""Dagster resource wrappers — the only module of ``fabric_resources`` that imports Dagster."""

from __future__ import annotations

import os

import dagster as dg

from fabric_resources.home import DEFAULT_HOME, FabricHome
from fabric_resources.models.embedder import MiniLMEmbedder, shared_embedder
from fabric_resources.models.multilingual import MultilingualE5Embedder, shared_multilingual_embedder


class FabricHomeResource(dg.ConfigurableResource):
    """The Fabric home that assets read and write (``FABRIC_HOME`` by default)."""

    home: str = os.environ.get("FABRIC_HOME", DEFAULT_HOME)

    def open(self) -> FabricHome:
        return FabricHome(self.home)

    def embedder(self) -> MiniLMEmbedder:
        return shared_embedder(self.open().config.dense.batch_size)

    def dense_encoder(self):
        """The ``chunk_vectors`` model chosen by ``dense.backend`` (local MiniLM or HTTP; no fallback)."""
        from fabric_resources.models.http_embedder import dense_backend

        return dense_backend(self.open().config)

    def multilingual_embedder(self) -> MultilingualE5Embedder:
        return shared_multilingual_embedder()
