"""Mount points: the roots, and the folders inside them, the scan saw mounted; which are unmounted since.

A drive mounted on a folder inside a root (``~/docs/usb``), unmounted, leaves that folder empty;
walked as it is, every file that was on the drive would be taken as deleted and a release
published without it. The scan records the mount points the mount table (:data:`~fabric_assets.
sources.walk.MOUNT_TABLE`) names under each root it walks, and a recorded one found empty and no
mount point is read as unmounted: its files stay, ``access_lost`` (as a root that was itself a
mount point does, :data:`SCAN_MOUNTED_STATE`). Only the table's mount
points are recorded, never the folders walked: a home of many folders costs nothing more.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from fabric_assets.sources.walk import is_mount_point

#: Catalog state: the IDs of the roots that were mount points when last walked. Such a root that
#: is no mount point now and lists nothing is a drive unmounted from under it (its mount point
#: left empty), not a folder whose files were all deleted.
SCAN_MOUNTED_STATE = "scan_mounted_roots"
#: Catalog state: root ID (as text) → the root-relative POSIX paths of the mount points under it
#: when it was last walked.
SCAN_INNER_MOUNTS_STATE = "scan_inner_mounts"
#: The most mount points recorded per root: a root over a container's or snap's tree of hundreds
#: of mounts keeps the first by path (the rest are walked as plain folders, as before).
MAX_INNER_MOUNTS = 256


def int_list(value: list) -> bool:
    """The shape :data:`SCAN_MOUNTED_STATE` is written in: root IDs."""
    return all(isinstance(v, int) for v in value)


def valid_record(value: dict) -> bool:
    """The shape :data:`SCAN_INNER_MOUNTS_STATE` is written in: lists of strings by root ID."""
    return all(isinstance(v, list) and all(isinstance(p, str) for p in v) for v in value.values())


def mount_points_under(root: Path, table: set[bytes], ignore_hidden: bool) -> list[str]:
    """The mount points in ``table`` (:func:`~fabric_assets.sources.walk.mount_points`) strictly
    under ``root``, as root-relative POSIX paths, sorted, at most :data:`MAX_INNER_MOUNTS`. Names
    the walk never takes in (not UTF-8; hidden, when ``ignore_hidden``) are left out: no source
    lies under them."""
    base = os.fsencode(os.path.realpath(root)).rstrip(b"/") + b"/"
    found = []
    for point in table:
        if not point.startswith(base) or point == base:
            continue
        try:
            rel = point[len(base):].decode("utf-8")
        except UnicodeDecodeError:
            continue
        if ignore_hidden and any(part.startswith(".") for part in rel.split("/")):
            continue
        found.append(rel.rstrip("/"))
    return sorted(set(found))[:MAX_INNER_MOUNTS]


def observe(root: Path, recorded: Iterable[str], table: set[bytes], kept_paths: Iterable[str],
            ignore_hidden: bool) -> tuple[list[tuple[str, str]], list[str]]:
    """``(unmounted, record)``: the ``recorded`` mount points under ``root`` now unmounted, each
    with its ``mount-unavailable`` skip reason, and the mount points to record for ``root`` now
    (those in ``table`` under it, and the unmounted ones: still unmounted at the next scan, they
    are not read as empty folders then either).

    Unmounted: now an empty folder and no mount point (the drive unmounted, its mount point left)
    that held a source still kept (``kept_paths``: their root-relative paths); its files must not
    be taken as deleted. A recorded mount point that is gone, or holds entries, is a folder like
    any other: what it holds now is the truth. One that held no source has nothing to keep."""
    kept = list(kept_paths)
    away = [rel for rel in recorded
            if any(p.startswith(f"{rel}/") for p in kept) and empty_unmounted(root / rel, table)]
    reasons = [(rel, f"mount-unavailable: {root / rel} was a mount point at the last scan and is an empty folder "
                "now (unmounted?); its files kept as access_lost") for rel in away]
    return reasons, sorted(set(mount_points_under(root, table, ignore_hidden)) | set(away))


def empty_unmounted(path: Path, table: set[bytes] | None = None) -> bool:
    """``path`` is a folder, no mount point, and lists no entry (one it cannot list is walked,
    and skipped as an unreadable folder there). Not followed if a symbolic link. ``table``:
    :func:`~fabric_assets.sources.walk.mount_points`, read once by the caller."""
    try:
        if path.is_symlink():
            return False
        with os.scandir(path) as entries:
            return next(entries, None) is None and not is_mount_point(path, table)
    except OSError:
        return False
