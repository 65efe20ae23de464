"""Activation: choose one active parse per source and publish an immutable release.

Serialised by a file lock on the home. Reads the catalog's sources and
per-parse statuses (``ready`` = parsed and every gate verdict passed), builds
the next serving-index generation incrementally (remove superseded parses,
add newly active ones), records the table versions, and swaps the ``current``
release pointer in one transaction. A source whose newest parse is pending,
failed or held keeps its previous active parse; a deleted source is dropped;
a withheld source (``sources.withheld``) is never in a release.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from fabric_assets.gate import REQUIRED_VERDICTS, gate_status, required_verdicts
from fabric_resources.catalog import Catalog, Release, StatusUpdate
from fabric_resources.config import config_hash
from fabric_resources.home import FabricHome, exclusive_lock
from fabric_resources.schema import SCHEMA_VERSION, TABLES
from fabric_resources.vector_digest import MANIFEST_KEY as VECTOR_DIGESTS, manifest_digests

#: Lexical generations of this many most recent releases are kept on disk.
RETAINED_RELEASES = 3

#: Tables rewritten for parses that are already active — annotations and the entity graph (written
#: after activation) and the model projections (recomputed after a model change, ``reproject_job``):
#: a new version of one publishes a release even when the active set is unchanged.
POST_ACTIVATION_TABLES = ("annotations", "graph_mentions", "graph_edges", "annotation_vectors",
                          "chunk_vectors", "chunk_vectors_multilingual", "colbert_matrices")


@dataclass
class ActivationReport:
    release_id: int | None
    published: bool
    activated: list[tuple[str, str]] = field(default_factory=list)  # (source_key, parse_id)
    superseded: list[tuple[str, str]] = field(default_factory=list)
    deactivated: list[str] = field(default_factory=list)
    lexical_generation: str | None = None
    seconds: float = 0.0


def activation_lock(home: FabricHome):
    return exclusive_lock(home.layout.lock_file)


def apply_gate(catalog: Catalog, required: tuple[str, ...] = REQUIRED_VERDICTS) -> None:
    """Turn ``parsed`` runs whose ``required`` verdicts are complete into ``ready`` or ``held``."""
    updates = []
    for run in catalog.parse_runs(status="parsed"):
        status, names = gate_status(run.verdicts, required)
        if status is not None:
            updates.append(StatusUpdate(run.parse_id, status, "gate:" + ",".join(names) if names else None))
    catalog.set_parse_statuses(updates)


def _source_meta(source, root_paths: dict[int, str], language: str | None) -> dict[str, Any]:
    return {
        "language": language,
        "parse_id": source.parse_id,
        "source_hash": source.source_hash,
        "media_type": source.media_type,
        "mtime_ns": source.mtime_ns,
        "size": source.size,
        "root": root_paths.get(source.root_id, ""),
    }


def activate(home: FabricHome) -> ActivationReport:
    """Publish a new release if the active set changed or a ``POST_ACTIVATION_TABLES`` table has a
    new version (annotations written after activation); return what happened."""
    started = time.perf_counter()
    with activation_lock(home):
        catalog = home.catalog
        current: Release | None = catalog.current_release()
        prev_sources: dict[str, dict] = current.manifest["sources"] if current else {}
        apply_gate(catalog, required_verdicts(home.config))
        runs = catalog.parse_runs()
        status = {r.parse_id: r.status for r in runs}
        language = {r.parse_id: r.language for r in runs}
        roots = {r.root_id: r.path for r in catalog.roots()}
        sources: dict[str, dict] = {}
        withheld_now = False
        for s in catalog.sources():
            if home.config.sources.is_withheld(s.source_key):
                withheld_now = withheld_now or s.source_key in prev_sources
                continue
            if s.state == "present" and s.parse_id and status.get(s.parse_id) == "ready":
                sources[s.source_key] = _source_meta(s, roots, language.get(s.parse_id))
            elif s.state in ("present", "access_lost") and s.source_key in prev_sources:
                sources[s.source_key] = prev_sources[s.source_key]
        report = ActivationReport(release_id=current.release_id if current else None, published=False)
        prev_active = {k: v["parse_id"] for k, v in prev_sources.items()}
        new_active = {k: v["parse_id"] for k, v in sources.items()}
        for k, pid in new_active.items():
            if prev_active.get(k) != pid:
                report.activated.append((k, pid))
                if k in prev_active:
                    report.superseded.append((k, prev_active[k]))
        report.deactivated = sorted(set(prev_active) - set(new_active))
        tables = {name: home.tables.version(name) for name in TABLES}
        post_changed = current is not None and any(
            tables.get(n) != current.manifest.get("tables", {}).get(n) for n in POST_ACTIVATION_TABLES)
        index_current = current is not None and home.lexical.is_current(current.manifest.get("lexical_generation") or "")
        if current is not None and sources == prev_sources and not post_changed and index_current:
            report.lexical_generation = current.manifest.get("lexical_generation")
            report.seconds = time.perf_counter() - started
            return report

        prev_parses, new_parses = set(prev_active.values()), set(new_active.values())
        prev_gen = current.manifest.get("lexical_generation") if current else None
        # Deleted documents keep counting in BM25 statistics until tantivy merges their segment,
        # so withholding a visible source rebuilds the index: withheld text must not move any score.
        # A generation written by an older index layout is rebuilt, never extended.
        if prev_gen is not None and index_current and not withheld_now:
            added, removed = new_parses - prev_parses, prev_parses - new_parses
            gen = prev_gen
            if added or removed:
                docs = home.tables.read("lexical_documents", parse_ids=added)
                gen = home.lexical.write_generation(prev_gen, removed, docs)
        else:
            gen = home.lexical.build_fresh(home.tables.read("lexical_documents", parse_ids=new_parses))
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "config_hash": config_hash(home.config),
            "sources": sources,
            "tables": tables,
            "lexical_generation": gen,
            # The active parses' vector digests, recorded by the dense assets (fabric_resources.vector_digest).
            VECTOR_DIGESTS: manifest_digests({r.parse_id: r.verdicts for r in runs}, new_parses),
        }
        release = catalog.publish_release(manifest, expected_current=current.release_id if current else None)
        keep = {r.manifest.get("lexical_generation") for r in catalog.releases()[-RETAINED_RELEASES:]}
        home.lexical.remove_generations(keep | {gen})
        report.release_id = release.release_id
        report.published = True
        report.lexical_generation = gen
        report.seconds = time.perf_counter() - started
        return report
