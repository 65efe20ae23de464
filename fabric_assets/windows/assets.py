"""Fine chunks → context windows and ColBERT windows, per parse partition.

Both grains are pure repackings of the ``chunks`` rows (``fabric_assets.chunking.windows``):
no model runs here. Each asset records a per-parse coverage verdict that the gate requires.
"""

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from fabric_assets.chunking.windows import WindowGrain, WindowPackingError, build_windows
from fabric_assets.gate import windows_cover_chunks
from fabric_assets.partitions import PARTITIONED
from fabric_assets.verdicts import live_parse_ids, record_and_summarise
from fabric_resources.config import colbert_window_cap
from fabric_resources.dagster_resources import FabricHomeResource
from fabric_resources.home import FabricHome
from fabric_resources.schema import WINDOWS

_CHUNK_COLUMNS = ["parse_id", "chunk_id", "ordinal", "text", "fragments", "section_path", "token_count", "chunker"]


def _window_partitions(context: dg.AssetExecutionContext, home: FabricHome, grain: WindowGrain, table: str,
                       max_tokens: int, check: str):
    keys = list(context.partition_keys)
    live = live_parse_ids(home, keys)
    chunks = home.tables.read("chunks", parse_ids=live, columns=_CHUNK_COLUMNS)
    ratio = home.config.indexing.min_fill_ratio
    tables, verdicts = [], {}
    for pk in live:
        mine = chunks.filter(pc.equal(chunks.column("parse_id"), pk))
        try:
            rows = build_windows(pk, mine, grain, max_tokens, ratio)
        except WindowPackingError as exc:
            # A config/chunker fault, not bad input: this parse is held with the reason; the
            # run's other parses go on.
            rows = WINDOWS.empty_table()
            verdicts[pk] = {"passed": False, "detail": str(exc)}
        else:
            verdicts[pk] = windows_cover_chunks(rows, mine, max_tokens)
        tables.append(rows)
        policy = rows.column("policy")[0].as_py() if rows.num_rows else None
        context.add_asset_metadata(
            {"rows": rows.num_rows, "chunks": mine.num_rows, "policy": policy or "",
             "max_window_tokens": max(rows.column("token_count").to_pylist(), default=0)},
            partition_key=pk,
        )
    out = pa.concat_tables(tables) if tables else WINDOWS.empty_table()
    version = home.tables.replace_partitions(table, keys, out)
    yield dg.MaterializeResult(metadata={"lance_version": version, "rows": out.num_rows})
    yield record_and_summarise(home, check, table, verdicts)


@dg.asset(
    **PARTITIONED,
    deps=["chunks"],
    group_name="projections",
    code_version="context-windows-v1",
    check_specs=[dg.AssetCheckSpec("context_windows_cover_chunks", asset="context_windows")],
    description="Runs of whole fine chunks under indexing.context_max_tokens (section-guided dense).",
)
def context_windows(context: dg.AssetExecutionContext, fabric: FabricHomeResource):
    home = fabric.open()
    yield from _window_partitions(context, home, "context", "context_windows",
                                  home.config.indexing.context_max_tokens, "context_windows_cover_chunks")


@dg.asset(
    **PARTITIONED,
    deps=["chunks"],
    group_name="projections",
    code_version="colbert-windows-v1",
    check_specs=[dg.AssetCheckSpec("colbert_windows_cover_chunks", asset="colbert_windows")],
    description="Runs of whole fine chunks under indexing.colbert_max_tokens less ColBERT's document "
                "markers (MaxSim keys).",
)
def colbert_windows(context: dg.AssetExecutionContext, fabric: FabricHomeResource):
    home = fabric.open()
    yield from _window_partitions(context, home, "colbert", "colbert_windows",
                                  colbert_window_cap(home.config), "colbert_windows_cover_chunks")
