"""Metric code on hand-computed cases, the query split, and the BEIR loader."""

from __future__ import annotations

import json
import math

import pytest

from fabric_assets.measurement.harness import as_free_text, in_split, load_beir
from fabric_assets.measurement.metrics import (
    first_occurrence, mrr_at_k, ndcg_at_k, paired_bootstrap, per_query_ndcg, recall_at_k, score_run,
)


def test_ndcg_hand_computed_graded():
    """guards against: exponential gain sneaking in, or the ideal order not sorted by grade.

    ranked = [d3, d1, d9, d2]; qrels d1:3, d2:1, d3:2.
    DCG  = 2/log2(2) + 3/log2(3) + 0 + 1/log2(5)  = 2 + 1.892789 + 0.430677 = 4.323466
    IDCG = 3/log2(2) + 2/log2(3) + 1/log2(4)      = 3 + 1.261860 + 0.5      = 4.761860
    nDCG = 0.907936
    """
    qrels = {"d1": 3, "d2": 1, "d3": 2}
    expected = (2 + 3 / math.log2(3) + 1 / math.log2(5)) / (3 + 2 / math.log2(3) + 0.5)
    assert ndcg_at_k(["d3", "d1", "d9", "d2"], qrels, 10) == pytest.approx(expected)
    assert ndcg_at_k(["d3", "d1", "d9", "d2"], qrels, 10) == pytest.approx(0.907936, abs=1e-6)
    assert ndcg_at_k(["d1", "d3", "d2"], qrels, 10) == pytest.approx(1.0)
    # Cut at k: only d3 counts at k=1; ideal at k=1 is d1 (3).
    assert ndcg_at_k(["d3", "d1"], qrels, 1) == pytest.approx(2 / 3)


def test_ndcg_ignores_zero_grades_and_empty_qrels():
    """guards against: zero-grade judgments counting as relevant; division by zero."""
    assert ndcg_at_k(["a"], {"a": 0}, 10) == 0.0
    assert ndcg_at_k(["a"], {}, 10) == 0.0


def test_recall_and_mrr_hand_computed():
    """guards against: recall over retrieved instead of relevant; MRR beyond k."""
    qrels = {"a": 1, "b": 2, "c": 1, "z": 0}
    ranked = ["x", "b", "y", "a"] + [f"n{i}" for i in range(200)] + ["c"]
    assert recall_at_k(ranked, qrels, 10) == pytest.approx(2 / 3)
    assert recall_at_k(ranked, qrels, 100) == pytest.approx(2 / 3)
    assert recall_at_k(ranked, qrels, 1000) == pytest.approx(1.0)
    assert mrr_at_k(ranked, qrels, 10) == pytest.approx(0.5)
    assert mrr_at_k(["x"] * 10 + ["a"], qrels, 10) == 0.0


def test_score_run_means_over_judged_queries_only():
    """guards against: unjudged queries diluting the mean."""
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}}
    run = {"q1": ["a"], "q2": ["x", "b"], "q3": ["c"]}
    m = score_run(run, qrels)
    assert m["MRR@10"] == pytest.approx((1 + 0.5) / 2)
    assert m["Recall@10"] == pytest.approx(1.0)
    assert m["nDCG@10"] == pytest.approx(round((1 + 1 / math.log2(3)) / 2, 4))


def test_per_query_ndcg_averages_to_score_run():
    """guards against: the per-query figures the intervals resample being other queries or another
    metric than the mean ``fabric eval`` reports (an unjudged query left in, or out of step)."""
    qrels = {"q1": {"a": 1}, "q2": {"b": 2, "c": 1}, "q3": {"c": 0}}
    run = {"q1": ["x", "a"], "q2": ["c", "y", "b"], "q3": ["c"]}
    per = per_query_ndcg(run, qrels)
    assert set(per) == {"q1", "q2"}
    assert round(sum(per.values()) / len(per), 4) == score_run(run, qrels)["nDCG@10"]


