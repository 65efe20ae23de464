"""Retention: remove what no retained release, snapshot or source needs, once it is old enough.

``cleanup`` (``fabric cleanup``, ``cleanup_job``, and after every activation that published when
``retention.after_activation``) applies the ``retention`` config section:

* **releases**: the ``retention.releases`` most recent releases are retained, and every release
  published less than ``retention.release_days`` ago, with the table versions and index
  generations they pin; older release rows go, then the versions and generations only they
  pinned;
* **parses** no retained release names and no present (or unreachable) source points at are
  *unpinned*. From the first cleanup that finds one unpinned, its age counts (catalog state
  ``retention_unpinned_since``); once older than the kind's limit — ``failed_days`` for a failed
  parse, ``deleted_days`` when every source that held its bytes is deleted, ``superseded_days``
  otherwise — its rows leave every table, its parse run the catalog, and its bytes the artifact
  store unless another parse or source still holds them. A parse pinned again (a file reverted)
  starts over. Annotation memo entries no remaining parse used go with the removed parses' rows.
  The Dagster run tags that name a removed parse's sources go too
  (:mod:`fabric_assets.source_tags`), so a deleted file's name leaves Dagster with its last version.

Deleted rows stay in Lance's data files until a compaction rewrites them, and the current
release pins the versions from before: the current release is re-published over the compacted
versions (:mod:`fabric_assets.lifecycle.republish`) when none of its parses is being re-derived,
so the old versions and their files can go. Never removed: a version, generation or release a
retained release or a snapshot (Lance tag) pins. Dense ANN index generations go with the last
retained release that names them. Cleanup may run beside parse runs: it only
deletes rows of parses no run writes (unpinned ones), and forgets versions without Lance's
``delete_unverified`` (a concurrent writer's new files are never touched).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from fabric_assets.activation.activate import activation_lock
from fabric_assets.lifecycle.forgetting import adopt_memo_entries, delete_memo_entries, memo_keys_only_of
from fabric_assets.lifecycle.republish import active_parses_unchanged, republish
from fabric_resources.catalog import CatalogDamagedError, number_map
from fabric_resources.dense_index import kept_generations
from fabric_resources.home import FabricHome
from fabric_resources.schema import SOURCES_LOCK, TABLES
from fabric_resources.tombstones import tombstones

#: Catalog state: ``{parse_id: unix time it was first found unpinned}``.
UNPINNED_SINCE = "retention_unpinned_since"
#: Catalog state: ``{"fragments": {table: highest fragment number read}, "pending": [parse IDs
#: found without a parse run and not removed yet]}`` (:func:`_orphans`).
ORPHAN_SCAN = "retention_orphan_scan"
#: The tables every parse writes first: rows of a parse that has no parse run show up here.
_ORPHAN_TABLES = ("units", "chunks")
_DAY_S = 86_400.0


@dataclass
class CleanupReport:
    """What one cleanup removed (parse IDs by kind) and what it kept."""

    removed: dict[str, list[str]] = field(default_factory=lambda: {"superseded": [], "failed": [], "deleted": []})
    waiting: int = 0  # unpinned parses not old enough yet
    releases_removed: list[int] = field(default_factory=list)
    generations_removed: list[str] = field(default_factory=list)
    artifacts_removed: int = 0
    bytes_removed: int = 0
    memo_entries_removed: int = 0
    republished: int | None = None  # the release re-published over compacted versions
    runs_removed: list[str] = field(default_factory=list)  # Dagster runs deleted (run_history)
    run_tags_removed: int = 0  # Dagster run tags naming a removed parse (fabric_assets.source_tags)
    #: Why the snapshots could not be read (a cleanup after an activation: every release and index
    #: generation was kept, the rest of the retention applied); None when they were.
    snapshots_problem: str | None = None

    @property
    def parses_removed(self) -> int:
        return sum(len(v) for v in self.removed.values())


def snapshot_pins(home: FabricHome) -> tuple[set[int], set[str]]:
    """Releases and index generations the home's snapshots pin (their table versions are pinned by
    Lance tags, which :meth:`TableStore.forget_versions` always keeps)."""
    from fabric_assets.lifecycle.snapshots import pinned_by_snapshots

    return pinned_by_snapshots(home)


def cleanup(home: FabricHome, *, now: float | None = None, instance=None,
            without_snapshots: bool = False) -> CleanupReport:
    """Apply ``home.config.retention`` once (see the module docstring); return what it did.

    Holds the activation lock (no release is published meanwhile), then the catalog's ``sources``
    lock (no scan records a source meanwhile). ``instance``: the home's Dagster instance whose run
    history is pruned (:mod:`fabric_assets.lifecycle.run_history`; default: opened from
    ``<home>/dagster``). ``without_snapshots`` (the cleanup after an
    activation): when the snapshots cannot be read, what they pin is unknown, so every release and
    index generation is kept and the rest applied; ``snapshots_problem`` in the report says why.

    Raises
    ------
    fabric_resources.catalog.CatalogDamagedError
        The current pointer names a release the catalog lacks, or a release summary cannot be
        decoded: nothing is removed.
    fabric_assets.lifecycle.snapshots.SnapshotError
        The home's ``snapshots`` is no folder (a file, a broken link or a loop) and not
        ``without_snapshots``: nothing is removed.
    """
    now = time.time() if now is None else now
    with activation_lock(home):
        # A scan takes old parses back: what no source needs is decided and removed while none runs.
        with home.catalog.exclusive(SOURCES_LOCK):
            report, retained, pinned = _cleanup(home, now, without_snapshots)
        report.runs_removed = _prune_runs(home, now, instance, retained, pinned)
        removed = [p for parses in report.removed.values() for p in parses]
        if removed:
            from fabric_assets.lifecycle.run_history import home_instance
            from fabric_assets.source_tags import forget_source_tags

            # The run tags naming their sources go with the parses (a deleted file's name with its
            # last version): fabric_assets.source_tags.
            report.run_tags_removed = forget_source_tags(instance or home_instance(home), parse_ids=removed,
                                                         rewrite_file=False)
        return report


def _prune_runs(home: FabricHome, now: float, instance, retained: list, pinned: set[str]) -> list[str]:
    """``pinned``: the parses the retained releases and the live sources name."""
    from fabric_assets.lifecycle.run_history import home_instance, prune_runs

    return prune_runs(instance or home_instance(home), pinned, {r.release_id for r in retained},
                      home.config.retention.runs_days * _DAY_S, now)


def _published_at(releases: list, now: float) -> dict[int, float]:
    """Each release's publication time for its age: no later than ``now`` nor than any release
    published after it (``releases`` by ID). A release stamped while the clock was ahead (set back
    since) has a time past ``now``: a negative age is inside any window, so it was kept until the
    clock caught up, a year for a clock a year ahead; it now ages from the next release's time."""
    out, bound = {}, now
    for r in reversed(releases):
        bound = min(bound, r.created_at)
        out[r.release_id] = bound
    return out


