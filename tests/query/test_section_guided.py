"""Section-guided dense retrieval (fabric_query.channels.dense) over a hand-built release:
real Lance tables and a real ``ReleaseView``, chunk vectors chosen so the expected answer is
known. No model and no Dagster run.

Geometry (query = e0): parse A has one context window of four chunks, each only weakly about
the query (cosine 0.36-0.41) but off in different directions, so their mean points at the query
(cosine 0.64); a fifth member has no vector. Parse B has three windows of four chunks that are
each more about the query (cosine 0.45-0.52) but lean the same way within a window, so their
window vectors stay at 0.46-0.51. Alone, A's chunks rank below all twelve of B's.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from fabric_assets.chunking.windows import Window, WindowMember, window_rows
from fabric_query.channels.dense import dense_channel, section_guided_dense, section_route, window_smoothed_dense
from fabric_query.release import ReleaseView
from fabric_resources.catalog import Release
from fabric_resources.home import FabricHome
from fabric_resources.identity import text_hash
from fabric_resources.schema import CHUNK_VECTORS, CHUNKS, DENSE_DIM

A, B = "aa" * 16, "bb" * 16
DIM = DENSE_DIM


def unit(*pairs: tuple[int, float]) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    for axis, value in pairs:
        v[axis] = value
    return v / np.linalg.norm(v)


QUERY = unit((0, 1.0))
# parse A: window "a-main" = a0..a4 (a4 has no vector); window "a-empty" = a5 (no vector).
A_VECTORS = {f"a{i}": unit((0, w), (1 + i, 1.0)) for i, w in enumerate([0.45, 0.42, 0.40, 0.38])}
A_WINDOWS = [("Tides", ["a0", "a1", "a2", "a3", "a4"]), ("Appendix", ["a5"])]
# parse B: window j = b{j}_0..b{j}_3, all leaning towards axis 10 + j.
B_VECTORS = {f"b{j}_{k}": unit((0, 0.5 + 0.01 * (4 * j + k)), (10 + j, 1.0)) for j in range(3) for k in range(4)}
B_WINDOWS = [(f"Boats {j}", [f"b{j}_{k}" for k in range(4)]) for j in range(3)]


def _write_parse(home: FabricHome, pid: str, windows, vectors: dict[str, np.ndarray]) -> None:
    ordinal, chunk_rows, members = 0, [], []
    for section, ids in windows:
        run = []
        for cid in ids:
            text = f"chunk {cid}"
            frag = {"unit_id": f"u-{cid}", "start_char": 0, "end_char": len(text), "start_utf16": 0,
                    "end_utf16": len(text)}
            chunk_rows.append({"parse_id": pid, "chunk_id": cid, "ordinal": ordinal, "text": text,
                               "text_hash": text_hash(text), "fragments": [frag], "section_path": [section],
                               "token_count": 3, "chunker": "fine-test"})
            run.append(WindowMember(cid, ordinal, text, (frag,), (section,), 3))
            ordinal += 1
        members.append(Window(len(members), tuple(run)))
    home.tables.replace_partitions("chunks", [pid], pa.Table.from_pylist(chunk_rows, schema=CHUNKS))
    home.tables.replace_partitions("context_windows", [pid], window_rows(pid, members, "context", "context-test"))
    ids = sorted(vectors)
    home.tables.replace_partitions("chunk_vectors", [pid], pa.table(
        {"parse_id": [pid] * len(ids), "chunk_id": ids,
         "vector": pa.FixedSizeListArray.from_arrays(pa.array(np.stack([vectors[i] for i in ids]).reshape(-1)), DIM),
         "model": ["test"] * len(ids)}, schema=CHUNK_VECTORS))


def _view(home: FabricHome, release_id: int, tables: list[str]) -> ReleaseView:
    manifest = {
        "sources": {f"fs:t/{p}.txt": {"parse_id": p, "media_type": "text/plain"} for p in (A, B)},
        "tables": {name: home.tables.version(name) for name in tables},
    }
    return ReleaseView(home, Release(release_id=release_id, created_at=0.0, manifest=manifest))


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> FabricHome:
    h = FabricHome(tmp_path_factory.mktemp("section") / "home")
    _write_parse(h, A, A_WINDOWS, A_VECTORS)
    _write_parse(h, B, B_WINDOWS, B_VECTORS)
    return h


@pytest.fixture(scope="module")
def view(home) -> ReleaseView:
    return _view(home, 1, ["chunks", "chunk_vectors", "context_windows"])


def _window_id(view: ReleaseView, section: str) -> str:
    d = view.context_windows.to_pydict()
    return next(w for w, sp in zip(d["window_id"], d["section_path"]) if sp == [section])


def test_window_vectors_are_normalised_means_of_members_with_vectors(view):
    wv = view.window_vectors("chunk_vectors")
    windows = view.context_windows.to_pydict()
    # "a-empty" has no member with a vector, so no window vector.
    assert [windows["section_path"][r] for r in wv.rows] == [["Tides"], ["Boats 0"], ["Boats 1"], ["Boats 2"]]
    for i, r in enumerate(wv.rows):
        vecs = [v for c in windows["chunk_ids"][r] if (v := {**A_VECTORS, **B_VECTORS}.get(c)) is not None]
        mean = np.mean(vecs, axis=0)
        np.testing.assert_allclose(wv.matrix[i], mean / np.linalg.norm(mean), atol=1e-6)
    assert view.window_vectors("chunk_vectors") is wv, "computed once per view"


def test_section_route_finds_chunks_that_rank_low_alone(view):
    """guards against: ranking windows by their best chunk instead of their mean vector, and
    nominating members without a vector."""
    direct_all = [c for c, _ in dense_channel(view, QUERY, None, 100)]
    assert direct_all.index("a0") >= 12, "alone, every A chunk ranks below all of B's"
    section = section_route(view, QUERY, None, "chunk_vectors", candidate_limit=2, per_window=2)
    assert [c for c, _, _ in section] == ["a0", "a1", "b2_3", "b2_2"]
    everything = section_route(view, QUERY, None, "chunk_vectors", candidate_limit=1, per_window=10)
    assert [c for c, _, _ in everything] == ["a0", "a1", "a2", "a3"], "a4 has no vector"

    ranking, provenance = section_guided_dense(view, QUERY, None, 6, "chunk_vectors", 2, 2, 60)
    assert [c for c, _ in ranking] == ["b2_3", "b2_2", "a0", "a1", "b2_1", "b2_0"]
    assert provenance["a0"] == {"routes": ("section",), "direct_rank": None, "section_rank": 1,
                                "window_id": _window_id(view, "Tides"), "window_section_path": ("Tides",)}
    assert provenance["b2_3"]["routes"] == ("direct", "section")
    assert (provenance["b2_3"]["direct_rank"], provenance["b2_3"]["section_rank"]) == (1, 3)
    assert provenance["b2_3"]["window_section_path"] == ("Boats 2",)
    assert provenance["b2_1"]["routes"] == ("direct",) and provenance["b2_1"]["window_id"] is None
    assert set(provenance) == {c for c, _ in ranking}


def test_window_mix_lifts_the_chunks_of_a_window_that_matches_as_a_whole(view):
    """guards against: the window's cosine taken from another window or from its best member
    instead of the mean, members without a vector entering the ranking, or weight 0 not being the
    plain direct ranking."""
    assert window_smoothed_dense(view, QUERY, None, 100, 0.0) == dense_channel(view, QUERY, None, 100)
    wv = view.window_vectors("chunk_vectors")
    members = view.context_windows.column("chunk_ids").to_pylist()
    window_cos = {c: float(wv.matrix[i] @ QUERY) for i, r in enumerate(wv.rows) for c in members[r]}
    vectors = {**A_VECTORS, **B_VECTORS}
    for weight in (0.25, 0.5, 1.0):
        mixed = window_smoothed_dense(view, QUERY, None, 100, weight)
        want = sorted(((c, (1 - weight) * float(v @ QUERY) + weight * window_cos[c]) for c, v in vectors.items()),
                      key=lambda p: (-p[1], p[0]))
        assert [c for c, _ in mixed] == [c for c, _ in want], weight
        assert np.allclose([s for _, s in mixed], [s for _, s in want], rtol=0, atol=1e-6)
    mixed = [c for c, _ in window_smoothed_dense(view, QUERY, None, 100, 0.5)]
    plain = [c for c, _ in dense_channel(view, QUERY, None, 100)]
    assert plain.index("a0") >= 12 and mixed[0] == "a0", "A's window points at the query"
    only_b = window_smoothed_dense(view, QUERY, {B}, 100, 0.5)
    assert {c[0] for c, _ in only_b} == {"b"} and len(only_b) == 12, "filters hold before the mix"


def test_merged_ranking_is_equal_weight_rrf_of_the_two_routes(view):
    from fabric_query.fusion import rrf

    for depth, limit, per in ((6, 2, 2), (3, 4, 1), (30, 3, 3)):
        ranking, _ = section_guided_dense(view, QUERY, None, depth, "chunk_vectors", limit, per, 10)
        direct = [c for c, _ in dense_channel(view, QUERY, None, depth)]
        section = [c for c, _, _ in section_route(view, QUERY, None, "chunk_vectors", limit, per)]
        assert ranking == rrf({"direct": direct, "section": section}, k=10)[:depth]


def test_filters_apply_before_the_shortlist(view):
    """guards against: shortlisting windows first and filtering after, which leaves an eligible
    parse with no section nominations when an ineligible window is nearer the query."""
    ranking, provenance = section_guided_dense(view, QUERY, {B}, 6, "chunk_vectors", 1, 2, 60)
    assert ranking and all(c.startswith("b") for c, _ in ranking)
    assert any("section" in p["routes"] for p in provenance.values())
    assert {p["window_section_path"] for p in provenance.values() if p["window_id"]} == {("Boats 2",)}

    ranking, provenance = section_guided_dense(view, QUERY, {A}, 6, "chunk_vectors", 1, 2, 60)
    assert [c for c, _ in ranking] == ["a0", "a1", "a2", "a3"]
    assert provenance["a0"]["routes"] == ("direct", "section")
    assert section_guided_dense(view, QUERY, set(), 6, "chunk_vectors", 2, 2, 60) == ([], {})


def test_release_without_context_windows_gives_direct_only(home):
    view = _view(home, 2, ["chunks", "chunk_vectors"])
    assert view.context_windows.num_rows == 0
    assert section_route(view, QUERY, None, "chunk_vectors", 5, 2) == []
    ranking, provenance = section_guided_dense(view, QUERY, None, 5, "chunk_vectors", 5, 2, 60)
    assert [c for c, _ in ranking] == [c for c, _ in dense_channel(view, QUERY, None, 5)]
    assert all(p["routes"] == ("direct",) for p in provenance.values())
    # A table with no vectors at all: both routes empty.
    assert section_guided_dense(view, QUERY, None, 5, "chunk_vectors_multilingual", 5, 2, 60) == ([], {})


@pytest.mark.parametrize("value,problem", [
    ("0.5", "valid number"), (True, "valid number"), (float("nan"), "finite number"), (2, "less than or equal to 1"),
    (-1, "greater than or equal to 0"),
])
def test_the_window_weight_takes_a_number_in_0_1_and_nothing_that_merely_converts_to_one(tmp_path, value, problem):
    """guards against: a string or a boolean silently taken as a weight (``true`` became 1.0), and
    NaN refused with a message about the upper bound (fresh-user trial, 2026-12-04)."""
    import json

    from fabric_resources.config import ConfigError, FabricConfig

    path = tmp_path / "config.json"
    for key in ("dense_window_weight", "dense_window_weight_multilingual"):
        path.write_text(json.dumps({"query": {key: value}}))
        with pytest.raises(ConfigError, match=problem):
            FabricConfig.load(path)
    path.write_text(json.dumps({"query": {"dense_window_weight": 1}}))
    assert FabricConfig.load(path).query.dense_window_weight == 1.0
