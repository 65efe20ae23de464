"""``fabric eval-tune BEIR_DIR``: a grid over fusion and lexical settings on the dev half."""

from __future__ import annotations

from pathlib import Path

from fabric_assets.ingest import ingest
from fabric_assets.measurement.harness import (
    DEPTH, QueryVectorMemo, Split, as_free_text, in_split, is_cjk, load_beir, write_corpus,
)
from fabric_assets.measurement.metrics import first_occurrence, score_run
from fabric_query import pipeline
from fabric_query.release import release_view
from fabric_resources.home import FabricHome
from fabric_resources.models.embedder import shared_embedder
from fabric_resources.models.multilingual import shared_multilingual_embedder


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

    from fabric_query.fusion import LEXICAL_FLOORS, convex, rrf
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
    cjk = is_cjk([t for t, _ in collection.corpus.values()] or [""])
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
            pack = pipeline.search(home, as_free_text(collection.queries[q]), embedder, limit=1, debug=True,
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
                fused = {q: [c for c, _ in convex(lists, w, floors=LEXICAL_FLOORS)] for q, lists in per_query.items()}
                results.append({**point, "fusion": "convex", "weights": w, **scored(fused)})
    home.__dict__["config"] = base
    return sorted(results, key=lambda r: -r["nDCG@10"])
