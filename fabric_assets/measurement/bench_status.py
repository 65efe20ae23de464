"""``python -m fabric_assets.measurement.bench_status``: what ``fabric status`` costs at many parses.

Ingesting 100k real files through Dagster takes days here (~1.5 s a document on two cores), so
the bench fabricates a home instead, through the same write functions an ingest calls: the
source scan's immediate transactions (:meth:`Catalog.ensure_parse_run`, ``upsert_source``,
``record_acquisition``), status updates in batches (``set_parse_statuses``), gate verdicts
(``merge_verdicts``), each table's partitions (:meth:`TableStore.replace_partitions`, one
commit per batch as a parse run writes them) with the row counts the writers record
(``record_row_counts``), the fragment merge and ``parse_id`` index activation keeps, and one
published release pinning every table and every source. A parse's verdicts and counts have the
shape and size of a real text file's (copied from an ingested home); its rows are few and small
(the audit reads the ``parse_id`` column only). The lexical index is not built (status names it
missing: a few ms).

Timing: :meth:`fabric_query.api.Fabric.status` on a fresh :class:`Fabric` per call (as each CLI
call opens one), the median of ``repeat`` calls, against the same call on the code path status
had before it was made to scale (:func:`reference_path`: every parse run decoded with its
verdicts, the row audit's per-parse lookups), the two alternating in one process so that load
from elsewhere on the machine slows both alike; the ratio is reference / now.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from fabric_resources.catalog import SourceRow, StatusUpdate, merge_verdicts, record_row_counts
from fabric_resources.home import FabricHome
from fabric_resources.schema import TABLES

#: Parses written per batch (one scan transaction, one status update, one table commit each).
BATCH = 5000
#: Rows per parse in each table a text file's parse writes (even parses' chunks go to the English
#: vectors, odd ones' to the multilingual: a mixed corpus).
ROWS = {"units": 3, "relationships": 0, "chunks": 2, "lexical_documents": 2, "chunk_vectors": 2,
        "chunk_vectors_multilingual": 2, "context_windows": 1, "colbert_windows": 1}


def _verdicts(i: int) -> dict:
    """A text file's gate verdicts as an ingest records them (~1 kB of JSON)."""
    d = f"{i:064x}"
    return {
        "chunk_fragments_reproduce_text": {"detail": "2 chunks exact", "passed": True},
        "chunk_ids_are_unique": {"detail": "2 unique", "passed": True},
        "colbert_matrices_are_finite_and_complete": {"detail": "disabled", "passed": True},
        "colbert_windows_cover_chunks": {"detail": "1 windows cover 2 chunks", "passed": True},
        "context_windows_cover_chunks": {"detail": "1 windows cover 2 chunks", "passed": True},
        "multilingual_vectors_are_finite_and_unit_norm": {"detail": "2 ok", "digest": d, "passed": True},
        "one_lexical_document_per_chunk": {"detail": "lexical documents: 0 missing, 0 extra, 2 rows",
                                           "digest": d[:16], "passed": True},
        "source_bytes_match_their_hash": {"detail": "", "passed": True},
        "unit_ids_are_unique": {"detail": "3 unique; ", "passed": True},
        "vectors_are_finite_and_unit_norm": {"detail": "2 ok", "digest": d, "passed": True},
    }


def _rows(name: str, pids: list[str]) -> tuple[pa.Table, dict[str, int]]:
    """Rows of table ``name`` for ``pids`` (every column a constant of its type) and each parse's count."""
    schema = TABLES[name]
    per = {p: ROWS[name] for p in pids}
    if name.startswith("chunk_vectors"):
        odd = name.endswith("multilingual")
        per = {p: (ROWS[name] if (int(p, 16) % 2 == 1) == odd else 0) for p in pids}
    parse_col = [p for p in pids for _ in range(per[p])]
    n = len(parse_col)

    def const(t: pa.DataType):
        if pa.types.is_string(t):
            return "x"
        if pa.types.is_integer(t):
            return 0
        if pa.types.is_fixed_size_list(t):
            return [0.0] * t.list_size
        if pa.types.is_list(t):
            return []
        raise TypeError(t)

    cols = {}
    for f in schema:
        if f.name == "parse_id":
            cols[f.name] = pa.array(parse_col, pa.string())
        elif f.name.endswith("_id"):
            cols[f.name] = pa.array([f"{p}:{k}" for k, p in enumerate(parse_col)], pa.string())
        else:
            cols[f.name] = pa.array([const(f.type)] * n, f.type)
    return pa.table(cols, schema=schema), per


