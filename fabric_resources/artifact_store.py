"""Content-addressed, write-once artifact store.

Layout: ``<root>/sha256/<2 hex>/<64 hex>``. A write goes to a temp file in the
same directory (or, for a streamed file whose hash is known only at the end,
``<root>/incoming/``, on the same file system) and is renamed into place
atomically, so a reader never sees a partial artifact. Writing the same hash
twice is a no-op; the store refuses bytes whose hash differs from the name they
would be stored under.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fabric_resources.long_paths import open_path

#: Bytes per read when a file is streamed into the store.
STREAM_CHUNK_BYTES = 1 << 20


def read_only_mode() -> int:
    """The mode of a stored file: read-only (the store is content-addressed: bytes never change)
    and within the process's umask. A fixed 0o444 made every stored copy of a document readable by
    all under ``umask 077``, wherever the home's folder lets others in (one the user made)."""
    mask = os.umask(0o077)  # no getter before Python 3.13's os.getumask(); 0o077 meanwhile errs private
    os.umask(mask)
    return 0o444 & ~mask


class ArtifactIntegrityError(Exception):
    """Stored bytes do not hash to their address (corruption or a bad write)."""


class ArtifactTooLarge(Exception):
    """A streamed file held more bytes than the caller admits; nothing was stored."""


class NotARegularFile(Exception):
    """The path opened is not a regular file (a FIFO, socket or device swapped in after a stat)."""


class FileReplaced(Exception):
    """The path opened is not the file listed (another device or inode): it, or a folder above
    it, was replaced after the listing (a folder swapped for a symbolic link, say)."""


@dataclass(frozen=True)
class StoredFile:
    """What :meth:`ArtifactStore.put_file` stored: the digest, the bytes read, the file's mtime
    when it was opened (nanoseconds)."""

    digest: str
    size: int
    mtime_ns: int


#: How a source file is opened to be read: no symlink followed, and never blocking (a FIFO swapped
#: in for the file cannot hang the caller).
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(path: str | os.PathLike, listed: tuple[int, int] | None = None) -> str | None:
    """SHA-256 (hex) of a regular file's bytes, read as :meth:`ArtifactStore.put_file` reads them (no
    symlink followed, never blocking on a FIFO), without storing them; ``None`` when the path cannot
    be opened or read, is not a regular file, or is not the file ``listed`` (device, inode) names
    (the caller then takes the storing path and its errors)."""
    try:
        fd = open_path(path, _READ_FLAGS)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (listed is not None and (opened.st_dev, opened.st_ino) != listed):
            return None
        try:
            return hashlib.file_digest(f, "sha256").hexdigest()
        except OSError:
            return None


