"""The index's word and substring channels and the scan fallback match the same chunks (trial 15b):
a seeded, bounded property test over one small real home, cut into many chunk and window seams,
with single words, function words, phrases inside a chunk, across a chunk seam and across a
window seam, exclusions, filters and hostile queries; and every lexical hit's highlight is exact.

Scores differ by design (the scan has no BM25 statistics), so sets of chunk IDs are compared."""

from __future__ import annotations

import json
import random
import time

import pytest
from conftest import ingest

from fabric_query import Fabric
from fabric_query.channels.chunk_rule import contains
from fabric_query.channels.lexical import word_tokens
from fabric_query.errors import FabricQueryError
from fabric_query.querylang import parse_query
from fabric_resources.home import FabricHome

SEED = 1515
LONG = "x" * 300
CONTENT = ["lighthouse", "keeper", "lamp", "tide", "storm", "harbour", "rope", "gull", "ledger", "beacon",
           "pilot", "anchor"]
FUNCTION = ["the", "of", "and", "to", "a", "in", "what", "about", "over", "was"]
CJK = ["灯台の守り人は毎晩ランプを灯して潮の満ち引きを記録した。",
       "嵐の夜に灯台のレンズが割れたので守り人は港から部品を取り寄せた。",
       "東京から大阪まで列車で移動して港の倉庫を見学した。"]


def _corpus(rng: random.Random) -> dict[str, str]:
    files = {}
    for d in range(6):
        words = [rng.choice(CONTENT) if rng.random() < 0.45 else rng.choice(FUNCTION)
                 for _ in range(rng.randint(60, 140))]
        sentences, i = [], 0
        while i < len(words):
            n = rng.randint(5, 12)
            sentences.append(" ".join(words[i:i + n]).capitalize() + rng.choice([".", ".", "!", "?"]))
            i += n
        files[f"{'ab'[d % 2]}/doc{d}.txt"] = " ".join(sentences) + "\n"
    files["ja/kumo.txt"] = "".join(CJK * 3) + "\n"
    # A word of 300 bytes: the word field drops it and keeps its position empty.
    files["c/long.txt"] = f"The keeper read {LONG} lamp notes by the harbour.\n"
    return files


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("agree")
    rng = random.Random(SEED)
    for rel, text in _corpus(rng).items():
        (tmp / "corpus" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / "corpus" / rel).write_text(text, encoding="utf-8")
    home = FabricHome(tmp / "home")
    # Small chunks and windows: many chunk seams and window seams in a few documents.
    home.layout.config_file.write_text(json.dumps({
        "chunking": {"max_tokens": 16, "multilingual_max_tokens": 16},
        "indexing": {"context_max_tokens": 40},
        "query": {"channel_depth": 1000}}))
    ingest(tmp / "corpus", home)
    return home


def _seams(home: FabricHome):
    """(left text, right text, same window) for every pair of chunks that follow each other."""
    chunks = home.tables.read("chunks", columns=["parse_id", "chunk_id", "ordinal", "text"]).to_pylist()
    windows = home.tables.read("context_windows", columns=["window_id", "chunk_ids"]).to_pylist()
    window_of = {c: w["window_id"] for w in windows for c in w["chunk_ids"]}
    chunks.sort(key=lambda r: (r["parse_id"], r["ordinal"]))
    return [(a["text"], b["text"], window_of.get(a["chunk_id"]) == window_of.get(b["chunk_id"]))
            for a, b in zip(chunks, chunks[1:]) if a["parse_id"] == b["parse_id"]]


def _runs(home: FabricHome) -> list[tuple[str, str, str]]:
    """Three chunks that follow each other in a document of words, the middle one of two words or more."""
    chunks = home.tables.read("chunks", columns=["parse_id", "ordinal", "text"]).to_pylist()
    chunks.sort(key=lambda r: (r["parse_id"], r["ordinal"]))
    return [(a["text"], b["text"], c["text"]) for a, b, c in zip(chunks, chunks[1:], chunks[2:])
            if a["parse_id"] == c["parse_id"] and a["text"].isascii() and len(_words(b["text"])) >= 2
            and len(_words(a["text"])) >= 2 and len(_words(c["text"])) >= 2]


def _words(text: str) -> list[str]:
    return [w.strip(".!?,") for w in text.split() if w.strip(".!?,")]


