"""Grounding of model-returned text (seed 003 §3.1 source_text_matches), excerpts, and the
mapping of matches back to unit spans."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fabric_assets.annotations.excerpts import ExcerptError, build_excerpts
from fabric_assets.annotations.grounding import (
    ExcerptGrounding,
    align,
    name_matches,
    edit_budgets,
    normalise,
    normalise_with_origin,
    source_text_matches,
    support_spans,
)
from fabric_resources.identity import text_hash
from fabric_resources.offsets import utf16_offset
from fabric_resources.schema import FRAGMENT_SEPARATOR
from fake_openai_server import build_windows

# -- normalisation ------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("The Lighthouse-Keeper, 1892!", "thelighthousekeeper1892"),
    ("  \n\t—?!", ""),
    ("東京タワー　(Tokyo)", "東京タワーtokyo"),
    ("İstanbul", "istanbul"),          # "İ".lower() == "i" + U+0307 (a mark, not alphanumeric)
    ("ÄÖÜ straße", "äöüstraße"),
    ("ＡＢＣ１２３", "ａｂｃ１２３"),     # full-width stays full-width: no NFKC
    ("a😀b", "ab"),
])
def test_normalise(text, expected):
    assert normalise(text) == expected


@pytest.mark.parametrize(("source", "name", "found"), [
    ("Plan next week with Ann.", "Ann", "Ann"),           # the later, whole-word occurrence
    ("Plan next week.", "Ann", None),                      # only inside and across words
    ("the lighthouse-keeper slept", "Lighthouse Keeper", "lighthouse-keeper"),
    ("Lovelace's notes", "Lovelace", "Lovelace"),
    ("Pineapple", "Apple", None),
    ("東京タワーへ行く", "タワー", "タワー"),                # no spaces in the script: no boundary
    ("ＡＢＣ社", "ＡＢＣ", "ＡＢＣ"),
])
def test_a_name_matches_only_as_whole_words(source, name, found):
    m = name_matches(source, name)
    assert (source[m.start:m.end] if m else None) == found


def test_origin_maps_each_normalised_character_to_its_source_character():
    norm, origin = normalise_with_origin("İx-Y")
    assert norm == "ixy" and origin == [0, 1, 3]


# -- budgets ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "repairs", "omissions"), [
    # min(n // 4, max(4, 3 * n // 20)), max(32, n) — computed by hand
    (1, 0, 32), (3, 0, 32), (4, 1, 32), (8, 2, 32), (16, 4, 32), (20, 4, 32), (27, 4, 32),
    (28, 4, 32), (34, 5, 34), (40, 6, 40), (100, 15, 100),
])
def test_edit_budgets(n, repairs, omissions):
    b = edit_budgets(n)
    assert (b.repairs, b.omissions) == (repairs, omissions)


# -- exact and fuzzy matching -------------------------------------------------------------------


def test_exact_match_reports_the_original_range():
    source = "At dusk, the Lighthouse keeper climbed; the lighthouse-keeper slept."
    m = source_text_matches(source, "LIGHTHOUSE KEEPER")
    assert m is not None and m.exact
    assert source[m.start:m.end] == "Lighthouse keeper"  # the first occurrence, original text


@pytest.mark.parametrize("selection", ["", "   ", "—?!", "\n\n"])
def test_empty_normalised_selection_fails(selection):
    assert source_text_matches("anything at all", selection) is None


SOURCE20 = "abcde fghij, klmno pqrst"  # 20 distinct letters, none of them "z"


def _with_z(positions):
    letters = list("abcdefghijklmnopqrst")
    for p in positions:
        letters[p] = "z"
    return "".join(letters)


def test_repair_budget_boundary():
    # n = 20 → 4 repairs. Each "z" must be substituted or inserted: one repair each.
    four = source_text_matches(SOURCE20, _with_z([2, 7, 12, 17]))
    assert four is not None and not four.exact and four.repairs == 4
    assert (four.start, four.end) == (0, len(SOURCE20))
    assert source_text_matches(SOURCE20, _with_z([2, 7, 12, 15, 17])) is None


def test_omission_budget_boundary():
    # n = 8 → 2 repairs, 32 omissions; "efgh" cannot be inserted (4 repairs), so the gap must be omitted.
    ok = "abcd " + "x" * 32 + " efgh"
    m = source_text_matches(ok, "abcdefgh")
    assert m is not None and m.omissions == 32 and (m.start, m.end) == (0, len(ok))
    assert source_text_matches("abcd " + "x" * 33 + " efgh", "abcdefgh") is None


def test_source_outside_the_interval_is_free():
    source = "x" * 500 + " the keeper climbed the tower " + "y" * 500
    m = source_text_matches(source, "the keeper climbd the tower")  # one omitted source character
    assert m is not None and not m.exact and (m.repairs, m.omissions) == (0, 1)
    assert source[m.start:m.end] == "the keeper climbed the tower"


def test_a_selection_longer_than_the_source_fails_before_aligning():
    assert align("abc", "abcdefgh") is None  # needs 8 - 2 = 6 matching characters, has 3


def _reference(source: str, selection: str) -> int | None:
    """Fewest edits (repairs + omissions) of any passing alignment, by brute force over every
    source interval (a plain, unvectorised DP; tiny inputs only)."""
    n, m = len(selection), len(source)
    if n == 0:
        return None
    b = edit_budgets(n)
    best = None
    for a in range(m + 1):
        # cost[j][i] = {repairs: min omissions} aligning selection[:j] with all of source[a:a+i]
        width = m - a
        cost = [[dict() for _ in range(width + 1)] for _ in range(n + 1)]
        cost[0][0] = {0: 0}
        for j in range(n + 1):
            for i in range(width + 1):
                here = cost[j][i]

                def relax(r, o):
                    if r <= b.repairs and o <= b.omissions and o < here.get(r, 1 << 30):
                        here[r] = o
                if j and i:
                    for r, o in cost[j - 1][i - 1].items():
                        relax(r + (selection[j - 1] != source[a + i - 1]), o)
                if j:
                    for r, o in cost[j - 1][i].items():
                        relax(r + 1, o)
                if i:
                    for r, o in cost[j][i - 1].items():
                        relax(r, o + 1)
        for i in range(width + 1):
            for r, o in cost[n][i].items():
                best = r + o if best is None else min(best, r + o)
    return best


def _interval_admits(source: str, selection: str, repairs: int, omissions: int) -> bool:
    """Whether all of ``source`` aligns with ``selection`` using ≤ repairs and ≤ omissions."""
    n, m = len(selection), len(source)
    inf = 1 << 30
    cost = [[[inf] * (repairs + 1) for _ in range(m + 1)] for _ in range(n + 1)]
    cost[0][0][0] = 0
    for j in range(n + 1):
        for i in range(m + 1):
            for r in range(repairs + 1):
                c = cost[j][i][r]
                if j and i:
                    rr = r - (selection[j - 1] != source[i - 1])
                    if rr >= 0:
                        c = min(c, cost[j - 1][i - 1][rr])
                if j and r:
                    c = min(c, cost[j - 1][i][r - 1])
                if i:
                    c = min(c, cost[j][i - 1][r] + 1)
                cost[j][i][r] = c
    return min(cost[n][m]) <= omissions


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=st.text("abc", max_size=12), selection=st.text("abcd", min_size=1, max_size=9))
def test_alignment_agrees_with_a_brute_force_reference(source, selection):
    expected = _reference(source, selection)
    got = align(source, selection)
    assert (got is None) == (expected is None)
    if got is not None:
        start, end, repairs, omissions = got
        assert repairs + omissions == expected  # the fewest edits, as the reference finds
        assert repairs <= edit_budgets(len(selection)).repairs
        assert _interval_admits(source[start:end], selection, repairs, omissions)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), source=st.text(min_size=1, max_size=80))
def test_every_substring_matches_exactly_at_an_equal_range(data, source):
    i = data.draw(st.integers(0, len(source) - 1))
    j = data.draw(st.integers(i + 1, len(source)))
    assume(normalise(source[i:j]))
    m = source_text_matches(source, source[i:j])
    assert m is not None and m.exact
    assert normalise(source[m.start:m.end]) == normalise(source[i:j])


def test_random_text_is_not_grounded_in_unrelated_text():
    rng = random.Random(7)
    source = " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6)) for _ in range(300))
    quote = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(60))
    assert source_text_matches(source, quote) is None


# -- excerpts and span attribution ---------------------------------------------------------------


UNITS = {
    "u1": "Chapter text: Alice met Bob in Paris. 東京で会った😀.",
    "u2": "Prefix that is not in any fragment. The Lighthouse keeper Carol watched the sea.",
    "u3": "Dinner was late; the tide 😀 was high.",
}


def _windows():
    return build_windows("parse-1", UNITS, [
        [("u1", 14, len(UNITS["u1"])), ("u2", 36, 60)],
        [("u2", 60, len(UNITS["u2"]))],
        [("u3", 0, len(UNITS["u3"]))],
    ], section_path=("Book", "One"))


def test_excerpts_group_windows_in_ordinal_order():
    table = _windows()
    shuffled = table.take([2, 0, 1])
    excerpts = build_excerpts(shuffled, excerpt_windows=2)
    assert [len(e.window_ids) for e in excerpts] == [2, 1]
    assert list(excerpts[0].window_ids) == table.column("window_id").to_pylist()[:2]
    assert excerpts[0].section_path == ("Book", "One")
    assert excerpts[0].text == FRAGMENT_SEPARATOR.join(table.column("text").to_pylist()[:2])
    for excerpt in excerpts:
        assert excerpt.text == FRAGMENT_SEPARATOR.join(f.text for f in excerpt.fragments)
        for f in excerpt.fragments:
            assert f.text == UNITS[f.unit_id][f.start_char:f.end_char]
            assert excerpt.text[f.excerpt_start:f.excerpt_start + len(f.text)] == f.text


def test_excerpts_refuse_rows_that_break_the_contract():
    table = _windows()
    with pytest.raises(ValueError):
        build_excerpts(table, excerpt_windows=0)
    other = build_windows("parse-2", UNITS, [[("u3", 0, 5)]])
    import pyarrow as pa
    with pytest.raises(ExcerptError):
        build_excerpts(pa.concat_tables([table, other]), 2)
    rows = table.to_pylist()
    rows[0]["text"] += "!"
    with pytest.raises(ExcerptError):
        build_excerpts(pa.Table.from_pylist(rows, schema=table.schema), 2)


def _assert_round_trips(spans):
    for s in spans:
        unit = UNITS[s.unit_id]
        assert s.text_hash == text_hash(unit[s.start_char:s.end_char])
        assert (s.start_utf16, s.end_utf16) == (utf16_offset(unit, s.start_char), utf16_offset(unit, s.end_char))


def test_a_match_maps_to_the_unit_range_it_came_from():
    (excerpt, _) = build_excerpts(_windows(), 2)
    grounding = ExcerptGrounding(excerpt.text, excerpt.fragments)
    spans = support_spans(excerpt.fragments, grounding.ground("東京で会った"))
    assert len(spans) == 1 and spans[0].unit_id == "u1"
    assert UNITS["u1"][spans[0].start_char:spans[0].end_char] == "東京で会った"
    assert spans[0].start_utf16 == spans[0].start_char  # no astral character before it
    spans = support_spans(excerpt.fragments, grounding.ground("the lighthouse keeper"))
    assert [(s.unit_id, UNITS["u2"][s.start_char:s.end_char]) for s in spans] == [("u2", "The Lighthouse keeper")]
    _assert_round_trips(spans)


def test_a_quote_spanning_two_fragments_keeps_every_fragment():
    (excerpt, _) = build_excerpts(_windows(), 2)
    grounding = ExcerptGrounding(excerpt.text, excerpt.fragments)
    # "東京で会った😀." ends u1's fragment, "The Lighthouse keeper" starts the next one (u2);
    # n = 24 allows 4 repairs, so neither fragment alone can absorb the other's 6 or 19 characters.
    matches = grounding.ground("東京で会った😀. The Lighthouse keeper")
    assert matches == ()  # grounded in the excerpt, matched by no single fragment
    spans = support_spans(excerpt.fragments, matches or None)
    assert [(s.unit_id, s.start_char, s.end_char) for s in spans] == [
        (f.unit_id, f.start_char, f.end_char) for f in excerpt.fragments]
    _assert_round_trips(spans)
    assert grounding.ground("Zebras compose symphonies") is None


def test_a_name_in_several_fragments_keeps_each_of_them():
    units = {"a": "Alice rowed.", "b": "Later, alice slept."}
    table = build_windows("p", units, [[("a", 0, 12), ("b", 0, 19)]])
    (excerpt,) = build_excerpts(table, 1)
    spans = support_spans(excerpt.fragments, ExcerptGrounding(excerpt.text, excerpt.fragments).ground("Alice"))
    assert [(s.unit_id, units[s.unit_id][s.start_char:s.end_char]) for s in spans] == [("a", "Alice"), ("b", "alice")]


_TEXT = st.text(alphabet=st.sampled_from(list("ab cé.\n東京😀İ")), min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), texts=st.lists(_TEXT, min_size=1, max_size=5))
def test_spans_round_trip_to_unit_slices(data, texts):
    units = {f"u{k}": t for k, t in enumerate(texts)}
    fragments = []
    for uid, t in units.items():
        s = data.draw(st.integers(0, len(t)))
        e = data.draw(st.integers(s, len(t)))
        fragments.append((uid, s, e))
    per_window = data.draw(st.integers(1, 3))
    windows = [fragments[i:i + per_window] for i in range(0, len(fragments), per_window)]
    table = build_windows("p", units, windows)
    for excerpt in build_excerpts(table, data.draw(st.integers(1, 3))):
        assert excerpt.text == FRAGMENT_SEPARATOR.join(f.text for f in excerpt.fragments)
        k = data.draw(st.integers(0, len(excerpt.fragments) - 1))
        f = excerpt.fragments[k]
        assume(f.text)
        i = data.draw(st.integers(0, len(f.text) - 1))
        j = data.draw(st.integers(i + 1, len(f.text)))
        quote = f.text[i:j]
        matches = ExcerptGrounding(excerpt.text, excerpt.fragments).ground(quote)
        if not normalise(quote):
            assert matches is None
            continue
        assert matches and k in [m.fragment for m in matches]
        spans = support_spans(excerpt.fragments, matches)
        for span in spans:
            unit = units[span.unit_id]
            assert span.text_hash == text_hash(unit[span.start_char:span.end_char])
            assert span.start_utf16 == utf16_offset(unit, span.start_char)
            assert span.end_utf16 == utf16_offset(unit, span.end_char)
            assert normalise(quote) in normalise(unit[span.start_char:span.end_char])


def test_exact_evidence_is_preferred_to_fuzzy_evidence():
    units = {"a": "Alice rowed.", "b": "Alicia slept."}
    table = build_windows("p", units, [[("a", 0, 12), ("b", 0, 13)]])
    (excerpt,) = build_excerpts(table, 1)
    grounding = ExcerptGrounding(excerpt.text, excerpt.fragments)
    # "alice" is in fragment a exactly; it also aligns with "alici(a)" in b by one substitution
    assert [m.fragment for m in grounding.ground("Alice")] == [0]
    # no exact match anywhere: every fragment that passes the bounded alignment is kept
    assert [m.fragment for m in grounding.ground("Alicx")] == [0, 1]
    assert grounding.ground("Alicx", fuzzy=False) is None
