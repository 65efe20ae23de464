"""Tests for the fine chunker (fabric_assets.chunking.fine_chunks.pack_fine_chunks)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_assets.chunking.fine_chunks import (
    HEADINGS,
    MAX_TOKEN_CHARS,
    SEPARATOR,
    ChunkInputUnit,
    FineChunk,
    Fragment,
    counted_spans,
    pack_fine_chunks,
)

_WORD = re.compile(r"\S+")


def word_spans(texts: list[str]) -> list[list[tuple[int, int]]]:
    """Fake tokenizer: one token per whitespace-separated word."""
    return [[m.span() for m in _WORD.finditer(t)] for t in texts]


def char_spans(texts: list[str]) -> list[list[tuple[int, int]]]:
    """Fake tokenizer: one token per non-whitespace character."""
    return [[(i, i + 1) for i, c in enumerate(t) if not c.isspace()] for t in texts]


TOKENIZERS = {"word": word_spans, "char": char_spans}


def U(uid: str, text: str, kind: str = "paragraph", section: tuple[str, ...] = ()) -> ChunkInputUnit:
    return ChunkInputUnit(uid, kind, text, section)


def check_invariants(units: list[ChunkInputUnit], chunks: list[FineChunk], spans_fn, max_tokens: int) -> None:
    by_id = {u.unit_id: u for u in units}
    index = {u.unit_id: i for i, u in enumerate(units)}
    spans = dict(zip((u.unit_id for u in units), spans_fn([u.text for u in units])))

    def n_tokens(uid: str, s: int, e: int) -> int:
        return sum(1 for a, b in spans[uid] if s <= a and b <= e)

    # ordinals
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        # the fragment contract
        assert c.fragments, "chunk without fragments"
        assert c.text == SEPARATOR.join(by_id[f.unit_id].text[f.start_char:f.end_char] for f in c.fragments)
        # token cap and the count itself
        assert 1 <= c.token_count <= max_tokens
        expected = sum(max(n_tokens(f.unit_id, f.start_char, f.end_char), 1) for f in c.fragments)
        assert c.token_count == expected
        for f in c.fragments:
            assert 0 <= f.start_char < f.end_char <= len(by_id[f.unit_id].text)
        # sections: only a leading heading may come from another section
        for pos, f in enumerate(c.fragments):
            u = by_id[f.unit_id]
            if u.kind in HEADINGS:
                assert pos == 0, "a heading must start a new chunk"
            else:
                assert u.section_path == c.section_path, "chunk mixes two sections"
        if all(by_id[f.unit_id].kind in HEADINGS for f in c.fragments):
            assert c.section_path == by_id[c.fragments[0].unit_id].section_path
    # reading order: fragments strictly increasing, non-overlapping
    flat = [f for c in chunks for f in c.fragments]
    keys = [(index[f.unit_id], f.start_char, f.end_char) for f in flat]
    for (ua, sa, ea), (ub, sb, eb) in zip(keys, keys[1:]):
        assert (ua, sa) < (ub, sb)
        if ua == ub:
            assert ea <= sb
    # coverage: every non-whitespace character exactly once
    for u in units:
        covered = [0] * len(u.text)
        for f in flat:
            if f.unit_id == u.unit_id:
                for i in range(f.start_char, f.end_char):
                    covered[i] += 1
        for i, ch in enumerate(u.text):
            if not ch.isspace():
                assert covered[i] == 1, f"char {i} {ch!r} of {u.unit_id} covered {covered[i]} times"
            else:
                assert covered[i] <= 1
    # units that fit are never split
    for u in units:
        frags = [f for f in flat if f.unit_id == u.unit_id]
        if max(len(spans[u.unit_id]), 1) <= max_tokens:
            assert frags == [Fragment(u.unit_id, 0, len(u.text))]


# --------------------------------------------------------------------------
# Examples


def test_empty_input():
    """guards against: crashing or emitting an empty chunk for no units."""
    assert pack_fine_chunks([], word_spans, 10) == []


def test_max_tokens_must_be_positive():
    """guards against: an infinite loop / empty chunks with max_tokens 0."""
    with pytest.raises(ValueError):
        pack_fine_chunks([U("a", "x")], word_spans, 0)


def test_packs_greedily_in_order():
    """guards against: one unit per chunk, or packing past the cap."""
    units = [U("a", "one two"), U("b", "three"), U("c", "four five six"), U("d", "seven")]
    chunks = pack_fine_chunks(units, word_spans, 4)
    assert [c.text for c in chunks] == ["one two\n\nthree", "four five six\n\nseven"]
    assert [c.token_count for c in chunks] == [3, 4]
    assert chunks[0].fragments == (Fragment("a", 0, 7), Fragment("b", 0, 5))
    check_invariants(units, chunks, word_spans, 4)


def test_heading_starts_chunk_and_glues_to_following_text():
    """guards against: a heading left at the end of the previous chunk, or separated from its text."""
    units = [
        U("p0", "intro text", section=()),
        U("h1", "Methods", kind="heading", section=("Methods",)),
        U("p1", "we did things", section=("Methods",)),
    ]
    chunks = pack_fine_chunks(units, word_spans, 50)
    assert [[f.unit_id for f in c.fragments] for c in chunks] == [["p0"], ["h1", "p1"]]
    assert chunks[1].section_path == ("Methods",)


def test_heading_glued_even_if_text_reports_another_section():
    """guards against: the glue rule being dropped when a heading's section path differs from its text's."""
    units = [U("h", "Title", kind="heading", section=()), U("p", "body text", section=("Title",))]
    chunks = pack_fine_chunks(units, word_spans, 50)
    assert len(chunks) == 1
    assert chunks[0].section_path == ("Title",)


def test_consecutive_headings_each_start_a_chunk():
    """guards against: a heading appended to an open chunk."""
    units = [U("h1", "A", kind="heading", section=("A",)), U("h2", "B", kind="heading", section=("A", "B")), U("p", "text", section=("A", "B"))]
    chunks = pack_fine_chunks(units, word_spans, 50)
    assert [[f.unit_id for f in c.fragments] for c in chunks] == [["h1"], ["h2", "p"]]


def test_section_change_starts_chunk():
    """guards against: a chunk spanning two sections."""
    units = [U("a", "x y", section=("S1",)), U("b", "z", section=("S2",))]
    chunks = pack_fine_chunks(units, word_spans, 50)
    assert [c.section_path for c in chunks] == [("S1",), ("S2",)]


def test_glue_only_once_after_heading():
    """guards against: glue staying active after the first text unit (a later section change must split)."""
    units = [
        U("h", "H", kind="heading", section=("A",)),
        U("p1", "t1", section=("B",)),
        U("p2", "t2", section=("C",)),
    ]
    chunks = pack_fine_chunks(units, word_spans, 50)
    assert [[f.unit_id for f in c.fragments] for c in chunks] == [["h", "p1"], ["p2"]]


def test_heading_not_glued_when_it_would_overflow():
    """guards against: the glue rule ignoring the token cap."""
    units = [U("h", "a b", kind="heading"), U("p", "c d e")]
    chunks = pack_fine_chunks(units, word_spans, 4)
    assert [[f.unit_id for f in c.fragments] for c in chunks] == [["h"], ["p"]]
    check_invariants(units, chunks, word_spans, 4)


def test_long_unit_split_prefers_sentence_end():
    """guards against: splitting mid-sentence when a sentence end is available in the window's second half."""
    text = "a b c. d e f g h"
    chunks = pack_fine_chunks([U("u", text)], word_spans, 4)
    assert [c.text for c in chunks] == ["a b c.", "d e f g", "h"]
    assert [c.token_count for c in chunks] == [3, 4, 1]
    check_invariants([U("u", text)], chunks, word_spans, 4)