def _retained(home: FabricHome, now: float | None = None, releases: list | None = None,
              pins: tuple[set[int], set[str]] | None = None) -> list:
    """The releases retention keeps, of ``releases`` (default: the catalog's, read now); ``pins``:
    :func:`snapshot_pins` (default: read now)."""
    # A re-published release replaces the one it was re-published from (same parses and index,
    # compacted versions): it does not push an older release out of the count.
    # A snapshot's release and the current one are kept even when replaced (a snapshot restored in
    # place makes its release current again, and a cleanup then re-publishes it).
    releases = home.catalog.release_summaries() if releases is None else releases
    replaced = {(r.manifest.get("republished") or {}).get("from_release") for r in releases}
    counted = [r for r in releases if r.release_id not in replaced]
    keep_n, window = home.config.retention.releases, home.config.retention.release_days * _DAY_S
    now = time.time() if now is None else now
    pinned_ids, _ = snapshot_pins(home) if pins is None else pins
    current = home.catalog.current_release_id()
    published = _published_at(counted, now)
    recent = {r.release_id for i, r in enumerate(counted) if i >= len(counted) - keep_n or now - published[r.release_id] < window}
    return [r for r in releases if r.release_id in recent or r.release_id in pinned_ids or r.release_id == current]


def _snapshot_releases(releases: list, pins: tuple[set[int], set[str]]) -> list:
    """Of ``releases``, those the home's snapshots pin (``pins``: :func:`snapshot_pins`; retained
    releases, by :func:`_retained`; listed again so their dense indexes are kept even if that changes)."""
    pinned, _ = pins
    return [r for r in releases if r.release_id in pinned]


