# Over 500 lines: create, verify, restore and delete share one manifest format, one tag convention and one lock; split, each would restate them.
"""Snapshots: one consistent point of a home, verified and restorable with no model call.

``create`` (under the activation lock, so no release is published meanwhile) pins the current
release: a copy of the catalog (SQLite's online backup), a Lance tag ``snapshot-<id>`` on every
table at the version the release pins, and hard links — not copies — of every file of each table
(Lance files are immutable), of the release's index generation, of its dense ANN index
generations and of the artifacts its sources need, under ``<home>/snapshots/<id>/``, with ``manifest.json``: the SHA-256 of every file.
Nothing changed since the last snapshot costs links, not bytes.

``verify`` is mechanical (every hash, every tag, every pinned version readable) and, with
``deep``, independent: the lexical index is reconstructed from the pinned lexical documents and
compared (``lexical_health``), and the vector digests are recomputed from the pinned vector rows
and compared with the release's. Each problem names what is damaged.

``restore`` puts the snapshot back, into the same home or a new one, from the snapshot's files
only — no parse, no embedding, no annotation, no Dagster run: damaged or missing table files and
artifacts are linked back from the snapshot, the catalog is copied back, and an index file whose
bytes changed (a hard link shares the damage) is rebuilt from the pinned canonical rows under the
generation's own name (a dense ANN index is trained again over the pinned rows: same rows and
scores, its candidate order may differ). The restored home answers every query exactly as the
snapshot did. In place, it waits for a running ingest and scan (the catalog's ``sources`` lock) and
refuses while a Dagster run is in progress, keeps the home's ``config.json`` (visibility is today's: a source withheld since stays
withheld; a new home gets the snapshot's), and what the home learnt after the snapshot is forgotten
(:func:`fabric_assets.lifecycle.forgetting.forget_after_restore`: no row, byte or name of a
source the restored catalog does not know stays behind); release IDs keep counting up.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from fabric_assets.activation.activate import activation_lock, ingest_lock, pinned_index_documents
from fabric_assets.activation.dense_index import build_table_index
from fabric_resources.dense_index import MANIFEST_KEY as DENSE_INDEXES, BuildSpec, DenseIndexUnusable, generation_digest
from fabric_resources.home import FabricHome
from fabric_resources.home_location import read_only_file_system
from fabric_resources.locks import exclusive_lock, shared_lock
from fabric_resources.row_audit import read_cache_file
from fabric_resources.schema import LAST_TIME, SOURCES_LOCK, TABLES
from fabric_resources.vector_digest import MANIFEST_KEY as VECTOR_DIGESTS, recorded_parse_digests

TAG_PREFIX = "snapshot-"
#: Catalog event an in-place restore logs once it has forgotten what came after (counts only).
RESTORE_EVENT = "snapshot-restored-in-place"
_MUTABLE = {"latest_version_hint.json", "_latest.manifest"}
MANIFEST = "manifest.json"
#: In ``<home>/snapshots/``: the highest snapshot number given so far.
LAST_ID = ".last-id"
#: In ``<home>/snapshots/``: held exclusively (under the activation lock) while a snapshot's files
#: are removed (delete, purge) or rewritten (a restore that rebuilds its index), shared by verify
#: and list, so that these never see a snapshot part-way through either (:func:`reading`).
LOCK = ".lock"


class SnapshotError(Exception):
    """A snapshot cannot be created, found or restored; the message says why."""


class SnapshotDamagedError(SnapshotError):
    """The snapshot's manifest is missing, unreadable or incomplete: nothing in it can be checked."""


@dataclass(frozen=True)
class SnapshotInfo:
    snapshot_id: int
    created_at: float
    release_id: int
    path: Path
    note: str = ""


@dataclass
class VerifyReport:
    snapshot_id: int
    deep: bool
    problems: list[str] = field(default_factory=list)
    files_checked: int = 0
    #: What ``deep`` could not check, and why (not damage): an index an older Fabric wrote.
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _numbered(name: str) -> bool:
    """A snapshot folder's name: ASCII digits (``str.isdigit`` admits ``²`` and ``①``, which ``int``
    refuses: a stray folder so named crashed list, cleanup and every ingest's retention step)."""
    return name.isascii() and name.isdigit()


def _root(home: FabricHome) -> Path:
    """``<home>/snapshots``.

    Raises
    ------
    SnapshotError
        If something other than a folder is there (a file; a link to none, broken or a loop). A
        loop read as "no snapshots": cleanup then removed releases the unseen snapshots pin and a
        purge left its sources' text in them; a file was a ``NotADirectoryError`` traceback.
    """
    root = home.root / "snapshots"
    if os.path.lexists(root) and not root.is_dir():
        raise SnapshotError(f"{root} is not a folder (a file, or a link that leads to none: broken or a loop), so "
                            "the home's snapshots cannot be read or kept, nor what they pin be known; move it aside "
                            "or mend the link, then run the command again")
    return root


@contextmanager
def reading(home: FabricHome) -> Iterator[None]:
    """Hold the snapshots' shared :data:`LOCK`: no snapshot is deleted or rewritten meanwhile (a
    delete waits for the block; the block waits for a delete under way). Verify and list run under
    it, so a snapshot being deleted is neither listed nor verified as damaged (tags gone, files
    missing) nor hashed as its files go. A home with no snapshot folder has nothing to wait for."""
    root = _root(home)
    with shared_lock(root / LOCK) if root.is_dir() else nullcontext():
        yield


def _writing(root: Path, *, wait: bool = True):
    """The exclusive :data:`LOCK` of the snapshots in ``root`` (none to take when there is no such folder);
    ``wait=False``: ``BlockingIOError`` when a reader or writer holds it."""
    return exclusive_lock(root / LOCK, wait=wait) if root.is_dir() else nullcontext()


@contextmanager
def _activation_and_writing(home: FabricHome, *, ingest: bool = False) -> Iterator[None]:
    """Hold the home's activation lock (``ingest``: its ingest lock before it) and the snapshots'
    exclusive :data:`LOCK` (in that order, as purge takes them) without ever waiting for the last
    while holding the others: a `snapshot delete` or `snapshot restore` behind a `snapshot verify
    --deep` (the shared LOCK, minutes) held the activation lock as it waited, and every activation
    in the home waited the whole verify."""
    root = _root(home)
    while True:
        with ingest_lock(home) if ingest else nullcontext(), activation_lock(home), ExitStack() as held:
            try:
                held.enter_context(_writing(root, wait=False))
            except BlockingIOError:
                pass  # readers (or a writer) hold it: wait below, the activation lock let go
            else:
                yield
                return
        with _writing(root):
            pass  # free now; take both again from the first (a release may have come meanwhile)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


