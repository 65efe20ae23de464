"""``fabric bench walk``: what the scan's walk of a source tree costs, and its Fabric-home check.

A scratch tree of ``folders`` folders (a hundred per parent, one small file each) is walked by the
scan's own walker (``fabric_assets.sources.walk.walk``), alternately as it is and with the
check that skips another Fabric home inside a root replaced by a constant, ``repeat`` times each in
one process (the machine's noise hits both alike); the best time of each is reported, and the ratio.
A no-change rescan of a large tree is mostly this walk.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class WalkFigures:
    folders: int
    files: int
    repeat: int
    with_check_ms: float
    without_check_ms: float

    @property
    def ratio(self) -> float:
        return self.with_check_ms / self.without_check_ms if self.without_check_ms else float("nan")

    @property
    def per_folder_us(self) -> float:
        return (self.with_check_ms - self.without_check_ms) * 1000 / self.folders


def bench_walk(folders: int = 20_000, repeat: int = 5, work_dir: Path | None = None) -> WalkFigures:
    """Build the tree under ``work_dir`` (default: a scratch folder, removed after) and time the walk."""
    from fabric_assets.sources import walk as walker

    root = Path(tempfile.mkdtemp(prefix="fabric-bench-walk-", dir=work_dir))
    try:
        for i in range(folders):
            d = root / f"p{i // 100}" / f"f{i}"
            d.mkdir(parents=True, exist_ok=True)
            (d / "note.txt").write_text("x")

        class Report:  # what the walk records skips on
            skipped_symlinks = 0
            skipped_names: list = []

        def timed_walk() -> tuple[float, int]:
            started = time.perf_counter()
            n = sum(1 for _ in walker.walk(root, True, Report(), lambda *_: None, str(root / "no-home")))
            return (time.perf_counter() - started) * 1000, n

        real = walker._lists_a_home
        timed: dict[bool, list[float]] = {True: [], False: []}
        files = 0
        try:
            for _ in range(repeat):
                for check in (True, False):
                    walker._lists_a_home = real if check else (lambda _entries: False)
                    ms, files = timed_walk()
                    timed[check].append(ms)
        finally:
            walker._lists_a_home = real
        return WalkFigures(folders, files, repeat, min(timed[True]), min(timed[False]))
    finally:
        shutil.rmtree(root, ignore_errors=True)


def walk_rows(f: WalkFigures) -> dict:
    return {**asdict(f), "ratio": round(f.ratio, 3), "per_folder_us": round(f.per_folder_us, 2)}
