"""ColBERT late interaction (MaxSim) as a scoring stage over the fused candidate pool.

MaxSim keys are ColBERT window IDs (seed 003, "MaxSim"): each fused chunk candidate maps to
the ColBERT windows that contain it and takes its *best* window score, never a sum. Document
matrices are read from the release's ``colbert_matrices`` table at the version its manifest
records, only for the windows the pool needs; the chunk → window map of a parse is read from
``colbert_windows`` once per release and cached here.

As a pipeline stage (:data:`MAXSIM`) it runs when ``late_interaction.enabled``, over the first
``max(late_interaction.candidate_pool, limit)`` fused candidates.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pyarrow.compute as pc

from fabric_query.release import ProjectionUnavailable, ReleaseView, guarded_read
from fabric_query.stages.base import Rescored
from fabric_resources.models.colbert import shared_colbert_encoder

if TYPE_CHECKING:
    from fabric_query.context import QueryContext


def maxsim(query: np.ndarray, doc: np.ndarray) -> float:
    """Late-interaction score of one document for one query.

    ``sum_i max_j <query[i], doc[j]>`` (Khattab & Zaharia, "ColBERT", SIGIR 2020, eq. 3). With
    L2-normalised rows (as Fabric stores them) each dot product is a cosine similarity.

    Parameters
    ----------
    query
        ``(q, d)`` float array, one row per query token.
    doc
        ``(t, d)`` float array, one row per document token, ``t ≥ 1``.

    Returns
    -------
    float
        The score (float32 products, summed in float64); ``0.0`` for ``q = 0``.

    Raises
    ------
    ValueError
        If either is not 2-D, the widths differ, or ``doc`` has no rows.

    >>> q = np.array([[1.0, 0.0], [0.0, 1.0]]); d = np.array([[1.0, 0.0], [0.5, 0.75]])
    >>> maxsim(q, d)  # row 1: max(1, 0.5); row 2: max(0, 0.75)
    1.75
    """
    q, d = _as_matrix(query, "query"), _as_matrix(doc, "doc")
    if q.shape[1] != d.shape[1]:
        raise ValueError(f"width mismatch: query {q.shape}, doc {d.shape}")
    if d.shape[0] == 0:
        raise ValueError("doc has no token rows")
    if q.shape[0] == 0:
        return 0.0
    return float((q @ d.T).max(axis=1).sum(dtype=np.float64))


def maxsim_many(query: np.ndarray, docs: list[np.ndarray]) -> np.ndarray:
    """:func:`maxsim` of one query against each of ``docs`` with one matrix product.

    Returns ``(len(docs),) float64``, ``out[k] == maxsim(query, docs[k])`` up to float32 rounding.

    Raises
    ------
    ValueError
        As :func:`maxsim`, for any of ``docs``.
    """
    q = _as_matrix(query, "query")
    if not docs:
        return np.zeros(0, dtype=np.float64)
    mats = [_as_matrix(d, f"doc {k}") for k, d in enumerate(docs)]
    for k, d in enumerate(mats):
        if d.shape[1] != q.shape[1]:
            raise ValueError(f"width mismatch: query {q.shape}, doc {k} {d.shape}")
        if d.shape[0] == 0:
            raise ValueError(f"doc {k} has no token rows")
    if q.shape[0] == 0:
        return np.zeros(len(mats), dtype=np.float64)
    sims = q @ np.concatenate(mats).T  # (q, total tokens)
    starts = np.cumsum([0] + [d.shape[0] for d in mats[:-1]])
    return np.maximum.reduceat(sims, starts, axis=1).sum(axis=0, dtype=np.float64)


def _as_matrix(a: np.ndarray, what: str) -> np.ndarray:
    m = np.asarray(a, dtype=np.float32)
    if m.ndim != 2:
        raise ValueError(f"{what} must be 2-D, got shape {m.shape}")
    return m


class MaxSimScore(NamedTuple):
    """One candidate after the stage. ``score`` and ``window_id`` are ``None`` for a candidate
    that was not scored (outside the pool, or no ColBERT matrix for any of its windows)."""

    chunk_id: str
    score: float | None
    window_id: str | None


def maxsim_rerank(
    view: ReleaseView,
    query_matrix: np.ndarray,
    candidates: list[str],
    pool: int,
    *,
    model: str | None = None,
) -> list[MaxSimScore]:
    """Re-order the first ``pool`` fused candidates by their best ColBERT-window MaxSim score.

    Each candidate chunk maps to the ColBERT windows of the release that contain it; each window
    is scored once (:func:`maxsim`) and the chunk takes the maximum over its windows, never the
    sum (seed 003, "MaxSim").

    Parameters
    ----------
    view
        The pinned release: ``colbert_windows`` and ``colbert_matrices`` are read at the versions
        in ``view.release.manifest["tables"]``.
    query_matrix
        ``(q, 128) float32``, L2-normalised rows (``ColbertEncoder.encode_query``).
    candidates
        Unique chunk IDs in fused order, best first.
    pool
        How many leading candidates are rescored (``late_interaction.candidate_pool``).
    model
        When given, matrices recorded under another model identity are treated as missing
        (scoring a query of one checkpoint against matrices of another would be meaningless).

    Returns
    -------
    list[MaxSimScore]
        Every candidate exactly once: first the scored pool candidates, best score first, ties by
        fused order; then the pool candidates with no matrix (no window, window not embedded,
        late interaction disabled at ingest, other model) in fused order, with ``score`` and
        ``window_id`` ``None``; then the candidates beyond ``pool``, unchanged and unscored.
        ``window_id`` is the best window (ties: smallest window ID).

    Raises
    ------
    ValueError
        If ``pool`` is negative or ``query_matrix`` is not 2-D.
    """
    if pool < 0:
        raise ValueError(f"pool must be >= 0, got {pool}")
    q = _as_matrix(query_matrix, "query_matrix")
    head, tail = candidates[:pool], candidates[pool:]
    windows_of = _windows_of(view, head)
    needed = sorted({w for ws in windows_of.values() for w in ws})
    matrices = _load_matrices(view, needed, model)
    scored_ids = [w for w in needed if w in matrices]
    scores = dict(zip(scored_ids, maxsim_many(q, [matrices[w] for w in scored_ids]).tolist()))

    scored: list[tuple[float, int, MaxSimScore]] = []
    unscored: list[MaxSimScore] = []
    for rank, cid in enumerate(head):
        best: tuple[float, str] | None = None
        for w in windows_of.get(cid, ()):  # sorted window IDs: the first of equal scores wins
            s = scores.get(w)
            if s is not None and (best is None or s > best[0]):
                best = (s, w)
        if best is None:
            unscored.append(MaxSimScore(cid, None, None))
        else:
            scored.append((-best[0], rank, MaxSimScore(cid, best[0], best[1])))
    scored.sort(key=lambda x: (x[0], x[1]))
    return [s for _, _, s in scored] + unscored + [MaxSimScore(c, None, None) for c in tail]


# ---------------------------------------------------------------------------
# Release-pinned reads
# ---------------------------------------------------------------------------

_HEX = re.compile(r"[0-9a-f]{16,64}")

#: Chunk → sorted window IDs, per (home root, release id), per parse. Bounded like release views.
_MAPS: OrderedDict[tuple[str, int], dict[str, dict[str, tuple[str, ...]]]] = OrderedDict()
_MAPS_LOCK = threading.Lock()
MAX_CACHED_RELEASES = 4


def _release_key(view: ReleaseView) -> tuple:
    # As ReleaseView.cache_key: a restricted view of a release is another view.
    return (str(view.home.root), view.release_id, getattr(view, "hidden", frozenset()))


def _windows_of(view: ReleaseView, chunk_ids: list[str]) -> dict[str, tuple[str, ...]]:
    """Windows containing each of ``chunk_ids`` (absent: none), from the parses they belong to."""
    parse_of = {}
    for cid in chunk_ids:
        i = view.chunk_index.get(cid)
        if i is not None:
            parse_of[cid] = view.chunk_parse_ids[i]
    key = _release_key(view)
    with _MAPS_LOCK:
        per_parse = _MAPS.setdefault(key, {})
        _MAPS.move_to_end(key)
        while len(_MAPS) > MAX_CACHED_RELEASES:
            _MAPS.popitem(last=False)
        missing = sorted(set(parse_of.values()) - set(per_parse))
    if missing:
        loaded = _read_chunk_windows(view, missing)
        with _MAPS_LOCK:
            per_parse.update(loaded)
    out = {}
    for cid, pid in parse_of.items():
        ws = per_parse.get(pid, {}).get(cid)
        if ws:
            out[cid] = ws
    return out


def _read_chunk_windows(view: ReleaseView, parse_ids: list[str]) -> dict[str, dict[str, tuple[str, ...]]]:
    version = view.release.manifest["tables"].get("colbert_windows")
    out: dict[str, dict[str, list[str]]] = {p: {} for p in parse_ids}
    if version is None:
        return {}  # caches nothing: the release has no windows table
    t = guarded_read("colbert_windows", lambda: view.home.tables.read(
        "colbert_windows", parse_ids=parse_ids, version=version, columns=["parse_id", "window_id", "chunk_ids"]))
    for pid, wid, cids in zip(t.column("parse_id").to_pylist(), t.column("window_id").to_pylist(),
                              t.column("chunk_ids").to_pylist()):
        for cid in cids:
            out[pid].setdefault(cid, []).append(wid)
    return {p: {c: tuple(sorted(ws)) for c, ws in m.items()} for p, m in out.items()}


def _load_matrices(view: ReleaseView, window_ids: list[str], model: str | None) -> dict[str, np.ndarray]:
    """``window_id → (t, 128) float32`` for those of ``window_ids`` the pinned table holds."""
    version = view.release.manifest["tables"].get("colbert_matrices")
    if version is None or not window_ids or not view.home.tables.exists("colbert_matrices"):
        return {}
    for w in window_ids:
        if not _HEX.fullmatch(w):  # window IDs are hex digests; nothing else reaches a filter
            raise ValueError(f"not a window ID: {w!r}")
    listed = ", ".join(f"'{w}'" for w in window_ids)
    # TableStore.read filters by parse only; a window filter keeps the read to the pool's windows.
    t = guarded_read("colbert_matrices", lambda: view.home.tables.dataset("colbert_matrices", version).to_table(
        columns=["window_id", "matrix", "model"], filter=f"window_id IN ({listed})"))
    if model is not None and t.num_rows:
        t = t.filter(pc.equal(t.column("model"), model))
    if not t.num_rows:
        return {}
    col = t.column("matrix").combine_chunks()
    lengths = col.value_lengths().to_numpy(zero_copy_only=False)
    flat = col.flatten().flatten().to_numpy(zero_copy_only=False)
    width = col.type.value_type.list_size
    rows = flat.reshape(-1, width).astype(np.float32, copy=False)
    bounds = np.cumsum(lengths)[:-1]
    pairs = zip(t.column("window_id").to_pylist(), np.split(rows, bounds))
    return {w: m for w, m in pairs if m.shape[0]}  # an empty matrix cannot be scored: treated as missing


class MaxSimStage:
    """:func:`maxsim_rerank` with the configured ColBERT checkpoint, as a rescoring stage."""

    name = "maxsim"
    candidates_key = "maxsim"

    def applies(self, ctx: "QueryContext") -> bool:
        return ctx.config.late_interaction.enabled

    def run(self, ctx: "QueryContext", ranked: list[str]) -> Rescored:
        late = ctx.config.late_interaction
        colbert = shared_colbert_encoder(late.checkpoint, ctx.config.indexing.colbert_max_tokens,
                                         late.query_max_tokens)
        try:
            scored = maxsim_rerank(ctx.view, colbert.encode_query(ctx.parsed.positive_text), ranked,
                                   max(late.candidate_pool, ctx.limit), model=colbert.identity)
        except ProjectionUnavailable as exc:
            return Rescored(ranked, skipped=exc.describe())
        return Rescored([m.chunk_id for m in scored],
                        {m.chunk_id: m.score for m in scored if m.score is not None},
                        [(m.chunk_id, m.score) for m in scored if m.score is not None])


MAXSIM = MaxSimStage()
