"""The dense channel's ANN first pass (fabric_query.dense_search) over a hand-built release: real
Lance tables, a real Lance vector index built by activation's own step
(fabric_assets.activation.dense_index), a real ``ReleaseView``; no model and no Dagster run.

40 parses × 10 context windows × 5 chunks, seeded vectors around 30 centres. With every IVF
partition probed and ``refine_factor`` × candidates ≥ rows, Lance re-ranks every row by its stored
vector, so the approximate pass must equal the exact product (recall 1): any difference is a
fault of the plumbing (row mapping, eligibility, re-scoring), not of the approximation.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_assets.activation.dense_index import dense_index_records
from fabric_assets.chunking.windows import Window, WindowMember, window_rows
from fabric_query.channels.dense import dense_channel, section_guided_dense, section_route, window_smoothed_dense
from fabric_query.dense_search import AnnSource, ExactSource, dense_source
from fabric_query.release import ReleaseView
from fabric_resources.catalog import Release
from fabric_resources.config import DenseSearchConfig
from fabric_resources.dense_index import (
    INDEX_NAME,
    META_FILE,
    VECTORS_DATASET,
    DenseIndexStore,
    build_spec,
)
from fabric_resources.home import FabricHome
from fabric_resources.identity import text_hash
from fabric_resources.schema import CHUNK_VECTORS, CHUNKS, DENSE_DIM
from fabric_resources.vector_digest import parse_digests, table_digest

PARSES = [f"{i:04x}" * 8 for i in range(40)]
WINDOWS, PER_WINDOW = 10, 5
ROWS = len(PARSES) * WINDOWS * PER_WINDOW
#: Every partition probed, every row re-ranked by its stored vector: the pass is exhaustive.
EXHAUSTIVE = {"mode": "ann", "partition_rows": 100, "nprobes": 20, "refine_factor": 16}
RNG_SEED = 17


def _centres() -> np.ndarray:
    return np.random.default_rng(RNG_SEED).normal(size=(30, DENSE_DIM)).astype(np.float32)


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def _write_corpus(home: FabricHome) -> None:
    rng = np.random.default_rng(RNG_SEED + 1)
    centres = _centres()
    for pid in PARSES:
        chunk_rows, windows, vectors, ids = [], [], [], []
        ordinal = 0
        for w in range(WINDOWS):
            run = []
            for j in range(PER_WINDOW):
                cid, text = f"{pid[:4]}-{w}-{j}", f"chunk {pid[:4]} {w} {j}"
                frag = {"unit_id": f"u-{cid}", "start_char": 0, "end_char": len(text), "start_utf16": 0,
                        "end_utf16": len(text)}
                chunk_rows.append({"parse_id": pid, "chunk_id": cid, "ordinal": ordinal, "text": text,
                                   "text_hash": text_hash(text), "fragments": [frag], "section_path": [f"s{w}"],
                                   "token_count": 3, "chunker": "fine-test"})
                run.append(WindowMember(cid, ordinal, text, (frag,), (f"s{w}",), 3))
                ordinal += 1
                vectors.append(_unit(centres[rng.integers(len(centres))] + 0.8 * rng.normal(size=DENSE_DIM)))
                ids.append(cid)
            windows.append(Window(len(windows), tuple(run)))
        home.tables.replace_partitions("chunks", [pid], pa.Table.from_pylist(chunk_rows, schema=CHUNKS))
        home.tables.replace_partitions("context_windows", [pid], window_rows(pid, windows, "context", "context-test"))
        home.tables.replace_partitions("chunk_vectors", [pid], pa.table(
            {"parse_id": [pid] * len(ids), "chunk_id": ids,
             "vector": pa.FixedSizeListArray.from_arrays(pa.array(np.stack(vectors).reshape(-1)), DENSE_DIM),
             "model": ["test"] * len(ids)}, schema=CHUNK_VECTORS))


def _configure(home: FabricHome, **dense_search) -> FabricHome:
    home.layout.config_file.write_text(json.dumps({"query": {"dense_search": dense_search}}))
    return FabricHome(home.root)


def _manifest(home: FabricHome, parses=PARSES, hidden=()) -> dict:
    tables = {n: home.tables.version(n) for n in ("chunks", "chunk_vectors", "context_windows",
                                                   "chunk_vectors_multilingual")}
    rows = home.tables.read("chunk_vectors", parse_ids=parses)
    vectors = rows.column("vector").combine_chunks().flatten().to_numpy().reshape(-1, DENSE_DIM)
    digests = {"chunk_vectors": table_digest(parse_digests(rows.column("parse_id"), rows.column("chunk_id"),
                                                           rows.column("model"), vectors), parses)}
    return {"sources": {f"fs:t/{p[:4]}.txt": {"parse_id": p, "media_type": "text/plain"} for p in parses},
            "tables": tables, "vector_digests": digests,
            "dense_indexes": dense_index_records(home, tables, parses, digests)}


def _view(home: FabricHome, manifest: dict, release_id: int = 1, hidden=frozenset()) -> ReleaseView:
    return ReleaseView(home, Release(release_id=release_id, created_at=0.0, manifest=manifest), frozenset(hidden))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The corpus and an exhaustive index over it: (home, manifest)."""
    home = _configure(FabricHome(tmp_path_factory.mktemp("ann") / "home"), **EXHAUSTIVE)
    _write_corpus(home)
    return home, _manifest(home)