def test_long_unit_pieces_trimmed_and_contiguous():
    """guards against: pieces starting/ending in whitespace, or gaps between pieces."""
    text = "  one  two\n three   four five  "
    units = [U("u", text)]
    chunks = pack_fine_chunks(units, word_spans, 2)
    for c in chunks:
        assert c.text == c.text.strip()
    check_invariants(units, chunks, word_spans, 2)


def test_long_unit_flushes_open_chunk_first():
    """guards against: a split piece appended to an open chunk (mixing and exceeding the cap)."""
    units = [U("a", "x"), U("b", "1 2 3 4 5"), U("c", "y")]
    chunks = pack_fine_chunks(units, word_spans, 3)
    assert [[f.unit_id for f in c.fragments] for c in chunks] == [["a"], ["b"], ["b"], ["c"]]
    check_invariants(units, chunks, word_spans, 3)


def test_separator_is_blank_line():
    """guards against: the separator drifting from the fragment contract in schema.FRAGMENT_SEPARATOR."""
    assert SEPARATOR == "\n\n"


def test_astral_and_cjk_offsets_are_scalars():
    """guards against: fragment offsets in UTF-16 units or bytes."""
    text = "😀😀 署名付き 𝔘𝔫𝔦"
    units = [U("u", text)]
    chunks = pack_fine_chunks(units, char_spans, 3)
    check_invariants(units, chunks, char_spans, 3)
    # Cuts prefer the space before 署 and before 𝔘 (word boundaries in the window's second half).
    # 署名付 sits at scalar offsets 3..6 (UTF-16 would be 5..8, UTF-8 bytes 9..18).
    assert [c.text for c in chunks] == ["😀😀", "署名付", "き", "𝔘𝔫𝔦"]
    assert chunks[1].fragments[0] == Fragment("u", 3, 6)
    assert chunks[3].fragments[0] == Fragment("u", 8, 11)


