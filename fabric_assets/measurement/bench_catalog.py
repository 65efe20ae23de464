"""``fabric bench catalog``: what ``synchronous=FULL`` costs the SQLite catalog against NORMAL.

Both modes run in one process, alternating, on fresh catalogs in one scratch folder (the same
file system). Two measurements:

* **write paths**: the catalog's own methods as an ingest of ``parses`` new files calls them:
  one immediate transaction per file as the source scan writes it (parse run, source row,
  acquisition, event), status updates in batches of 50 (one per asset run), one gate-verdict
  merge with a release publish. The two modes run on a catalog each, interleaved commit by
  commit, so load from elsewhere slows both alike: the median milliseconds of each kind of
  transaction (connection included) and the seconds per phase;
* **ingest** (unless ``ingest`` is None): a real in-process ``fabric ingest`` of a small folder
  (default: the sample corpus) into a fresh home per mode, after one warm-up ingest that loads the
  models; its seconds and the catalog commits it made (counted by wrapping
  ``SqliteCatalog.transaction``).

Ingest seconds are medians over ``repeat`` rounds; every ratio is FULL / NORMAL. On a loaded
machine an ingest's wall time varies more than FULL can cost it, so the bench also gives the
estimate ``catalog commits of the ingest x extra milliseconds per scan commit``.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fabric_resources.catalog import SourceRow, SqliteCatalog, StatusUpdate, merge_verdicts

MODES = ("NORMAL", "FULL")
_STATUS_BATCH = 50


@contextmanager
def _mode(mode: str) -> Iterator[dict[str, int]]:
    """Every SqliteCatalog of this process in ``mode``, its commits counted, while the block runs."""
    counts = {"commits": 0}
    saved_mode, saved_transaction = SqliteCatalog.synchronous, SqliteCatalog.transaction

    @contextmanager
    def counted(self, immediate: bool = False):
        with saved_transaction(self, immediate) as con:
            yield con
        counts["commits"] += 1

    SqliteCatalog.synchronous, SqliteCatalog.transaction = mode, counted  # type: ignore[method-assign]
    try:
        yield counts
    finally:
        SqliteCatalog.synchronous, SqliteCatalog.transaction = saved_mode, saved_transaction  # type: ignore[method-assign]


def _scan_one(catalog: SqliteCatalog, root_id: int, label: str, i: int, now: float) -> None:
    """What the source scan commits for one new file: one immediate transaction."""
    pid = f"{i:016x}"
    key = f"{label}/doc-{i}.txt"
    with catalog.transaction(immediate=True) as con:
        catalog.ensure_parse_run(con, parse_id=pid, source_hash=pid * 4, media_type="text/plain",
                                 parser_name="text", parser_version="1", parser_config_hash="c")
        catalog.upsert_source(con, SourceRow(key, root_id, f"doc-{i}.txt", "present", "text/plain",
                                             1_733_000_000_000_000_000 + i, 1000, pid * 4, pid, now, now))
        catalog.record_acquisition(con, key, pid * 4, 1_733_000_000_000_000_000 + i, 1000)
        catalog.log_event(con, "source-added", source_key=key, parse_id=pid)


def _write_paths(folder: Path, parses: int) -> dict[str, dict[str, list[float]]]:
    """One round of the write paths on a fresh catalog per mode in ``folder``, the two modes
    interleaved commit by commit (a noisy machine then slows both alike); seconds per sample."""
    saved = SqliteCatalog.synchronous
    catalogs, roots = {}, {}
    for mode in MODES:
        SqliteCatalog.synchronous = mode
        (folder / mode).mkdir(parents=True)
        catalogs[mode] = SqliteCatalog(folder / mode / "catalog.sqlite3")
        roots[mode] = catalogs[mode].register_root(folder / mode)
    samples: dict[str, dict[str, list[float]]] = {m: {"scan": [], "status": [], "activate": []} for m in MODES}
    ids = [f"{i:016x}" for i in range(parses)]
    now = time.time()

    def timed(phase: str, n: int, step) -> None:
        for mode in MODES if n % 2 == 0 else MODES[::-1]:
            SqliteCatalog.synchronous = mode
            started = time.perf_counter()
            step(catalogs[mode], mode)
            samples[mode][phase].append(time.perf_counter() - started)

    try:
        for i in range(parses):
            timed("scan", i, lambda c, m: _scan_one(c, roots[m].root_id, roots[m].label, i, now))
        batches = [ids[b:b + _STATUS_BATCH] for b in range(0, parses, _STATUS_BATCH)]
        for n, (status, batch) in enumerate((s, b) for s in ("parsed", "ready") for b in batches):
            timed("status", n, lambda c, m: c.set_parse_statuses(
                [StatusUpdate(pid, status, counts={"units": 3}) for pid in batch]))
        timed("activate", 0, lambda c, m: (
            merge_verdicts(c, {pid: {"units_cover_text": {"passed": True, "detail": ""}} for pid in ids}),
            c.publish_release({"parse_ids": ids, "sources": {}, "tables": {}}, None), c.set_state("last_scan", {"at": now, "changes": parses})))
    finally:
        SqliteCatalog.synchronous = saved
    return samples


def _ingest(corpus: Path, home_dir: Path) -> float:
    from fabric_assets.ingest import ingest
    from fabric_resources.home import FabricHome

    home_dir.mkdir(parents=True)
    os.environ["FABRIC_HOME"] = str(home_dir)
    os.environ["DAGSTER_HOME"] = str(home_dir / "dagster")
    started = time.perf_counter()
    summary = ingest(corpus, FabricHome(home_dir))
    seconds = time.perf_counter() - started
    if summary.failed_runs:
        raise RuntimeError(f"Dagster runs failed: {summary.failed_runs}")
    return seconds


def bench_catalog(parses: int = 500, repeat: int = 3, ingest: Path | None = None,
                  work_dir: Path | None = None) -> dict:
    """Run the measurement (see the module docstring); return the figures per mode and the ratios.

    ``work_dir`` is where the scratch catalogs go (default: the system's temporary folder); fsync
    costs what that file system's device charges, so measure where homes live.
    """
    with tempfile.TemporaryDirectory(prefix="fabric-bench-catalog-", dir=work_dir) as tmp:
        scratch = Path(tmp)
        samples: dict[str, dict[str, list[float]]] = {m: {"scan": [], "status": [], "activate": []} for m in MODES}
        for r in range(repeat):
            for mode, phases in _write_paths(scratch / f"paths-{r}", parses).items():
                for phase, xs in phases.items():
                    samples[mode][phase] += xs
        paths = {m: {**{f"{phase}_median_ms": round(1000 * statistics.median(xs), 3) for phase, xs in ph.items()},
                     **{f"{phase}_s": round(sum(xs) / repeat, 4) for phase, xs in ph.items()}}
                 for m, ph in samples.items()}
        for m in MODES:
            paths[m]["total_s"] = round(sum(paths[m][f"{p}_s"] for p in ("scan", "status", "activate")), 4)
        full_extra_ms = paths["FULL"]["scan_median_ms"] - paths["NORMAL"]["scan_median_ms"]
        result: dict = {"parses": parses, "repeat": repeat, "write_paths": paths,
                        "write_paths_ratio": round(paths["FULL"]["total_s"] / paths["NORMAL"]["total_s"], 3),
                        "scan_commit_median_ratio": round(paths["FULL"]["scan_median_ms"]
                                                          / paths["NORMAL"]["scan_median_ms"], 3),
                        "full_extra_ms_per_commit": round(full_extra_ms, 3)}
        if ingest is not None:
            _ingest(ingest, scratch / "warm-up")  # loads the models once for both modes
            seconds: dict[str, list[float]] = {m: [] for m in MODES}
            ingest_commits: dict[str, int] = {}
            for r in range(repeat):
                for mode in MODES if r % 2 == 0 else MODES[::-1]:
                    with _mode(mode) as counted:
                        seconds[mode].append(_ingest(ingest, scratch / f"home-{mode}-{r}"))
                    ingest_commits[mode] = counted["commits"]
            result["ingest"] = {m: {"seconds": round(statistics.median(seconds[m]), 3),
                                    "all_seconds": [round(s, 2) for s in seconds[m]],
                                    "catalog_commits": ingest_commits[m]} for m in MODES}
            result["ingest_ratio"] = round(result["ingest"]["FULL"]["seconds"] / result["ingest"]["NORMAL"]["seconds"], 3)
            # The share FULL's fsyncs can take of an ingest: commits x the extra cost per commit.
            result["ingest_full_extra_s_estimate"] = round(
                ingest_commits["FULL"] * result["full_extra_ms_per_commit"] / 1000, 3)
        return result


def catalog_rows(result: dict) -> list[dict[str, str]]:
    keys = ("scan_median_ms", "status_median_ms", "activate_median_ms", "scan_s", "status_s", "activate_s", "total_s")
    rows = [{"measure": f"write paths ({result['parses']} parses): {k}",
             **{m: str(result["write_paths"][m][k]) for m in MODES}} for k in keys]
    if "ingest" in result:
        rows += [{"measure": f"ingest: {k}", **{m: str(result["ingest"][m][k]) for m in MODES}}
                 for k in ("seconds", "all_seconds", "catalog_commits")]
    return rows
