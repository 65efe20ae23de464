"""A cleanup (`fabric cleanup`, the cleanup job, the cleanup after a daemon run's activation) beside
a scan (`fabric ingest`'s, the source sensor's) in another process: the cleanup decides what no
source needs from the catalog as it read it, so a scan that takes an old parse back in between must
not lose its rows, its parse run or its raw bytes. The race is made deterministic: the cleanup is
stopped at the point where it has read the catalog, and the scan runs then in a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ingest, ingest_versions

import fabric_assets.lifecycle.retention as retention
from fabric_query import Fabric
from fabric_resources.home import FabricHome

OLD = "The lighthouse keeper logged storm number seven in the green ledger of the tide.\n"
NEW = "Sourdough bread needs flour, water and a patient baker who waits all night.\n"
REPO = Path(__file__).resolve().parents[2]
_SCAN = "import sys; from fabric_assets.sources.scan import scan; from fabric_resources.home import FabricHome; " \
        "print(scan(FabricHome(sys.argv[1])).new)"


def _waiting_on_a_file_lock(pid: int) -> bool:
    """Whether process ``pid`` waits for a flock (a ``->`` line of /proc/locks names it)."""
    lines = Path("/proc/locks").read_text().splitlines()
    return any("->" in line and line.split("->", 1)[1].split()[3] == str(pid) for line in lines)


def _waiting_on_a_lock(pid: int, home: FabricHome) -> bool:
    """Whether process ``pid`` waits for one of the home catalog's locks: a flock beside a SQLite
    catalog, a PostgreSQL advisory lock not yet granted (every session of that database is ours)."""
    url = getattr(home.catalog, "url", None)
    if url is None:
        return _waiting_on_a_file_lock(pid)
    import psycopg2

    con = psycopg2.connect(url)
    try:
        with con.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
            return cur.fetchone()[0] > 0
    finally:
        con.close()


def _ended_or_waiting(proc: subprocess.Popen, home: FabricHome) -> None:
    deadline = time.monotonic() + 120
    while proc.poll() is None and not _waiting_on_a_lock(proc.pid, home):
        assert time.monotonic() < deadline, "the scan neither ended nor waited for a lock"
        time.sleep(0.05)


def _scan_in_another_process(home: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen([sys.executable, "-c", _SCAN, str(home)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _a_scan_when_called(monkeypatch, module, name: str, home: FabricHome) -> list[subprocess.Popen]:
    """Make the next call of ``module.name`` first start a scan of ``home`` in another process and
    wait until that scan ends or waits for a lock the caller holds; returns the list the scan's
    process is put in. The function is the point where a cleanup, purge or restore has read the
    catalog and not yet acted on it."""
    scanner: list[subprocess.Popen] = []
    real = getattr(module, name)

    def then_a_scan(*args, **kwargs):
        if not scanner:
            scanner.append(_scan_in_another_process(home.root))
            _ended_or_waiting(scanner[0], home)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, then_a_scan)
    return scanner


def test_a_scan_taking_an_old_parse_back_while_a_cleanup_runs_keeps_it(tmp_path, fabric_home, monkeypatch):
    """guards against (trial 23e): a cleanup holding only the activation lock, which no scan takes,
    removing a parse a concurrent scan had just pointed a source at again (a file put back with an
    older version's bytes, past `superseded_days`): its rows, its parse run and its raw bytes went, and
    the source pointed at a parse that no longer existed (left out of every release; its bytes gone
    from the home). Now the scan and the cleanup exclude each other (the catalog's `sources` lock):
    whichever comes second sees what the first did."""
    fabric_home.layout.config_file.write_text(json.dumps({"retention": {
        "releases": 1, "release_days": 0, "superseded_days": 0, "after_activation": False}}))
    home = FabricHome(fabric_home.root)
    src = tmp_path / "src"
    ingest_versions(src / "light.txt", home, OLD, NEW)
    home = FabricHome(home.root)
    old_parse = {r.parse_id for r in home.catalog.parse_runs()} - {s.parse_id for s in home.catalog.sources()}
    assert len(old_parse) == 1  # the first version's parse, superseded and in no retained release
    (src / "copy.txt").write_text(OLD)  # its bytes are back, in another file

    scanner = _a_scan_when_called(monkeypatch, retention, "_orphans", home)  # sources and runs read
    retention.cleanup(home)
    monkeypatch.undo()
    out, err = scanner[0].communicate(timeout=120)
    assert scanner[0].returncode == 0, err
    assert "fs:src/copy.txt" in out

    home = FabricHome(home.root)
    copy = home.catalog.source("fs:src/copy.txt")
    runs = {r.parse_id for r in home.catalog.parse_runs()}
    assert copy.parse_id in runs, "the source points at a parse the cleanup removed"
    assert home.artifacts.path_for(copy.source_hash).exists(), "the cleanup removed the source's raw bytes"
    assert ingest(src, home).failed_runs == []
    hits = Fabric(home.root).search("lighthouse keeper storm number seven").results
    assert "fs:src/copy.txt" in {h.citation.source_key for h in hits}


def test_a_scan_taking_a_purged_sources_bytes_back_while_the_purge_runs_gets_them_anew(tmp_path, any_home,
                                                                                         monkeypatch):
    """guards against (trial 23e): a purge (which holds the ingest lock, which the source sensor's
    scan does not take) removing the parse and raw bytes of a deleted source after a scan beside it
    had pointed a file with the same bytes at that parse: the file's source named a parse run that
    no longer existed, its bytes gone. Now the scan waits for the purge, then takes the file in anew;
    on PostgreSQL and S3 as on the default storage."""
    import fabric_assets.lifecycle.purge as purge_mod

    home = any_home
    src = tmp_path / "src"
    src.mkdir()
    (src / "secret.txt").write_text(OLD)
    (src / "bread.txt").write_text(NEW)
    assert ingest(src, home).failed_runs == []
    (src / "secret.txt").unlink()
    assert ingest(src, home).failed_runs == []
    (src / "copy.txt").write_text(OLD)  # the same bytes, back in another file

    scanner = _a_scan_when_called(monkeypatch, purge_mod, "_drop_own_snapshots", home)  # planned
    purge_mod.purge(home, purge_mod.PurgeSelector(source_keys=("fs:src/secret.txt",)))
    monkeypatch.undo()
    out, err = scanner[0].communicate(timeout=120)
    assert scanner[0].returncode == 0, err

    home = FabricHome(home.root)
    copy = home.catalog.source("fs:src/copy.txt")
    assert copy is not None and copy.parse_id in {r.parse_id for r in home.catalog.parse_runs()}, \
        "the source points at a parse the purge removed"
    assert home.artifacts.path_for(copy.source_hash).exists(), "the purge removed the source's raw bytes"
    assert ingest(src, home).failed_runs == []
    hits = Fabric(home.root).search("lighthouse keeper storm number seven").results
    assert {h.citation.source_key for h in hits if "storm" in h.text} == {"fs:src/copy.txt"}


def _changed_after_a_snapshot(tmp_path, home: FabricHome):
    """A home whose `src/light.txt` held OLD at its snapshot and holds NEW now (both ingested);
    returns the snapshot and the folder."""
    from fabric_assets.lifecycle.snapshots import create

    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(OLD)
    assert ingest(src, home).failed_runs == []
    snap = create(FabricHome(home.root))
    (src / "light.txt").write_text(NEW)  # after the snapshot: a restore forgets these bytes
    assert ingest(src, home).failed_runs == []
    return snap, src


def _a_scan_once_forgetting_has_read_the_catalog(home: FabricHome, monkeypatch) -> list[subprocess.Popen]:
    """Make the next forgetting (:func:`forget_after_restore`) start a scan in another process once
    it has read what the restored catalog names, and wait until that scan ends or waits for a lock."""
    import fabric_assets.lifecycle.forgetting as forgetting

    return _a_scan_when_called(monkeypatch, forgetting, "memo_keys_only_of", home)


def _the_change_is_kept_and_served(home: FabricHome, src: Path, scanner: list[subprocess.Popen]) -> None:
    out, err = scanner[0].communicate(timeout=120)
    assert scanner[0].returncode == 0, err
    home = FabricHome(home.root)
    light = home.catalog.source("fs:src/light.txt")
    assert home.artifacts.path_for(light.source_hash).exists(), "the restore removed the source's raw bytes"
    assert ingest(src, home).failed_runs == []
    hits = Fabric(home.root).search("sourdough bread flour patient baker").results
    assert "fs:src/light.txt" in {h.citation.source_key for h in hits}


def test_a_scan_while_an_in_place_restore_forgets_keeps_what_it_records(tmp_path, fabric_home, monkeypatch):
    """guards against (trial 23g): an in-place `fabric snapshot restore` holding the ingest,
    activation and snapshot locks, none of which the source sensor's scan takes. A scan between the
    restored catalog coming back and the restore forgetting what only the replaced catalog knew
    pointed the changed file at its post-snapshot bytes, and the restore then removed those bytes
    (the restored catalog, as it read it, named none): the source named raw bytes gone from the
    home, and its parse failed. Now a restore holds the catalog's `sources` lock too: the scan waits,
    then records the change anew (its bytes stored again), and the next ingest serves it."""
    from fabric_assets.lifecycle.snapshots import restore

    snap, src = _changed_after_a_snapshot(tmp_path, fabric_home)
    home = FabricHome(fabric_home.root)
    scanner = _a_scan_once_forgetting_has_read_the_catalog(home, monkeypatch)
    restore(home, snap.snapshot_id)
    monkeypatch.undo()
    _the_change_is_kept_and_served(home, src, scanner)


def test_a_scan_while_an_ingest_finishes_an_interrupted_restore_keeps_what_it_records(tmp_path, fabric_home,
                                                                                      monkeypatch):
    """guards against (trial 23g): `fabric ingest` finishing the forgetting of a restore killed
    part-way under the ingest and activation locks only, so the source sensor's scan beside it lost
    its bytes as in the restore itself. Now the ingest holds the `sources` lock while it forgets."""
    from fabric_assets.lifecycle import snapshots

    snap, src = _changed_after_a_snapshot(tmp_path, fabric_home)
    home = FabricHome(fabric_home.root)

    def killed(*_a, **_k):
        raise KeyboardInterrupt
    monkeypatch.setattr(snapshots, "finish_forgetting", killed)
    with pytest.raises(KeyboardInterrupt):  # the catalog is back, nothing forgotten yet
        snapshots.restore(home, snap.snapshot_id)
    monkeypatch.undo()
    home = FabricHome(home.root)
    scanner = _a_scan_once_forgetting_has_read_the_catalog(home, monkeypatch)
    assert ingest(src, home).failed_runs == []  # finishes the restore's forgetting first
    monkeypatch.undo()
    _the_change_is_kept_and_served(home, src, scanner)
