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
from fabric_assets.gate import accepted_failures, gate_status, required_verdicts
from fabric_assets.projections import (LEXICAL_VERDICT, POST_ACTIVATION_TABLES, REQUIRED_VERDICTS,
                                       VECTOR_DIGEST_VERDICTS)
from fabric_resources.catalog import Catalog, Release, StatusUpdate, str_map
from fabric_resources.config import derivation_hash
from fabric_resources.dense_index import MANIFEST_KEY as DENSE_INDEXES, kept_generations
from fabric_resources.home import FabricHome
from fabric_resources.lexical_index import ANALYZER_ID, index_documents
from fabric_resources.text_folding import fold
from fabric_resources.schema import INGEST_LOCK, SCAN_SKIPPED_STATE, SCHEMA_VERSION, TABLES
from fabric_resources.vector_digest import MANIFEST_KEY as VECTOR_DIGESTS, PARSES_MANIFEST_KEY as VECTOR_PARSE_DIGESTS
from fabric_resources.vector_digest import manifest_digests, manifest_parse_digests
from fabric_resources.tables import TableRemovedError

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


def ingest_lock(home: FabricHome):
    """One ``fabric ingest`` per catalog at a time: a second one waits (the lock of a killed
    process is dropped; ``Catalog.exclusive``). This is what makes a ``parsed`` run with missing
    verdicts an interrupted one. Purge and an in-place snapshot restore hold it too."""
    return home.catalog.exclusive(INGEST_LOCK)


def apply_gate(catalog: Catalog, required: tuple[str, ...] = REQUIRED_VERDICTS) -> None:
    """Turn ``parsed`` runs whose ``required`` verdicts are complete into ``ready`` or ``held``."""
    updates = []
    for run in catalog.parse_runs(status="parsed"):
        status, names = gate_status(run.verdicts, required)
        if status is not None:
            # Ready with failing verdicts an operator accepted: it stays listed as accepted.
            accepted = status == "ready" and any(not run.verdicts[k].get("passed")
                                                 for k in accepted_failures(run.verdicts) if k in run.verdicts)
            reason = "gate:" + ",".join(names) if names else ("accepted" if accepted else None)
            updates.append(StatusUpdate(run.parse_id, status, reason))
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


#: Catalog state: what the current release's sources were derived from, for the next activation to
#: build on (:func:`_derive_sources`): ``{"release_id", "sources", "parse_runs"}`` (the change
#: numbers read up to), ``"roots"``, ``"purges"`` (:meth:`Catalog.purge_mark`), ``"config_hash"``
#: (:func:`fabric_resources.config.derivation_hash`).
ACTIVATION_MARKS = "activation_marks"


@dataclass(frozen=True)
class _Derived:
    """What this process derived for a release it published (or found current): the release's
    sources and the parse runs' digests as of ``marks``. Never changed after it is made."""

    release_id: int
    marks: dict[str, Any]
    sources: dict[str, dict]
    runs: dict[str, Any]  # parse ID → ParseRunDigests


#: Per catalog (``Catalog.describe()``): the last :class:`_Derived` of this process. A warm process
#: (a sensor's, ``fabric ingest`` run after run) then reads neither every source nor every parse run.
_DERIVED: dict[str, _Derived] = {}


def _entry(s, prev_sources: dict[str, dict], runs: dict[str, Any], roots: dict[int, str],
           over_cap: frozenset[str] = frozenset()) -> dict | None:
    """The release entry of source row ``s`` (None: not in the release): its newest parse when
    ready; else, while present or unreachable, its previous entry when that parse is still ready.
    ``over_cap``: source keys whose file the last scan found over the size cap (not read)."""
    run = runs.get(s.parse_id) if s.parse_id else None
    if s.state == "present" and run is not None and run.status == "ready":
        entry = _with_lexical_digest(_source_meta(s, roots, run.language), run.digests)
        if s.source_key in over_cap:  # the file on disk grew past the cap: this text is its last read
            entry = _with_newer(entry, s, run, True)
        # The current release's entry when equal: one object per source, not two, at
        # 10,000 sources (fewer survivors, fewer full collections of the process's heap).
        prev = prev_sources.get(s.source_key)
        return prev if prev == entry else entry
    if s.state in ("present", "access_lost") and s.source_key in prev_sources:
        kept = prev_sources[s.source_key]
        # A kept parse that is no longer ready is being re-derived in place (its rows are
        # being rewritten under the same parse ID) or failed that: a new release would pin
        # its half-written or failing rows, so it is left out until it is ready again.
        kept_run = runs.get(kept["parse_id"])
        if kept_run is not None and kept_run.status == "ready":
            return _with_newer(_with_lexical_digest(kept, kept_run.digests), s, run, s.source_key in over_cap)
    return None


