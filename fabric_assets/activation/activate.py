"""Activation: choose one active parse per source and publish an immutable release.

Serialised by the catalog's activation lock (a file lock beside a SQLite catalog, an advisory
lock in a PostgreSQL one). Reads the catalog's sources and
per-parse statuses (``ready`` = parsed and every gate verdict passed), builds
the next serving-index generation incrementally (remove superseded parses,
add newly active ones, replace the documents of an active parse re-chunked in
place), builds the dense ANN indexes the configuration wants over the pinned vector rows
(:mod:`fabric_assets.activation.dense_index`), records the table versions, and swaps the
``current`` release pointer in one transaction. A source whose newest parse is pending, failed or held
keeps its previous active parse while that one is ready (one being re-derived
in place is left out until it is ready again); a deleted source is dropped; a
withheld source (``sources.withheld``) is never in a release. The verdicts it gates on, the
digests it records and the tables whose new versions publish a release are the projection
registry's (``fabric_assets.projections``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from fabric_assets.activation.dense_index import dense_index_records, records_current
from fabric_assets.gate import gate_status, required_verdicts
from fabric_assets.projections import (LEXICAL_VERDICT, POST_ACTIVATION_TABLES, REQUIRED_VERDICTS,
                                       VECTOR_DIGEST_VERDICTS)
from fabric_resources.catalog import Catalog, Release, StatusUpdate
from fabric_resources.config import config_hash
from fabric_resources.dense_index import MANIFEST_KEY as DENSE_INDEXES, kept_generations
from fabric_resources.home import FabricHome
from fabric_resources.lexical_index import ANALYZER_ID, index_documents
from fabric_resources.text_folding import fold
from fabric_resources.schema import SCHEMA_VERSION, TABLES
from fabric_resources.vector_digest import MANIFEST_KEY as VECTOR_DIGESTS, manifest_digests

#: Lexical generations of this many most recent releases are kept on disk.
RETAINED_RELEASES = 3


@dataclass
class ActivationReport:
    release_id: int | None
    published: bool
    activated: list[tuple[str, str]] = field(default_factory=list)  # (source_key, parse_id)
    superseded: list[tuple[str, str]] = field(default_factory=list)
    deactivated: list[str] = field(default_factory=list)
    lexical_generation: str | None = None
    #: Vector table → its dense ANN index record in the manifest (``generation`` or ``skipped``).
    dense_indexes: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


def activation_lock(home: FabricHome):
    """One activation at a time among every process that uses the home's catalog (on any host
    with a shared catalog; ``Catalog.exclusive``). ``publish_release``'s compare-and-swap is what
    keeps two releases off one base even without it."""
    return home.catalog.exclusive("activation")


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


def _with_lexical_digest(meta: dict[str, Any], digests: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with the digest of its parse's lexical documents as they are now (``digests``:
    the parse's verdict digests, :meth:`Catalog.parse_run_digests`).

    A parse re-chunked in place (``rechunk_job``) keeps its parse ID; its digest is what tells
    activation to index its new documents. Parses written before the digest existed have none.
    """
    digest = digests.get(LEXICAL_VERDICT)
    if meta.get("lexical_digest") == digest and (digest is not None or "lexical_digest" not in meta):
        return meta
    if digest is None:
        return {k: v for k, v in meta.items() if k != "lexical_digest"}
    return {**meta, "lexical_digest": digest}


def _refolded(home: FabricHome, docs: Any, chunks_version: int | None) -> Any:
    """``docs`` with the folded text of rows written by another analyzer (a ``FOLDING_VERSION``
    bump) folded again from their canonical chunk text, so a rebuilt index folds like its queries."""
    import pyarrow as pa
    import pyarrow.compute as pc

    stale = pc.not_equal(docs.column("analyzer"), ANALYZER_ID)
    if not docs.num_rows or not pc.any(stale).as_py():
        return docs
    parses = sorted(set(pc.filter(docs.column("parse_id"), stale).to_pylist()))
    chunks = home.tables.read("chunks", parse_ids=parses, version=chunks_version, columns=["chunk_id", "text"])
    text_of = dict(zip(chunks.column("chunk_id").to_pylist(), chunks.column("text").to_pylist()))
    cols = docs.to_pydict()
    for i, (cid, analyzer) in enumerate(zip(cols["chunk_id"], cols["analyzer"])):
        if analyzer != ANALYZER_ID and cid in text_of:
            cols["folded_text"][i], cols["analyzer"][i] = fold(text_of[cid]), ANALYZER_ID
    return pa.table(cols, schema=docs.schema)


def pinned_index_documents(home: FabricHome, parse_ids, tables: dict[str, int | None]) -> Any:
    """The lexical index's documents (:func:`~fabric_resources.lexical_index.index_documents`) of
    ``parse_ids`` at the table versions ``tables`` pins: chunk documents from
    ``lexical_documents`` (re-folded where another analyzer wrote them) and window documents from
    ``context_windows``. Activation, purge and snapshot restore build generations from it, so
    every generation holds what lexical health reconstructs."""
    parse_ids = list(parse_ids)
    docs = _refolded(home, home.tables.read("lexical_documents", parse_ids=parse_ids,
                                            version=tables.get("lexical_documents")), tables.get("chunks"))
    windows = (home.tables.read("context_windows", parse_ids=parse_ids, version=tables["context_windows"],
                                columns=["parse_id", "window_id", "chunk_ids"])
               if tables.get("context_windows") is not None else None)
    return index_documents(docs, windows)


