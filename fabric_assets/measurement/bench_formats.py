"""Parse throughput per format: pages (PDF), slides (PPTX) or files per second, in-process and in
the bounded child process, over a folder such as ``../shared/corpus/formats``.

Run: ``.venv/bin/python -m fabric_assets.measurement.bench_formats ../shared/corpus/formats``. Each file is parsed
``--repeat`` times per mode (default 3); the figure is the median wall time.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from fabric_resources.config import IsolationConfig, ParserConfig
from fabric_resources.parsing.document import ParseError
from fabric_resources.parsing.registry import detect_media_type, parser_for


def _in_process(config: ParserConfig) -> ParserConfig:
    sections = {}
    for name in ("pdf", "docx", "pptx", "html"):
        section = getattr(config, name)
        sections[name] = section.model_copy(update={"isolation": IsolationConfig(mode="in-process")})
    return config.model_copy(update=sections)


def parse_throughput(root: Path, config: ParserConfig) -> dict[str, dict[str, float]]:
    """Per parser, each file under ``root`` parsed once with ``config`` (as an ingest parses it:
    PDFs in the child process by default): files, failed, pages (PDF pages, PPTX slides, else
    files), units, parse seconds (wall), pages/s and units/s. Files no parser takes are skipped.
    """
    out: dict[str, dict[str, float]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        media_type = detect_media_type(path.name)
        spec = parser_for(media_type)
        if spec is None:
            continue
        data = path.read_bytes()
        row = out.setdefault(spec.name, {"files": 0, "failed": 0, "pages": 0, "units": 0, "parse_s": 0.0})
        row["files"] += 1
        start = time.perf_counter()
        try:
            doc = spec.run(data, config, media_type)
        except ParseError:
            row["failed"] += 1
            doc = None
        row["parse_s"] += time.perf_counter() - start
        if doc is not None:
            row["pages"] += doc.metadata.get("pages") or doc.metadata.get("slides") or 1
            row["units"] += len(doc.units)
    for row in out.values():
        row["pages_per_s"] = round(row["pages"] / row["parse_s"], 1) if row["parse_s"] else 0.0
        row["units_per_s"] = round(row["units"] / row["parse_s"], 1) if row["parse_s"] else 0.0
        row["parse_s"] = round(row["parse_s"], 3)
    return out


def bench_formats(root: Path, repeat: int = 3) -> dict[str, dict[str, float]]:
    """Per parser: files, pages (PDF pages, PPTX slides, else files), seconds and pages/s per mode."""
    child_cfg = ParserConfig()
    modes = {"child": child_cfg, "in-process": _in_process(child_cfg)}
    out: dict[str, dict[str, float]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        spec = parser_for(detect_media_type(path.name))
        if spec is None or spec.name in ("text", "epub"):
            continue
        data = path.read_bytes()
        row = out.setdefault(spec.name, {"files": 0, "pages": 0})
        row["files"] += 1
        for mode, cfg in modes.items():
            times = []
            pages = 1
            for _ in range(repeat):
                start = time.perf_counter()
                try:
                    doc = spec.run(data, cfg, detect_media_type(path.name))
                    pages = doc.metadata.get("pages") or doc.metadata.get("slides") or 1
                except ParseError:
                    pass
                times.append(time.perf_counter() - start)
            row[f"{mode}_s"] = row.get(f"{mode}_s", 0.0) + statistics.median(times)
            if mode == "child":
                row["pages"] += pages
    for row in out.values():
        for mode in modes:
            row[f"{mode}_pages_per_s"] = round(row["pages"] / row[f"{mode}_s"], 1)
            row[f"{mode}_s"] = round(row[f"{mode}_s"], 3)
    return out


if __name__ == "__main__":
    print(json.dumps(bench_formats(Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/corpus/formats")), indent=1))