#: Why ``os.link`` may refuse where a copy works: another file system (a restore ``--into`` a
#: folder on another disk), one without hard links, or a file already at its link limit.
_NO_LINK = frozenset({errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP})


def _link(src: Path, dst: Path) -> None:
    """Hard-link ``src`` at ``dst``, or copy it where no link can be made (:data:`_NO_LINK`): the
    bytes are what a snapshot needs, a link only saves them (restore ``--into`` another disk was
    an ``EXDEV`` traceback, trial 21c).

    Raises
    ------
    OSError
        ``src`` is missing, or ``dst`` cannot be written (a full disk)."""
    try:
        os.link(src, dst)
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
        shutil.copy2(src, dst)


def _link_tree(source: Path, target: Path, *, table: bool = False) -> dict[str, str]:
    """Hard-link every regular file under ``source`` into ``target``; return {relative path: sha256}.

    ``table``: ``source`` is a Lance table, which a parse run may be writing meanwhile (``create``
    holds the activation lock only): Lance writes each new file under a hidden staging name
    (``data/.tmpXXXXXX``) and renames it once whole, so hidden files are no version's and are left
    out (linked, one was hashed half-written: the snapshot then read as damaged to verify and
    restore); a file gone before it was linked (a staging name renamed) was no pinned version's
    either (nothing removes those while the activation lock is held)."""
    hashes = {}
    for dirpath, _, names in os.walk(source):
        for name in names:
            src = Path(dirpath) / name
            # Lock files and Lance's latest-version hint are rewritten in place of themselves: not
            # part of any version, and restoring an old hint would hide newer versions.
            if ((table and name.startswith(".")) or src.is_symlink() or not src.is_file() or name.endswith(".lock")
                    or name in _MUTABLE):
                continue
            rel = src.relative_to(source)
            dst = target / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                _link(src, dst)
            except FileNotFoundError:
                if not table:
                    raise
                continue
            hashes[str(rel)] = _sha256(dst)
    return hashes


#: What a manifest must hold, and of which type, to be read at all (else the snapshot is damaged).
_MANIFEST_FIELDS = {"snapshot_id": int, "created_at": (int, float), "release_id": int, "files": dict,
                    "tables": dict, "lexical_generation": str}


def _plain_name(name: object) -> bool:
    """One path component that stays where it is joined: not empty, ``.`` or ``..``, no separator, no NUL."""
    return isinstance(name, str) and name not in ("", ".", "..") and not any(c in name for c in "/\\\0")


def _confined(m: dict) -> bool:
    """Every path the manifest names stays inside the snapshot and the home: file paths relative,
    made of plain components; table and generation names plain. (A tampered ``files`` entry such as
    ``tables/../../../x``, its hash set to match, passed verify, and restore replaced a file outside
    the home with a link; a generation named ``../..`` had restore remove a folder outside it.)"""
    dense = m.get("dense_indexes") or {}
    return (all(isinstance(d, str) and all(_plain_name(p) for p in rel.split("/")) for rel, d in m["files"].items())
            and all(_plain_name(name) for name in [*m["tables"], *dense])
            and all(_plain_name(g) for g in _dense_generations(m).values())
            and (m["lexical_generation"] == "" or _plain_name(m["lexical_generation"])))


def read_manifest(folder: Path) -> dict | None:
    """A snapshot folder's manifest, or ``None`` when it is missing, unreadable, not JSON, lacks
    a field of :data:`_MANIFEST_FIELDS` (valid JSON of another shape crashed list, verify, cleanup
    and the activation's retention with a KeyError), its ``created_at`` is not a time between
    1970 and 9999 (NaN, ``1e300``), its ``snapshot_id`` is not its folder's name, its
    ``dense_indexes`` is not an object, or a path it names leads out of the snapshot or the home
    (:func:`_confined`)."""
    text = read_cache_file(folder / MANIFEST)  # a regular file only: a FIFO's read hung `snapshot list`
    try:
        m = json.loads(text) if text is not None else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(m, dict) or not all(
            isinstance(m.get(k), t) and not isinstance(m.get(k), bool) for k, t in _MANIFEST_FIELDS.items()):
        return None
    if not 0 <= m["created_at"] <= LAST_TIME:  # NaN, infinities, times no clock gave (list crashed on them)
        return None
    if str(m["snapshot_id"]) != folder.name or not isinstance(m.get("dense_indexes") or {}, dict):
        return None  # another folder's manifest (listed twice, acted on by either), or a list where a map goes
    if not _confined(m):
        return None
    return m


def list_snapshots(home: FabricHome) -> list[SnapshotInfo]:
    """The home's snapshots, oldest first (those whose manifest is readable)."""
    out = []
    root = _root(home)
    for d in sorted(root.iterdir(), key=lambda p: int(p.name) if _numbered(p.name) else -1) if root.exists() else ():
        m = read_manifest(d)
        if m is None:
            continue
        out.append(SnapshotInfo(m["snapshot_id"], m["created_at"], m["release_id"], d, str(m.get("note", ""))))
    return out


def pinned_by_snapshots(home: FabricHome) -> tuple[set[int], set[str]]:
    """Release IDs and index generations the home's snapshots pin (retention keeps them)."""
    releases, gens = set(), set()
    for s in list_snapshots(home):
        m = read_manifest(s.path)
        if m is None:  # damaged since it was listed
            continue
        releases.add(int(m["release_id"]))
        gens.add(m["lexical_generation"])
    return releases, gens


def create(home: FabricHome, note: str = "") -> SnapshotInfo:
    """Snapshot the current release (see the module docstring).

    Raises
    ------
    SnapshotError
        If the home has no release yet, keeps its catalog or tables outside the directory, or an
        in-place restore was interrupted (what it must forget would be kept).
    """
    _local_only(home)
    with activation_lock(home):
        if home.layout.restore_pending.exists():
            # Its tables still hold what the restore must forget: a snapshot now would keep it.
            raise SnapshotError("an in-place restore was interrupted before it had removed what came after its "
                                "snapshot; run `fabric ingest` (or the restore again) first")
        return _create(home, note)


