"""The baselines ``fabric eval`` scores beside Fabric, over the very same chunks and vectors.

BM25 from ``bm25s`` (English stopwords; character bigrams with the eval README's
reference k1 0.9, b 0.4 for a CJK collection), flat cosine with the same embedder
and vectors, and LanceDB's built-in full-text search alone (BM25 over the chunks, its default English
analysis: stop words removed from index and query, Snowball stemming, ASCII folding; character
bigrams for a CJK collection) and its hybrid search (that FTS + vector, RRF k 60).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fabric_assets.measurement.harness import DEPTH
from fabric_query.release import ReleaseView
from fabric_resources.text_folding import fold


def _bigram_tokens(text: str) -> list[str]:
    """Baseline tokenizer for CJK, as the eval README's reference BM25: character bigrams of the
    folded text with whitespace removed (punctuation kept), so no word segmentation is assumed."""
    t = re.sub(r"\s+", "", fold(text))
    return [t[i:i + 2] for i in range(len(t) - 1)] or ([t] if t else [])


@dataclass
class Baselines:
    """Baseline systems over the release's chunks; each maps query text → chunk IDs best first.

    The lexical baselines (bm25s, LanceDB FTS) index every chunk. The vector baselines (flat cosine,
    LanceDB hybrid) see the chunks that have a vector of the query's model only: each chunk has one
    vector, from the model its language needs, so in a mixed-language collection the others' chunks
    are out of their reach; :attr:`without_vector` counts them (0 in a monolingual collection)."""

    view: ReleaseView
    scratch: Path
    cjk: bool
    systems: dict[str, Callable[[str, np.ndarray], list[str]]] = field(default_factory=dict)
    without_vector: int = 0

    def build(self) -> None:
        import bm25s
        import lancedb
        import pyarrow as pa

        vs = self.view.vector_set("chunk_vectors_multilingual" if self.cjk else "chunk_vectors")
        all_ids = self.view.chunks.column("chunk_id").to_pylist()
        all_texts = self.view.chunk_texts
        chunk_ids = [all_ids[i] for i in vs.rows]
        vectors = vs.matrix
        self.without_vector = len(all_ids) - len(chunk_ids)
        # Lexical baselines over every chunk: indexing only the vector rows (as they did) left a
        # mixed collection's other-language chunks out of bm25s and LanceDB FTS too, which flattered
        # Fabric, whose word channel sees them (trial 11d).
        texts, lexical_ids = all_texts, all_ids

        if self.cjk:
            corpus_tokens = [_bigram_tokens(t) for t in texts]
            tokenize = _bigram_tokens
            # The eval README's reference parameters for character bigrams (k1 0.9, b 0.4).
            bm25 = bm25s.BM25(k1=0.9, b=0.4)
            bm25.index(corpus_tokens, show_progress=False)
        else:
            bm25 = bm25s.BM25()
            bm25.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
            tokenize = None

        def bm25_search(query: str, _qvec: np.ndarray) -> list[str]:
            if tokenize is not None:
                q = [tokenize(query)]
                if not q[0]:
                    return []
            else:
                q = bm25s.tokenize([query], stopwords="en", show_progress=False)
            docs, scores = bm25.retrieve(q, k=min(DEPTH, len(lexical_ids)), show_progress=False)
            # bm25s fills k with chunks that share no term with the query (score 0), in the table's
            # order: they are not BM25 results, and a reused home (another chunk order) scored otherwise.
            return [lexical_ids[i] for i, score in zip(docs[0], scores[0]) if score > 0]

        def cosine_search(_query: str, qvec: np.ndarray) -> list[str]:
            scores = vectors @ qvec
            top = np.argsort(-scores, kind="stable")[:DEPTH]
            return [chunk_ids[i] for i in top]

        db = lancedb.connect(str(self.scratch / "lancedb-baseline"))

        def fts_table(name: str, data: pa.Table):
            table = db.create_table(name, data, mode="overwrite")
            if self.cjk:
                table.create_fts_index("text", base_tokenizer="ngram", ngram_min_length=2, ngram_max_length=2,
                                       stem=False, remove_stop_words=False, replace=True)
            else:
                table.create_fts_index("text", replace=True)
            return table

        table = fts_table("chunks", pa.table({
            "chunk_id": chunk_ids, "text": [all_texts[i] for i in vs.rows],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])}))
        # Every chunk has a vector of the query's model (a monolingual collection): one table serves both.
        text_table = table if not self.without_vector else fts_table(
            "chunk_texts", pa.table({"chunk_id": lexical_ids, "text": texts}))
        from lancedb.rerankers import RRFReranker

        reranker = RRFReranker()

        def lancedb_hybrid(query: str, qvec: np.ndarray) -> list[str]:
            q = (table.search(query_type="hybrid").vector(qvec.tolist()).text(query)
                 .rerank(reranker).limit(DEPTH))
            return q.to_arrow().column("chunk_id").to_pylist()

        def lancedb_fts(query: str, _qvec: np.ndarray) -> list[str]:
            return text_table.search(query, query_type="fts").limit(DEPTH).to_arrow().column("chunk_id").to_pylist()

        self.systems = {"bm25s": bm25_search, "flat-cosine": cosine_search, "lancedb-fts": lancedb_fts,
                        "lancedb-hybrid": lancedb_hybrid}
