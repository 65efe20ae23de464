"""Tests for highlights and offsets (fabric_query.evidence)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_query.evidence import (
    HighlightError,
    collision_free_markers,
    highlight,
    match_ranges,
    parse_marked,
    utf16_offset,
)
from fabric_query.querylang import parse_query
from fabric_query.types import HighlightSegment

MARK0_START = "\ue000FABRIC-0000000000000000-START\ue001"
MARK0_END = "\ue000FABRIC-0000000000000000-END\ue001"


def segs(passage: str, query: str) -> list[tuple[str, bool]]:
    out = highlight(passage, parse_query(query))
    assert "".join(s.text for s in out) == passage
    return [(s.text, s.highlighted) for s in out]


def hl(passage: str, query: str) -> list[str]:
    return [t for t, h in segs(passage, query) if h]


def assert_well_formed(segments: tuple[HighlightSegment, ...]) -> None:
    for s in segments:
        assert s.text, "empty segment"
    for a, b in zip(segments, segments[1:]):
        if not a.highlighted and not b.highlighted:
            raise AssertionError("two adjacent unhighlighted segments")


# --------------------------------------------------------------------------
# Reconcatenation over awkward passages

AWKWARD = [
    "token 😀 token 𝔘𝔫𝔦 token",  # emoji and astral letters
    "cafe\u0301 token e\u0301",  # combining marks
    "line one token\r\nline two token\r\n",  # CRLF
    "مرحبا token بالعالم",  # RTL Arabic
    "שלום token עולם",  # RTL Hebrew
    "a \ue000 b \ue001 token \ue000\ue001",  # the marker delimiters themselves
    f"before {MARK0_START} token {MARK0_END} after",  # a literal counter-0 marker pair
    f"{MARK0_START}{MARK0_END}token",
    "<mark>token</mark> <script>alert(1)</script>",
    "token",
    "\u200d\u200btoken\ufeff",
    "🏳️‍🌈 token 👨‍👩‍👧",
]


@pytest.mark.parametrize("passage", AWKWARD)
@pytest.mark.parametrize("query", ["token", "nomatch", "script", "mark", "token cafe"])
def test_segments_reconcatenate_exactly(passage, query):
    """guards against: highlight insertion/parsing dropping, duplicating or normalising characters."""
    out = highlight(passage, parse_query(query))
    assert "".join(s.text for s in out) == passage
    assert_well_formed(out)


def test_emoji_and_astral_neighbours_untouched():
    """guards against: surrogate-pair/astral handling shifting highlight boundaries."""
    assert segs("😀token😀 𝔘 token", "token") == [("😀", False), ("token", True), ("😀 𝔘 ", False), ("token", True)]


def test_crlf_passage():
    """guards against: CRLF being normalised to LF in segments."""
    assert segs("x\r\ntoken\r\n", "token") == [("x\r\n", False), ("token", True), ("\r\n", False)]


@pytest.mark.parametrize(
    "passage, query, word",
    [("مرحبا بالعالم", "بالعالم", "بالعالم"), ("שלום עולם", "עולם", "עולם")],
)
def test_rtl_words_highlighted(passage, query, word):
    """guards against: RTL words failing to match or being highlighted at mirrored offsets."""
    assert hl(passage, query) == [word]


def test_literal_marker_in_passage_stays_literal():
    """guards against: a passage containing Fabric's own marker text being parsed as a highlight."""
    passage = f"x {MARK0_START}evil{MARK0_END} token"
    out = segs(passage, "token")
    assert out == [(f"x {MARK0_START}evil{MARK0_END} ", False), ("token", True)]


def test_literal_marker_matching_query_still_exact():
    """guards against: markers colliding when the matched word sits right next to a literal marker."""
    passage = f"{MARK0_START}token{MARK0_END}"
    assert segs(passage, "token") == [(MARK0_START, False), ("token", True), (MARK0_END, False)]


def test_mark_and_script_stay_literal():
    """guards against: HTML in passages being interpreted or stripped, or highlighted without matching."""
    passage = "<mark>cat</mark> <script>x</script>"
    assert segs(passage, "dog") == [(passage, False)]
    assert segs(passage, "cat") == [("<mark>", False), ("cat", True), ("</mark> <script>x</script>", False)]
    assert hl(passage, "script") == ["script", "script"]


def test_no_match_is_one_plain_segment_and_empty_passage_is_empty():
    """guards against: empty segments or spurious highlights when nothing matches."""
    assert segs("nothing here", "token") == [("nothing here", False)]
    assert highlight("", parse_query("token")) == ()


