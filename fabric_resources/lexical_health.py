"""Lexical health: compare the serving index with an independent reconstruction.

LOOM's ``fts-health`` for tantivy. The *expected* side never reads the serving
index or the ``lexical_documents`` projection: it folds the canonical chunk
texts of the release afresh and builds a temporary index with the same
analyzers. The *actual* side reads the serving generation the release names.
Compared: the document set (chunk IDs, and the word field's window documents as
``window:<id>``: windows come from the release's ``context_windows`` rows, read afresh); the statistics BM25 ranks by, as
tantivy computes them — each field's vocabulary with its document frequencies,
the document count N and each field's average length (these count documents
that are deleted but still held by a segment, so such a document shows here
even when the live documents and terms are right); and a canonical digest over
``(chunk_id, text_hash)`` that repair must leave unchanged.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import tantivy

from fabric_resources.catalog import Release
from fabric_resources.home import FabricHome
from fabric_resources.lexical_index import (
    ANALYZER_ID,
    INDEX_FIELD_KIND,
    KIND_WINDOW,
    IndexUnusable,
    LexicalIndex,
    OpenIndex,
    deleted_documents,
    index_documents,
    remove_tree,
)
from fabric_resources.schema import (
    INDEX_FIELD_CHUNK_ID,
    INDEX_FIELD_SUBSTRING,
    INDEX_FIELD_WORD,
    LEXICAL_DOCUMENTS,
)
from fabric_resources.storage_errors import storage_error_text
from fabric_resources.tantivy_meta import IndexFormatChanged, damaged_segment_files
from fabric_resources.text_folding import fold

FIELDS = (INDEX_FIELD_WORD, INDEX_FIELD_SUBSTRING)


@dataclass(frozen=True)
class FieldComparison:
    field: str
    expected_digest: str
    actual_digest: str
    expected_terms: int
    actual_terms: int
    differing_terms: tuple[str, ...]  # a sample of terms whose document frequency differs
    #: BM25's N and average field length as tantivy scores this field (None for an empty field).
    expected_bm25: tuple[int, float] | None = None
    actual_bm25: tuple[int, float] | None = None

    @property
    def ok(self) -> bool:
        return self.expected_digest == self.actual_digest and self.expected_bm25 == self.actual_bm25


@dataclass(frozen=True)
class HealthReport:
    release_id: int
    generation: str | None
    canonical_digest: str
    expected_documents: int
    actual_documents: int
    expected_document_digest: str
    actual_document_digest: str
    missing_documents: tuple[str, ...]
    unexpected_documents: tuple[str, ...]
    fields: tuple[FieldComparison, ...] = ()
    #: Σ of the ``word_length`` fast field over live documents (BM25's |d| for re-scoring), expected vs actual.
    expected_word_tokens: int = 0
    actual_word_tokens: int = 0
    #: Documents deleted from the serving index but still counted in its BM25 statistics.
    deleted_documents: int = 0
    #: tantivy segments of the serving generation, and those whose segment record (which parses
    #: it holds) is missing or wrong: that never moves a score, but the next change touching one
    #: rebuilds the whole generation (``LexicalIndex.segment_record_problems``).
    segments: int = 0
    segment_record_problems: tuple[str, ...] = ()
    problem: str | None = None  # a fallback reason when the index cannot be opened
    analyzer: str = ANALYZER_ID
    notes: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return (
            self.problem is None
            and self.expected_document_digest == self.actual_document_digest
            and all(f.ok for f in self.fields)
            and self.expected_word_tokens == self.actual_word_tokens
            and self.deleted_documents == 0
        )


def _digest(lines) -> str:
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def canonical_chunks(home: FabricHome, release: Release) -> pa.Table:
    """``chunk_id, parse_id, text, text_hash`` of the release's active parses at its pinned version."""
    import pyarrow.compute as pc

    version = release.manifest["tables"].get("chunks")
    parses = sorted({m["parse_id"] for m in release.manifest["sources"].values()})
    if version is None or not parses:
        return pa.table({"chunk_id": [], "parse_id": [], "text": [], "text_hash": []},
                        schema=pa.schema([("chunk_id", pa.string()), ("parse_id", pa.string()),
                                          ("text", pa.string()), ("text_hash", pa.string())]))
    t = home.tables.read("chunks", version=version, columns=["chunk_id", "parse_id", "text", "text_hash"])
    return t.filter(pc.is_in(t.column("parse_id"), pa.array(parses, pa.string())))


