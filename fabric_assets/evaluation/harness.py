"""``fabric eval BEIR_DIR``: Fabric and the baselines a user would pick, in one run.

The collection goes through the real Dagster pipeline into a scratch home,
each corpus entry one source document (``<title>\\n\\n<text>`` as UTF-8 text).
Every query then runs through ``fabric_query`` (fused result, and each channel
alone from the pack's debug rankings). In the same process, over the very
same chunks: BM25 from ``bm25s``, flat cosine with the same embedder and
vectors, and LanceDB's built-in hybrid search (FTS + vector, RRF). Chunk
rankings become document rankings by first occurrence.

Queries split deterministically into a **dev** half (odd numeric IDs, or odd
SHA-256 for other IDs) used for tuning and a **test** half reported by default.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from fabric_assets.evaluation.metrics import METRICS, first_occurrence, score_run
from fabric_assets.ingest import ingest
from fabric_query import pipeline
from fabric_query.release import ReleaseView, release_view
from fabric_resources.config import FabricConfig
from fabric_resources.home import FabricHome
from fabric_resources.models.embedder import shared_embedder
from fabric_resources.models.reranker import reranker_from_config
from fabric_resources.models.multilingual import shared_multilingual_embedder
from fabric_resources.text_folding import UNSPACED, fold

Split = Literal["dev", "test", "all"]
DEPTH = 300  # chunks fetched per query and system; enough for Recall@100 at document level


@dataclass
class BeirCollection:
    name: str
    corpus: dict[str, tuple[str, str]]  # id -> (title, text)
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def load_beir(folder: Path) -> BeirCollection:
    """Read ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/test.tsv`` (header line skipped).

    Raises
    ------
    FileNotFoundError
        If one of the three files is missing.
    """
    corpus = {}
    for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            corpus[str(d["_id"])] = (d.get("title") or "", d.get("text") or "")
    queries = {}
    for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            queries[str(d["_id"])] = d["text"]
    qrels: dict[str, dict[str, int]] = {}
    for i, line in enumerate((folder / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()):
        parts = line.split("\t")
        if len(parts) < 3 or (i == 0 and not parts[2].strip().lstrip("-").isdigit()):
            continue
        qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return BeirCollection(folder.name, corpus, queries, qrels)


def in_split(query_id: str, split: Split) -> bool:
    if split == "all":
        return True
    odd = int(query_id) % 2 == 1 if query_id.isdigit() else int(hashlib.sha256(query_id.encode()).hexdigest(), 16) % 2 == 1
    return odd if split == "dev" else not odd


def _file_name(doc_id: str, index: int) -> str:
    return f"{index:06d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', doc_id)[:80]}.txt"


def write_corpus(collection: BeirCollection, folder: Path) -> dict[str, str]:
    """One UTF-8 text file per corpus entry; returns file name → corpus ID."""
    folder.mkdir(parents=True, exist_ok=True)
    names = {}
    for i, (doc_id, (title, text)) in enumerate(sorted(collection.corpus.items())):
        name = _file_name(doc_id, i)
        body = f"{title}\n\n{text}\n" if title else f"{text}\n"
        (folder / name).write_text(body, encoding="utf-8")
        names[name] = doc_id
    return names


class QueryVectorMemo:
    """An ``Encoder`` that remembers query vectors, so the stage variants and tuning grid points
    that re-run a query do not re-encode it (the vectors are identical: same model, same text)."""

    def __init__(self, encoder) -> None:
        self.encoder = encoder
        self.identity = encoder.identity
        self._memo: dict[str, np.ndarray] = {}

    def encode_passages(self, texts: list[str]) -> np.ndarray:
        return self.encoder.encode_passages(texts)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
        if missing:
            self._memo.update(zip(missing, self.encoder.encode_queries(missing)))
        return np.stack([self._memo[t] for t in texts]) if texts else self.encoder.encode_queries([])


def _is_cjk(texts: list[str]) -> bool:
    sample = "".join(texts[:200])
    letters = [c for c in sample if c.isalnum()]
    return bool(letters) and len(UNSPACED.findall("".join(letters))) * 2 > len(letters)


def _bigram_tokens(text: str) -> list[str]:
    """Baseline tokenizer for CJK, as the eval README's reference BM25: character bigrams of the
    folded text with whitespace removed (punctuation kept), so no word segmentation is assumed."""
    t = re.sub(r"\s+", "", fold(text))
    return [t[i:i + 2] for i in range(len(t) - 1)] or ([t] if t else [])


@dataclass
class Baselines:
    """Baseline systems over the release's chunks; each maps query text → chunk IDs best first."""

    view: ReleaseView
    scratch: Path
    cjk: bool
    systems: dict[str, Callable[[str, np.ndarray], list[str]]] = field(default_factory=dict)

    def build(self) -> None:
        import bm25s
        import lancedb
        import pyarrow as pa

        # Each chunk has one vector, from the model its language needs; a monolingual collection
        # therefore has one table that covers every chunk.
        vs = self.view.vector_set("chunk_vectors_multilingual" if self.cjk else "chunk_vectors")
        all_ids = self.view.chunks.column("chunk_id").to_pylist()
        all_texts = self.view.chunks.column("text").to_pylist()
        chunk_ids = [all_ids[i] for i in vs.rows]
        texts = [all_texts[i] for i in vs.rows]
        vectors = vs.matrix

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
            docs, _ = bm25.retrieve(q, k=min(DEPTH, len(chunk_ids)), show_progress=False)
            return [chunk_ids[i] for i in docs[0]]

        def cosine_search(_query: str, qvec: np.ndarray) -> list[str]:
            scores = vectors @ qvec
            top = np.argsort(-scores, kind="stable")[:DEPTH]
            return [chunk_ids[i] for i in top]

        db = lancedb.connect(str(self.scratch / "lancedb-baseline"))
        table = db.create_table(
            "chunks",
            pa.table({"chunk_id": chunk_ids, "text": texts,
                      "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), vectors.shape[1])}),
            mode="overwrite",
        )
        if self.cjk:
            table.create_fts_index("text", base_tokenizer="ngram", ngram_min_length=2, ngram_max_length=2,
                                   stem=False, remove_stop_words=False, replace=True)
        else:
            table.create_fts_index("text", replace=True)
        from lancedb.rerankers import RRFReranker

        reranker = RRFReranker()

        def lancedb_hybrid(query: str, qvec: np.ndarray) -> list[str]:
            q = (table.search(query_type="hybrid").vector(qvec.tolist()).text(query)
                 .rerank(reranker).limit(DEPTH))
            return q.to_arrow().column("chunk_id").to_pylist()

        self.systems = {"bm25s": bm25_search, "flat-cosine": cosine_search, "lancedb-hybrid": lancedb_hybrid}


def run_eval(
    folder: Path,
    *,
    limit_queries: int | None = None,
    split: Split = "test",
    config: FabricConfig | None = None,
    work_dir: Path | None = None,
) -> dict:
    """Ingest a BEIR collection, run its queries through Fabric and the baselines, score them all.

    Returns a JSON-ready dict: collection, split, queries, per-system metrics
    (``fabric`` fused, ``fabric:<channel>`` alone, baselines), ingest seconds,
    and mean query milliseconds per system.
    """
    collection = load_beir(folder)
    qids = [q for q in collection.queries if in_split(q, split) and q in collection.qrels]
    if limit_queries:
        qids = qids[:limit_queries]
    scratch = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="fabric-eval-"))
    try:
        home = FabricHome(scratch / "home")
        if config is not None:
            home.layout.config_file.write_text(config.model_dump_json())
        names = write_corpus(collection, scratch / collection.name)
        t0 = time.perf_counter()
        ingest(scratch / collection.name, home)
        ingest_s = time.perf_counter() - t0
        view = release_view(home, home.catalog.current_release())
        label = f"fs:{collection.name}/"
        doc_of_parse = {}
        for key, meta in view.sources.items():
            doc_of_parse.setdefault(meta["parse_id"], names[key[len(label):]])
        parse_of_chunk = dict(zip(view.chunks.column("chunk_id").to_pylist(), view.chunks.column("parse_id").to_pylist()))

        def docs(chunk_ids) -> list[str]:
            return first_occurrence([doc_of_parse[parse_of_chunk[c]] for c in chunk_ids if c in parse_of_chunk])

        embedder = QueryVectorMemo(shared_embedder(home.config.dense.batch_size))
        multilingual = QueryVectorMemo(shared_multilingual_embedder())
        cjk = _is_cjk([t for t, _ in collection.corpus.values()] or [""])
        baselines = Baselines(view, scratch, cjk)
        baselines.build()
        query_encoder = multilingual if cjk else embedder
        runs: dict[str, dict[str, list[str]]] = {}
        millis: dict[str, float] = {}
        qvecs = query_encoder.encode_queries([collection.queries[q] for q in qids]) if qids else np.zeros((0, 384))
        reranker = reranker_from_config(home.config)
        variants = stage_variants(home.config, multilingual=cjk)
        base_config = home.config
        for i, q in enumerate(qids):
            text = collection.queries[q]
            t = time.perf_counter()
            pack = pipeline.search(home, _as_free_text(text), embedder, limit=DEPTH, debug=True, reranker=reranker,
                                   multilingual=multilingual)
            millis["fabric"] = millis.get("fabric", 0.0) + (time.perf_counter() - t) * 1000
            runs.setdefault("fabric", {})[q] = docs(h.chunk_id for h in pack.results)
            for channel, ranking in pack.channel_rankings.items():
                runs.setdefault(f"fabric:{channel}", {})[q] = docs(ranking)
            for name, variant in variants.items():
                home.__dict__["config"] = variant
                try:
                    t = time.perf_counter()
                    vpack = pipeline.search(home, _as_free_text(text), embedder, limit=DEPTH, debug=True,
                                            reranker=reranker if variant.reranker.backend != "none" else None,
                                            multilingual=multilingual)
                    millis[name] = millis.get(name, 0.0) + (time.perf_counter() - t) * 1000
                finally:
                    home.__dict__["config"] = base_config
                runs.setdefault(name, {})[q] = docs(h.chunk_id for h in vpack.results)
                for channel, ranking in vpack.channel_rankings.items():
                    runs.setdefault(f"{name}:{channel}", {})[q] = docs(ranking)
            for name, system in baselines.systems.items():
                t = time.perf_counter()
                ranking = system(text, qvecs[i])
                millis[name] = millis.get(name, 0.0) + (time.perf_counter() - t) * 1000
                runs.setdefault(name, {})[q] = docs(ranking)
        for name in runs:  # a channel that did not run for a query ranks nothing for it
            for q in qids:
                runs[name].setdefault(q, [])
        return {
            "collection": collection.name,
            "split": split,
            "queries": len(qids),
            "documents": len(collection.corpus),
            "chunks": view.chunks.num_rows,
            "ingest_seconds": round(ingest_s, 1),
            "ndcg_gain": "linear (trec_eval/BEIR): rel / log2(rank + 1)",
            "metrics": {name: score_run(run, collection.qrels) for name, run in sorted(runs.items())},
            "mean_query_ms": {k: round(v / max(1, len(qids)), 2) for k, v in sorted(millis.items())},
        }
    finally:
        if work_dir is None:
            shutil.rmtree(scratch, ignore_errors=True)


