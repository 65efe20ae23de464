"""``fabric bench ann``: the dense channel at a million chunks, simulated from real vectors.

Embedding a million chunks is out of reach on two cores, so the release is grown, not ingested:

1. **Source.** The 100,000-chunk scaling home of ``fabric bench query --chunks 100000`` (built
   once through the real pipeline and cached under ``--cache-dir``; see
   :mod:`fabric_assets.measurement.bench_query`), or any home given with ``--home``: its current
   release's rows of ``units``, ``chunks``, ``lexical_documents``, ``context_windows``,
   ``chunk_vectors`` and ``chunk_vectors_multilingual``, MiniLM / e5 vectors as the pipeline wrote them.
2. **Growth by seeded perturbation.** The release is copied ``copies = ceil(target / rows)``
   times. Copy 0 is the source itself; copy ``c >= 1`` gets new parse IDs, source keys
   (``fs:copy-<c>/…``), chunk and window IDs (SHA-256 of the old ID and ``c``, same length) and,
   for every vector ``v``, ``normalise(v + σ·g)`` with ``g ~ N(0, I/384)`` drawn from
   ``numpy.random.default_rng([seed, c])``. Texts, fragments and units are copied unchanged (the
   lexical channel sees each text ``copies`` times, at the real size of its index). ``σ`` is
   calibrated on the source so that a copy sits as far from its origin as a real chunk from its
   nearest real neighbour: with ``c_nn`` the median, over 2,000 seeded sample vectors, of the
   highest cosine to any other source vector (exact duplicates, cosine ≥ 0.9999, left out),
   ``σ = sqrt(1 / c_nn² − 1)`` (for unit ``v`` and ``E|g|² = 1``, ``cos(v, v') ≈ 1 / sqrt(1 + σ²)``).
   The same statistic is then measured on the grown table and reported beside it.
3. **A release of the grown home**, published as activation would: the table versions, the
   vector digests of the grown rows, a lexical generation built from them
   (:func:`fabric_assets.activation.activate.pinned_index_documents`; ``--lexical-segment-documents``
   builds it with larger segments than the product's 1,024 documents), and for each ANN setting
   the dense index built by activation's own step
   (:func:`fabric_assets.activation.dense_index.dense_index_records`), timed.
4. **Measurement**, each in a fresh query process (:mod:`fabric_assets.measurement.ann_query`,
   no Dagster): the exact product first (``mode: exact``, the baseline, same home, same queries),
   then each ANN setting (``mode: ann``): hybrid end-to-end and per-stage p50/p95/p99, the dense
   stage, recall@10 / recall@100 of the approximate direct ranking against the exact one, the
   overlap of the hybrid top 10, and the query process's RSS. Ratios are ANN / exact of the same run.
   The source home is measured too with the default configuration (at 100k chunks ``auto`` keeps
   the exact product).

Times are measured, never asserted.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fabric_assets.activation.activate import pinned_index_documents
from fabric_assets.activation.dense_index import dense_index_records
from fabric_resources.config import config_hash
from fabric_resources.dense_index import MANIFEST_KEY as DENSE_INDEXES
from fabric_resources.home import FabricHome
from fabric_resources.schema import DENSE_DIM, SCHEMA_VERSION, TABLES
from fabric_resources.vector_digest import MANIFEST_KEY as VECTOR_DIGESTS
from fabric_resources.vector_digest import PARSES_MANIFEST_KEY as VECTOR_PARSE_DIGESTS
from fabric_resources.vector_digest import parse_digests, table_digest

Log = Callable[[str], None]
#: Bumped when the growth method changes meaning (enters the grown home's cache key).
GROWTH_FORMAT = "ann-growth-v1"
#: Tables copied into the grown home (what a query reads; annotation and ColBERT tables are off by default).
GROWN_TABLES = ("units", "chunks", "lexical_documents", "context_windows", "chunk_vectors",
                "chunk_vectors_multilingual")
VECTOR_TABLES = ("chunk_vectors", "chunk_vectors_multilingual")
#: Sample of source vectors for the nearest-neighbour cosine statistic.
CALIBRATION_SAMPLE = 2000
#: Cosines at or above this are exact duplicates (same text), left out of the statistic.
DUPLICATE_COSINE = 0.9999


def _quiet(_: str) -> None:
    pass


def _matrix(column: pa.ChunkedArray) -> np.ndarray:
    n = len(column)
    if n == 0:
        return np.zeros((0, DENSE_DIM), dtype=np.float32)
    return np.asarray(column.combine_chunks().flatten().to_numpy(zero_copy_only=False),
                      dtype=np.float32).reshape(n, DENSE_DIM)


def nearest_other_cosines(samples: np.ndarray, matrix: np.ndarray, block_rows: int = 65_536) -> np.ndarray:
    """For each row of ``samples`` (``(s, 384)``), the highest cosine to a row of ``matrix``
    (``(n, 384)``, streamed in blocks) below :data:`DUPLICATE_COSINE` (itself and exact duplicates
    left out). Unit rows in, ``(s,) float32`` out."""
    best = np.full(len(samples), -1.0, dtype=np.float32)
    for b in range(0, len(matrix), block_rows):
        cos = samples @ matrix[b:b + block_rows].T
        cos[cos >= DUPLICATE_COSINE] = -1.0
        best = np.maximum(best, cos.max(axis=1))
    return best


def calibrate_sigma(vectors: np.ndarray, seed: int) -> tuple[float, float]:
    """(σ, c_nn): the perturbation scale of the module docstring and the median nearest-other
    cosine it was calibrated on, over :data:`CALIBRATION_SAMPLE` seeded rows of ``vectors``."""
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(vectors), size=min(CALIBRATION_SAMPLE, len(vectors)), replace=False)
    c_nn = float(np.median(nearest_other_cosines(vectors[pick], vectors)))
    return math.sqrt(1.0 / c_nn ** 2 - 1.0), c_nn


def perturbed(vectors: np.ndarray, sigma: float, seed: int, copy: int) -> np.ndarray:
    """``normalise(v + σ·g)`` for every row ``v`` of ``vectors``, ``g ~ N(0, I/384)`` from
    ``default_rng([seed, copy])``; ``(n, 384) float32``."""
    rng = np.random.default_rng([seed, copy])
    out = vectors + (sigma / math.sqrt(DENSE_DIM)) * rng.standard_normal(vectors.shape, dtype=np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out.astype(np.float32)


def derived_id(value: str, copy: int) -> str:
    """The ID of ``value`` in copy ``copy`` (itself in copy 0): SHA-256 hex of it and the copy,
    cut to its length (IDs stay hex digests of the same width)."""
    if copy == 0:
        return value
    return hashlib.sha256(f"{value}\x00{copy}".encode()).hexdigest()[:len(value)]


def _ids(column, copy: int) -> pa.Array:
    return pa.array([derived_id(v, copy) for v in column.to_pylist()], pa.string())


def _copy_rows(table: str, rows: pa.Table, copy: int, sigma: float, seed: int) -> pa.Table:
    """``rows`` of ``table`` as copy ``copy`` (module docstring, step 2)."""
    if copy == 0 or rows.num_rows == 0:
        return rows
    cols = {name: rows.column(name) for name in rows.column_names}
    cols["parse_id"] = _ids(cols["parse_id"], copy)
    if "chunk_id" in cols:
        cols["chunk_id"] = _ids(cols["chunk_id"], copy)
    if "window_id" in cols:
        cols["window_id"] = _ids(cols["window_id"], copy)
    if table == "context_windows":
        lists = cols["chunk_ids"].combine_chunks()
        offsets = pc.subtract(lists.offsets, lists.offsets[0]).cast(pa.int32())
        cols["chunk_ids"] = pa.ListArray.from_arrays(offsets, _ids(lists.flatten(), copy))
    if table in VECTOR_TABLES:
        grown = perturbed(_matrix(cols["vector"]), sigma, seed, copy)
        cols["vector"] = pa.FixedSizeListArray.from_arrays(pa.array(grown.reshape(-1), pa.float32()), DENSE_DIM)
    return pa.table(cols, schema=rows.schema)


def grown_key(source_release: dict, target_rows: int, seed: int) -> str:
    """12 hex of SHA-256 over what shapes a grown home (source release, target, seed, method)."""
    parts = [GROWTH_FORMAT, str(SCHEMA_VERSION), json.dumps(source_release["tables"], sort_keys=True),
             json.dumps(source_release.get(VECTOR_DIGESTS), sort_keys=True), str(target_rows), str(seed)]
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:12]


def grow_home(source: FabricHome, directory: Path, target_rows: int, seed: int = 0, log: Log = _quiet) -> dict:
    """Build (or reuse) the grown home under ``directory`` (module docstring, steps 1-3 without
    the dense index); return its manifest (``grown.json``: copies, σ, statistics, timings).

    Raises
    ------
    ValueError
        The source home has no release, or no ``chunk_vectors`` rows.
    """
    release = source.catalog.current_release()
    if release is None:
        raise ValueError(f"{source.root} has no release")
    manifest_path = directory / "grown.json"
    key = grown_key(release.manifest, target_rows, seed)
    if manifest_path.exists():
        done = json.loads(manifest_path.read_text())
        if done.get("key") == key and done.get("complete"):
            log(f"reusing the grown home {directory / 'home'}")
            return done
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    started = time.perf_counter()
    parses = sorted({m["parse_id"] for m in release.manifest["sources"].values()})
    versions = release.manifest["tables"]
    source_vectors = source.tables.read_active("chunk_vectors", versions["chunk_vectors"], parses,
                                               ["chunk_id", "vector"])
    n = source_vectors.num_rows
    if n == 0:
        raise ValueError(f"{source.root}: its release has no chunk_vectors rows")
    copies = math.ceil(target_rows / n)
    sigma, c_nn = calibrate_sigma(_matrix(source_vectors.column("vector")), seed)
    del source_vectors
    log(f"growing {n:,} vectors × {copies} copies; σ = {sigma:.4f} (median nearest-other cosine {c_nn:.4f})")
    home = FabricHome(directory / "home")
    rows: dict[str, pa.Table] = {name: source.tables.read_active(name, versions.get(name), parses,
                                                                  TABLES[name].names) for name in GROWN_TABLES}
    sources: dict[str, dict] = {}
    per_parse: dict[str, dict[str, str]] = {t: {} for t in VECTOR_TABLES}
    all_parses: list[str] = []
    for copy in range(copies):
        new_parses = [derived_id(p, copy) for p in parses]
        all_parses += new_parses
        for name in GROWN_TABLES:
            grown = _copy_rows(name, rows[name], copy, sigma, seed)
            home.tables.replace_partitions(name, new_parses, grown)
            if name in VECTOR_TABLES and grown.num_rows:
                per_parse[name].update(parse_digests(grown.column("parse_id"), grown.column("chunk_id"),
                                                     grown.column("model"), _matrix(grown.column("vector"))))
        for key_, meta in release.manifest["sources"].items():
            scheme, _, rest = key_.partition(":")
            sources[key_ if copy == 0 else f"{scheme}:copy-{copy}/{rest}"] = {**meta, "parse_id":
                                                                               derived_id(meta["parse_id"], copy)}
        log(f"  copy {copy + 1}/{copies} written")
    tables = {name: home.tables.version(name) for name in TABLES}
    log("building the lexical generation of the grown release")
    t = time.perf_counter()
    generation = home.lexical.build_fresh(pinned_index_documents(home, all_parses, tables))
    lexical_s = time.perf_counter() - t
    manifest = {
        "schema_version": SCHEMA_VERSION, "config_hash": config_hash(home.config), "sources": sources,
        "tables": tables, "lexical_generation": generation,
        VECTOR_DIGESTS: {t: table_digest(per_parse[t], all_parses) for t in VECTOR_TABLES},
        DENSE_INDEXES: {}, "grown": {"from": str(source.root), "release": release.release_id, "copies": copies},
    }
    published = home.catalog.publish_release(manifest, expected_current=None)
    log("measuring the nearest-other cosine on the grown table")
    grown_nn = _grown_statistic(home, published.manifest, seed)
    done = {
        "key": key, "format": GROWTH_FORMAT, "source_home": str(source.root), "source_release": release.release_id,
        "source_rows": n, "target_rows": target_rows, "copies": copies, "seed": seed, "sigma": round(sigma, 6),
        "source_median_nearest_cosine": round(c_nn, 4), "grown_median_nearest_cosine": round(grown_nn, 4),
        "rows": {t: home.tables.count_rows(t, tables[t]) for t in GROWN_TABLES},
        "lexical_seconds": round(lexical_s, 1), "grow_seconds": round(time.perf_counter() - started, 1),
        "release_id": published.release_id, "home": str(home.root), "complete": True,
    }
    manifest_path.write_text(json.dumps(done, indent=2))
    return done


def _grown_statistic(home: FabricHome, manifest: dict, seed: int, samples: int = 500) -> float:
    """The median nearest-other cosine of ``samples`` seeded rows of the grown ``chunk_vectors``
    table within the whole table (streamed)."""
    ds = home.tables.dataset("chunk_vectors", manifest["tables"]["chunk_vectors"])
    n = ds.count_rows()
    picked = np.sort(np.random.default_rng(seed + 1).choice(n, size=min(samples, n), replace=False))
    sample = _matrix(ds.take(picked.tolist(), columns=["vector"]).column("vector"))
    best = np.full(len(sample), -1.0, dtype=np.float32)
    for batch in ds.to_batches(columns=["vector"], batch_size=65_536):
        best = np.maximum(best, nearest_other_cosines(sample, _matrix(pa.chunked_array([batch.column(0)]))))
    return float(np.median(best))


def lexical_layout(home_dir: Path, segment_documents: int | None, log: Log = _quiet) -> dict:
    """Make the grown release's lexical generation one of segments of at most ``segment_documents``
    documents (None: the product's :data:`~fabric_resources.lexical_segments.MAX_SEGMENT_DOCUMENTS`),
    building it from the pinned rows and publishing it as a new release when the current one was
    built otherwise; return ``max_segment_documents``, ``segments`` and the build ``seconds`` (0
    when it was already so)."""
    from fabric_resources.lexical_index import META_FILE, LexicalIndex
    from fabric_resources.lexical_segments import MAX_SEGMENT_DOCUMENTS

    want = segment_documents or MAX_SEGMENT_DOCUMENTS
    home = FabricHome(home_dir)
    current = home.catalog.current_release()
    gen = current.manifest["lexical_generation"]
    meta = json.loads((home.lexical.root / gen / META_FILE).read_text())
    seconds = 0.0
    if meta.get("max_segment_documents") != want:
        log(f"building the lexical generation with segments of at most {want:,} documents")
        t = time.perf_counter()
        parses = sorted({m["parse_id"] for m in current.manifest["sources"].values()})
        gen = LexicalIndex(home.lexical.root, max_segment_documents=want).build_fresh(
            pinned_index_documents(home, parses, current.manifest["tables"]))
        seconds = time.perf_counter() - t
        manifest = {k: v for k, v in current.manifest.items() if k not in ("release_id", "created_at")}
        manifest["lexical_generation"] = gen
        home.catalog.publish_release(manifest, expected_current=current.release_id)
        home.lexical.remove_generations({gen})
    segments = len(json.loads((home.lexical.root / gen / "meta.json").read_text())["segments"])
    return {"max_segment_documents": want, "segments": segments, "seconds": round(seconds, 1)}


def configure(home_dir: Path, dense_search: dict) -> None:
    """Write the grown home's ``config.json``: only ``query.dense_search`` differs from the default."""
    (home_dir / "config.json").write_text(json.dumps({"query": {"dense_search": dense_search}}, indent=2))


def build_release_index(home_dir: Path, dense_search: dict, log: Log = _quiet) -> dict:
    """Configure ``dense_search`` (mode ``ann``), build the current release's dense indexes with
    activation's step and publish them as a new release; return the ``chunk_vectors`` record (its
    ``build_seconds``: the index's own build), ``seconds`` (the whole step: reading the pinned rows
    and checking their digest too, or next to nothing when activation reuses an index whose rows
    and settings are unchanged) and ``bytes`` (the generation on disk)."""
    configure(home_dir, {**dense_search, "mode": "ann"})
    home = FabricHome(home_dir)
    current = home.catalog.current_release()
    active = sorted({m["parse_id"] for m in current.manifest["sources"].values()})
    t = time.perf_counter()
    records = dense_index_records(home, current.manifest["tables"], active, current.manifest[VECTOR_DIGESTS],
                                  current.manifest.get(DENSE_INDEXES),
                                  vector_parse_digests=current.manifest.get(VECTOR_PARSE_DIGESTS))
    seconds = time.perf_counter() - t
    manifest = {k: v for k, v in current.manifest.items() if k not in ("release_id", "created_at")}
    manifest[DENSE_INDEXES] = records
    home.catalog.publish_release(manifest, expected_current=current.release_id)
    record = records["chunk_vectors"]
    path = home.dense_indexes.path("chunk_vectors", record["generation"])
    size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    log(f"  index {record['spec']['index_type']}: {record['rows']:,} rows, built in {seconds:.1f} s, "
        f"{size / 2**20:.0f} MB on disk")
    return {"record": record, "seconds": round(seconds, 1), "bytes": size}


def run_query_process(home_dir: Path, queries: list[str], repeat: int, out: Path, exact: Path | None = None,
                      recall_queries: list[str] | None = None, timeout_s: float = 7200) -> dict:
    """:mod:`fabric_assets.measurement.ann_query` in a fresh process; return its JSON without the
    per-query ``rankings`` (they stay in ``out``, where recall is computed from them).

    Raises
    ------
    RuntimeError
        If the process fails (its stderr tail is in the message).
    """
    from fabric_assets.measurement.bench_query import run_module_process

    args = ["--home", str(home_dir), "--repeat", str(repeat), "--out", str(out)]
    if exact is not None:
        args += ["--exact", str(exact)]
    if recall_queries:
        rfile = out.with_suffix(".recall-queries.json")
        rfile.write_text(json.dumps(recall_queries), encoding="utf-8")
        args += ["--recall-queries", str(rfile)]
    run_module_process("fabric_assets.measurement.ann_query", queries, args, timeout_s)
    result = json.loads(out.read_text())
    result.pop("rankings", None)
    return result


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def bench_ann(source_home: Path, work_dir: Path, queries: list[str], *, target_rows: int = 1_000_000,
              settings: list[dict] | None = None, repeat: int = 3, seed: int = 0, source_default: bool = True,
              recall_queries: list[str] | None = None, lexical_segment_documents: int | None = None,
              log: Log = _quiet) -> dict:
    """Steps 2-4 of the module docstring on ``source_home``; ``settings``: one ``query.dense_search``
    dict per ANN setting measured (default: the configuration's defaults); ``recall_queries``:
    further queries whose rankings are compared but not timed; ``lexical_segment_documents``: the
    grown release's lexical layout (:func:`lexical_layout`; default the product's). Returns
    everything as JSON-ready data, with ``ratios`` (ANN / exact, same run) per setting."""
    from fabric_assets.measurement.bench_query import machine

    source = FabricHome(source_home)
    grown = grow_home(source, work_dir / f"grown-{target_rows}", target_rows, seed, log)
    home_dir = Path(grown["home"])
    layout = lexical_layout(home_dir, lexical_segment_documents, log)
    results: dict = {"benchmark": "ann", "machine": machine(), "load_average_before": list(os.getloadavg()),
                     "grown": grown, "lexical_layout": layout, "repeat": repeat, "queries": len(queries)}
    if source_default:
        log("source home, default configuration")
        results["source_default"] = run_query_process(source_home, queries, repeat, work_dir / "source-default.json")
    log("grown home, exact product (baseline)")
    configure(home_dir, {"mode": "exact"})
    exact_file = work_dir / "exact.json"
    exact = run_query_process(home_dir, queries, repeat, exact_file, recall_queries=recall_queries)
    results["exact"] = exact
    results["ann"] = []
    for i, setting in enumerate(settings or [{}]):
        log(f"grown home, ANN setting {i + 1}: {setting or 'defaults'}")
        built = build_release_index(home_dir, setting, log)
        measured = run_query_process(home_dir, queries, repeat, work_dir / f"ann-{i}.json", exact_file, recall_queries)
        ratios = {}
        for route, fig in measured["end_to_end_ms"].items():
            ref = exact["end_to_end_ms"].get(route, {})
            ratios[route] = {"end_to_end_p50": _ratio(fig.get("p50"), ref.get("p50")),
                             "end_to_end_p95": _ratio(fig.get("p95"), ref.get("p95"))}
            dense_stage = "dense" if route == "english" else "dense_multilingual"
            got, want = measured["stages_ms"][route].get(dense_stage, {}), exact["stages_ms"][route].get(dense_stage, {})
            ratios[route]["dense_p50"] = _ratio(got.get("p50"), want.get("p50"))
            ratios[route]["dense_p95"] = _ratio(got.get("p95"), want.get("p95"))
        ratios["rss"] = _ratio(measured["rss_mb"], exact["rss_mb"])
        results["ann"].append({"setting": setting, "build": built, "result": measured, "ratios": ratios})
    results["load_average_after"] = list(os.getloadavg())
    return results


def summary_rows(result: dict) -> list[dict[str, str]]:
    """One row per configuration and route: end-to-end and dense-stage p50/p95, recall, RSS."""
    rows = []

    def add(name: str, r: dict, build: dict | None = None) -> None:
        for route, e2e in r["end_to_end_ms"].items():
            stage = r["stages_ms"][route].get("dense" if route == "english" else "dense_multilingual", {})
            rec = (r.get("recall") or {}).get(route, {})
            rows.append({
                "run": name, "chunks": f"{r['chunks']:,}", "route": route,
                "source": ",".join(r["sources"].get(route, [])) or "-",
                "hybrid p50": f"{e2e['p50']:.1f}", "hybrid p95": f"{e2e['p95']:.1f}",
                "dense p50": f"{stage['p50']:.1f}" if stage else "", "dense p95": f"{stage['p95']:.1f}" if stage else "",
                "recall@10": f"{rec['recall@10']['mean']:.4f}" if "recall@10" in rec else "",
                "recall@100": f"{rec['recall@100']['mean']:.4f}" if "recall@100" in rec else "",
                "RSS MB": f"{r['rss_mb']:.0f}",
                "index build s": f"{build['record']['build_seconds']:.0f}" if build else "",
            })

    if "source_default" in result:
        add("source, default", result["source_default"])
    add("grown, exact", result["exact"])
    for i, a in enumerate(result["ann"]):
        add(f"grown, ann {i + 1} ({a['build']['record']['spec']['index_type']})", a["result"], a["build"])
    return rows