def _queries(home: FabricHome, rng: random.Random) -> list[str]:
    chunks = home.tables.read("chunks", columns=["text"]).column("text").to_pylist()
    seams = _seams(home)
    latin = [(a, b, same) for a, b, same in seams if _words(a) and _words(b) and a.isascii()]
    inside = [s for s in latin if s[2]]
    across = [s for s in latin if not s[2]]
    assert inside and across, "the home must have seams inside windows and between them"

    def seam_phrase(seam) -> str:
        a, b, _ = seam
        k, m = rng.randint(1, 3), rng.randint(1, 3)
        return '"' + " ".join(_words(a)[-k:] + _words(b)[:m]) + '"'

    def chunk_phrase() -> str:
        words = _words(rng.choice([c for c in chunks if c.isascii()]))
        i = rng.randrange(len(words))
        return '"' + " ".join(words[i:i + rng.randint(2, 4)]) + '"'

    queries = [
        # hostile
        '"..."', '"!!! ???"', "lamp lamp lamp lamp", '"the of and"', "the of and", "what about",
        '"of the"', '"to the"', "-lamp keeper", '"house keeper"', 'keeper -"the lamp"', '"' + " ".join(_words(across[0][0]) + _words(across[0][1])) + '"',
        '"灯して潮"', '"灯台"', "灯台 -レンズ", '"東京から"', "守り人 keeper", '"した。嵐"', "港 -\"倉庫\"", "守り人 keeper -keepers",
        f'"keeper read {LONG} lamp"', '"read lamp"', f'"{"y" * 300} lamp"', f'keeper -"read {LONG}"',
    ]
    # CJK phrases across every seam of the Japanese document (the text repeats: every seam's parts).
    jp = [(a, b) for a, b, _ in seams if not a.isascii() and not b.isascii()]
    queries += [f'"{a[-2:]}{b[:2]}"' for a, b in jp[:4]]
    for _ in range(36):
        kind = rng.randrange(9)
        if kind == 0:
            q = rng.choice(CONTENT)
        elif kind == 1:
            q = " ".join(rng.sample(FUNCTION, rng.randint(1, 3)))
        elif kind == 2:
            q = " ".join(rng.sample(FUNCTION, 2) + rng.sample(CONTENT, rng.randint(1, 2)))
        elif kind == 3:
            q = chunk_phrase()
        elif kind == 4:
            q = seam_phrase(rng.choice(inside))
        elif kind == 5:
            q = seam_phrase(rng.choice(across))
        elif kind == 6:
            q = f"{rng.choice(CONTENT)} -{rng.choice(CONTENT)}"
        elif kind == 7:
            q = f"{rng.choice(CONTENT)} {rng.choice(FUNCTION)} -{chunk_phrase()}"
        else:
            q = f"{seam_phrase(rng.choice(across))} path:{rng.choice('ab')}/"
        queries.append(q)
    return queries


def _lexical_sets(fabric: Fabric, query: str):
    """(chunk IDs the index's word and substring channels match, chunk IDs the scan matches, the
    pack of the index's answer)."""
    indexed = fabric.search(query, channels=["word", "substring"], debug=True, limit=50)
    scanned = fabric.search(query, channels=["scan"], debug=True, limit=50)
    assert indexed.fallback_reason is None and "word" in indexed.channels_run, query
    ids = set(indexed.channel_rankings.get("word", ())) | set(indexed.channel_rankings.get("substring", ()))
    return ids, set(scanned.channel_rankings.get("scan", ())), indexed


def _check_phrase_parts(query: str, hit) -> None:
    """For a query that is one quoted phrase of words, a hit that does not hold it whole highlights
    only the part a seam cut off: the phrase's first words ending the chunk, or its last words
    starting it (never each of its words wherever it stands)."""
    if not (query.startswith('"') and query.endswith('"') and query.count('"') == 2 and query.isascii()):
        return
    seq = word_tokens(query)
    if len(seq) < 2 or " ".join(seq) in " ".join(word_tokens(hit.text)):
        return
    segs = hit.highlights
    for i, seg in enumerate(segs):
        if not seg.highlighted:
            continue
        part = word_tokens(seg.text)
        before = word_tokens("".join(s.text for s in segs[:i]))
        after = word_tokens("".join(s.text for s in segs[i + 1:]))
        middle = not before and not after and " ".join(part) in " ".join(seq[1:-1])
        assert ((part == seq[:len(part)] and not after) or (part == seq[len(seq) - len(part):] and not before)
                or middle), (query, hit.text, seg.text)


