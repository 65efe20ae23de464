"""Tests for ColBERT MaxSim scoring (fabric_query.stages.maxsim): the formula, agreement with
LanceDB's own multivector search, and the window-keyed rerank stage over hand-built tables."""

from __future__ import annotations

from types import SimpleNamespace

import lancedb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from fabric_query.stages.maxsim import MaxSimScore, maxsim, maxsim_many, maxsim_rerank
from fabric_resources.catalog import Release
from fabric_resources.home import FabricHome
from fabric_resources.identity import derived_id
from fabric_resources.schema import COLBERT_DIM, WINDOWS

_FLOATS = st.floats(-4, 4, allow_nan=False, allow_infinity=False, width=32)


def _brute(q: np.ndarray, d: np.ndarray) -> float:
    total = 0.0
    for i in range(q.shape[0]):
        best = -np.inf
        for j in range(d.shape[0]):
            best = max(best, float(sum(float(a) * float(b) for a, b in zip(q[i], d[j]))))
        total += best
    return total


@st.composite
def _pair(draw):
    width = draw(st.integers(1, 6))
    q = draw(arrays(np.float32, (draw(st.integers(0, 5)), width), elements=_FLOATS))
    d = draw(arrays(np.float32, (draw(st.integers(1, 7)), width), elements=_FLOATS))
    return q, d


@settings(max_examples=200, deadline=None)
@given(_pair())
def test_maxsim_equals_double_loop(pair):
    """guards against: summing over document rows, max over query rows, mean instead of sum,
    or a transposed product (Khattab & Zaharia 2020, eq. 3)."""
    q, d = pair
    assert maxsim(q, d) == pytest.approx(_brute(q, d), rel=1e-4, abs=1e-3)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5), st.lists(st.integers(1, 6), min_size=1, max_size=6), st.integers(0, 2**32 - 1))
def test_maxsim_many_equals_maxsim(q_rows, doc_rows, seed):
    """guards against: reduceat segment boundaries off by one (a token scored against the
    neighbouring document)."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(q_rows, 8)).astype(np.float32)
    docs = [rng.normal(size=(n, 8)).astype(np.float32) for n in doc_rows]
    np.testing.assert_allclose(maxsim_many(q, docs), [maxsim(q, d) for d in docs], rtol=1e-5, atol=1e-5)


def test_maxsim_hand_value_and_errors():
    """guards against: silently scoring mismatched widths or an empty document."""
    q = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert maxsim(q, np.array([[1.0, 0.0], [0.6, 0.8]])) == pytest.approx(1.8)
    assert maxsim(np.zeros((0, 2)), np.ones((1, 2))) == 0.0
    with pytest.raises(ValueError):
        maxsim(q, np.ones((2, 3)))
    with pytest.raises(ValueError):
        maxsim(q, np.zeros((0, 2)))
    with pytest.raises(ValueError):
        maxsim(np.ones(2), np.ones((1, 2)))


def _unit_rows(a: np.ndarray) -> np.ndarray:
    return (a / np.linalg.norm(a, axis=1, keepdims=True)).astype(np.float32)


def test_maxsim_ranks_like_lancedb_multivector(tmp_path):
    """guards against: a MaxSim that disagrees with LanceDB's native multivector search (the
    store the matrices live in). For unit rows LanceDB's cosine distance is q - MaxSim."""
    rng = np.random.default_rng(7)
    docs = [_unit_rows(rng.normal(size=(int(rng.integers(2, 12)), COLBERT_DIM))) for _ in range(20)]
    q = _unit_rows(rng.normal(size=(6, COLBERT_DIM)))
    schema = pa.schema([pa.field("id", pa.int32()), pa.field("matrix", pa.list_(pa.list_(pa.float32(), COLBERT_DIM)))])
    db = lancedb.connect(str(tmp_path / "db"))
    table = db.create_table("m", data=pa.table({"id": list(range(len(docs))), "matrix": [d.tolist() for d in docs]},
                                               schema=schema))
    got = table.search(q, vector_column_name="matrix").distance_type("cosine").limit(len(docs)).to_arrow()
    ours = [maxsim(q, d) for d in docs]
    assert got["id"].to_pylist() == sorted(range(len(docs)), key=lambda i: -ours[i])
    np.testing.assert_allclose(got["_distance"].to_numpy(), [q.shape[0] - ours[i] for i in got["id"].to_pylist()],
                               atol=1e-4)


# ---------------------------------------------------------------------------
# maxsim_rerank over hand-built release tables
# ---------------------------------------------------------------------------

PARSE = derived_id("parse", 1)
MODEL = "colbert:test#000000000000:doc256"


def _doc_with_score(score: float, rows: int = 3) -> np.ndarray:
    """A matrix whose best row has cosine ``score`` with e0 (other rows lower)."""
    m = np.zeros((rows, COLBERT_DIM), np.float32)
    for r in range(rows):
        s = score - 0.1 * r
        m[r, 0], m[r, 1 + r] = s, np.sqrt(1 - s * s)
    return m


def _query() -> np.ndarray:
    q = np.zeros((1, COLBERT_DIM), np.float32)
    q[0, 0] = 1.0
    return q


def _window_rows(windows: dict[str, list[str]]) -> pa.Table:
    n = len(windows)
    return pa.table({
        "parse_id": [PARSE] * n, "window_id": list(windows), "ordinal": list(range(n)),
        "chunk_ids": list(windows.values()), "text": ["t"] * n, "text_hash": ["h"] * n,
        "fragments": [[] for _ in range(n)], "section_path": [[] for _ in range(n)],
        "token_count": [1] * n, "policy": ["p"] * n,
    }, schema=WINDOWS)