def canonical_windows(home: FabricHome, release: Release) -> pa.Table | None:
    """``parse_id, window_id, chunk_ids`` of the release's active parses at its pinned
    ``context_windows`` version (None when the release names none: every chunk is its own window)."""
    import pyarrow.compute as pc

    version = release.manifest["tables"].get("context_windows")
    if version is None:
        return None
    parses = sorted({m["parse_id"] for m in release.manifest["sources"].values()})
    t = home.tables.read("context_windows", version=version, columns=["parse_id", "window_id", "chunk_ids"])
    return t.filter(pc.is_in(t.column("parse_id"), pa.array(parses, pa.string())))


def canonical_digest(chunks: pa.Table) -> str:
    pairs = sorted(zip(chunks.column("chunk_id").to_pylist(), chunks.column("text_hash").to_pylist()))
    return _digest(f"{c}\t{h}" for c, h in pairs)


def _vocabulary(index: OpenIndex, field_name: str) -> dict[str, int]:
    # Unfiltered counts are the document frequencies BM25 uses: they include documents that are
    # deleted but still sit in a segment (an all-documents filter would count live ones only).
    return {t: int(n) for t, n in index.searcher.terms_with_prefix(field_name, "") if n > 0}


def _explained(node: dict, prefix: str) -> float | None:
    if node.get("description", "").startswith(prefix):
        return float(node["value"])
    for child in node.get("details", ()):
        found = _explained(child, prefix)
        if found is not None:
            return found
    return None


def bm25_statistics(index: OpenIndex, field_name: str, term: str | None) -> tuple[int, float] | None:
    """``(N, avgdl)`` of ``field_name`` as tantivy's BM25 uses them, read from its own score
    explanation of ``term`` (one of the field's terms); None without a term.

    N counts every document a segment holds, deleted or not, and avgdl is the field's total
    token count over N (tantivy, ``Bm25Weight::for_terms``); neither is exposed otherwise.

    Raises
    ------
    RuntimeError
        If the explanation no longer names them (another tantivy version).
    """
    if term is None:
        return None
    query = tantivy.Query.term_query(index.schema, field_name, term)
    hits = index.searcher.search(query, limit=1).hits
    if not hits:  # only deleted documents hold the term
        return None
    explanation = json.loads(query.explain(index.searcher, hits[0][1]).to_json())
    n, avgdl = _explained(explanation, "N,"), _explained(explanation, "avgdl,")
    if n is None or avgdl is None:
        raise RuntimeError(f"tantivy's explanation names no N or avgdl: {explanation}")
    return int(n), avgdl


def _documents(index: OpenIndex) -> list[str]:
    searcher = index.searcher
    n = searcher.num_docs
    if n == 0:
        return []
    hits = searcher.search(tantivy.Query.all_query(), limit=n).hits
    out = []
    for _, addr in hits:
        doc = searcher.doc(addr)
        kind = doc[INDEX_FIELD_KIND][0] if doc.get_first(INDEX_FIELD_KIND) is not None else None
        out.append(f"window:{doc[INDEX_FIELD_CHUNK_ID][0]}" if kind == KIND_WINDOW else doc[INDEX_FIELD_CHUNK_ID][0])
    return out


def reconstruct(chunks: pa.Table, workdir: Path, windows: pa.Table | None = None) -> OpenIndex:
    """A temporary index built from canonical chunk texts and context windows only (the independent side)."""
    docs = pa.table(
        {
            "parse_id": chunks.column("parse_id"),
            "chunk_id": chunks.column("chunk_id"),
            "folded_text": [fold(t) for t in chunks.column("text").to_pylist()],
            "analyzer": [ANALYZER_ID] * chunks.num_rows,
        },
        schema=LEXICAL_DOCUMENTS,
    )
    scratch = LexicalIndex(workdir)
    return scratch.open(scratch.build_fresh(index_documents(docs, windows)))


def lexical_health(home: FabricHome, release: Release | None = None, sample: int = 10) -> HealthReport:
    """Compare the release's serving index with an independent reconstruction.

    Raises
    ------
    ValueError
        If the home has no release, or its canonical tables (``chunks``, ``windows``) cannot be
        read (a damaged or missing data file: ``fabric status`` names it).
    """
    release = release or home.catalog.current_release()
    if release is None:
        raise ValueError("no release to check")
    try:
        chunks = canonical_chunks(home, release)
    except (OSError, ValueError, RuntimeError, pa.ArrowException) as exc:
        raise ValueError(f"release {release.release_id}'s canonical chunks cannot be read, so there is nothing to "
                         f"check the index against ({storage_error_text(exc)}); `fabric status` names the "
                         "damaged table") from None
    gen = release.manifest.get("lexical_generation")
    # Removed only once the scratch index is closed (the helper's frame is gone): an open tantivy
    # index's reader threads touch its directory, and a removal racing them failed under load
    # ("Directory not empty"); remove_tree retries as well.
    tmp = Path(tempfile.mkdtemp(prefix="fabric-health-"))
    try:
        return _compare(home, release, chunks, gen, tmp, sample)
    finally:
        remove_tree(tmp)


