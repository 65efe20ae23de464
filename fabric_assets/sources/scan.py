"""Change detection and acquisition for folder sources.

A scan walks every registered root without following symlinks, prescreens
each file by ``(mtime_ns, size)`` against the catalog (and hashes one whose inode
changed since the last scan began even so), checks its size against
the caps before reading it, confirms a change by hashing the bytes while
streaming them into the artifact store, and records the acquisition. It
reports new, changed, moved, deleted and unsupported sources, every file or
folder it found but could not take in (``skipped``, with a reason; also kept
in the catalog for ``fabric status``), and the parse IDs that need a parse run.
An unchanged file whose parser identity changed (its version or its ``parsers``
settings) gets the parse ID its bytes have under the parser as it is now,
without reading the file. The Dagster sensor and ``fabric ingest`` share this
one function.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from fabric_assets.sources.mounts import (SCAN_INNER_MOUNTS_STATE, SCAN_MOUNTED_STATE, empty_unmounted, int_list,
                                          observe, valid_record)
from fabric_assets.sources.taken_back import recheck_taken_back
from fabric_assets.sources.walk import (is_fabric_home, is_mount_point, mount_points, refuse_other_file_name_encodings,
                                        resolved, walk)
from fabric_resources.parsing.document import machine_fault
from fabric_resources.parsing.registry import PARSERS, detect_media_type, parser_for
from fabric_resources import identity
from fabric_resources.artifact_store import ArtifactTooLarge, FileReplaced, NotARegularFile, file_digest
from fabric_resources.catalog import Catalog, SourceRow, str_map
from fabric_resources.home import FabricHome
from fabric_resources.schema import LAST_SCAN_STATE, LAST_TIME, SCAN_SKIPPED_STATE, SOURCES_LOCK

#: Catalog state: the parser identities (name → [name, version, config hash]) the last completed
#: scan pointed every unchanged source at. While they hold, no unchanged file needs its parse ID
#: derived again (:func:`_repoint_if_parser_changed`, a hash per file: a quarter of a no-change
#: scan at 10,000 files).
SCAN_PARSERS_STATE = "scan_parser_identities"

@dataclass(frozen=True)
class _KnownSources:
    """The source rows as this process's last scan of a catalog left them: true at change number
    ``change_seq`` while the catalog's last-scan record is still ``scan_id`` (no other scan, and no
    restored catalog, came since) and its purge mark is ``purge_mark`` (no row deleted)."""

    scan_id: str
    change_seq: int
    purge_mark: list[int]
    rows: dict[str, SourceRow]


#: Per catalog (``Catalog.describe()``): the last :class:`_KnownSources` of this process. A warm
#: process (a sensor's, ``fabric ingest`` run after run) then reads the rows written since its
#: last scan, not every row (at 10,000 sources: 5.5 ms against 30 ms, docs/benchmarks.md).
#: Least recently scanned first: a process that scans many homes keeps :data:`MAX_KNOWN_CATALOGS`.
_KNOWN: OrderedDict[str, _KnownSources] = OrderedDict()
#: Catalogs whose rows a process keeps between scans; a catalog past it is read whole next time.
MAX_KNOWN_CATALOGS = 8



_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def storable_mtime(mtime_ns: int) -> int:
    """``mtime_ns`` clamped to a signed 64-bit integer, what the catalog's SQLite and PostgreSQL
    columns hold: a file dated after 2262-04-11 or before 1677-09-21 (``touch -d @300000000000``)
    is recorded at that bound instead of failing the scan with an ``OverflowError``.

    >>> storable_mtime(300_000_000_000 * 10**9) == 2**63 - 1
    True
    """
    return min(max(mtime_ns, _INT64_MIN), _INT64_MAX)


def _known_sources(catalog: Catalog, purge_mark: list[int]) -> tuple[dict[str, SourceRow], int]:
    """Every source row by key (as :meth:`Catalog.sources` reads them) and the change number they
    are true at: the memo of the last scan plus the rows written since, when the memo still holds
    (same last scan, the catalog's ``purge_mark`` read now equal to the memo's, the same number of
    rows); else every row, read again."""
    memo = _KNOWN.get(catalog.describe())
    last = catalog.state(LAST_SCAN_STATE, memo=True)  # the memo's key: this scan rewrites it
    if (memo is not None and isinstance(last, dict) and last.get("scan_id") == memo.scan_id
            and purge_mark == memo.purge_mark):
        changed, n = catalog.sources_changed_after(memo.change_seq)
        rows = {**memo.rows, **{s.source_key: s for s in changed}}
        if len(rows) == catalog.source_count():
            return rows, n
    n, _ = catalog.change_marks()  # before reading: a row written meanwhile is read again next time
    return {s.source_key: s for s in catalog.sources()}, n


def _changed_since(catalog: Catalog, now: float) -> int:
    """Unix nanoseconds: a file whose inode changed after this (``st_ctime_ns``) is hashed even when
    its size and modification time are as recorded. The last scan's start (its end for a record
    from before starts were kept: a file written during that scan is then trusted, as before); no
    last scan, or one of another shape, checks no file this way (every source is new then).

    A last scan that started after ``now`` (this scan's start) ran while the clock was ahead: it
    has been set back since (NTP correcting a wrong hardware clock, a VM resumed from a snapshot).
    A file written since then has a change time before that start, so no change time can tell it
    from one written before: every file whose size and date are as recorded is hashed, once."""
    last = catalog.state(LAST_SCAN_STATE, memo=True)
    when = last.get("started_at", last.get("at")) if isinstance(last, dict) else None
    if not isinstance(when, (int, float)) or isinstance(when, bool) or not 0 <= when <= LAST_TIME:
        return 2**63 - 1
    if when > now:
        return _INT64_MIN
    return int(when * 1e9)


class PathOutsideRoot(ValueError):
    """A path that does not lie inside any registered root."""


@dataclass
class ScanReport:
    """What one scan found. Source keys are ``fs:<root-relative POSIX path>``."""

    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    touched: list[str] = field(default_factory=list)  # mtime changed, bytes did not
    returned: list[str] = field(default_factory=list)  # back (deleted or unreachable since) with its last bytes
    moved: list[tuple[str, str]] = field(default_factory=list)  # (old key, new key)
    deleted: list[str] = field(default_factory=list)
    access_lost: list[str] = field(default_factory=list)
    unsupported: list[tuple[str, str]] = field(default_factory=list)  # (key, media type)
    parse_ids_to_run: list[str] = field(default_factory=list)
    skipped_symlinks: int = 0
    #: Root-relative paths of files and folders whose names are not valid UTF-8, as printed
    #: (:func:`~fabric_assets.sources.walk.shown_name`: ``b\xff.txt``); a source key must be text,
    #: so they are skipped (a folder with all it holds) and reported.
    skipped_names: list[str] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)  # present but withheld by policy (not parsed)
    #: ``(path, reason)`` of what the walk found but did not take in: ``too-large``, ``unreadable``,
    #: ``not-a-regular-file`` (FIFO, socket, device), ``unreadable-folder``, ``name-not-utf-8``. The
    #: path is a source key (``fs:<root>/<path>``; its ``shown_name`` for non-UTF-8 names).
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: Unchanged bytes whose parse ID changed because their parser's identity did (version or
    #: ``parsers`` settings): re-parsed, and the new parse supersedes the old once it is ready.
    reparsed: list[str] = field(default_factory=list)

    @property
    def needs_activation(self) -> bool:
        return bool(self.new or self.changed or self.returned or self.moved or self.deleted)


def source_key_for(root: Path, path: Path, label: str) -> str:
    """``fs:<root label>/<POSIX path of path relative to root>``, e.g. ``fs:notes/incident.md``.

    Raises
    ------
    PathOutsideRoot
        If ``path`` (after resolving ``..``, not symlinks) is not inside ``root``.
    """
    root_abs = Path(os.path.abspath(root))
    p = Path(os.path.abspath(path))
    try:
        rel = p.relative_to(root_abs)
    except ValueError as exc:
        raise PathOutsideRoot(f"{path} is outside root {root}") from exc
    if not rel.parts:
        raise PathOutsideRoot(f"{path} is the root itself")
    return _key(label, rel.as_posix())


def _key(label: str, rel_posix: str) -> str:
    return f"fs:{label}/{rel_posix}"


def awaited_parse_ids(catalog: Catalog, among: Iterable[str] | None = None) -> set[str]:
    """Parse IDs some source still waits for: the current parse of a ``present`` (or
    ``access_lost``) source. A pending or unfinished parse that no such source names (its files
    were all deleted, or changed again before it ran) is dropped: never run again. With
    ``among``, only which of those (looked up by index: the cost follows ``among``)."""
    if among is None:
        return catalog.source_parse_ids(("present", "access_lost"))
    among = set(among)
    if not among:
        return set()
    return {s.parse_id for s in catalog.sources(parse_ids=among) if s.state in ("present", "access_lost")}


def size_cap(cfg, spec) -> int:
    """The most bytes the scan reads of a file parsed by ``spec`` (``None``: not parsed)."""
    parser_cap = spec.max_bytes(cfg.parsers) if spec is not None else None
    return min(cfg.sources.max_file_bytes, parser_cap or cfg.sources.max_file_bytes)


def scan(home: FabricHome, *, wait: bool = True) -> ScanReport:
    """Scan every registered root once and record what changed in the catalog, holding the
    catalog's ``sources`` lock: a cleanup, a purge or an in-place restore decides what no source
    needs from the catalog as it reads it, so it waits for the scan (which may take an old parse
    back), and the scan for it. ``wait=False`` (the source sensor, whose tick Dagster times out)
    takes the lock only if it is free.

    Raises
    ------
    fabric_assets.sources.walk.FileNameEncodingError
        If this process does not decode file names as UTF-8.
    fabric_resources.locks.LockHeld
        ``wait`` is false and another holds the lock; nothing was scanned.
    """
    refuse_other_file_name_encodings()
    with home.catalog.exclusive(SOURCES_LOCK, wait=wait):
        report = _scan(home)  # a parse taken back is checked first: nothing audited its rows meanwhile
        report.parse_ids_to_run += recheck_taken_back(home, report.new + report.changed + report.returned)
        return report


def _scan(home: FabricHome) -> ScanReport:
    report = ScanReport()
    cfg = home.config
    catalog = home.catalog
    now = time.time()
    changed_since = _changed_since(catalog, now)
    vanished_by_hash: dict[str, str] = {}
    new_keys_by_hash: dict[str, str] = {}
    known_runs = catalog.parse_ids()
    parser_identities: dict[str, tuple[str, str, str]] = {}  # per parser name, for this scan
    parsers_now = _parser_identities(cfg)
    # Every unchanged source already points at its parse under these parsers (the last completed
    # scan saw to it, and changed files are given it): nothing to re-derive.
    parsers_unchanged = catalog.state(SCAN_PARSERS_STATE, memo=True) == parsers_now
    # Roots are stored resolved and the walk joins plain names, so a resolved path compares as text.
    home_dir = str(home.layout.root.resolve())
    unwalked: list[str] = []  # labels of roots that could not be observed this time
    purge_mark = catalog.purge_mark()
    every_source, change_seq = _known_sources(catalog, purge_mark)
    # A damaged record only loses the unmount check for one scan: read as none, written again.
    was_mounted = set(catalog.state(SCAN_MOUNTED_STATE, list, valid=int_list, memo=True) or ())
    roots = catalog.roots()
    mounted = was_mounted & {r.root_id for r in roots}  # a purged root's ID may be given again
    inner_was = catalog.state(SCAN_INNER_MOUNTS_STATE, dict, valid=valid_record, memo=True) or {}
    inner = {k: v for k, v in inner_was.items() if k in {str(r.root_id) for r in roots}}
    table = mount_points()  # read once: every root and recorded mount point is checked against it
    for root in roots:
        root_path = Path(root.path)
        known = {k: s for k, s in every_source.items() if s.root_id == root.root_id}
        seen: set[str] = set()
        # Roots are stored resolved: one that resolves elsewhere now is, or lies under, a link made
        # since, and walking it would take in whatever folder the link names.
        moved = (resolved(root_path) or root_path) != root_path
        if moved:
            report.skipped.append((_key(root.label, ""), f"root-is-symlink: {root_path} now leads to "
                                   f"{resolved(root_path)}; not walked (register that folder itself to ingest it)"))
        elif not root_path.is_dir():
            report.skipped.append((_key(root.label, ""), f"root-unavailable: {root_path} is not a folder now (gone, "
                                   "unmounted, or a symbolic-link loop); not walked, its files kept as access_lost"))
        unmounted = not moved and root.root_id in was_mounted and empty_unmounted(root_path, table)
        if unmounted:
            report.skipped.append((_key(root.label, ""), f"root-unavailable: {root_path} was a mount point at the last "
                                   "scan and is an empty folder now (unmounted?); not walked, its files kept as "
                                   "access_lost"))
        if moved or unmounted or not root_path.is_dir():
            unwalked.append(root.label)
            with catalog.transaction(immediate=True) as con:
                for s in known.values():
                    if s.state == "present":
                        catalog.upsert_source(con, _with(s, state="access_lost", last_seen=now))
                        catalog.log_event(con, "source-access-lost", source_key=s.source_key)
                        report.access_lost.append(s.source_key)
            continue
        unlisted: list[str] = []  # folders that could not be listed: what they held is not observed

        def skip(rel: str, reason: str, label: str = root.label) -> None:
            report.skipped.append((_key(label, rel), reason))
            if reason.startswith("unreadable-folder"):
                unlisted.append(rel)

        def lose_access(prev: SourceRow | None) -> None:
            if prev and prev.state == "present":
                with catalog.transaction(immediate=True) as con:
                    catalog.upsert_source(con, _with(prev, state="access_lost", last_seen=now))
                    catalog.log_event(con, "source-access-lost", source_key=prev.source_key)
                report.access_lost.append(prev.source_key)

        # A root that is the home or lies in it (registered before ingest refused that), or that is
        # another Fabric home, is not walked: a home's own files (catalog, artifacts, admin token)
        # are never sources, and any a past scan took from it are deleted below like files that
        # went away.
        not_walked = True
        if root_path.resolve().is_relative_to(home_dir):
            skip("", f"root-inside-home: {root_path} is the Fabric home or inside it")
        elif is_fabric_home(str(root_path)):
            skip("", f"fabric-home: {root_path} is another Fabric home; its files are not sources")
        else:
            not_walked = False
        walked = () if not_walked else walk(root_path, cfg.sources.ignore_hidden, report, skip, home_dir)
        if not not_walked:
            (mounted.add if is_mount_point(root_path, table) else mounted.discard)(root.root_id)
            # A drive unmounted from a folder inside the root leaves it empty: what it held is not
            # observed (kept, access_lost), as in a folder that cannot be listed. Still recorded.
            away, inner[str(root.root_id)] = observe(root_path, inner.get(str(root.root_id), ()), table, (
                s.rel_path for s in known.values() if s.state in ("present", "access_lost")), cfg.sources.ignore_hidden)
            report.skipped.extend((_key(root.label, rel), reason) for rel, reason in away)
            unlisted.extend(rel for rel, _ in away)
        for file_path, rel_posix, st in walked:
            key = _key(root.label, rel_posix)
            if len(key) > identity.MAX_SOURCE_KEY_CHARS:  # no citation, scope or request could name it
                report.skipped.append((key, f"key-too-long: {len(key)} characters > {identity.MAX_SOURCE_KEY_CHARS}"))
                continue
            seen.add(key)
            prev = known.get(key)
            withheld = cfg.sources.is_withheld(key)
            if withheld:
                report.withheld.append(key)
            unchanged = (prev and prev.state == "present" and prev.mtime_ns == storable_mtime(st.st_mtime_ns)
                         and prev.size == st.st_size)
            if unchanged and (storable_mtime(st.st_mtime_ns) != st.st_mtime_ns or st.st_ctime_ns > changed_since):
                # Every date past 2262 (or before 1677) is recorded at the same bound, so an equal
                # date says nothing; and a file written since the last scan began whose size and
                # date are as recorded (`cp -p`, `rsync -t`, `tar x`, `touch -d` set the old date back;
                # none can set the inode's change time) may hold other bytes. Such a file counts as
                # unchanged only if its bytes hash the same.
                unchanged = file_digest(file_path, (st.st_dev, st.st_ino)) == prev.source_hash
            if unchanged and not parsers_unchanged and _repoint_if_parser_changed(
                    catalog, cfg, prev, withheld, parser_identities, now):
                report.reparsed.append(key)
                continue
            if unchanged and (withheld or prev.parse_id is None or prev.parse_id in known_runs):
                continue  # prescreen: unchanged (and parsed, unless withheld)
            media_type = detect_media_type(rel_posix.rpartition("/")[2])
            spec = parser_for(media_type)
            cap = size_cap(cfg, spec)
            # Checked before reading: a file over the cap is never read, hashed or stored. A source
            # whose new version is too large keeps its last good version (like a failed parse).
            if st.st_size > cap:
                report.skipped.append((key, f"too-large: {st.st_size} bytes > {cap}"))
                continue
            try:
                stored = home.artifacts.put_file(file_path, cap, (st.st_dev, st.st_ino))
            except FileReplaced:  # it, or a folder above it, was swapped after the listing
                report.skipped.append((key, "changed-while-scanned: not the file listed (replaced, renamed or "
                                       "deleted); read again at the next scan"))
                continue
            except ArtifactTooLarge:  # it grew after the stat
                report.skipped.append((key, f"too-large: more than {cap} bytes when read"))
                continue
            except NotARegularFile:  # replaced by a FIFO, socket or device after the stat
                report.skipped.append((key, "not-a-regular-file: replaced while scanned"))
                seen.discard(key)
                continue
            except OSError as exc:
                if machine_fault(exc):  # the home is full (or read-only): Fabric's fault, not the file's
                    raise
                report.skipped.append((key, f"unreadable: {type(exc).__name__}: {exc.strerror or exc}"))
                lose_access(prev)
                continue
            digest, size, mtime_ns = stored.digest, stored.size, storable_mtime(stored.mtime_ns)
            if prev and prev.state == "present" and prev.source_hash == digest and prev.media_type == media_type:
                with catalog.transaction(immediate=True) as con:
                    # The parse ID under the parser as it is now (e.g. no longer withheld: parse it
                    # now; or its settings changed: the new parse supersedes the old once ready).
                    parse_id = prev.parse_id if spec is None else _ensure_parse_run(
                        con, catalog, cfg, spec, digest, media_type, create=not withheld)
                    catalog.upsert_source(con, _with(prev, mtime_ns=mtime_ns, size=size, last_seen=now,
                                                     parse_id=parse_id))
                report.touched.append(key)
                continue
            parse_id = None
            # A file back with the bytes it held when last seen (deleted or unreachable since) reuses
            # its parse: not new.
            status = ("changed" if prev and prev.state == "present" else
                      "returned" if prev and prev.source_hash == digest else "new")
            with catalog.transaction(immediate=True) as con:
                if spec is not None:
                    # A withheld source is acquired but not parsed: nothing of it is computed
                    # alongside visible documents (not even in a shared embedding batch).
                    parse_id = _ensure_parse_run(con, catalog, cfg, spec, digest, media_type, create=not withheld)
                row = SourceRow(
                    source_key=key, root_id=root.root_id, rel_path=rel_posix, state="present",
                    media_type=media_type, mtime_ns=mtime_ns, size=size,
                    source_hash=digest, parse_id=parse_id,
                    first_seen=prev.first_seen if prev else now, last_seen=now,
                )
                catalog.upsert_source(con, row)
                catalog.record_acquisition(con, key, digest, mtime_ns, size)
                catalog.log_event(con, f"source-{status}", source_key=key, parse_id=parse_id,
                                  detail={"source_hash": digest})
            if spec is None:
                report.unsupported.append((key, media_type))
            getattr(report, status).append(key)
            new_keys_by_hash.setdefault(digest, key)
        # Files under a folder that could not be listed were not observed, so they are not deleted.
        for rel in unlisted:
            prefix = f"{rel}/" if rel else ""
            for k, s in known.items():
                if k not in seen and s.rel_path.startswith(prefix):
                    seen.add(k)
                    lose_access(s)
        for key, reason in report.skipped:
            if reason.startswith("unreadable:") and key in known and key not in seen:
                seen.add(key)  # an entry that cannot be stat'ed is still there: not deleted
                lose_access(known[key])
        # The root is readable again, so a source lost with it (access_lost) whose file is not
        # here any more was deleted meanwhile; keeping it would serve a file that no longer exists.
        gone = sorted((s for k, s in known.items() if k not in seen and s.state in ("present", "access_lost")),
                      key=lambda s: s.source_key)
        if gone:
            with catalog.transaction(immediate=True) as con:
                for s in gone:
                    catalog.upsert_source(con, _with(s, state="deleted", last_seen=now))
                    catalog.log_event(con, "source-deleted", source_key=s.source_key, parse_id=s.parse_id)
                    report.deleted.append(s.source_key)
                    if s.source_hash:
                        vanished_by_hash[s.source_hash] = s.source_key
    for digest, old_key in vanished_by_hash.items():
        if digest in new_keys_by_hash:
            report.moved.append((old_key, new_keys_by_hash[digest]))
    pending = [r.parse_id for r in catalog.parse_runs(status="pending")]
    awaited = awaited_parse_ids(catalog, among=pending)
    report.parse_ids_to_run = [p for p in pending if p in awaited]
    _record_skipped(catalog, report.skipped, unwalked)
    scan_id = uuid.uuid4().hex
    catalog.set_state(LAST_SCAN_STATE, {"at": time.time(), "started_at": now, "scan_id": scan_id, "changes": len(
        report.new) + len(report.changed) + len(report.returned) + len(report.deleted) + len(report.moved)})
    # The rows as read at the start: those this scan wrote have later change numbers, read next time.
    key = catalog.describe()
    _KNOWN[key] = _KnownSources(scan_id, change_seq, purge_mark, every_source)
    _KNOWN.move_to_end(key)
    while len(_KNOWN) > MAX_KNOWN_CATALOGS:
        _KNOWN.popitem(last=False)
    if not parsers_unchanged:
        catalog.set_state(SCAN_PARSERS_STATE, parsers_now)
    if mounted != was_mounted:
        catalog.set_state(SCAN_MOUNTED_STATE, sorted(mounted))
    if (inner := {k: v for k, v in inner.items() if v}) != inner_was:
        catalog.set_state(SCAN_INNER_MOUNTS_STATE, inner)
    return report


def _parser_identities(cfg) -> dict[str, list[str]]:
    """Every registered parser's identity under ``cfg.parsers``: what a source's parse ID derives
    from beside its bytes (:func:`_ensure_parse_run`)."""
    out = {}
    for spec in PARSERS:
        ident = spec.identity(cfg.parsers)
        out[spec.name] = [ident.name, ident.version, ident.config_hash]
    return out


def _record_skipped(catalog: Catalog, skipped: list[tuple[str, str]], unwalked: list[str]) -> None:
    """Keep this scan's skipped paths for ``fabric status`` (those of roots it could not walk
    are carried over from the last scan that could)."""
    # A report this scan rewrites: damaged (None), it is written again even when nothing is skipped.
    previous = catalog.state(SCAN_SKIPPED_STATE, dict, valid=str_map, memo=True)
    kept = {k: v for k, v in (previous or {}).items() if any(k.startswith(f"fs:{label}/") for label in unwalked)}
    current = {**kept, **dict(skipped)}
    if current != previous:
        catalog.set_state(SCAN_SKIPPED_STATE, current)


def _repoint_if_parser_changed(catalog, cfg, prev: SourceRow, withheld: bool,
                               memo: dict[str, tuple[str, str, str]], now: float) -> bool:
    """Point an unchanged source at the parse ID its bytes get under the parser as configured now,
    when that differs from the one it has (a parser version or ``parsers`` setting changed);
    create that parse run unless withheld. True if it did. No file is read: the source hash is known.

    ``memo`` caches the parser identity (name, version, config hash) per parser for one scan.
    """
    if prev.parse_id is None or prev.source_hash is None:
        return False
    spec = parser_for(prev.media_type)
    if spec is None:
        return False
    parser = memo.get(spec.name)
    if parser is None:  # the parser identity, as _ensure_parse_run derives it
        ident = spec.identity(cfg.parsers)
        parser = memo[spec.name] = (ident.name, ident.version, ident.config_hash)
    if identity.parse_id(prev.source_hash, *parser) == prev.parse_id:
        return False
    with catalog.transaction(immediate=True) as con:
        parse_id = _ensure_parse_run(con, catalog, cfg, spec, prev.source_hash, prev.media_type, create=not withheld)
        catalog.upsert_source(con, _with(prev, parse_id=parse_id, last_seen=now))
        catalog.log_event(con, "source-reparse", source_key=prev.source_key, parse_id=parse_id,
                          detail={"previous_parse_id": prev.parse_id, "reason": "parser identity changed"})
    return True


def _ensure_parse_run(con, catalog, cfg, spec, digest: str, media_type: str, create: bool = True) -> str:
    """The parse ID of ``digest`` under ``spec``; creates its pending parse run if asked."""
    parser = spec.identity(cfg.parsers)
    parse_id = identity.parse_id(digest, parser.name, parser.version, parser.config_hash)
    if create:
        catalog.ensure_parse_run(
            con, parse_id=parse_id, source_hash=digest, media_type=media_type,
            parser_name=parser.name, parser_version=parser.version, parser_config_hash=parser.config_hash,
        )
    return parse_id


def _with(row: SourceRow, **changes) -> SourceRow:
    return row._replace(**changes)
