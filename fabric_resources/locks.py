"""File locks: one holder at a time per lock file, across processes of one machine.

Activation, ``fabric ingest`` and the ONNX query-model export each serialise on a lock file
(the home's ``activation.lock``, ``ingest.lock``, the export's ``.lock`` beside its cache file).
Snapshot readers share one (:func:`shared_lock`) that whatever removes or rewrites a snapshot holds
exclusively.
``flock`` is advisory and local: it assumes the locked path is on one machine's file system.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive_lock(path: Path, *, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing); a second holder waits (with
    ``wait=False`` it raises ``BlockingIOError`` instead), and the OS drops the lock of a killed
    process."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextmanager
def shared_lock(path: Path) -> Iterator[None]:
    """Hold a shared ``flock`` on ``path``: any number of shared holders at once, none while an
    :func:`exclusive_lock` holder has it (a shared holder waits for it, and it for them).

    The file is created if missing, where it can be; where it cannot (a read-only file system or
    folder) it is opened for reading, and a file that is not there has no exclusive holder to wait
    for, so the block runs at once.
    """
    fh = None
    try:
        fh = open(path, "a+")
    except OSError:
        try:
            fh = open(path, "rb")
        except FileNotFoundError:
            pass  # no lock file: no exclusive holder
    if fh is None:
        yield
        return
    with fh:
        fcntl.flock(fh, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def lock_held(path: Path) -> bool:
    """Whether a live process holds ``path``'s :func:`exclusive_lock` now. Takes nothing a holder
    would wait on for longer than the probe (a shared ``flock`` tried without waiting, let go at
    once) and creates nothing: a missing file has no holder. A killed holder holds nothing (the OS
    dropped its lock), so ``False`` with work left undone means it was interrupted."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        return False
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False