def _probe(want: dict, got: dict):
    """The term whose explanation carries a field's N and avgdl: the same on both sides (the most
    frequent expected term, else the first actual one)."""
    return min(want, key=lambda t: (-want[t], t)) if want else min(got, default=None)


def _compare(home: FabricHome, release: Release, chunks: pa.Table, gen: str | None, tmp: Path,
             sample: int) -> HealthReport:
    """:func:`lexical_health`'s comparison, its reconstruction written under ``tmp``."""
    expected = reconstruct(chunks, Path(tmp), canonical_windows(home, release))
    expected_ids = sorted(_documents(expected))
    def unusable(reason: str) -> HealthReport:
        return HealthReport(
            release_id=release.release_id, generation=gen, canonical_digest=canonical_digest(chunks),
            expected_documents=len(expected_ids), actual_documents=0,
            expected_document_digest=_digest(expected_ids), actual_document_digest="",
            missing_documents=tuple(expected_ids[:sample]), unexpected_documents=(), problem=reason,
        )

    # Once per field: walking a field's term dictionary is most of a check's cost on a large index.
    expected_vocabulary = {f: _vocabulary(expected, f) for f in FIELDS}
    try:
        actual = home.lexical.open(gen) if gen else None
        if actual is None:
            raise IndexUnusable("index-missing", "release names no generation")
    except IndexUnusable as exc:
        return unusable(exc.reason)
    try:
        damaged = damaged_segment_files(home.lexical.root / gen)
    except (OSError, ValueError, IndexFormatChanged) as exc:
        damaged = [storage_error_text(exc, 200)]
    if damaged:
        # Flipped postings or positions decode without an error: answers change with no fallback.
        return unusable(f"index-damaged: {'; '.join(damaged[:sample])}")
    try:
        actual_ids = sorted(_documents(actual))
        deleted = deleted_documents(actual.searcher)
        segments = actual.searcher.num_segments
        actual_vocabulary = {f: _vocabulary(actual, f) for f in FIELDS}
        actual_bm25 = {f: bm25_statistics(actual, f, _probe(expected_vocabulary[f], actual_vocabulary[f]))
                       for f in FIELDS}
        word_tokens = [ix.word_tokens_total for ix in (expected, actual)]
    except BaseException as exc:  # noqa: BLE001 - a corrupt segment raises ValueError or panics in Rust
        if not (isinstance(exc, (OSError, ValueError, RuntimeError)) or type(exc).__name__ == "PanicException"):
            raise
        # A corrupt term dictionary or store: unhealthy, and `lexical-repair` (which checks first)
        # can still rebuild from the canonical tables.
        return unusable(f"index-unreadable: {storage_error_text(exc, 200)}")
    try:
        record_problems = tuple(home.lexical.segment_record_problems(gen))
    except (OSError, ValueError, RuntimeError) as exc:  # meta.json unreadable or of another shape
        record_problems = (storage_error_text(exc),)
    fields = []
    for f in FIELDS:
        want, got = expected_vocabulary[f], actual_vocabulary[f]
        differing = sorted(t for t in set(want) | set(got) if want.get(t) != got.get(t))
        probe = _probe(want, got)
        fields.append(
            FieldComparison(
                field=f,
                expected_digest=_digest(f"{t}\t{n}" for t, n in sorted(want.items())),
                actual_digest=_digest(f"{t}\t{n}" for t, n in sorted(got.items())),
                expected_terms=len(want), actual_terms=len(got), differing_terms=tuple(differing[:sample]),
                expected_bm25=bm25_statistics(expected, f, probe),
                actual_bm25=actual_bm25[f],
            )
        )
    exp, act = set(expected_ids), set(actual_ids)
    return HealthReport(
        release_id=release.release_id, generation=gen, canonical_digest=canonical_digest(chunks),
        expected_documents=len(expected_ids), actual_documents=len(actual_ids),
        expected_document_digest=_digest(expected_ids), actual_document_digest=_digest(actual_ids),
        missing_documents=tuple(sorted(exp - act)[:sample]),
        unexpected_documents=tuple(sorted(act - exp)[:sample]),
        fields=tuple(fields),
        expected_word_tokens=word_tokens[0],
        actual_word_tokens=word_tokens[1],
        deleted_documents=deleted,
        segments=segments,
        segment_record_problems=record_problems,
        notes=[f"{len(record_problems)} of {segments} segments have no or a wrong segment record: the next "
               "change that touches one rebuilds the generation"] if record_problems else [],
    )
