"""``fabric lexical-repair`` and ``fabric dense-index-repair``: rebuild a serving index from
canonical tables only.

No re-parse and no re-embedding: the new generation is built from the
release's canonical chunk texts (or its pinned vector rows), then published as a new release whose
manifest differs only in that index. ``lexical_repair`` returns the health reports
before and after; the canonical digest must be the same in both.

An index that checks sound is left as it is and nothing is published (``published`` False): a new
release over the same rows changed nothing a search sees, yet it is one of the most recent releases
retention keeps (``retention.releases``), so a repair run "to be sure" pushed the oldest kept
release, and the index generations only it named, out.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabric_assets.activation.activate import RETAINED_RELEASES, activation_lock
from fabric_assets.activation.dense_index import dense_index_records, release_digests, serving_problem
from fabric_assets.chunking.records import lexical_rows
from fabric_resources.dense_index import MANIFEST_KEY as DENSE_INDEXES, kept_generations
from fabric_resources.home import FabricHome
from fabric_resources.lexical_health import HealthReport, canonical_chunks, canonical_windows, lexical_health
from fabric_resources.lexical_index import index_documents
from fabric_resources.vector_digest import PARSES_MANIFEST_KEY as VECTOR_PARSE_DIGESTS


@dataclass(frozen=True)
class RepairReport:
    """The health reports before and after, and the release current after the repair: the one it
    published, or (``published`` False: the index was healthy) the one that stays current."""

    before: HealthReport
    after: HealthReport
    release_id: int
    published: bool = True

    @property
    def canonical_unchanged(self) -> bool:
        return self.before.canonical_digest == self.after.canonical_digest


def lexical_repair(home: FabricHome) -> RepairReport:
    """Rebuild and publish, unless the serving index is healthy (``published`` False, nothing
    changed); raises ``ValueError`` if the home has no release."""
    with activation_lock(home):
        current = home.catalog.current_release()
        if current is None:
            raise ValueError("no release to repair")
        before = lexical_health(home, current)
        if before.healthy and not before.segment_record_problems:
            return RepairReport(before=before, after=before, release_id=current.release_id, published=False)
        chunks = canonical_chunks(home, current)
        generation = home.lexical.build_fresh(index_documents(lexical_rows(chunks), canonical_windows(home, current)))
        manifest = {k: v for k, v in current.manifest.items() if k not in ("release_id", "created_at")}
        manifest.update(lexical_generation=generation, repaired_from=current.release_id)
        release = home.catalog.publish_release(manifest, expected_current=current.release_id)
    return RepairReport(before=before, after=lexical_health(home, release), release_id=release.release_id)


@dataclass(frozen=True)
class DenseRepairReport:
    """The dense index records before and after (table → record), and the release current after
    the repair: the one it published, or (``published`` False: every record was sound) the one that
    stays current."""

    before: dict
    after: dict
    release_id: int
    published: bool = True


def dense_index_repair(home: FabricHome) -> DenseRepairReport:
    """Build the current release's dense ANN indexes again from its pinned vector rows, as
    ``query.dense_search`` wants them now, and publish them; returns the records before and after.
    A generation that would serve the release (:func:`serving_problem` finds nothing) is kept; when
    every record is kept, nothing is published.

    Raises
    ------
    ValueError
        If the home has no release.
    """
    with activation_lock(home):
        current = home.catalog.current_release()
        if current is None:
            raise ValueError("no release to repair")
        active = sorted({m["parse_id"] for m in current.manifest["sources"].values()})
        manifest = {k: v for k, v in current.manifest.items() if k not in ("release_id", "created_at")}
        before = dict(manifest.get(DENSE_INDEXES) or {})
        # Only generations checked whole are offered for reuse (the activation's reuse reads their
        # meta only: a damaged data file would be kept).
        sound = {t: r for t, r in before.items()
                 if isinstance(r, dict) and r.get("generation") and serving_problem(home, t, r, active) is None}
        records = dense_index_records(home, current.manifest["tables"], active, release_digests(current.manifest),
                                      previous=sound, vector_parse_digests=current.manifest.get(VECTOR_PARSE_DIGESTS))
        if records == before:
            return DenseRepairReport(before=before, after=records, release_id=current.release_id, published=False)
        manifest.update({DENSE_INDEXES: records, "repaired_from": current.release_id})
        release = home.catalog.publish_release(manifest, expected_current=current.release_id)
        kept = home.catalog.releases()[-max(RETAINED_RELEASES, home.config.retention.releases):]
        home.dense_indexes.remove_generations(kept_generations([*(r.manifest for r in kept), manifest]))
    return DenseRepairReport(before=before, after=records, release_id=release.release_id)
