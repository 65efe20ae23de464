"""Passage assembly policy (pure): coverage, caps, no overlap, merging, trace."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_query.passages import HitWindow, MemberChunk, assemble


def window(wid: str, tokens: list[int], units_per_chunk: int = 1) -> tuple[MemberChunk, ...]:
    return tuple(
        MemberChunk(f"{wid}c{i}", f"text {wid} {i}",
                    tuple({"unit_id": f"{wid}u{i}.{k}", "start_char": 0, "end_char": 1} for k in range(units_per_chunk)),
                    t)
        for i, t in enumerate(tokens)
    )


def hit(rank: int, members: tuple[MemberChunk, ...], i: int, wid: str) -> HitWindow:
    return HitWindow(rank, members[i].chunk_id, wid, members)


def test_grows_forward_then_backward_under_the_token_cap():
    w = window("a", [50, 50, 50, 50, 50])
    passages, trace = assemble([hit(1, w, 2, "a")], max_tokens=150, max_units=99)
    assert [p.chunk_ids for p in passages] == [["ac1", "ac2", "ac3"]]
    assert passages[0].truncated and passages[0].token_count == 150
    assert trace["events"] == [{"rank": 1, "chunk_id": "ac2", "action": "new", "passage": 0}]


def test_whole_window_under_the_cap_is_not_truncated():
    w = window("a", [10, 10, 10])
    passages, _ = assemble([hit(1, w, 0, "a")], max_tokens=100, max_units=99)
    assert passages[0].chunk_ids == ["ac0", "ac1", "ac2"] and not passages[0].truncated


def test_a_hit_inside_an_earlier_passage_joins_it():
    w = window("a", [10, 10, 10])
    passages, trace = assemble([hit(1, w, 0, "a"), hit(2, w, 2, "a")], max_tokens=100, max_units=99)
    assert len(passages) == 1 and passages[0].hit_ranks == [1, 2]
    assert trace["events"][1]["action"] == "covered"


def test_adjacent_passages_are_kept_apart_when_their_union_breaks_the_cap():
    w = window("a", [40, 40, 40, 40])
    p, t = assemble([hit(1, w, 0, "a"), hit(2, w, 3, "a")], max_tokens=80, max_units=99)
    assert [x.chunk_ids for x in p] == [["ac0", "ac1"], ["ac2", "ac3"]]
    assert [e["action"] for e in t["events"]] == ["new", "new"]


def test_over_cap_chunk_still_forms_a_passage():
    w = window("a", [500])
    p, t = assemble([hit(1, w, 0, "a")], max_tokens=100, max_units=99)
    assert p[0].chunk_ids == ["ac0"] and t["events"][0]["action"] == "over-cap"


def test_no_window_gives_one_chunk_passages_that_never_merge():
    a = (MemberChunk("x", "x", ({"unit_id": "u", "start_char": 0, "end_char": 1},), 5),)
    b = (MemberChunk("y", "y", ({"unit_id": "v", "start_char": 0, "end_char": 1},), 5),)
    p, _ = assemble([HitWindow(1, "x", None, a), HitWindow(2, "y", None, b)], 100, 99)
    assert [q.chunk_ids for q in p] == [["x"], ["y"]]


@st.composite
def scenarios(draw):
    windows = {}
    for w in range(draw(st.integers(1, 3))):
        wid = f"w{w}"
        windows[wid] = window(wid, draw(st.lists(st.integers(1, 60), min_size=1, max_size=8)),
                              draw(st.integers(1, 2)))
    pool = [(wid, i) for wid, ms in windows.items() for i in range(len(ms))]
    picks = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=10, unique=True))
    hits = [hit(r, windows[wid], i, wid) for r, (wid, i) in enumerate(picks, start=1)]
    return windows, hits, draw(st.integers(1, 150)), draw(st.integers(1, 6))


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_policy_properties(scenario):
    windows, hits, max_tokens, max_units = scenario
    passages, trace = assemble(hits, max_tokens, max_units)
    # Every hit lands in exactly one passage, which contains its chunk.
    placed = [(r, c) for p in passages for r, c in zip(p.hit_ranks, p.hit_chunk_ids)]
    assert sorted(placed) == sorted((h.rank, h.chunk_id) for h in hits)
    for p in passages:
        for c in p.hit_chunk_ids:
            assert c in p.chunk_ids
    # No chunk is in two passages.
    all_chunks = [c for p in passages for c in p.chunk_ids]
    assert len(all_chunks) == len(set(all_chunks))
    for p in passages:
        members = windows[p.window_id]
        ids = [m.chunk_id for m in members]
        # A passage is a consecutive run of its window, in reading order.
        assert ids[p.first:p.first + len(p.chunk_ids)] == p.chunk_ids
        assert p.truncated == (len(p.chunk_ids) < len(members))
        units = {f["unit_id"] for m in p.members for f in m.fragments}
        within = p.token_count <= max_tokens and len(units) <= max_units
        # Only a lone chunk may exceed the caps (evidence is never dropped).
        assert within or len(p.chunk_ids) == 1
    # The seed's merge rule is subsumed: adjacent passages of one window never fit together.
    by_window: dict[str, list] = {}
    for p in passages:
        by_window.setdefault(p.window_id, []).append(p)
    for group in by_window.values():
        group.sort(key=lambda p: p.first)
        for a, b in zip(group, group[1:]):
            if a.last + 1 == b.first and len(a.chunk_ids) > 0:
                union = a.members + b.members
                units = {f["unit_id"] for m in union for f in m.fragments}
                assert sum(m.token_count for m in union) > max_tokens or len(units) > max_units
    assert trace["passages"] == len(passages)
    assert len(trace["events"]) == len(hits)
