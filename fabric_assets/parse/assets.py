"""Source bytes → canonical units and relationships, per parse partition.

One document's parse is the unit of failure: whatever parsing one document raises (its
parser, turning its units into rows, identifying its language: all pure code over that
document's bytes) fails that parse alone with a named reason, and the run goes on with the
others. Faults of Fabric's own machinery (the artifact store, the catalog, the tables) and
``MemoryError`` still raise: they are not the document's, and failing it for them would
make a transient fault permanent (a failed parse is not retried).
"""

from dataclasses import dataclass

import dagster as dg
import pyarrow as pa

from fabric_assets.gate import ids_unique, units_nonempty
from fabric_assets.partitions import PARTITIONED
from fabric_assets.verdicts import live_parse_ids, record_and_summarise
from fabric_resources.artifact_store import ArtifactIntegrityError
from fabric_resources.catalog import StatusUpdate
from fabric_resources.dagster_resources import FabricHomeResource
from fabric_resources.config import ParserConfig
from fabric_resources.parsing.document import DETAIL_CHARS, ParsedDocument, ParseError, bad_input_net
from fabric_resources.parsing.language import LanguageVerdict, document_language
from fabric_resources.parsing.records import unit_rows
from fabric_resources.parsing.registry import parser_for
from fabric_resources.parsing.spec import ParserSpec
from fabric_resources.schema import RELATIONSHIPS, UNITS


@dg.asset(
    **PARTITIONED,
    group_name="canonical",
    check_specs=[dg.AssetCheckSpec("source_bytes_match_their_hash", asset="source_bytes")],
    description="The raw bytes of the parse's content object, verified in the artifact store.",
)
def source_bytes(context: dg.AssetExecutionContext, fabric: FabricHomeResource):
    home = fabric.open()
    runs = {r.parse_id: r for r in home.catalog.parse_runs(context.partition_keys)}
    verdicts, failures, sizes = {}, [], []
    for pk in context.partition_keys:
        run = runs.get(pk)
        if run is None:
            context.log.warning(f"partition {pk} has no parse run in the catalog")
            continue
        try:
            size = len(home.artifacts.get(run.source_hash))
            verdicts[pk] = {"passed": True, "detail": ""}
        except (FileNotFoundError, ArtifactIntegrityError) as exc:
            failures.append(StatusUpdate(pk, "failed", "artifact-unavailable", str(exc)))
            verdicts[pk] = {"passed": False, "detail": str(exc)}
            size = -1
        sizes.append(size)
    home.catalog.set_parse_statuses(failures)
    # Per-partition metadata costs ~15 ms per partition in Dagster's event log; the source hash and
    # media type of each parse are in the catalog and on the units materialization.
    yield dg.MaterializeResult(metadata={"partitions": len(sizes), "bytes": sum(s for s in sizes if s > 0)})
    yield record_and_summarise(home, "source_bytes_match_their_hash", "source_bytes", verdicts)


@dataclass(frozen=True)
class _Parsed:
    doc: ParsedDocument
    units: pa.Table
    relationships: pa.Table
    language: LanguageVerdict


@bad_input_net
def _parse_one(parse_id: str, spec: ParserSpec, data: bytes, parsers: ParserConfig, media_type: str) -> _Parsed:
    """Everything pure about one document: parse, rows, language. Any exception is its failure
    (``ParseError``; ``parser-error`` for the unanticipated ones), but ``MemoryError``."""
    doc = spec.run(data, parsers, media_type)
    units, rels = unit_rows(parse_id, doc)
    return _Parsed(doc, units, rels, document_language([u.text for u in doc.units], declared=doc.language))


@dg.multi_asset(
    specs=[
        dg.AssetSpec("units", deps=["source_bytes"], group_name="canonical",
                     description="Canonical units (paragraphs, headings, cells, notes…) with locators."),
        dg.AssetSpec("relationships", deps=["source_bytes"], group_name="canonical",
                     description="Typed edges between units (note references, captions, table rows)."),
    ],
    check_specs=[dg.AssetCheckSpec("unit_ids_are_unique", asset="units")],
    **PARTITIONED,
)
def units_and_relationships(context: dg.AssetExecutionContext, fabric: FabricHomeResource):
    home = fabric.open()
    keys = list(context.partition_keys)
    runs = {r.parse_id: r for r in home.catalog.parse_runs(keys)}
    all_units, all_rels, verdicts, statuses = [], [], {}, []
    for pk in live_parse_ids(home, keys):
        run = runs[pk]
        spec = parser_for(run.media_type)
        try:
            if spec is None:
                raise ParseError("unsupported-media-type", run.media_type)
            # Read outside _parse_one on purpose: a store that cannot serve verified bytes
            # is Fabric's fault (source_bytes already failed the parses whose bytes are missing).
            data = home.artifacts.get(run.source_hash)
            parsed = _parse_one(pk, spec, data, home.config.parsers, run.media_type)
        except ParseError as exc:
            statuses.append(StatusUpdate(pk, "failed", exc.reason, exc.detail[:DETAIL_CHARS]))
            context.log.warning(f"parse {pk} failed: {exc}")
            continue
        doc, units, rels = parsed.doc, parsed.units, parsed.relationships
        all_units.append(units)
        all_rels.append(rels)
        unique = ids_unique(units, "unit_id")
        nonempty = units_nonempty(units)
        verdicts[pk] = {"passed": unique["passed"] and nonempty["passed"],
                        "detail": f"{unique['detail']}; {nonempty['detail']}"}
        counts = {"units": units.num_rows, "relationships": rels.num_rows}
        if doc.metadata.get("failed_units"):  # parts the parser could not read (e.g. image-only PDF pages)
            counts["failed_units"] = doc.metadata["failed_units"][:100]
        statuses.append(StatusUpdate(pk, "parsed", counts=counts, language=parsed.language.language))
        repairs = sum(u.attributes.get("decoding_repairs", 0) for u in doc.units)
        meta = {"parser": f"{doc.parser_name}/{doc.parser_version}", "encoding": doc.encoding or "",
                "language": parsed.language.language or "", "language_source": parsed.language.source,
                "language_declared": doc.language or "", "decoding_repairs": repairs,
                "title": doc.title or "", "source_hash": run.source_hash, "media_type": run.media_type}
        context.add_asset_metadata({**meta, "rows": units.num_rows}, asset_key="units", partition_key=pk)
        context.add_asset_metadata({"rows": rels.num_rows}, asset_key="relationships", partition_key=pk)
    units_version = home.tables.replace_partitions(
        "units", keys, pa.concat_tables(all_units) if all_units else UNITS.empty_table())
    rels_version = home.tables.replace_partitions(
        "relationships", keys, pa.concat_tables(all_rels) if all_rels else RELATIONSHIPS.empty_table())
    # Only once the rows are stored: a write that fails (a fault of Fabric) leaves these parses
    # pending, so the next ingest runs them again rather than trusting rows that are not there.
    home.catalog.set_parse_statuses(statuses)
    yield dg.MaterializeResult(asset_key="units", metadata={"lance_version": units_version})
    yield dg.MaterializeResult(asset_key="relationships", metadata={"lance_version": rels_version})
    yield record_and_summarise(home, "unit_ids_are_unique", "units", verdicts)
