"""Rerankers: a local sentence-transformers CrossEncoder or a Cohere-compatible HTTP endpoint.

Seed 003, section 8: one reranker per process, ``local`` or ``http`` by ``reranker.backend``;
the two are exclusive and there is no fallback between them. ``none`` turns the stage off.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from fabric_resources.config import FabricConfig, HttpEndpointConfig
from fabric_resources.identity import weights_fingerprint
from fabric_resources.models.http_retry import EndpointFacts, ModelEndpoint, ModelResponseError


class Reranker(Protocol):
    """What the rerank stage needs from a model."""

    @property
    def identity(self) -> str: ...

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        """``(len(passages),) float32`` finite relevance scores in passage order; higher is
        more relevant. Scores are comparable within one call only."""
        ...


_FLOAT32_MAX = float(np.finfo(np.float32).max)


class RerankResponseError(ModelResponseError):
    """A 2xx rerank response that fails validation; the message names the check that failed."""


class LocalCrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder`` folder with one output label, on the CPU.

    The model loads on the first non-empty :meth:`score`, once per instance (thread-safe).
    Scores are ``CrossEncoder.predict`` outputs (with that model's own activation, e.g. a sigmoid
    for one label), computed over ``(query, passage)`` pairs.
    """

    def __init__(self, checkpoint: str | Path, batch_size: int = 32) -> None:
        self.checkpoint = Path(checkpoint)
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        """``cross-encoder:{folder name}#{weights fingerprint}`` (see
        :func:`fabric_resources.identity.weights_fingerprint`).

        Raises
        ------
        FileNotFoundError
            The folder holds neither ``model.safetensors`` nor ``pytorch_model.bin``.
        """
        for name in ("model.safetensors", "pytorch_model.bin"):
            weights = self.checkpoint / name
            if weights.is_file():
                return f"cross-encoder:{self.checkpoint.name}#{weights_fingerprint(weights)}"
        raise FileNotFoundError(f"no model.safetensors or pytorch_model.bin in {self.checkpoint}")

    @property
    def model(self) -> Any:
        """The loaded ``CrossEncoder`` (loads it on first access)."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    import transformers
                    from sentence_transformers import CrossEncoder

                    transformers.logging.set_verbosity_error()
                    transformers.utils.logging.disable_progress_bar()
                    self._model = CrossEncoder(str(self.checkpoint), device="cpu", local_files_only=True)
        return self._model

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        """``(len(passages),) float32`` scores in passage order.

        Raises
        ------
        ValueError
            The checkpoint has more than one output label, or produced non-finite scores.
        """
        if not passages:
            return np.zeros(0, dtype=np.float32)
        scores = self.model.predict(
            [(query, p) for p in passages], batch_size=self.batch_size,
            convert_to_numpy=True, show_progress_bar=False,
        )
        scores = np.asarray(scores, dtype=np.float32)
        if scores.shape != (len(passages),):
            raise ValueError(f"cross-encoder {self.checkpoint} gave scores of shape {scores.shape}; "
                             f"it must have exactly one output label")
        if not np.isfinite(scores).all():
            raise ValueError(f"cross-encoder {self.checkpoint} gave non-finite scores")
        return scores


class HttpReranker:
    """A Cohere-compatible rerank endpoint.

    One ``POST {base_url}/rerank`` per :meth:`score` with
    ``{"model", "query", "documents": [...], "top_n": len(documents)}`` (and
    ``Authorization: Bearer`` when ``api_key_file`` is set), under the 429-only retry policy of
    :mod:`fabric_resources.models.http_retry`. Reads ``results[].index`` and
    ``results[].relevance_score``.

    Raises
    ------
    ApiKeyFileError
        At construction, when ``api_key_file`` is set but missing, empty or not owner-only.
    """

    def __init__(self, config: HttpEndpointConfig) -> None:
        self.config = config
        self.endpoint = ModelEndpoint(config)

    @property
    def identity(self) -> str:
        """``http-rerank:{model}@{base_url}`` (base URL without a trailing slash)."""
        return f"http-rerank:{self.config.model}@{self.endpoint.base_url}"

    @property
    def facts(self) -> EndpointFacts:
        return self.endpoint.facts

    @property
    def last_retries(self) -> int:
        """429 retries of this thread's last :meth:`score` request."""
        return self.endpoint.last_retries

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        """``(len(passages),) float32`` relevance scores in passage order (no request when empty).

        Raises
        ------
        RerankResponseError
            ``results`` is not one entry per passage, an ``index`` is out of range or repeated,
            or a ``relevance_score`` is not a finite number (in float32).
        ModelEndpointError
            HTTP failure: non-2xx status, 429 after the last retry, timeout, transport error.
        """
        n = len(passages)
        if n == 0:
            return np.zeros(0, dtype=np.float32)
        body = self.endpoint.post_json(
            "rerank", {"model": self.config.model, "query": query, "documents": list(passages), "top_n": n}
        )
        return self._validated(body, n)

    def _validated(self, body: Any, n: int) -> np.ndarray:
        def fail(what: str) -> RerankResponseError:
            return RerankResponseError(what, url=f"{self.endpoint.base_url}/rerank")

        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list):
            raise fail("response has no 'results' list")
        if len(results) != n:
            raise fail(f"returned {len(results)} results for {n} documents")
        scores = np.empty(n, dtype=np.float32)
        seen = np.zeros(n, dtype=bool)
        for entry in results:
            index = entry.get("index") if isinstance(entry, dict) else None
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n:
                raise fail(f"result index {index!r} is not an integer in [0, {n})")
            if seen[index]:
                raise fail(f"document {index} appears more than once in results")
            seen[index] = True
            value = entry.get("relevance_score")
            if (not isinstance(value, (int, float)) or isinstance(value, bool)
                    or not math.isfinite(value) or abs(value) > _FLOAT32_MAX):
                raise fail(f"relevance_score of document {index} is {value!r}, not a finite number")
            scores[index] = value
        # n results, each index in range and unique, so every document has a score.
        return scores

    def close(self) -> None:
        self.endpoint.close()


_LOCAL: dict[Path, LocalCrossEncoderReranker] = {}
_LOCAL_LOCK = threading.Lock()


def reranker_from_config(config: FabricConfig) -> Reranker | None:
    """The reranker ``config.reranker.backend`` selects, or ``None`` for ``"none"``.

    ``"local"``: one :class:`LocalCrossEncoderReranker` per checkpoint folder per process (loads on
    first use). ``"http"``: a new :class:`HttpReranker` (its key file is read now; no request is
    made). Exclusive: nothing falls back to the other backend.

    Raises
    ------
    ApiKeyFileError
        ``"http"`` with a key file that is missing, empty or not owner-only.
    """
    rr = config.reranker
    if rr.backend == "none":
        return None
    if rr.backend == "local":
        assert rr.checkpoint is not None  # FabricConfig refuses backend "local" without one
        path = Path(rr.checkpoint).resolve()
        with _LOCAL_LOCK:
            if path not in _LOCAL:
                _LOCAL[path] = LocalCrossEncoderReranker(path)
            return _LOCAL[path]
    if rr.backend == "http":
        assert rr.http is not None  # FabricConfig refuses backend "http" without a section
        return HttpReranker(rr.http)
    raise ValueError(f"unknown reranker.backend {rr.backend!r}")