@pytest.fixture
def home(built, tmp_path):
    """A private copy of the built home (tests damage it)."""
    src, manifest = built
    copy = tmp_path / "home"
    shutil.copytree(src.root, copy)
    return FabricHome(copy), manifest


def _queries(n: int, seed: int = 5) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = _centres()
    return [_unit(centres[i % len(centres)] + 0.6 * rng.normal(size=DENSE_DIM)) for i in range(n)]


def _sources(home: FabricHome, manifest: dict, hidden=frozenset()):
    view = _view(home, manifest, hidden=hidden)
    source, why = dense_source(view, "chunk_vectors", home.config.query.dense_search)
    assert why is None and isinstance(source, AnnSource)
    return view, source, ExactSource(view, "chunk_vectors")


def test_activation_records_the_index_it_built(built):
    home, manifest = built
    record = manifest["dense_indexes"]["chunk_vectors"]
    assert record["rows"] == ROWS and record["windows"] == len(PARSES) * WINDOWS
    assert record["digest"] == manifest["vector_digests"]["chunk_vectors"]
    assert record["spec"] == build_spec("IVF_RQ", ROWS, 100, 48, 1).as_dict() and record["spec"]["num_partitions"] == 20
    assert manifest["dense_indexes"]["chunk_vectors_multilingual"] == {"generation": None, "rows": 0,
                                                                       "skipped": "too-few-rows"}
    assert home.dense_indexes.generations("chunk_vectors") == [record["generation"]]


def test_ann_pass_equals_the_exact_product_when_exhaustive(built):
    """guards against: ANN candidates mapped to the wrong chunk rows, scores taken from the index's
    approximate distances instead of the stored vectors, or the direct route cut before ties."""
    home, manifest = built
    view, ann, exact = _sources(home, manifest)
    for q in _queries(12):
        got, want = dense_channel(view, q, None, 100, source=ann), dense_channel(view, q, None, 100, source=exact)
        assert [c for c, _ in got] == [c for c, _ in want]
        assert np.allclose([s for _, s in got], [s for _, s in want], rtol=0, atol=1e-6)


def test_section_route_through_the_index_equals_the_exact_route(built):
    """guards against: windows shortlisted by the stored (approximate) centroid score, or members
    taken from another window, on the section-guided route."""
    home, manifest = built
    view, ann, exact = _sources(home, manifest)
    for q in _queries(8, seed=9):
        got, want = section_route(view, q, None, source=ann), section_route(view, q, None, source=exact)
        assert [(c, w) for c, _, w in got] == [(c, w) for c, _, w in want]
        assert np.allclose([s for _, s, _ in got], [s for _, s, _ in want], rtol=0, atol=1e-6)
        assert section_guided_dense(view, q, None, 100, source=ann)[0] == section_guided_dense(
            view, q, None, 100, source=exact)[0]


