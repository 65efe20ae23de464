"""Dense vector feedback (issue 19, ``query.dense_feedback_weight``): the MiniLM dense channel's second
pass searches from Rocchio's moved query vector, the feedback documents being the best ones of the
plain RRF of the first pass's channel rankings. Real ingest, real MiniLM, real release."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import ingest
from pydantic import ValidationError

from fabric_query import Fabric
from fabric_query.channels.dense import dense_channel
from fabric_query.channels.dense_feedback import feedback_chunks, moved_vector
from fabric_query.release import release_view
from fabric_resources.config import QueryConfig
from fabric_resources.home import FabricHome

FILES = {
    "light.txt": "The lighthouse keeper logged the tide every evening.\n\n"
                 "A storm broke the lamp of the lighthouse in March; the keeper mended it with brass.\n\n"
                 "Ships passing the cape signalled their thanks with three short horn blasts.\n",
    "harbour.txt": "The harbour master counted the fishing boats at dusk.\n\n"
                   "Fog over the harbour hid the beacon, and the boats waited at anchor.\n",
    "bread.txt": "Sourdough bread needs a lively starter and patience.\n\n"
                 "The oven must be very hot, and the crust should crackle as it cools.\n",
    "bees.txt": "Honey bees dance to tell the hive where the flowers are.\n\n"
                "A strong colony stores honey for the winter in wax combs.\n",
    "garden/roses.txt": "Roses need sun, rich soil and water at the roots.\n\n"
                        "Prune the roses in late winter, above an outward-facing bud.\n",
    "garden/bees-garden.txt": "Bees visit the lavender and the roses in the garden all summer.\n",
}
QUERIES = ["lighthouse lamp storm", "bees honey flowers", "oven crust", "boats in the fog", "roses winter",
           "ships signalled thanks"]
#: At 1.0 the moved vector reorders the dense ranking of the last two queries over this corpus (checked
#: below): with the vector left unmoved their second pass would differ from the expected ranking.
WEIGHT = 1.0


def _home_with(root, weight: float, documents: int = 3) -> Fabric:
    FabricHome(root).layout.config_file.write_text(json.dumps(
        {"query": {"dense_feedback_weight": weight, "dense_feedback_documents": documents}}))
    return Fabric(root)


@pytest.fixture(scope="module")
def home_root(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dense-feedback")
    folder = tmp / "corpus"
    for rel, text in FILES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    ingest(folder, FabricHome(tmp / "home"))
    return tmp / "home"


def test_feedback_chunks_are_each_documents_best_chunk_in_plain_rrf_order():
    """guards against: two chunks of one document both feeding back, feedback taken from one channel
    only, or chunks outside the release counted."""
    parse = {"a1": "A", "a2": "A", "b1": "B", "c1": "C", "d1": "D"}
    rankings = {"word": ["a1", "b1", "a2", "c1"], "dense": ["c1", "a2", "gone", "d1"]}
    # RRF k 60: c1 (1/64 + 1/61 = .03202), a2 (1/63 + 1/62 = .03200), a1 (1/61), b1 (1/62), d1 (1/64)
    assert feedback_chunks(rankings, parse.get, 3) == ["c1", "a2", "b1"]
    assert feedback_chunks(rankings, parse.get, 10) == ["c1", "a2", "b1", "d1"]
    assert feedback_chunks({"dense": ["c1", "a2", "d1"]}, parse.get, 2) == ["c1", "a2"]


def test_moved_vector_is_rocchio_and_unit_norm():
    q = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    f = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32)
    got = moved_vector(q, f, 1.0)
    assert got.dtype == np.float32 and np.isclose(np.linalg.norm(got), 1.0)
    assert np.allclose(got, np.array([1.0, 0.5, 0.5]) / np.linalg.norm([1.0, 0.5, 0.5]))
    assert np.allclose(moved_vector(q, f, 0.0), q)
    assert np.allclose(moved_vector(q, -q[None, :], 1.0), q)  # a zero sum leaves the query as it was


def test_the_weight_and_document_count_are_strict():
    for bad in (-0.1, "0.5", float("nan"), 5.0):
        with pytest.raises(ValidationError):
            QueryConfig(dense_feedback_weight=bad)
    for bad in (0, "3", 51):
        with pytest.raises(ValidationError):
            QueryConfig(dense_feedback_documents=bad)
    assert QueryConfig().dense_feedback_documents == 3


@pytest.mark.parametrize("query", QUERIES)
def test_the_second_pass_searches_from_the_moved_vector_of_the_first_pass_documents(home_root, query):
    """guards against: feedback documents chosen from the dense ranking alone (or after the weighted
    fusion), vectors of the wrong window, the query vector left unmoved, or the moved vector used for
    anything but the dense channel (the word ranking must not change)."""
    plain = _home_with(home_root, 0.0).search(query, debug=True)
    fabric = _home_with(home_root, WEIGHT)
    fed = fabric.search(query, debug=True)
    assert plain.dense_feedback == () and plain.channel_rankings["word"]
    view = release_view(fabric.home, fabric.home.catalog.current_release())
    index, parse_ids = view.chunk_index, view.chunk_parse_ids
    want = feedback_chunks(plain.channel_rankings, lambda c: str(parse_ids[index[c]]), 3)
    assert list(fed.dense_feedback) == want and len(want) == 3
    wv = view.window_vectors("chunk_vectors")
    q = fabric.encoder.encode_queries([query])[0]
    moved = moved_vector(q, np.stack([wv.matrix[wv.slot_of_chunk[index[c]]] for c in want]), WEIGHT)
    expected = [c for c, _ in dense_channel(view, moved, None, fabric.home.config.query.channel_depth)]
    assert list(fed.channel_rankings["dense"]) == expected
    assert fed.channel_rankings["word"] == plain.channel_rankings["word"]
    assert not np.allclose(moved, q)
    assert any("dense" in h.channels for h in fed.results)


@pytest.mark.parametrize("query", ["roses winter", "ships signalled thanks"])
def test_feedback_moves_the_dense_ranking(home_root, query):
    """guards against: a second pass that searches from the query's own vector (the ranking would
    not move, and the test above could not tell)."""
    plain = _home_with(home_root, 0.0).search(query, debug=True)
    fed = _home_with(home_root, WEIGHT).search(query, debug=True)
    assert fed.dense_feedback and fed.channel_rankings["dense"][:5] != plain.channel_rankings["dense"][:5]


def test_no_lexical_match_means_no_feedback(home_root):
    """guards against: the dense channel fed back its own neighbours when no query word occurs
    anywhere (feedback would then only drift further from the query)."""
    plain = _home_with(home_root, 0.0).search("zzqxv wqzzk", debug=True)
    fed = _home_with(home_root, WEIGHT).search("zzqxv wqzzk", debug=True)
    assert fed.no_lexical_match and fed.dense_feedback == ()
    assert fed.channel_rankings["dense"] == plain.channel_rankings["dense"]


def test_a_lexical_match_without_a_minilm_vector_never_lets_dense_neighbours_feed_back(tmp_path):
    """guards against (a review of 2026-12-04): an English word matched in a Japanese document (routed
    to e5, so it has no MiniLM vector) counting as the lexical match, while the feedback vectors all
    came from the dense channel's own neighbours; and such a document taking a feedback slot."""
    folder = tmp_path / "corpus"
    (folder / "ja").mkdir(parents=True)
    (folder / "ja" / "tokyo.txt").write_text(
        "東京の灯台守は毎晩ランプに火をともし、嵐の夜も光を絶やさなかった。港の船は Tokyo の灯りを頼りにした。\n",
        encoding="utf-8")
    for rel in ("bees.txt", "harbour.txt", "bread.txt"):
        (folder / rel).write_text(FILES[rel], encoding="utf-8")
    ingest(folder, FabricHome(tmp_path / "home"))
    fabric = _home_with(tmp_path / "home", WEIGHT)
    view = release_view(fabric.home, fabric.home.catalog.current_release())
    vectors = view.vector_set("chunk_vectors")
    with_vector = {view.chunks.column("chunk_id")[int(r)].as_py() for r in vectors.rows}
    alone = fabric.search("Tokyo", debug=True)
    assert alone.channel_rankings["word"] and not set(alone.channel_rankings["word"]) & with_vector
    assert alone.dense_feedback == ()  # the only lexical match has no MiniLM vector: nothing fed back
    both = fabric.search("Tokyo honey bees", debug=True)
    assert both.dense_feedback and set(both.dense_feedback) <= with_vector
    assert len(both.dense_feedback) == 3  # the Japanese document passed over, not a slot lost