def test_paired_bootstrap_interval_covers_the_mean_and_tells_noise_from_a_shift():
    """guards against: an interval that ignores the spread (a constant shift and a coin flip told
    apart only by their means), an unseeded (unrepeatable) interval, or one around the wrong centre."""
    rng = __import__("random").Random(7)
    noise = [0.31, -0.29] * 20  # a coin flip of ±0.3 around a 0.01 shift
    rng.shuffle(noise)
    mean, low, high = paired_bootstrap(noise)
    assert low < 0 < high and low <= mean <= high
    assert paired_bootstrap(noise) == (mean, low, high)  # seeded
    shift = [0.05 + rng.uniform(-0.01, 0.01) for _ in range(40)]
    mean, low, high = paired_bootstrap(shift)
    assert 0.04 < low <= mean <= high < 0.06
    narrow = paired_bootstrap(noise, level=0.5)
    wide = paired_bootstrap(noise, level=0.99)
    assert wide[1] < narrow[1] and narrow[2] < wide[2]
    assert paired_bootstrap([]) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        paired_bootstrap([0.1], level=1.0)


def test_first_occurrence_keeps_best_rank():
    assert first_occurrence(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]


def test_split_is_deterministic_and_disjoint():
    """guards against: tuning and reporting on overlapping query sets."""
    ids = [str(i) for i in range(1, 101)] + [f"a{i}p0q{i % 4}" for i in range(100)]
    dev = {q for q in ids if in_split(q, "dev")}
    test = {q for q in ids if in_split(q, "test")}
    assert dev.isdisjoint(test) and dev | test == set(ids)
    assert "1" in dev and "2" in test
    assert 30 < len([q for q in test if q.startswith("a")]) < 70


def test_free_text_guard_keeps_words():
    """guards against: benchmark questions failing as query syntax (quotes, leading dashes, filters)."""
    assert as_free_text('what is "lift" -drag path:x') == "what is  lift  drag path x"
    assert as_free_text('"') == "?"


def test_load_beir(tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": "T", "text": "x"}) + "\n")
    (tmp_path / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "what"}) + "\n")
    (tmp_path / "qrels/test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\n")
    c = load_beir(tmp_path)
    assert c.corpus == {"d1": ("T", "x")} and c.queries == {"q1": "what"} and c.qrels == {"q1": {"d1": 2}}