def test_window_mix_through_the_index_equals_the_exact_mix_and_the_formula(built):
    """guards against: a chunk given another window's cosine (the chunk-row to window mapping of
    either source), the index's stored centroid used instead of the exact one, or a candidate set
    that misses a chunk the formula ranks in the top ``depth`` (checked over every chunk)."""
    home, manifest = built
    view, ann, exact = _sources(home, manifest)
    vs, wv = view.vector_set("chunk_vectors"), view.window_vectors("chunk_vectors")
    rows = [int(r) for r in vs.rows]
    for q in _queries(6, seed=11):
        own = vs.matrix @ q
        window = np.asarray([wv.matrix[wv.slot_of_chunk[r]] @ q for r in rows])
        assert exact.window_cosines(q, rows) == pytest.approx(dict(zip(rows, window.tolist())), abs=1e-6)
        assert ann.window_cosines(q, rows) == pytest.approx(exact.window_cosines(q, rows), abs=1e-6)
        ids = view.chunks.column("chunk_id")
        # depth 1 shortlists 33 of the 400 windows: the best chunks by their own cosine then include
        # some whose window was not shortlisted, which need window_cosines.
        for weight, depth in ((0.3, 60), (0.5, 60), (1.0, 60), (0.3, 1), (0.5, 3)):
            score = (1 - weight) * own + weight * window
            want = sorted(((ids[r].as_py(), float(s)) for r, s in zip(rows, score)),
                          key=lambda p: (-p[1], p[0]))[:depth]
            for source in (exact, ann):
                got = window_smoothed_dense(view, q, None, depth, weight, source=source)
                assert [c for c, _ in got] == [c for c, _ in want]
                assert np.allclose([s for _, s in got], [s for _, s in want], rtol=0, atol=1e-5)
        some = set(PARSES[:3])
        for source in (exact, ann):
            got = window_smoothed_dense(view, q, some, 200, 0.5, source=source)
            assert got and {view.chunk_parse_ids[view.chunk_index[c]] for c, _ in got} <= some


def test_window_vectors_through_the_index_equal_the_exact_centroids(built):
    """guards against (dense feedback's vectors): a chunk given another window's centroid, the
    index's stored (approximate) centroid served instead of the exact one, or a centroid that is
    not the normalised mean of the window's own members."""
    home, manifest = built
    view, ann, exact = _sources(home, manifest)
    vs = view.vector_set("chunk_vectors")
    windows = view.context_windows
    vector_of = {view.chunks.column("chunk_id")[int(r)].as_py(): vs.matrix[i] for i, r in enumerate(vs.rows)}
    rows = [int(r) for r in vs.rows[::7]]
    got_exact, got_ann = exact.window_vectors(rows), ann.window_vectors(rows)
    assert set(got_exact) == set(got_ann) == set(rows)
    window_of = view.context_window_of.window_of_row
    for row in rows:
        members = windows.column("chunk_ids")[int(window_of[row])].as_py()
        assert view.chunks.column("chunk_id")[row].as_py() in members
        want = _unit(np.sum([vector_of[c] for c in members], axis=0))
        assert np.allclose(got_exact[row], want, atol=1e-6) and np.allclose(got_ann[row], want, atol=1e-6)


def test_cosines_of_many_rows_equal_each_rows_own_product(built):
    """guards against (the dense floor asks for a channel's whole depth at once): a cosine given to
    another row, a row without a vector given one, or the index and the exact source disagreeing."""
    home, manifest = built
    view, ann, exact = _sources(home, manifest)
    vs = view.vector_set("chunk_vectors")
    q = _queries(1, seed=11)[0]
    rows = [int(r) for r in vs.rows[::5]]
    missing = int(max(vs.rows)) + 1
    asked = [*rows[::-1], rows[0], missing]
    for source in (exact, ann):
        got = source.cosines(q, asked)
        assert set(got) == set(rows)
        for row in rows:
            i = int(np.flatnonzero(vs.rows == row)[0])
            assert got[row] == pytest.approx(float(vs.matrix[i] @ q.astype(np.float32)), abs=1e-5)
    assert exact.cosines(q, []) == {}


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(eligible_idx=st.sets(st.integers(0, len(PARSES) - 1), max_size=len(PARSES)),
       hidden_idx=st.sets(st.integers(0, len(PARSES) - 1), max_size=4),
       depth=st.integers(1, 150), qseed=st.integers(0, 10_000))