def _matrix_rows(matrices: dict[str, np.ndarray], model: str = MODEL) -> pa.Table:
    return pa.table({
        "parse_id": [PARSE] * len(matrices), "window_id": list(matrices),
        "matrix": [m.tolist() for m in matrices.values()],
        "token_count": [len(m) for m in matrices.values()], "model": [model] * len(matrices),
    })


def _view(home: FabricHome, chunk_ids: list[str], release_id: int = 1):
    """The attributes maxsim_rerank reads from a ReleaseView, pinned to the current versions."""
    manifest = {"tables": {n: home.tables.version(n) for n in ("colbert_windows", "colbert_matrices")}}
    return SimpleNamespace(
        home=home, release=Release(release_id, 0.0, manifest), release_id=release_id,
        chunk_index={c: i for i, c in enumerate(chunk_ids)}, chunk_parse_ids=np.array([PARSE] * len(chunk_ids)),
    )


def _ids(*names: str) -> list[str]:
    return [derived_id(n) for n in names]


def test_chunk_in_two_windows_takes_best_window_not_sum(tmp_path):
    """guards against: summing a chunk's window scores. Chunk c lies in windows A (0.8) and
    B (0.6); chunk d only in C (0.9). Best window: d (0.9) before c (0.8); a sum (1.4) would put
    c first."""
    home = FabricHome(tmp_path / "home")
    c, d = _ids("c", "d")
    wa, wb, wc = _ids("A", "B", "C")
    home.tables.replace_partitions("colbert_windows", [PARSE], _window_rows({wa: [c], wb: [c], wc: [d]}))
    home.tables.replace_partitions("colbert_matrices", [PARSE], _matrix_rows(
        {wa: _doc_with_score(0.8), wb: _doc_with_score(0.6), wc: _doc_with_score(0.9)}))
    out = maxsim_rerank(_view(home, [c, d]), _query(), [c, d], pool=2)
    assert [r.chunk_id for r in out] == [d, c]
    assert out[0] == MaxSimScore(d, pytest.approx(0.9), wc)
    assert out[1].score == pytest.approx(0.8) and out[1].window_id == wa


def test_order_ties_unscored_and_tail(tmp_path):
    """guards against: losing fused order on ties, dropping or re-ranking candidates without a
    matrix, touching candidates beyond the pool, and reading matrices newer than the release."""
    home = FabricHome(tmp_path / "home")
    a, b, e, f, g, h = _ids("a", "b", "e", "f", "g", "h")
    w1, w2, w3 = _ids("w1", "w2", "w3")
    # a and b share w1 (a tie); e is in w2 (better); f's window w3 has no matrix; g is unknown
    # to the windows table; h is beyond the pool although its window scores best.
    home.tables.replace_partitions("colbert_windows", [PARSE],
                                   _window_rows({w1: [a, b], w2: [e], w3: [f, h]}))
    home.tables.replace_partitions("colbert_matrices", [PARSE],
                                   _matrix_rows({w1: _doc_with_score(0.5), w2: _doc_with_score(0.7)}))
    view = _view(home, [a, b, e, f, g, h])
    # A later write (a newer table version than the release pins) must not be read.
    home.tables.replace_partitions("colbert_matrices", [PARSE], _matrix_rows(
        {w1: _doc_with_score(0.5), w2: _doc_with_score(0.7), w3: _doc_with_score(0.99)}))
    fused = [b, f, a, g, e, h]
    out = maxsim_rerank(view, _query(), fused, pool=5)
    assert [r.chunk_id for r in out] == [e, b, a, f, g, h]
    assert [r.score is None for r in out] == [False, False, False, True, True, True]
    assert out[1].score == out[2].score
    assert maxsim_rerank(view, _query(), fused, pool=0) == [MaxSimScore(c, None, None) for c in fused]
    assert sorted(r.chunk_id for r in maxsim_rerank(view, _query(), fused, pool=100)) == sorted(fused)


def test_matrices_of_another_model_are_not_scored(tmp_path):
    """guards against: scoring a query of one checkpoint against matrices stored by another."""
    home = FabricHome(tmp_path / "home")
    a, b = _ids("a", "b")
    w1, w2 = _ids("w1", "w2")
    home.tables.replace_partitions("colbert_windows", [PARSE], _window_rows({w1: [a], w2: [b]}))
    rows = pa.concat_tables([_matrix_rows({w1: _doc_with_score(0.2)}),
                             _matrix_rows({w2: _doc_with_score(0.9)}, model="colbert:other#1:doc256")])
    home.tables.replace_partitions("colbert_matrices", [PARSE], rows)
    view = _view(home, [a, b])
    assert [r.chunk_id for r in maxsim_rerank(view, _query(), [a, b], pool=2)] == [b, a]
    out = maxsim_rerank(view, _query(), [a, b], pool=2, model=MODEL)
    assert out == [MaxSimScore(a, pytest.approx(0.2), w1), MaxSimScore(b, None, None)]


def test_release_without_colbert_tables_keeps_fused_order(tmp_path):
    """guards against: failing, or reordering, when the release has no ColBERT data."""
    home = FabricHome(tmp_path / "home")
    a, b = _ids("a", "b")
    view = _view(home, [a, b])
    assert view.release.manifest["tables"] == {"colbert_windows": None, "colbert_matrices": None}
    assert maxsim_rerank(view, _query(), [a, b], pool=2) == [MaxSimScore(a, None, None), MaxSimScore(b, None, None)]


def test_docstring_examples():
    """guards against: the documented example drifting from the code."""
    import doctest

    import fabric_query.stages.maxsim as module

    assert doctest.testmod(module).failed == 0
