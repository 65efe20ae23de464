# Over 500 lines: the storage contract, every table schema, catalog DDL and home path defined once; split, readers would import each from several places.
"""The storage contract: one definition of every record schema and path.

Writers (``fabric_assets``) and readers (``fabric_query``) both import these
Arrow schemas, the catalog DDL and the home layout from here, so a record
cannot be written in one shape and read in another.

Offsets in ``fragments`` are Unicode scalar offsets into a unit's canonical
text, end-exclusive.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

#: Bumped whenever a table schema, the index fields or an analyzer changes.
SCHEMA_VERSION = 2

#: Embedding width of all-MiniLM-L6-v2 (its model card).
DENSE_DIM = 384

FRAGMENT = pa.struct(
    [
        pa.field("unit_id", pa.string(), nullable=False),
        pa.field("start_char", pa.int32(), nullable=False),
        pa.field("end_char", pa.int32(), nullable=False),
        # The same positions in UTF-16 code units (for JavaScript clients), computed once at chunking.
        pa.field("start_utf16", pa.int32(), nullable=False),
        pa.field("end_utf16", pa.int32(), nullable=False),
    ]
)

UNITS = pa.schema(
    [
        pa.field("parse_id", pa.string(), nullable=False),
        pa.field("unit_id", pa.string(), nullable=False),
        pa.field("ordinal", pa.int32(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("text_hash", pa.string(), nullable=False),
        pa.field("locator", pa.string(), nullable=False),  # JSON
        pa.field("section_path", pa.list_(pa.string()), nullable=False),
        pa.field("attributes", pa.string(), nullable=False),  # JSON
    ]
)

RELATIONSHIPS = pa.schema(
    [
        pa.field("parse_id", pa.string(), nullable=False),
        pa.field("relationship_id", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("source_unit_id", pa.string(), nullable=False),
        pa.field("target_unit_id", pa.string(), nullable=False),
        pa.field("attributes", pa.string(), nullable=False),  # JSON
    ]
)

CHUNKS = pa.schema(
    [
        pa.field("parse_id", pa.string(), nullable=False),
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field("ordinal", pa.int32(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("text_hash", pa.string(), nullable=False),
        pa.field("fragments", pa.list_(FRAGMENT), nullable=False),
        pa.field("section_path", pa.list_(pa.string()), nullable=False),
        pa.field("token_count", pa.int32(), nullable=False),
        pa.field("chunker", pa.string(), nullable=False),
    ]
)

LEXICAL_DOCUMENTS = pa.schema(
    [
        pa.field("parse_id", pa.string(), nullable=False),
        pa.field("chunk_id", pa.string(), nullable=False),
        # Folded text (see fabric_resources.text_folding); both index fields read it.
        pa.field("folded_text", pa.string(), nullable=False),
        pa.field("analyzer", pa.string(), nullable=False),
    ]
)

CHUNK_VECTORS = pa.schema(
    [
        pa.field("parse_id", pa.string(), nullable=False),
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field("vector", pa.list_(pa.float32(), DENSE_DIM), nullable=False),
        pa.field("model", pa.string(), nullable=False),
    ]
)

#: A context window or ColBERT window: a run of whole fine chunks in reading order (seed 003,
#: "Grains"). ``text`` is the members' texts joined by FRAGMENT_SEPARATOR, ``fragments`` the
#: concatenation of their fragments, ``section_path`` that of the first member,
#: ``token_count`` the sum of the members' token counts, ``policy`` the window policy identity.
WINDOWS = pa.schema(
    [
        pa.field("parse_id", pa.string(), nullable=False),
        pa.field("window_id", pa.string(), nullable=False),
        pa.field("ordinal", pa.int32(), nullable=False),
        pa.field("chunk_ids", pa.list_(pa.string()), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("text_hash", pa.string(), nullable=False),
        pa.field("fragments", pa.list_(FRAGMENT), nullable=False),
        pa.field("section_path", pa.list_(pa.string()), nullable=False),
        pa.field("token_count", pa.int32(), nullable=False),
        pa.field("policy", pa.string(), nullable=False),
    ]
)

#: Width of ColBERT token vectors (the usual ColBERT projection; checked at encode time).
COLBERT_DIM = 128

#: One ColBERT document matrix per ColBERT window, as a Lance native multivector column.
COLBERT_MATRICES = pa.schema(
    [
        pa.field("parse_id", pa.string(), nullable=False),
        pa.field("window_id", pa.string(), nullable=False),
        pa.field("matrix", pa.list_(pa.list_(pa.float32(), COLBERT_DIM)), nullable=False),
        pa.field("token_count", pa.int32(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
    ]
)

#: A source span that supports an annotation: a range of one unit's canonical text.
SUPPORT = pa.struct(
    [
        pa.field("unit_id", pa.string(), nullable=False),
        pa.field("start_char", pa.int32(), nullable=False),
        pa.field("end_char", pa.int32(), nullable=False),
        pa.field("start_utf16", pa.int32(), nullable=False),
        pa.field("end_utf16", pa.int32(), nullable=False),
        pa.field("text_hash", pa.string(), nullable=False),  # SHA-256 hex of the span's text
    ]
)

#: Grounded LLM annotations of one parse (only grounded items are ever stored).
#: kind = entity (text = name, entity_type), relation (subject, predicate, object, quotes;
#: text = "subject predicate object") or summary (text). ``window_ids`` are the context
#: windows of the excerpt; ``producer`` the producer identity, ``memo_key`` the memo entry used.
ANNOTATIONS = pa.schema(
    [
        pa.field("parse_id", pa.string(), nullable=False),
        pa.field("annotation_id", pa.string(), nullable=False),
        pa.field("excerpt_id", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("entity_type", pa.string()),
        pa.field("subject", pa.string()),
        pa.field("predicate", pa.string()),
        pa.field("object", pa.string()),
        pa.field("quotes", pa.list_(pa.string()), nullable=False),
        pa.field("support", pa.list_(SUPPORT), nullable=False),
        pa.field("window_ids", pa.list_(pa.string()), nullable=False),
        pa.field("producer", pa.string(), nullable=False),
        pa.field("memo_key", pa.string(), nullable=False),
    ]
)

#: Entity mentions of one parse: the graph's nodes are ``entity_key`` values shared across parses.
GRAPH_MENTIONS = pa.schema(
    [
        pa.field("parse_id", pa.string(), nullable=False),
        pa.field("entity_key", pa.string(), nullable=False),  # normalised name
        pa.field("name", pa.string(), nullable=False),
        pa.field("entity_type", pa.string(), nullable=False),
        pa.field("annotation_id", pa.string(), nullable=False),
        pa.field("support", pa.list_(SUPPORT), nullable=False),
    ]
)

#: Relation edges of one parse, each with its supporting spans.
GRAPH_EDGES = pa.schema(
    [
        pa.field("parse_id", pa.string(), nullable=False),
        pa.field("edge_id", pa.string(), nullable=False),
        pa.field("subject_key", pa.string(), nullable=False),
        pa.field("predicate", pa.string(), nullable=False),
        pa.field("object_key", pa.string(), nullable=False),
        pa.field("annotation_id", pa.string(), nullable=False),
        pa.field("support", pa.list_(SUPPORT), nullable=False),
    ]
)

#: Dense vectors of summary and relation annotations (the annotation-embedding channel).
ANNOTATION_VECTORS = pa.schema(
    [
        pa.field("parse_id", pa.string(), nullable=False),
        pa.field("annotation_id", pa.string(), nullable=False),
        pa.field("vector", pa.list_(pa.float32(), DENSE_DIM), nullable=False),
        pa.field("model", pa.string(), nullable=False),
    ]
)

#: Every partitioned table, by name. Each row carries ``parse_id``.
TABLES: dict[str, pa.Schema] = {
    "units": UNITS,
    "relationships": RELATIONSHIPS,
    "chunks": CHUNKS,
    "lexical_documents": LEXICAL_DOCUMENTS,
    "chunk_vectors": CHUNK_VECTORS,
    # Same shape, other model: chunks routed to multilingual-e5-small (see language_routing).
    "chunk_vectors_multilingual": CHUNK_VECTORS,
    "context_windows": WINDOWS,
    "colbert_windows": WINDOWS,
    "colbert_matrices": COLBERT_MATRICES,
    "annotations": ANNOTATIONS,
    "graph_mentions": GRAPH_MENTIONS,
    "graph_edges": GRAPH_EDGES,
    "annotation_vectors": ANNOTATION_VECTORS,
}

# ---------------------------------------------------------------------------
# Catalog (SQLite in WAL mode, or PostgreSQL). Short transactions; several processes at once.
# The DDL below is catalog schema version 1, as main created it before versioning: do not edit
# it; change the catalog by appending a migration to fabric_resources.catalog.migrations.
# ---------------------------------------------------------------------------

CATALOG_DDL = """
CREATE TABLE IF NOT EXISTS roots (
    root_id       INTEGER PRIMARY KEY,
    path          TEXT NOT NULL UNIQUE,
    label         TEXT NOT NULL UNIQUE,     -- first segment of its sources' keys
    registered_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sources (
    source_key    TEXT PRIMARY KEY,
    root_id       INTEGER NOT NULL REFERENCES roots(root_id),
    rel_path      TEXT NOT NULL,
    state         TEXT NOT NULL,            -- present | deleted | access_lost
    media_type    TEXT NOT NULL,
    mtime_ns      INTEGER,
    size          INTEGER,
    source_hash   TEXT,                     -- latest acquired content object
    parse_id      TEXT,                     -- parse of that content (NULL if unsupported)
    first_seen    REAL NOT NULL,
    last_seen     REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS acquisitions (
    acquisition_id INTEGER PRIMARY KEY,
    source_key     TEXT NOT NULL,
    source_hash    TEXT NOT NULL,
    mtime_ns       INTEGER NOT NULL,
    size           INTEGER NOT NULL,
    observed_at    REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS parse_runs (
    parse_id           TEXT PRIMARY KEY,
    source_hash        TEXT NOT NULL,
    media_type         TEXT NOT NULL,
    parser_name        TEXT NOT NULL,
    parser_version     TEXT NOT NULL,
    parser_config_hash TEXT NOT NULL,
    language           TEXT,                -- declared by the document or guessed from its script
    status             TEXT NOT NULL,       -- pending | parsed | ready | failed | held
    reason             TEXT,
    detail             TEXT,
    verdicts           TEXT NOT NULL DEFAULT '{}',
    counts             TEXT NOT NULL DEFAULT '{}',
    created_at         REAL NOT NULL,
    updated_at         REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS releases (
    release_id    INTEGER PRIMARY KEY,
    created_at    REAL NOT NULL,
    manifest      TEXT NOT NULL             -- JSON, immutable
);
CREATE TABLE IF NOT EXISTS pointer (
    name          TEXT PRIMARY KEY,
    release_id    INTEGER NOT NULL REFERENCES releases(release_id)
);
CREATE TABLE IF NOT EXISTS state (
    name          TEXT PRIMARY KEY,         -- small named facts, e.g. 'projection_models'
    value         TEXT NOT NULL             -- JSON
);
CREATE TABLE IF NOT EXISTS events (
    event_id      INTEGER PRIMARY KEY,
    at            REAL NOT NULL,
    kind          TEXT NOT NULL,
    source_key    TEXT,
    parse_id      TEXT,
    detail        TEXT NOT NULL DEFAULT '{}'
);
-- What a purge removed, by hashes only (no source key, no path, no text): the SHA-256 of each
-- purged source key, the content hashes and parse IDs whose bytes and rows went. A row whose
-- completed_at is NULL is a purge that was interrupted; the next purge finishes it first.
CREATE TABLE IF NOT EXISTS tombstones (
    tombstone_id     INTEGER PRIMARY KEY,
    purged_at        REAL NOT NULL,
    selector         TEXT NOT NULL,         -- source | root | before (the kind only)
    source_key_hashes TEXT NOT NULL,        -- JSON list of SHA-256 hex of the purged source keys
    source_hashes    TEXT NOT NULL,         -- JSON list of content hashes removed
    parse_ids        TEXT NOT NULL,         -- JSON list of parse IDs removed
    completed_at     REAL
);
CREATE INDEX IF NOT EXISTS parse_runs_status ON parse_runs(status);
CREATE INDEX IF NOT EXISTS sources_parse ON sources(parse_id);
CREATE INDEX IF NOT EXISTS sources_state ON sources(state);
"""

#: The same tables for PostgreSQL (``fabric_resources.catalog.postgres``), column for column:
#: INTEGER -> BIGINT (nanosecond mtimes pass 2**31), REAL -> DOUBLE PRECISION (SQLite's REAL is
#: 8 bytes; PostgreSQL's is 4), an INTEGER PRIMARY KEY -> BIGINT GENERATED BY DEFAULT AS IDENTITY,
#: TEXT -> TEXT COLLATE "C" (code-point order, as SQLite compares). A test holds the two equal.
CATALOG_DDL_POSTGRES = """
CREATE TABLE IF NOT EXISTS roots (
    root_id       BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    path          TEXT COLLATE "C" NOT NULL UNIQUE,
    label         TEXT COLLATE "C" NOT NULL UNIQUE,
    registered_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS sources (
    source_key    TEXT COLLATE "C" PRIMARY KEY,
    root_id       BIGINT NOT NULL REFERENCES roots(root_id),
    rel_path      TEXT COLLATE "C" NOT NULL,
    state         TEXT COLLATE "C" NOT NULL,
    media_type    TEXT COLLATE "C" NOT NULL,
    mtime_ns      BIGINT,
    size          BIGINT,
    source_hash   TEXT COLLATE "C",
    parse_id      TEXT COLLATE "C",
    first_seen    DOUBLE PRECISION NOT NULL,
    last_seen     DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS acquisitions (
    acquisition_id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    source_key     TEXT COLLATE "C" NOT NULL,
    source_hash    TEXT COLLATE "C" NOT NULL,
    mtime_ns       BIGINT NOT NULL,
    size           BIGINT NOT NULL,
    observed_at    DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS parse_runs (
    parse_id           TEXT COLLATE "C" PRIMARY KEY,
    source_hash        TEXT COLLATE "C" NOT NULL,
    media_type         TEXT COLLATE "C" NOT NULL,
    parser_name        TEXT COLLATE "C" NOT NULL,
    parser_version     TEXT COLLATE "C" NOT NULL,
    parser_config_hash TEXT COLLATE "C" NOT NULL,
    language           TEXT COLLATE "C",
    status             TEXT COLLATE "C" NOT NULL,
    reason             TEXT COLLATE "C",
    detail             TEXT COLLATE "C",
    verdicts           TEXT COLLATE "C" NOT NULL DEFAULT '{}',
    counts             TEXT COLLATE "C" NOT NULL DEFAULT '{}',
    created_at         DOUBLE PRECISION NOT NULL,
    updated_at         DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS releases (
    release_id    BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    created_at    DOUBLE PRECISION NOT NULL,
    manifest      TEXT COLLATE "C" NOT NULL
);
CREATE TABLE IF NOT EXISTS pointer (
    name          TEXT COLLATE "C" PRIMARY KEY,
    release_id    BIGINT NOT NULL REFERENCES releases(release_id)
);
CREATE TABLE IF NOT EXISTS state (
    name          TEXT COLLATE "C" PRIMARY KEY,
    value         TEXT COLLATE "C" NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    event_id      BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    at            DOUBLE PRECISION NOT NULL,
    kind          TEXT COLLATE "C" NOT NULL,
    source_key    TEXT COLLATE "C",
    parse_id      TEXT COLLATE "C",
    detail        TEXT COLLATE "C" NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS parse_runs_status ON parse_runs(status);
CREATE INDEX IF NOT EXISTS sources_parse ON sources(parse_id);
CREATE INDEX IF NOT EXISTS sources_state ON sources(state);
"""

#: File name of a named catalog lock beside a SQLite catalog (``Catalog.exclusive``): the
#: activation's is ``<home>/activation.lock``.
LOCK_NAME = "{name}.lock"
#: The catalog lock one ``fabric ingest`` holds while it runs (``ingest.lock`` beside a SQLite catalog).
INGEST_LOCK = "ingest"
#: The catalog lock a scan holds while it records what it found (its raw bytes stored, sources
#: pointed at parses), and a cleanup or purge while it decides and removes what no source needs:
#: a scan that takes an old parse back beside a cleanup would otherwise lose it (trial 23e).
SOURCES_LOCK = "sources"

#: Admin operations of ``fabric serve`` (``POST /v1/admin/<kind>``): one row each, polled by ID.
OPERATIONS_DDL = """
CREATE TABLE IF NOT EXISTS operations (
    operation_id  TEXT PRIMARY KEY,         -- 32 hex, random
    kind          TEXT NOT NULL,            -- ingest, lexical-repair, ...
    status        TEXT NOT NULL,            -- OPERATION_STATUSES
    params        TEXT NOT NULL DEFAULT '{}',  -- JSON
    reason        TEXT,                     -- why it failed
    result        TEXT NOT NULL DEFAULT '{}',  -- JSON: Dagster run IDs, counts
    created_at    REAL NOT NULL,
    started_at    REAL,
    finished_at   REAL
);
"""
CATALOG_DDL += OPERATIONS_DDL
#: pending → running → succeeded | failed
OPERATION_STATUSES = ("pending", "running", "succeeded", "failed")
#: The operations table for PostgreSQL, by the same column mapping as ``CATALOG_DDL_POSTGRES``.
OPERATIONS_DDL_POSTGRES = """
CREATE TABLE IF NOT EXISTS operations (
    operation_id  TEXT COLLATE "C" PRIMARY KEY,
    kind          TEXT COLLATE "C" NOT NULL,
    status        TEXT COLLATE "C" NOT NULL,
    params        TEXT COLLATE "C" NOT NULL DEFAULT '{}',
    reason        TEXT COLLATE "C",
    result        TEXT COLLATE "C" NOT NULL DEFAULT '{}',
    created_at    DOUBLE PRECISION NOT NULL,
    started_at    DOUBLE PRECISION,
    finished_at   DOUBLE PRECISION
);
"""
CATALOG_DDL_POSTGRES += OPERATIONS_DDL_POSTGRES
CATALOG_DDL_POSTGRES += """
CREATE TABLE IF NOT EXISTS tombstones (
    tombstone_id      BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    purged_at         DOUBLE PRECISION NOT NULL,
    selector          TEXT COLLATE "C" NOT NULL,
    source_key_hashes TEXT COLLATE "C" NOT NULL,
    source_hashes     TEXT COLLATE "C" NOT NULL,
    parse_ids         TEXT COLLATE "C" NOT NULL,
    completed_at      DOUBLE PRECISION
);
"""

#: The catalog's schema version history: one row per applied migration (MAX(version) is the
#: version). Created by the migration that records version 1; the same on both backends.
CATALOG_MIGRATIONS_DDL = """
CREATE TABLE IF NOT EXISTS catalog_migrations (
    version       INTEGER PRIMARY KEY,
    name          TEXT NOT NULL,
    applied_at    REAL NOT NULL
);
"""
CATALOG_MIGRATIONS_DDL_POSTGRES = """
CREATE TABLE IF NOT EXISTS catalog_migrations (
    version       BIGINT PRIMARY KEY,
    name          TEXT COLLATE "C" NOT NULL,
    applied_at    DOUBLE PRECISION NOT NULL
);
"""

SOURCE_STATES = ("present", "deleted", "access_lost")
PARSE_STATUSES = ("pending", "parsed", "ready", "failed", "held")
#: Catalog ``state`` entry written by every source scan: ``{path: reason}`` of the files (and
#: folders) it found but could not take in, e.g. ``{"fs:notes/big.log": "too-large: ..."}``.
#: The keys are source keys, or ``fs:<root>/<ascii() of the path>`` for names that are not UTF-8.
SCAN_SKIPPED_STATE = "scan_skipped"
#: Catalog ``state`` entry written by every source scan: ``{"at": unix time, "changes": n}`` (the
#: freshness line of ``fabric status``).
LAST_SCAN_STATE = "last_scan"
#: What a damaged ``last_scan`` / ``scan_skipped`` entry's error tells the operator: these are
#: reports each scan rewrites, not records.
RESCAN_REMEDY = "the next `fabric ingest` rewrites it"


#: 9999-12-31T23:59:59Z in Unix seconds: the last time a catalog row, state entry or snapshot may
#: name (Python's datetime range; a time past it crashed every reader that prints it).
LAST_TIME = 253402300799


def scan_record(value: dict) -> bool:
    """A ``last_scan`` value as ``fabric status`` reads it: its ``at`` a time between 1970 and 9999
    in Unix seconds (a string there was a pydantic traceback from status; ``-1e300`` an age of
    10^295 days)."""
    at = value.get("at")
    return isinstance(at, (int, float)) and not isinstance(at, bool) and 0 <= at <= LAST_TIME

# ---------------------------------------------------------------------------
# Serving index fields (tantivy)
# ---------------------------------------------------------------------------

INDEX_FIELD_WORD = "word"
INDEX_FIELD_SUBSTRING = "substring"
INDEX_FIELD_CHUNK_ID = "chunk_id"
INDEX_FIELD_PARSE_ID = "parse_id"
#: Fast field: the number of word-field tokens of the document (BM25's document length).
INDEX_FIELD_WORD_LENGTH = "word_length"


@dataclass(frozen=True)
class HomeLayout:
    """Paths under one Fabric home directory."""

    root: Path

    @property
    def config_file(self) -> Path:
        return self.root / "config.json"

    @property
    def catalog_file(self) -> Path:
        return self.root / "catalog.sqlite3"

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    @property
    def tables(self) -> Path:
        return self.root / "tables"

    @property
    def indexes(self) -> Path:
        return self.root / "indexes"

    @property
    def dagster_home(self) -> Path:
        return self.root / "dagster"

    @property
    def lock_file(self) -> Path:
        return self.root / "activation.lock"

    @property
    def restore_pending(self) -> Path:
        """Written by an in-place snapshot restore before it puts the catalog back, removed once it
        has forgotten what came after (``fabric_assets.lifecycle.forgetting``): present, a restore
        was interrupted."""
        return self.root / "restore-forget.json"

    @property
    def annotation_memo(self) -> Path:
        """The annotation memo (:class:`fabric_resources.annotator.memo.AnnotationMemo`): grounded
        chain outputs and the parses that used each."""
        return self.root / "annotation_memo.sqlite3"

    @property
    def row_audit_cache(self) -> Path:
        """The last row audit ``fabric status`` made, under a digest of everything it read
        (:func:`fabric_resources.row_audit.audited_rows`); only saves work."""
        return self.root / "row_audit_cache.json"

    @property
    def dense_check_cache(self) -> Path:
        """The last dense-channel check ``fabric status`` made, under a digest of everything it read
        (:func:`fabric_query.dense_health.dense_channels_off`); only saves work."""
        return self.root / "dense_check_cache.json"

#: A chunk's text is its fragments' unit slices joined by this separator (the fragment contract).
FRAGMENT_SEPARATOR = "\n\n"
