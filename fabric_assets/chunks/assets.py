"""Units → fine chunks → lexical documents, per parse partition."""


import hashlib

import dagster as dg
import pyarrow as pa

from fabric_assets.chunking.fine_chunks import CHUNKER_VERSION, pack_fine_chunks
from fabric_assets.chunking.records import chunk_inputs, chunk_rows, lexical_rows
from fabric_assets.gate import counts_consistent, fragments_reproduce_text, ids_unique
from fabric_assets.model_identity import definitions_config
from fabric_assets.partitions import PARTITIONED
from fabric_assets.verdicts import live_parse_ids, record_and_summarise
from fabric_resources.config import FabricConfig
from fabric_resources.dagster_resources import FabricHomeResource
from fabric_resources.language_routing import needs_multilingual
from fabric_resources.schema import CHUNKS


def chunker_identity(embedder_identity: str, max_tokens: int) -> str:
    """Chunk boundaries depend on the tokenizer and the cap, so both enter chunk IDs."""
    return f"{CHUNKER_VERSION}:{embedder_identity}:max{max_tokens}"


def chunk_cap(config: FabricConfig, unit_texts: list[str]) -> int:
    """The token cap for one document: ``multilingual_max_tokens`` when the document as a whole
    is routed to the multilingual model (``language_routing``), else ``max_tokens``."""
    # A 200k-character sample decides for a whole book at a bounded cost.
    if config.dense.multilingual and needs_multilingual("\n".join(unit_texts)[:200_000]):
        return config.chunking.multilingual_max_tokens
    return config.chunking.max_tokens


def _digest(texts: list[str]) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:16]


@dg.asset(
    **PARTITIONED,
    deps=["units"],
    group_name="projections",
    # The caps enter the code version, so the UI shows chunks (and what is made from them) stale
    # after a chunking change; `fabric ingest` re-chunks them (`rechunk_job`).
    code_version=CHUNKER_VERSION + ":max{0.max_tokens}/{0.multilingual_max_tokens}".format(definitions_config().chunking),
    check_specs=[
        dg.AssetCheckSpec("chunk_fragments_reproduce_text", asset="chunks"),
        dg.AssetCheckSpec("chunk_ids_are_unique", asset="chunks"),
    ],
    description="Fine chunks packed under the embedder's token cap, with exact fragments.",
)
def chunks(context: dg.AssetExecutionContext, fabric: FabricHomeResource):
    home = fabric.open()
    embedder = fabric.embedder()
    cfg = home.config
    keys = list(context.partition_keys)
    live = live_parse_ids(home, keys)
    units = home.tables.read("units", parse_ids=live)
    tables, exact, unique = [], {}, {}
    for pk in live:
        u = units.filter(pa.compute.equal(units.column("parse_id"), pk))
        cap = chunk_cap(cfg, u.column("text").to_pylist())
        chunker = chunker_identity(embedder.identity, cap)
        packed = pack_fine_chunks(chunk_inputs(u), embedder.token_spans, cap)
        rows = chunk_rows(pk, packed, chunker, dict(zip(u.column("unit_id").to_pylist(), u.column("text").to_pylist())))
        tables.append(rows)
        exact[pk] = fragments_reproduce_text(rows, u)
        unique[pk] = ids_unique(rows, "chunk_id")
        context.add_asset_metadata(
            {"rows": rows.num_rows, "digest": _digest(rows.column("text").to_pylist()), "chunker": chunker},
            partition_key=pk,
        )
    version = home.tables.replace_partitions(
        "chunks", keys, pa.concat_tables(tables) if tables else CHUNKS.empty_table())
    yield dg.MaterializeResult(metadata={"lance_version": version})
    yield record_and_summarise(home, "chunk_fragments_reproduce_text", "chunks", exact)
    yield record_and_summarise(home, "chunk_ids_are_unique", "chunks", unique)


@dg.asset(
    **PARTITIONED,
    deps=["chunks"],
    group_name="projections",
    code_version="lexical-v1",
    check_specs=[dg.AssetCheckSpec("one_lexical_document_per_chunk", asset="lexical_documents")],
    description="Folded chunk text for the word and substring indexes (built at activation).",
)
def lexical_documents(context: dg.AssetExecutionContext, fabric: FabricHomeResource):
    home = fabric.open()
    keys = list(context.partition_keys)
    live = live_parse_ids(home, keys)
    chunk_rows_ = home.tables.read("chunks", parse_ids=live, columns=["parse_id", "chunk_id", "text"])
    docs = lexical_rows(chunk_rows_)
    version = home.tables.replace_partitions("lexical_documents", keys, docs)
    verdicts = {}
    for pk in live:
        want = chunk_rows_.filter(pa.compute.equal(chunk_rows_.column("parse_id"), pk)).column("chunk_id").to_pylist()
        got = docs.filter(pa.compute.equal(docs.column("parse_id"), pk)).column("chunk_id").to_pylist()
        # The digest of the documents written: activation compares it with the one its release
        # indexed, so an active parse re-chunked in place (same parse ID) is re-indexed.
        verdicts[pk] = {**counts_consistent(want, got, "lexical documents"), "digest": _digest(sorted(got))}
    yield dg.MaterializeResult(metadata={"lance_version": version, "rows": docs.num_rows})
    yield record_and_summarise(home, "one_lexical_document_per_chunk", "lexical_documents", verdicts)