def stage_variants(config: FabricConfig, multilingual: bool = False) -> dict[str, FabricConfig]:
    """Query-time stage configurations scored beside the configured one, on the same home.

    Each flips one stage of ``config``: section-guided dense, MaxSim (when a checkpoint is
    configured), the reranker (when one is configured); for a ``multilingual`` (CJK) collection
    also the e5 route's section-guided dense and its fusion (convex vs RRF). Ingest-time choices (chunk caps, the
    multilingual model) need their own home and are compared across runs.
    """
    q = config.query
    out = {} if multilingual else {
        ("fabric[-section]" if q.section_guided else "fabric[+section]"):
            config.model_copy(update={"query": q.model_copy(update={"section_guided": not q.section_guided})}),
    }
    if multilingual:
        out["fabric[+section-multilingual]" if not q.section_guided_multilingual else "fabric[-section-multilingual]"] = \
            config.model_copy(update={"query": q.model_copy(
                update={"section_guided_multilingual": not q.section_guided_multilingual})})
        other = "rrf" if q.multilingual_fusion == "convex" else "convex"
        out[f"fabric[{other}-multilingual]"] = config.model_copy(
            update={"query": q.model_copy(update={"multilingual_fusion": other})})
    if config.late_interaction.enabled:
        out["fabric[-maxsim]"] = config.model_copy(
            update={"late_interaction": config.late_interaction.model_copy(update={"enabled": False})})
    if config.reranker.backend != "none":
        out["fabric[-rerank]"] = config.model_copy(
            update={"reranker": config.reranker.model_copy(update={"backend": "none"})})
    return out


