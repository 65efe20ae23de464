"""Section-guided dense retrieval: the direct dense ranking merged with a context-window route.

Seed 003, query pipeline "Channels": the query vector shortlists context windows; each
nominates its best member chunks; the direct and section-guided lists merge by equal-weight
RRF into one dense ranking whose provenance keeps both routes and the window's section path.
"""

from __future__ import annotations

from typing import Literal, TypedDict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fabric_query.channels import ChannelResult, ranked
from fabric_query.channels.dense import dense_channel
from fabric_query.fusion import rrf
from fabric_query.release import ReleaseView

Route = Literal["direct", "section"]


class DenseProvenance(TypedDict):
    """How one chunk of the merged dense ranking was found.

    ``routes`` lists the routes that found it (``"direct"`` before ``"section"``);
    ``direct_rank`` / ``section_rank`` are its 1-based ranks in each (``None`` if absent);
    ``window_id`` / ``window_section_path`` name the context window that nominated it
    (``None`` unless the section route found it).
    """

    routes: tuple[Route, ...]
    direct_rank: int | None
    section_rank: int | None
    window_id: str | None
    window_section_path: tuple[str, ...] | None


def section_route(
    view: ReleaseView,
    query_vector: np.ndarray,
    eligible: set[str] | None,
    table: str = "chunk_vectors",
    candidate_limit: int = 20,
    per_window: int = 2,
) -> list[tuple[str, float, int]]:
    """Chunks nominated by the context windows nearest the query.

    The ``candidate_limit`` eligible windows with the highest cosine between ``query_vector``
    (``(384,) float32``, unit norm, from the model that wrote ``table``) and the window vector
    (:meth:`ReleaseView.window_vectors`) are shortlisted, best first, ties by window ID. Each
    nominates up to ``per_window`` of its own member chunks that have a vector in ``table``,
    by chunk cosine (ties by chunk ID). Ineligible parses are masked before any ranking.

    Returns
    -------
    list of ``(chunk_id, chunk_cosine, window_row)``: windows in shortlist order, each window's
    nominees best first; ``window_row`` indexes ``view.context_windows``. Empty when the
    release has no context windows.
    """
    wv = view.window_vectors(table)
    if wv.matrix.shape[0] == 0:
        return []
    q = query_vector.astype(np.float32)
    scores = wv.matrix @ q
    if eligible is not None:
        admitted = pc.is_in(view.context_windows.column("parse_id"), value_set=pa.array(sorted(eligible), pa.string()))
        scores = np.where(admitted.to_numpy(zero_copy_only=False)[wv.rows], scores, -np.inf)
    window_ids = view.context_windows.column("window_id")
    k = min(candidate_limit, len(scores))
    # A margin of 32 past the cut lets exact ties at the cut break by window ID (as dense_channel does).
    pool = np.argpartition(-scores, min(k + 32, len(scores)) - 1)[: k + 32]
    shortlist = ranked(
        [(window_ids[int(wv.rows[i])].as_py(), float(scores[i])) for i in pool if np.isfinite(scores[i])], k
    )
    slot_of = {window_ids[int(wv.rows[i])].as_py(): int(i) for i in pool}
    vs = view.vector_set(table)
    chunk_ids = view.chunks.column("chunk_id")
    out: list[tuple[str, float, int]] = []
    for wid, _ in shortlist:
        i = slot_of[wid]
        members = wv.members[wv.offsets[i]:wv.offsets[i + 1]]
        cos = vs.matrix[members] @ q
        nominees = ranked([(chunk_ids[int(vs.rows[m])].as_py(), float(s)) for m, s in zip(members, cos)], per_window)
        out.extend((cid, s, int(wv.rows[i])) for cid, s in nominees)
    return out


def section_guided_dense(
    view: ReleaseView,
    query_vector: np.ndarray,
    eligible: set[str] | None,
    depth: int,
    table: str = "chunk_vectors",
    candidate_limit: int = 20,
    per_window: int = 2,
    rrf_k: int = 60,
) -> tuple[ChannelResult, dict[str, DenseProvenance]]:
    """One dense ranking from the direct route (:func:`dense_channel`) and :func:`section_route`.

    The two chunk lists merge by equal-weight RRF (:func:`fabric_query.fusion.rrf`, constant
    ``rrf_k``, total tie-break) and are cut to ``depth``. Defaults are ``QueryConfig``'s.

    Returns
    -------
    ranking : list of ``(chunk_id, rrf_score)``, best first, at most ``depth``.
    provenance : chunk ID → :class:`DenseProvenance`, for every chunk in ``ranking``.
    """
    direct = dense_channel(view, query_vector, eligible, depth, table)
    section = section_route(view, query_vector, eligible, table, candidate_limit, per_window)
    direct_ids = [cid for cid, _ in direct]
    section_ids = [cid for cid, _, _ in section]
    merged = rrf({"direct": direct_ids, "section": section_ids}, k=rrf_k)[:depth]
    direct_rank = {cid: r for r, cid in enumerate(direct_ids, start=1)}
    section_at = {cid: (r, row) for r, (cid, _, row) in enumerate(section, start=1)}
    windows = view.context_windows
    provenance: dict[str, DenseProvenance] = {}
    for cid, _ in merged:
        s = section_at.get(cid)
        routes: tuple[Route, ...] = tuple(
            name for name, found in (("direct", cid in direct_rank), ("section", s is not None)) if found
        )
        provenance[cid] = DenseProvenance(
            routes=routes,
            direct_rank=direct_rank.get(cid),
            section_rank=s[0] if s else None,
            window_id=windows.column("window_id")[s[1]].as_py() if s else None,
            window_section_path=tuple(windows.column("section_path")[s[1]].as_py() or ()) if s else None,
        )
    return merged, provenance