def fabricate_home(root: Path, parses: int, log=print) -> FabricHome:
    """A home at ``root`` with ``parses`` ready, published text parses (one source each)."""
    from fabric_resources.parsing.registry import parser_for

    home = FabricHome(root)
    catalog = home.catalog
    corpus = root.parent / f"{root.name}-corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    r = catalog.register_root(corpus)
    ident = parser_for("text/plain").identity(home.config.parsers)
    sources: dict[str, dict] = {}
    started = time.perf_counter()
    for lo in range(0, parses, BATCH):
        ids = [f"{i:032x}" for i in range(lo, min(parses, lo + BATCH))]
        now = time.time()
        with catalog.transaction(immediate=True) as con:
            for pid in ids:
                key, h = f"fs:{r.label}/doc-{pid}.txt", pid * 2
                catalog.ensure_parse_run(con, parse_id=pid, source_hash=h, media_type="text/plain",
                                         parser_name=ident.name, parser_version=ident.version,
                                         parser_config_hash=ident.config_hash)
                catalog.upsert_source(con, SourceRow(key, r.root_id, f"doc-{pid}.txt", "present", "text/plain",
                                                     1_733_000_000_000_000_000, 1000, h, pid, now, now))
                catalog.record_acquisition(con, key, h, 1_733_000_000_000_000_000, 1000)
                sources[key] = {"parse_id": pid, "source_hash": h, "media_type": "text/plain", "language": "en",
                                "mtime_ns": 1_733_000_000_000_000_000, "size": 1000, "root": str(corpus)}
        catalog.set_parse_statuses([StatusUpdate(p, "parsed", counts={"units": ROWS["units"], "relationships": 0},
                                                 language="en") for p in ids])
        written: dict[str, dict[str, int]] = {}
        for name in ROWS:
            rows, per = _rows(name, ids)
            home.tables.replace_partitions(name, ids, rows)
            written[name] = per
        record_row_counts(catalog, written)
        merge_verdicts(catalog, {p: _verdicts(int(p, 16)) for p in ids})
        catalog.set_parse_statuses([StatusUpdate(p, "ready") for p in ids])
        log(f"  {lo + len(ids)} parses written ({time.perf_counter() - started:.0f} s)")
    for name in ROWS:  # what activation does before it pins the versions
        home.tables.merge_fragments(name)
        home.tables.index_parse_ids(name)
    tables = {name: (home.tables.version(name) if home.tables.exists(name) else None) for name in TABLES}
    catalog.publish_release({"schema_version": 2, "sources": sources, "tables": tables, "lexical_generation": None,
                             "dense_indexes": {}, "vector_digests": {}}, None)
    return home


# -- the code path before (commit 395a9fb), kept verbatim as the reference -----------------------

def _row_counts_before(run) -> dict[str, int]:
    tables = run.counts.get("rows")
    if not isinstance(tables, dict):
        return {}
    return {t: n for t, n in tables.items() if isinstance(n, int) and not isinstance(n, bool) and n >= 0}


def _parse_row_counts_before(self, name: str, version: int | None = None) -> dict[str, int]:
    ds = self.dataset(name, version)
    counts: dict[str, int] = {}
    if ds is None:
        return counts
    for batch in ds.to_batches(columns=["parse_id"], batch_size=65536):
        vc = pc.value_counts(batch.column("parse_id"))
        for pid, n in zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()):
            counts[pid] = counts.get(pid, 0) + n
    return counts


def _changed_rows_before(home, parse_ids, tables=None, runs=None):
    from fabric_resources.object_store import TableStoreUnavailableError
    from fabric_resources.row_audit import RowsChanged

    def recorded(ids):
        return {r.parse_id: _row_counts_before(r) for r in home.catalog.parse_runs(ids)}

    wanted = sorted(set(parse_ids))
    if not wanted:
        return []
    if runs is None:
        before = recorded(wanted)
    else:
        keep = set(wanted)
        before = {r.parse_id: _row_counts_before(r) for r in runs if r.parse_id in keep}
    live = {}
    for name in (tables if tables is not None else TABLES):
        try:
            if home.tables.exists(name):
                live[name] = home.tables.parse_row_counts(name)
        except TableStoreUnavailableError:
            raise
        except (OSError, ValueError, RuntimeError):
            continue
    suspects = {pid for name, counts in live.items() for pid in wanted
                if (n := before.get(pid, {}).get(name)) is not None and counts.get(pid, 0) != n}
    after = recorded(sorted(suspects)) if suspects else {}
    out = []
    for name, counts in live.items():
        parses = []
        for pid in sorted(suspects):
            rec = after.get(pid, {}).get(name)
            if rec is None or before.get(pid, {}).get(name) != rec:
                continue
            n = counts.get(pid, 0)
            if n != rec:
                parses.append((pid, rec, n))
        if parses:
            out.append(RowsChanged(name, tuple(parses)))
    return out