def _as_free_text(query: str) -> str:
    """Benchmark questions are free text: quotes and a leading '-' must not become syntax."""
    cleaned = query.replace('"', " ")
    cleaned = re.sub(r"(^|\s)-+", r"\1", cleaned)
    cleaned = re.sub(r"\b(path|type|after|before|source):", r"\1 ", cleaned, flags=re.IGNORECASE)
    return cleaned[:1000] if cleaned.strip() else "?"


def markdown_table(result: dict) -> str:
    """The metrics as a markdown table, Fabric first, then its channels and stage variants, then baselines."""
    rows = sorted(result["metrics"].items(), key=lambda kv: (not kv[0].startswith("fabric"), kv[0]))
    head = f"| system ({result['collection']}, {result['split']} split, {result['queries']} queries) | " + " | ".join(METRICS) + " | ms/query |"
    sep = "|---" * (len(METRICS) + 2) + "|"
    lines = [head, sep]
    for name, m in rows:
        ms = result["mean_query_ms"].get(name, result["mean_query_ms"].get("fabric") if name.startswith("fabric:") else None)
        ms_text = "" if name.startswith("fabric:") else f"{ms:.1f}" if ms is not None else ""
        lines.append(f"| {name} | " + " | ".join(f"{m[k]:.4f}" for k in METRICS) + f" | {ms_text} |")
    return "\n".join(lines)


