"""Units → fine chunks → lexical documents, per parse partition."""


import hashlib

import dagster as dg

from fabric_assets.chunking.fine_chunks import CHUNKER_VERSION, pack_fine_chunks
from fabric_assets.chunking.records import chunk_inputs, chunk_rows, lexical_rows
from fabric_assets.gate import counts_consistent, fragments_reproduce_text, ids_unique
from fabric_assets.partition_step import PartitionStep, asset_args
from fabric_assets.projections import (CHUNK_FRAGMENTS_REPRODUCE_TEXT, CHUNK_IDS_ARE_UNIQUE,
                                       ONE_LEXICAL_DOCUMENT_PER_CHUNK)
from fabric_resources.config import FabricConfig
from fabric_resources.dagster_resources import FabricHomeResource, TokenizerResource
from fabric_resources.language_routing import needs_multilingual


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


# The caps enter the code version (projections.Identity.CHUNKER), so the UI shows chunks (and what
# is made from them) stale after a chunking change; `fabric ingest` re-chunks them (`rechunk_job`).
@dg.asset(
    **asset_args("chunks"),
    description="Fine chunks packed under the embedder's token cap, with exact fragments.",
)
def chunks(context: dg.AssetExecutionContext, fabric: FabricHomeResource, tokenizer: TokenizerResource):
    step = PartitionStep(context, fabric.open(), "chunks")
    cfg = step.config
    words = tokenizer.tokenizer(cfg)
    for pk, u in step.by_parse(step.read("units")):
        cap = chunk_cap(cfg, u.column("text").to_pylist())
        chunker = chunker_identity(words.identity, cap)
        packed = pack_fine_chunks(chunk_inputs(u), words.token_spans, cap)
        rows = chunk_rows(pk, packed, chunker, dict(zip(u.column("unit_id").to_pylist(), u.column("text").to_pylist())))
        step.add_rows(rows)
        step.verdict(CHUNK_FRAGMENTS_REPRODUCE_TEXT, pk, fragments_reproduce_text(rows, u))
        step.verdict(CHUNK_IDS_ARE_UNIQUE, pk, ids_unique(rows, "chunk_id"))
        step.partition_metadata(
            pk, {"rows": rows.num_rows, "digest": _digest(rows.column("text").to_pylist()), "chunker": chunker})
    yield from step.finish()


@dg.asset(
    **asset_args("lexical_documents"),
    description="Folded chunk text for the word and substring indexes (built at activation).",
)
def lexical_documents(context: dg.AssetExecutionContext, fabric: FabricHomeResource):
    step = PartitionStep(context, fabric.open(), "lexical_documents")
    chunk_rows_ = step.read("chunks", columns=["parse_id", "chunk_id", "text"])
    docs = lexical_rows(chunk_rows_)
    step.add_rows(docs)
    step.write()
    for (pk, wanted), (_, written) in zip(step.by_parse(chunk_rows_), step.by_parse(docs)):
        want = wanted.column("chunk_id").to_pylist()
        got = written.column("chunk_id").to_pylist()
        # The digest of the documents written: activation compares it with the one its release
        # indexed, so an active parse re-chunked in place (same parse ID) is re-indexed.
        step.verdict(ONE_LEXICAL_DOCUMENT_PER_CHUNK, pk,
                     {**counts_consistent(want, got, "lexical documents"), "digest": _digest(sorted(got))})
    step.run_metadata({"rows": docs.num_rows})
    yield from step.finish()