def test_filters_hold_in_the_second_pass(home_root):
    """guards against: the second pass searching the whole release (a filtered-out document brought
    back by the moved vector)."""
    fabric = _home_with(home_root, WEIGHT)
    pack = fabric.search("bees roses path:garden/", debug=True)
    assert pack.dense_feedback and pack.results
    view = release_view(fabric.home, fabric.home.catalog.current_release())
    allowed = {meta["parse_id"] for key, meta in view.sources.items() if "/garden/" in key}
    index, parse_ids = view.chunk_index, view.chunk_parse_ids
    for cid in (*pack.dense_feedback, *pack.channel_rankings["dense"], *(h.chunk_id for h in pack.results)):
        assert str(parse_ids[index[cid]]) in allowed


def test_the_dense_floor_still_measures_the_query_itself(home_root):
    """guards against: the below-floor mark computed from the moved vector, which the feedback
    documents pull towards every hit (the floor was calibrated on the query's own cosines)."""
    plain = _home_with(home_root, 0.0).search("lighthouse lamp storm")
    fed = _home_with(home_root, 4.0).search("lighthouse lamp storm")
    floor_of = {h.chunk_id: h.below_dense_floor for h in plain.results}
    common = [h for h in fed.results if h.chunk_id in floor_of]
    assert common and all(h.below_dense_floor == floor_of[h.chunk_id] for h in common)


def test_bench_query_times_the_feedback_stage_and_writes_its_json(home_root, tmp_path):
    """guards against: the second pass's cost hidden in another stage, or ``--json-out`` ignored on
    ``--home`` (it printed the JSON and wrote nothing)."""
    from typer.testing import CliRunner

    from fabric_assets.cli import app

    _home_with(home_root, WEIGHT)
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(app, ["bench", "query", "--home", str(home_root), "--repeat", "1",
                                      "--json-out", str(out), "lighthouse lamp storm", "roses winter"])
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())
    assert json.loads(result.stdout) == written and written["runs"] == 2
    assert written["stages_ms"]["dense_feedback"]["p50"] > 0
