"""Forgetting parses: the steps a purge and an in-place snapshot restore share, and what such a
restore forgets.

An in-place restore puts the snapshot's catalog back, and that catalog does not know the
sources, versions and parses the home acquired after the snapshot. Left in the home, their text
could be neither served nor purged (``fabric purge`` finds sources in the catalog), and the raw
bytes of a file deleted after the snapshot stayed for good: retention removes the rows of a parse
no catalog names, never bytes it cannot attribute. So :func:`forget_after_restore` takes out
what only the replaced catalog named: those parses' rows from the latest version of every table
and every table version no restored release pins, their annotation memo entries, the raw bytes
no restored source holds, every index generation no restored release or snapshot names, and
the Dagster run tags and partitions that name them. A parse both catalogs name that was written
again after the snapshot gets back the rows the restored release pins. What another snapshot of
the home still holds keeps its own copy (its tags, links and catalog), so restoring that snapshot later gives
it back; a file still in its folder is read again by the next ingest. What the replaced catalog
knew is written to :data:`PENDING_FILE` before the catalog is put back, so a restore killed
part-way is finished by the next restore or purge.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from fabric_resources.catalog import Catalog
from fabric_resources.dense_index import kept_generations
from fabric_resources.home import FabricHome
from fabric_resources.schema import TABLES, HomeLayout


@dataclass(frozen=True)
class Known:
    """What one catalog names: its parse IDs, the content hashes of its sources' versions (every
    acquisition and parse run), its source keys and its highest release ID."""

    parse_ids: frozenset[str]
    hashes: frozenset[str]
    source_keys: frozenset[str]
    last_release_id: int | None


@dataclass
class Forgotten:
    """What :func:`forget_after_restore` removed."""

    parse_ids: list[str] = field(default_factory=list)
    source_keys: int = 0
    artifacts_removed: int = 0
    rows_removed: dict[str, int] = field(default_factory=dict)
    bytes_removed: int = 0
    memo_entries_removed: int = 0
    generations_removed: list[str] = field(default_factory=list)
    run_tags_removed: int = 0
    #: Table → parse IDs whose rows were written again after the snapshot and were put back as
    #: the restored release pins them.
    rows_put_back: dict[str, list[str]] = field(default_factory=dict)


#: In the home while an in-place restore runs (``HomeLayout.restore_pending``): what the catalog
#: it replaces knew (a restore killed part-way is finished by the next ingest, restore or purge).
PENDING_FILE = HomeLayout(Path(".")).restore_pending.name


def record_pending(home: FabricHome, before: Known) -> Known:
    """Write ``before`` (joined with what an interrupted restore left pending) to
    :data:`PENDING_FILE` atomically; return the union."""
    left = pending(home)
    if left is not None:
        before = Known(before.parse_ids | left.parse_ids, before.hashes | left.hashes,
                       before.source_keys | left.source_keys,
                       max((x for x in (before.last_release_id, left.last_release_id) if x is not None), default=None))
    path = home.root / PENDING_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"parse_ids": sorted(before.parse_ids), "hashes": sorted(before.hashes),
                               "source_keys": sorted(before.source_keys), "last_release_id": before.last_release_id}))
    os.replace(tmp, path)
    return before


def pending(home: FabricHome) -> Known | None:
    """What an interrupted in-place restore had yet to forget, or None (no such file, or one that
    cannot be read: then nothing can be said about it, and it is left for a person to look at)."""
    try:
        data = json.loads((home.root / PENDING_FILE).read_text())
        return Known(frozenset(data["parse_ids"]), frozenset(data["hashes"]), frozenset(data["source_keys"]),
                     data["last_release_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def clear_pending(home: FabricHome) -> None:
    (home.root / PENDING_FILE).unlink(missing_ok=True)


def known(catalog: Catalog) -> Known:
    """What ``catalog`` names (reads it; one query per source for its acquisitions)."""
    sources = catalog.sources()
    hashes = {s.source_hash for s in sources if s.source_hash}
    for s in sources:
        hashes.update(a["source_hash"] for a in catalog.acquisitions(s.source_key))
    runs = catalog.parse_run_states()
    hashes.update(h for _, _, h in runs if h)
    last = max((r.release_id for r in catalog.release_summaries()), default=None)
    return Known(frozenset(p for p, _, _ in runs), frozenset(hashes), frozenset(s.source_key for s in sources), last)


def _annotation_uses(home: FabricHome) -> list[tuple[str, str]]:
    """``(parse ID, memo key)`` of every row of the latest ``annotations`` table (none without it)."""
    if not home.tables.exists("annotations"):
        return []
    rows = home.tables.read("annotations", columns=["parse_id", "memo_key"]).to_pydict()
    return list(zip(rows["parse_id"], rows["memo_key"]))


def memo_keys_only_of(home: FabricHome, parse_ids: set[str]) -> set[str]:
    """Memo keys used by ``parse_ids`` and by no other parse (the same excerpt text elsewhere
    shares its entry, and that text stays). Uses are what the memo recorded (every parse that
    stored or found an entry) and the latest ``annotations`` rows (entries memoised before uses
    were recorded). Read before the parses' rows are deleted."""
    memo_path = home.layout.annotation_memo
    if not parse_ids or not memo_path.exists():
        return set()
    from fabric_resources.annotator.memo import AnnotationMemo

    mine, others = set(), set()
    for pid, key in _annotation_uses(home):
        (mine if pid in parse_ids else others).add(key)
    with AnnotationMemo(memo_path) as memo:
        mine |= memo.keys_used_by(parse_ids)
        others |= {k for k, users in memo.users_of(mine).items() if users - parse_ids}
    return mine - others


