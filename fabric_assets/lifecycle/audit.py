"""Lineage audit of cited passages: which source bytes, parser, chunker, models and prompts
produced each one, and which Dagster run and materialization wrote the rows the release pins.

Everything is read from what is already recorded, never from the current code or config: the
release manifest (the source's hash, size, mtime and media type as the release saw them, and the
pinned Lance version of every table), the catalog's parse run (parser name, version, config
hash), the pinned Lance rows (the chunk's ``chunker`` identity and text hash, each vector row's
``model`` identity, each annotation's ``producer`` identity and ``memo_key``) and Dagster's
materialization records (``lance_version`` of each partition write, ``fabric_assets.partition_step``).

The joins run in DuckDB (the design card's engine for lineage audits) through dagster-duckdb's
``DuckDBResource``: the cited passages, the pinned Lance rows of the cited parses and the
materialization records become Arrow relations of one in-memory database. The writer of a table's
pinned rows is an ASOF join: the materialization of the parse's partition with the greatest
``lance_version`` not above the pinned version (a later write of the partition makes a later
version), so other runs of the same partition (a forced re-parse, a re-derivation) are not named.
An annotation belongs to a passage when one of its support spans overlaps one of the chunk's
fragments (end-exclusive ranges; an empty span overlaps the fragment holding its point, as the
graph channel's ``chunks_for``).

Not recorded, so not shown: the LLM's model name (only the producer identity, a hash over the
prompts, model, endpoint and generation settings, is stored); :func:`audit_passages` names the
configured model only when the configured producer identity equals the recorded one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import PurePath
from typing import Any

import dagster as dg
import pyarrow as pa
from dagster_duckdb import DuckDBResource

from fabric_resources.home import FabricHome

#: Tables whose rows a citation's passage comes from (the chunk, its units, its lexical document, vectors).
CITED_TABLES = ("units", "chunks", "lexical_documents", "chunk_vectors", "chunk_vectors_multilingual",
                "annotations")

#: Vector tables whose ``model`` column says which embedding model embedded a chunk.
CHUNK_VECTOR_TABLES = ("chunk_vectors", "chunk_vectors_multilingual")


class AuditError(Exception):
    """The citation names no release, source, parse or chunk the home holds; the message says which.

    ``redacted``: the same without source keys or values read from the input, for Dagster's event
    log (never purged).
    """

    def __init__(self, message: str, redacted: str | None = None) -> None:
        super().__init__(message)
        self.redacted = redacted or message


@dataclass(frozen=True)
class CitedPassage:
    """What identifies one cited passage (the identifiers of a ``Citation``; no text)."""

    release_id: int
    source_key: str
    parse_id: str
    chunk_id: str
    text_hash: str | None = None


@dataclass(frozen=True)
class SourceBytes:
    """The cited source's bytes as the release manifest records them (``path``: the root's path
    joined with the source's relative path in the catalog; None once the source row is purged)."""

    source_hash: str
    path: str | None
    size: int | None
    mtime_ns: int | None
    media_type: str


@dataclass(frozen=True)
class ParserIdentity:
    name: str
    version: str
    config_hash: str
    language: str | None


@dataclass(frozen=True)
class ChunkLineage:
    """The pinned chunk row: the chunker identity it was cut under (``CHUNKER_VERSION:tokenizer
    identity:max<cap>``), its token count and text hash, and whether that hash is the citation's
    (None when the citation carries none)."""

    chunker: str
    token_count: int
    text_hash: str
    text_hash_matches: bool | None


@dataclass(frozen=True)
class Embedding:
    """One pinned vector row of the chunk: its table and the model identity recorded on it
    (``name@version#weights-fingerprint:...``)."""

    table: str
    model: str


@dataclass(frozen=True)
class AnnotationLineage:
    """The release's annotations whose support overlaps the chunk, by producer identity (prompts,
    schemas, model, endpoint, excerpt sizing and generation settings, hashed)."""

    producer: str
    annotations: int
    memo_keys: tuple[str, ...]
    #: ``annotation.endpoint.model`` of the home's config when its producer identity is
    #: ``producer`` (the identity covers the model); None when the config has moved on.
    configured_model: str | None


@dataclass(frozen=True)
class RowsWriter:
    """The run and materialization that wrote one table's rows of the cited parse."""

    table: str
    pinned_version: int
    written_version: int | None
    run_id: str | None
    storage_id: int | None
    #: Whether the Dagster instance still holds ``run_id``'s run record (``False``: the ID comes
    #: from the event log alone, the run storage lost it, e.g. ``runs.db`` deleted); ``None``
    #: when no writer is recorded.
    run_recorded: bool | None = None


