"""Fine chunks → dense vectors (all-MiniLM-L6-v2), batched across the run's documents."""


import time

import dagster as dg
import numpy as np
import pyarrow as pa

from fabric_assets.gate import vectors_finite_unit_norm
from fabric_assets.partitions import PARTITIONED
from fabric_assets.verdicts import live_parse_ids, record_and_summarise
from fabric_resources.dagster_resources import FabricHomeResource
from fabric_resources.schema import CHUNK_VECTORS, DENSE_DIM


def passage_input(section_path: list[str] | tuple[str, ...], text: str) -> str:
    """Model input for a chunk: the innermost section title (model input only) and the text."""
    return f"{section_path[-1]}\n{text}" if section_path else text


@dg.asset(
    **PARTITIONED,
    deps=["chunks"],
    group_name="projections",
    code_version="dense-v1",
    check_specs=[dg.AssetCheckSpec("vectors_are_finite_and_unit_norm", asset="chunk_vectors")],
    description="One L2-normalised 384-d vector per fine chunk; rows record the model identity.",
)
def chunk_vectors(context: dg.AssetExecutionContext, fabric: FabricHomeResource):
    home = fabric.open()
    embedder = fabric.embedder()
    keys = list(context.partition_keys)
    live = live_parse_ids(home, keys)
    chunks = home.tables.read("chunks", parse_ids=live, columns=["parse_id", "chunk_id", "text", "section_path"])
    d = chunks.to_pydict()
    started = time.perf_counter()
    vectors = embedder.encode_passages([passage_input(sp, t) for sp, t in zip(d["section_path"], d["text"])])
    encode_s = time.perf_counter() - started
    rows = pa.table(
        {
            "parse_id": d["parse_id"],
            "chunk_id": d["chunk_id"],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), DENSE_DIM),
            "model": [embedder.identity] * len(d["chunk_id"]),
        },
        schema=CHUNK_VECTORS,
    )
    version = home.tables.replace_partitions("chunk_vectors", keys, rows)
    pids = np.array(d["parse_id"], dtype=object)
    verdicts = {}
    for pk in live:
        mask = pids == pk
        verdicts[pk] = vectors_finite_unit_norm(vectors[mask])
        context.add_asset_metadata({"rows": int(mask.sum()), "model": embedder.identity}, partition_key=pk)
    yield dg.MaterializeResult(
        metadata={
            "lance_version": version,
            "texts_encoded": len(d["chunk_id"]),
            "encode_seconds": round(encode_s, 3),
            "texts_per_second": round(len(d["chunk_id"]) / encode_s, 1) if encode_s > 0 else 0.0,
        }
    )
    yield record_and_summarise(home, "vectors_are_finite_and_unit_norm", "chunk_vectors", verdicts)
