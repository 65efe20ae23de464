"""Fine chunks → dense vectors, batched across the run's documents, one model per chunk.

Each chunk goes to the model its text needs (``language_routing``): Latin-script
text to all-MiniLM-L6-v2 (``chunk_vectors``), CJK and other non-Latin text to
multilingual-e5-small (``chunk_vectors_multilingual``). The models come from the
``dense`` and ``multilingual`` resources. Rows record the model identity; a model
change changes the asset's code version. A chunk whose model input the release
already serves for the file's previous version, under the same model identity,
keeps that vector (:func:`served_vectors`); only new inputs are encoded.
"""

import hashlib
import time

import dagster as dg
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fabric_assets.gate import vectors_finite_unit_norm
from fabric_assets.partition_step import PartitionStep, asset_args
from fabric_assets.projections import VECTOR_DIGEST_VERDICTS
from fabric_resources.dagster_resources import DenseEncoderResource, FabricHomeResource, MultilingualEncoderResource
from fabric_resources.home import FabricHome
from fabric_resources.language_routing import needs_multilingual
from fabric_resources.models.embedder import Encoder
from fabric_resources.schema import CHUNK_VECTORS, DENSE_DIM
from fabric_resources.vector_digest import EMPTY_PARSE_DIGEST, parse_digests


def passage_input(section_path: list[str] | tuple[str, ...], text: str) -> str:
    """Model input for a chunk: the innermost section title (model input only) and the text."""
    return f"{section_path[-1]}\n{text}" if section_path else text


def routed_to_multilingual(home: FabricHome, text: str) -> bool:
    return home.config.dense.multilingual and needs_multilingual(text)


def _input_key(model_input: str) -> bytes:
    return hashlib.sha256(model_input.encode("utf-8", "surrogatepass")).digest()


def served_vectors(home: FabricHome, table: str, parse_ids: list[str], identity: str,
                   wanted: set[bytes]) -> dict[bytes, np.ndarray]:
    """The vectors the current release serves in ``table`` for the sources of ``parse_ids`` (their
    previous versions' parses), by the SHA-256 of their model input (:func:`passage_input`), for
    rows of model ``identity`` whose input key is in ``wanted`` only: what an edit of a long file
    can reuse instead of encoding every unchanged chunk again. Read at the versions the release
    pins, whose rows passed their gate, batch by batch: what is held is at most one vector per
    wanted key, never the previous version's whole table (trial 11b's file had 135k chunks)."""
    release = home.catalog.current_release()
    if release is None or not parse_ids or not wanted:
        return {}
    keys = {s.source_key for s in home.catalog.sources(parse_ids=parse_ids)}
    served = {m["parse_id"] for k, m in release.manifest["sources"].items() if k in keys} - set(parse_ids)
    pinned = release.manifest["tables"]
    if not served or pinned.get(table) is None or pinned.get("chunks") is None:
        return {}
    key_of: dict[str, bytes] = {}
    for batch in home.tables.read_batches("chunks", parse_ids=served, version=pinned["chunks"],
                                          columns=["chunk_id", "text", "section_path"]):
        d = batch.to_pydict()
        for cid, text, path in zip(d["chunk_id"], d["text"], d["section_path"]):
            key = _input_key(passage_input(path, text))
            if key in wanted:
                key_of[cid] = key
    if not key_of:
        return {}
    found: dict[bytes, np.ndarray] = {}
    chunk_ids = pa.array(sorted(key_of), pa.string())
    for batch in home.tables.read_batches(table, parse_ids=served, version=pinned[table],
                                          columns=["chunk_id", "vector", "model"]):
        batch = batch.filter(pc.and_(pc.equal(batch.column("model"), identity),
                                     pc.is_in(batch.column("chunk_id"), chunk_ids)))
        if not batch.num_rows:
            continue
        matrix = batch.column("vector").flatten().to_numpy(zero_copy_only=False).reshape(-1, DENSE_DIM)
        for i, cid in enumerate(batch.column("chunk_id").to_pylist()):
            found.setdefault(key_of[cid], matrix[i].copy())
    return found