@dataclass(frozen=True)
class PassageAudit:
    """The lineage of one cited passage. ``annotations`` empty: the release has none for the chunk."""

    release_id: int
    source_key: str
    parse_id: str
    chunk_id: str
    source: SourceBytes
    parser: ParserIdentity
    chunk: ChunkLineage
    embeddings: tuple[Embedding, ...]
    annotations: tuple[AnnotationLineage, ...]
    writers: tuple[RowsWriter, ...]

    def identifiers(self) -> dict[str, Any]:
        """Hashes and identifiers only (no source key, path nor text): what Dagster's event log,
        which is never purged, may hold."""
        return {
            "release_id": self.release_id, "parse_id": self.parse_id, "chunk_id": self.chunk_id,
            "source_hash": self.source.source_hash, "size": self.source.size, "mtime_ns": self.source.mtime_ns,
            "media_type": self.source.media_type,
            "parser": f"{self.parser.name} {self.parser.version}", "parser_config_hash": self.parser.config_hash,
            "chunker": self.chunk.chunker, "chunk_text_hash": self.chunk.text_hash,
            "text_hash_matches": self.chunk.text_hash_matches,
            "embeddings": {e.table: e.model for e in self.embeddings},
            "annotation_producers": [a.producer for a in self.annotations] or "none",
            "writers": {w.table: {"run_id": w.run_id, "storage_id": w.storage_id,
                                  "pinned_version": w.pinned_version, "written_version": w.written_version,
                                  "run_recorded": w.run_recorded}
                        for w in self.writers},
        }


def passages_of(data: Any) -> list[CitedPassage]:
    """The cited passages of an EvidencePack, a hit, a citation (JSON-decoded) or a list of those,
    in order: every hit of a pack.

    Raises
    ------
    AuditError
        If ``data`` is none of those, or a citation lacks an identifier.
    """
    if isinstance(data, list):
        return [p for item in data for p in passages_of(item)]
    if not isinstance(data, Mapping):
        raise AuditError(f"not a pack, hit or citation: a JSON {type(data).__name__}")
    if "results" in data:
        return passages_of(list(data["results"]))
    cited = data.get("citation", data)
    try:
        return [CitedPassage(int(cited["release_id"]), str(cited["source_key"]), str(cited["parse_id"]),
                             str(cited["chunk_id"]), cited.get("text_hash"))]
    except KeyError as exc:
        raise AuditError(f"not a citation: no {exc}") from None
    except (TypeError, ValueError) as exc:
        raise AuditError(f"not a citation: {type(exc).__name__}: {exc}",
                         f"not a citation: {type(exc).__name__}") from None


def passages_in_release(home: FabricHome, release_id: int, chunk_ids: Iterable[str]) -> list[CitedPassage]:
    """The passages of ``chunk_ids`` in release ``release_id`` (0: the current one), each with
    the first source key (sorted) of the release that cites its parse.

    Raises
    ------
    AuditError
        If the release is not retained or pins no such chunk.
    """
    release = home.catalog.release(release_id) if release_id else home.catalog.current_release()
    if release is None:
        raise AuditError(f"release {release_id or '(current)'} is not in the catalog (retention removed it, a purge "
                         "retired it, or a snapshot restored in place rolled the home back to before it)")
    chunk_ids = list(dict.fromkeys(chunk_ids))
    keys: dict[str, str] = {}
    for key, entry in sorted(release.manifest["sources"].items()):
        keys.setdefault(entry["parse_id"], key)
    version = release.manifest["tables"].get("chunks")
    rows = home.tables.read("chunks", parse_ids=sorted(keys), version=version,
                            columns=["parse_id", "chunk_id"]) if version is not None else None
    parse_of = dict(zip(rows.column("chunk_id").to_pylist(), rows.column("parse_id").to_pylist())) if rows else {}
    missing = [c for c in chunk_ids if c not in parse_of]
    if missing:
        raise AuditError(f"release {release.release_id} pins no chunk {missing[0]}")
    return [CitedPassage(release.release_id, keys[parse_of[c]], parse_of[c], c) for c in chunk_ids]


def _pinned(home: FabricHome, table: str, version: int | None, parse_ids: list[str], columns: list[str]) -> pa.Table:
    if version is None or not home.tables.exists(table):
        return home.tables.read(table, parse_ids=[], columns=columns)
    try:
        return home.tables.read(table, parse_ids=parse_ids, version=version, columns=columns)
    except (OSError, ValueError) as exc:  # Lance: a version (or tag) that does not exist, unreadable files
        raise AuditError(f"the release pins version {version!r} of table {table}, which the home cannot read "
                         f"({type(exc).__name__}): the catalog or the table was altered; restore the home from a "
                         "snapshot") from None


def _tagged(rows: pa.Table, table: str) -> pa.Table:
    return rows.append_column("table_name", pa.array([table] * rows.num_rows, pa.string()))


