"""The dense channel: exact cosine search over the release's chunk vectors."""

from __future__ import annotations

import numpy as np

from fabric_query.channels import ChannelResult, ranked
from fabric_query.release import ReleaseView


def dense_channel(view: ReleaseView, query_vector: np.ndarray, eligible: set[str] | None, depth: int) -> ChannelResult:
    """``query_vector``: ``(384,) float32`` unit-norm. Ineligible chunks never enter the ranking."""
    vectors = view.vectors
    if vectors.shape[0] == 0:
        return []
    scores = vectors @ query_vector.astype(np.float32)
    if eligible is not None:
        mask = np.fromiter((p in eligible for p in view.chunk_parse_ids), dtype=bool, count=len(scores))
        scores = np.where(mask, scores, -np.inf)
    k = min(depth + 32, len(scores))
    top = np.argpartition(-scores, k - 1)[:k]
    ids = view.chunks.column("chunk_id")
    return ranked([(ids[int(i)].as_py(), float(scores[i])) for i in top if np.isfinite(scores[i])], depth)