def _with_newer(entry: dict[str, Any], s, run, over_cap: bool = False) -> dict[str, Any]:
    """A kept ``entry`` saying whether the file's bytes changed since its parse (``newer``: the
    new bytes' hash, parse ID and that parse's status, ``unparsed`` when no parse is due: a type
    Fabric does not parse, or a file now over the size cap, which the scan does not read), so
    every hit from the old text says it is not what the file holds now. The entry itself when
    that is already what it says."""
    newer = None  # (an unreachable source keeps what the catalog last saw of it: hash and parse)
    if s.state in ("present", "access_lost") and s.source_hash and s.source_hash != entry.get("source_hash"):
        newer = {"source_hash": s.source_hash, "parse_id": s.parse_id,
                 "status": run.status if run is not None else ("pending" if s.parse_id else "unparsed")}
    elif s.state == "present" and over_cap:
        newer = {"source_hash": None, "parse_id": None, "status": "unparsed"}
    if entry.get("newer") == newer:
        return entry
    return {**{k: v for k, v in entry.items() if k != "newer"}, **({"newer": newer} if newer else {})}


def _derive_sources(home: FabricHome, current: Release | None, names: tuple[str, ...], roots: dict[int, str],
                    *, from_change: bool = True) -> tuple[dict[str, dict], dict[str, Any], dict[str, Any]]:
    """The next release's sources, every parse run's digests (parse ID → ``ParseRunDigests``) and
    the marks they were derived at (:data:`ACTIVATION_MARKS`).

    From the change: when the catalog's marks say the current release was derived at change
    numbers (n, m) under the same roots, purges and configuration, only the sources written since
    n, those pointing at a parse run written since m and those whose entry names such a run are
    derived again; every other source's entry is the current one (its inputs are unchanged). A
    warm process also keeps the parse runs' digests (:data:`_DERIVED`). Otherwise every source
    and parse run is read, as with ``from_change`` false. Both give the same sources (a test holds
    them equal).
    """
    catalog = home.catalog
    static = {"roots": sorted([k, v] for k, v in roots.items()), "purges": catalog.purge_mark(),
              "config_hash": derivation_hash(home.config)}
    # Files the last scan left unread as over the size cap: their entries say their text is old.
    over_cap = frozenset(k for k, why in (catalog.state(SCAN_SKIPPED_STATE, dict, valid=str_map, memo=True)
                                          or {}).items() if why.startswith("too-large"))
    marks = catalog.state(ACTIVATION_MARKS, memo=True) if current is not None else None
    prev_sources: dict[str, dict] = current.manifest["sources"] if current else {}
    if not (from_change and isinstance(marks, dict) and marks.get("release_id") == current.release_id
            and all(marks.get(k) == v for k, v in static.items())
            and all(isinstance(marks.get(k), int) for k in ("sources", "parse_runs"))):
        n, m = catalog.change_marks()  # before reading: a row written meanwhile is read again next time
        runs = {r.parse_id: r for r in catalog.parse_run_digests(names)}
        sources = {}
        for s in catalog.sources():
            entry = (None if home.config.sources.is_withheld(s.source_key)
                     else _entry(s, prev_sources, runs, roots, over_cap))
            if entry is not None:
                sources[s.source_key] = entry
        return sources, runs, {**static, "sources": n, "parse_runs": m}
    rows, n = catalog.sources_changed_after(marks["sources"])
    changed_runs = catalog.parse_run_digests(names, changed_after=marks["parse_runs"])
    m = max([marks["parse_runs"], *(r.change_seq for r in changed_runs)])
    memo = _DERIVED.get(catalog.describe())
    if memo is not None and memo.release_id == current.release_id and memo.marks == marks:
        runs = dict(memo.runs)
    else:
        runs = {r.parse_id: r for r in catalog.parse_run_digests(names)}
    runs.update((r.parse_id, r) for r in changed_runs)
    # Over-cap files write no source row, and a file back under the cap is rewritten: derive
    # again every key the scan found over the cap and every entry flagged so.
    keys = {s.source_key for s in rows} | (over_cap & prev_sources.keys())
    keys.update(k for k, e in prev_sources.items() if (e.get("newer") or {}).get("source_hash", 0) is None)
    changed = {r.parse_id for r in changed_runs}
    if changed:
        keys.update(k for ks in catalog.source_keys_by_parse(changed).values() for k in ks)
        keys.update(k for k, e in prev_sources.items() if e["parse_id"] in changed)
    sources = dict(prev_sources)
    found = set()
    for s in catalog.sources(keys=keys) if keys else ():
        found.add(s.source_key)
        entry = (None if home.config.sources.is_withheld(s.source_key)
                 else _entry(s, prev_sources, runs, roots, over_cap))
        if entry is None:
            sources.pop(s.source_key, None)
        else:
            sources[s.source_key] = entry
    for key in keys - found:  # no row any more (only a purge deletes one, and it moves the marks)
        sources.pop(key, None)
    # Keep the order a full derivation gives (by key): only an added source lands out of order.
    if any(k not in prev_sources for k in sources.keys() & found):
        sources = dict(sorted(sources.items()))
    return sources, runs, {**static, "sources": n, "parse_runs": m}


