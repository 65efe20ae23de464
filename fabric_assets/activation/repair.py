"""``fabric lexical-repair``: rebuild the serving index from canonical chunk tables only.

No re-parse and no re-embedding: the new generation is built from the
release's canonical chunk texts, then published as a new release whose
manifest differs only in its index generation. Returns the health reports
before and after; the canonical digest must be the same in both.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabric_assets.activation.activate import activation_lock
from fabric_assets.chunking.records import lexical_rows
from fabric_resources.home import FabricHome
from fabric_resources.lexical_health import HealthReport, canonical_chunks, canonical_windows, lexical_health
from fabric_resources.lexical_index import index_documents


@dataclass(frozen=True)
class RepairReport:
    before: HealthReport
    after: HealthReport
    release_id: int

    @property
    def canonical_unchanged(self) -> bool:
        return self.before.canonical_digest == self.after.canonical_digest


def lexical_repair(home: FabricHome) -> RepairReport:
    """Rebuild and publish; raises ``ValueError`` if the home has no release."""
    with activation_lock(home):
        current = home.catalog.current_release()
        if current is None:
            raise ValueError("no release to repair")
        before = lexical_health(home, current)
        chunks = canonical_chunks(home, current)
        generation = home.lexical.build_fresh(index_documents(lexical_rows(chunks), canonical_windows(home, current)))
        manifest = {k: v for k, v in current.manifest.items() if k not in ("release_id", "created_at")}
        manifest.update(lexical_generation=generation, repaired_from=current.release_id)
        release = home.catalog.publish_release(manifest, expected_current=current.release_id)
    return RepairReport(before=before, after=lexical_health(home, release), release_id=release.release_id)