def test_excluded_terms_are_not_highlighted():
    """guards against: excluded terms being highlighted as matches."""
    assert hl("keep drop", "keep -drop") == ["keep"]


def test_phrase_words_highlighted():
    """guards against: phrase content being ignored by highlighting."""
    assert hl("a signed token here", '"signed token"') == ["signed token"]


def test_a_phrase_highlights_where_its_words_run_in_order_not_each_word_anywhere():
    """guards against (hostile trial 13c): a search for "Basalt Holdings of Tarnwick" highlighting
    every "of" of the passage, and "thank the depot supervisors" every "the": the highlight must be
    the phrase the word index matched. A phrase with no such run in the passage (its words apart)
    still highlights its words; a bare term still highlights everywhere."""
    text = "1 Footnote: the quarry of Basalt Holdings of Tarnwick. Of course, of."
    assert hl(text, '"Basalt Holdings of Tarnwick" quarry') == ["quarry", "Basalt Holdings of Tarnwick"]
    assert hl("Holding the basalt, holdings, of Tarnwick", '"basalt holdings"') == ["basalt, holdings"]
    assert hl("tele and communications apart", '"tele communications"') == ["tele", "communications"]
    assert hl("of this and of that", "of") == ["of", "of"]


def test_a_phrase_cut_by_a_seam_highlights_only_its_part_at_the_passages_edge():
    """guards against (trial 15b): a chunk that holds a quoted phrase's part across a chunk seam
    highlighting each of the phrase's words wherever it stands (every "the" of the chunk), or, for
    a phrase without spaces, nothing at all in the chunk after the seam (its part has no bigram of
    the phrase); and the middle chunk of a phrase longer than a chunk left unhighlighted."""
    query = '"keeper lit the lamp"'
    assert hl("The keeper saw the lighthouse keeper", query) == ["keeper"]  # the phrase's first word, at the end
    assert hl("lit the lamp at dusk, and the tide", query) == ["lit the lamp"]  # its last words, at the start
    assert hl("lit the", '"keeper lit the lamp"') == ["lit the"]  # a middle piece: the whole passage
    assert hl("潮の満ち引きを記録した。", '"灯して潮"') == ["潮"]
    assert hl("ランプを灯して", '"灯して潮"') == ["灯して"]
    assert hl("してランプを灯して", '"灯して潮"') == ["灯して"]  # not the phrase's bigram "して" elsewhere


def test_adjacent_matches_merge():
    """guards against: overlapping/adjacent ranges producing nested or empty highlights."""
    assert match_ranges("トークントークン", parse_query("トークン")) == [(0, 8)]
    assert segs("トークントークン", "トークン") == [("トークントークン", True)]


# --------------------------------------------------------------------------
# Folding, scripts and word boundaries


def test_case_and_diacritic_folding_latin():
    """guards against: query 'cafe' failing to highlight 'Café' (precomposed)."""
    assert segs("Un Café noir", "cafe") == [("Un ", False), ("Café", True), (" noir", False)]
    assert hl("CAFÉ", "café") == ["CAFÉ"]


def test_greek_case_folding():
    """guards against: non-Latin case folding missing (αβγ vs ΑΒΓ)."""
    assert segs("ΑΒΓ δ", "αβγ") == [("ΑΒΓ", True), (" δ", False)]


def test_sharp_s_and_ligature_map_back_to_whole_source_chars():
    """guards against: one-to-many folds (ß -> ss, ﬁ -> fi) producing offsets inside the source char."""
    assert hl("Straße", "strasse") == ["Straße"]
    assert hl("ﬁle", "file") == ["ﬁle"]


def test_cjk_substring_highlight():
    """guards against: CJK highlight covering the whole unspaced run, or off-by-one at the ends."""
    assert segs("署名付きトークンを持つ", "トークン") == [("署名付き", False), ("トークン", True), ("を持つ", False)]


def test_cjk_partial_term_highlights_only_the_shared_bigrams():
    """guards against: a passage the word channel matched on shared character bigrams with nothing
    highlighted (issue 19: a lexical hit must carry its evidence), or a highlight wider than the
    bigrams the query shares (``トーク番組`` shares ``トー ーク`` with ``トークン``, not ``クン``)."""
    assert hl("署名付きトークンを持つ", "トーク番組") == ["トーク"]
    assert hl("署名付きトークンを持つ", "番組") == []


