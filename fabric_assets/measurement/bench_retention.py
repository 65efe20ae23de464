"""``fabric bench retention``: bounded disk. Ingest a corpus, edit every text file N times with a
re-ingest after each round, let the cleanup after activation run, and compare the home's size
with a fresh ingest of the final state (issue 18's target: at most 1.3x).

The edited home runs with ``retention = {releases: 1, release_days: 0, superseded_days: 0, failed_days: 0,
deleted_days: 0, runs_days: 0}`` (what the target is about: nothing older than the current release kept); the
fresh home with the same section. Sizes are bytes of regular files, per area of the home.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from fabric_assets.ingest import ingest
from fabric_resources.home import FabricHome

TEXT_SUFFIXES = (".txt", ".md")
RETENTION = {"releases": 1, "release_days": 0, "superseded_days": 0, "failed_days": 0, "deleted_days": 0,
             "runs_days": 0}
#: Issue 18: the edited home's size at most this multiple of a fresh ingest of its final state.
TARGET_RATIO = 1.3


def _edit_line(data: bytes, round_: int) -> bytes:
    """An ASCII line in the file's own encoding (UTF-16 when it starts with a BOM; ASCII bytes are
    the same in UTF-8, Shift_JIS, GB18030 and windows-1252)."""
    line = f"\n\nRevision {round_ + 1}: the archivist checked this file again.\n"
    if data.startswith(b"\xff\xfe"):
        return line.encode("utf-16-le")
    if data.startswith(b"\xfe\xff"):
        return line.encode("utf-16-be")
    return line.encode("ascii")


def home_sizes(root: Path) -> dict[str, int]:
    """Bytes of regular files under ``root``, by top-level entry (``catalog`` = the SQLite files)."""
    sizes: dict[str, int] = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            top = path.relative_to(root).parts[0]
            area = "catalog" if top.startswith("catalog.sqlite3") else top
            sizes[area] = sizes.get(area, 0) + path.stat().st_size
    sizes["total"] = sum(sizes.values())
    return sizes


def _ingest(folder: Path, home_dir: Path) -> None:
    home_dir.mkdir(parents=True, exist_ok=True)
    (home_dir / "config.json").write_text(json.dumps({"retention": RETENTION}))
    summary = ingest(folder, FabricHome(home_dir))
    if summary.failed_runs:
        raise RuntimeError(f"Dagster runs failed: {summary.failed_runs}")


def bench_retention(corpus: Path, edits: int = 5, work_dir: Path | None = None) -> dict:
    """Run the measurement (see the module docstring); return sizes, the ratio and the target."""
    scratch = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="fabric-retention-"))
    try:
        held = scratch / "held" / corpus.name
        shutil.copytree(corpus, held, symlinks=True)
        texts = sorted(p for p in held.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
        _ingest(held, scratch / "held-home")
        for round_ in range(edits):
            for path in texts:
                data = path.read_bytes()
                path.write_bytes(data + _edit_line(data, round_))
            _ingest(held, scratch / "held-home")
        fresh = scratch / "fresh" / corpus.name
        shutil.copytree(held, fresh, symlinks=True)
        _ingest(fresh, scratch / "fresh-home")
        edited, fresh_sizes = home_sizes(scratch / "held-home"), home_sizes(scratch / "fresh-home")
        ratio = edited["total"] / fresh_sizes["total"]
        data_areas = [a for a in edited if a not in ("total", "dagster")]
        data_ratio = sum(edited[a] for a in data_areas) / sum(fresh_sizes.get(a, 0) for a in data_areas)
        return {"corpus": str(corpus), "text_files_edited": len(texts), "edits_per_file": edits,
                "edited_home_bytes": edited, "fresh_home_bytes": fresh_sizes, "ratio": round(ratio, 3),
                "ratio_without_dagster": round(data_ratio, 3), "target_ratio": TARGET_RATIO}
    finally:
        if work_dir is None:
            shutil.rmtree(scratch, ignore_errors=True)


def retention_rows(result: dict) -> list[dict[str, str]]:
    areas = sorted(set(result["edited_home_bytes"]) | set(result["fresh_home_bytes"]), key=lambda a: a == "total")
    return [{"area": a, "edited home (bytes)": f"{result['edited_home_bytes'].get(a, 0):,}",
             "fresh ingest (bytes)": f"{result['fresh_home_bytes'].get(a, 0):,}"} for a in areas]