def _write_beir(beir, docs: dict, queries: dict, qrels: str):
    """A BEIR folder: ``docs`` id → (title, text), ``queries`` id → text, ``qrels`` TSV rows."""
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text("\n".join(
        json.dumps({"_id": k, "title": t, "text": x}, ensure_ascii=False) for k, (t, x) in docs.items()), encoding="utf-8")
    (beir / "queries.jsonl").write_text(
        "\n".join(json.dumps({"_id": k, "text": v}, ensure_ascii=False) for k, v in queries.items()), encoding="utf-8")
    (beir / "qrels/test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels)
    return beir


def test_run_eval_end_to_end_on_a_tiny_collection(tmp_path):
    """guards against: the harness scoring the wrong documents (ID mapping), a baseline
    silently missing, or channels not reported separately."""
    from fabric_assets.measurement.eval_run import markdown_table, run_eval

    docs = {
        "d1": ("Lighthouses", "The lighthouse keeper lit the lamp every evening on the reef."),
        "d2": ("Bread", "Sourdough bread rises slowly with a lively starter."),
        "d3": ("Boats", "Fishing boats returned to the harbour before the storm."),
        "d4": ("Bees", "Honey bees dance to tell the hive where flowers grow."),
    }
    queries = {"2": "who lights the lamp at the lighthouse", "4": "how does sourdough rise", "6": "bee dance"}
    beir = _write_beir(tmp_path / "tiny", docs, queries, "2\td1\t1\n4\td2\t1\n6\td4\t2\n")
    result = run_eval(beir, split="test", work_dir=tmp_path / "work")
    assert result["queries"] == 3 and result["documents"] == 4
    names = set(result["metrics"])
    assert {"fabric", "fabric:word", "fabric:dense", "bm25s", "flat-cosine", "lancedb-fts", "lancedb-hybrid",
            "fabric[-section]", "fabric[-section]:dense"} <= names  # section-guided is on by default
    assert {"fabric[+window]", "fabric[-window]"} & names  # the window mix, flipped
    assert result["metrics"]["fabric"]["MRR@10"] == pytest.approx(1.0)
    assert result["metrics"]["bm25s"]["Recall@10"] == pytest.approx(1.0)
    table = markdown_table(result)
    assert table.count("\n") == len(names) + 1 and "| fabric |" in table
    versus = result["versus_fabric"]
    assert set(versus) == names - {"fabric"}
    for name, v in versus.items():  # the mean difference is the difference of the means
        low, high = v["ci95"]
        assert low <= v["delta"] <= high
        assert v["delta"] == pytest.approx(result["metrics"]["fabric"]["nDCG@10"] - result["metrics"][name]["nDCG@10"],
                                           abs=2e-4)
    assert f"{versus['bm25s']['delta']:+.4f} [" in table


def test_run_eval_on_a_reused_home_forgets_an_earlier_config(tmp_path):
    """guards against: ``fabric eval --config F`` leaving F in the ``--work-dir`` home, so a later
    run without ``--config`` scored F and reported it as the defaults."""
    from fabric_assets.measurement.eval_run import run_eval
    from fabric_resources.config import FabricConfig
    from fabric_resources.home import FabricHome

    beir = _write_beir(tmp_path / "tiny", {"d1": ("Bees", "Honey bees dance."), "d2": ("Bread", "Bread rises.")},
                       {"2": "bee dance"}, "2\td1\t1\n")
    other = FabricConfig.model_validate({"query": {"rrf_k": 7, "floor_demotion": False}})
    run_eval(beir, split="test", work_dir=tmp_path / "work", config=other)
    home = FabricHome(tmp_path / "work" / "home")
    assert home.config.query.rrf_k == 7
    run_eval(beir, split="test", work_dir=tmp_path / "work")
    assert FabricHome(tmp_path / "work" / "home").config == FabricConfig()


def test_stage_variants_flip_one_stage_each():
    from fabric_assets.measurement.eval_run import stage_variants
    from fabric_resources.config import FabricConfig

    base = FabricConfig.model_validate({"query": {"section_guided": True, "dense_window_weight": 0.3,
                                                  "dense_feedback_weight": 0.0}})
    v = stage_variants(base)
    assert set(v) == {"fabric[-section]", "fabric[-window]", "fabric[+feedback]", "fabric[-demotion]",
                      "fabric[+function-words]"}
    assert v["fabric[+function-words]"].query.function_word_matches is True
    assert v["fabric[+function-words]"].query.model_copy(update={"function_word_matches": False}) == base.query
    assert v["fabric[-section]"].query.section_guided is False
    assert v["fabric[-section]"].model_copy(update={"query": base.query}) == base
    assert v["fabric[-window]"].query.dense_window_weight == 0.0
    assert v["fabric[-window]"].query.model_copy(update={"dense_window_weight": 0.3}) == base.query
    on = FabricConfig.model_validate({"reranker": {"backend": "local", "checkpoint": "/x"},
                                      "query": {"section_guided": False, "dense_window_weight": 0.0}})
    v = stage_variants(on)
    assert set(v) == {"fabric[+section]", "fabric[+window]", "fabric[-feedback]", "fabric[-demotion]",
                      "fabric[+function-words]", "fabric[-rerank]"}
    assert v["fabric[-rerank]"].reranker.backend == "none" and v["fabric[+section]"].query.section_guided
    assert v["fabric[+window]"].query.dense_window_weight > 0
    assert stage_variants(base)["fabric[+feedback]"].query.dense_feedback_weight > 0
    fed = FabricConfig.model_validate({"query": {"dense_feedback_weight": 0.7}})
    assert stage_variants(fed)["fabric[-feedback]"].query.model_copy(update={"dense_feedback_weight": 0.7}) == fed.query
    assert stage_variants(fed)["fabric[-feedback]"].query.dense_feedback_weight == 0.0
    assert v["fabric[-demotion]"].query.floor_demotion is False
    assert v["fabric[-demotion]"].query.model_copy(update={"floor_demotion": True}) == on.query
    off = FabricConfig.model_validate({"query": {"floor_demotion": False}})
    assert stage_variants(off, multilingual=True)["fabric[+demotion]"].query.floor_demotion is True


def test_query_vector_memo_encodes_each_text_once_and_returns_the_same_vectors():
    """guards against: the memo returning another text's vector (order, duplicates), still
    encoding a text the grid already encoded, or encoding texts in one batch (a search encodes its
    query alone, and batched vectors differ in the last digits)."""
    import numpy as np

    from fabric_assets.measurement.harness import QueryVectorMemo

    class Counting:
        identity = "counting@1"

        def __init__(self):
            self.seen, self.calls = [], []

        def encode_queries(self, texts):
            self.seen += texts
            self.calls.append(len(texts))
            return np.array([[float(len(t)), float(ord(t[0]))] for t in texts], dtype=np.float32)

        def encode_passages(self, texts):
            return self.encode_queries(texts)

    inner = Counting()
    memo = QueryVectorMemo(inner)
    first = memo.encode_queries(["bb", "a", "bb"])
    again = memo.encode_queries(["a", "ccc", "bb"])
    assert inner.seen == ["bb", "a", "ccc"] and inner.calls == [1, 1, 1] and memo.identity == "counting@1"
    assert first.tolist() == [[2, 98], [1, 97], [2, 98]] and again.tolist() == [[1, 97], [3, 99], [2, 98]]


def test_eval_tune_scores_each_collection_under_its_own_route_and_chooses_by_the_worst(tmp_path):
    """guards against: a CJK collection scored under English settings (or the reverse), the grid
    silently missing points, or channels/baselines left out of the margin."""
    from fabric_assets.measurement.tuning import Grid, defaults_of, tune
    from fabric_resources.config import QueryConfig

    ja = _write_beir(tmp_path / "tinyja", {
        "d1": ("灯台", "灯台守は毎晩ランプに火をともし、嵐の夜も光を絶やさなかった。"),
        "d2": ("パン", "サワー種のパンは時間をかけてゆっくりと発酵させる。"),
        "d3": ("蜂", "ミツバチは踊りで花の場所を仲間に伝える。"),
    }, {"1": "灯台守はランプに何をした", "3": "ミツバチは何で場所を伝える"}, "1\td1\t1\n3\td3\t1\n")
    en = _write_beir(tmp_path / "tinyen", {
        "e1": ("Lighthouse", "The keeper lit the lamp of the lighthouse every night."),
        "e2": ("Bread", "Sourdough bread rises slowly with a lively starter."),
        "e3": ("Bees", "Honey bees dance to tell the hive where flowers are."),
    }, {"1": "who lit the lighthouse lamp", "3": "how do bees tell where flowers are"}, "1\te1\t1\n3\te3\t1\n")
    passes, fusion = defaults_of(QueryConfig())  # the grid holds the defaults, so they are reported
    grid = Grid(feedback=("off", passes.feedback), query_term_frequency=(passes.query_term_frequency,),
                stopwords=("none", "english"), section_guided=(passes.section_guided,),
                bigram_bm25=(passes.bigram_bm25, None), dense_window_weight=(passes.dense_window_weight,),
                dense_feedback=(passes.dense_feedback,), rrf_k=(fusion.rrf_k,),
                dense_weight=(fusion.dense_weight, fusion.dense_weight + 0.5), convex_lexical=(fusion.convex_lexical,),
                floor_demotion=(True, False))
    result = tune([ja, en], tmp_path / "work", grid)
    assert result["points"] == 2 * 2 * 2 * 2 * 2  # feedback × stop words × bigram BM25 × dense weight × demotion
    by_name = {c["name"]: c for c in result["collections"]}
    assert by_name["tinyja"]["cjk"] and not by_name["tinyen"]["cjk"]
    assert set(by_name["tinyen"]["baselines"]) == {"bm25s", "flat-cosine", "lancedb-fts", "lancedb-hybrid"}
    chosen, leximin = result["chosen"], result["leximin"]
    assert leximin["worst_margin"] == min(leximin["margins"].values())
    assert all(row["worst_margin"] <= leximin["worst_margin"] for row in result["top"])
    # Admissible (a tiny collection's paired standard error is at most 1): no margin below the
    # leximin point's worst by more than that, and never a worse mean.
    assert min(chosen["margins"].values()) >= leximin["worst_margin"] - 1.0
    assert chosen["mean_margin"] >= leximin["mean_margin"] - 1e-4
    assert result["defaults"] is not None and set(result["leave_one_out"]) == {"tinyja", "tinyen"}
    assert (tmp_path / "work" / "tinyja" / "home").is_dir()  # the home `fabric eval --work-dir` reuses


def test_choose_is_leximin_then_the_current_defaults():
    """guards against: choosing by the mean (a point that wins big on one collection and loses on
    another), leaving the choice to chance when one collection's margin is the floor everywhere, or
    an order that depends on anything but the margins and the stated tie-breaks."""
    from fabric_assets.measurement.tuning import CollectionScores, FusionSettings, Grid, PassSettings, choose

    grid = Grid(feedback=("off", "idf", "rm3"), query_term_frequency=(False,), stopwords=("none",),
                section_guided=(True,), bigram_bm25=((0.5, 0.3),), dense_window_weight=(0.0,), dense_feedback=(0.0,),
                rrf_k=(60,), dense_weight=(1.0,), convex_lexical=(0.4,), floor_demotion=(True,))
    f = FusionSettings(60, 1.0, 0.4)
    off, idf, rm3 = (PassSettings(feedback=x) for x in ("off", "idf", "rm3"))
    fused = {"a": {off: 0.50, idf: 0.70, rm3: 0.52}, "b": {off: 0.50, idf: 0.30, rm3: 0.52}}

    def coll(name):
        return CollectionScores(name, False, 10, {"bm25s": 0.45}, {p: {"word": 0.40} for p in (off, idf, rm3)},
                                {(p, f): v for p, v in fused[name].items()})

    ranked = choose([coll("a"), coll("b")], grid)
    assert [c.passes.feedback for c in ranked] == ["rm3", "off", "idf"]  # idf has the best mean, the worst floor
    assert ranked[0].margins == {"a": pytest.approx(0.07), "b": pytest.approx(0.07)}
    fused["a"][rm3] = fused["b"][rm3] = 0.50  # now off and rm3 tie everywhere: the preferred one first
    assert choose([coll("a"), coll("b")], grid, prefer=(rm3, f))[0].passes == rm3
    assert choose([coll("a"), coll("b")], grid, prefer=(off, f))[0].passes == off
    # a third collection at the floor for every point: the others still decide (leximin, not maximin)
    fused["c"] = {off: 0.10, idf: 0.10, rm3: 0.10}
    fused["a"][idf], fused["b"][idf] = 0.70, 0.60
    assert choose([coll("a"), coll("b"), coll("c")], grid, prefer=(off, f))[0].passes == idf


def test_within_noise_trades_a_worst_margin_the_queries_cannot_resolve_for_the_mean():
    """guards against: the one-standard-error rule admitting a point whose worst collection lost more
    than the noise of its queries (a real loss traded for the mean), or ignoring the per-query spread."""
    from fabric_assets.measurement.tuning import (
        CollectionScores, FusionSettings, Grid, PassSettings, admitted, choose, within_noise,
    )

    grid = Grid(feedback=("off", "idf"), query_term_frequency=(False,), stopwords=("none",),
                section_guided=(True,), bigram_bm25=((0.5, 0.3),), dense_window_weight=(0.0,), dense_feedback=(0.0,),
                rrf_k=(60,), dense_weight=(1.0,), convex_lexical=(0.4,), floor_demotion=(True,))
    f = FusionSettings(60, 1.0, 0.4)
    off, idf = PassSettings(feedback="off"), PassSettings(feedback="idf")

    def collections(b_idf: list[float]):
        # a: idf wins by 0.2 on every query; b: off 0.5 everywhere, idf per query as given
        a = CollectionScores("a", False, 4, {"bm25s": 0.3}, {p: {"word": 0.3} for p in (off, idf)},
                             {(off, f): 0.5, (idf, f): 0.7}, {(off, f): (0.5,) * 4, (idf, f): (0.7,) * 4},
                             {"bm25s": (0.3,) * 4})
        b = CollectionScores("b", False, 4, {"bm25s": 0.3}, {p: {"word": 0.3} for p in (off, idf)},
                             {(off, f): 0.5, (idf, f): sum(b_idf) / 4}, {(off, f): (0.5,) * 4, (idf, f): tuple(b_idf)},
                             {"bm25s": (0.3,) * 4})
        return [a, b]

    noisy = collections([0.9, 0.1, 0.9, 0.06])  # b: idf 0.49 on average, one query's swing of noise
    ranked = choose(noisy, grid)
    assert ranked[0].passes == off  # leximin: 0.20 beats 0.19
    assert within_noise(noisy, ranked).passes == idf  # 0.01 below, inside one paired SE (~0.2)
    assert [c.passes for c in admitted(noisy, ranked)] == [off, idf]
    steady = collections([0.48, 0.48, 0.47, 0.47])  # the same kind of loss on every query: real
    assert within_noise(steady, choose(steady, grid)).passes == off


def test_paired_se_counts_a_rival_channel_the_pass_changes():
    """guards against: the noise of a margin measured on the fused run alone while its rival is one
    of Fabric's own channels that the pass changes (the margin moves with both)."""
    from fabric_assets.measurement.tuning import CollectionScores, FusionSettings, PassSettings

    f = FusionSettings(60, 1.0, 0.4)
    off, idf = PassSettings(feedback="off"), PassSettings(feedback="idf")
    fused = (0.5, 0.6, 0.7, 0.8)
    c = CollectionScores("a", False, 4, {"bm25s": 0.1}, {off: {"dense": 0.6}, idf: {"dense": 0.6}},
                         {(off, f): 0.65, (idf, f): 0.65}, {(off, f): fused, (idf, f): fused}, {"bm25s": (0.1,) * 4},
                         {off: {"dense": (0.6,) * 4}, idf: {"dense": (0.9, 0.3, 0.9, 0.3)}})
    assert c.margin(off, f) == c.margin(idf, f)  # the same fused run, rivals equal on the mean
    assert c.paired_se((off, f), (idf, f)) == pytest.approx(0.3464102 / 2)  # differences ±0.3: sd 0.3464, n 4


def test_tuning_on_one_collection_reports_and_leaves_it_out():
    """guards against: leave-one-out of a single collection (nothing left to choose on) crashing the
    report after every pass was scored, losing the run."""
    from fabric_assets.measurement.tuning import CollectionScores, FusionSettings, Grid, PassSettings, report
    from fabric_resources.config import QueryConfig

    grid = Grid(feedback=("off", "idf"), query_term_frequency=(False,), stopwords=("none",),
                section_guided=(True,), bigram_bm25=((0.5, 0.3),), dense_window_weight=(0.0,), dense_feedback=(0.5,),
                rrf_k=(60,), dense_weight=(1.0,), convex_lexical=(0.5,), floor_demotion=(True,))
    f = FusionSettings(60, 1.0, 0.5).relevant(cjk=False)  # an English collection: the convex weight at its default
    off, idf = PassSettings("off", dense_feedback=0.5), PassSettings("idf", dense_feedback=0.5)
    only = CollectionScores("a", False, 2, {"bm25s": 0.3}, {p: {"word": 0.3} for p in (off, idf)},
                            {(off, f): 0.5, (idf, f): 0.6}, {(off, f): (0.4, 0.6), (idf, f): (0.5, 0.7)})
    result = report([only], grid, QueryConfig())
    assert result["chosen"]["passes"]["feedback"] == "idf"
    assert result["admitted_points"] == 1 and result["standard_errors"] == {"a": 0.0}  # the leximin point itself
    assert set(result["leave_one_out"]) == {"a"}