# --------------------------------------------------------------------------
# Property

_WORDS = st.sampled_from(["alpha", "beta.", "γάμμα", "署名", "トークン。", "😀", "x!", "y?", "z;", "cafe\u0301", "-", "1"])
_WS = st.sampled_from([" ", "  ", "\n", "\t", " \n "])


@st.composite
def unit_texts(draw):
    words = draw(st.lists(_WORDS, min_size=1, max_size=14))
    parts = [draw(_WS) if draw(st.booleans()) else ""]
    for w in words:
        parts += [w, draw(_WS)]
    if not draw(st.booleans()):
        parts.pop()
    return "".join(parts)


@st.composite
def unit_lists(draw):
    n = draw(st.integers(min_value=0, max_value=12))
    sections = [(), ("A",), ("A", "B"), ("C",)]
    return [
        ChunkInputUnit(
            f"u{i:03d}",
            draw(st.sampled_from(["paragraph", "paragraph", "heading", "list_item"])),
            draw(unit_texts()),
            draw(st.sampled_from(sections)),
        )
        for i in range(n)
    ]


@settings(max_examples=150, deadline=None)
@given(unit_lists(), st.integers(min_value=1, max_value=12), st.sampled_from(sorted(TOKENIZERS)))
def test_chunk_invariants_property(units, max_tokens, tok):
    """guards against: text/fragment mismatch, cap overflow, lost or duplicated characters, out-of-order
    chunks, mixed sections, a heading not starting a chunk, non-contiguous ordinals."""
    spans_fn = TOKENIZERS[tok]
    chunks = pack_fine_chunks(units, spans_fn, max_tokens)
    check_invariants(units, chunks, spans_fn, max_tokens)


@settings(max_examples=100, deadline=None)
@given(unit_lists(), st.integers(min_value=1, max_value=12))
def test_chunks_are_maximally_packed(units, max_tokens):
    """guards against: flushing a chunk that the next whole unit (same section, not a heading) would still fit."""
    chunks = pack_fine_chunks(units, word_spans, max_tokens)
    by_id = {u.unit_id: u for u in units}
    n = {u.unit_id: max(len(s), 1) for u, s in zip(units, word_spans([u.text for u in units]))}
    for c1, c2 in zip(chunks, chunks[1:]):
        last, first = c1.fragments[-1], c2.fragments[0]
        u_last, u_first = by_id[last.unit_id], by_id[first.unit_id]
        whole = lambda f: f.start_char == 0 and f.end_char == len(by_id[f.unit_id].text)  # noqa: E731
        if not (whole(last) and whole(first)) or n[u_last.unit_id] > max_tokens or n[u_first.unit_id] > max_tokens:
            continue
        if u_first.kind == "heading":
            continue
        only_heading = all(by_id[f.unit_id].kind == "heading" for f in c1.fragments)
        if only_heading or u_first.section_path == c1.section_path:
            assert c1.token_count + n[u_first.unit_id] > max_tokens


def test_deterministic():
    """guards against: nondeterministic packing (set/dict iteration order)."""
    units = [U(f"u{i}", f"w{i} " * (i % 5 + 1), section=(str(i % 3),)) for i in range(30)]
    assert pack_fine_chunks(units, word_spans, 6) == pack_fine_chunks(units, word_spans, 6)


# --------------------------------------------------------------------------
# The real tokenizer (HF tokenizer only; the embedding model is not loaded)