def _materializations(instance: dg.DagsterInstance, tables: dict[str, int], parse_ids: list[str]) -> pa.Table:
    rows = []
    for table in tables:
        for parse_id in parse_ids:
            records = instance.fetch_materializations(dg.AssetRecordsFilter(
                asset_key=dg.AssetKey(table), asset_partitions=[parse_id]), limit=10_000).records
            for r in records:
                meta = r.asset_materialization.metadata if r.asset_materialization else {}
                version = getattr(meta.get("lance_version"), "value", None)
                if isinstance(version, int):
                    rows.append({"table_name": table, "parse_id": parse_id, "lance_version": version,
                                 "run_id": r.run_id, "storage_id": r.storage_id})
    schema = pa.schema([("table_name", pa.string()), ("parse_id", pa.string()), ("lance_version", pa.int64()),
                        ("run_id", pa.string()), ("storage_id", pa.int64())])
    return pa.Table.from_pylist(rows, schema=schema)


# The writer of each pinned table's rows of each cited parse: ASOF picks, per (table, parse), the
# materialization with the greatest lance_version <= the pinned version.
_WRITERS_SQL = """
SELECT p.table_name, p.parse_id, p.pinned_version, m.lance_version, m.run_id, m.storage_id
FROM pinned p ASOF LEFT JOIN mats m
  ON p.table_name = m.table_name AND p.parse_id = m.parse_id AND p.pinned_version >= m.lance_version
"""

_CHUNKS_SQL = """
SELECT c.i, k.chunker, k.token_count, k.text_hash FROM cited c
JOIN chunks k ON k.parse_id = c.parse_id AND k.chunk_id = c.chunk_id
"""

_VECTORS_SQL = """
SELECT c.i, v.table_name, v.model FROM cited c
JOIN vectors v ON v.parse_id = c.parse_id AND v.chunk_id = c.chunk_id ORDER BY c.i, v.table_name
"""

# Overlap of end-exclusive ranges; an empty support span [s, s) overlaps the fragment holding s.
_ANNOTATIONS_SQL = """
WITH f AS (SELECT c.i, c.parse_id, unnest(k.fragments) AS fr FROM cited c
           JOIN chunks k ON k.parse_id = c.parse_id AND k.chunk_id = c.chunk_id),
     s AS (SELECT a.parse_id, a.annotation_id, a.producer, a.memo_key, unnest(a.support) AS sp FROM annotations a)
SELECT f.i, s.producer, count(DISTINCT s.annotation_id) AS n, list(DISTINCT s.memo_key ORDER BY s.memo_key) AS keys
FROM f JOIN s ON f.parse_id = s.parse_id AND f.fr.unit_id = s.sp.unit_id
  AND f.fr.start_char < greatest(s.sp.end_char, s.sp.start_char + 1) AND f.fr.end_char > s.sp.start_char
GROUP BY f.i, s.producer ORDER BY f.i, s.producer
"""


def _configured_producer(home: FabricHome) -> tuple[str | None, str | None]:
    from fabric_assets.annotations.planning import current_producer

    try:
        producer = current_producer(home.config)
    except ValueError:  # annotation on without an endpoint: no identity to compare with
        return None, None
    endpoint = home.config.annotation.endpoint
    return producer, endpoint.model if endpoint is not None else None