def _remember(home: FabricHome, release_id: int, marks: dict[str, Any], sources: dict[str, dict],
              runs: dict[str, Any]) -> None:
    """Record the marks the release ``release_id`` was derived at, for the next activation."""
    record = {**marks, "release_id": release_id}
    if home.catalog.state(ACTIVATION_MARKS, memo=True) != record:
        home.catalog.set_state(ACTIVATION_MARKS, record)
    _DERIVED[home.catalog.describe()] = _Derived(release_id, record, sources, runs)


def _current_release(home: FabricHome) -> Release | None:
    """The current release; its sources from :data:`_DERIVED` when this process derived them (a
    manifest naming every source is not decoded again)."""
    catalog = home.catalog
    memo = _DERIVED.get(catalog.describe())
    if memo is not None and memo.release_id == catalog.current_release_id():
        summary = catalog.release_summary(memo.release_id)
        if summary is not None:
            return Release(summary.release_id, summary.created_at, {**summary.manifest, "sources": memo.sources})
    return catalog.current_release()


def activate(home: FabricHome) -> ActivationReport:
    """Publish a new release if the active set changed or a ``POST_ACTIVATION_TABLES`` table has a
    new version (annotations written after activation); return what happened."""
    started = time.perf_counter()
    with activation_lock(home):
        catalog = home.catalog
        apply_gate(catalog, required_verdicts(home.config))
        current: Release | None = _current_release(home)
        prev_sources: dict[str, dict] = current.manifest["sources"] if current else {}
        roots = {r.root_id: r.path for r in catalog.roots()}
        # Status, language and the digests activation compares, read in the database: decoding
        # every run's verdicts was most of an activation's cost at 10,000 sources.
        sources, runs, marks = _derive_sources(home, current, (LEXICAL_VERDICT, *VECTOR_DIGEST_VERDICTS.values()),
                                               roots)
        verdicts = {pid: r.digests for pid, r in runs.items()}
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
        for name, pinned in (current.manifest.get("tables", {}) if current else {}).items():
            if pinned is not None and (tables.get(name) is None or tables[name] < pinned):
                # Removed (or removed and written afresh): a release pinning it now would serve no
                # row, or the new rows alone, of every parse it holds.
                raise TableRemovedError(f"table {name} is at version {tables.get(name)} but release "
                                        f"{current.release_id} pins version {pinned}: its files were removed; "
                                        "restore it (`fabric snapshot restore`)")
        post_changed = current is not None and any(
            tables.get(n) != current.manifest.get("tables", {}).get(n) for n in POST_ACTIVATION_TABLES)
        index_current = current is not None and home.lexical.is_current(current.manifest.get("lexical_generation") or "")
        dense_current = current is not None and records_current(home, current.manifest)
        if current is not None and sources == prev_sources and not post_changed and index_current and dense_current:
            _remember(home, current.release_id, marks, prev_sources, runs)
            report.lexical_generation = current.manifest.get("lexical_generation")
            report.seconds = time.perf_counter() - started
            return report

        # A release is on its way: merge the tables' small fragments and bring their parse-ID
        # indexes up to date first (new table versions of the same rows), so this release pins them
        # and its reads neither pay per fragment nor scan by parse. Not sooner: a new version of a
        # POST_ACTIVATION_TABLES table would itself ask for a release.
        for name in TABLES:
            merged = home.tables.merge_fragments(name)
            if home.tables.index_parse_ids(name) or merged:
                tables[name] = home.tables.version(name)
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
        per_parse_digests = manifest_parse_digests(verdicts, new_parses, VECTOR_DIGEST_VERDICTS)
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "config_hash": derivation_hash(home.config),
            "sources": sources,
            "tables": tables,
            "lexical_generation": gen,
            VECTOR_DIGESTS: digests,
            # Each parse's too: a reader then leaves out a damaged parse only, not the whole table.
            VECTOR_PARSE_DIGESTS: per_parse_digests,
            # ANN indexes over the pinned vector rows, where query.dense_search wants them (without
            # a parse whose rows no longer give its digest: the others keep the index).
            DENSE_INDEXES: dense_index_records(home, tables, new_parses, digests,
                                               current.manifest.get(DENSE_INDEXES) if current else None,
                                               vector_parse_digests=per_parse_digests),
        }
        release = catalog.publish_release(manifest, expected_current=current.release_id if current else None)
        _remember(home, release.release_id, marks, sources, runs)
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