@pytest.fixture(scope="module")
def real_spans():
    from fabric_resources.models.embedder import shared_embedder

    try:
        return shared_embedder().token_spans
    except Exception as exc:  # pragma: no cover - the package ships the tokenizer files
        pytest.skip(f"tokenizer not available: {exc}")


def test_real_tokenizer_invariants(real_spans):
    """guards against: chunker invariants that only hold for the fake tokenizers (word pieces, CJK, emoji)."""
    units = [
        U("h", "Authentication tokens", kind="heading", section=("Auth",)),
        U("p1", "Signed tokens (JWT) carry claims; verification uses the issuer's public key. " * 3, section=("Auth",)),
        U("p2", "署名付きトークンを持つクライアントは、有効期限まで再認証なしでアクセスできる。" * 2, section=("Auth",)),
        U("p3", "Ünïcödé café naïve — emoji 😀 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 text.", section=("Misc",)),
    ]
    chunks = pack_fine_chunks(units, real_spans, 24)
    assert len(chunks) > 3
    check_invariants(units, chunks, real_spans, 24)


def test_real_tokenizer_leading_untokenized_char_kept(real_spans):
    """guards against: losing non-whitespace characters before the first token of a unit that is split."""
    text = "\ufffd" + " word" * 40
    assert real_spans([text])[0][0] == (2, 6)  # the tokenizer gives U+FFFD no span; first token is "word"
    units = [U("u", text)]
    chunks = pack_fine_chunks(units, real_spans, 8)
    covered = {i for c in chunks for f in c.fragments for i in range(f.start_char, f.end_char)}
    assert 0 in covered


#: Grapheme clusters of several code points: a Thai syllable with its vowel sign and tone mark, a
#: decomposed Hangul syllable, a family emoji joined by ZWJ, a thumb with a skin tone, a flag (two
#: regional indicators), an e with three combining accents, a Devanagari conjunct.
_CLUSTERS = ["เที่ย", "ที่", "\u1112\u1161\u11ab", "👨\u200d👩\u200d👧", "👍🏽", "🇯🇵",
             "e\u0301\u0302\u0303", "क्ष", "a", "b"]


def _grapheme_starts(text: str) -> set[int]:
    import regex

    return {m.start() for m in regex.finditer(r"\X", text)} | {len(text)}


def test_a_long_unit_is_never_cut_inside_a_grapheme(real_spans):
    """guards against (left open since trial 13a): a long unit cut at a word piece that starts
    inside a cluster — Thai, written without spaces between words; decomposed Hangul; a joined or
    skin-toned emoji — so the next chunk began with a vowel sign or a joiner cut from its letter
    (13 of the 19 cuts of these four texts before chunker fine-v5)."""
    import unicodedata

    texts = ["เชียงใหม่เป็นเมืองที่มีประวัติศาสตร์ยาวนานและมีวัดวาอารามมากมายผู้คนเดินทางมาท่องเที่ยวทุกปี" * 200,
             "हिन्दीभाषाकीलिपिदेवनागरीहैऔरयहबहुतपुरानीहै" * 400, "👨\u200d👩\u200d👧\u200d👦🏳️\u200d🌈👍🏽" * 2000,
             unicodedata.normalize("NFD", "한국어문장입니다띄어쓰기없이길게" * 600)]
    units = [U(f"u{i}", text) for i, text in enumerate(texts)]
    chunks = pack_fine_chunks(units, real_spans, 128)
    assert len(chunks) >= 2 * len(texts)  # every text is cut
    # check_invariants counts raw word pieces, and these texts are counted in 32-character spans:
    # the pieces are checked here instead (in order, nothing lost, under the cap).
    for u in units:
        pieces = [(f.start_char, f.end_char) for c in chunks for f in c.fragments if f.unit_id == u.unit_id]
        assert "".join(u.text[a:b] for a, b in pieces) == u.text
        starts = _grapheme_starts(u.text)
        assert all(a in starts and b in starts for a, b in pieces), u.unit_id
    assert all(c.token_count <= 128 and c.text == u.text[c.fragments[0].start_char:c.fragments[0].end_char]
               for c in chunks for u in units if u.unit_id == c.fragments[0].unit_id)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_CLUSTERS + [" "]), min_size=1, max_size=120),
       st.integers(min_value=1, max_value=12), st.sampled_from(sorted(TOKENIZERS)))