def tune_fusion(
    folder: Path,
    work_dir: Path,
    ks: tuple[int, ...] = (10, 20, 40, 60, 100),
    weights: tuple[float, ...] = (0.5, 0.75, 1.0, 1.5, 2.0),
    split: Split = "dev",
    feedback: tuple[tuple[int, int, float], ...] = ((0, 10, 0.5), (10, 10, 0.3), (10, 10, 0.5), (20, 5, 0.5)),
    limit_queries: int | None = None,
    section_guided: tuple[bool, ...] = (True, False),
    bigram_bm25: tuple[tuple[float, float] | None, ...] = (None, (0.5, 0.3), (0.5, 0.5), (0.7, 0.4), (0.9, 0.4)),
    convex_lexical: tuple[float, ...] = (0.3, 0.35, 0.4, 0.45, 0.5),
) -> list[dict]:
    """Grid-search fusion and lexical settings on one split (dev by default).

    Every grid point of the query-time settings — section-guided dense (of the route the
    collection's queries take), word-channel ``feedback`` (terms, docs, weight) and, for a
    CJK collection, the word channel's ``bigram_bm25`` (k1, b; None = tantivy's 1.2, 0.75) —
    runs every query once through ``fabric_query``; the channel lists it returns are then
    re-fused offline: weighted RRF over ``ks`` × ``weights`` per channel and, for a CJK
    collection, the min-max convex combination with weight ``convex_lexical`` on each lexical
    channel and 1 − that on the dense one. Returns the points sorted by nDCG@10, best first.
    ``work_dir`` holds (or receives) the ingested home, as in :func:`run_eval`.
    """
    import itertools

    from fabric_query.fusion import convex, rrf
    from fabric_resources.config import Bm25Config

    collection = load_beir(folder)
    qids = [q for q in collection.queries if in_split(q, split) and q in collection.qrels][:limit_queries]
    home = FabricHome(Path(work_dir) / "home")
    names = write_corpus(collection, Path(work_dir) / collection.name)
    ingest(Path(work_dir) / collection.name, home)
    view = release_view(home, home.catalog.current_release())
    label = f"fs:{collection.name}/"
    doc_of_parse = {meta["parse_id"]: names[key[len(label):]] for key, meta in view.sources.items()}
    parse_of_chunk = dict(zip(view.chunks.column("chunk_id").to_pylist(), view.chunks.column("parse_id").to_pylist()))
    embedder = QueryVectorMemo(shared_embedder(home.config.dense.batch_size))
    multilingual = QueryVectorMemo(shared_multilingual_embedder())
    cjk = _is_cjk([t for t, _ in collection.corpus.values()] or [""])
    bm25_grid = bigram_bm25 if cjk else (None,)  # English queries never use the bigram parameters
    base = home.config

    def scored(run_lists: dict[str, list[str]]) -> dict:
        return score_run({q: first_occurrence([doc_of_parse[parse_of_chunk[c]] for c in ids])
                          for q, ids in run_lists.items()}, collection.qrels)

    results = []
    for section, (terms, docs_n, weight), bm25 in itertools.product(section_guided, feedback, bm25_grid):
        # Feedback on for every script here, so the grid measures it where it is normally off too.
        update = {"feedback_terms": terms, "feedback_docs": docs_n, "feedback_weight": weight,
                  "channel_depth": DEPTH, "feedback_multilingual": True,
                  "section_guided_multilingual" if cjk else "section_guided": section,
                  "bigram_bm25": Bm25Config(k1=bm25[0], b=bm25[1]) if bm25 else None}
        home.__dict__["config"] = base.model_copy(update={"query": base.query.model_copy(update=update)})
        per_query = {}
        for q in qids:
            pack = pipeline.search(home, _as_free_text(collection.queries[q]), embedder, limit=1, debug=True,
                                   multilingual=multilingual)
            per_query[q] = {k.split(":", 1)[1]: list(v) for k, v in pack.stage_candidates.items()
                            if k.startswith("channel:")}
        point = {"section_guided": section, "feedback": [terms, docs_n, weight],
                 "bigram_bm25": list(bm25) if bm25 else None}
        channels = sorted({c for r in per_query.values() for c in r})
        for k in ks:
            for combo in itertools.product(weights, repeat=len(channels)):
                w = dict(zip(channels, combo))
                fused = {q: [c for c, _ in rrf({n: [c for c, _ in p] for n, p in lists.items()}, k, w)]
                         for q, lists in per_query.items()}
                results.append({**point, "fusion": "rrf", "k": k, "weights": w, **scored(fused)})
        if cjk:
            for lw in convex_lexical:
                w = {c: round(1 - lw, 4) if c.startswith("dense") else lw for c in channels}
                fused = {q: [c for c, _ in convex(lists, w)] for q, lists in per_query.items()}
                results.append({**point, "fusion": "convex", "weights": w, **scored(fused)})
    home.__dict__["config"] = base
    return sorted(results, key=lambda r: -r["nDCG@10"])