def _embed_partitions(step: PartitionStep, embedder: Encoder, multilingual: bool):
    table = step.projections[0].key
    chunks = step.read("chunks", columns=["parse_id", "chunk_id", "text", "section_path"])
    d = chunks.to_pydict()
    keep = [i for i, t in enumerate(d["text"]) if routed_to_multilingual(step.home, t) == multilingual]
    pids = [d["parse_id"][i] for i in keep]
    ids = [d["chunk_id"][i] for i in keep]
    inputs = [passage_input(d["section_path"][i], d["text"][i]) for i in keep]
    # An edited file's unchanged chunks keep the vectors the release serves for its previous
    # version: the same model input under the same model identity is the same function value, and
    # encoding every chunk of a long file again for a one-line edit cost minutes (trial 11b).
    input_keys = [_input_key(t) for t in inputs]
    reusable = served_vectors(step.home, table, step.live, embedder.identity, set(input_keys))
    reused = [reusable.get(k) for k in input_keys]
    todo = [j for j, v in enumerate(reused) if v is None]
    started = time.perf_counter()
    vectors = np.empty((len(inputs), DENSE_DIM), dtype=np.float32)
    if todo:
        vectors[todo] = embedder.encode_passages([inputs[j] for j in todo])
    for j, vector in enumerate(reused):
        if vector is not None:
            vectors[j] = vector
    encode_s = time.perf_counter() - started
    rows = pa.table(
        {
            "parse_id": pids,
            "chunk_id": ids,
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), DENSE_DIM),
            "model": [embedder.identity] * len(ids),
        },
        schema=CHUNK_VECTORS,
    )
    step.add_rows(rows)
    step.write()
    pid_array = np.array(pids, dtype=object)
    # The digest of exactly the float32 rows written: activation binds it into the release, and the
    # query side recomputes it from what it reads (fabric_resources.vector_digest).
    written = rows.column("vector").combine_chunks().flatten().to_numpy().reshape(-1, DENSE_DIM)
    digests = parse_digests(pids, ids, rows.column("model"), written)
    for pk in step.live:
        mask = pid_array == pk
        step.verdict(VECTOR_DIGEST_VERDICTS[table], pk,
                     {**vectors_finite_unit_norm(vectors[mask]), "digest": digests.get(pk, EMPTY_PARSE_DIGEST)})
        step.partition_metadata(pk, {"rows": int(mask.sum()), "model": embedder.identity})
    step.run_metadata({
        "texts_encoded": len(todo),
        "vectors_reused": len(ids) - len(todo),
        "encode_seconds": round(encode_s, 3),
        "texts_per_second": round(len(todo) / encode_s, 1) if encode_s > 0 and todo else 0.0,
    })
    yield from step.finish()


# The model identity enters the code version (projections.Identity.DENSE): a model change marks
# exactly this asset (and annotation_vectors) stale.
@dg.asset(
    **asset_args("chunk_vectors"),
    description="all-MiniLM-L6-v2 vectors (384-d, unit norm) of the Latin-script fine chunks.",
)
def chunk_vectors(context: dg.AssetExecutionContext, fabric: FabricHomeResource, dense: DenseEncoderResource):
    step = PartitionStep(context, fabric.open(), "chunk_vectors")
    encoder = dense.encoder(step.config)
    if hasattr(encoder, "smoke_check"):
        # An HTTP endpoint is validated once per run before any partition is written (seed 003 §10).
        encoder.smoke_check()
    yield from _embed_partitions(step, encoder, False)


@dg.asset(
    **asset_args("chunk_vectors_multilingual"),
    description="multilingual-e5-small vectors (384-d, unit norm) of CJK and other non-Latin fine chunks.",
)
def chunk_vectors_multilingual(context: dg.AssetExecutionContext, fabric: FabricHomeResource,
                               multilingual: MultilingualEncoderResource):
    step = PartitionStep(context, fabric.open(), "chunk_vectors_multilingual")
    yield from _embed_partitions(step, multilingual.encoder(step.config), True)