def _cleanup(home: FabricHome, now: float, without_snapshots: bool = False) -> tuple[CleanupReport, list, set[str]]:
    """Apply the retention of parses, releases, generations, table versions and artifacts; return
    the report, the releases it retains and the parses those releases and the live sources pin (for
    the run history; a re-publication names the same parses as the release it replaces).
    The catalog's releases, sources and parse runs are each read once: at many sources their
    manifests and rows are most of a cleanup's cost."""
    catalog, retention, report = home.catalog, home.config.retention, CleanupReport()
    # A damaged catalog is refused before anything is removed by what it says (the summary alone:
    # the full manifest is the costly read at many sources).
    current = catalog.current_release_id()
    if current is not None and catalog.release_summary(current) is None:
        raise CatalogDamagedError.missing_current(current)
    sources = catalog.source_states()
    live = [(parse_id, source_hash) for state, parse_id, source_hash in sources if state in ("present", "access_lost")]
    live_parses = {p for p, _ in live if p}
    # Manifests without their sources (parsed by the database, not decoded here); the retained
    # releases are asked only about the parses that could be unpinned, below.
    releases = catalog.release_summaries()
    from fabric_assets.lifecycle.snapshots import SnapshotError  # as snapshot_pins imports it

    try:
        pins = snapshot_pins(home)
    except SnapshotError as exc:
        if not without_snapshots:
            raise
        # What the snapshots pin is unknown: every release stays (so do its parses, versions and
        # generations), and every index generation; parses no release names still go.
        report.snapshots_problem = str(exc)
        pins = ({r.release_id for r in releases}, None)
    runs = catalog.parse_run_states()
    known = {parse_id for parse_id, _, _ in runs}
    # Rows whose parse run is gone (a run was still writing a parse an earlier cleanup removed).
    orphans, fragments = _orphans(home, known)
    # Only parses no live source points at can be unpinned: ask the retained releases about those.
    pinned = live_parses | catalog.release_parse_ids((r.release_id for r in _retained(home, now, releases, pins)),
                                                     among=(known - live_parses) | orphans)
    live_hashes = {h for _, h in live if h}
    deleted_hashes = {h for state, _, h in sources if state == "deleted" and h}
    since = {p: t for p, t in (catalog.state(UNPINNED_SINCE, dict, valid=number_map, memo=True) or {}).items()}
    doomed: dict[str, str] = {}
    for parse_id, status, source_hash in runs:
        if parse_id in pinned:
            since.pop(parse_id, None)
            continue
        # Found unpinned while the clock was ahead (set back since): counted from now, not kept
        # until the clock reaches that time.
        first = since[parse_id] = min(since.get(parse_id, now), now)
        kind = ("failed" if status == "failed" else
                "deleted" if source_hash in deleted_hashes and source_hash not in live_hashes else "superseded")
        if now - first >= getattr(retention, f"{kind}_days") * _DAY_S:
            doomed[parse_id] = kind
        else:
            report.waiting += 1
    doomed.update({p: "orphaned" for p in orphans - pinned})
    for pid, kind in sorted(doomed.items()):
        report.removed.setdefault(kind, []).append(pid)
        since.pop(pid, None)
    catalog.set_state(UNPINNED_SINCE, {p: t for p, t in since.items() if p in known})

    if doomed:
        # Only then: a compaction is a new table version, and re-publishing a new release.
        memo_keys = memo_keys_only_of(home, set(doomed))  # read while the parses' rows are there
        versions = {name: (home.tables.delete_partitions(name, doomed), _compact(home, name))[1] for name in TABLES}
        # The memo held these parses' text (statements, quotes, names) after their rows went.
        report.memo_entries_removed += delete_memo_entries(home, memo_keys, set(doomed))
        current = catalog.current_release()
        if current is not None and active_parses_unchanged(home, current):
            report.republished = republish(home, current, versions, note={"cleanup": True}).release_id
            releases = catalog.release_summaries()
    # A memo written before uses were recorded: its entries are adopted by the parses whose rows
    # use them, and those of parses already removed go (once; then this reads the memo only).
    report.memo_entries_removed += adopt_memo_entries(home)
    # Recorded once their rows are gone: a cleanup stopped before that reads the same fragments again.
    catalog.set_state(ORPHAN_SCAN, {"fragments": fragments, "pending": sorted(orphans - set(doomed))})
    if report.snapshots_problem is not None:  # a re-publication since: its release is new, kept too
        pins = ({r.release_id for r in releases}, None)
    retained = _retained(home, now, releases, pins)
    retained_ids = {r.release_id for r in retained}
    report.releases_removed = [r.release_id for r in releases if r.release_id not in retained_ids]
    # Out of the catalog before any file of theirs goes: a query that pinned one of them and finds
    # it still there once it has answered read only whole files (fabric_query.pipeline.search asks
    # again otherwise). A cleanup killed after this leaves their files to the next one.
    _forget(home, sorted(doomed), report.releases_removed)
    doomed_hashes = {h for p, _, h in runs if p in doomed}
    still_held = {h for p, _, h in runs if p not in doomed} | live_hashes
    report.artifacts_removed = sum(home.artifacts.delete(h) for h in sorted(doomed_hashes - still_held))
    if pins[1] is not None:  # else the snapshots' generations are unknown: none goes
        keep_gens = {r.manifest.get("lexical_generation") for r in retained} | pins[1]
        report.generations_removed = home.lexical.remove_generations(keep_gens)
        # Dense ANN indexes hold copies of their release's active rows only: they go with the releases
        # that name them (the current one, re-published over compacted versions, keeps its own).
        snapshot_releases = _snapshot_releases(releases, pins)
        report.generations_removed += home.dense_indexes.remove_generations(
            kept_generations([*(r.manifest for r in retained), *(r.manifest for r in snapshot_releases)]))
    for name in TABLES:
        keep = {r.manifest.get("tables", {}).get(name) for r in retained} - {None}
        report.bytes_removed += home.tables.forget_versions(name, keep, delete_unverified=False)
    # The artifact store is this home directory's: a purge run from another one on the same shared
    # catalog could not reach it. The bytes a finished purge names go here too, unless held again.
    purged = {h for t in tombstones(catalog) if t.completed_at is not None for h in t.source_hashes}
    held = still_held | {h for _, _, h in sources if h}
    report.artifacts_removed += sum(home.artifacts.delete(h) for h in sorted(purged - held))
    return report, retained, pinned