def test_filters_hold_before_ranking_and_every_score_is_exact(built, eligible_idx, hidden_idx, depth, qseed):
    """guards against: an ineligible or withheld chunk leaking through the ANN candidates (a
    pre-filter dropped, or candidates not re-checked), a short answer when few rows pass the filter,
    and scores that are not the stored vectors' exact cosines (re-scoring skipped)."""
    home, manifest = built
    hidden_parses = {PARSES[i] for i in hidden_idx}
    hidden = frozenset(f"fs:t/{p[:4]}.txt" for p in hidden_parses)
    eligible = {PARSES[i] for i in eligible_idx} or None
    view, ann, exact = _sources(home, manifest, hidden)
    q = _queries(1, seed=qseed)[0]
    got = dense_channel(view, q, eligible, depth, source=ann)
    want = dense_channel(view, q, eligible, depth, source=exact)
    allowed = (set(eligible) if eligible is not None else set(PARSES)) - hidden_parses
    parse_of = dict(zip(view.chunks.column("chunk_id").to_pylist(), view.chunks.column("parse_id").to_pylist()))
    assert all(parse_of[c] in allowed for c, _ in got)
    assert [c for c, _ in got] == [c for c, _ in want]  # exhaustive: recall 1, length included
    vs = view.vector_set("chunk_vectors")
    ids = view.chunks.column("chunk_id").to_pylist()
    stored = {ids[r]: vs.matrix[i] for i, r in enumerate(vs.rows)}
    for c, s in got:
        assert abs(s - float(stored[c] @ q)) <= 1e-6


def test_a_selective_filter_still_fills_the_depth(built):
    """guards against: a pre-filtered IVF search that probes too few partitions and answers with
    fewer chunks than the eligible parses hold."""
    home, manifest = built
    home = _configure(FabricHome(home.root), **{**EXHAUSTIVE, "nprobes": 1, "refine_factor": 1})
    try:
        view, ann, exact = _sources(home, manifest)
        q = _queries(1, seed=3)[0]
        eligible = {PARSES[7]}  # 50 chunks spread over the partitions
        got = dense_channel(view, q, eligible, 100, source=ann)
        assert len(got) == WINDOWS * PER_WINDOW
        assert [c for c, _ in got] == [c for c, _ in dense_channel(view, q, eligible, 100, source=exact)]
    finally:
        _configure(FabricHome(home.root), **EXHAUSTIVE)


def test_a_partial_search_re_scores_what_it_finds(built):
    """With one partition probed and no refinement the pass is approximate: whatever it returns
    is eligible, exactly scored, and ranked by the exact score."""
    home, manifest = built
    home = _configure(FabricHome(home.root), **{**EXHAUSTIVE, "nprobes": 1, "refine_factor": 1})
    try:
        view, ann, _ = _sources(home, manifest)
        vs = view.vector_set("chunk_vectors")
        ids = view.chunks.column("chunk_id").to_pylist()
        stored = {ids[r]: vs.matrix[i] for i, r in enumerate(vs.rows)}
        for q in _queries(5, seed=21):
            got = dense_channel(view, q, None, 20, source=ann)
            assert len(got) == 20
            assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
            assert all(abs(s - float(stored[c] @ q)) <= 1e-6 for c, s in got)
    finally:
        _configure(FabricHome(home.root), **EXHAUSTIVE)


def _reason(home: FabricHome, manifest: dict, release_id: int = 1, answers: bool = True) -> tuple[str | None, str]:
    """(fallback reason, source kind) of a fresh view; with ``answers``, the source also answers
    as the exact product does."""
    view = _view(home, manifest, release_id)
    source, why = dense_source(view, "chunk_vectors", home.config.query.dense_search)
    if answers:
        q = _queries(1)[0]
        assert dense_channel(view, q, None, 50, source=source) == dense_channel(
            view, q, None, 50, source=ExactSource(view, "chunk_vectors"))
    return why, source.kind


def test_a_missing_index_answers_exactly_with_a_reason(home):
    """guards against: a release without its index (files removed, or never built) answering
    nothing, crashing, or silently using the product where the configuration asked for the index."""
    home, manifest = home
    record = manifest["dense_indexes"]["chunk_vectors"]
    shutil.rmtree(home.dense_indexes.path("chunk_vectors", record["generation"]))
    why, kind = _reason(home, manifest)
    assert kind == "exact" and why.startswith("dense-index-missing: chunk_vectors/")
    never_built = {**manifest, "dense_indexes": {}}
    why, kind = _reason(home, never_built, release_id=2)
    assert kind == "exact" and why.startswith("dense-index-missing: chunk_vectors: release 2 has no index")


