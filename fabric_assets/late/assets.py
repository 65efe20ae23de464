"""ColBERT windows → ColBERT document matrices (``colbert_matrices``), one per window.

The encoder comes from the ``colbert`` resource (the checkpoint of ``late_interaction.checkpoint``);
the document limit is ``indexing.colbert_max_tokens``. The model input of a window is its section path joined by
" / ", a blank line, then its text; when that would exceed the document limit the prefix is
dropped (seed 003, "Grains" and "Context windows"). The prefix is never stored. Rows carry
the model identity (checkpoint weights fingerprint and document limit).

With ``late_interaction.enabled`` false (the default) the asset is in no job (``jobs``) and is
*skipped* in Dagster — no materialization — by the ``colbert_windows`` step, or by its own step
when selected by hand (``PartitionStep.skip``): a passing gate verdict with detail ``disabled`` per
parse (activation reads it), PyLate never imported, no rows written: matrices an earlier, enabled
run left for the run's parses are removed (their windows may have been re-cut since), and with
none there is no new table version.
"""

import time
from collections.abc import Callable, Sequence

import dagster as dg
import numpy as np
import pyarrow as pa

from fabric_assets.gate import Verdict, counts_consistent, vectors_finite_unit_norm
from fabric_assets.partition_step import PartitionStep, optional_asset_args
from fabric_assets.projections import COLBERT_MATRICES_ARE_FINITE_AND_COMPLETE as CHECK
from fabric_resources.dagster_resources import ColbertEncoderResource, FabricHomeResource
from fabric_resources.models.colbert import ColbertOutputError
from fabric_resources.schema import COLBERT_DIM

#: Joins the section path in the model input prefix.
SECTION_SEPARATOR = " / "


def window_inputs(
    section_paths: Sequence[Sequence[str]],
    texts: Sequence[str],
    count_tokens: Callable[[list[str]], list[int]],
    max_tokens: int,
) -> tuple[list[str], int]:
    """Model inputs of windows and how many dropped their section-path prefix.

    ``input = " / ".join(section_path) + "\\n\\n" + text`` when the path is non-empty and
    ``count_tokens([input])`` ≤ ``max_tokens``; otherwise the bare text.
    """
    inputs = list(texts)
    prefixed = {i: f"{SECTION_SEPARATOR.join(p)}\n\n{t}" for i, (p, t) in enumerate(zip(section_paths, texts)) if p}
    order = sorted(prefixed)
    dropped = 0
    for i, n in zip(order, count_tokens([prefixed[i] for i in order])):
        if n <= max_tokens:
            inputs[i] = prefixed[i]
        else:
            dropped += 1
    return inputs, dropped


def matrices_finite_and_complete(window_ids: list[str], matrix_window_ids: list[str],
                                 matrices: list[np.ndarray]) -> Verdict:
    """One matrix per window (no missing, extra or duplicate), each ``(t ≥ 1, 128)``, every row
    finite with unit L2 norm (``gate.NORM_TOLERANCE``)."""
    complete = counts_consistent(window_ids, matrix_window_ids, "matrices")
    if not complete["passed"]:
        return complete
    bad_shape = sum(1 for m in matrices if m.ndim != 2 or m.shape[0] == 0 or m.shape[1] != COLBERT_DIM)
    if bad_shape:
        return {"passed": False, "detail": f"{bad_shape} matrices empty or not {COLBERT_DIM} wide"}
    rows = vectors_finite_unit_norm(np.concatenate(matrices) if matrices else np.zeros((0, COLBERT_DIM)))
    if not rows["passed"]:
        return rows
    return {"passed": True, "detail": f"{len(matrices)} matrices, {sum(len(m) for m in matrices)} rows"}


def _matrix_column(matrices: list[np.ndarray]) -> pa.Array:
    flat = np.concatenate(matrices).reshape(-1) if matrices else np.zeros(0, np.float32)
    rows = pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), COLBERT_DIM)
    offsets = np.concatenate([[0], np.cumsum([len(m) for m in matrices])]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), rows)


@dg.multi_asset(**optional_asset_args(
    "colbert_matrices", "ColBERT token matrices ((tokens, 128) float32, unit rows) of each ColBERT window; "
    "skipped (not materialized) unless late_interaction is enabled."))
def colbert_matrices(context: dg.AssetExecutionContext, fabric: FabricHomeResource, colbert: ColbertEncoderResource):
    step = PartitionStep(context, fabric.open(), "colbert_matrices")
    if not step.enabled:  # selected by hand (no job plans it while it is off): PartitionStep.skip
        step.skip()
        return

    encoder = colbert.encoder(step.config)
    windows = step.read("colbert_windows", columns=["parse_id", "window_id", "ordinal", "text", "section_path"])
    windows = windows.sort_by([("parse_id", "ascending"), ("ordinal", "ascending")]).to_pydict()
    by_parse: dict[str, list[int]] = {}
    for i, pid in enumerate(windows["parse_id"]):
        by_parse.setdefault(pid, []).append(i)

    out = {"parse_id": [], "window_id": [], "matrices": []}
    encode_s, encoded, dropped_total, truncated_total = 0.0, 0, 0, 0
    for pk in step.live:
        idx = by_parse.get(pk, [])
        ids = [windows["window_id"][i] for i in idx]
        inputs, dropped = window_inputs([windows["section_path"][i] for i in idx],
                                        [windows["text"][i] for i in idx],
                                        encoder.document_token_counts, encoder.document_length)
        truncated = sum(n > encoder.document_length for n in encoder.document_token_counts(inputs))
        started = time.perf_counter()
        try:
            matrices = encoder.encode_documents(inputs)
        except ColbertOutputError as exc:  # a bad output holds this parse, not the whole run
            step.verdict(CHECK, pk, {"passed": False, "detail": f"encoder output refused: {exc}"})
            continue
        encode_s += time.perf_counter() - started
        encoded += len(ids)
        dropped_total += dropped
        truncated_total += truncated
        # encode_documents keeps order and count
        step.verdict(CHECK, pk, matrices_finite_and_complete(ids, ids, matrices))
        out["parse_id"] += [pk] * len(matrices)
        out["window_id"] += ids
        out["matrices"] += matrices
        step.partition_metadata(pk, {"rows": len(matrices), "model": encoder.identity, "prefix_dropped": dropped,
                                     "truncated": truncated})

    step.add_rows(pa.table(
        {
            "parse_id": pa.array(out["parse_id"], pa.string()),
            "window_id": pa.array(out["window_id"], pa.string()),
            "matrix": _matrix_column(out["matrices"]),
            "token_count": pa.array([len(m) for m in out["matrices"]], pa.int32()),
            "model": pa.array([encoder.identity] * len(out["matrices"]), pa.string()),
        },
    ))
    step.run_metadata({
        "enabled": True,
        "model": encoder.identity,
        "windows_encoded": encoded,
        "prefix_dropped": dropped_total,
        "truncated": truncated_total,
        "encode_seconds": round(encode_s, 3),
        "ms_per_window": round(1000 * encode_s / encoded, 2) if encoded else 0.0,
    })
    yield from step.finish()