def delete_memo_entries(home: FabricHome, memo_keys: set[str], parse_ids: set[str] = frozenset()) -> int:
    """Delete ``memo_keys`` and the uses ``parse_ids`` recorded from the annotation memo, and
    rewrite its file when an entry went (no deleted entry's page survives); return how many
    entries went."""
    memo_path = home.layout.annotation_memo
    if not (memo_keys or parse_ids) or not memo_path.exists():
        return 0  # and no annotation module loaded: a restore stays free of model clients
    from fabric_resources.annotator.memo import AnnotationMemo
    from fabric_resources.tombstones import scrub

    with AnnotationMemo(memo_path) as memo:
        removed = memo.delete(memo_keys, parse_ids=parse_ids)
    if removed:
        scrub(memo_path)
    return removed


def adopt_memo_entries(home: FabricHome) -> int:
    """Entries memoised before the memo recorded uses get the parses whose latest ``annotations``
    rows use them; an entry no row uses goes (its parse was removed, and with the rows went the
    only way to find it). Returns how many went. Once every entry has a use this reads nothing
    but the memo: call it before each cleanup."""
    memo_path = home.layout.annotation_memo
    if not memo_path.exists():
        return 0
    from fabric_resources.annotator.memo import AnnotationMemo

    with AnnotationMemo(memo_path) as memo:
        unowned = memo.unowned_keys()
        if not unowned:
            return 0
        uses = {(k, p) for p, k in _annotation_uses(home) if k in unowned}
        memo.record_uses(uses)
        orphans = unowned - {k for k, _ in uses}
    return delete_memo_entries(home, orphans)


def forget_partitions(instance, parse_ids: set[str]) -> None:
    """Drop ``parse_ids``' partitions from Dagster's ``parses`` set (their keys are hashes; the UI
    stops listing them)."""
    if not parse_ids:
        return
    known_keys = set(instance.get_dynamic_partitions("parses"))
    for pid in sorted(parse_ids & known_keys):
        instance.delete_dynamic_partition("parses", pid)


def forget_after_restore(home: FabricHome, before: Known, *, snapshot_lexical: set[str],
                         snapshot_dense: dict[str, set[str]], snapshot_parse_ids: set[str],
                         snapshot_source_keys: set[str], instance=None) -> Forgotten:
    """Remove from ``home`` (its catalog just restored in place) what only the catalog it replaced,
    ``before``, named (see the module docstring). ``snapshot_*``: the index generations, parse IDs
    and source keys the home's snapshots still hold; their Dagster run tags and partitions stay.
    ``instance``: the home's Dagster instance (default: opened from ``<home>/dagster``).

    The caller holds the ingest and activation locks and has checked that no Dagster run is in
    progress: table files no version references are removed however young.
    """
    from fabric_assets.lifecycle.run_history import home_instance
    from fabric_assets.source_tags import forget_source_tags
    from fabric_resources.tombstones import source_key_hash

    catalog = home.catalog
    now = known(catalog)
    out = Forgotten(parse_ids=sorted(before.parse_ids - now.parse_ids))
    parse_ids = set(out.parse_ids)
    memo_keys = memo_keys_only_of(home, parse_ids)
    releases = catalog.releases()
    current = catalog.current_release()
    for name in TABLES:
        if not home.tables.exists(name):
            continue
        pinned = current.manifest.get("tables", {}).get(name) if current is not None else None
        # A parse both catalogs know may have been written again after the snapshot (`parse
        # reparse`, a re-derivation): its rows in the latest version are then not the ones the
        # restored release pins and its catalog records (row counts, vector digests), and the next
        # write on top of them published a release whose dense channel was off
        # (vector-digest-mismatch). Those parses get the pinned rows back.
        rewritten = home.tables.parse_ids_rewritten_since(name, pinned) - parse_ids if pinned is not None else set()
        if rewritten:
            home.tables.replace_partitions(name, rewritten,
                                           home.tables.read(name, parse_ids=rewritten, version=pinned))
            out.rows_put_back[name] = sorted(rewritten)
        if parse_ids or rewritten:
            rows = home.tables.count_rows(name, home.tables.version(name))
            home.tables.delete_partitions(name, parse_ids)
            version = home.tables.compact(name)
            if parse_ids:
                out.rows_removed[name] = rows - (home.tables.count_rows(name, version) if version is not None else 0)
        keep = {r.manifest.get("tables", {}).get(name) for r in releases} - {None}
        out.bytes_removed += home.tables.forget_versions(name, keep)
    out.memo_entries_removed = delete_memo_entries(home, memo_keys, parse_ids)
    out.artifacts_removed = sum(home.artifacts.delete(h) for h in sorted(before.hashes - now.hashes))
    out.generations_removed = home.lexical.remove_generations(
        {r.manifest.get("lexical_generation") for r in releases} | snapshot_lexical)
    dense = kept_generations(r.manifest for r in releases)
    for table, gens in snapshot_dense.items():
        dense.setdefault(table, set()).update(gens)
    out.generations_removed += home.dense_indexes.remove_generations(dense)
    forgotten_keys = before.source_keys - now.source_keys
    out.source_keys = len(forgotten_keys)
    keys = forgotten_keys - snapshot_source_keys  # a snapshot that knows a name keeps its tags
    instance = instance or home_instance(home)
    gone = parse_ids - snapshot_parse_ids
    forget_partitions(instance, gone)
    out.run_tags_removed = forget_source_tags(instance, source_key_hashes={source_key_hash(k) for k in keys},
                                             parse_ids=gone, rewrite_file=False)
    return out


__all__ = ["Forgotten", "Known", "PENDING_FILE", "adopt_memo_entries", "clear_pending", "delete_memo_entries",
           "forget_after_restore", "forget_partitions", "known", "memo_keys_only_of", "pending", "record_pending"]