def test_an_index_of_other_rows_is_never_served(home):
    """guards against: serving an index built from other vectors than the release pins (another
    release's generation, or one rewritten on disk)."""
    home, manifest = home
    record = manifest["dense_indexes"]["chunk_vectors"]
    other = {**manifest, "vector_digests": {"chunk_vectors": "0" * 64}}
    why, kind = _reason(home, other, answers=False)  # the product refuses these rows too (vector-digest-mismatch)
    assert kind == "exact" and why.startswith("dense-index-release-mismatch")
    # The same generation with one vector changed on disk (the index rebuilt over it, meta untouched).
    import lance

    path = home.dense_indexes.path("chunk_vectors", record["generation"]) / VECTORS_DATASET
    t = lance.dataset(str(path)).to_table()
    vectors = t.column("vector").combine_chunks().flatten().to_numpy().reshape(-1, DENSE_DIM).copy()
    vectors[3] = vectors[4]
    t = t.set_column(t.schema.get_field_index("vector"), "vector",
                     pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), DENSE_DIM))
    ds = lance.write_dataset(t, str(path), mode="overwrite")
    ds.create_index("vector", "IVF_PQ", name=INDEX_NAME, metric="cosine", num_partitions=20, num_sub_vectors=48)
    why, kind = _reason(home, manifest, release_id=3)
    assert kind == "exact" and why.startswith("dense-index-release-mismatch") and "digest" in why


def test_a_damaged_or_foreign_index_answers_exactly_with_a_reason(home):
    """guards against: a corrupt data file, a meta of another format or an index without its
    vector index crashing the query or being searched as if it were sound."""
    home, manifest = home
    record = manifest["dense_indexes"]["chunk_vectors"]
    gen = home.dense_indexes.path("chunk_vectors", record["generation"])
    meta = json.loads((gen / META_FILE).read_text())
    (gen / META_FILE).write_text(json.dumps({**meta, "format": "fabric-dense-ann-v0"}))
    why, _ = _reason(home, manifest, release_id=1)
    assert why.startswith("dense-index-schema-mismatch")
    (gen / META_FILE).write_text(json.dumps(meta))
    for data in (gen / VECTORS_DATASET / "data").glob("*.lance"):
        data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    why, kind = _reason(home, manifest, release_id=2)
    assert kind == "exact" and why.startswith(("dense-index-unreadable", "dense-index-release-mismatch"))


def test_index_dropped_from_the_dataset_is_reported(home):
    home, manifest = home
    import lance

    record = manifest["dense_indexes"]["chunk_vectors"]
    ds = lance.dataset(str(home.dense_indexes.path("chunk_vectors", record["generation"]) / VECTORS_DATASET))
    ds.drop_index(INDEX_NAME)
    why, kind = _reason(home, manifest)
    assert kind == "exact" and why.startswith("dense-index-unreadable") and "no vector index" in why


def test_mode_and_threshold_choose_the_source(built):
    """``exact`` never opens an index; ``auto`` opens it from ``auto_min_rows`` rows on; below it
    the product answers with no reason (nothing was substituted)."""
    home, manifest = built
    view = _view(home, manifest)
    cases = [(DenseSearchConfig(mode="exact"), "exact"), (DenseSearchConfig(mode="auto", auto_min_rows=ROWS), "ann"),
             (DenseSearchConfig(mode="auto", auto_min_rows=ROWS + 1), "exact"),
             (DenseSearchConfig(**EXHAUSTIVE), "ann")]
    for config, kind in cases:
        source, why = dense_source(view, "chunk_vectors", config)
        assert (source.kind, why) == (kind, None), config
    # Activation under auto below the threshold builds nothing and says why.
    auto = _configure(FabricHome(home.root), mode="auto")
    try:
        records = dense_index_records(auto, manifest["tables"], PARSES, manifest["vector_digests"])
        assert records["chunk_vectors"] == {"generation": None, "rows": ROWS, "skipped": "below-auto-min-rows"}
    finally:
        _configure(FabricHome(home.root), **EXHAUSTIVE)


@pytest.mark.parametrize("config, kept, kind", [
    (EXHAUSTIVE, 5, "exact"), (EXHAUSTIVE, 6, "ann"),  # 250 and 300 visible rows: an index from 256
    ({"mode": "auto", "auto_min_rows": 1000}, 19, "exact"), ({"mode": "auto", "auto_min_rows": 1000}, 20, "ann")])
def test_a_view_hiding_sources_chooses_its_source_as_a_release_without_them_would(home, config, kept, kind):
    """guards against (trial 23c): a release naming sources withheld since it was published chose
    the index by every row it recorded, withheld rows too, so ``dense_search`` said ``ann`` where
    a home that never had them says ``exact``: it told a client that something had been withheld
    since the release (as ``fallback_reason`` did before stop 55)."""
    home, manifest = home
    home = _configure(home, **config)
    hidden = frozenset(f"fs:t/{p[:4]}.txt" for p in PARSES[kept:])
    restricted = _view(home, manifest, hidden=hidden)
    never = _view(home, _manifest(home, parses=PARSES[:kept]), release_id=2)
    for view in (restricted, never):
        source, why = dense_source(view, "chunk_vectors", home.config.query.dense_search)
        assert (source.kind, why) == (kind, None), view.release_id


