"""``fabric bench lexical``: Fabric's lexical path against bare tantivy on the same index.

Builds a scratch serving index of N distinct chunks cut from real text (no
embedding: the lexical path alone), then times, for the same queries:

* **bare**: tantivy's own query parser over the folded query text
  (``word`` field; ``substring`` field with the query's characters as one
  phrase) + ``search`` + reading the stored chunk IDs of the hits;
* **fabric**: ``fabric_query.channels.lexical`` (parse, fold, analyze, build
  the query objects, search, fetch, total-order ranking).

Reports p50/p95 per query class and the ratio fabric/bare, measured in the
same process, interleaved so machine noise hits both alike.
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from fabric_query.channels.lexical import substring_channel, substring_tokens, word_channel, word_tokens
from fabric_query.querylang import parse_query
from fabric_resources.lexical_index import ANALYZER_ID, LexicalIndex
from fabric_resources.schema import INDEX_FIELD_CHUNK_ID, LEXICAL_DOCUMENTS
from fabric_resources.text_folding import fold

QUERY_CLASSES = {
    "english": ["lighthouse", "truth universally acknowledged", "the", "Havisham Estella", "lamp storm tide"],
    "cjk-1-2-char": ["人", "下人", "刘备", "曹操", "山路"],
    "cjk-8-terms": ["人 の 下 大 山 日 中 不", "曹 操 刘 备 关 羽 张 飞"],
    "cjk-mixed": ["認証トークン", "下人 老婆", "蜘蛛の糸 御釈迦様"],
}


def cut_chunks(texts: list[str], n: int, seed: int = 0) -> list[str]:
    """``n`` distinct windows of 200–600 characters cut from ``texts`` (a numbered prefix keeps them distinct)."""
    rng = random.Random(seed)
    pool = "\n".join(texts)
    out = []
    for i in range(n):
        size = rng.randint(200, 600)
        start = rng.randrange(0, max(1, len(pool) - size))
        out.append(f"{i} {pool[start:start + size]}")
    return out


def build_index(chunks: list[str], root: Path) -> LexicalIndex:
    ids = [f"{i:032x}" for i in range(len(chunks))]
    docs = pa.table(
        {"parse_id": [f"{i // 50:032x}" for i in range(len(chunks))], "chunk_id": ids,
         "folded_text": [fold(t) for t in chunks], "analyzer": [ANALYZER_ID] * len(chunks)},
        schema=LEXICAL_DOCUMENTS,
    )
    index = LexicalIndex(root)
    index.build_fresh(docs)
    return index


def _bare(opened, query: str, depth: int) -> list[str]:
    """The same queries through tantivy's own query parser (OR of terms; each CJK term a phrase)."""
    searcher = opened.searcher
    hits = []
    words = " ".join(word_tokens(query))
    if words:
        hits += [a for _, a in searcher.search(opened.index.parse_query(words, ["word"]), depth).hits]
    if any(not t.isascii() for t in query.split()):
        phrases = " ".join(f'"{" ".join(substring_tokens(t))}"' for t in query.split() if substring_tokens(t))
        hits += [a for _, a in searcher.search(opened.index.parse_query(phrases, ["substring"]), depth).hits]
    return [searcher.doc(a)[INDEX_FIELD_CHUNK_ID][0] for a in hits]


def _fabric(opened, query: str, depth: int) -> list[str]:
    parsed = parse_query(query)
    out = [c for c, _ in word_channel(opened, parsed, None, depth)]
    if any(not t.isascii() for t in parsed.terms):
        out += [c for c, _ in substring_channel(opened, parsed, None, depth)]
    return out


def bench_lexical(texts: list[str], n_chunks: int, repeat: int = 20, depth: int = 100) -> dict:
    with tempfile.TemporaryDirectory(prefix="fabric-lexbench-") as tmp:
        t0 = time.perf_counter()
        index = build_index(cut_chunks(texts, n_chunks), Path(tmp))
        build_s = time.perf_counter() - t0
        opened = index.open(index.generations()[-1])
        result = {"chunks": n_chunks, "index_build_seconds": round(build_s, 1), "depth": depth, "classes": {}}
        all_b, all_f = [], []
        for name, queries in QUERY_CLASSES.items():
            bare, fab = [], []
            for q in queries:  # warm-up
                _bare(opened, q, depth), _fabric(opened, q, depth)
            for _ in range(repeat):
                for q in queries:
                    t = time.perf_counter()
                    _bare(opened, q, depth)
                    bare.append((time.perf_counter() - t) * 1000)
                    t = time.perf_counter()
                    _fabric(opened, q, depth)
                    fab.append((time.perf_counter() - t) * 1000)
            all_b += bare
            all_f += fab
            result["classes"][name] = {
                "bare_p50_ms": round(float(np.percentile(bare, 50)), 3),
                "fabric_p50_ms": round(float(np.percentile(fab, 50)), 3),
                "fabric_p95_ms": round(float(np.percentile(fab, 95)), 3),
                "ratio_p50": round(float(np.percentile(fab, 50) / np.percentile(bare, 50)), 3),
            }
        result["all"] = {
            "bare_p50_ms": round(float(np.percentile(all_b, 50)), 3),
            "fabric_p50_ms": round(float(np.percentile(all_f, 50)), 3),
            "fabric_p95_ms": round(float(np.percentile(all_f, 95)), 3),
            "ratio_p50": round(float(np.percentile(all_f, 50) / np.percentile(all_b, 50)), 3),
        }
        return result


def corpus_texts(folder: Path) -> list[str]:
    """Decoded text of the plain-text files under ``folder`` (UTF-8, else CP932, else GB18030)."""
    texts = []
    for p in sorted(folder.rglob("*.txt")):
        data = p.read_bytes()
        for enc in ("utf-8", "cp932", "gb18030"):
            try:
                texts.append(data.decode(enc))
                break
            except UnicodeDecodeError:
                continue
    return texts