@contextmanager
def reference_path() -> Iterator[None]:
    """While the block runs, ``Fabric.status`` takes the code path it had before in what costs at
    scale: every parse run read with :meth:`Catalog.parse_runs` (verdicts and counts decoded in
    Python; a run's ``failed_units`` read from its decoded counts, as status did), every source
    with :meth:`Catalog.sources` (whole rows; cut to the four columns status now takes, ~20 ms at
    100k), each table's ``parse_id`` counts merged parse by parse in Python, the audit's
    per-parse, per-table lookups, on every call (no cache). Status's own loops (the withheld
    patterns asked once a source, outdated parses found run by run) run as they are now on both
    paths, so the ratio leaves their gain out."""
    from fabric_resources import row_audit
    from fabric_resources.catalog import Catalog, ParseRun
    from fabric_resources.tables import TableStore

    saved = Catalog.parse_run_overview, Catalog.source_overview, TableStore.parse_row_counts, row_audit.audited_rows
    Catalog.parse_run_overview = Catalog.parse_runs  # type: ignore[method-assign, assignment]
    Catalog.source_overview = lambda self: [(s.source_key, s.state, s.media_type, s.parse_id)  # type: ignore[method-assign]
                                            for s in self.sources()]
    ParseRun.failed_units = property(lambda r: r.counts.get("failed_units"))  # type: ignore[attr-defined]
    TableStore.parse_row_counts = _parse_row_counts_before  # type: ignore[method-assign]
    row_audit.audited_rows = lambda home, ids, runs: _changed_rows_before(home, ids, runs=runs)  # type: ignore[assignment]
    try:
        yield
    finally:
        (Catalog.parse_run_overview, Catalog.source_overview, TableStore.parse_row_counts,  # type: ignore[method-assign]
         row_audit.audited_rows) = saved
        del ParseRun.failed_units  # type: ignore[attr-defined]


def time_status(home: FabricHome, repeat: int) -> dict:
    """Seconds of :meth:`Fabric.status` on a fresh :class:`Fabric` each call, the three paths
    alternating (after one warm-up call of each): ``now`` (the row audit answered from its cache,
    as on a home nothing changed in since the last status), ``uncached`` (the cache file removed
    first: the first status after a write) and ``reference`` (:func:`reference_path`); medians,
    and the ratios reference / now and reference / uncached. All must say the same."""
    from fabric_query.api import Fabric

    def once() -> tuple[float, object]:
        t = time.perf_counter()
        st = Fabric(home.root).status()
        return time.perf_counter() - t, st

    paths = ("now", "uncached", "reference")
    times: dict[str, list[float]] = {p: [] for p in paths}
    said = {}
    for i in range(repeat + 1):
        for path in paths:
            if path == "reference":
                with reference_path():
                    s, said[path] = once()
            else:
                if path == "uncached":
                    home.layout.row_audit_cache.unlink(missing_ok=True)
                s, said[path] = once()
            if i:
                times[path].append(s)
    if len({repr(st) for st in said.values()}) != 1:
        raise AssertionError("status says something else on another path")
    med = {p: statistics.median(times[p]) for p in paths}
    return {"status_s": round(med["now"], 3), "uncached_s": round(med["uncached"], 3),
            "reference_s": round(med["reference"], 3), "ratio": round(med["reference"] / med["now"], 2),
            "ratio_uncached": round(med["reference"] / med["uncached"], 2), "active_sources": said["now"].active_sources}


def profile_status(home: FabricHome, top: int = 25) -> str:
    """cProfile of one :meth:`Fabric.status` (after one warm-up call), by cumulative time."""
    from fabric_query.api import Fabric

    Fabric(home.root).status()
    prof = cProfile.Profile()
    prof.enable()
    Fabric(home.root).status()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parses", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--work-dir", type=Path, default=None, help="keep the fabricated homes here (reused if present)")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args(argv)
    base = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-status-"))
    results = []
    for n in args.parses:
        root = base / f"home-{n}"
        if (root / "catalog.sqlite3").exists():
            home = FabricHome(root)
        else:
            print(f"fabricating {n} parses in {root}")
            home = fabricate_home(root, n)
        if args.profile:
            print(profile_status(home))
        res = {"parses": n, **time_status(home, args.repeat)}
        results.append(res)
        print(json.dumps(res))


if __name__ == "__main__":
    main()
