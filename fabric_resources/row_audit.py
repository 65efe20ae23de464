"""Rows changed behind Fabric's back: each parse's live rows in a table against what its last
write recorded.

Every write of a parse's partition records how many rows the parse has in each table it wrote
(:func:`~fabric_resources.catalog.record_row_counts`). Rows removed from (or added to) a table by
anything else — a Lance ``delete`` run by hand, a tool that rewrote the table, a copy of another
home's files — keep every data file readable, so neither Lance's ``validate`` nor ``fabric repair``'s
fragment check sees them; the next activation pins that version and the release serves those
parses with rows missing (the vector digests then turn the dense channel off for every query).
:func:`changed_rows` finds them by counting; ``fabric status`` names them and ``fabric repair``
re-derives the parses named.

``fabric status`` audits every active parse on each call (100k parses: ~1.5 s of decoding and
scanning); :func:`audited_rows` keeps the last answer in the home under a digest of everything the
audit reads, so a call on an unchanged home does not audit again.

A parse written by an older Fabric (no count recorded for a table) is not judged for that table.
A parse being rewritten while the rows are counted (its write lands between the count and the
read of its record) can be named once; its recorded count changes with the write, so the two
readings of the catalog around the count tell most such parses apart (they are skipped).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fabric_resources.catalog import ParseRun, ParseRunOverview, row_counts
from fabric_resources.home import FabricHome
from fabric_resources.object_store import TableStoreUnavailableError
from fabric_resources.schema import TABLES


@dataclass(frozen=True)
class RowsChanged:
    """One table whose latest version holds, for some parses, another number of rows than their
    last write recorded."""

    table: str
    #: ``(parse ID, recorded rows, live rows)``, in parse-ID order.
    parses: tuple[tuple[str, int, int], ...]

    @property
    def missing(self) -> int:
        """Rows fewer than recorded, summed over the parses that lost rows."""
        return sum(max(0, recorded - live) for _, recorded, live in self.parses)

    @property
    def extra(self) -> int:
        """Rows more than recorded, summed over the parses that gained rows."""
        return sum(max(0, live - recorded) for _, recorded, live in self.parses)

    def describe(self) -> str:
        """``"chunk_vectors: 2 parse(s), 3 row(s) fewer and 0 more than written"``."""
        return (f"{self.table}: {len(self.parses)} parse(s), {self.missing} row(s) fewer and {self.extra} more "
                "than written")


def _recorded(home: FabricHome, parse_ids: list[str]) -> dict[str, dict[str, int]]:
    return {r.parse_id: row_counts(r) for r in home.catalog.parse_runs(parse_ids)}


def changed_rows(home: FabricHome, parse_ids: Iterable[str], tables: Iterable[str] | None = None,
                 runs: Iterable[ParseRun | ParseRunOverview] | None = None) -> list[RowsChanged]:
    """The tables (all of :data:`~fabric_resources.schema.TABLES` by default, in that order) whose
    latest version holds another number of rows for some of ``parse_ids`` than each one's last
    write recorded; tables with none are left out. Reads each table's ``parse_id`` column once
    (:meth:`~fabric_resources.tables.TableStore.parse_row_counts`), the parse runs once (or takes
    ``runs``, read before, as ``fabric status`` has them: decoding 100k runs' counts costs ~0.5 s) and the
    runs of the parses found changed again.

    A table that cannot be scanned (a data file lost or cut short) is left out: ``fabric status``
    names it as unreadable and ``fabric repair`` plans it by its damaged fragments.

    Raises
    ------
    TableStoreUnavailableError
        If the object store holding the tables cannot be used.
    fabric_resources.catalog.CatalogDamagedError
        If a parse run's counts cannot be decoded.
    """
    return _audit(home, set(parse_ids), tables, runs)[0]


def _audit(home: FabricHome, wanted: set[str], tables: Iterable[str] | None,
           runs: Iterable[ParseRun | ParseRunOverview] | None) -> tuple[list[RowsChanged], bool]:
    """:func:`changed_rows`, and whether every table that exists was read (none left out)."""
    if not wanted:
        return [], True
    if runs is None:
        before = _recorded(home, sorted(wanted))
    else:
        before = {r.parse_id: row_counts(r) for r in runs if r.parse_id in wanted}
    live = {}
    whole = True
    for name in (tables if tables is not None else TABLES):
        try:
            if home.tables.exists(name):
                live[name] = home.tables.parse_row_counts(name)
        except TableStoreUnavailableError:
            raise
        except (OSError, ValueError, RuntimeError):  # Lance: RuntimeError for a corrupt file
            whole = False
            continue
    suspects: set[str] = set()
    for name, counts in live.items():
        # Status audits every active parse (100k at a time): each table is compared as a whole,
        # the recorded (parse, rows) pairs the table does not hold being a set difference in C.
        # A parse the table holds no row of matches a record of 0 (value_counts has no zeros).
        on_record = {pid: c[name] for pid, c in before.items() if name in c}
        differ = on_record.items() - counts.items()
        suspects.update(pid for pid, n in differ if n or pid in counts)
    after = _recorded(home, sorted(suspects)) if suspects else {}
    out = []
    for name, counts in live.items():
        parses = []
        for pid in sorted(suspects):
            recorded = after.get(pid, {}).get(name)
            if recorded is None or before.get(pid, {}).get(name) != recorded:
                continue  # not recorded (an older Fabric's write), or rewritten while counted
            n = counts.get(pid, 0)
            if n != recorded:
                parses.append((pid, recorded, n))
        if parses:
            out.append(RowsChanged(name, tuple(parses)))
    return out, whole


#: What the cache file holds and how its key is made: change it with either.
CACHE_FORMAT = 2


def audited_rows(home: FabricHome, parse_ids: Iterable[str], runs: Sequence[ParseRunOverview]) -> list[RowsChanged]:
    """:func:`changed_rows` of ``parse_ids`` over every table, ``runs`` being every parse run
    (:meth:`~fabric_resources.catalog.Catalog.parse_run_overview`, as ``fabric status`` has them),
    answered from the home's cache file when nothing the audit reads has changed since the answer
    was stored: its key is a digest of the parse IDs audited with their counts' text, and of each
    table's latest version as it lies on disk (:func:`table_state`: version, fragments with their
    data and deletion files, the stat of every file they and the manifests are made of). A table
    on an object store, one that cannot be opened, or an audit that left a table out (unreadable)
    is never cached: the audit runs each call, as before.

    Raises
    ------
    As :func:`changed_rows`.
    """
    wanted = set(parse_ids)
    key = _cache_key(home, wanted, runs)
    path = home.layout.row_audit_cache
    if key is not None:
        cached = _load(path, key)
        if cached is not None:
            return cached
    changed, whole = _audit(home, wanted, None, runs)
    # Stored only when the tables are as they were before the audit read them (a write landing
    # meanwhile makes the key describe other rows than the answer's).
    if key is not None and whole and not home.read_only and _cache_key(home, wanted, runs) == key:
        _store(path, key, changed)
    return changed


def release_rows_changed(home: FabricHome, active_parse_ids: Iterable[str],
                         runs: Sequence[ParseRunOverview]) -> list[RowsChanged]:
    """What ``fabric status`` names as rows changed (``Status.rows_changed``): :func:`audited_rows`
    of the release's ``active_parse_ids`` whose rows are whole (a parse waiting for its
    re-derivation, pending or unfinished after a repair or a run stopped part-way, is left out:
    its rows are not whole yet, and status lists it as such); ``[]`` when the object store cannot
    be used (``Status.unreadable_tables`` says so). Asked again with the same runs on an unchanged
    home, it answers from the cache (a client's status filters the operator's by parse)."""
    whole = {r.parse_id for r in runs if r.status in ("ready", "held")}
    try:
        return audited_rows(home, set(active_parse_ids) & whole, runs)
    except TableStoreUnavailableError:
        return []


def _cache_key(home: FabricHome, wanted: set[str], runs: Sequence[ParseRunOverview]) -> str | None:
    if home.tables.remote:
        return None  # a stat per data file would be a request each
    digest = hashlib.sha256(f"row audit {CACHE_FORMAT}\n".encode())
    for name in TABLES:
        state = table_state(home, name)
        if state is None:
            return None
        digest.update(state.encode())
    # The audit reads each wanted parse's recorded counts: their text, in the runs' order (a parse
    # with no run is not judged); IDs are hex, counts JSON, so tab and newline separate them.
    digest.update("\n".join(f"{r.parse_id}\t{r.counts_json}" for r in runs if r.parse_id in wanted).encode())
    return digest.hexdigest()


def table_state(home: FabricHome, name: str, version: int | None = None) -> str | None:
    """Table ``name`` at ``version`` (default its latest) as the files on disk make it: its version,
    each fragment's metadata (data files, deletion file, row counts) and the size, mtime, ctime and
    inode of each data file, manifest and deletion file. Anything that changes the rows without a
    Lance commit (a file replaced, a table folder copied in from elsewhere, even at the same version
    number) changes one of them. None when it cannot be read (no cache)."""
    tables = home.tables
    try:
        ds = tables.dataset(name, version) if tables.exists(name) else None
        if ds is None:
            return f"{name} absent\n"
        root = Path(tables.uri(name))
        parts = [f"{name} version {ds.version}"]
        for fragment in ds.get_fragments():
            meta = fragment.metadata
            parts.append(json.dumps(meta.to_json(), sort_keys=True))
            parts += [_stat(root / "data" / f.path) for f in meta.files]
        for folder in ("_versions", "_deletions"):
            if (root / folder).is_dir():
                parts += sorted(_stat(Path(e.path)) for e in os.scandir(root / folder))
    except (OSError, ValueError, RuntimeError):
        return None
    return "\n".join(parts) + "\n"


def folder_state(folder: Path) -> str | None:
    """Every file under ``folder`` by relative path with its size, mtime, ctime and inode (as
    :func:`table_state` states a file); None when it cannot be read, or when a folder inside it is
    a symbolic link: the walk does not follow one (a link to a parent would never end it), so the
    files behind it, which Lance reads, would change unseen."""
    def failed(exc: OSError) -> None:
        raise exc

    parts = []
    try:
        for at, folders, files in os.walk(folder, onerror=failed):
            if any(os.path.islink(os.path.join(at, name)) for name in folders):
                return None
            for name in files:
                path = Path(at, name)
                if path.is_file():
                    parts.append(f"{path.relative_to(folder)} {_stat(path)}")
    except (OSError, ValueError):
        return None
    return "\n".join(sorted(parts)) + "\n"


def _stat(path: Path) -> str:
    st = path.stat()
    # The inode change time too: an edit in place whose mtime was set back (``touch -r``) keeps
    # size, mtime and inode, but no call can set ctime back.
    return f"{path.name} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino}"


#: A cache file larger than this is not read (a row audit naming 100k changed parses is ~6 MB).
MAX_CACHE_BYTES = 64 * 1024 * 1024


def read_cache_file(path: Path) -> str | None:
    """The text of the cache file at ``path``, or None when it is absent, unreadable, not a regular
    file (a FIFO put in its place would hang the read, a link to ``/dev/zero`` never end it), or
    over :data:`MAX_CACHE_BYTES`. A cache only saves work: anything else is a miss."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_CACHE_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=True) as fh:
            fd = -1
            data = fh.read(MAX_CACHE_BYTES + 1)  # a file that grew since the fstat is read no further
        return None if len(data) > MAX_CACHE_BYTES else data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def load_cached(path: Path, key: str) -> dict | None:
    """The JSON object a cache file at ``path`` holds under ``key`` (:func:`store_cached`), or None:
    absent, unreadable (:func:`read_cache_file`), not such an object, or kept under another key."""
    text = read_cache_file(path)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: JSON nested past Python's depth
        return None
    return data if isinstance(data, dict) and data.get("key") == key else None


def store_cached(path: Path, data: dict) -> None:
    """Write ``data`` (holding its ``key``) as the cache file at ``path``, whole or not at all (a
    status may run beside this one); a write that fails only leaves the cache as it was."""
    # A temporary name of its own (O_EXCL): several threads of `fabric serve` answer status at once,
    # and a name that can be guessed could be taken by a FIFO put there first.
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(data))
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


def _load(path: Path, key: str) -> list[RowsChanged] | None:
    data = load_cached(path, key)
    try:
        return None if data is None else [
            RowsChanged(str(table), tuple((str(p), int(rec), int(live)) for p, rec, live in parses))
            for table, parses in data["changed"]]
    except (ValueError, TypeError, KeyError):
        return None  # a cache only saves work


def _store(path: Path, key: str, changed: list[RowsChanged]) -> None:
    store_cached(path, {"key": key, "changed": [[c.table, c.parses] for c in changed]})