def supported(home: FabricHome) -> bool:
    """Whether ``home`` can be snapshotted: snapshots copy the SQLite catalog file and hard-link
    local table files, so a home whose catalog is on PostgreSQL or whose tables are on object
    storage (``storage`` in its config) cannot."""
    from fabric_resources.catalog import SqliteCatalog

    return isinstance(home.catalog, SqliteCatalog) and not home.tables.remote


def _local_only(home: FabricHome) -> None:
    """A home that cannot be snapshotted (:func:`supported`) would get a snapshot of the wrong
    state, so it is refused."""
    if not supported(home):
        raise SnapshotError("snapshots need the default storage (a SQLite catalog and local tables); "
                            "this home keeps its catalog or tables elsewhere (docs/scale.md)")


def _create(home: FabricHome, note: str) -> SnapshotInfo:
    release = home.catalog.current_release()
    if release is None:
        raise SnapshotError("the home has no release yet: run `fabric ingest` first")
    root = _root(home)
    root.mkdir(parents=True, exist_ok=True)
    _drop_half_made(home)
    # A number is never given twice (a deleted snapshot's too: a note or a script may name it).
    sid = max(max((s.snapshot_id for s in list_snapshots(home)), default=0), _last_id(root)) + 1
    # A damaged snapshot's folder, or a tag a restore carried into this home, keeps its number.
    taken = {t for name in TABLES for t in home.tables.tags(name)}
    while (root / str(sid)).exists() or f"{TAG_PREFIX}{sid}" in taken:
        sid += 1
    tmp = root / f".{sid}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    files: dict[str, str] = {}
    _copy_database(home.layout.catalog_file, tmp / "catalog.sqlite3")  # consistent, whatever else writes
    files["catalog.sqlite3"] = _sha256(tmp / "catalog.sqlite3")
    if home.layout.config_file.exists():
        shutil.copy2(home.layout.config_file, tmp / "config.json")
        files["config.json"] = _sha256(tmp / "config.json")
    tables = {name: v for name, v in release.manifest["tables"].items() if v is not None and home.tables.exists(name)}
    for name, version in tables.items():
        import lance

        try:
            lance.dataset(home.tables.uri(name)).tags.create(f"{TAG_PREFIX}{sid}", version)
        except (OSError, ValueError, TypeError) as exc:  # no such version: the catalog or table was altered
            _drop_half_made(home)
            raise SnapshotError(f"release {release.release_id} pins version {version!r} of table {name}, which the "
                                f"home does not hold ({type(exc).__name__}): the catalog or the table was altered; "
                                "restore an earlier snapshot") from None
        files.update({f"tables/{name}.lance/{k}": h for k, h in
                      _link_tree(Path(home.tables.uri(name)), tmp / "tables" / f"{name}.lance", table=True).items()})
    gen = release.manifest.get("lexical_generation")
    if gen and (home.lexical.root / gen).is_dir():
        files.update({f"lexical/{gen}/{k}": h for k, h in _link_tree(home.lexical.root / gen, tmp / "lexical" / gen).items()})
    dense = _dense_generations(release.manifest)
    for table, dgen in dense.items():
        live = home.dense_indexes.path(table, dgen)
        if live.is_dir():
            files.update({f"{_dense_prefix(table, dgen)}{k}": h
                          for k, h in _link_tree(live, tmp / "dense" / table / dgen).items()})
    for digest in sorted({m["source_hash"] for m in release.manifest["sources"].values()}):
        path = home.artifacts.path_for(digest)
        if path.exists():
            rel = path.relative_to(home.layout.artifacts)
            (tmp / "artifacts" / rel).parent.mkdir(parents=True, exist_ok=True)
            _link(path, tmp / "artifacts" / rel)
            files[f"artifacts/{rel}"] = digest
    now = time.time()
    manifest = {"snapshot_id": sid, "created_at": now, "release_id": release.release_id, "note": note,
                "tables": tables, "lexical_generation": gen, "dense_indexes": dense, "files": files}
    (tmp / MANIFEST).write_text(json.dumps(manifest, sort_keys=True, indent=1))
    os.replace(tmp, root / str(sid))
    # Under a name of its own, then renamed: opening a FIFO put at `.last-id` to write waited for
    # a reader for ever (trial 21c).
    fd, last = tempfile.mkstemp(prefix=f"{LAST_ID}-", dir=root)
    with os.fdopen(fd, "w") as fh:
        fh.write(str(sid))
    os.replace(last, root / LAST_ID)
    return SnapshotInfo(sid, now, release.release_id, root / str(sid), note)


def _last_id(root: Path) -> int:
    """The highest snapshot number :func:`create` gave in this home (0 when none, or unreadable)."""
    try:
        return int(read_cache_file(root / LAST_ID) or 0)  # never a FIFO's read, waiting for ever
    except ValueError:
        return 0


def _dense_generations(manifest: dict) -> dict[str, str]:
    """Vector table → the dense ANN index generation a release manifest names."""
    return {t: r["generation"] for t, r in (manifest.get(DENSE_INDEXES) or {}).items()
            if isinstance(r, dict) and isinstance(r.get("generation"), str)}


def _dense_prefix(table: str, generation: str) -> str:
    return f"dense/{table}/{generation}/"


def _rebuildable(rel: str) -> bool:
    """Index files (lexical and dense generations): rebuilt from canonical rows when damaged."""
    return rel.startswith(("lexical/", "dense/"))


def _staging(rel: str) -> bool:
    """A Lance writer's hidden staging file that a snapshot taken before :func:`_link_tree` left them
    out may hold, hashed half-written: no table version's, so neither checked nor restored."""
    return rel.startswith("tables/") and rel.rsplit("/", 1)[-1].startswith(".")


def _find(home: FabricHome, snapshot_id: int) -> tuple[SnapshotInfo, dict]:
    for s in list_snapshots(home):
        m = read_manifest(s.path) if s.snapshot_id == snapshot_id else None
        if m is not None:
            return s, m
    if (_root(home) / str(snapshot_id)).is_dir():
        raise SnapshotDamagedError(f"snapshot {snapshot_id} is damaged: its {MANIFEST} is missing, unreadable or "
                                   f"incomplete, so nothing in it can be checked; delete it "
                                   f"(`fabric snapshot delete {snapshot_id}`)")
    raise SnapshotError(f"no snapshot {snapshot_id} (see `fabric snapshot list`)")


