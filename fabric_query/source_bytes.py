"""A cited source's current bytes, as :func:`fabric_query.resolve.resolve` reads and compares them."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from fabric_query.types import Citation, ResolveCheck
from fabric_resources.catalog import SourceRow
from fabric_resources.long_paths import open_path
from fabric_resources.home import FabricHome


def read_source(home: FabricHome, row: SourceRow, expected_size: int | None) -> tuple[bytes | None, str]:
    """The file's bytes (no symlink followed, regular files only), or None and why not.

    The reason names the file by its source key, never its absolute path: a check is shown to
    whoever asked (an HTTP or MCP client too), and the server's folder layout is not theirs."""
    roots = {r.root_id: r.path for r in home.catalog.roots()}
    if row.root_id not in roots:
        return None, "its folder is no longer registered"
    path = Path(roots[row.root_id]) / row.rel_path
    key = row.source_key
    try:
        # O_NONBLOCK: a FIFO put in the file's place must not hang the open.
        fd = open_path(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None, f"source file {key} no longer exists"
    except OSError as exc:
        if os.path.islink(path):
            return None, f"{key} is now a symlink"
        return None, f"cannot read {key}: {exc.strerror or type(exc).__name__}"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, f"{key} is no longer a regular file"
        if expected_size is not None and st.st_size != expected_size:
            return None, "source bytes changed since the citation (another size)"
        with os.fdopen(fd, "rb", closefd=True) as fh:
            fd = -1
            return fh.read(), ""
    except OSError as exc:
        return None, f"cannot read {key}: {exc.strerror or type(exc).__name__}"
    finally:
        if fd >= 0:
            os.close(fd)


def retired_release_bytes(home: FabricHome, citation: Citation, row: SourceRow, active: dict) -> ResolveCheck:
    """The ``source-bytes`` check of a citation whose release is no longer kept (retention, a
    purge): the file's current bytes against the cited ``source_hash``, so that ``resolve`` says
    whether the cited bytes are still there (it answered only that the release was gone). The
    citation stays ``stale`` either way: its text cannot be re-derived through a release that is gone.

    As for a kept release, only a hash the home recorded *for this source* (its catalog row or its
    entry in the current release) is ever compared with the file: a citation made up around a
    guessed hash learns nothing about bytes that no one was shown. When the cited hash is not one
    of those, the file's bytes are still told apart from the cited ones if they are the recorded
    ones (which differ from the cited hash, so the cited bytes are gone); else nothing is said. No
    record shared with other sources decides the answer: a parse run is keyed by its bytes alone,
    and naming a visible file with the hash and parse ID of a withheld one's guessed bytes made the
    answer tell a right guess from a wrong one (trial 23c). ``row``: the source's visible catalog
    row; ``active``: its entry in the current release (``{}`` when none). Never raises for the
    file: one that cannot be read is the check's reason, whatever the citation holds."""
    recorded = {row.source_hash, active.get("source_hash")} - {None}
    data, why = read_source(home, row, None)
    if data is None:
        return ResolveCheck(check="source-bytes", ok=False, detail=why)
    digest = hashlib.sha256(data).hexdigest()
    if citation.source_hash in recorded and digest == citation.source_hash:
        return ResolveCheck(check="source-bytes", ok=True, detail=(
            f"current bytes match the cited hash (release {citation.release_id} is gone: search again to cite them)"))
    if citation.source_hash in recorded or digest in recorded:
        return ResolveCheck(check="source-bytes", ok=False, detail="source bytes changed since the citation")
    # Neither hash is this source's recorded one: the file changed since Fabric last read it, and
    # comparing it with a hash no one was shown would confirm a guess of its unpublished bytes.
    return ResolveCheck(check="source-bytes", ok=False, detail=(
        f"cannot be checked: release {citation.release_id} is gone, this home does not record the cited source "
        "hash for this source, and the file changed since Fabric last read it"))
