"""A warm process's scan reads only the source rows written since its last scan
(``scan._known_sources``): what it builds on equals every row read again, through edits,
additions, deletions, another writer's rows, another process's scan, a row deleted behind its
back and a catalog restored from a copy."""

from __future__ import annotations

import sqlite3

from fabric_assets.sources import scan as scanning
from fabric_assets.sources.scan import _known_sources, scan


def _every_row(catalog) -> dict:
    return {s.source_key: s for s in catalog.sources()}


def _holds(catalog) -> None:
    rows, n = _known_sources(catalog, catalog.purge_mark())
    assert rows == _every_row(catalog)
    assert n <= catalog.change_marks()[0]


def test_the_scan_memo_equals_every_row_read_again(tmp_path, fabric_home):
    """guards against: a memo that keeps a deleted file, misses an edit or another writer's row,
    trusts itself after another process scanned or after the catalog was restored from an older
    copy (same number of rows, lower change numbers), or after a row was deleted without a purge."""
    catalog = fabric_home.catalog
    src = tmp_path / "docs"
    src.mkdir()
    for i in range(6):
        (src / f"note-{i}.txt").write_text(f"Note {i} about the lighthouse.\n")
    catalog.register_root(src)
    scanning._KNOWN.clear()
    scan(fabric_home)
    _holds(catalog)
    # Edits, a deletion and an addition, scanned: the memo follows them.
    (src / "note-1.txt").write_text("Note 1, edited.\n")
    (src / "note-2.txt").unlink()
    (src / "note-9.txt").write_text("Note 9, new.\n")
    report = scan(fabric_home)
    assert report.changed == ["fs:docs/note-1.txt"] and report.deleted == ["fs:docs/note-2.txt"]
    assert report.new == ["fs:docs/note-9.txt"]
    _holds(catalog)
    # Another writer's row (no scan of this process saw it).
    row = catalog.source("fs:docs/note-3.txt")
    with catalog.transaction(immediate=True) as con:
        catalog.upsert_source(con, row._replace(size=row.size + 1))
    _holds(catalog)
    # Another process's scan: its rows and its last-scan record, not this process's memo.
    mine = dict(scanning._KNOWN)
    (src / "note-4.txt").write_text("Note 4, edited elsewhere.\n")
    scan(fabric_home)
    scanning._KNOWN.update(mine)
    _holds(catalog)
    scan(fabric_home)
    # Edits only (the same number of rows), then the catalog restored from a copy from before
    # them: its change numbers are lower than the memo's, so only the last-scan record tells.
    copy = tmp_path / "catalog-copy.sqlite3"
    with sqlite3.connect(catalog.path) as live, sqlite3.connect(copy) as saved:
        live.backup(saved)
    (src / "note-5.txt").write_text("Note 5, edited.\n")
    scan(fabric_home)
    (src / "note-4.txt").write_text("Note 4, edited again.\n")
    scan(fabric_home)  # its memo holds note 5 as edited
    assert catalog.source_count() == len(_every_row(catalog))
    with sqlite3.connect(copy) as saved, sqlite3.connect(catalog.path) as live:
        saved.backup(live)
    _holds(catalog)
    # A row deleted behind the memo's back (no purge mark moved).
    scan(fabric_home)
    with catalog.transaction(immediate=True) as con:
        con.execute("DELETE FROM sources WHERE source_key = ?", ("fs:docs/note-0.txt",))
    _holds(catalog)
    # And the scan that follows finds the file again.
    assert scan(fabric_home).new == ["fs:docs/note-0.txt"]
    _holds(catalog)


def test_a_process_keeps_the_rows_of_a_bounded_number_of_catalogs(tmp_path):
    """guards against: a process that scans many homes (a server, a test run) holding every home's
    source rows for its whole life, or an evicted home answered from a stale memo."""
    from fabric_resources.home import FabricHome

    scanning._KNOWN.clear()
    homes = []
    for i in range(scanning.MAX_KNOWN_CATALOGS + 2):
        home = FabricHome(tmp_path / f"home-{i}")
        src = tmp_path / f"src-{i}"
        src.mkdir()
        (src / "a.txt").write_text(f"Home {i}.\n")
        home.catalog.register_root(src)
        scan(home)
        homes.append((home, src))
    assert len(scanning._KNOWN) == scanning.MAX_KNOWN_CATALOGS
    first, src = homes[0]
    assert first.catalog.describe() not in scanning._KNOWN, "least recently scanned out first"
    (src / "b.txt").write_text("Added after eviction.\n")
    assert scan(first).new == [f"fs:{src.name}/b.txt"]
    _holds(first.catalog)
    assert next(reversed(scanning._KNOWN)) == first.catalog.describe()