def test_a_cjk_term_is_highlighted_where_the_substring_index_matches_it_and_never_across_punctuation():
    """Property: the highlighter reads a passage as the substring index does (its tokens'
    characters: whitespace and middle dots skipped, every other punctuation or symbol a token), so
    it highlights exactly where that index matches a term (trial 12b).

    guards against: a term matched and highlighted across a clause or sentence break (``京大`` in
    ``東京、大阪`` highlighted ``京、大``; ``た本`` in ``した。本日``); only whitespace being skipped
    (``ソニーピクチャーズ`` had no highlight in ``ソニー・ピクチャーズ``)."""
    assert hl("これは東京、大阪の話", "京大") == []
    assert hl("旅をした。本日は晴れ", "た本") == []
    assert hl("これは東京、大阪の話", "京、大") == ["京、大"]
    assert hl("これは東京、大阪の話", "「大阪」") == ["大阪"]  # separators at a term's ends ask for nothing
    assert hl("ソニー・ピクチャーズ", "ソニーピクチャーズ") == ["ソニー・ピクチャーズ"]
    assert hl("東京 大阪", "京大") == ["京 大"]  # a line break in a Japanese word (PDF text) is no break


def test_a_highlight_never_cuts_a_grapheme_cluster():
    """Property: every highlighted segment begins and ends on an extended grapheme cluster boundary
    (UAX #29), so no vowel sign or tone mark is drawn apart from its consonant.

    guards against (hostile trial 13a): Thai ``เชียงใหม่`` highlighting the word channel's bigram
    ``ีย`` in ``เขียน`` (write) from its vowel sign on, cut from ``ข``: ``เข[ีย]น``. The passage's
    clusters are checked whatever is highlighted."""
    import regex

    passage = "เขียนโดยไม่เว้นวรรค ส่วนเสื่อเป็นของใช้ ในปี ๒๕๖๗ มานักท่องเที่ยวมาเชียงใหม่มาก"
    bounds = {m.start() for m in regex.finditer(r"\X", passage)} | {len(passage)}
    out = highlight(passage, parse_query("เชียงใหม่"))
    assert "".join(s.text for s in out) == passage
    at = 0
    for seg in out:
        assert at in bounds, (seg.text, [hex(ord(c)) for c in seg.text])
        at += len(seg.text)
    # Thai is read as words since stop 50: the bigram ``ีย`` of ``เขียน`` is no match any more.
    assert hl(passage, "เชียงใหม่") == ["เชียงใหม่"]


def test_cjk_single_character():
    """guards against: 1-character CJK terms not highlighting, or highlighting neighbours."""
    assert segs("日本と本日", "日") == [("日", True), ("本と本", False), ("日", True)]


@pytest.mark.parametrize("passage, query", [("한국어 문서", "하"), ("カラスが鳴く", "ガラス"), ("バスに乗る", "パス")])
def test_cjk_distinct_characters_not_highlighted(passage, query):
    """guards against: folding that merges distinct Hangul/kana characters (false highlight); the
    bigrams the terms really share (``ラス``) are the word channel's evidence and stay highlighted."""
    assert not any(passage[0] in h for h in hl(passage, query))


def test_word_boundary_english():
    """guards against: 'cat' highlighted inside 'concatenate'."""
    assert segs("concatenate the cat", "cat") == [("concatenate the ", False), ("cat", True)]
    assert hl("concatenate", "cat") == []


def test_a_word_joined_by_connector_punctuation_highlights_only_the_matched_token():
    """Property: a highlight covers the word-index tokens the query matched and no other token —
    the word index (tantivy's simple tokenizer) splits ``snake_case`` at ``_`` (and at ``‿``,
    full-width ``＿``, a keycap's enclosing mark), so the query ``case`` matched the token ``case``
    only (trial 12b).

    guards against: the highlighter's word pattern admitting connector punctuation or enclosing marks
    (``\\w``), which marked ``snake_case`` whole for ``case`` and ``ｆｏｏ＿ｂａｒ`` whole for ``bar``."""
    assert segs("call snake_case here", "case") == [("call snake_", False), ("case", True), (" here", False)]
    assert hl("see foo‿bar and ｆｏｏ＿ｂａｒ", "bar") == ["bar", "ｂａｒ"]
    assert hl("press 1\u20e3x now", "x") == ["x"]
    assert hl("read_file read", "read") == ["read", "read"]


def test_stemmed_word_highlighted():
    """guards against: highlight using a different analyzer than the word index (which stems)."""
    assert hl("cats and dogs", "cat") == ["cats"]


def test_combining_mark_stays_inside_highlight():
    """guards against: a highlight ending between a base letter and its combining mark."""
    assert hl("I like cafe\u0301 a lot", "cafe") == ["cafe\u0301"]