def _orphan_scan_record(value: dict) -> bool:
    """An :data:`ORPHAN_SCAN` value: ``fragments`` a table → fragment number (or null) object,
    ``pending`` a list of parse IDs (damaged, the next cleanup reads every fragment again)."""
    fragments, pending = value.get("fragments") or {}, value.get("pending") or []
    return (isinstance(fragments, dict) and isinstance(pending, list) and all(isinstance(p, str) for p in pending)
            and all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in fragments.values()))


def _orphans(home: FabricHome, known: set[str]) -> tuple[set[str], dict[str, int | None]]:
    """Parses with rows in ``units`` or ``chunks`` but no parse run in ``known``, and the highest
    fragment number read per table (for :data:`ORPHAN_SCAN`).

    Only the fragments committed since the last cleanup are read (orphan rows come from a writer
    that commits after its parse run was removed: a later fragment), plus the orphans found before
    and kept (pinned): reading every ``parse_id`` of both tables grew with the corpus. A table whose
    highest fragment number went down (a version restored) is read whole.
    """
    seen = home.catalog.state(ORPHAN_SCAN, dict, valid=_orphan_scan_record, memo=True) or {}
    read = dict(seen.get("fragments") or {})
    found = set(seen.get("pending") or ())
    for name in _ORPHAN_TABLES:
        ids, newest = home.tables.parse_ids_written_after(name, read.get(name))
        if newest is not None and read.get(name) is not None and newest < read[name]:
            ids, newest = home.tables.parse_ids_written_after(name, None)
        found |= ids
        read[name] = newest
    return found - known, read


def _compact(home: FabricHome, name: str) -> int | None:
    try:
        return home.tables.compact(name)
    except OSError:
        # A concurrent writer committed first (Lance reports the conflict as an IO error): the rows
        # are deleted all the same; the next cleanup rewrites their files.
        return home.tables.version(name)


def _forget(home: FabricHome, parse_ids: list[str], release_ids: list[int]) -> None:
    from fabric_resources.catalog.base import in_batches

    with home.catalog.transaction(immediate=True) as con:
        for sql, values in (("DELETE FROM parse_runs WHERE parse_id IN ({})", parse_ids),
                            ("DELETE FROM release_summaries WHERE release_id IN ({})", release_ids),
                            ("DELETE FROM releases WHERE release_id IN ({})", release_ids)):
            for batch, marks in in_batches(values):
                con.execute(sql.format(marks), batch)
        # Intervals that end before the oldest release left name nothing any more.
        con.execute("DELETE FROM release_parses WHERE last_release < (SELECT MIN(release_id) FROM releases)")
        home.catalog.log_event(con, "cleanup", detail={"parses": len(parse_ids), "releases": release_ids})
