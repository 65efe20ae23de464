"""A cited source's current bytes, as :func:`fabric_query.resolve.resolve` reads and compares them."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from fabric_query.types import Citation, ResolveCheck
from fabric_resources.catalog import SourceRow
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
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
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

    As for a kept release, only a hash the home recorded is compared with the file (the cited
    parse run's, the source's catalog row or its entry in the current release): a citation made up
    around a guessed hash learns nothing about the bytes. ``row``: the source's visible catalog
    row; ``active``: its entry in the current release (``{}`` when none). Never raises for the file:
    one that cannot be read is the check's reason."""
    run = home.catalog.parse_run(citation.parse_id)
    recorded = {row.source_hash, active.get("source_hash"), run.source_hash if run is not None else None}
    if citation.source_hash not in recorded:
        return ResolveCheck(check="source-bytes", ok=False, detail=(
            f"cannot be checked: release {citation.release_id} is gone and this home no longer records the cited "
            "source hash (its parse was removed too)"))
    data, why = read_source(home, row, None)
    if data is not None and hashlib.sha256(data).hexdigest() != citation.source_hash:
        data, why = None, "source bytes changed since the citation"
    return ResolveCheck(check="source-bytes", ok=data is not None, detail=why or (
        f"current bytes match the cited hash (release {citation.release_id} is gone: search again to cite them)"))