def damaged_snapshots(home: FabricHome) -> list[int]:
    """IDs of snapshot folders whose manifest is missing or unreadable (not in :func:`list_snapshots`;
    their files may still hold what a purge must remove)."""
    root = _root(home)
    listed = {s.snapshot_id for s in list_snapshots(home)}
    return sorted(int(d.name) for d in (root.iterdir() if root.exists() else ())
                  if d.is_dir() and _numbered(d.name) and int(d.name) not in listed)


def half_made_snapshots(home: FabricHome) -> list[int]:
    """IDs of snapshots a killed :func:`create` left half made (a ``.N.tmp`` folder and no folder
    N): not in :func:`list_snapshots`; the next create, delete or purge removes them."""
    root = _root(home)
    return sorted(int(sid) for tmp in (root.glob(".*.tmp") if root.exists() else ())
                  if _numbered(sid := tmp.name[1:-len(".tmp")]) and not (root / sid).exists())


def listing(home: FabricHome) -> tuple[list[SnapshotInfo], list[int], list[int]]:
    """What ``fabric snapshot list`` shows, read at one point (:func:`reading`): the snapshots
    (:func:`list_snapshots`), the damaged ones and the half-made ones. A snapshot a delete is
    removing is in none of them: the delete finishes first."""
    with reading(home):
        return list_snapshots(home), damaged_snapshots(home), half_made_snapshots(home)


#: In the snapshots' folder: the stage of each `restore --into` under way, one absolute path a
#: line. A restore killed there (SIGKILL, no clean-up) leaves its stage beside the folder asked
#: for: a whole copy of the home's text outside the home, hidden, that a purge would never reach.
STAGES = ".restore-stages"


def _stages(home: FabricHome) -> set[str]:
    path = _root(home) / STAGES
    return set(path.read_text(encoding="utf-8").splitlines()) - {""} if path.is_file() else set()


def _note_stage(home: FabricHome, stage: Path, under_way: bool) -> None:
    """Record (or forget) ``stage`` in :data:`STAGES`; under the activation lock."""
    stages = _stages(home) | {str(stage)} if under_way else _stages(home) - {str(stage)}
    path = _root(home) / STAGES
    if not stages:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(f"{STAGES}.{os.getpid()}")
    tmp.write_text("".join(f"{s}\n" for s in sorted(stages)), encoding="utf-8")
    os.replace(tmp, path)


def _drop_half_made(home: FabricHome) -> None:
    """Remove what a killed :func:`create` left: its ``.N.tmp`` folder and the Lance tags of that N
    (no snapshot folder N exists: the rename to it is create's last step), and the stage a killed
    `restore --into` left beside its folder (:data:`STAGES`). Under the activation lock."""
    import lance

    root = _root(home)
    for stage in map(Path, sorted(_stages(home))):
        # Only a stage's name is removed, and never through a link (rmtree refuses one).
        if stage.name.startswith(".") and stage.name.endswith(".restore-tmp"):
            shutil.rmtree(stage, ignore_errors=True)
        _note_stage(home, stage, False)
    for tmp in sorted(root.glob(".*.tmp")) if root.exists() else ():
        sid = tmp.name[1:-len(".tmp")]
        if _numbered(sid) and not (root / sid).exists():
            for name in TABLES:
                if f"{TAG_PREFIX}{sid}" in home.tables.tags(name):
                    lance.dataset(home.tables.uri(name)).tags.delete(f"{TAG_PREFIX}{sid}")
        shutil.rmtree(tmp, ignore_errors=True)


def verify(home: FabricHome, snapshot_id: int, *, deep: bool = False) -> VerifyReport:
    """Check snapshot ``snapshot_id`` of ``home`` (see the module docstring); every problem found
    is named in ``problems`` (a file, a table version, the index, a vector digest).

    Raises
    ------
    SnapshotError
        If there is no such snapshot (also one deleted while this waited for the delete).
    """
    with reading(home):
        return _verify(home, snapshot_id, deep)


def _verify(home: FabricHome, snapshot_id: int, deep: bool) -> VerifyReport:
    info, m = _find(home, snapshot_id)
    report = VerifyReport(snapshot_id, deep)
    for rel, digest in sorted(m["files"].items()):
        if _staging(rel):
            continue
        report.files_checked += 1
        path = info.path / rel
        if not path.exists():
            report.problems.append(f"{rel}: missing from the snapshot")
        elif _sha256(path) != digest:
            report.problems.append(f"{rel}: bytes changed (hash mismatch)")
    for name, version in sorted(m["tables"].items()):
        tag = f"{TAG_PREFIX}{snapshot_id}"
        try:
            home.tables.count_rows(name, version)
            found = home.tables.tags(name).get(tag)
        except Exception as exc:  # Lance raises OSError / ValueError / its own for a missing version file
            report.problems.append(f"table {name}: version {version} unreadable in the home ({type(exc).__name__})")
            continue
        if found != version:
            report.problems.append(f"table {name}: tag {tag} is {found}, the snapshot pins version {version}")
    gen = m["lexical_generation"]
    if gen:
        for rel, digest in sorted(m["files"].items()):
            if rel.startswith(f"lexical/{gen}/"):
                live = home.lexical.root / rel.removeprefix("lexical/")
                if not live.exists():
                    report.problems.append(f"index {gen}: {live.name} missing from the home")
                elif _sha256(live) != digest:
                    report.problems.append(f"index {gen}: {live.name} bytes changed in the home")
    for table, dgen in sorted((m.get("dense_indexes") or {}).items()):
        prefix = _dense_prefix(table, dgen)
        for rel, digest in sorted(m["files"].items()):
            if rel.startswith(prefix):
                live = home.dense_indexes.path(table, dgen) / rel.removeprefix(prefix)
                if not live.exists():
                    report.problems.append(f"dense index {table}/{dgen}: {rel.removeprefix(prefix)} missing from the home")
                elif _sha256(live) != digest:
                    report.problems.append(f"dense index {table}/{dgen}: {rel.removeprefix(prefix)} bytes changed "
                                           "in the home")
    if deep and not report.problems:
        older = _older_index(home, m["lexical_generation"]) or _unopenable_index(home, m["lexical_generation"])
        if older:
            report.notes.append(older)
        report.problems += _deep_problems(home, info.path, m, check_index=not older)
    return report


