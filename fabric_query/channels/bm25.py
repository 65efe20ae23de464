"""Okapi BM25 re-scoring of the word channel's candidates over exact window statistics.

tantivy's own BM25 counts every document of the serving index in N and avgdl — chunk documents
as well as the window documents that hold the word field — and fixes k1 1.2, b 0.75, so the word
channel re-scores tantivy's candidates here (:func:`fabric_query.channels.lexical.word_matches`).
Term counts are kept per generation as arrays over one vocabulary (:class:`Postings`), and each
pass is scored in one NumPy batch: the re-scoring runs over every candidate of both feedback
passes, where a Python loop per (candidate, term) made the word channel ~4x main's cost
(docs/benchmarks.md, "Word channel cost").
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from fabric_query.channels.base import ChannelResult, ranked
from fabric_resources.lexical_index import OpenIndex

#: A word-field document's term counts and its length in tokens (BM25's tf and |d|).
TermStats = tuple[Mapping[str, int], int]


@dataclass(frozen=True)
class Bm25:
    """Okapi BM25 parameters for re-scoring the word channel's candidates.

    score(d) = Σ_t w_t · idf(t) · tf(t,d)·(k1 + 1) / (tf(t,d) + k1·(1 − b + b·|d|/avgdl)),
    idf(t) = ln(1 + (N − n_t + 0.5)/(n_t + 0.5)) — Robertson & Zaragoza, "The Probabilistic
    Relevance Framework: BM25 and Beyond" (2009), eq. 3.15, with the non-negative idf that
    tantivy and Lucene use. ``w_t`` is 1 for query terms and the boost of a feedback term.
    tantivy fixes k1 = 1.2, b = 0.75 (:data:`TANTIVY_BM25`); character bigrams want a flatter
    curve (the eval README's reference uses k1 0.9, b 0.4), so the channel re-scores with these instead.
    """

    k1: float
    b: float


#: tantivy's own parameters: the word channel re-scores with them when no others are configured.
TANTIVY_BM25 = Bm25(1.2, 0.75)


#: Entries a per-generation memo holds before it starts again (bounds a long-lived server's memory).
_MEMO_ENTRIES = 1 << 16


def generation_memo(index: OpenIndex, name: str) -> dict:
    """``index``'s memo called ``name`` (:attr:`OpenIndex.memo`), emptied once it holds
    ``_MEMO_ENTRIES`` entries."""
    memo = index.memo.setdefault(name, {})
    if len(memo) >= _MEMO_ENTRIES:
        memo.clear()
    return memo


def idf_of(index: OpenIndex, terms: dict[str, float]) -> dict[str, float]:
    """Term → BM25 idf over the window documents (:class:`Bm25`'s formula)."""
    n_docs = index.word_documents
    out = {}
    for term in terms:
        df = index.word_doc_freq(term)
        out[term] = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
    return out


def bm25_rescore(
    index: OpenIndex, candidates: list[str], terms: dict[str, float], tokens_of: Callable[[str], Sequence[str]],
    params: Bm25,
) -> ChannelResult:
    """Re-score ``candidates`` (window document IDs) by :class:`Bm25` ``params`` over word-field
    ``terms`` (token → weight); ``tokens_of`` gives a window's word-field tokens (:func:`word_tokens`).

    N and n_t are the index's window documents (:attr:`OpenIndex.word_documents`, ``doc_freq``:
    only window documents hold the word field), avgdl their mean length
    (:attr:`OpenIndex.word_avgdl`), |d| and tf counted from the window's own tokens, which the
    index made with the same analyzer. Returns every candidate, best first.
    """
    def stats_of(cid: str) -> TermStats:
        tokens = tokens_of(cid)
        return Counter(tokens), len(tokens)

    return rescore(index, candidates, terms, stats_of, params)


class Postings:
    """Window documents' term counts as arrays over one vocabulary, for :func:`bm25_arrays`.

    ``vocab``: term → ID; ``rows``: window ID → (term IDs, counts, length), the terms in string
    order so that a sum over them does not depend on the order the vocabulary grew in.
    """

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.rows: dict[str, tuple[np.ndarray, np.ndarray, int]] = {}
        # fabric serve runs queries in threads: two could give two new terms one ID.
        self._lock = threading.Lock()

    def row(self, wid: str, stats_of: Callable[[str], TermStats]) -> tuple[np.ndarray, np.ndarray, int]:
        found = self.rows.get(wid)
        if found is None:
            counts, length = stats_of(wid)
            items = sorted(counts.items())
            vocab = self.vocab
            with self._lock:
                ids = np.fromiter((vocab.setdefault(t, len(vocab)) for t, _ in items), np.int64, len(items))
            found = self.rows[wid] = (ids, np.fromiter((c for _, c in items), np.float64, len(items)), length)
        return found


def postings_of(index: OpenIndex) -> Postings:
    """``index``'s :class:`Postings`, started again once it holds ``_MEMO_ENTRIES`` windows."""
    found = index.memo.get("postings")
    if found is None or len(found.rows) >= _MEMO_ENTRIES or len(found.vocab) >= 8 * _MEMO_ENTRIES:
        found = index.memo["postings"] = Postings()
    return found


def bm25_arrays(idf: dict[str, float], terms: dict[str, float], rows: Sequence[tuple[np.ndarray, np.ndarray, int]],
                 vocab: Mapping[str, int], avgdl: float, params: Bm25) -> list[float]:
    """:class:`Bm25` of each of ``rows`` over ``terms`` (token → weight), in the order given, at once: every candidate's (term, count) pairs in
    one array, each pair's query weight gathered from a vector over the vocabulary (0 for a term
    not in the query, which adds exactly nothing), the sum per candidate by ``bincount`` in each
    candidate's term order. The word channel re-scores ≈ 260 windows per English query; a Python
    loop over them cost ~4 ms of its ~10 (docs/benchmarks.md, "Word channel cost")."""
    n = len(rows)
    keys = [t for t in terms if t in vocab]
    if not n or not keys:
        return [0.0] * n
    weight_of = np.zeros(len(vocab))
    weight_of[[vocab[t] for t in keys]] = [terms[t] * idf[t] for t in keys]
    ids = np.concatenate([r[0] for r in rows])
    tf = np.concatenate([r[1] for r in rows])
    owner = np.repeat(np.arange(n), np.fromiter((len(r[0]) for r in rows), np.int64, n))
    lengths = np.fromiter((r[2] for r in rows), np.float64, n)
    norm = params.k1 * (1.0 - params.b + params.b * lengths / avgdl)
    part = weight_of[ids] * tf * (params.k1 + 1.0) / (tf + norm[owner])
    return np.bincount(owner, weights=part, minlength=n).tolist()


def rescore(index: OpenIndex, candidates: list[str], terms: dict[str, float],
             stats_of: Callable[[str], TermStats], params: Bm25, postings: Postings | None = None) -> ChannelResult:
    """``candidates`` (window IDs) best first by :func:`bm25_arrays`; ``stats_of`` gives a window's
    term counts where ``postings`` (default: a fresh one) does not hold it yet."""
    postings = postings if postings is not None else Postings()
    rows = [postings.row(c, stats_of) for c in candidates]
    scores = bm25_arrays(idf_of(index, terms), terms, rows, postings.vocab, index.word_avgdl or 1.0, params)
    return ranked(list(zip(candidates, scores)), len(candidates))