def test_the_index_and_the_scan_match_the_same_chunks_and_highlights_are_exact(home):
    """guards against (trial 15b): the scan fallback answering other chunks than the index for the
    same query over the same release — no seam rule (a phrase across two chunks found by the index,
    not by the scan), no function-word rule (a chunk holding only ``the`` a scan match), phrases held
    as characters with spaces dropped (``"house keeper"`` matched ``lighthouse keeper``), an excluded
    phrase dropping every chunk holding any of its words, ``"..."`` matching every chunk — and a
    phrase across the seam of two context windows found by neither (now by both); and a lexical
    hit whose highlight is not its chunk's own text or highlights no query word."""
    rng = random.Random(SEED)
    fabric = Fabric(home.root)
    texts = dict(zip(*home.tables.read("chunks", columns=["chunk_id", "text"]).to_pydict().values()))
    queries = _queries(home, rng)
    started = time.monotonic()
    found_any = across_found = 0
    for query in queries:
        try:
            ids, scanned, pack = _lexical_sets(fabric, query)
        except FabricQueryError as exc:  # a query refused is refused on both paths
            with pytest.raises(type(exc)):
                fabric.search(query, channels=["scan"])
            continue
        assert ids == scanned, (query, sorted(texts[c] for c in ids ^ scanned))
        assert pack.unchecked_phrase_seams == (), query
        found_any += bool(ids)
        wanted = set(word_tokens(query))
        for h in pack.results:
            if not h.lexical:
                continue
            assert "".join(s.text for s in h.highlights) == h.text == texts[h.chunk_id], query
            marked = [s.text for s in h.highlights if s.highlighted]
            assert marked, (query, h.text)
            for seg in marked:  # every highlighted segment is query text: a query word, or CJK characters
                assert set(word_tokens(seg)) & wanted or not seg.isascii(), (query, seg)
            _check_phrase_parts(query, h)
            for excluded in parse_query(query).excluded:  # no lexical hit holds what the query excludes
                assert not contains(word_tokens(h.text), word_tokens(excluded)) or not word_tokens(excluded), (
                    query, h.text)
    for a, b, same in _seams(home):
        if not same and a.isascii() and b.isascii() and len(_words(a)) >= 2 and len(_words(b)) >= 2:
            phrase = '"' + " ".join(_words(a)[-2:] + _words(b)[:2]) + '"'
            ids, scanned, _ = _lexical_sets(fabric, phrase)
            assert ids == scanned and len(ids) >= 2, phrase
            across_found += 1
            if across_found >= 3:
                break
    # A phrase without spaces cut by a seam, inside a window or between two: both chunks, both paths.
    cut = [(a, b, same) for a, b, same in _seams(home) if not a.isascii() and not b.isascii()]
    assert {same for *_, same in cut} == {True, False}
    for a, b, _ in cut[:4]:
        phrase = f'"{a[-2:]}{b[:2]}"'
        ids, scanned, pack = _lexical_sets(fabric, phrase)
        assert ids == scanned and len(ids) >= 2, phrase
        assert {texts[h.chunk_id] for h in pack.results if h.lexical} >= {a, b}, phrase
    # A phrase longer than a chunk (a pasted passage): every chunk it runs through, both paths.
    runs = _runs(home)
    for run in runs[:: max(1, len(runs) // 4)][:4]:
        phrase = '"' + " ".join(_words(run[0])[-2:] + _words(run[1]) + _words(run[2])[:2]) + '"'
        ids, scanned, pack = _lexical_sets(fabric, phrase)
        assert ids == scanned and {texts[c] for c in ids} >= set(run), phrase
        for h in pack.results:
            _check_phrase_parts(phrase, h)
    assert found_any > len(queries) // 2 and across_found
    assert time.monotonic() - started < 60


def test_a_phrase_not_looked_for_across_every_window_boundary_is_named(home, monkeypatch):
    """guards against: the seam search's bound on the windows it reads per phrase dropping an
    occurrence cut by a window boundary silently: the pack, the agents' answer and ``fabric
    search`` name the phrase, and the scan (which reads every chunk) still finds it."""
    from fabric_query.channels import window_seams
    from fabric_query.cli_text import render_pack
    from fabric_query.server.mcp_tools import agent_answer

    fabric = Fabric(home.root)
    a, b, _ = next(s for s in _seams(home) if not s[2] and s[0].isascii() and len(_words(s[0])) >= 2
                   and len(_words(s[1])) >= 2)
    phrase = '"' + " ".join(_words(a)[-2:] + _words(b)[:2]) + '"'
    assert not fabric.search(phrase).unchecked_phrase_seams
    monkeypatch.setattr(window_seams, "SEAM_WINDOWS_CHECKED", 0)
    pack = fabric.search(phrase)
    assert pack.unchecked_phrase_seams == (" ".join(word_tokens(phrase)),)
    assert agent_answer(pack)["unchecked_phrase_seams"] == list(pack.unchecked_phrase_seams)
    assert "not looked for across context-window boundaries" in render_pack(pack.model_dump(mode="json"))[1]
    assert {texts for texts in (h.text for h in fabric.search(phrase, channels=["scan"]).results)} >= {a, b}