def _floor(home: FabricHome) -> int:
    """The catalog's release-ID floor, or 0. Damaged, the restore (the remedy its error names)
    replaces it with the highest release ID the replaced catalog holds: the most that is known."""
    from fabric_resources.catalog import CatalogDamagedError
    from fabric_resources.catalog.base import RELEASE_ID_FLOOR, release_id_like

    try:
        return home.catalog.state(RELEASE_ID_FLOOR, int, valid=release_id_like) or 0
    except CatalogDamagedError:
        return 0


def _snapshot_release(folder: Path, release_id: int):
    """Release ``release_id`` as the snapshot's own catalog copy holds it (read-only), or None:
    after an earlier snapshot was restored in place the home's catalog no longer has it."""
    from fabric_resources.catalog import Release

    try:
        con = sqlite3.connect(f"{(folder / 'catalog.sqlite3').as_uri()}?mode=ro&immutable=1", uri=True)
        try:
            row = con.execute("SELECT created_at, manifest FROM releases WHERE release_id = ?", (release_id,)).fetchone()
        finally:
            con.close()
        return Release(release_id, row[0], json.loads(row[1])) if row else None
    except (sqlite3.Error, ValueError):
        return None


def _older_index(home: FabricHome, generation: str) -> str | None:
    """Why ``generation`` cannot be rebuilt and compared by this Fabric, when an older one wrote it
    (its ``meta.json`` names another schema, analyzer or layout: the folding changed, say), else
    None. Not damage: verify's hashes already hold its files to what the snapshot recorded."""
    from fabric_resources.lexical_index import META_FILE

    try:
        meta = json.loads((home.lexical.root / generation / META_FILE).read_text())
    except (OSError, ValueError):
        return None  # missing or unreadable: damage, which the reconstruction names
    if not isinstance(meta, dict) or "analyzer" not in meta or home.lexical.is_current(generation):
        return None
    return (f"index {generation}: written by another index schema or analyzer ({meta.get('analyzer')}), so not "
            "rebuilt and compared; restored, it is answered by scanning until `fabric lexical-repair` or the next "
            "ingest rebuilds it")


def _unopenable_index(home: FabricHome, generation: str | None) -> str | None:
    """Why ``generation`` cannot be opened to compare it, when the home is on a read-only file system
    (tantivy takes a lock file to open an index: it was reported "index-unreadable", damage), else
    None. Its files' hashes, checked before, hold it to what the snapshot recorded."""
    if not generation or not read_only_file_system(home.lexical.root):
        return None
    return (f"index {generation}: the home is on a read-only file system, where tantivy cannot open an index "
            "(it takes a lock file), so not rebuilt and compared; its files' hashes were checked")


def _deep_problems(home: FabricHome, folder: Path, m: dict, check_index: bool = True) -> list[str]:
    from fabric_assets.projections import VECTOR_DIGEST_VERDICTS
    from fabric_resources.lexical_health import lexical_health
    from fabric_resources.vector_digest import MANIFEST_KEY, parse_digests, table_digest

    release = home.catalog.release(m["release_id"]) or _snapshot_release(folder, m["release_id"])
    if release is None:
        return [f"release {m['release_id']} is in neither the home's catalog nor the snapshot's"]
    problems = []
    health = lexical_health(home, release) if check_index else None
    if health is not None and not health.healthy:
        problems.append(f"index {m['lexical_generation']}: differs from a reconstruction from the pinned lexical "
                        f"documents ({health.problem or 'fields differ'})")
    active = sorted({s["parse_id"] for s in release.manifest["sources"].values()})
    for table in VECTOR_DIGEST_VERDICTS:
        expected = (release.manifest.get(MANIFEST_KEY) or {}).get(table)
        version = release.manifest["tables"].get(table)
        if expected is None or version is None:
            continue
        key = "chunk_id" if "chunk_id" in TABLES[table].names else "annotation_id"
        rows = home.tables.read_active(table, version, active, ["parse_id", key, "model", "vector"])
        import numpy as np

        vectors = np.asarray(rows.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False),
                             dtype=np.float32).reshape(rows.num_rows, -1) if rows.num_rows else np.zeros((0, 1))
        got = table_digest(parse_digests(rows.column("parse_id"), rows.column(key), rows.column("model"), vectors),
                           active)
        if got != expected:
            problems.append(f"table {table}: vector digest recomputed from the pinned rows differs from the release's")
    for table, dgen in sorted((m.get("dense_indexes") or {}).items()):
        record = (release.manifest.get(DENSE_INDEXES) or {}).get(table) or {}
        try:
            found = generation_digest(home.dense_indexes.open(table, record), active)
        except DenseIndexUnusable as exc:
            problems.append(f"dense index {table}/{dgen}: {exc.describe()}")
            continue
        if found != record.get("digest"):
            problems.append(f"dense index {table}/{dgen}: vector digest recomputed from its rows differs from the "
                            "release's")
    return problems


def restore(home: FabricHome, snapshot_id: int, into: Path | None = None) -> FabricHome:
    """Put snapshot ``snapshot_id`` back into ``home`` (or into a new home at ``into``); return the
    restored home. Runs no parse, no model and no Dagster run.

    Raises
    ------
    SnapshotError
        If there is no such snapshot (or its manifest is unreadable), ``into`` lies inside
        ``home``, already holds a home or is not an empty folder (a restore into it that fails
        part-way removes what it wrote) or is a symbolic link loop, or the snapshot's own files
        are damaged beyond what canonical rows can rebuild (a table or artifact file changed),
        or the home keeps its catalog or tables outside the directory.
    """
    _local_only(home)
    # The snapshots' exclusive LOCK is taken with the others, never waited for under them (a deep
    # verify holds it shared for minutes): the restore may rewrite the snapshot's index files.
    if into is None:
        # Then the catalog's sources lock (a scan's; the source sensor's takes no ingest lock): a
        # scan beside it wrote into the catalog being replaced (its raw bytes then named by no
        # catalog), or pointed a source at bytes the restore was about to forget as no longer named.
        with _activation_and_writing(home, ingest=True), home.catalog.exclusive(SOURCES_LOCK):
            _restore_in_place(home, *_whole(home, snapshot_id))
        return FabricHome(home.root)
    # `snapshot delete` (and a purge) remove a snapshot under the home's activation lock: held while
    # the snapshot is checked and read, so it cannot go part-way (an `OSError` traceback).
    with _activation_and_writing(home):
        return _restore_into(home, *_whole(home, snapshot_id), Path(into))


