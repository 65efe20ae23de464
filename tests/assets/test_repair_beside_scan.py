"""`fabric repair` beside a scan (`fabric ingest`'s, the source sensor's) in another process, and
before a later one: a repair drops the damaged fragments of the latest table versions, so every
parse whose rows they held, served or not, must be re-derived before a release serves it again.
The race is made deterministic as in test_cleanup_beside_scan.py: the repair is stopped where it
has read the catalog and planned, before it marks and drops, and the scan runs then."""

from __future__ import annotations

import lance
import pytest
from conftest import ingest
from test_cleanup_beside_scan import NEW, OLD, _a_scan_when_called

import fabric_assets.lifecycle.repair as repair_mod
from fabric_assets.lifecycle.rebuild import run_marked
from fabric_query import Fabric
from fabric_resources.home import FabricHome


@pytest.mark.parametrize("table", ["chunks", "units"])
@pytest.mark.parametrize("scan", ["beside-the-repair", "after-the-repair"])
def test_a_superseded_parse_whose_rows_a_repair_dropped_is_re_derived_when_a_file_takes_it_back(
        tmp_path, fabric_home, monkeypatch, table, scan):
    """guards against (trial 24d): a repair attributing a damaged fragment's rows only to the parses
    a source waited for. The rows of a superseded parse retention still kept (a file's first
    version) went with the fragment, the parse stayed `ready`, and a scan that took it back (a file
    put back with those bytes), beside the repair or at any later ingest, had it published without
    them: a present file found by no search, `fabric status` saying rows changed. Now the repair
    marks such a parse too (`unserved`), and whichever source takes it back re-derives it first."""
    home = fabric_home
    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(OLD)
    assert ingest(src, home).failed_runs == []
    (src / "light.txt").write_text(NEW)  # OLD's parse superseded, its rows kept (superseded_days)
    assert ingest(src, home).failed_runs == []
    home = FabricHome(home.root)
    ds = lance.dataset(str(home.layout.tables / f"{table}.lance"))
    (first, path), *_ = [(f.fragment_id, f.data_files()[0].path) for f in ds.get_fragments()]
    (home.layout.tables / f"{table}.lance" / "data" / path).unlink()  # the first write: OLD's rows
    (src / "copy.txt").write_text(OLD)

    if scan == "beside-the-repair":
        scanner = _a_scan_when_called(monkeypatch, repair_mod, "mark", home)
    report = repair_mod.repair(home)
    monkeypatch.undo()
    (damage,) = report.plan.tables
    assert damage.fragments == {first: "missing"} and damage.parse_ids == []  # no source waits for OLD's parse
    if scan == "beside-the-repair":
        out, err = scanner[0].communicate(timeout=120)
        assert scanner[0].returncode == 0 and "fs:src/copy.txt" in out, err
    summary = run_marked(FabricHome(home.root))
    assert summary.failed_runs == [] and summary.failed == []
    if scan == "after-the-repair":
        assert ingest(src, FabricHome(home.root)).failed_runs == []

    status = Fabric(home.root).status()
    assert status.rows_changed == () and status.unreadable_tables == (), status
    hits = Fabric(home.root).search("lighthouse keeper storm number seven").results
    assert {h.citation.source_key for h in hits if "storm" in h.text} == {"fs:src/copy.txt"}
    assert len(damage.unserved) == 1  # named by the repair (`unserved` in `--json`)
