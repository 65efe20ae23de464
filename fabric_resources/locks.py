"""File locks: one holder at a time per lock file, across processes of one machine.

Activation, ``fabric ingest`` and the ONNX query-model export each serialise on a lock file
(the home's ``activation.lock``, ``ingest.lock``, the export's ``.lock`` beside its cache file).
Snapshot readers share one (:func:`shared_lock`) that whatever removes or rewrites a snapshot holds
exclusively.
``flock`` is advisory and local: it assumes the locked path is on one machine's file system.
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from fabric_resources.home_location import HomeUnusableError


class LockFileUnusableError(HomeUnusableError):
    """A lock file's path holds something other than a regular file (a folder, a FIFO, a device):
    no lock can be taken there. Opening a FIFO to probe it waited for a writer for ever (`fabric
    status`), and a folder or FIFO made every writer's open a traceback (trial 21c)."""


class LockHeld(BlockingIOError):
    """A lock asked for without waiting is held by another holder (another process, or another
    open of the lock in this one)."""


def _open(path: Path, create: bool) -> IO[bytes]:
    """``path`` opened for ``flock``: read-write and created if missing (``create``), else read-only;
    never blocking on a FIFO.

    Raises
    ------
    LockFileUnusableError
        ``path`` is not a regular file, or is a link to where none can be made (a loop).
    OSError
        It cannot be opened (``FileNotFoundError`` when missing and not ``create``)."""
    flags = (os.O_RDWR | os.O_CREAT if create else os.O_RDONLY) | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except IsADirectoryError:
        fd = None
    except OSError as exc:
        # A link at the lock path into a missing folder, or a link loop: no lock file can be made
        # through it, and the open's own error names the link as if it were a missing file. (A
        # dangling link only read through holds no lock: missing, as a missing file.)
        if not os.path.islink(path) or (not create and isinstance(exc, FileNotFoundError)):
            raise
        raise LockFileUnusableError(f"{path} is a link Fabric cannot open or create a lock file through "
                                    f"({exc.strerror}), so Fabric cannot take its lock: remove it (Fabric "
                                    "makes the file again) and run the command again") from None
    if fd is None or not stat.S_ISREG(os.fstat(fd).st_mode):
        if fd is not None:
            os.close(fd)
        raise LockFileUnusableError(f"{path} is not a regular file (a folder, FIFO or device stands there), so "
                                    "Fabric cannot take its lock: remove it (Fabric makes it again) and run the "
                                    "command again")
    return os.fdopen(fd, "r+b" if create else "rb")


@contextmanager
def exclusive_lock(path: Path, *, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing); a second holder waits (with
    ``wait=False`` it raises :class:`LockHeld`, a ``BlockingIOError``, instead), and the OS drops
    the lock of a killed process. A child forked inside the block that leaves it lets go of its
    copy only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _open(path, create=True) as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockHeld(f"{path} is locked by another holder") from None
        owner = os.getpid()
        try:
            yield
        finally:
            _release(fh, owner)


def _release(fh, owner: int) -> None:
    """Unlock ``fh``'s flock, unless this process is a child forked from ``owner``: a flock belongs to
    the open file description, which the child shares, so its unlock was the parent's too (a forked
    child that left the block, by an exception or ``sys.exit``, freed the parent's lock while it still
    worked under it). The child's closing of its descriptor leaves the lock with the parent's."""
    if os.getpid() == owner:
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
        fh = _open(path, create=True)
    except LockFileUnusableError:
        raise
    except OSError:
        try:
            fh = _open(path, create=False)
        except FileNotFoundError:
            pass  # no lock file: no exclusive holder
    if fh is None:
        yield
        return
    with fh:
        fcntl.flock(fh, fcntl.LOCK_SH)
        owner = os.getpid()
        try:
            yield
        finally:
            _release(fh, owner)


def lock_held(path: Path) -> bool:
    """Whether a live process holds ``path``'s :func:`exclusive_lock` now. Takes nothing a holder
    would wait on for longer than the probe (a shared ``flock`` tried without waiting, let go at
    once) and creates nothing: a missing file has no holder. A killed holder holds nothing (the OS
    dropped its lock), so ``False`` with work left undone means it was interrupted."""
    try:
        fh = _open(path, create=False)
    except FileNotFoundError:
        return False
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False