def test_combining_mark_reconcatenates():
    """guards against: combining marks lost or duplicated around highlights."""
    out = segs("cafe\u0301 cafe\u0301", "cafe")
    assert "".join(t for t, _ in out) == "cafe\u0301 cafe\u0301"
    assert len([t for t, h in out if h]) == 2


# --------------------------------------------------------------------------
# Markers and parse_marked


def test_collision_free_markers_default():
    """guards against: marker format changes that make markers printable/collidable text."""
    assert collision_free_markers("plain") == (MARK0_START, MARK0_END)


@pytest.mark.parametrize("passage", [MARK0_START, MARK0_END, f"a{MARK0_START}b", f"{MARK0_END}"])
def test_collision_free_markers_skip_used_counter(passage):
    """guards against: returning a marker that already occurs in the passage."""
    s, e = collision_free_markers(passage)
    assert s not in passage and e not in passage
    assert (s, e) != (MARK0_START, MARK0_END)


def test_collision_free_markers_many_collisions():
    """guards against: the counter not advancing past several used values."""
    passage = "".join(f"\ue000FABRIC-{i:016x}-START\ue001" for i in range(5))
    s, e = collision_free_markers(passage)
    assert s == "\ue000FABRIC-0000000000000005-START\ue001"
    assert s not in passage and e not in passage


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab \ue000\ue001FABRIC-0STENDR")), max_size=80))
def test_collision_free_markers_property(passage):
    """guards against: markers that occur in the passage."""
    s, e = collision_free_markers(passage)
    assert s not in passage and e not in passage and s != e


def _mk(passage: str, pieces: list[str]) -> tuple[str, str, str]:
    s, e = collision_free_markers(passage)
    return "".join(s if p == "S" else e if p == "E" else p for p in pieces), s, e


@pytest.mark.parametrize(
    "pieces, passage, msg",
    [
        (["S", "a", "S", "b", "E", "E"], "ab", "nested"),
        (["a", "E"], "a", "without start"),
        (["a", "S", "E", "b"], "ab", "empty"),
        (["a", "S", "b"], "ab", "unclosed"),
        (["a", "S", "b", "E"], "ax", "reproduce"),
    ],
)
def test_parse_marked_rejects(pieces, passage, msg):
    """guards against: malformed marked strings being accepted (nesting, unmatched, empty, unclosed, altered)."""
    marked, s, e = _mk(passage, pieces)
    with pytest.raises(HighlightError, match=msg):
        parse_marked(marked, s, e, passage)


def test_parse_marked_accepts_well_formed():
    """guards against: valid markup being rejected or mis-segmented."""
    marked, s, e = _mk("abc", ["a", "S", "b", "E", "c"])
    assert parse_marked(marked, s, e, "abc") == (
        HighlightSegment(text="a", highlighted=False),
        HighlightSegment(text="b", highlighted=True),
        HighlightSegment(text="c", highlighted=False),
    )


# --------------------------------------------------------------------------
# Properties

_PIECES = st.one_of(
    st.characters(codec="utf-8", exclude_categories=("Cs",)),
    st.sampled_from(["token", " ", "\r\n", "\ue000", "\ue001", MARK0_START, MARK0_END, "😀", "e\u0301", "トークン", "ΑΒΓ"]),
)
_TEXT = st.lists(_PIECES, max_size=20).map("".join)


@settings(max_examples=200, deadline=None)
@given(_TEXT, st.integers(min_value=0, max_value=200))
def test_utf16_offset_property(text, i):
    """guards against: UTF-16 offsets counting astral chars once, or BMP chars twice."""
    i = min(i, len(text))
    assert utf16_offset(text, i) == len(text[:i].encode("utf-16-le")) // 2


def test_utf16_offset_examples():
    """guards against: off-by-one around surrogate pairs."""
    t = "a😀b"
    assert [utf16_offset(t, i) for i in range(4)] == [0, 1, 3, 4]


@settings(max_examples=200, deadline=None)
@given(_TEXT, st.sampled_from(["token", "ΑΒΓ", "トークン", "e", "cafe", "a b", '"token token"', "FABRIC"]))
def test_highlight_reconcatenates_property(passage, query):
    """guards against: any passage (incl. marker look-alikes) failing to reconcatenate or raising."""
    out = highlight(passage, parse_query(query))
    assert "".join(s.text for s in out) == passage
    assert_well_formed(out)
    for a, b in match_ranges(passage, parse_query(query)):
        assert 0 <= a < b <= len(passage)
