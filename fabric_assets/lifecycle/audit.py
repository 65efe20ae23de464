"""Lineage audit of a citation: which source bytes, parser and Dagster run produced the cited rows.

For the cited release, source and parse, :func:`audit_citation` names the source hash, the
parser (name, version, config hash) and, per table the release pins, the one Dagster run and
materialization that wrote the rows of that parse at the pinned Lance version. The join is on the
Lance version: every partition materialization records the ``lance_version`` its write produced
(:mod:`fabric_assets.partition_step`), so the writer of the pinned rows is the materialization of
the parse's partition with the greatest ``lance_version`` not above the version the release pins
(a later write of the partition makes a later version). Other runs of the same partition (a
forced re-parse, a re-derivation) wrote other versions and are not named.

Not done yet: the model and prompt of each projection, packs, a Dagster job, and the design
card's DuckDB resource over the Lance tables and Dagster's records.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg

from fabric_resources.home import FabricHome

#: Tables whose rows a citation's passage comes from (the chunk, its units, its lexical document).
CITED_TABLES = ("units", "chunks", "lexical_documents", "chunk_vectors")


class AuditError(Exception):
    """The citation names no release, source or parse the home holds; the message says which."""


@dataclass(frozen=True)
class RowsWriter:
    """The run and materialization that wrote one table's rows of the cited parse."""

    table: str
    pinned_version: int
    written_version: int | None
    run_id: str | None
    storage_id: int | None


@dataclass(frozen=True)
class CitationAudit:
    release_id: int
    source_key: str
    source_hash: str
    parse_id: str
    parser: str  # name and version
    parser_config_hash: str
    media_type: str
    writers: tuple[RowsWriter, ...]


def _writer(instance: dg.DagsterInstance, table: str, parse_id: str, pinned: int) -> RowsWriter:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(table), asset_partitions=[parse_id]), limit=10_000).records
    best = None
    for r in records:
        meta = r.asset_materialization.metadata if r.asset_materialization else {}
        version = getattr(meta.get("lance_version"), "value", None)
        if isinstance(version, int) and version <= pinned and (best is None or version > best[0]):
            best = (version, r)
    if best is None:
        return RowsWriter(table, pinned, None, None, None)
    return RowsWriter(table, pinned, best[0], best[1].run_id, best[1].storage_id)


def audit_citation(home: FabricHome, citation, instance: dg.DagsterInstance) -> CitationAudit:
    """The lineage of ``citation`` (a :class:`fabric_query.types.Citation`) in ``home``.

    Raises
    ------
    AuditError
        If the cited release is gone (retention), does not name the cited source with the cited
        parse, or the parse's run record is gone.
    """
    release = home.catalog.release(citation.release_id)
    if release is None:
        raise AuditError(f"release {citation.release_id} is not retained (see `retention`)")
    entry = release.manifest["sources"].get(citation.source_key)
    if entry is None or entry["parse_id"] != citation.parse_id:
        raise AuditError(f"release {citation.release_id} does not cite {citation.source_key} with parse "
                         f"{citation.parse_id}")
    run = home.catalog.parse_run(citation.parse_id)
    if run is None:
        raise AuditError(f"parse {citation.parse_id} has no run record any more")
    tables = release.manifest["tables"]
    writers = tuple(_writer(instance, t, citation.parse_id, tables[t]) for t in CITED_TABLES
                    if tables.get(t) is not None)
    return CitationAudit(citation.release_id, citation.source_key, run.source_hash, run.parse_id,
                         f"{run.parser_name} {run.parser_version}", run.parser_config_hash, run.media_type, writers)
