"""Tests for reciprocal rank fusion (fabric_query.fusion.rrf)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fabric_query.fusion import rrf


def test_hand_computed_scores_k60():
    """guards against: 0-based ranks, a different k, or a missing channel contribution."""
    out = dict(rrf({"a": ["x", "y"], "b": ["y", "z"]}, k=60))
    assert out["x"] == pytest.approx(1 / 61)
    assert out["y"] == pytest.approx(1 / 62 + 1 / 61)
    assert out["z"] == pytest.approx(1 / 62)
    assert [d for d, _ in rrf({"a": ["x", "y"], "b": ["y", "z"]})] == ["y", "x", "z"]


def test_default_k_is_60():
    """guards against: the default k drifting from the RRF paper's 60."""
    assert rrf({"c": ["only"]}) == [("only", pytest.approx(1 / 61))]


def test_custom_k():
    """guards against: k being ignored."""
    out = dict(rrf({"a": ["x", "y"], "b": ["x"]}, k=1))
    assert out["x"] == pytest.approx(1 / 2 + 1 / 2)
    assert out["y"] == pytest.approx(1 / 3)


def test_three_channels_sum():
    """guards against: only the best channel (max) being counted instead of the sum."""
    out = dict(rrf({"w": ["a", "b", "c"], "s": ["c", "a"], "d": ["b", "c", "a"]}))
    assert out["a"] == pytest.approx(1 / 61 + 1 / 62 + 1 / 63)
    assert out["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert out["c"] == pytest.approx(1 / 63 + 1 / 61 + 1 / 62)


def test_equal_score_lower_best_rank_wins_over_smaller_id():
    """guards against: tie-break by ID before best rank."""
    # k=2: b ranks (1, 10) -> 1/3 + 1/12 = 5/12; a ranks (2, 4) -> 1/4 + 1/6 = 5/12 (equal in floats too).
    rankings = {
        "c1": ["b", "a"],
        "c2": ["f1", "f2", "f3", "a", "f5", "f6", "f7", "f8", "f9", "b"],
    }
    out = rrf(rankings, k=2)
    sc = dict(out)
    assert sc["a"] == sc["b"]
    order = [d for d, _ in out]
    assert order.index("b") < order.index("a")  # same score; b's best rank 1 beats a's best rank 2


def test_identical_everything_ties_by_id():
    """guards against: a non-total order (unstable result for equal score and equal best rank)."""
    out = rrf({"c1": ["y", "x"], "c2": ["x", "y"]})
    assert [d for d, _ in out] == ["x", "y"]


def test_only_ranks_enter_not_raw_scores():
    """guards against: channel scores (BM25/cosine) entering the fusion (CombSUM-style) instead of ranks."""
    # Raw scores the channels would report: word A=100, B=99; dense B=0.9, C=0.8, A=0.1.
    # A score sum would put A first (100.1 > 99.9); rank fusion puts B first (1/62+1/61 > 1/61+1/63).
    out = rrf({"word": ["A", "B"], "dense": ["B", "C", "A"]})
    assert [d for d, _ in out] == ["B", "A", "C"]
    # A fused score depends on the rank alone: rank 2 is worth 1/62 whatever came before it.
    assert dict(rrf({"x": ["hi", "lo"]}))["lo"] == 1 / 62


def test_empty_inputs():
    """guards against: crashes on no channels or empty channels."""
    assert rrf({}) == []
    assert rrf({"a": [], "b": []}) == []


def test_channel_names_do_not_matter():
    """guards against: weighting channels by name."""
    assert rrf({"word": ["x", "y"], "dense": ["y"]}) == rrf({"zz": ["x", "y"], "aa": ["y"]})


# --------------------------------------------------------------------------
# Properties

_IDS = st.sampled_from([f"d{i:02d}" for i in range(12)])
_RANKINGS = st.dictionaries(
    st.sampled_from(["word", "substring", "dense", "scan"]),
    st.lists(_IDS, unique=True, max_size=10),
    max_size=4,
)


def _exact(rankings, k):
    scores, best = {}, {}
    for ids in rankings.values():
        for r, d in enumerate(ids, start=1):
            scores[d] = scores.get(d, Fraction(0)) + Fraction(1, k + r)
            best[d] = min(best.get(d, r), r)
    return scores, best


@settings(max_examples=150, deadline=None)
@given(_RANKINGS, st.integers(min_value=1, max_value=100))
def test_scores_match_exact_rational(rankings, k):
    """guards against: any deviation from Σ 1/(k+rank), beyond float rounding."""
    exact, _ = _exact(rankings, k)
    out = rrf(rankings, k)
    assert {d for d, _ in out} == set(exact)
    for d, s in out:
        assert s == pytest.approx(float(exact[d]), rel=1e-12)


def _ranks(rankings):
    out = {}
    for ids in rankings.values():
        for r, d in enumerate(ids, start=1):
            out.setdefault(d, []).append(r)
    return {d: sorted(v) for d, v in out.items()}


def _no_float_sensitive_ties(rankings, k):
    """Exact ties whose float sums could differ: different rank multisets, or 3+ summands."""
    exact, _ = _exact(rankings, k)
    ranks = _ranks(rankings)
    docs = sorted(exact)
    for i, a in enumerate(docs):
        for b in docs[i + 1:]:
            if exact[a] == exact[b] and (ranks[a] != ranks[b] or len(ranks[a]) > 2):
                return False
    return True


@settings(max_examples=150, deadline=None)
@given(_RANKINGS, st.integers(min_value=1, max_value=100))
def test_order_is_score_then_best_rank_then_id(rankings, k):
    """guards against: an order that is not total (score desc, best rank asc, ID asc)."""
    assume(_no_float_sensitive_ties(rankings, k))  # distinct exact sums may round to one float
    exact, best = _exact(rankings, k)
    out = [d for d, _ in rrf(rankings, k)]
    assert out == sorted(exact, key=lambda d: (-exact[d], best[d], d))


@settings(max_examples=150, deadline=None)
@given(st.data(), st.integers(min_value=1, max_value=100))
def test_channel_input_order_independent(data, k):
    """guards against: the fused result depending on the order channels are given in."""
    rankings = data.draw(_RANKINGS)
    perm = data.draw(st.permutations(list(rankings)))
    a = rrf(rankings, k)
    b = rrf({n: rankings[n] for n in perm}, k)
    assert [d for d, _ in a] == [d for d, _ in b]
    for (_, x), (_, y) in zip(a, b):
        assert x == y


@settings(max_examples=150, deadline=None)
@given(st.data(), st.integers(min_value=1, max_value=100))
def test_two_channels_order_independent_exactly(data, k):
    """guards against: channel order changing anything, even the float scores, with two channels."""
    rankings = data.draw(
        st.dictionaries(st.sampled_from(["word", "dense"]), st.lists(_IDS, unique=True, max_size=10), max_size=2)
    )
    perm = data.draw(st.permutations(list(rankings)))
    assert rrf({n: rankings[n] for n in perm}, k) == rrf(rankings, k)


def test_exact_tie_over_three_channels_breaks_by_best_rank_then_id():
    """guards against: floating-point summation order, not the documented tie-break, deciding exact ties."""
    def build(ra, rb):
        chans = {}
        for name, x, y in zip(("word", "substring", "dense"), ra, rb):
            lst = [f"f-{name}-{i}" for i in range(max(x, y))]
            lst[x - 1], lst[y - 1] = "a", "b"
            chans[name] = lst
        return chans

    rankings = build((1, 7, 2), (2, 1, 7))
    exact, _ = _exact(rankings, 60)
    assert exact["a"] == exact["b"]  # mathematically tied, both with best rank 1
    out = [d for d, _ in rrf(rankings)]
    assert out.index("a") < out.index("b")
    reordered = {n: rankings[n] for n in ("dense", "word", "substring")}
    assert [d for d, _ in rrf(reordered)] == out


def test_convex_hand_computed_and_total_order():
    from fabric_query.fusion import convex

    fused = convex({"word": [("a", 12.0), ("b", 6.0), ("c", 2.0)], "dense": [("c", 0.9), ("a", 0.5), ("d", 0.4)]},
                   {"word": 0.3, "dense": 0.7})
    # a: 0.3·1 + 0.7·0.2 = 0.44; b: 0.3·0.4 = 0.12; c: 0.3·0 + 0.7·1 = 0.70; d: 0.
    assert [d for d, _ in fused] == ["c", "a", "b", "d"]
    assert [round(s, 6) for _, s in fused] == [0.7, 0.44, 0.12, 0.0]


def test_convex_uses_scores_not_ranks():
    """guards against: a 'convex' that silently falls back to rank fusion."""
    from fabric_query.fusion import convex, rrf

    lists = {"word": [("a", 100.0), ("b", 99.0), ("c", 1.0)], "dense": [("c", 0.9), ("b", 0.85), ("a", 0.1)]}
    by_score = [d for d, _ in convex(lists, {"word": 0.5, "dense": 0.5})]
    by_rank = [d for d, _ in rrf({k: [d for d, _ in v] for k, v in lists.items()})]
    # b is a close second in both channels: first by scores, last by ranks.
    assert by_score[0] == "b" and by_rank[0] == "a"


def test_convex_single_score_list_and_unlisted_channel():
    from fabric_query.fusion import convex

    assert convex({"word": [("x", 3.0)]}, {"word": 0.3}) == [("x", 0.3)]
    assert convex({"other": [("x", 3.0), ("y", 1.0)]}, {"word": 0.3})[0][1] == 0.0


# --------------------------------------------------------------------------
# convex(): BM25 channels against their floor 0 (issue 19, the `鍵` case)

from fabric_query.fusion import LEXICAL_FLOORS, FusionMethod, convex, fuse  # noqa: E402
from fabric_resources.config import QueryConfig  # noqa: E402

_KEY_CASE = {
    # A one-character query (鍵) on a small home: two chunks contain it. BM25 differs between them by
    # length normalisation only; the weaker match is also the chunk e5 likes least.
    "word": [("with-key-a", 2.31), ("with-key-b", 1.97)],
    "substring": [("with-key-a", 1.88), ("with-key-b", 1.62)],
    "dense_multilingual": [("dense-only-1", 0.874), ("dense-only-2", 0.861), ("with-key-a", 0.852),
                           ("dense-only-3", 0.847), ("with-key-b", 0.839)],
}


def _fused(channels):
    return fuse(FusionMethod.CONVEX, {c: [d for d, _ in p] for c, p in channels.items()}, channels, QueryConfig())


def test_weakest_lexical_match_is_not_zeroed_and_outranks_dense_only_chunks():
    """guards against: min-max giving a channel's weakest true match 0, so the chunk that contains the
    query term ranked 4th with fused score 0.00000 below dense-only chunks (issue 19)."""
    fused = _fused(_KEY_CASE)
    scores = dict(fused)
    assert scores["with-key-b"] > 0
    assert [d for d, _ in fused][:2] == ["with-key-a", "with-key-b"]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.floats(min_value=0.01, max_value=50), min_size=1, max_size=8),
       st.lists(st.floats(min_value=-1, max_value=1), min_size=1, max_size=8))
