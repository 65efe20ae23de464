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
from fabric_assets.partition_step import PartitionStep, asset_args, check_specs, spec
from fabric_assets.partitions import PARTITIONED
from fabric_assets.projections import SOURCE_BYTES_MATCH_THEIR_HASH, UNIT_IDS_ARE_UNIQUE
from fabric_resources.artifact_store import ArtifactIntegrityError
from fabric_resources.catalog import StatusUpdate
from fabric_resources.dagster_resources import FabricHomeResource
from fabric_resources.config import ParserConfig
from fabric_resources.parsing.document import DETAIL_CHARS, ParsedDocument, ParseError, bad_input_net
from fabric_resources.parsing.language import LanguageVerdict, document_language
from fabric_resources.parsing.records import unit_rows
from fabric_resources.parsing.registry import parser_for
from fabric_resources.parsing.spec import ParserSpec


@dg.asset(
    **asset_args("source_bytes"),
    description="The raw bytes of the parse's content object, verified in the artifact store.",
)
def source_bytes(context: dg.AssetExecutionContext, fabric: FabricHomeResource):
    step = PartitionStep(context, fabric.open(), "source_bytes")
    home = step.home
    runs = {r.parse_id: r for r in home.catalog.parse_runs(step.keys)}
    failures, sizes = [], []
    for pk in step.keys:  # every partition of the run: this asset is what fails a parse without bytes
        run = runs.get(pk)
        if run is None:
            context.log.warning(f"partition {pk} has no parse run in the catalog")
            continue
        try:
            size = len(home.artifacts.get(run.source_hash))
            step.verdict(SOURCE_BYTES_MATCH_THEIR_HASH, pk, {"passed": True, "detail": ""})
        except (FileNotFoundError, ArtifactIntegrityError) as exc:
            failures.append(StatusUpdate(pk, "failed", "artifact-unavailable", str(exc)))
            step.verdict(SOURCE_BYTES_MATCH_THEIR_HASH, pk, {"passed": False, "detail": str(exc)})
            size = -1
        sizes.append(size)
    home.catalog.set_parse_statuses(failures)
    # Per-partition metadata costs ~15 ms per partition in Dagster's event log; the source hash and
    # media type of each parse are in the catalog and on the units materialization.
    step.run_metadata({"partitions": len(sizes), "bytes": sum(s for s in sizes if s > 0)})
    yield from step.finish()


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
        spec("units", "Canonical units (paragraphs, headings, cells, notes…) with locators."),
        spec("relationships", "Typed edges between units (note references, captions, table rows)."),
    ],
    check_specs=check_specs("units", "relationships"),
    **PARTITIONED,
)
def units_and_relationships(context: dg.AssetExecutionContext, fabric: FabricHomeResource):
    step = PartitionStep(context, fabric.open(), "units", "relationships")
    home = step.home
    runs = {r.parse_id: r for r in home.catalog.parse_runs(step.keys)}
    statuses = []
    for pk in step.live:
        run = runs[pk]
        spec_ = parser_for(run.media_type)
        try:
            if spec_ is None:
                raise ParseError("unsupported-media-type", run.media_type)
            # Read outside _parse_one on purpose: a store that cannot serve verified bytes
            # is Fabric's fault (source_bytes already failed the parses whose bytes are missing).
            data = home.artifacts.get(run.source_hash)
            parsed = _parse_one(pk, spec_, data, home.config.parsers, run.media_type)
        except ParseError as exc:
            statuses.append(StatusUpdate(pk, "failed", exc.reason, exc.detail[:DETAIL_CHARS]))
            # The reason only: a parser's detail may quote the document, and Dagster's event log is
            # not purged (the detail is in the catalog, which is; `fabric status` shows it).
            context.log.warning(f"parse {pk} failed: {exc.reason}")
            continue
        doc, units, rels = parsed.doc, parsed.units, parsed.relationships
        step.add_rows(units, "units")
        step.add_rows(rels, "relationships")
        unique = ids_unique(units, "unit_id")
        nonempty = units_nonempty(units)
        step.verdict(UNIT_IDS_ARE_UNIQUE, pk, {"passed": unique["passed"] and nonempty["passed"],
                                              "detail": f"{unique['detail']}; {nonempty['detail']}"})
        counts = {"units": units.num_rows, "relationships": rels.num_rows}
        if doc.unread:  # parts the parser could not read (image-only PDF pages, a PPTX shape): "partly read"
            counts["failed_units"] = [{"where": p.where, "reason": p.reason} for p in doc.unread[:100]]
        statuses.append(StatusUpdate(pk, "parsed", counts=counts, language=parsed.language.language))
        repairs = sum(u.attributes.get("decoding_repairs", 0) for u in doc.units)
        meta = {"parser": f"{doc.parser_name}/{doc.parser_version}", "encoding": doc.encoding or "",
                "language": parsed.language.language or "", "language_source": parsed.language.source,
                "language_declared": doc.language or "", "decoding_repairs": repairs,
                # Its length, not the title: metadata stays in Dagster's event log, which a purge does
                # not rewrite, so it never holds document text.
                "title_chars": len(doc.title or ""), "source_hash": run.source_hash, "media_type": run.media_type}
        step.partition_metadata(pk, {**meta, "rows": units.num_rows}, "units")
        step.partition_metadata(pk, {"rows": rels.num_rows}, "relationships")
    step.write()
    # Only once the rows are stored: a write that fails (a fault of Fabric) leaves these parses
    # pending, so the next ingest runs them again rather than trusting rows that are not there.
    home.catalog.set_parse_statuses(statuses)
    yield from step.finish()
