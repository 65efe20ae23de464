"""A home on a full disk, or on read-only media: reads are the storage's fault, never "damaged".

Trial 15 (stop 48) put a home on a 60 MB tmpfs and filled it. Every read command then said the
catalog was damaged and should be restored from a copy (SQLite's reader could not make its WAL
index, ``-shm``: ``SQLITE_IOERR_SHMSIZE``), and a running ``fabric serve`` failed every search. The
end-to-end test needs a real full file system: it mounts a small tmpfs, which needs root (and a
kernel that lets the test mount); elsewhere it is skipped with the reason. The classification
itself is tested everywhere.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import uuid

import httpx
import pytest
from conftest import ingest
from live_server import live_server, wait_ready

from fabric_query import Fabric
from fabric_query.server.app import create_app
from fabric_resources.catalog import CatalogUnavailableError
from fabric_resources.config import ServerConfig
from fabric_resources.home import FabricHome
from fabric_resources.storage_errors import sqlite_storage_fault


def _sqlite_error(code: int, name: str) -> sqlite3.OperationalError:
    exc = sqlite3.OperationalError("disk I/O error")
    exc.sqlite_errorcode, exc.sqlite_errorname = code, name
    return exc


def test_only_a_storage_fault_of_sqlite_is_named_the_storages(tmp_path, monkeypatch):
    """guards against: a malformed file named a disk fault (it must stay "damaged"), and a full disk
    named damage."""
    for code, name in ((4874, "SQLITE_IOERR_SHMSIZE"), (13, "SQLITE_FULL"), (14, "SQLITE_CANTOPEN")):
        said = sqlite_storage_fault(_sqlite_error(code, name), tmp_path)
        assert said is not None and name in said and "nothing is known to be damaged" in said
    for code, name in ((11, "SQLITE_CORRUPT"), (26, "SQLITE_NOTADB"), (5, "SQLITE_BUSY")):
        assert sqlite_storage_fault(_sqlite_error(code, name), tmp_path) is None
    assert sqlite_storage_fault(ValueError("disk I/O error"), tmp_path) is None
    monkeypatch.setattr("shutil.disk_usage", lambda path: shutil._ntuple_diskusage(1 << 30, (1 << 30) - 4096, 4096))
    assert "is full (4096 bytes free)" in sqlite_storage_fault(_sqlite_error(4874, "SQLITE_IOERR_SHMSIZE"), tmp_path)


@contextlib.contextmanager
def _small_tmpfs(path, megabytes: int):
    path.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs (a real full disk) needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}M", "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _fill(folder) -> list:
    """Write zeros until the file system holding ``folder`` has no byte left; the files written."""
    files = [folder / f"filler-{uuid.uuid4().hex}", folder / f"filler-{uuid.uuid4().hex}"]
    for path, step in zip(files, (1 << 16, 1)):
        with contextlib.suppress(OSError), open(path, "wb", buffering=0) as out:
            while True:
                out.write(b"\0" * step)
    assert os.statvfs(folder).f_bavail == 0
    return files


def _keeper_home(disk, tmp_path, monkeypatch) -> FabricHome:
    """A home on ``disk`` holding one ingested note (fs:src/keeper.txt)."""
    home = FabricHome(disk / "home")
    monkeypatch.setenv("DAGSTER_HOME", str(home.root / "dagster"))
    src = tmp_path / "src"
    src.mkdir()
    (src / "keeper.txt").write_text("The lighthouse keeper logged the tide and lit the lamp at dusk.\n")
    ingest(src, home)
    return home


def test_a_full_disk_is_named_as_such_and_a_running_server_keeps_answering(tmp_path, monkeypatch):
    disk = tmp_path / "disk"
    with _small_tmpfs(disk, 64):
        home = _keeper_home(disk, tmp_path, monkeypatch)
        # The ingest's last connection removed the WAL index: a reader must make it anew, which a
        # full disk cannot hold.
        filler = _fill(disk)
        for command in (["status"], ["search", "lamp"]):  # a new process each, as a user runs them
            out = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", *command,
                                  "--home", str(home.root)], capture_output=True, text=True, timeout=300,
                                 env={**os.environ, "HF_HUB_OFFLINE": "1"})
            assert out.returncode == 2, out.stderr
            assert "is full (0 bytes free)" in out.stderr and "restore" not in out.stderr
            assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
        with pytest.raises(CatalogUnavailableError, match="is full"):
            Fabric(home.root).status()
        for path in filler:
            path.unlink()
        fabric = Fabric(home.root)
        with live_server(lambda port: create_app(fabric, ServerConfig(), port=port)) as url:
            with httpx.Client(base_url=url, timeout=60) as client:
                wait_ready(client)
                assert client.post("/v1/search", json={"query": "lamp"}).status_code == 200
                _fill(disk)
                # The server holds the catalog open: its searches write nothing and still answer.
                answer = client.post("/v1/search", json={"query": "tide keeper"})
                assert answer.status_code == 200, answer.text
                assert answer.json()["results"][0]["citation"]["source_key"] == "fs:src/keeper.txt"


def test_a_home_on_read_only_media_is_searched_and_resolved_as_it_is(tmp_path, monkeypatch):
    """guards against (stop 48): a home on a read-only mount (a copy on read-only media, a snapshot's
    file system) where every read command failed: SQLite could not make its WAL index there
    (``SQLITE_CANTOPEN``), and opening the API rewrote ``dagster.yaml``. It is read as it is: the
    catalog as immutable (nothing can write it), the lexical channels by scanning the chunks (tantivy
    cannot take its lock file), and `fabric serve`, which writes its address and token, refuses."""
    disk = tmp_path / "disk"
    with _small_tmpfs(disk, 64):
        home = _keeper_home(disk, tmp_path, monkeypatch)
        remounted = subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True, text=True)
        if remounted.returncode != 0:
            pytest.skip(f"cannot remount the tmpfs read-only: {remounted.stderr.strip()}")
        fabric = Fabric(home.root)
        pack = fabric.search("keeper lamp")
        assert pack.results[0].citation.source_key == "fs:src/keeper.txt" and pack.fallback_reason
        assert fabric.resolve(pack.results[0].citation).status == "verified"
        status = fabric.status()
        assert status.active_sources == 1 and "ReadOnlyFilesystem" in (status.lexical_index_problem or "")
        out = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", "serve",
                              "--home", str(home.root), "--port", "0"], capture_output=True, text=True, timeout=300,
                             env={**os.environ, "HF_HUB_OFFLINE": "1"})
        assert out.returncode == 2 and "read-only file system" in out.stderr, out.stderr


def _fabric(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def test_snapshots_of_a_read_only_home_are_listed_and_verified_and_writers_say_read_only(tmp_path, monkeypatch):
    """guards against (trial 19a): on a read-only mount, `fabric snapshot list` and `verify` of a home
    copied to another path ended in a traceback (opening it rewrote dagster.yaml, which names the
    path), `verify --deep` at its own path and every writer (delete, purge) said the storage failed
    a SQLite write ("check the disk"), and a deep verify that could open no index (tantivy takes a
    lock file) called the index damaged. Reads answer as on a writable home; a writer is one line
    naming the read-only home, exit 2, and the snapshot is still there."""
    disk = tmp_path / "disk"
    with _small_tmpfs(disk, 64):
        home = _keeper_home(disk, tmp_path, monkeypatch)
        from fabric_assets.lifecycle.snapshots import create

        create(home)
        moved = disk / "moved höme"  # a copy on the same media, opened at another path
        shutil.copytree(home.root, moved, symlinks=True)
        remounted = subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True, text=True)
        if remounted.returncode != 0:
            pytest.skip(f"cannot remount the tmpfs read-only: {remounted.stderr.strip()}")
        for root in (home.root, moved):
            listed = _fabric("snapshot", "list", "--home", str(root))
            assert listed.returncode == 0 and listed.stdout.split()[:3] == ["1", "release", "1"], listed.stderr
            deep = _fabric("snapshot", "verify", "1", "--deep", "--home", str(root))
            assert deep.returncode == 0 and "snapshot 1: ok" in deep.stdout, deep.stdout + deep.stderr
            assert "read-only file system" in deep.stdout and "damaged" not in deep.stdout
            for writer in (["snapshot", "delete", "1"], ["purge", "--source", "fs:src/keeper.txt"]):
                out = _fabric(*writer, "--home", str(root))
                assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
                assert "is read-only" in out.stderr and "SQLite" not in out.stderr, out.stderr
                assert len(out.stderr.strip().splitlines()) == 1
            assert (root / "snapshots" / "1" / "manifest.json").is_file()


def test_a_home_whose_dagster_yaml_this_user_cannot_rewrite_is_named_read_only(tmp_path, monkeypatch):
    """guards against (trial 19a): a home copied to another path on media this user cannot write
    (``chmod -R a-w``, not root) raised the PermissionError of the dagster.yaml rewrite as a
    traceback; it is a HomeReadOnlyError (one line, exit 2), and the snapshot readers open it read-only."""
    import errno

    from fabric_assets.cli.lifecycle import _opened
    from fabric_resources.home import HomeReadOnlyError

    home = FabricHome(tmp_path / "home")
    home.catalog  # a catalog: the home exists

    def refused(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr("fabric_resources.home.write_instance_yaml", refused)
    with pytest.raises(HomeReadOnlyError, match="is read-only .*dagster.yaml cannot be rewritten"):
        FabricHome(home.root)
    assert _opened(home.root, writes=False).read_only
    with pytest.raises(HomeReadOnlyError):
        _opened(home.root)
