"""``fabric bench query --chunks N``: warm query latency at growing corpus sizes.

For each target size: a scaling corpus of distinct documents recombined from
real English text (:mod:`fabric_assets.measurement.scaling_corpus`) is written and
ingested through the real pipeline (:func:`fabric_assets.ingest.ingest`) into
a home under the cache directory — once: a later run with the same size and
configuration reuses it. Then a fresh query process
(``python -m fabric_assets.measurement.query_latency``: no Dagster, models loaded once)
runs a fixed query set warm — Cranfield's English questions and JSQuAD's
Japanese ones (multilingual route) — and reports per-stage and end-to-end
p50/p95/p99 for the hybrid pipeline and the lexical-only path, and its RSS.
Growth factors compare each size with the smallest, measured on the same
machine in the same invocation. Times are measured, never asserted.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from fabric_assets.ingest import ingest
from fabric_assets.measurement.harness import as_free_text as free_text
from fabric_assets.measurement.scaling_corpus import (
    CORPUS_FORMAT, EnglishPool, SharedCorpusMissing, load_english_pool, plan_documents, write_documents,
)
from fabric_resources.config import FabricConfig
from fabric_resources.home import FabricHome
from fabric_resources.models.embedder import shared_embedder
from fabric_resources.schema import SCHEMA_VERSION

Log = Callable[[str], None]
MANIFEST = "manifest.json"


@dataclass
class ScalingHome:
    target_chunks: int
    directory: Path
    home: Path
    manifest: dict
    reused: bool


def _quiet(_: str) -> None:
    pass


def machine() -> dict:
    """What the figures were measured on (for the results file)."""
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "date": _dt.date.today().isoformat(),
    }


def cache_key(target_chunks: int, pool: EnglishPool, *, chunks_per_document: int, seed: int,
              max_tokens: int, tokenizer: str) -> str:
    """12 hex of SHA-256 over everything that shapes a scaling home (so a change rebuilds it)."""
    parts = [CORPUS_FORMAT, SCHEMA_VERSION, str(target_chunks), pool.digest, str(chunks_per_document),
             str(seed), str(max_tokens), tokenizer]
    return hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()[:12]


def _release_counts(home: FabricHome) -> dict:
    release = home.catalog.current_release()
    if release is None:
        return {"documents": 0, "chunks": 0, "distinct_chunk_texts": 0, "chunks_routed_multilingual": 0}
    parses = sorted({m["parse_id"] for m in release.manifest["sources"].values()})
    chunks = home.tables.read("chunks", parse_ids=parses, columns=["text_hash"])
    multilingual = home.tables.read("chunk_vectors_multilingual", parse_ids=parses, columns=["chunk_id"])
    return {
        "release_id": release.release_id,
        "documents": len(release.manifest["sources"]),
        "chunks": chunks.num_rows,
        "distinct_chunk_texts": len(set(chunks.column("text_hash").to_pylist())),
        "chunks_routed_multilingual": multilingual.num_rows,
    }


def prepare_scaling_home(
    cache_dir: Path,
    target_chunks: int,
    pool: EnglishPool,
    *,
    chunks_per_document: int = 50,
    seed: int = 0,
    log: Log = _quiet,
) -> ScalingHome:
    """Build (or reuse) the ingested home for ``target_chunks`` under ``cache_dir``.

    The home is reused when its manifest says the ingest completed and the home
    has a release; an interrupted build resumes (the corpus is rewritten only if
    it was not completely written; re-ingesting skips what is already parsed).
    """
    home_cfg = FabricConfig()  # scaling homes use the embedded default configuration
    max_tokens = home_cfg.chunking.max_tokens
    embedder = shared_embedder(home_cfg.dense.batch_size)
    key = cache_key(target_chunks, pool, chunks_per_document=chunks_per_document, seed=seed,
                    max_tokens=max_tokens, tokenizer=embedder.identity)
    directory = Path(cache_dir).resolve() / f"query-{target_chunks}-{key}"
    manifest_path = directory / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    home_dir = directory / "home"
    if manifest.get("ingested") and FabricHome(home_dir, read_only=True).exists():
        home = FabricHome(home_dir)
        release = home.catalog.current_release()
        if release is not None:
            log(f"{target_chunks} chunks: reusing {directory}")
            if not home.lexical.is_current(release.manifest.get("lexical_generation") or ""):
                # Cached by an older version whose serving index layout differs: rebuild it from the
                # canonical chunks, or every query would take the scan fallback.
                from fabric_assets.activation.repair import lexical_repair

                log(f"{target_chunks} chunks: rebuilding the serving index (older layout)")
                lexical_repair(home)
            return ScalingHome(target_chunks, directory, home_dir, manifest, reused=True)
    corpus = directory / "scaling"
    if not manifest.get("written"):
        log(f"{target_chunks} chunks: planning documents from {len(pool.paragraphs)} English paragraphs")
        docs = plan_documents(pool.paragraphs, target_chunks, embedder.token_spans, max_tokens=max_tokens,
                              chunks_per_document=chunks_per_document, seed=seed)
        if corpus.exists():
            shutil.rmtree(corpus)
        write_documents(docs, corpus)
        manifest = {
            "format": CORPUS_FORMAT, "key": key, "target_chunks": target_chunks, "seed": seed,
            "chunks_per_document": chunks_per_document, "pool_digest": pool.digest,
            "pool_sources": pool.used, "pool_excluded": pool.excluded,
            "documents_planned": len(docs), "chunks_planned": sum(d.chunks for d in docs),
            "corpus_bytes": sum(len(d.text.encode()) for d in docs), "written": True, "ingested": False,
        }
        directory.mkdir(parents=True, exist_ok=True)
        manifest_path.write_text(json.dumps(manifest, indent=2))
    log(f"{target_chunks} chunks: ingesting {manifest['documents_planned']} documents into {home_dir} "
        f"(embedding dominates: roughly {manifest['chunks_planned'] / 40 / 60:.1f} min at 40 chunks/s)")
    home = FabricHome(home_dir)
    last = [0.0]

    def progress(done: int, total: int) -> None:
        if total and (done - last[0] >= total / 20 or done == total):
            last[0] = done
            log(f"  {done}/{total} steps")

    t0 = time.perf_counter()
    summary = ingest(corpus, home, progress=progress)
    manifest["ingest_seconds"] = round(time.perf_counter() - t0, 1)
    manifest["failed_runs"] = len(summary.failed_runs)
    manifest.update(_release_counts(home))
    # A resumed build may publish nothing new: what counts is a release over the corpus and no failed run.
    manifest["ingested"] = not summary.failed_runs and manifest.get("release_id") is not None and manifest["chunks"] > 0
    manifest_path.write_text(json.dumps(manifest, indent=2))
    return ScalingHome(target_chunks, directory, home_dir, manifest, reused=False)


def benchmark_queries(shared: Path, english: int = 50, multilingual: int = 10) -> list[str]:
    """The fixed query set: the first ``english`` Cranfield questions (file order) and ``multilingual``
    JSQuAD questions spread evenly over its file, as free text (quotes and leading ``-`` removed).

    Raises
    ------
    SharedCorpusMissing
        If either queries file is absent.
    """
    out = []
    for name, n in (("cranfield", english), ("jsquad", multilingual)):
        path = shared / "eval" / name / "queries.jsonl"
        if not path.exists():
            raise SharedCorpusMissing(f"{path} not found: the query set comes from ../shared/eval")
        texts = [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        step = 1 if name == "cranfield" else max(1, len(texts) // max(n, 1))
        out += [free_text(t) for t in texts[::step][:n]]
    return out


def run_module_process(module: str, queries: list[str], args: list[str], timeout_s: float) -> str:
    """``python -m <module> --queries FILE <args>`` in a fresh process (``HF_HUB_OFFLINE=1``), with
    ``queries`` written to FILE as JSON; return its stdout.

    Raises
    ------
    RuntimeError
        If the process fails (its stderr tail is in the message).
    """
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as fh:
        json.dump(queries, fh)
        qfile = fh.name
    try:
        proc = subprocess.run([sys.executable, "-m", module, "--queries", qfile, *args], capture_output=True,
                              text=True, timeout=timeout_s, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    finally:
        os.unlink(qfile)
    if proc.returncode != 0:
        raise RuntimeError(f"query process failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout


def run_query_process(home: Path, queries: list[str], *, repeat: int = 3, limit: int | None = None,
                      timeout_s: float = 3600) -> dict:
    """Run :mod:`fabric_assets.measurement.query_latency` in a fresh process on ``home``; return its JSON.

    Raises
    ------
    RuntimeError
        If the process fails (its stderr tail is in the message).
    """
    args = ["--home", str(home), "--repeat", str(repeat), *(["--limit", str(limit)] if limit else [])]
    out = run_module_process("fabric_assets.measurement.query_latency", queries, args, timeout_s)
    return json.loads(out.strip().splitlines()[-1])


def growth(sizes: list[dict]) -> dict:
    """Each size's end-to-end p50/p95 and RSS divided by the smallest size's (same invocation).

    Returns ``{"<size>/<smallest>": {"chunks": ratio, "rss": ratio,
    "end_to_end": {route: {mode: {"p50": ratio, "p95": ratio}}}}}``; ``{}`` for fewer than two sizes.
    """
    if len(sizes) < 2:
        return {}
    base = sizes[0]
    out = {}
    for s in sizes[1:]:
        e2e: dict = {}
        for route, modes in s["latency"]["routes"].items():
            for mode, fig in modes.items():
                ref = base["latency"]["routes"].get(route, {}).get(mode)
                if ref:
                    e2e.setdefault(route, {})[mode] = {
                        p: round(fig["end_to_end_ms"][p] / max(ref["end_to_end_ms"][p], 1e-6), 2) for p in ("p50", "p95")}
        out[f"{s['target_chunks']}/{base['target_chunks']}"] = {
            "chunks": round(s["chunks"] / max(base["chunks"], 1), 2),
            "rss": round(s["latency"]["rss_mb"] / max(base["latency"]["rss_mb"], 1e-6), 2),
            "end_to_end": e2e,
        }
    return out


def bench_query_scale(
    sizes: list[int],
    cache_dir: Path,
    shared: Path,
    *,
    english_queries: int = 50,
    multilingual_queries: int = 10,
    queries: list[str] | None = None,
    repeat: int = 3,
    chunks_per_document: int = 50,
    seed: int = 0,
    log: Log = _quiet,
) -> dict:
    """Build or reuse one scaling home per size, measure warm latency on each, compare.

    Raises
    ------
    SharedCorpusMissing
        If ``shared`` lacks the English sources or the query files.
    """
    pool = load_english_pool(shared)
    query_set = list(queries) if queries else benchmark_queries(shared, english_queries, multilingual_queries)
    rows = []
    for target in sorted(set(sizes)):
        built = prepare_scaling_home(cache_dir, target, pool, chunks_per_document=chunks_per_document, seed=seed,
                                     log=log)
        if not built.manifest.get("ingested"):
            raise RuntimeError(f"the ingest of {built.directory} did not complete; see `fabric status --home {built.home}`")
        log(f"{target} chunks: measuring {len(query_set)} queries × {repeat} in a fresh query process")
        latency = run_query_process(built.home, query_set, repeat=repeat)
        m = built.manifest
        rows.append({
            "target_chunks": target, "chunks": m["chunks"], "documents": m["documents"],
            "distinct_chunk_texts": m["distinct_chunk_texts"], "chunks_planned": m["chunks_planned"],
            "corpus_bytes": m["corpus_bytes"], "ingest_seconds": m.get("ingest_seconds"), "reused": built.reused,
            "home": str(built.home), "latency": latency,
        })
    return {
        "benchmark": "query-scale",
        "machine": machine(),
        "pool": {"paragraphs": len(pool.paragraphs), "sources": pool.used, "excluded": pool.excluded},
        "queries": rows[0]["latency"]["queries"] if rows else {},
        "repeat": repeat,
        "sizes": rows,
        "growth": growth(rows),
    }


def summary_rows(result: dict) -> list[dict[str, str]]:
    """End to end: one row per size, route and mode (p50/p95/p99 ms, query-process RSS)."""
    rows = []
    for s in result["sizes"]:
        lat = s["latency"]
        for route, modes in lat["routes"].items():
            for mode, fig in modes.items():
                e2e = fig["end_to_end_ms"]
                rows.append({"chunks": f"{s['chunks']:,}", "route": route, "mode": mode,
                             "p50 ms": f"{e2e['p50']:.1f}", "p95 ms": f"{e2e['p95']:.1f}", "p99 ms": f"{e2e['p99']:.1f}",
                             "RSS MB": f"{lat['rss_mb']:.0f}"})
    return rows


def stage_rows(result: dict) -> list[dict[str, str]]:
    """Per stage: one row per size, route and stage, hybrid and lexical-only p50/p95 side by side (ms)."""
    rows = []
    for s in result["sizes"]:
        for route, modes in s["latency"]["routes"].items():
            hybrid = modes.get("hybrid", {}).get("stages_ms", {})
            lexical = modes.get("lexical", {}).get("stages_ms", {})
            for stage in [*hybrid, *(k for k in lexical if k not in hybrid)]:
                h, lx = hybrid.get(stage, {}), lexical.get(stage, {})
                rows.append({"chunks": f"{s['chunks']:,}", "route": route, "stage": stage,
                             "hybrid p50": f"{h['p50']:.1f}" if h else "", "hybrid p95": f"{h['p95']:.1f}" if h else "",
                             "lexical p50": f"{lx['p50']:.1f}" if lx else "", "lexical p95": f"{lx['p95']:.1f}" if lx else ""})
    return rows


def growth_rows(result: dict) -> list[dict[str, str]]:
    """One row per (size / smallest size), route and mode: chunk, end-to-end p50/p95 and RSS ratios."""
    rows = []
    for pair, g in result["growth"].items():
        for route, modes in g["end_to_end"].items():
            for mode, r in modes.items():
                rows.append({"sizes": pair, "chunks ×": f"{g['chunks']:.2f}", "route": route, "mode": mode,
                             "p50 ×": f"{r['p50']:.2f}", "p95 ×": f"{r['p95']:.2f}", "RSS ×": f"{g['rss']:.2f}"})
    return rows
