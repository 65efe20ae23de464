"""Purge: remove sources from the home for good (``fabric purge``, ``purge_job``).

A purge honours "delete this from the system". For the sources it selects it removes:

* the raw bytes of every version from the artifact store;
* their rows from every Lance table, *and* from every old version: rows are deleted, every data
  file that still holds a deleted row is rewritten (Lance masks deleted rows with deletion files
  until a compaction materialises them) and every version but the latest is removed;
* their text from every serving-index generation: the current release's generation is rebuilt
  from canonical rows (no re-parse, no re-embedding) and every other generation is removed;
  likewise every dense ANN index (``fabric_resources.dense_index``): the current release's is
  rebuilt from the vector rows that remain and every other generation is removed;
* their annotation memo entries (unless another source's annotations use the same entry) and
  graph rows (per parse, so the cross-document graph retracts exactly what they contributed);
* every catalog row about them (sources, acquisitions, parse runs, events) and every release but
  the one the purge publishes (releases pin table versions the purge removes, and their manifests
  name the sources), then rewrites the catalog file so no deleted row survives in it;
* their names from Dagster: the run tags that let the UI find a partition by file name, and the
  source keys in run configs (``purge_job``'s own), then rewrites the run database
  (:mod:`fabric_assets.source_tags`); their partitions leave the ``parses`` set. Materialization
  metadata never names a source or holds text, so the event log needs no rewriting.

The catalog keeps a tombstone with hashes only (``fabric_resources.tombstones``). It is written
before anything is removed, so an interrupted purge is finished by the next one.

Content shared with a source that stays (a moved file's bytes, the same file at two paths) is
kept: the other source still holds it. A deleted source holds nothing (its content goes with the
purged one; its row stays, as retention leaves a deleted source whose parse it removed). A purge
refuses (:class:`PurgeRefused`), removing nothing, when a selected source is still present on disk
(delete the file first, or purge its root), when a Lance tag (a snapshot) pins a table version, or
while a Dagster run is in progress. One that matches nothing (and finds no interrupted purge to
finish) does nothing.
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from dataclasses import dataclass, field

from fabric_assets.activation.activate import ACTIVATION_MARKS, pinned_index_documents
from fabric_assets.activation.dense_index import dense_index_records
from fabric_assets.lifecycle.forgetting import delete_memo_entries, forget_partitions, memo_keys_only_of
from fabric_assets.lifecycle.forgetting import pending as pending_forget
from fabric_assets.lifecycle.republish import republish
from fabric_assets.lifecycle.run_history import home_instance, runs_in_progress
from fabric_assets.lifecycle.snapshots import _create as create_snapshot, _delete as delete_snapshot
from fabric_assets.lifecycle.snapshots import _find as find_snapshot, _restore as restore_snapshot, list_snapshots
from fabric_assets.lifecycle.snapshots import TAG_PREFIX, _drop_half_made, damaged_snapshots, finish_forgetting
from fabric_assets.lifecycle.snapshots import _activation_and_writing, _root as snapshots_root
from fabric_assets.lifecycle.snapshots import half_made_snapshots
from fabric_assets.lifecycle.snapshots import supported as snapshots_supported
from fabric_assets.projections import VECTOR_DIGEST_VERDICTS
from fabric_assets.sources.mounts import SCAN_INNER_MOUNTS_STATE, SCAN_MOUNTED_STATE
from fabric_assets.source_tags import forget_source_tags
from fabric_resources.catalog import Catalog, CatalogDamagedError, str_map
from fabric_resources.dense_index import kept_generations
from fabric_resources.home import FabricHome
from fabric_resources.schema import SCAN_SKIPPED_STATE, SOURCES_LOCK, TABLES
from fabric_resources.tombstones import (Tombstone, add_tombstone, complete_tombstone, forget, root_marker,
                                         source_key_hash, tombstones)
from fabric_resources.vector_digest import manifest_digests, manifest_parse_digests

class PurgeRefused(Exception):
    """The purge cannot run as asked; nothing was removed. The message says why and what to do."""


@dataclass(frozen=True)
class PurgeSelector:
    """What to purge: exactly one of ``source_keys``, ``root`` (a root's label: every source under
    it, and the root is unregistered) or ``before`` (every deleted source last seen before it)."""

    source_keys: tuple[str, ...] = ()
    root: str | None = None
    before: dt.datetime | None = None

    @property
    def kind(self) -> str:
        return "source" if self.source_keys else "root" if self.root else "before"


@dataclass(frozen=True)
class PurgePlan:
    """The sources, content hashes and parse IDs one purge removes, and the content it keeps."""

    selector: str
    source_keys: tuple[str, ...]
    source_hashes: tuple[str, ...]
    parse_ids: tuple[str, ...]
    root_ids: tuple[int, ...] = ()
    root_labels: tuple[str, ...] = ()
    #: Content hashes of purged sources that a source which stays (not deleted) still holds (kept).
    shared_kept: tuple[str, ...] = ()


@dataclass
class PurgeReport:
    """What a purge did. ``release_id``: the release it published (None when the home had none)."""

    plan: PurgePlan
    tombstone_id: int | None  # None: nothing matched and no interrupted purge was left, nothing done
    artifacts_removed: int = 0
    rows_removed: dict[str, int] = field(default_factory=dict)
    bytes_removed: int = 0
    memo_entries_removed: int = 0
    releases_retired: list[int] = field(default_factory=list)
    generations_removed: list[str] = field(default_factory=list)
    release_id: int | None = None
    resumed: list[int] = field(default_factory=list)  # tombstones of interrupted purges finished first
    run_tags_removed: int = 0  # Dagster run tags naming a purged source (fabric_assets.source_tags)
    snapshot_id: int | None = None  # taken before, deleted once the re-published release checked out


def parse_before(text: str) -> dt.datetime:
    """``YYYY-MM-DD`` (or an ISO timestamp) as an aware datetime, UTC unless it says otherwise.

    Raises
    ------
    ValueError
        If ``text`` is not an ISO date or timestamp.
    """
    moment = dt.datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def plan_purge(catalog: Catalog, selector: PurgeSelector) -> PurgePlan:
    """What ``selector`` purges (reads the catalog only).

    Raises
    ------
    PurgeRefused
        If the selector is not exactly one of its three forms, names an unknown source or root, or
        a named source is still present (or its folder unreadable) where it was found.
    """
    given = sum(bool(x) for x in (selector.source_keys, selector.root, selector.before))
    if given != 1:
        raise PurgeRefused("give exactly one of --source, --root, --before")
    sources = {s.source_key: s for s in catalog.sources()}
    root_ids: tuple[int, ...] = ()
    if selector.source_keys:
        given_keys = _as_stored(selector.source_keys, sources)
        # A key an interrupted purge already forgot is not unknown: this purge finishes that one.
        resumed = {h for t in tombstones(catalog) if t.completed_at is None for h in t.source_key_hashes}
        keys = sorted(k for k in given_keys if k in sources or source_key_hash(k) not in resumed)
        unknown = [k for k in keys if k not in sources]
        if unknown:
            # A key typed as the path `fabric search` prints after `fs:` (source keys start with it).
            meant = [f"fs:{k}" for k in unknown if f"fs:{k}" in sources]
            hint = f"did you mean {', '.join(meant)}? source keys start with fs:; " if meant else ""
            raise PurgeRefused(f"no such source: {', '.join(unknown)} ({hint}see `fabric status`)")
        alive = [k for k in keys if sources[k].state != "deleted"]
        if alive:
            raise PurgeRefused(
                f"{', '.join(alive)}: still {sources[alive[0]].state} in its folder as of the last scan, so the next "
                "scan would take it in again; delete the file and run `fabric ingest` (which records it deleted) "
                "first, or purge its whole root with --root")
    elif selector.root:
        roots = [r for r in catalog.roots() if r.label == selector.root]
        if not roots:
            pending = [t for t in tombstones(catalog) if t.completed_at is None and t.selector == "root"]
            if any(root_marker(selector.root) in t.source_key_hashes
                   # One made before tombstones kept a marker: any label finishes it, as then.
                   or not any(h.startswith("root:") for h in t.source_key_hashes) for t in pending):
                # The root's row went with an interrupted purge of this root: this purge finishes it.
                return PurgePlan("root", (), (), ())
            raise PurgeRefused(f"no root labelled {selector.root!r} (labels: "
                               f"{', '.join(r.label for r in catalog.roots()) or 'none'})"
                               + ("; an interrupted purge of another root is pending: run `fabric purge --root` "
                                  "with that root's label (or any other purge) to finish it" if pending else ""))
        root_ids = (roots[0].root_id,)
        keys = sorted(k for k, s in sources.items() if s.root_id == roots[0].root_id)
    else:
        cutoff = selector.before.timestamp()
        keys = sorted(k for k, s in sources.items() if s.state == "deleted" and s.last_seen < cutoff)
    chosen = set(keys)
    hashes: set[str] = set()
    kept_hashes: set[str] = set()
    for key, s in sources.items():
        held = {a["source_hash"] for a in catalog.acquisitions(key)} | ({s.source_hash} if s.source_hash else set())
        if key in chosen:
            hashes.update(held)
        elif s.state != "deleted":
            # A deleted source holds nothing: the old name a moved file left (deleted, same bytes)
            # kept the whole text of the file purged by its current name ("shared_kept: 1").
            kept_hashes.update(held)
    shared = hashes & kept_hashes
    purged_hashes = hashes - shared
    parse_ids = {r.parse_id for r in catalog.parse_runs() if r.source_hash in purged_hashes}
    return PurgePlan(selector.kind, tuple(keys), tuple(sorted(purged_hashes)), tuple(sorted(parse_ids)),
                     root_ids, (selector.root,) if root_ids else (), tuple(sorted(shared)))


def _as_stored(keys: tuple[str, ...], sources: dict) -> set[str]:
    """Each key as the catalog stores it: itself, or, for a key typed in NFC that names a file made
    on macOS (NFD), the one source whose key reads the same in NFC (none or several: as typed)."""
    by_nfc: dict[str, list[str]] = {}
    for k in sources:
        by_nfc.setdefault(unicodedata.normalize("NFC", k), []).append(k)
    out = set()
    for k in keys:
        same = by_nfc.get(unicodedata.normalize("NFC", k), [])
        out.add(same[0] if k not in sources and len(same) == 1 else k)
    return out


def _snapshot_note(tombstone_id: int) -> str:
    return f"before purge {tombstone_id}"


def _own_snapshots(home: FabricHome, unfinished: list[Tombstone]) -> list[int]:
    """The whole snapshots interrupted purges took as their first step ("before purge N", taken
    after its tombstone)."""
    started = {_snapshot_note(t.tombstone_id): t.purged_at for t in unfinished}
    return [s.snapshot_id for s in list_snapshots(home) if s.note in started and s.created_at >= started[s.note]]


def _drop_own_snapshots(home: FabricHome, unfinished: list[Tombstone]) -> None:
    """What an interrupted purge left of its first step: a half-made snapshot (a ``.N.tmp`` folder
    and its tags) or its whole snapshot (:func:`_own_snapshots`). The purge that finishes it removes
    them (they hold the purged sources) instead of being refused by them."""
    _drop_half_made(home)
    for snapshot_id in _own_snapshots(home, unfinished):
        delete_snapshot(home, snapshot_id, writing=True)


def check_purge(home: FabricHome, plan: PurgePlan, *, own_run_id: str | None = None) -> None:
    """Refuse ``plan`` as :func:`purge` would, changing nothing (``fabric purge --dry-run``; trial
    20g: a dry run exited 0 while a snapshot made the purge itself refuse).

    Raises
    ------
    PurgeRefused
        A snapshot or a Lance tag pins a table version, or a Dagster run is in progress. What an
        interrupted purge left of its own snapshot does not count: the purge removes it.
    """
    unfinished = [t for t in tombstones(home.catalog) if t.completed_at is None]
    if not (plan.source_keys or plan.root_ids or unfinished):
        return  # the purge does nothing: nothing to refuse
    own = set(_own_snapshots(home, unfinished)) | set(half_made_snapshots(home))
    _refuse_if_pinned(home, ignore=own)
    _refuse_if_runs_in_progress(home, own_run_id)


def _refuse_if_pinned(home: FabricHome, ignore: set[int] = frozenset()) -> None:
    """``ignore``: snapshot IDs the caller removes first (only :func:`check_purge` names any)."""
    snaps = [s for s in list_snapshots(home) if s.snapshot_id not in ignore]
    if snaps:
        named = ", ".join(f"{s.snapshot_id} (release {s.release_id})" for s in snaps)
        raise PurgeRefused(f"snapshot(s) {named} hold the home as it was, purged sources included; a purge must "
                           "not leave them behind: delete them first (`fabric snapshot delete ID`)")
    damaged = damaged_snapshots(home)
    if damaged:
        raise PurgeRefused(f"snapshot folder(s) {', '.join(map(str, damaged))} (manifest unreadable) may hold purged "
                           "text: delete them first (`fabric snapshot delete ID`)")
    tagged = sorted({t for name in TABLES for t in home.tables.tags(name)} - {f"{TAG_PREFIX}{i}" for i in ignore})
    if tagged:
        raise PurgeRefused(f"Lance tags pin old table versions ({', '.join(tagged)}); a purge must remove every "
                           "old version: delete those tags first (`fabric snapshot delete ID` removes the tags "
                           "snapshot-ID, also those a killed `snapshot create` left)")


def _refuse_if_runs_in_progress(home: FabricHome, own_run_id: str | None) -> None:
    running = runs_in_progress(home_instance(home), own_run_id)
    if running:
        from fabric_assets.run_owner import WAIT_REMEDY

        raise PurgeRefused(f"Dagster run(s) in progress ({', '.join(running)}); a purge rewrites every table: "
                           + WAIT_REMEDY)


def purge(home: FabricHome, selector: PurgeSelector, *, own_run_id: str | None = None) -> PurgeReport:
    """Purge what ``selector`` names (see the module docstring); return what was removed.

    Holds the ingest and activation locks and the snapshots' exclusive lock for its whole length,
    taken as `snapshot restore` takes them (never waiting for the last while holding the others:
    a `snapshot verify --deep` under way would otherwise hold every activation of the home back),
    then the catalog's ``sources`` lock, which a scan holds.
    ``own_run_id``: the Dagster run calling it (``purge_job``), which is not counted as a run in
    progress.

    Raises
    ------
    PurgeRefused
        See :func:`plan_purge`; also when a snapshot tag pins a table version, or a run is in
        progress. Nothing is removed then.
    """
    # Refused at once where it would be under the locks, not after waiting for them (a snapshot's
    # `verify --deep` holds the snapshots' lock for minutes, and its snapshot refuses the purge).
    check_purge(home, plan_purge(home.catalog, selector), own_run_id=own_run_id)
    if snapshots_supported(home):
        # The lock lives in the snapshots' folder, which the purge's own first snapshot would make:
        # made first, so the lock is held from the start.
        snapshots_root(home).mkdir(parents=True, exist_ok=True)
    # The sources lock last: a scan (the source sensor's takes no ingest lock) waits until the bytes
    # and parses this purge removes are gone, rather than point a source at them in between.
    with _activation_and_writing(home, ingest=True), home.catalog.exclusive(SOURCES_LOCK):
        catalog = home.catalog
        plan = plan_purge(catalog, selector)
        unfinished = [t for t in tombstones(catalog) if t.completed_at is None]
        if not (plan.source_keys or plan.root_ids or unfinished):
            # Nothing matched: nothing is removed, and no release is retired nor old version dropped.
            return PurgeReport(plan, None)
        _drop_own_snapshots(home, unfinished)
        _refuse_if_pinned(home)
        _refuse_if_runs_in_progress(home, own_run_id)
        left = pending_forget(home)
        if left is not None:  # an in-place restore killed part-way: what it had yet to forget goes first
            finish_forgetting(home, left, home_instance(home))
        tomb = add_tombstone(catalog, plan.selector, plan.source_keys, plan.source_hashes, plan.parse_ids,
                             markers=map(root_marker, plan.root_labels))
        report = PurgeReport(plan, tomb, resumed=[t.tombstone_id for t in unfinished])
        # Finish interrupted purges first: their catalog rows may be gone, their tombstone says what.
        parse_ids = set(plan.parse_ids).union(*(t.parse_ids for t in unfinished))
        hashes = set(plan.source_hashes).union(*(t.source_hashes for t in unfinished))
        key_hashes = {source_key_hash(k) for k in plan.source_keys}.union(*(t.source_key_hashes for t in unfinished))
        _remove(home, report, set(plan.source_keys), parse_ids, hashes, set(plan.root_ids), key_hashes)
        for t in unfinished:
            complete_tombstone(catalog, t.tombstone_id)
        complete_tombstone(catalog, tomb)
        return report


def _remove(home: FabricHome, report: PurgeReport, source_keys: set[str], parse_ids: set[str], hashes: set[str],
            root_ids: set[int], key_hashes: set[str]) -> None:
    catalog = home.catalog
    memo_keys = memo_keys_only_of(home, parse_ids)
    # 0. A snapshot first: until the old versions go (step 3) a failed purge can be rolled back.
    # Shared storage (a PostgreSQL catalog, tables on S3) cannot be snapshotted: no roll-back
    # there; the old versions still hold everything until step 3, and the tombstone lets the next
    # purge finish this one.
    snapshot = (create_snapshot(home, _snapshot_note(report.tombstone_id))
                if catalog.current_release() and snapshots_supported(home) else None)
    report.snapshot_id = snapshot.snapshot_id if snapshot else None
    # 1. Rows out of the latest version of every table, deleted rows out of their files.
    before = {name: home.tables.count_rows(name, home.tables.version(name)) if home.tables.exists(name) else 0
              for name in TABLES}
    versions: dict[str, int | None] = {}
    for name in TABLES:
        home.tables.delete_partitions(name, parse_ids)
        versions[name] = home.tables.compact(name)
        after = home.tables.count_rows(name, versions[name]) if versions[name] is not None else 0
        report.rows_removed[name] = before[name] - after
    # 2. A release that pins those versions and a generation rebuilt from their rows.
    current = catalog.current_release()
    if current is not None:
        sources = {k: m for k, m in current.manifest["sources"].items()
                   if k not in source_keys and m["parse_id"] not in parse_ids}
        active = sorted({m["parse_id"] for m in sources.values()})
        gen = home.lexical.build_fresh(pinned_index_documents(home, active, versions))
        # A table's vector digest covers every active parse: with fewer active (a purged source was
        # present) the one recorded no longer matched the rows, and the dense channel was skipped
        # ("vector-digest-mismatch") in every query until the next activation. Recombined from the
        # digests recorded per parse, as activation does.
        recorded = {r.parse_id: r.digests for r in
                    catalog.parse_run_digests(VECTOR_DIGEST_VERDICTS.values(), parse_ids=active)}
        digests = manifest_digests(recorded, active, VECTOR_DIGEST_VERDICTS)
        # Rows were removed: every dense index is rebuilt from the rows that remain (an index built
        # before may hold a purged vector in its files), and every other generation goes below.
        per_parse_digests = manifest_parse_digests(recorded, active, VECTOR_DIGEST_VERDICTS)
        dense = dense_index_records(home, versions, active, digests, rebuild=True, vector_parse_digests=per_parse_digests)
        release = republish(home, current, versions, sources=sources, lexical_generation=gen, dense_indexes=dense,
                            vector_digests=digests, vector_parse_digests=per_parse_digests,
                            note={"purge_tombstone": report.tombstone_id})
        _verify_or_roll_back(home, release, snapshot)
        report.release_id = release.release_id
        report.releases_retired = [r.release_id for r in catalog.releases() if r.release_id != release.release_id]
        # Out of the catalog before their generations and versions go: a query that pinned one then
        # finds it retired and asks again (fabric_query.pipeline.search); `forget` scrubs the rest.
        _retire(catalog, report.releases_retired)
        report.generations_removed = home.lexical.remove_generations({gen})
        report.generations_removed += home.dense_indexes.remove_generations(kept_generations([release.manifest]))
    # 3. The snapshot holds the purged sources too: it goes, then every old version (the retired
    # releases pinned them) and the files only they held.
    if snapshot is not None:
        delete_snapshot(home, snapshot.snapshot_id, writing=True)
    for name in TABLES:
        report.bytes_removed += home.tables.forget_versions(name)
    # 4. Raw bytes, memo entries, catalog rows, Dagster partitions and the run tags naming the sources.
    report.artifacts_removed = sum(home.artifacts.delete(h) for h in sorted(hashes))
    report.memo_entries_removed = delete_memo_entries(home, memo_keys, parse_ids)
    _forget_named_in_state(catalog, source_keys, root_ids)
    forget(catalog, source_keys, parse_ids, hashes, report.releases_retired, root_ids)
    forget_partitions(home_instance(home), parse_ids)
    report.run_tags_removed = forget_source_tags(home_instance(home), source_key_hashes=key_hashes, parse_ids=parse_ids)


def _retire(catalog: Catalog, release_ids: list[int]) -> None:
    """The releases ``release_ids`` out of the catalog (their rows; :func:`forget` scrubs the file)."""
    from fabric_resources.catalog.base import in_batches

    with catalog.transaction(immediate=True) as con:
        for table in ("release_summaries", "releases"):
            for batch, marks in in_batches(release_ids):
                con.execute(f"DELETE FROM {table} WHERE release_id IN ({marks})", batch)


def _forget_named_in_state(catalog: Catalog, source_keys: set[str], root_ids: set[int]) -> None:
    """Catalog state rows that name a purged source or root: the last scan's skipped files (never
    stored, so no source row: a file over the size cap, a FIFO, under a purged root) and the roots'
    paths the activation keeps. Both survived a ``--root`` purge (``fabric status`` went on listing
    the root's skipped files by name); rewritten before :func:`forget` scrubs the file. Also the
    roots the last scan found mounted: a root registered next may be given the purged one's ID,
    and an empty new folder was then taken for that drive unmounted (trial 21f); and the mount points
    found inside them."""
    labels = tuple(f"fs:{r.label}/" for r in catalog.roots() if r.root_id in root_ids)
    try:
        skipped = catalog.state(SCAN_SKIPPED_STATE, dict, valid=str_map)
    except CatalogDamagedError:
        skipped = None  # a report the next scan rewrites: written again below, empty
    kept = {k: v for k, v in (skipped or {}).items() if not (k in source_keys or (labels and k.startswith(labels)))}
    if kept != skipped:
        catalog.set_state(SCAN_SKIPPED_STATE, kept)
    try:
        mounted = catalog.state(SCAN_MOUNTED_STATE)
    except CatalogDamagedError:
        mounted = None  # the scan reads it as none and writes it again
    if root_ids and isinstance(mounted, list):
        still = [r for r in mounted if not (isinstance(r, int) and r in root_ids)]
        if still != mounted:
            catalog.set_state(SCAN_MOUNTED_STATE, still)
    try:
        inner = catalog.state(SCAN_INNER_MOUNTS_STATE)
    except CatalogDamagedError:
        inner = None  # likewise
    purged = {str(r) for r in root_ids}  # its keys are root IDs as text (JSON object keys)
    if isinstance(inner, dict) and purged & inner.keys():
        catalog.set_state(SCAN_INNER_MOUNTS_STATE, {k: v for k, v in inner.items() if k not in purged})
    try:
        marks = catalog.state(ACTIVATION_MARKS)
    except CatalogDamagedError:
        return
    if root_ids and isinstance(marks, dict) and isinstance(marks.get("roots"), list):
        roots = [r for r in marks["roots"] if not (isinstance(r, list) and r and r[0] in root_ids)]
        if roots != marks["roots"]:
            catalog.set_state(ACTIVATION_MARKS, {**marks, "roots": roots})


def _verify_or_roll_back(home: FabricHome, release, snapshot) -> None:
    """The re-published release must serve: its index equals a reconstruction from its rows. If
    not, the home goes back to the snapshot and the purge stops (its tombstone stays unfinished)."""
    from fabric_resources.lexical_health import lexical_health

    health = lexical_health(home, release)
    if health.healthy:
        return
    if snapshot is None:  # shared storage: nothing to roll back to
        raise PurgeRefused(f"the release re-published without the purged sources failed its check "
                           f"({health.problem}); old table versions are kept: repair the home "
                           "(`fabric lexical-repair`), then run the purge again to finish it")
    restore_snapshot(home, *find_snapshot(home, snapshot.snapshot_id), False, writing=True)
    raise PurgeRefused(f"the release re-published without the purged sources failed its check ({health.problem}); "
                       f"the home is back at snapshot {snapshot.snapshot_id}, nothing removed")


def tombstone_summary(t: Tombstone) -> dict:
    """A tombstone as JSON-ready data (hashes only)."""
    return {"tombstone_id": t.tombstone_id, "purged_at": t.purged_at, "selector": t.selector,
            "sources": len(t.source_key_hashes), "source_hashes": list(t.source_hashes),
            "parse_ids": list(t.parse_ids), "completed": t.completed_at is not None}


__all__ = ["PurgePlan", "PurgeRefused", "PurgeReport", "PurgeSelector", "check_purge", "parse_before", "plan_purge",
           "purge", "tombstone_summary"]