def test_an_unchanged_release_reuses_its_index_and_a_changed_one_does_not(home):
    home, manifest = home
    record = manifest["dense_indexes"]["chunk_vectors"]
    again = dense_index_records(home, manifest["tables"], PARSES, manifest["vector_digests"], manifest["dense_indexes"])
    assert again["chunk_vectors"] == record
    fewer = PARSES[:-1]
    smaller = _manifest(home, fewer)
    assert smaller["dense_indexes"]["chunk_vectors"]["generation"] != record["generation"]
    assert smaller["dense_indexes"]["chunk_vectors"]["rows"] == ROWS - WINDOWS * PER_WINDOW
    store = DenseIndexStore(home.dense_indexes.root)
    removed = store.remove_generations({"chunk_vectors": {smaller["dense_indexes"]["chunk_vectors"]["generation"]}})
    assert removed == [f"chunk_vectors/{record['generation']}"]
    view, ann, exact = _sources(home, smaller)
    assert all(c.split("-")[0] != PARSES[-1][:4] for c, _ in dense_channel(view, _queries(1)[0], None, 100, source=ann))


def test_default_probes_are_a_quarter_of_the_partitions():
    from fabric_query.dense_search import probes

    assert [probes(0, n) for n in (1, 3, 4, 5, 244, 977)] == [1, 1, 1, 2, 61, 245]
    assert probes(7, 244) == 7


def test_an_index_failing_while_searching_answers_exactly_from_then_on(built, monkeypatch):
    """guards against: a Lance error in the middle of a query (a file gone after the view opened,
    a setting Lance refuses) crashing the search instead of answering with the exact product."""
    from types import SimpleNamespace

    import fabric_query.dense_search as ds
    from fabric_query.channels.dense import DENSE
    from fabric_query.dense_search import search_failures

    home, manifest = built
    view = _view(home, manifest, release_id=7)
    q = _queries(1, seed=4)[0]

    def boom(*args, **kwargs):
        raise OSError("index file vanished")

    monkeypatch.setattr(ds, "nearest", boom)
    ctx = SimpleNamespace(view=view, config=home.config, eligible=None, depth=50, windows=SimpleNamespace(skipped="x"),
                          per_query=lambda key, compute: compute())
    qv = SimpleNamespace(vector=q, skipped=None)
    monkeypatch.setattr("fabric_query.channels.dense.query_vector", lambda ctx, channel: qv)
    run = DENSE.run(ctx)
    assert run.dense_search == "exact" and run.dense_fallback_reason.startswith("dense-index-unreadable")
    assert "index file vanished" in run.dense_fallback_reason
    assert run.ranking == dense_channel(view, q, None, 50, source=ExactSource(view, "chunk_vectors"))
    assert search_failures(view)["chunk_vectors"] == run.dense_fallback_reason
    assert dense_source(view, "chunk_vectors", home.config.query.dense_search)[0].kind == "exact"


def test_a_damaged_index_is_named_without_the_rust_build_paths_of_lance(home):
    """guards against (trial 22b): ``fabric status``'s ``dense_index_problems`` and a search's
    ``dense_fallback_reason`` quoting Lance's error whole, with the Rust source location of the
    machine that built Lance (``…, /home/runner/work/lance/lance/rust/lance-io/src/utils.rs:172:20``):
    the reason keeps Lance's words (what failed) and drops the location."""
    from fabric_query import Fabric

    home, manifest = home
    home.catalog.publish_release(manifest, None)
    record = manifest["dense_indexes"]["chunk_vectors"]
    versions = home.dense_indexes.path("chunk_vectors", record["generation"]) / VECTORS_DATASET / "_versions"
    for path in versions.glob("*.manifest"):
        with open(path, "r+b") as f:
            f.truncate(path.stat().st_size // 3)
    why, kind = _reason(home, manifest, release_id=2)
    (problem,) = Fabric(home.root).status().dense_index_problems
    for text in (why, problem):
        assert "dense-index-unreadable" in text and "LanceError(IO)" in text, text  # Lance's words kept
        assert ".rs:" not in text and "/home/runner" not in text and "/rustc/" not in text, text
    assert kind == "exact"