def _whole(home: FabricHome, snapshot_id: int) -> tuple[SnapshotInfo, dict]:
    """The snapshot's info and manifest, its own files checked (:func:`restore`'s errors)."""
    info, m = _find(home, snapshot_id)
    broken = [rel for rel, digest in m["files"].items() if not _rebuildable(rel) and not _staging(rel)
              and (not (info.path / rel).exists() or _sha256(info.path / rel) != digest)]
    if broken:
        raise SnapshotError(f"snapshot {snapshot_id} is itself damaged ({', '.join(sorted(broken)[:3])}); "
                            "restore an older snapshot")
    return info, m


def _restore_into(home: FabricHome, info: SnapshotInfo, m: dict, into: Path) -> FabricHome:
    """:func:`restore` into a new home at ``into``, under ``home``'s activation lock and its snapshots' exclusive
    :data:`LOCK`."""
    try:
        resolved = into.resolve()
    except (RuntimeError, OSError) as exc:  # a symlink loop: RuntimeError to Python 3.12, OSError (ELOOP) after
        raise SnapshotError(f"{into} is a symbolic link loop, or lies under one ({exc}); restore into another "
                            "folder") from None
    if resolved.is_relative_to(home.root.resolve()):
        # Inside the home it would be the home's own files: `snapshot delete` or a purge of the
        # home removes them (or misses the purged text in them), and a scan would not read them.
        raise SnapshotError(f"{into} lies inside the home {home.root}; restore into a folder outside it")
    if (into / "catalog.sqlite3").exists():
        raise SnapshotError(f"{into} already holds a Fabric home; restore into an empty folder")
    if into.exists() and (not into.is_dir() or any(into.iterdir())):
        raise SnapshotError(f"{into} is not an empty folder; restore into a new or empty folder")
    # Built beside it and renamed into place last: a restore killed part-way (SIGKILL, no except)
    # left a half home there that looked whole (status named its release, its index missing) and
    # that a second restore into the folder refused. The next restore clears a stale stage.
    into = Path(os.path.abspath(into))  # "." or "x/..": a name to stage beside
    stage = into.parent / f".{into.name}.restore-tmp"
    stage.unlink() if stage.is_symlink() else shutil.rmtree(stage, ignore_errors=True)
    mode = into.stat().st_mode & 0o7777 if into.is_dir() else None  # a folder the user made keeps its mode
    _note_stage(home, stage, True)
    try:
        target = FabricHome(stage)
        with activation_lock(target):
            _restore(target, info, m, True, writing=True)
        _keep_todays_withheld(home, target)
        if mode is not None:
            os.chmod(stage, mode)
        os.rename(stage, into)  # onto a new name, or an empty folder (POSIX rename replaces it)
        _note_stage(home, stage, False)
    except BaseException as exc:
        shutil.rmtree(stage, ignore_errors=True)  # all or nothing: `into` was never touched
        _note_stage(home, stage, False)
        from fabric_resources.parsing.document import machine_fault_in

        # Its disk full: the home restored from is sound (SQLite's error read as its damaged catalog).
        if isinstance(exc, Exception) and (fault := machine_fault_in(exc)) is not None:
            what = (f"{fault.strerror or fault} (errno {fault.errno})" if isinstance(fault, OSError)
                    else f"SQLite: {fault}")
            raise SnapshotError(f"restore into {into} stopped: {what}; nothing was left there and the home is "
                                "unchanged: free space on the disk holding it and restore again") from exc
        raise
    return FabricHome(into)


