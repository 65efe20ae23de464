"""``fabric bench catalog``: what ``synchronous=FULL`` costs the SQLite catalog against NORMAL.

Both modes run in one process, alternating, on fresh catalogs in one scratch folder (the same
file system). Two measurements:

* **write paths**: the catalog's own methods as an ingest of ``parses`` new files calls them:
  one immediate transaction per file as the source scan writes it (parse run, source row,
  acquisition, event), status updates in batches of 50 (one per asset run), one gate-verdict
  merge, one release publish. Seconds per phase, commits, milliseconds per commit;
* **ingest** (unless ``ingest`` is None): a real in-process ``fabric ingest`` of a small folder
  (default: the sample corpus) into a fresh home per mode, after one warm-up ingest that loads the
  models; its seconds and the catalog commits it made (counted by wrapping
  ``SqliteCatalog.transaction``).

The figures are medians over ``repeat`` rounds; ``ratio`` is FULL / NORMAL.
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


def _write_paths(folder: Path, parses: int) -> dict[str, float]:
    """One round of the write paths on a fresh catalog in ``folder``; seconds per phase."""
    folder.mkdir(parents=True)
    catalog = SqliteCatalog(folder / "catalog.sqlite3")
    root = catalog.register_root(folder)
    ids = [f"{i:016x}" for i in range(parses)]
    now = time.time()
    out: dict[str, float] = {}
    started = time.perf_counter()
    for i, pid in enumerate(ids):  # the scan: one transaction per new file
        with catalog.transaction(immediate=True) as con:
            catalog.ensure_parse_run(con, parse_id=pid, source_hash=pid * 4, media_type="text/plain",
                                     parser_name="text", parser_version="1", parser_config_hash="c")
            key = f"{root.label}/doc-{i}.txt"
            catalog.upsert_source(con, SourceRow(key, root.root_id, f"doc-{i}.txt", "present", "text/plain",
                                                 1_733_000_000_000_000_000 + i, 1000, pid * 4, pid, now, now))
            catalog.record_acquisition(con, key, pid * 4, 1_733_000_000_000_000_000 + i, 1000)
            catalog.log_event(con, "source-added", source_key=key, parse_id=pid)
    out["scan_s"] = time.perf_counter() - started
    started = time.perf_counter()
    for status in ("parsed", "ready"):  # one batch per asset run
        for b in range(0, parses, _STATUS_BATCH):
            catalog.set_parse_statuses([StatusUpdate(pid, status, counts={"units": 3})
                                        for pid in ids[b:b + _STATUS_BATCH]])
    out["status_s"] = time.perf_counter() - started
    started = time.perf_counter()
    merge_verdicts(catalog, {pid: {"units_cover_text": {"passed": True, "detail": ""}} for pid in ids})
    catalog.publish_release({"parse_ids": ids}, None)
    catalog.set_state("last_scan", {"at": now, "changes": parses})
    out["activate_s"] = time.perf_counter() - started
    out["total_s"] = out["scan_s"] + out["status_s"] + out["activate_s"]
    return out


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
        rounds: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
        commits: dict[str, int] = {}
        for r in range(repeat):
            for mode in MODES if r % 2 == 0 else MODES[::-1]:
                with _mode(mode) as counted:
                    rounds[mode].append(_write_paths(scratch / f"paths-{mode}-{r}", parses))
                commits[mode] = counted["commits"]
        paths = {m: {k: round(statistics.median(x[k] for x in rounds[m]), 4) for k in rounds[m][0]} for m in MODES}
        for m in MODES:
            paths[m]["commits"] = commits[m]
            paths[m]["ms_per_commit"] = round(1000 * paths[m]["total_s"] / commits[m], 3)
        result: dict = {"parses": parses, "repeat": repeat, "write_paths": paths,
                        "write_paths_ratio": round(paths["FULL"]["total_s"] / paths["NORMAL"]["total_s"], 3),
                        "full_extra_ms_per_commit": round(paths["FULL"]["ms_per_commit"]
                                                          - paths["NORMAL"]["ms_per_commit"], 3)}
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
    rows = [{"measure": f"write paths, {result['parses']} parses: {k}",
             **{m: str(result["write_paths"][m][k]) for m in MODES}}
            for k in ("scan_s", "status_s", "activate_s", "total_s", "commits", "ms_per_commit")]
    if "ingest" in result:
        rows += [{"measure": f"ingest: {k}", **{m: str(result["ingest"][m][k]) for m in MODES}}
                 for k in ("seconds", "all_seconds", "catalog_commits")]
    return rows
