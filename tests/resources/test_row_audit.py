"""The row audit's cache (``fabric_resources.row_audit.audited_rows``): ``fabric status`` answers
from it only while nothing the audit reads has changed. Homes fabricated through the catalog's and
table store's write functions (``bench_status.fabricate_home``: no Dagster run, a second each)."""

from __future__ import annotations

import os
import shutil

import lance
import pytest

from fabric_assets.measurement.bench_status import fabricate_home
from fabric_query import Fabric
from fabric_resources.catalog import record_row_counts
from fabric_resources.home import FabricHome
from fabric_resources.tables import TableStore

P1, P2 = f"{1:032x}", f"{2:032x}"


@pytest.fixture
def home(tmp_path, monkeypatch) -> FabricHome:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home" / "dagster"))
    return fabricate_home(tmp_path / "home", 6, log=lambda _: None)


@pytest.fixture
def scans(monkeypatch) -> list[str]:
    """The tables whose ``parse_id`` column the audit reads, call by call."""
    seen: list[str] = []
    real = TableStore.parse_row_counts

    def counted(self, name, version=None):
        seen.append(name)
        return real(self, name, version)

    monkeypatch.setattr(TableStore, "parse_row_counts", counted)
    return seen


def _delete(home: FabricHome, table: str, where: str) -> None:
    lance.dataset(str(home.layout.tables / f"{table}.lance")).delete(where)


def test_an_unchanged_home_is_not_audited_again(home, scans):
    """guards against: every status call at 100k parses decoding every parse's counts and scanning
    every table again (~1.5 s) when nothing changed since the last one."""
    assert Fabric(home.root).status().rows_changed == ()
    assert len(scans) == 8 and home.layout.row_audit_cache.exists()
    scans.clear()
    assert Fabric(home.root).status().rows_changed == ()
    assert scans == []


def test_rows_changed_at_the_same_table_version_are_audited_again(home, scans):
    """guards against: a cache keyed by table versions answering for another table with the same
    version number (a table folder put back from a copy, then altered otherwise)."""
    folder = home.layout.tables / "chunks.lance"
    shutil.copytree(folder, home.root / "chunks-copy")
    first = lance.dataset(str(folder)).to_table(columns=["chunk_id"], filter=f"parse_id = '{P1}'")["chunk_id"][0]
    _delete(home, "chunks", f"chunk_id = '{first}'")
    assert Fabric(home.root).status().rows_changed == ("chunks: 1 parse(s), 1 row(s) fewer and 0 more than written",)
    version = home.tables.version("chunks")
    shutil.rmtree(folder)
    shutil.copytree(home.root / "chunks-copy", folder)
    _delete(home, "chunks", f"parse_id = '{P2}'")  # both of its rows, at the same version number
    assert home.tables.version("chunks") == version
    scans.clear()
    assert Fabric(home.root).status().rows_changed == ("chunks: 1 parse(s), 2 row(s) fewer and 0 more than written",)
    assert "chunks" in scans
    shutil.rmtree(folder)
    shutil.copytree(home.root / "chunks-copy", folder)
    assert Fabric(home.root).status().rows_changed == ()


def test_counts_recorded_anew_are_audited_again(home, scans):
    """guards against: a cache keyed by the tables alone missing a write's new record (a record
    changes no change number) or a parse that became active or left."""
    assert Fabric(home.root).status().rows_changed == ()
    record_row_counts(home.catalog, {"chunks": {P1: 5}})
    assert Fabric(home.root).status().rows_changed == ("chunks: 1 parse(s), 3 row(s) fewer and 0 more than written",)
    record_row_counts(home.catalog, {"chunks": {P1: 2}})
    assert Fabric(home.root).status().rows_changed == ()
    scans.clear()
    assert Fabric(home.root).status().rows_changed == () and scans == []


def test_a_damaged_or_foreign_cache_file_is_audited_again(home, scans):
    """guards against: a cache file cut short, or another home's, being read as this one's answer."""
    _delete(home, "units", f"parse_id = '{P1}'")
    expected = ("units: 1 parse(s), 3 row(s) fewer and 0 more than written",)
    assert Fabric(home.root).status().rows_changed == expected
    for text in ("{", '{"key": "0", "changed": []}', "[]"):
        home.layout.row_audit_cache.write_text(text)
        assert Fabric(home.root).status().rows_changed == expected


def test_a_same_size_byte_edit_with_its_mtime_put_back_is_audited_again(home, scans):
    """guards against: a data file edited in place to the same size, its mtime then reset
    (``touch -r``, ``os.utime``), answered from the cache as if unchanged (size, mtime and inode
    match; the inode change time cannot be set back)."""
    assert Fabric(home.root).status().rows_changed == ()
    (data,) = (home.layout.tables / "chunks.lance" / "data").iterdir()
    before = data.stat()
    edited = data.read_bytes().replace(P1.encode(), P2.encode())
    assert len(edited) == before.st_size and edited != data.read_bytes()
    with open(data, "r+b") as f:  # in place: same inode
        f.write(edited)
    os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (data.stat().st_size, data.stat().st_mtime_ns, data.stat().st_ino) == (
        before.st_size, before.st_mtime_ns, before.st_ino)
    scans.clear()
    changed = Fabric(home.root).status().rows_changed
    assert "chunks" in scans
    assert changed and changed[0].startswith("chunks: 2 parse(s)")


def test_a_folders_state_never_misses_a_file_behind_a_linked_folder(tmp_path):
    """guards against (trial 20h): ``folder_state`` (the dense check's key for an ANN index
    generation) not walking into a folder that is a symbolic link, so a file Lance reads through
    it could be altered under the same key, and the kept check outlive it."""
    from fabric_resources.row_audit import folder_state

    gen, elsewhere = tmp_path / "gen-00000001", tmp_path / "elsewhere"
    (gen / "vectors.lance").mkdir(parents=True)
    elsewhere.mkdir()
    (gen / "fabric_dense_index.json").write_text("{}")
    (elsewhere / "part.lance").write_bytes(b"\x00" * 64)
    plain = folder_state(gen)
    assert plain is not None and "fabric_dense_index.json" in plain
    (gen / "vectors.lance" / "data").symlink_to(elsewhere, target_is_directory=True)
    before = folder_state(gen)
    (elsewhere / "part.lance").write_bytes(b"\x01" * 64)
    assert before is None or folder_state(gen) != before
    (gen / "vectors.lance" / "loop").symlink_to(gen, target_is_directory=True)  # never walked without end
    assert folder_state(gen) is None


def test_cache_files_are_written_whole_under_names_of_their_own(tmp_path):
    """guards against (trial 20h): a cache written under a temporary name anyone could guess
    (``<file>.<pid>.<thread>.tmp``: a FIFO put there first hung the write), and a half-written
    cache read by a status running beside the writer. Threads storing at once leave one whole
    answer and no temporary file."""
    import threading

    from fabric_resources.row_audit import load_cached, store_cached

    path = tmp_path / "cache.json"
    payloads = [{"key": "k", "n": i, "pad": "x" * 100_000} for i in range(8)]
    threads = [threading.Thread(target=store_cached, args=(path, p)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert load_cached(path, "k") in payloads and load_cached(path, "other") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.json"]
    # What stood at the name the write used before (a folder there made it raise) is no matter now.
    import os

    guessed = tmp_path / f"cache.json.{os.getpid()}.{threading.get_ident()}.tmp"
    guessed.mkdir()
    store_cached(path, {"key": "k2"})
    assert load_cached(path, "k2") == {"key": "k2"} and guessed.is_dir()
