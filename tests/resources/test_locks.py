"""The home's lock files (``fabric_resources.locks``) when their path holds something else."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fabric_resources.locks import LockFileUnusableError, exclusive_lock, lock_held, shared_lock

_PROBE = ("import sys\n"
          "from fabric_resources.locks import LockFileUnusableError, lock_held, shared_lock\n"
          "for probe in (lambda p: lock_held(p), lambda p: shared_lock(p).__enter__()):\n"
          "    try:\n"
          "        probe(sys.argv[1])\n"
          "    except LockFileUnusableError as exc:\n"
          "        print('refused', exc)\n")


def test_a_lock_path_holding_a_folder_or_fifo_is_refused_in_one_line_never_waited_on(tmp_path):
    """guards against (trial 21c): `ingest.lock` made a FIFO hung `fabric status` for ever (its
    probe opened the FIFO for reading, waiting for a writer) and made `fabric ingest` an
    `UnsupportedOperation` traceback; made a folder, an `IsADirectoryError` traceback. A regular
    file still locks as before."""
    plain = tmp_path / "plain.lock"
    assert not lock_held(plain)
    with exclusive_lock(plain):
        assert lock_held(plain)
    assert not lock_held(plain)
    with shared_lock(plain):
        assert not lock_held(plain)

    folder = tmp_path / "folder.lock"
    folder.mkdir()
    fifo = tmp_path / "fifo.lock"
    os.mkfifo(fifo)
    for path in (folder, fifo):
        for take in (exclusive_lock, shared_lock):
            with pytest.raises(LockFileUnusableError, match="is not a regular file"):
                with take(path):
                    pass
        # In a child: were the FIFO opened for reading as before, the probe would wait for ever.
        out = subprocess.run([sys.executable, "-c", _PROBE, str(path)], capture_output=True, text=True,
                             timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        assert out.stdout.count("refused") == 2, out.stdout + out.stderr


def test_a_dangling_link_or_link_loop_at_a_lock_path_is_refused_in_one_line(tmp_path):
    """guards against (trial 21f): `ingest.lock` made a link into a missing folder (or a link
    loop) made `fabric ingest` a `FileNotFoundError` traceback naming the lock path as missing.
    A link to a regular file still locks it; a dangling link whose folder exists gets its file."""
    missing = tmp_path / "missing.lock"
    missing.symlink_to(tmp_path / "gone" / "x.lock")
    loop = tmp_path / "loop.lock"
    loop.symlink_to(loop)
    for path in (missing, loop):
        for take in (exclusive_lock, shared_lock):
            with pytest.raises(LockFileUnusableError, match="is a link Fabric cannot open"):
                with take(path):
                    pass
    assert not lock_held(missing)  # read only: no file, no holder
    with pytest.raises(LockFileUnusableError, match="is a link Fabric cannot open"):
        lock_held(loop)
    target = tmp_path / "target.lock"
    linked = tmp_path / "linked.lock"
    linked.symlink_to(target)
    with exclusive_lock(linked):
        assert lock_held(target)
    assert target.is_file()
