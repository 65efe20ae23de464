"""Content-addressed, write-once artifact store.

Layout: ``<root>/sha256/<2 hex>/<64 hex>``. A write goes to a temp file in the
same directory and is renamed into place atomically, so a reader never sees a
partial artifact. Writing the same hash twice is a no-op; the store refuses
bytes whose hash differs from the name they would be stored under.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


class ArtifactIntegrityError(Exception):
    """Stored bytes do not hash to their address (corruption or a bad write)."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


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
            os.chmod(tmp, 0o444)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return digest

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
