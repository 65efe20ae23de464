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
call opens one), the median of ``repeat`` calls, first call separately.
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
from pathlib import Path

import pyarrow as pa

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


def time_status(home: FabricHome, repeat: int) -> dict:
    """Seconds of :meth:`Fabric.status` on a fresh :class:`Fabric` each call: the first, and the median of the rest."""
    from fabric_query.api import Fabric

    times = []
    for _ in range(repeat + 1):
        t = time.perf_counter()
        st = Fabric(home.root).status()
        times.append(time.perf_counter() - t)
    return {"first_s": times[0], "median_s": statistics.median(times[1:]), "active_sources": st.active_sources}


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