def _keep_todays_withheld(home: FabricHome, target: FabricHome) -> None:
    """Add ``home``'s ``sources.withheld`` patterns of today to the new home's configuration (the
    snapshot's): a source withheld since the snapshot was taken stays withheld in the copy, as it
    does after an in-place restore (served again there, hostile trial 24h)."""
    from fabric_resources.config import FabricConfig

    # Read now, not the home object's cached configuration (a server's is as old as the server).
    today = list(FabricConfig.load(home.layout.config_file).sources.withheld)
    path = target.layout.config_file
    raw = json.loads(path.read_text(encoding="utf-8-sig")) if path.exists() else {}
    sources = raw.setdefault("sources", {})
    kept = list(sources.get("withheld", []))
    added = [p for p in today if p not in kept]
    if not added:
        return
    sources["withheld"] = kept + added
    path.write_text(json.dumps(raw, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _restore_in_place(home: FabricHome, info: SnapshotInfo, m: dict) -> None:
    """The home back at the snapshot, and what it learnt after forgotten
    (:func:`fabric_assets.lifecycle.forgetting.forget_after_restore`). Under the ingest, activation
    and ``sources`` locks, no Dagster run in progress."""
    from fabric_assets.lifecycle.forgetting import known, record_pending
    from fabric_assets.lifecycle.run_history import home_instance, runs_in_progress
    from fabric_resources.catalog.base import RELEASE_ID_FLOOR

    instance = home_instance(home)
    running = runs_in_progress(instance)
    if running:
        from fabric_assets.run_owner import WAIT_REMEDY

        raise SnapshotError(f"Dagster run(s) in progress ({', '.join(running)}); a restore puts back every table "
                            "and the catalog: " + WAIT_REMEDY)
    before = record_pending(home, known(home.catalog))
    floor = max(before.last_release_id or 0, _floor(home))
    # The server's queued and running operations (this restore's own, when it came over HTTP) live
    # in the catalog: without them their records vanished with it ("no such operation").
    _restore(home, info, m, False, state={RELEASE_ID_FLOOR: floor} if floor else None,
             operations=_unfinished_operations(home), writing=True)
    finish_forgetting(FabricHome(home.root), before, instance)


_OPERATION_COLUMNS = ("operation_id", "kind", "status", "params", "reason", "result", "created_at", "started_at",
                      "finished_at")


def _unfinished_operations(home: FabricHome) -> list[tuple]:
    """Rows of the home's pending and running admin operations (``fabric serve``), as stored."""
    with home.catalog.transaction() as con:
        return [tuple(r) for r in con.execute(f"SELECT {', '.join(_OPERATION_COLUMNS)} FROM operations "
                                              "WHERE status IN ('pending', 'running')").fetchall()]


def finish_interrupted(home: FabricHome, before, instance) -> None:
    """:func:`finish_forgetting` for an ingest, which holds the ingest lock only: under the activation
    lock, then the catalog's ``sources`` lock (the source sensor's scan takes no ingest lock, and
    one beside the forgetting pointed a source at bytes it then removed). The ingest's own scan
    takes that lock after."""
    with activation_lock(home), home.catalog.exclusive(SOURCES_LOCK):
        finish_forgetting(home, before, instance)


def finish_forgetting(home: FabricHome, before, instance=None) -> None:
    """After an in-place restore (or to finish one killed part-way: ``before`` from
    :func:`fabric_assets.lifecycle.forgetting.pending`): release IDs above every one ``before``
    gave, and what only ``before`` knew forgotten; then nothing is pending. Under the ingest,
    activation and ``sources`` locks (a scan beside it could point a source at bytes it forgets),
    no Dagster run in progress."""
    from fabric_assets.lifecycle.forgetting import clear_pending, forget_after_restore
    from fabric_resources.catalog.base import RELEASE_ID_FLOOR

    if before.last_release_id is not None:
        floor = max(before.last_release_id, _floor(home))
        home.catalog.set_state(RELEASE_ID_FLOOR, floor)
    lexical, dense, parse_ids, source_keys = _held_by_snapshots(home)
    out = forget_after_restore(home, before, snapshot_lexical=lexical, snapshot_dense=dense,
                               snapshot_parse_ids=parse_ids, snapshot_source_keys=source_keys, instance=instance)
    with home.catalog.transaction(immediate=True) as con:
        # Counts only (no source key): what `fabric snapshot restore` reports, and an audit trail.
        home.catalog.log_event(con, RESTORE_EVENT, detail={
            "parses_forgotten": len(out.parse_ids), "sources_forgotten": out.source_keys,
            "artifacts_removed": out.artifacts_removed, "rows_removed": sum(out.rows_removed.values()),
            "generations_removed": len(out.generations_removed)})
    clear_pending(home)


def _held_by_snapshots(home: FabricHome) -> tuple[set[str], dict[str, set[str]], set[str], set[str]]:
    """The lexical and dense index generations every snapshot of ``home`` pins, and the parse IDs
    and source keys their catalogs know (read-only: a snapshot's files are never written; a
    damaged snapshot's catalog counts when it can be read)."""
    lexical: set[str] = set()
    dense: dict[str, set[str]] = {}
    parse_ids: set[str] = set()
    keys: set[str] = set()
    root = _root(home)
    for folder in (d for d in (root.iterdir() if root.exists() else ()) if _numbered(d.name)):
        m = read_manifest(folder)
        if m is not None:
            lexical.add(m["lexical_generation"])
            for table, gen in _dense_generations(m).items():
                dense.setdefault(table, set()).add(gen)
        try:
            con = sqlite3.connect(f"{(folder / 'catalog.sqlite3').as_uri()}?mode=ro&immutable=1", uri=True)
            try:
                parse_ids.update(r[0] for r in con.execute("SELECT parse_id FROM parse_runs"))
                keys.update(r[0] for r in con.execute("SELECT source_key FROM sources"))
            finally:
                con.close()
        except sqlite3.Error:
            continue  # no readable catalog: it names nothing
    return lexical, dense, parse_ids, keys


def _copy_database(source: Path, target: Path) -> None:
    """SQLite's online backup of ``source`` into ``target``, in one step (readers of ``target`` see
    the old database or the new one)."""
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def _restore(target: FabricHome, info: SnapshotInfo, m: dict, new_home: bool, *, state: dict | None = None,
             operations: list[tuple] | None = None, writing: bool = False) -> None:
    """:func:`restore` under the target's activation lock (held by the caller). ``state``
    (catalog state name → value) and ``operations`` (rows) are written into the snapshot's
    catalog as it is put back. ``writing``: the caller holds the snapshots' exclusive LOCK (a
    second ``flock`` of it in this process would wait for the first for ever); else it is
    waited for here (a purge rolling back, which holds every lock of the home already)."""
    snapshot_id = info.snapshot_id
    for rel, digest in sorted(m["files"].items()):
        if _rebuildable(rel) or _staging(rel) or rel in ("catalog.sqlite3", "config.json"):
            continue
        dst = target.root / rel
        if dst.exists() and (dst.samefile(info.path / rel) or _sha256(dst) == digest):
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.unlink(missing_ok=True)
        _link(info.path / rel, dst)
    if new_home and "config.json" in m["files"]:
        # In place the home keeps its configuration: visibility is today's (a pattern added to
        # `sources.withheld` since the snapshot was silently undone, and the source served again).
        shutil.copy2(info.path / "config.json", target.layout.config_file)
    copy = info.path / "catalog.sqlite3"
    staged = target.root / ".catalog-restore.tmp" if (state or operations) else None
    try:
        if staged is not None:
            # What must be in the catalog the moment it is back (the release-ID floor, the
            # server's unfinished operations) goes into a staged copy first: a restore killed
            # right after the swap then leaves no window where an ID could be given twice.
            staged.unlink(missing_ok=True)
            _copy_database(copy, staged)
            con = sqlite3.connect(staged)
            try:
                with con:
                    con.executemany("INSERT INTO state(name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE "
                                    "SET value = excluded.value", [(k, json.dumps(v)) for k, v in (state or {}).items()])
                    con.executemany(f"INSERT OR REPLACE INTO operations({', '.join(_OPERATION_COLUMNS)}) "
                                    f"VALUES ({', '.join('?' * len(_OPERATION_COLUMNS))})", operations or [])
            finally:
                con.close()
            copy = staged
        _copy_database(copy, target.layout.catalog_file)
    finally:
        if staged is not None:
            for leftover in (staged, staged.with_name(staged.name + "-wal"), staged.with_name(staged.name + "-shm")):
                leftover.unlink(missing_ok=True)
    restored = FabricHome(target.root)
    # A writer's open: the catalog of a snapshot an older Fabric took is migrated as it comes back
    # (a read command refuses an older catalog, and the `fabric ingest` it names would take in the
    # folders as they are now, not as the snapshot holds them).
    restored.catalog
    with nullcontext() if writing else _writing(info.path.parent):  # they may rewrite the snapshot's index files and manifest
        _restore_index(restored, info, m)
        _restore_dense(restored, info, m)
    if new_home:  # the new home's tables carry the tags too, so its retention keeps them
        for name, version in m["tables"].items():
            if f"{TAG_PREFIX}{snapshot_id}" not in restored.tables.tags(name):
                import lance

                lance.dataset(restored.tables.uri(name)).tags.create(f"{TAG_PREFIX}{snapshot_id}", version)


def _restore_index(home: FabricHome, info: SnapshotInfo, m: dict) -> None:
    """The release's generation, as it was: linked back from the snapshot where its files are
    intact, else rebuilt from the pinned lexical documents under the same name."""
    gen = m["lexical_generation"]
    if not gen:
        return
    files = {rel.removeprefix(f"lexical/{gen}/"): d for rel, d in m["files"].items() if rel.startswith(f"lexical/{gen}/")}
    live = home.lexical.root / gen
    intact = all((info.path / "lexical" / gen / rel).exists() and _sha256(info.path / "lexical" / gen / rel) == d
                 for rel, d in files.items())
    if intact:
        if all((live / rel).exists() and _sha256(live / rel) == d for rel, d in files.items()):
            return
        shutil.rmtree(live, ignore_errors=True)
        _link_tree(info.path / "lexical" / gen, live)
        return
    release = home.catalog.release(m["release_id"])
    active = sorted({s["parse_id"] for s in release.manifest["sources"].values()})
    home.lexical.rebuild_generation(gen, pinned_index_documents(home, active, m["tables"]))
    # The snapshot's own links share the damaged inodes: point them at the rebuilt files.
    snap = info.path / "lexical" / gen
    shutil.rmtree(snap, ignore_errors=True)
    rebuilt = _link_tree(live, snap)
    manifest = json.loads((info.path / MANIFEST).read_text())
    manifest["files"] = {k: v for k, v in manifest["files"].items() if not k.startswith(f"lexical/{gen}/")}
    manifest["files"].update({f"lexical/{gen}/{k}": h for k, h in rebuilt.items()})
    (info.path / MANIFEST).write_text(json.dumps(manifest, sort_keys=True, indent=1))


def _restore_dense(home: FabricHome, info: SnapshotInfo, m: dict) -> None:
    """The release's dense ANN indexes, as they were: linked back from the snapshot where its files
    are intact, else rebuilt from the pinned vector rows under the same generation name (Lance
    trains it again, so its files differ; its rows, digest and settings are the release's)."""
    dense = m.get("dense_indexes") or {}
    if not dense:
        return
    release = home.catalog.release(m["release_id"])
    for table, dgen in sorted(dense.items()):
        prefix = _dense_prefix(table, dgen)
        files = {rel.removeprefix(prefix): d for rel, d in m["files"].items() if rel.startswith(prefix)}
        snap = info.path / "dense" / table / dgen
        live = home.dense_indexes.path(table, dgen)
        if files and all((snap / rel).exists() and _sha256(snap / rel) == d for rel, d in files.items()):
            if not all((live / rel).exists() and _sha256(live / rel) == d for rel, d in files.items()):
                shutil.rmtree(live, ignore_errors=True)
                _link_tree(snap, live)
            continue
        active = sorted({s["parse_id"] for s in release.manifest["sources"].values()})
        record = release.manifest[DENSE_INDEXES][table]
        # A generation built without damaged parses (``left_out``) records the digest of the rows it
        # holds: rebuilt against the release's digests, it leaves out the same parses again.
        release_digest = (release.manifest.get(VECTOR_DIGESTS) or {}).get(table)
        build_table_index(home, table, m["tables"], active,
                          record.get("digest") if release_digest is None else release_digest,
                          BuildSpec(**record["spec"]), generation=dgen,
                          recorded=recorded_parse_digests(release.manifest, table, active))
        shutil.rmtree(snap, ignore_errors=True)
        rebuilt = _link_tree(live, snap)
        manifest = json.loads((info.path / MANIFEST).read_text())
        manifest["files"] = {k: v for k, v in manifest["files"].items() if not k.startswith(prefix)}
        manifest["files"].update({f"{prefix}{k}": h for k, h in rebuilt.items()})
        (info.path / MANIFEST).write_text(json.dumps(manifest, sort_keys=True, indent=1))


def delete(home: FabricHome, snapshot_id: int) -> None:
    """Remove snapshot ``snapshot_id``: its tags and its folder (the home's own files stay).

    A damaged snapshot (unreadable manifest) and the tags of one a killed create left are removed
    too.

    Raises
    ------
    SnapshotError
        If there is no such snapshot, folder or tag.
    """
    with _activation_and_writing(home):
        _delete(home, snapshot_id, writing=True)


def snapshot_present(home: FabricHome, snapshot_id: object) -> bool:
    """Whether anything of snapshot ``snapshot_id`` is left: its folder or a table's tag (a
    snapshot is gone only when neither is; ``delete`` then says "no snapshot")."""
    tag = f"{TAG_PREFIX}{snapshot_id}"
    return (_root(home) / str(snapshot_id)).is_dir() or any(tag in home.tables.tags(name) for name in TABLES)


def _delete(home: FabricHome, snapshot_id: int, *, writing: bool = False) -> None:
    """Under the activation lock; ``writing``: the caller holds the snapshots' exclusive LOCK too
    (a second ``flock`` of it in this process would wait for the first for ever)."""
    import lance

    _drop_half_made(home)
    folder = _root(home) / str(snapshot_id)
    tag = f"{TAG_PREFIX}{snapshot_id}"
    with nullcontext() if writing else _writing(_root(home)):  # verify and list see it whole, or not at all
        if not snapshot_present(home, snapshot_id):
            raise SnapshotError(f"no snapshot {snapshot_id} (see `fabric snapshot list`)")
        # Every table's tag, not only those the manifest names: a damaged manifest names none.
        for name in [name for name in TABLES if tag in home.tables.tags(name)]:
            lance.dataset(home.tables.uri(name)).tags.delete(tag)
        shutil.rmtree(folder, ignore_errors=True)