def _audit_release(home: FabricHome, release_id: int, passages: list[CitedPassage], instance: dg.DagsterInstance,
                   duckdb: DuckDBResource) -> list[PassageAudit]:
    release = home.catalog.release(release_id)
    if release is None:
        raise AuditError(f"release {release_id} is not in the catalog (retention removed it, a purge retired it, or "
                         "a snapshot restored in place rolled the home back to before it)")
    runs = {}
    for p in passages:
        entry = release.manifest["sources"].get(p.source_key)
        if entry is None or entry["parse_id"] != p.parse_id:
            raise AuditError(f"release {release_id} does not cite {p.source_key} with parse {p.parse_id}",
                             f"release {release_id} does not cite the passage's source with parse {p.parse_id}")
        run = runs.get(p.parse_id) or home.catalog.parse_run(p.parse_id)
        if run is None:
            raise AuditError(f"parse {p.parse_id} has no run record any more")
        runs[p.parse_id] = run
    parse_ids = sorted(runs)
    tables = {t: v for t, v in release.manifest["tables"].items() if t in CITED_TABLES and v is not None}
    chunks = _pinned(home, "chunks", tables.get("chunks"), parse_ids,
                     ["parse_id", "chunk_id", "chunker", "token_count", "text_hash", "fragments"])
    vectors = pa.concat_tables([
        _tagged(_pinned(home, t, tables.get(t), parse_ids, ["parse_id", "chunk_id", "model"]), t)
        for t in CHUNK_VECTOR_TABLES])
    annotations = _pinned(home, "annotations", tables.get("annotations"), parse_ids,
                          ["parse_id", "annotation_id", "producer", "memo_key", "support"])
    cited = pa.table({"i": list(range(len(passages))), "parse_id": [p.parse_id for p in passages],
                      "chunk_id": [p.chunk_id for p in passages]})
    pinned = pa.table({"table_name": [t for t in tables for _ in parse_ids],
                       "parse_id": [pid for _ in tables for pid in parse_ids],
                       "pinned_version": pa.array([tables[t] for t in tables for _ in parse_ids], pa.int64())})
    with duckdb.get_connection() as con:
        for name, relation in (("cited", cited), ("chunks", chunks), ("vectors", vectors),
                               ("annotations", annotations), ("pinned", pinned),
                               ("mats", _materializations(instance, tables, parse_ids))):
            con.register(name, relation)
        chunk_rows = {i: rest for i, *rest in con.execute(_CHUNKS_SQL).fetchall()}
        vector_rows: dict[int, list[Embedding]] = {}
        for i, table, model in con.execute(_VECTORS_SQL).fetchall():
            vector_rows.setdefault(i, []).append(Embedding(table, model))
        annotation_rows: dict[int, list[tuple]] = {}
        for i, producer, n, keys in con.execute(_ANNOTATIONS_SQL).fetchall():
            annotation_rows.setdefault(i, []).append((producer, n, tuple(keys)))
        writer_rows: dict[str, list[RowsWriter]] = {}
        for table, pid, pinned_v, written, run_id, storage_id in con.execute(_WRITERS_SQL).fetchall():
            writer_rows.setdefault(pid, []).append(RowsWriter(table, pinned_v, written, run_id, storage_id))
    recorded = {run_id: instance.has_run(run_id) for rows in writer_rows.values() for run_id in
                {w.run_id for w in rows} - {None}}
    writer_rows = {pid: [replace(w, run_recorded=recorded.get(w.run_id)) for w in rows]
                   for pid, rows in writer_rows.items()}
    configured, model = _configured_producer(home)
    order = {t: n for n, t in enumerate(CITED_TABLES)}
    out = []
    for i, p in enumerate(passages):
        if i not in chunk_rows:
            raise AuditError(f"release {release_id} pins no chunk {p.chunk_id} of parse {p.parse_id}")
        chunker, token_count, text_hash = chunk_rows[i]
        entry, run = release.manifest["sources"][p.source_key], runs[p.parse_id]
        row = home.catalog.source(p.source_key)
        path = str(PurePath(entry.get("root") or "", row.rel_path)) if row is not None else None
        out.append(PassageAudit(
            release_id, p.source_key, p.parse_id, p.chunk_id,
            SourceBytes(entry["source_hash"], path, entry.get("size"), entry.get("mtime_ns"), entry["media_type"]),
            ParserIdentity(run.parser_name, run.parser_version, run.parser_config_hash, run.language),
            ChunkLineage(chunker, token_count, text_hash, None if p.text_hash is None else p.text_hash == text_hash),
            tuple(vector_rows.get(i, ())),
            tuple(AnnotationLineage(prod, n, keys, model if prod == configured else None)
                  for prod, n, keys in annotation_rows.get(i, ())),
            tuple(sorted(writer_rows.get(p.parse_id, ()), key=lambda w: order[w.table]))))
    return out


def audit_passages(home: FabricHome, passages: Iterable[CitedPassage], instance: dg.DagsterInstance,
                   duckdb: DuckDBResource | None = None) -> list[PassageAudit]:
    """The lineage of every passage, in order (one per hit of a pack, repeats included).

    ``duckdb`` defaults to an in-memory database; nothing is written to it but Arrow views.

    Raises
    ------
    AuditError
        If a cited release is gone (retention), does not name the cited source with the cited
        parse, pins no such chunk, or the parse's run record is gone.
    """
    passages = list(passages)
    duckdb = duckdb or DuckDBResource(database=":memory:")
    by_release: dict[int, list[int]] = {}
    for n, p in enumerate(passages):
        by_release.setdefault(p.release_id, []).append(n)
    out: list[PassageAudit | None] = [None] * len(passages)
    for release_id, positions in by_release.items():
        audits = _audit_release(home, release_id, [passages[n] for n in positions], instance, duckdb)
        for n, a in zip(positions, audits):
            out[n] = a
    return [a for a in out if a is not None]


def audit_citation(home: FabricHome, citation, instance: dg.DagsterInstance,
                   duckdb: DuckDBResource | None = None) -> PassageAudit:
    """The lineage of ``citation`` (a :class:`fabric_query.types.Citation` or its JSON dict).

    Raises
    ------
    AuditError
        As :func:`audit_passages`.
    """
    data = citation if isinstance(citation, Mapping) else json.loads(citation.model_dump_json())
    (passage,) = passages_of(data)
    return audit_passages(home, [passage], instance, duckdb)[0]
