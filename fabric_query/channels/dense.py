"""The dense channels: exact cosine search over one vector table of the release."""

from __future__ import annotations

import numpy as np

from fabric_query.channels import ChannelResult, ranked
from fabric_query.release import ReleaseView


def dense_channel(
    view: ReleaseView, query_vector: np.ndarray, eligible: set[str] | None, depth: int, table: str = "chunk_vectors"
) -> ChannelResult:
    """``query_vector``: ``(384,) float32`` unit-norm, from the model that wrote ``table``.

    Only chunks with a vector in ``table`` are candidates; ineligible chunks never enter the ranking.
    """
    vs = view.vector_set(table)
    if vs.matrix.shape[0] == 0:
        return []
    scores = vs.matrix @ query_vector.astype(np.float32)
    if eligible is not None:
        pids = view.chunk_parse_ids[vs.rows]
        scores = np.where(np.fromiter((p in eligible for p in pids), dtype=bool, count=len(scores)), scores, -np.inf)
    k = min(depth + 32, len(scores))
    top = np.argpartition(-scores, k - 1)[:k]
    ids = view.chunks.column("chunk_id")
    return ranked([(ids[int(vs.rows[i])].as_py(), float(scores[i])) for i in top if np.isfinite(scores[i])], depth)


def vector_models(view: ReleaseView, table: str) -> frozenset[str]:
    """Model identities recorded on the view's rows of ``table`` (loaded once per view).

    A query vector is only comparable with vectors of the same model; the pipeline skips the
    channel with a named reason when these differ from its query encoder's identity.

    Raises
    ------
    fabric_query.release.ProjectionUnavailable
        The table cannot serve (unreadable, or its rows do not match the release's digest).
    """
    return view.vector_set(table).models