def test_every_lexical_match_keeps_a_positive_share(bm25, cosines):
    """guards against: any lexical match (BM25 > 0) fused to 0 on the convex route."""
    word = sorted(((f"m{i}", s) for i, s in enumerate(bm25)), key=lambda p: -p[1])
    dense = sorted(((f"d{i}", s) for i, s in enumerate(cosines)), key=lambda p: -p[1])
    scores = dict(_fused({"word": word, "dense_multilingual": dense}))
    assert all(scores[d] > 0 for d, _ in word)


def test_floors_leave_unfloored_channels_min_max():
    """guards against: the floors changing dense channels or convex() without floors (min-max stays)."""
    assert dict(convex(_KEY_CASE, {"word": 0.4, "substring": 0.4, "dense_multilingual": 0.6}))["with-key-b"] == 0.0
    dense_only = {"dense_multilingual": _KEY_CASE["dense_multilingual"]}
    assert _fused(dense_only) == convex(dense_only, QueryConfig().convex_weights)
    assert set(LEXICAL_FLOORS) == {"word", "substring", "scan"}


def test_demote_moves_the_below_floor_ids_after_the_rest_in_order():
    """guards against: demotion that drops, duplicates or reorders IDs, or changes their scores."""
    from fabric_query.fusion import demote

    fused = [("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6), ("e", 0.5)]
    assert demote(fused, {"a", "c"}) == [("b", 0.8), ("d", 0.6), ("e", 0.5), ("a", 0.9), ("c", 0.7)]
    assert demote(fused, set()) == fused and demote(fused, {"zz"}) == fused


def test_fuse_demotes_only_when_configured():
    """guards against: ``query.floor_demotion`` ignored either way, on either method (the word-only
    match ranks below both dense-only IDs without demotion: RRF k 20 with the dense weight 1.5, 1 / 21 <
    1.5 / 22; convex 0.5 < 0.5 + tie broken by ID, so checked by position)."""
    pinned = {"rrf_k": 20, "channel_weights": {"dense": 1.5}}
    on, off = QueryConfig(**pinned), QueryConfig(floor_demotion=False, **pinned)
    for method, dense in (("rrf", "dense"), ("convex", "dense_multilingual")):
        rankings = {"word": ["w1"], dense: ["d1", "d2"]}
        scored = {"word": [("w1", 3.0)], dense: [("d1", 0.9), ("d2", 0.8)]}
        plain = [c for c, _ in fuse(method, rankings, scored, off)]
        assert plain.index("d1") < plain.index("w1") and (method == "convex" or plain.index("d2") < plain.index("w1"))
        assert [c for c, _ in fuse(method, rankings, scored, off, {"d1", "d2"})] == plain
        assert [c for c, _ in fuse(method, rankings, scored, on, {"d1", "d2"})] == \
               ["w1"] + [c for c in plain if c != "w1"]
