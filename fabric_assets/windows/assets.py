"""Fine chunks → context windows and ColBERT windows, per parse partition.

Both grains are pure repackings of the ``chunks`` rows (``fabric_assets.chunking.windows``):
no model runs here. Each asset records a per-parse coverage verdict that the gate requires.
With a stage made from them switched off (late interaction: ``colbert_matrices``; annotation:
``annotations`` and what is made from it), their step records that stage as skipped for its
partitions (``PartitionStep.finish``), since no job plans it.
"""

import dagster as dg

from fabric_assets.chunking.windows import WindowGrain, WindowPackingError, build_windows
from fabric_assets.gate import windows_cover_chunks
from fabric_assets.partition_step import PartitionStep, asset_args
from fabric_resources.config import colbert_window_cap
from fabric_resources.dagster_resources import FabricHomeResource
from fabric_resources.schema import WINDOWS

_CHUNK_COLUMNS = ["parse_id", "chunk_id", "ordinal", "text", "fragments", "section_path", "token_count", "chunker"]


def _window_partitions(step: PartitionStep, grain: WindowGrain, max_tokens: int):
    (check,) = step.projections[0].check_names
    ratio = step.config.indexing.min_fill_ratio
    for pk, mine in step.by_parse(step.read("chunks", columns=_CHUNK_COLUMNS)):
        try:
            rows = build_windows(pk, mine, grain, max_tokens, ratio)
        except WindowPackingError as exc:
            # A config/chunker fault, not bad input: this parse is held with the reason; the
            # run's other parses go on.
            rows = WINDOWS.empty_table()
            step.verdict(check, pk, {"passed": False, "detail": str(exc)})
        else:
            step.verdict(check, pk, windows_cover_chunks(rows, mine, max_tokens))
        step.add_rows(rows)
        policy = rows.column("policy")[0].as_py() if rows.num_rows else None
        step.partition_metadata(
            pk, {"rows": rows.num_rows, "chunks": mine.num_rows, "policy": policy or "",
                 "max_window_tokens": max(rows.column("token_count").to_pylist(), default=0)})
    step.write()
    step.run_metadata({"rows": step.rows_added()})
    yield from step.finish()


@dg.asset(
    **asset_args("context_windows"),
    description="Runs of whole fine chunks under indexing.context_max_tokens (section-guided dense).",
)
def context_windows(context: dg.AssetExecutionContext, fabric: FabricHomeResource):
    step = PartitionStep(context, fabric.open(), "context_windows")
    yield from _window_partitions(step, "context", step.config.indexing.context_max_tokens)


@dg.asset(
    **asset_args("colbert_windows"),
    description="Runs of whole fine chunks under indexing.colbert_max_tokens less ColBERT's document "
                "markers (MaxSim keys).",
)
def colbert_windows(context: dg.AssetExecutionContext, fabric: FabricHomeResource):
    step = PartitionStep(context, fabric.open(), "colbert_windows")
    yield from _window_partitions(step, "colbert", colbert_window_cap(step.config))