def test_cuts_fall_on_grapheme_boundaries_property(clusters, max_tokens, tok):
    """guards against: a cut inside a cluster with either fake tokenizer — the per-character one
    puts a token boundary inside every cluster, the per-word one makes words of over 32 characters
    that the counting cuts — while a window wholly inside one cluster still advances."""
    import regex

    text = "".join(clusters)
    if not text.strip():
        return
    units = [U("u", text)]
    spans_fn = TOKENIZERS[tok]
    chunks = pack_fine_chunks(units, spans_fn, max_tokens)
    starts = _grapheme_starts(text)
    # A cluster of more tokens than the cap (one per character) cannot be kept whole.
    unavoidable = tok == "char" and max(len(m.group()) for m in regex.finditer(r"\X", text)) > max_tokens
    pieces = [(f.start_char, f.end_char) for c in chunks for f in c.fragments]
    assert all(b <= a2 for (_, b), (a2, _) in zip(pieces, pieces[1:]))  # in order, no overlap
    assert "".join("".join(text[a:b].split()) for a, b in pieces) == "".join(text.split())  # only spaces left out
    assert all(c.token_count <= max_tokens for c in chunks)
    assert unavoidable or all(a in starts and b in starts for a, b in pieces), (pieces, text)

def test_chunk_cap_follows_the_documents_routing():
    from fabric_assets.chunks.assets import chunk_cap
    from fabric_resources.config import FabricConfig

    cfg = FabricConfig()
    assert chunk_cap(cfg, ["The lighthouse keeper", "kept the light."]) == cfg.chunking.max_tokens
    assert chunk_cap(cfg, ["梅雨", "梅雨（つゆ、ばいう）は、東アジアの気象現象である。"]) == cfg.chunking.multilingual_max_tokens
    off = FabricConfig.model_validate({"dense": {"multilingual": False}})
    assert chunk_cap(off, ["梅雨（つゆ、ばいう）は気象現象。"]) == off.chunking.max_tokens


# --------------------------------------------------------------------------
# The cap holds whatever the input's shape (issue 13, item 9)

HOSTILE = {
    "one long word": "x" * 40_000,
    "replacement characters": "\ufffd" * 10_000 + " end",
    "a run of spaces": "a" + " " * 10_000 + "b",
    "controls": "\x07" * 10_000 + "word",
    "emoji": "😀" * 3_000,
    "long words": ("word" * 30 + " ") * 200,
    "a url": "https://example.com/" + "a/" * 3_000,
    "prose": "The keeper wrote the tide tables in a green ledger. " * 300,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_token_cap_bounds_every_chunk_whatever_the_shape(real_spans, name):
    """guards against: WordPiece's single [UNK] for a word over 100 characters (or characters it
    drops, like U+FFFD) counting as one token, so a 20 MB line became one chunk; cuts that lose
    text."""
    text = HOSTILE[name]
    chunks = pack_fine_chunks([U("u", text)], real_spans, 128)
    assert all(c.token_count <= 128 and len(c.text) < 2 * MAX_TOKEN_CHARS * 128 for c in chunks)
    frags = [f for c in chunks for f in c.fragments]
    assert all(c.text == text[f.start_char:f.end_char] for c in chunks for f in c.fragments)
    assert text[:frags[0].start_char].strip() == "" and text[frags[-1].end_char:].strip() == ""
    assert all(text[a.end_char:b.start_char].strip() == "" for a, b in zip(frags, frags[1:]))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.text(alphabet="ab \ufffd", max_size=300), st.integers(2, 12))
def test_counted_spans_are_short_and_close_together(text, max_chars):
    """guards against: a counted token longer than the bound, or a long stretch between two."""
    raw = word_spans([text.replace("\ufffd", " ")])[0]  # U+FFFD as a character the tokenizer drops
    spans = counted_spans(text, raw, max_chars)
    assert all(0 <= s <= e <= len(text) and e - s <= max_chars for s, e in spans)
    assert [s for s, _ in spans] == sorted(s for s, _ in spans)
    edges = [0] + [x for span in spans for x in span] + [len(text)]
    assert all(b - a < max_chars for a, b in zip(edges[0::2], edges[1::2]))  # the gaps
    assert [sp for sp in spans if sp in raw] == [sp for sp in raw if sp[1] - sp[0] <= max_chars]


