"""``fabric bench ingest``: ingest figures against a bare encode in the same process.

Prints documents, units, chunks; wall time split by Dagster step and the
orchestration overhead (run wall time minus the steps); embedding
throughput; the ratio of the whole ingest to a bare ``encode`` of the same
chunk texts with the same (already loaded) model in the same run; per
format (parser), pages and units per second of a parse of each file with the
home's parser settings (PDFs in their child process, as the ingest runs them)
and the share of the ingest's wall time those parses make up; peak RSS.
Times are measured, never asserted.
"""

from __future__ import annotations

import random
import resource
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fabric_assets.dense.assets import passage_input, routed_to_multilingual
from fabric_assets.ingest import dagster_instance, ingest
from fabric_assets.measurement.bench_formats import parse_throughput
from fabric_resources.parsing.document import ParseError
from fabric_resources.parsing.text.parser import decode_text
from fabric_resources.home import FabricHome
from fabric_resources.models.embedder import shared_embedder
from fabric_resources.models.multilingual import shared_multilingual_embedder


@dataclass
class IngestBench:
    source: str
    documents_active: int
    documents_failed: int
    units: int
    chunks: int
    ingest_seconds: float
    step_seconds: dict[str, float] = field(default_factory=dict)
    orchestration_seconds: float = 0.0
    embed_texts_per_second: float = 0.0
    bare_encode_seconds: float = 0.0
    ratio_ingest_to_bare_encode: float = 0.0
    peak_rss_mb: float = 0.0
    #: Parser name → files, failed, pages, units, parse_s, pages_per_s, units_per_s
    #: (:func:`fabric_assets.measurement.bench_formats.parse_throughput`).
    formats: dict[str, dict[str, float]] = field(default_factory=dict)
    #: Sum of ``formats[*].parse_s`` over ``ingest_seconds``; and the Dagster step that parses
    #: (``units_and_relationships``: parse, unit rows, language, write) over ``ingest_seconds``.
    parse_share_of_ingest: float = 0.0
    units_step_share_of_ingest: float = 0.0


def split_corpus(source: Path, target: Path, n_files: int, seed: int = 0) -> Path:
    """Write ``n_files`` files of 2–8 KB of real text cut from the text files under ``source``.

    Every file is distinct (cut at different offsets), so content-hash dedup
    does not collapse them. Only plain-text sources are used.
    """
    rng = random.Random(seed)
    texts = []
    for p in sorted(source.rglob("*.txt")):
        try:
            texts.append(decode_text(p.read_bytes())[0])
        except ParseError:  # an undecodable file simply contributes nothing
            continue
    pool = "\n\n".join(texts)
    if len(pool) < 10_000:
        raise ValueError(f"not enough text under {source} to cut {n_files} files")
    target.mkdir(parents=True, exist_ok=True)
    for i in range(n_files):
        size = rng.randint(2_000, 8_000)
        start = rng.randrange(0, max(1, len(pool) - size))
        chunk = pool[start:start + size]
        (target / f"doc-{i:05d}.txt").write_text(f"[{i}]\n\n{chunk}", encoding="utf-8")
    return target


def bench_ingest(path: Path, *, split: int | None = None) -> IngestBench:
    """Ingest ``path`` (or ``split`` files cut from it) into a scratch home and measure."""
    scratch = Path(tempfile.mkdtemp(prefix="fabric-bench-"))
    try:
        source = split_corpus(path, scratch / "docs", split) if split else path
        home = FabricHome(scratch / "home")
        embedder = shared_embedder(home.config.dense.batch_size)
        embedder.encode_passages(["warm-up"])  # model load is not part of either side
        started = time.perf_counter()
        summary = ingest(source, home)
        ingest_s = time.perf_counter() - started

        instance = dagster_instance(home)
        steps: dict[str, float] = {}
        run_wall = 0.0
        for run_id in [*summary.run_ids, summary.activation_run_id]:
            stats = instance.get_run_stats(run_id)
            run_wall += (stats.end_time or 0) - (stats.start_time or 0)
            for s in instance.get_run_step_stats(run_id):
                steps[s.step_key] = steps.get(s.step_key, 0.0) + (s.end_time or 0) - (s.start_time or 0)

        release = home.catalog.current_release()
        parses = sorted({m["parse_id"] for m in release.manifest["sources"].values()}) if release else []
        units = home.tables.read("units", parse_ids=parses, columns=["unit_id"]).num_rows
        chunks = home.tables.read("chunks", parse_ids=parses, columns=["text", "section_path"]).to_pydict()
        texts = [passage_input(sp, t) for sp, t in zip(chunks["section_path"], chunks["text"])]
        routed = [routed_to_multilingual(home, t) for t in chunks["text"]]
        t0 = time.perf_counter()
        embedder.encode_passages([t for t, r in zip(texts, routed) if not r])
        if any(routed):
            shared_multilingual_embedder().encode_passages([t for t, r in zip(texts, routed) if r])
        bare = time.perf_counter() - t0
        failed = sum(1 for r in home.catalog.parse_runs() if r.status == "failed")
        formats = {} if split else parse_throughput(path, home.config.parsers)
        parse_s = sum(row["parse_s"] for row in formats.values())
        units_step = sum(v for k, v in steps.items() if k.startswith("units_and_relationships"))
        return IngestBench(
            source=str(path) + (f" split into {split} files" if split else ""),
            documents_active=len(release.manifest["sources"]) if release else 0,
            documents_failed=failed,
            units=units,
            chunks=len(texts),
            ingest_seconds=round(ingest_s, 2),
            step_seconds={k: round(v, 2) for k, v in sorted(steps.items())},
            orchestration_seconds=round(ingest_s - sum(steps.values()), 2),
            embed_texts_per_second=round(
                len(texts) / (steps.get("chunk_vectors", 0) + steps.get("chunk_vectors_multilingual", 0)), 1
            ) if steps.get("chunk_vectors") else 0.0,
            bare_encode_seconds=round(bare, 2),
            ratio_ingest_to_bare_encode=round(ingest_s / bare, 3) if bare > 0 else 0.0,
            peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            formats=formats,
            parse_share_of_ingest=round(parse_s / ingest_s, 3) if formats and ingest_s else 0.0,
            units_step_share_of_ingest=round(units_step / ingest_s, 3) if ingest_s else 0.0,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def as_dict(result: IngestBench) -> dict:
    return asdict(result)