class ArtifactStore:
    """Write-once blobs addressed by SHA-256 of their bytes."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path_for(self, digest: str) -> Path:
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError(f"not a SHA-256 hex digest: {digest!r}")
        return self.root / "sha256" / digest[:2] / digest

    def has(self, digest: str) -> bool:
        return self.path_for(digest).exists()

    def put(self, data: bytes, expected_digest: str | None = None) -> str:
        """Store ``data``; return its SHA-256 hex digest.

        Raises
        ------
        ArtifactIntegrityError
            If ``expected_digest`` is given and differs from the bytes' hash.
        """
        digest = sha256_hex(data)
        if expected_digest is not None and expected_digest != digest:
            raise ArtifactIntegrityError(f"expected {expected_digest}, bytes hash to {digest}")
        target = self.path_for(digest)
        if target.exists():
            return digest
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, read_only_mode())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return digest

    def put_file(self, path: str | os.PathLike, max_bytes: int, listed: tuple[int, int] | None = None) -> StoredFile:
        """Stream a regular file into the store, hashing it on the way (memory stays bounded).

        Opened without following a symlink and without blocking (a FIFO swapped in for the file
        cannot hang the caller), read in ``STREAM_CHUNK_BYTES`` chunks; the digest is of the bytes
        actually read, so a file changing meanwhile is stored as what was read, never mixed.

        Raises
        ------
        ArtifactTooLarge
            More than ``max_bytes`` bytes were read; nothing is stored.
        NotARegularFile
            ``path`` is not a regular file once opened.
        FileReplaced
            ``listed`` (device, inode: the file a folder listing showed) is given and ``path``
            opens another file, or none (deleted or renamed since the listing).
        OSError
            The file cannot be opened or read (permission, I/O error, a symlink).
        """
        try:
            fd = open_path(path, _READ_FLAGS)
        except FileNotFoundError:
            if listed is None:
                raise
            # Gone since the listing: not a file that cannot be read, and not yet known to be deleted.
            raise FileReplaced(f"{path} is gone since it was listed (deleted or renamed)") from None
        incoming = self.root / "incoming"
        tmp: str | None = None
        try:
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode):
                raise NotARegularFile(f"{path} is not a regular file")
            if listed is not None and (opened.st_dev, opened.st_ino) != listed:
                raise FileReplaced(f"{path} is not the file listed")
            incoming.mkdir(parents=True, exist_ok=True)
            out_fd, tmp = tempfile.mkstemp(dir=incoming, prefix=".tmp-")
            digest, size = hashlib.sha256(), 0
            with os.fdopen(out_fd, "wb") as out:
                while chunk := os.read(fd, STREAM_CHUNK_BYTES):
                    size += len(chunk)
                    if size > max_bytes:
                        raise ArtifactTooLarge(f"{path}: more than {max_bytes} bytes")
                    digest.update(chunk)
                    out.write(chunk)
                hex_digest = digest.hexdigest()
                target = self.path_for(hex_digest)
                if not target.exists():
                    out.flush()
                    os.fsync(out.fileno())
            if not target.exists():
                os.chmod(tmp, read_only_mode())
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp, target)
                tmp = None
            return StoredFile(hex_digest, size, opened.st_mtime_ns)
        finally:
            os.close(fd)
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)

    def restore(self, digest: str, path: str | os.PathLike, size: int | None = None) -> bool:
        """Store again the artifact ``digest`` from ``path`` when the file there holds exactly those
        bytes, replacing a stored copy that is missing or corrupt; return whether it did. Read as
        :meth:`put_file` reads (no symlink followed, never blocking, streamed): bytes that hash to
        ``digest`` are the bytes recorded, whatever the path now leads to. With ``size`` (the bytes
        recorded), reading stops as soon as the file is longer.

        Raises
        ------
        OSError
            The store cannot be written (a path that cannot be opened or read returns False).
        """
        target = self.path_for(digest)
        try:
            fd = open_path(path, _READ_FLAGS)
        except OSError:
            return False
        incoming = self.root / "incoming"
        tmp: str | None = None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False
            incoming.mkdir(parents=True, exist_ok=True)
            out_fd, tmp = tempfile.mkstemp(dir=incoming, prefix=".tmp-")
            hashed, read = hashlib.sha256(), 0
            with os.fdopen(out_fd, "wb") as out:
                while True:
                    try:
                        chunk = os.read(fd, STREAM_CHUNK_BYTES)
                    except OSError:
                        return False
                    if not chunk:
                        break
                    read += len(chunk)
                    if size is not None and read > size:
                        return False
                    hashed.update(chunk)
                    out.write(chunk)
                if hashed.hexdigest() != digest:
                    return False
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, read_only_mode())
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, target)
            tmp = None
            return True
        finally:
            os.close(fd)
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)

    def get(self, digest: str) -> bytes:
        """Read and verify an artifact.

        Raises
        ------
        FileNotFoundError
            No artifact with that digest.
        ArtifactIntegrityError
            The stored bytes no longer hash to ``digest``.
        """
        data = self.path_for(digest).read_bytes()
        if sha256_hex(data) != digest:
            raise ArtifactIntegrityError(f"artifact {digest} is corrupt")
        return data

    def delete(self, digest: str) -> bool:
        """Remove the artifact ``digest`` (the store is write-once, not delete-never: a purge removes
        bytes the home must no longer hold); True if it was there."""
        path = self.path_for(digest)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        return True

    def digests(self) -> set[str]:
        """Every stored digest (a walk of the store; for purge and retention checks)."""
        base = self.root / "sha256"
        if not base.exists():
            return set()
        return {p.name for d in base.iterdir() if d.is_dir() for p in d.iterdir() if len(p.name) == 64}
