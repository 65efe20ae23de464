"""The HTTP dense backend (OpenAI-compatible ``POST {base_url}/embeddings``) and backend selection.

Seed 003, section 8: the dense role is ``local`` or ``http`` by ``dense.backend``; the two are
exclusive and there is no fallback between them. The HTTP client restores input order by each
entry's ``index``, validates every vector (width, finiteness, finite non-zero norm) and
L2-normalises client-side, so both backends keep the unit-norm invariant.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from fabric_resources.config import DenseHttpConfig, FabricConfig
from fabric_resources.models.embedder import MiniLMEmbedder, shared_embedder
from fabric_resources.models.http_retry import EndpointFacts, ModelEndpoint, ModelResponseError


class EmbeddingResponseError(ModelResponseError):
    """A 2xx embeddings response that fails validation; the message names the check and the input
    position (0-based, over the whole ``encode_*`` call) it failed for."""


@dataclass(frozen=True)
class SmokeCheck:
    """Result of :meth:`HttpEmbedder.smoke_check`: one string embedded end to end.

    ``norm`` is the L2 norm of the vector as the server returned it (before client-side
    normalisation); ``retried_attempts`` counts 429 retries.
    """

    vector_count: int
    dimensions: int
    norm: float
    retried_attempts: int


class HttpEmbedder:
    """Dense vectors from an OpenAI-compatible embeddings endpoint.

    Each batch of ``config.batch_size`` texts is one ``POST {base_url}/embeddings`` with
    ``{"model": config.model, "input": [...]}`` (and ``Authorization: Bearer`` when
    ``api_key_file`` is set), under the 429-only retry policy of
    :mod:`fabric_resources.models.http_retry`. Batches are sent one after another.

    Offers ``identity``, ``encode_passages`` and ``encode_queries`` of
    :class:`~fabric_resources.models.embedder.Embedder`, not ``token_spans``: chunking keeps its
    local tokenizer whatever the dense backend.

    Raises
    ------
    ApiKeyFileError
        At construction, when ``api_key_file`` is set but missing, empty or not owner-only.
    """

    def __init__(self, config: DenseHttpConfig) -> None:
        self.config = config
        self.endpoint = ModelEndpoint(config)
        self._local = threading.local()

    @property
    def identity(self) -> str:
        """``http:{model}@{base_url}:dim{dimensions}`` (base URL without a trailing slash)."""
        return http_identity(self.config)

    @property
    def facts(self) -> EndpointFacts:
        return self.endpoint.facts

    @property
    def last_retries(self) -> int:
        """429 retries over all batches of this thread's last ``encode_*``/``smoke_check`` call."""
        return getattr(self._local, "retries", 0)

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), dimensions) float32`` unit-norm rows, in input order.

        Raises
        ------
        EmbeddingResponseError
            A response fails validation (see :meth:`encode_queries`).
        ModelEndpointError
            HTTP failure: non-2xx status, 429 after the last retry, timeout, transport error.
        """
        return self._encode(texts)[0]

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), dimensions) float32`` unit-norm rows, in input order.

        The same request as :meth:`encode_passages` (the endpoint decides any query prefixing).
        Every response must hold exactly one entry per input, each ``index`` in
        ``[0, batch)`` exactly once, each ``embedding`` a flat list of ``dimensions`` finite
        numbers whose L2 norm is finite and non-zero; otherwise :class:`EmbeddingResponseError`.
        """
        return self._encode(texts)[0]

    def smoke_check(self) -> SmokeCheck:
        """Embed one string through the full receive path (startup validation).

        Raises
        ------
        EmbeddingResponseError, ModelEndpointError
            As :meth:`encode_queries`: a misconfigured or unreachable endpoint fails here.
        """
        vectors, norms = self._encode(["Fabric dense backend smoke check."])
        return SmokeCheck(len(vectors), int(vectors.shape[1]), float(norms[0]), self.last_retries)

    def _encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Unit rows ``(n, d) float32`` and the raw norms ``(n,) float64``."""
        d = self.config.dimensions
        self._local.retries = 0
        if not texts:
            return np.zeros((0, d), dtype=np.float32), np.zeros(0)
        rows: list[np.ndarray] = []
        norms: list[np.ndarray] = []
        step = self.config.batch_size
        for offset in range(0, len(texts), step):
            batch = list(texts[offset:offset + step])
            try:
                body = self.endpoint.post_json("embeddings", {"model": self.config.model, "input": batch})
            finally:
                self._local.retries += self.endpoint.last_retries
            raw = self._validated(body, len(batch), offset)
            norm = np.linalg.norm(raw, axis=1)
            rows.append(raw / norm[:, None])
            norms.append(norm)
        return np.ascontiguousarray(np.concatenate(rows), dtype=np.float32), np.concatenate(norms)

    def _validated(self, body: Any, n: int, offset: int) -> np.ndarray:
        """``(n, d) float64`` raw vectors in input order, or :class:`EmbeddingResponseError`."""
        d = self.config.dimensions

        def fail(what: str) -> EmbeddingResponseError:
            return EmbeddingResponseError(what, url=f"{self.endpoint.base_url}/embeddings")

        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise fail("response has no 'data' list")
        if len(data) != n:
            raise fail(f"returned {len(data)} vectors for {n} inputs (inputs {offset}..{offset + n - 1})")
        out = np.empty((n, d), dtype=np.float64)
        seen = np.zeros(n, dtype=bool)
        for entry in data:
            index = entry.get("index") if isinstance(entry, dict) else None
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n:
                raise fail(f"entry index {index!r} is not an integer in [0, {n})")
            if seen[index]:
                raise fail(f"index {index} (input {offset + index}) appears more than once")
            seen[index] = True
            where = f"input {offset + index}"
            try:
                vec = np.asarray(entry.get("embedding"), dtype=np.float64)
            except (TypeError, ValueError):
                raise fail(f"embedding of {where} is not a list of numbers") from None
            if vec.ndim != 1:
                raise fail(f"embedding of {where} is not a flat list of numbers")
            if vec.shape[0] != d:
                raise fail(f"embedding of {where} has dimension {vec.shape[0]}, expected {d}")
            if not np.isfinite(vec).all():
                raise fail(f"embedding of {where} has non-finite values")
            with np.errstate(over="ignore", under="ignore"):
                norm = float(np.linalg.norm(vec))
            if not (math.isfinite(norm) and norm > 0):
                raise fail(f"embedding of {where} has norm {norm}; it must be finite and non-zero")
            out[index] = vec
        # n entries, each index in range and unique, so every index is present.
        return out

    def close(self) -> None:
        self.endpoint.close()


def http_identity(config: DenseHttpConfig) -> str:
    """The identity of an HTTP dense model, computed from config alone (no key read, no request)."""
    return f"http:{config.model}@{config.base_url.rstrip('/')}:dim{config.dimensions}"


def dense_backend(config: FabricConfig) -> MiniLMEmbedder | HttpEmbedder:
    """The model of the dense (``chunk_vectors``) role that ``config.dense.backend`` selects.

    ``"local"``: the process-wide MiniLM (:func:`~fabric_resources.models.embedder.shared_embedder`),
    whatever ``dense.http`` holds. ``"http"``: a new :class:`HttpEmbedder` on ``dense.http`` (its
    key file is read now). Exclusive: nothing falls back to the other backend. Makes no request;
    call :meth:`HttpEmbedder.smoke_check` to validate the endpoint at startup.

    Raises
    ------
    ApiKeyFileError
        ``"http"`` with a key file that is missing, empty or not owner-only.
    """
    dense = config.dense
    if dense.backend == "local":
        return shared_embedder(dense.batch_size)
    if dense.backend == "http":
        assert dense.http is not None  # FabricConfig refuses backend "http" without a section
        return HttpEmbedder(dense.http)
    raise ValueError(f"unknown dense.backend {dense.backend!r}")
