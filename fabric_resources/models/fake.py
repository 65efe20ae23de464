"""A deterministic stand-in for the encoders and the chunker's tokenizer, for unit tests.

No model, no weights, no download: a vector is a unit vector drawn from a normal distribution
seeded by the SHA-256 of the encoder's name and the text, so equal texts get equal vectors (queries
and passages alike) and any two different texts nearly orthogonal ones in 384 dimensions. Word
pieces are the runs of word characters and every other non-space character (``\\w+|[^\\w\\s]``).
Identities follow the models' scheme, ``name@version#fingerprint``, so a row written by a fake
never passes for one of a real model (nor a fake of one width for another).

Use it where the model is not what a test is about (Dagster wiring, activation, storage); the
end-to-end tests keep the real MiniLM.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from fabric_resources.schema import DENSE_DIM

#: Version of the fake's vector and token rules (in its identity).
FAKE_VERSION = "1"

_PIECE = re.compile(r"\w+|[^\w\s]")


class FakeEncoder:
    """Hash-seeded unit vectors and regex word pieces.

    Parameters
    ----------
    name
        Enters every vector's seed and the identity: two fakes of different names are two models.
    dim
        Vector width (384, the dense width, by default).

    ``encode_passages`` and ``encode_queries`` return ``(n, dim) float32`` unit rows, in input
    order; ``token_spans`` the character spans (Unicode scalars, end-exclusive) of each word piece.
    """

    def __init__(self, name: str = "fake-encoder", dim: int = DENSE_DIM) -> None:
        self.name = name
        self.dim = int(dim)

    @property
    def identity(self) -> str:
        """``name@version#fingerprint:dim<d>`` (12 hex of SHA-256 over the name and width)."""
        fingerprint = hashlib.sha256(f"{self.name}:{self.dim}".encode()).hexdigest()[:12]
        return f"{self.name}@{FAKE_VERSION}#{fingerprint}:dim{self.dim}"

    def vector(self, text: str) -> np.ndarray:
        """The ``(dim,) float32`` unit vector of ``text``."""
        seed = int.from_bytes(hashlib.sha256(f"{self.name}\x00{text}".encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).standard_normal(self.dim)
        return (v / np.linalg.norm(v)).astype(np.float32)

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.ascontiguousarray(np.stack([self.vector(t) for t in texts]), dtype=np.float32)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.encode_passages(texts)

    def token_spans(self, texts: list[str]) -> list[list[tuple[int, int]]]:
        return [[m.span() for m in _PIECE.finditer(t)] for t in texts]