def test_long_unit_split_prefers_a_word_boundary_to_a_token_boundary():
    """guards against: cutting inside a word (between its word pieces) when a space is available."""
    text = "alpha betagamma"

    def pieces(texts):  # word pieces: al + pha, beta + gamma
        return [[(0, 2), (2, 5), (6, 10), (10, 15)] for _ in texts]

    # Three tokens would end inside "betagamma"; the cut moves back to the space.
    assert [c.text for c in pack_fine_chunks([U("u", text)], pieces, 3)] == ["alpha", "betagamma"]


def test_a_document_is_tokenized_a_bounded_batch_at_a_time(monkeypatch):
    # The tokenizer's word pieces are Python objects: a 55 MB text file tokenized whole held 4.4 GB
    # (hostile trial 11b). With the batch lowered, no call sees more than one batch of text (or one
    # unit longer than it), and the chunks are those of one call over every unit.
    import fabric_assets.chunking.fine_chunks as fine_chunks

    units = [U(f"u{i}", " ".join(f"w{i}x{j}" for j in range(i % 40 + 1)), section=(f"s{i // 50}",))
             for i in range(300)] + [U("long", "y" * 1000)]
    whole = pack_fine_chunks(units, word_spans, 32)
    calls: list[int] = []

    def counting(texts: list[str]) -> list[list[tuple[int, int]]]:
        calls.append(sum(map(len, texts)))
        return word_spans(texts)

    monkeypatch.setattr(fine_chunks, "TOKENIZE_BATCH_CHARS", 400)
    assert pack_fine_chunks(units, counting, 32) == whole
    assert len(calls) > 10 and max(calls) == 1000  # the 1,000-character unit alone; every other call ≤ 400
    assert sorted(calls)[-2] <= 400 and sum(calls) == sum(len(u.text) for u in units)


def test_a_new_page_or_slide_starts_a_chunk_and_a_unit_over_a_page_break_carries_on():
    """guards against (hostile trial 13c): a chunk packing the text of pages 1 to 4 of a PDF (or
    slides 1 to 3 of a deck), so a phrase on page 2 was cited "pp. 1–4" and one in slide 3's notes
    "slide 1 > Subtitle 2". A heading at the foot of a page still travels with the text under it,
    and units of formats without pages pack as before."""
    from fabric_assets.chunking.records import unit_place

    def P(uid, place, kind="paragraph"):
        return ChunkInputUnit(uid, kind, f"words of {uid}", (), place)

    units = [P("a", (1, 1)), P("b", (1, 2)), P("c", (2, 2)), P("d", (3, 3)), P("h", (3, 3), "heading"),
             P("e", (4, 4)), P("s1", (1, 1)), P("s1n", (1, 1))]
    chunks = pack_fine_chunks(units, word_spans, 100)
    assert [[f.unit_id for f in c.fragments] for c in chunks] == [["a", "b", "c"], ["d"], ["h", "e"], ["s1", "s1n"]]
    check_invariants(units, chunks, word_spans, 100)
    plain = [U(x, f"words of {x}") for x in "abcd"]
    assert [[f.unit_id for f in c.fragments] for c in pack_fine_chunks(plain, word_spans, 100)] == [["a", "b", "c", "d"]]
    assert unit_place('{"page": 2, "page_end": 3, "bbox": [0, 0, 1, 1]}') == (2, 3)
    assert unit_place('{"slide": 4, "shape_id": 2}') == (4, 4)
    assert unit_place('{"slide": true}') is None and unit_place('{"element_path": "/html/body/p"}') is None


def test_a_slide_title_travels_with_the_slides_text():
    """guards against (hostile trial 13c): a slide's title packed as a chunk of its own (its section
    path is empty, the slide's text has the title as its path), so a query of the title's and the
    body's words found two halves and neither ranked as the slide."""
    units = [ChunkInputUnit("t1", "slide_title", "Fleet review", (), (1, 1)),
             ChunkInputUnit("b1", "paragraph", "logistics office", ("Fleet review",), (1, 1)),
             ChunkInputUnit("n1", "speaker_note", "thank the depots", ("Fleet review",), (1, 1)),
             ChunkInputUnit("t2", "slide_title", "Tyres", (), (2, 2)),
             ChunkInputUnit("b2", "paragraph", "pressure", ("Tyres",), (2, 2))]
    chunks = pack_fine_chunks(units, word_spans, 100)
    assert [[f.unit_id for f in c.fragments] for c in chunks] == [["t1", "b1", "n1"], ["t2", "b2"]]
    check_invariants(units, chunks, word_spans, 100)