def activate(home: FabricHome) -> ActivationReport:
    """Publish a new release if the active set changed or a ``POST_ACTIVATION_TABLES`` table has a
    new version (annotations written after activation); return what happened."""
    started = time.perf_counter()
    with activation_lock(home):
        catalog = home.catalog
        current: Release | None = catalog.current_release()
        prev_sources: dict[str, dict] = current.manifest["sources"] if current else {}
        apply_gate(catalog, required_verdicts(home.config))
        # Status, language and the digests activation compares, read in the database: decoding
        # every run's verdicts was most of an activation's cost at 10,000 sources.
        runs = catalog.parse_run_digests((LEXICAL_VERDICT, *VECTOR_DIGEST_VERDICTS.values()))
        status = {r.parse_id: r.status for r in runs}
        language = {r.parse_id: r.language for r in runs}
        verdicts = {r.parse_id: r.digests for r in runs}
        roots = {r.root_id: r.path for r in catalog.roots()}
        sources: dict[str, dict] = {}
        for s in catalog.sources():
            if home.config.sources.is_withheld(s.source_key):
                continue
            if s.state == "present" and s.parse_id and status.get(s.parse_id) == "ready":
                entry = _with_lexical_digest(_source_meta(s, roots, language.get(s.parse_id)), verdicts[s.parse_id])
                # The current release's entry when equal: one object per source, not two, at
                # 10,000 sources (fewer survivors, fewer full collections of the process's heap).
                prev = prev_sources.get(s.source_key)
                sources[s.source_key] = prev if prev == entry else entry
            elif s.state in ("present", "access_lost") and s.source_key in prev_sources:
                kept = prev_sources[s.source_key]
                # A kept parse that is no longer ready is being re-derived in place (its rows are
                # being rewritten under the same parse ID) or failed that: a new release would pin
                # its half-written or failing rows, so it is left out until it is ready again.
                if status.get(kept["parse_id"]) == "ready":
                    sources[s.source_key] = _with_lexical_digest(kept, verdicts[kept["parse_id"]])
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
        dense_current = current is not None and records_current(home, current.manifest)
        if current is not None and sources == prev_sources and not post_changed and index_current and dense_current:
            report.lexical_generation = current.manifest.get("lexical_generation")
            report.seconds = time.perf_counter() - started
            return report

        prev_parses, new_parses = set(prev_active.values()), set(new_active.values())
        prev_gen = current.manifest.get("lexical_generation") if current else None

        def documents_of(parse_ids) -> Any:
            return pinned_index_documents(home, parse_ids, tables)

        # A generation written by an older index layout is rebuilt, never extended. Removing a
        # parse rewrites the segments that held it (write_generation), so deleted, superseded and
        # withheld documents move no BM25 statistic.
        if prev_gen is not None and index_current:
            rederived = {m["parse_id"] for k, m in sources.items() if k in prev_sources
                         and prev_sources[k]["parse_id"] == m["parse_id"]
                         and prev_sources[k].get("lexical_digest") != m.get("lexical_digest")}
            added = (new_parses - prev_parses) | rederived
            removed = (prev_parses - new_parses) | rederived
            gen = prev_gen
            if added or removed:
                gen = home.lexical.write_generation(prev_gen, removed, documents_of(added), documents_of)
        else:
            gen = home.lexical.build_fresh(documents_of(new_parses))
        # The active parses' vector digests, recorded by the dense assets (fabric_resources.vector_digest).
        digests = manifest_digests(verdicts, new_parses, VECTOR_DIGEST_VERDICTS)
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "config_hash": config_hash(home.config),
            "sources": sources,
            "tables": tables,
            "lexical_generation": gen,
            VECTOR_DIGESTS: digests,
            # ANN indexes over the pinned vector rows, where query.dense_search wants them.
            DENSE_INDEXES: dense_index_records(home, tables, new_parses, digests,
                                               current.manifest.get(DENSE_INDEXES) if current else None),
        }
        release = catalog.publish_release(manifest, expected_current=current.release_id if current else None)
        retained = max(RETAINED_RELEASES, home.config.retention.releases)
        kept = catalog.release_summaries(last=retained)
        keep = {r.manifest.get("lexical_generation") for r in kept}
        home.lexical.remove_generations(keep | {gen})
        home.dense_indexes.remove_generations(kept_generations([*(r.manifest for r in kept), manifest]))
        report.release_id = release.release_id
        report.published = True
        report.lexical_generation = gen
        report.dense_indexes = manifest[DENSE_INDEXES]
        report.seconds = time.perf_counter() - started
        return report
