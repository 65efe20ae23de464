"""The walk under one folder source's root: every regular file, never following a symbolic link.

What it finds but does not yield (links, special files, unreadable entries, names that are not
UTF-8, another Fabric home) it reports, so the scan (:mod:`fabric_assets.sources.scan`) can list
each skip with its reason.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
from collections.abc import Callable
from pathlib import Path

from fabric_resources.long_paths import open_path
from fabric_resources.schema import HomeLayout

#: Opening a folder to list it: never through a symbolic link.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
#: A folder that is not, when opened, the one its parent's listing showed. Worded as an unlisted
#: folder: what it held is not observed this time, so nothing in it is taken as deleted.
_CHANGED = ("unreadable-folder: changed while scanned (renamed, removed, or became a symbolic link or "
            "another folder); read again at the next scan")
#: Why a file is not a regular file, by ``stat`` type test.
_SPECIAL_FILES = ((stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                  (stat.S_ISBLK, "block device"))



class FileNameEncodingError(RuntimeError):
    """This process decodes file names in an encoding other than UTF-8 (a Latin-1 locale, not in
    Python's UTF-8 mode): its scan would key files by other names than every other scan."""


def refuse_other_file_name_encodings() -> None:
    """Raise :class:`FileNameEncodingError` unless this process decodes file names as UTF-8."""
    # `fabric` restarts itself in UTF-8 mode (fabric_assets.cli.main); a Dagster daemon or a Python
    # process started under such a locale by other means would record `日本語.txt` under a mojibake
    # key and take in names that are not UTF-8: refused before anything is recorded.
    encoding = sys.getfilesystemencoding()
    if encoding.lower().replace("-", "") != "utf8":
        raise FileNameEncodingError(
            f"this process reads file names as {encoding} (its locale), not UTF-8, so it would record "
            "them under other keys: run it with PYTHONUTF8=1 (Python's UTF-8 mode) or a UTF-8 locale")


def _is_utf8(name: str) -> bool:
    # os.scandir decodes undecodable bytes as lone surrogates (PEP 383), which UTF-8 rejects.
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_name(rel: str) -> str:
    r"""A root-relative path whose name is not valid UTF-8, as ``fabric`` prints names: each byte
    UTF-8 does not read as ``\xNN`` (the escape ``fabric`` prints a control character with), the
    rest as it is. ``ascii()`` quoted the whole path inside the key (``fs:notes/'b\udcff.txt'``)
    and named the byte by Python's stand-in for it (PEP 383), not by its value.

    >>> shown_name("caf\udce9/b\udcff.txt")
    'caf\\xe9/b\\xff.txt'
    """
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


SkipCallback = Callable[[str, str], None]


def walk(root: Path, ignore_hidden: bool, report, skip: SkipCallback, skip_dir: str | None = None):
    """Yield ``(path, root-relative POSIX path, stat)`` for regular files under ``root``; never
    follows symlinks; never enters ``skip_dir`` (the Fabric home, when it lies inside a root:
    its own tables and logs are not sources). Everything else found is reported through
    ``skip(rel_posix, reason)``: another Fabric home (not entered), FIFOs, sockets and devices
    (never opened: a FIFO would block),
    entries that cannot be stat'ed, and folders that cannot be listed (``rel_posix`` ``""`` for
    the root itself).

    ``report`` (a :class:`fabric_assets.sources.scan.ScanReport`) counts the symbolic links
    skipped and lists the names that are not UTF-8. Each folder is listed through a descriptor
    opened without following a link and checked against its parent's listing (device, inode): one
    swapped meanwhile is skipped as unlisted. The caller opens each yielded file by its path and
    checks it is the file listed (``stat``'s device and inode): :meth:`ArtifactStore.put_file
    <fabric_resources.artifact_store.ArtifactStore.put_file>`'s ``listed``.

    The relative path is built from the entry names on the way down rather than derived per file
    with ``pathlib`` (which was two thirds of a no-change scan at 2,000 files).
    """
    stack: list[tuple[str, str, tuple[int, int] | None]] = [(str(root), "", None)]
    while stack:
        d, rel, listed = stack.pop()
        # Each folder is opened without following a link and must be the folder its parent's
        # listing showed (device and inode): one swapped for a link (or another folder) between
        # the two is not walked, so a walk that takes seconds cannot be steered out of the root.
        try:
            fd = open_path(d, _DIR_FLAGS)  # a folder past PATH_MAX too
        except OSError as exc:
            # ENOENT: listed by its parent a moment ago, so renamed or removed since, not unreadable.
            swapped = exc.errno in (errno.ELOOP, errno.ENOTDIR) or (exc.errno == errno.ENOENT and listed is not None)
            skip(rel, _CHANGED if swapped else f"unreadable-folder: {type(exc).__name__}: {exc.strerror or exc}")
            continue
        try:
            opened = os.fstat(fd)
            if listed is not None and (opened.st_dev, opened.st_ino) != listed:
                skip(rel, _CHANGED)
                continue
            try:
                entries = sorted(os.scandir(fd), key=lambda e: e.name)
            except OSError as exc:
                skip(rel, f"unreadable-folder: {type(exc).__name__}: {exc.strerror or exc}")
                continue
            if rel and _lists_a_home(entries):
                skip(rel, "fabric-home: another Fabric home (a restored snapshot, say); its files are not sources")
                continue
            for e in entries:
                if ignore_hidden and e.name.startswith("."):
                    continue
                if e.is_symlink():
                    report.skipped_symlinks += 1
                    continue
                child = f"{rel}/{e.name}" if rel else e.name
                if not _is_utf8(e.name):
                    report.skipped_names.append(shown_name(child))
                    skip(shown_name(child), "name-not-utf-8")
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError as exc:
                    skip(child, f"unreadable: {type(exc).__name__}: {exc.strerror or exc}")
                    continue
                path = os.path.join(d, e.name)
                if stat.S_ISDIR(st.st_mode):
                    if path == skip_dir:
                        continue
                    stack.append((path, child, (st.st_dev, st.st_ino)))
                elif stat.S_ISREG(st.st_mode):
                    yield path, child, st
                else:
                    kind = next((name for test, name in _SPECIAL_FILES if test(st.st_mode)), "special file")
                    skip(child, f"not-a-regular-file: {kind}")
        finally:
            os.close(fd)


_HOME_MARKS = (HomeLayout(Path(".")).catalog_file.name, HomeLayout(Path(".")).artifacts.name)


def _lists_a_home(entries: list[os.DirEntry]) -> bool:
    """Whether a folder's entries are a Fabric home's (:func:`is_fabric_home`), from the listing
    the walk already holds: checking each folder with two ``stat`` calls of its own made the walk
    1.5x slower (5.9 µs per folder, ``docs/benchmarks.md``)."""
    catalog, artifacts = _HOME_MARKS
    found = {e.name: e for e in entries if e.name in _HOME_MARKS}
    return (catalog in found and artifacts in found and found[catalog].is_file(follow_symlinks=False)
            and found[artifacts].is_dir(follow_symlinks=False))


def resolved(path: Path) -> Path | None:
    """``path`` with every symbolic link resolved, or ``None`` where that fails (a link loop)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: Python 3.11's "Symlink loop"
        return None


def is_fabric_home(folder: str) -> bool:
    """Whether ``folder`` is a Fabric home with a local catalog (its ``catalog.sqlite3`` beside
    its ``artifacts`` folder): its tables, logs and stored bytes are never sources."""
    layout = HomeLayout(Path(folder))
    return layout.catalog_file.is_file() and layout.artifacts.is_dir()


__all__ = ["SkipCallback", "is_fabric_home", "resolved", "walk"]


def not_a_folder(path: str | os.PathLike) -> str:
    """Why ``path`` (not a directory) cannot be an ingest root, in one line: nothing is there (a
    typo read as "is not a directory" sent users looking for a file), or it is not a folder."""
    if not os.path.lexists(path):
        return f"{path}: no such folder"
    if os.path.isfile(path):
        return f"{path} is a file, not a directory: `fabric ingest` takes a folder (the one holding it, say)"
    return f"{path} is not a directory"


#: Linux's table of the mount points this process sees (absent elsewhere: ``os.path.ismount`` alone).
MOUNT_TABLE = "/proc/self/mountinfo"


def mount_points() -> set[bytes]:
    r"""Every mount point :data:`MOUNT_TABLE` names, as its path's bytes (its octal escapes for
    space, tab, newline and ``\`` read back); empty where there is no table (not Linux)."""
    try:
        with open(MOUNT_TABLE, "rb") as fh:
            table = fh.read()
    except OSError:
        return set()
    found = set()
    for line in table.splitlines():
        fields = line.split(b" ")  # ID, parent ID, major:minor, root, mount point, …
        if len(fields) > 4:
            found.add(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), fields[4]))
    return found


def is_mount_point(path: str | os.PathLike, table: set[bytes] | None = None) -> bool:
    """Whether ``path`` is a mount point: ``os.path.ismount``, or listed in :data:`MOUNT_TABLE`
    (``table``: :func:`mount_points` read once by the caller).
    ``os.path.ismount`` compares the folder's device with its parent's, so it misses a bind mount
    of a folder from the same file system (``mount --bind /data/docs /srv/docs``): the table
    names every mount point, as its own path (octal escapes for space, tab, newline, ``\\``)."""
    if os.path.ismount(path):
        return True
    return os.fsencode(os.path.realpath(path)) in (mount_points() if table is None else table)
