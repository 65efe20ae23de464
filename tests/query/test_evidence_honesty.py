"""Evidence honesty (issue 19): every hit says whether a lexical channel matched it, a pack says when
none matched anything, dense-only hits below the calibrated floor are marked, a lexical hit always
carries a highlighted segment; Chinese traditional and simplified forms meet, offsets exact."""

from __future__ import annotations

import random
import re
import unicodedata

import pytest
from conftest import ingest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_query import Fabric
from fabric_resources.home import FabricHome
from fabric_resources.text_folding import IGNORABLE, UNSPACED, fold, fold_char, fold_with_map

FILES = {
    "light.txt": "The lighthouse keeper logged the tide every evening.\n\n"
                 "A storm broke the lamp of the lighthouse in March; the keeper mended it.\n",
    "bread.txt": "Sourdough bread needs a lively starter and patience.\n\nThe oven must be very hot.\n",
    # The Aozora text writes 犍 as a gaiji note, so only 陀多 is in the text (issue 19).
    "kumo.txt": "するとその地獄の底に、陀多と云う男が一人、ほかの罪人と一しょに蠢いている姿が見えました。\n",
    "token.txt": "トークンの署名を検証してから利用者を通します。\n\n有効期限が切れたら再発行します。\n",
    "tw.txt": "桃园结义的故事发生在涿郡。刘备、关羽、张飞在桃园中结为兄弟。\n",
    # Invisible format characters inside words: a soft hyphen and a zero-width space (German), a
    # zero-width non-joiner (Persian "I want", written with it as the orthography asks).
    "court.txt": "Das Bundes\u00adverfassungs\u200bgericht entschied über die Beschwerde.\n",
    # Latin words glued to Japanese, as Japanese prose writes them (a hostile trial, 2026-12-05: the
    # word channel matched `python`, the highlighter saw one word `これはpythonのコードです`).
    "mixed.txt": "これはPythonのコードです。Dockerを使ってデプロイします。\n",
    # Kana with its voiced mark written apart (half-width katakana, as Shift_JIS text has it; NFD,
    # as macOS writes it) and NFD Hangul (conjoining jamo): hostile trial 8b, 2026-12-05.
    "kana.txt": "ﾃﾞｰﾀﾍﾞｰｽの設定。" + unicodedata.normalize("NFD", "がぎぐの本。한국어 문서.") + "\n",
    # Indic words hold vowel signs (combining marks) that tantivy's tokenizer keeps inside a word;
    # marks spell the word: Hindi हंस (swan) is not हस (laugh), Thai หนู (mouse) not หน.
    "hi.txt": "हंस झील में तैरता है। वह ज़रूर आएगा। বাংলা ভাষা সুন্দর। தமிழ் மொழி\n",
    "thai.txt": "แมวไล่หนู\n",
    "fa.txt": "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 \u06a9\u062a\u0627\u0628 \u0628\u062e\u0648\u0627\u0646\u0645.\n",
}
ABSENT = ["zzqxv wqzzk", "quantum chromodynamics gluon", "曹操"]


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("honesty")
    folder = tmp / "corpus"
    folder.mkdir()
    for rel, text in FILES.items():
        (folder / rel).write_text(text, encoding="utf-8")
    ingest(folder, FabricHome(tmp / "home"))
    return Fabric(tmp / "home")


def _check_pack(pack):
    lexical_any = False
    for h in pack.results:
        matched = {"word", "substring", "scan"} & set(h.channels)
        assert h.lexical == bool(matched), h.chunk_id
        if h.lexical:
            lexical_any = True
            assert any(s.highlighted for s in h.highlights), (pack.query, h.text)
            assert h.highlight_missing is None
            assert not h.below_dense_floor
    assert pack.no_lexical_match == (not lexical_any and not any(
        pack.channel_rankings.get(n) for n in ("word", "substring", "scan")))


@pytest.mark.parametrize("query", ["犍陀多", "認証トークン", "桃園", "lighthouse keeper", "keeper -sourdough",
                                   '"the lamp"', "陀多 地獄", "python", "Docker デプロイ", "झील", "तैरता", "ভাষা",
                                   "தமிழ்"])
def test_lexical_hits_always_carry_a_highlight(fabric, query):
    """guards against: a lexical match with no highlighted evidence (issue 19: ``犍陀多`` and
    ``認証トークン`` came back from the word channel's bigrams with no highlighted segment; hostile
    trial 8b: Hindi ``झील``, Bengali ``ভাষা`` with none, the highlighter cutting words at vowel signs)."""
    pack = fabric.search(query, debug=True)
    assert any(h.lexical for h in pack.results), query
    _check_pack(pack)


def test_a_cjk_term_never_matches_across_punctuation_and_a_term_holding_it_does(fabric):
    """Property: the substring index gives each punctuation character a position, so a term matches
    only where its characters stand together, and a term that holds the punctuation matches there,
    highlighted (trial 12b left it matching across: ``备关`` in ``刘备、关羽``).

    guards against: a lexical hit whose evidence is two characters from different clauses (the
    substring channel matched ``备关`` across the ``、`` and the highlight showed ``备、关``)."""
    pack = fabric.search("备关", debug=True)
    assert all(not ({"substring", "word", "scan"} & set(h.channels)) for h in pack.results
               if h.citation.source_key.endswith("tw.txt")), pack.results
    pack = fabric.search("刘备、关羽", debug=True)
    hit = next(h for h in pack.results if h.citation.source_key.endswith("tw.txt"))
    assert "substring" in hit.channels
    assert [s.text for s in hit.highlights if s.highlighted] == ["刘备、关羽"]
    _check_pack(pack)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**32 - 1), st.integers(1, 4))
def test_property_no_lexical_hit_without_highlighted_evidence(fabric, seed, length):
    """guards against: any query drawn from the corpus text (a slice of any script, any length)
    yielding a lexical hit with nothing highlighted."""
    rng = random.Random(seed)
    text = rng.choice(list(FILES.values()))
    runs = [m.group() for m in re.finditer(r"\w+", text)]
    run = rng.choice(runs)
    start = rng.randrange(len(run))
    query = run[start:start + length] if UNSPACED.search(run) else " ".join(rng.sample(runs, min(length, len(runs))))
    _check_pack(fabric.search(query, debug=True))


@pytest.mark.parametrize("query", ABSENT)
def test_a_pack_says_when_no_lexical_channel_matched(fabric, query):
    """guards against: dense-only neighbours that look as confident as real matches (issue 19: absent
    words returned hits with nothing to say that none holds a query word)."""
    pack = fabric.search(query, debug=True)
    assert pack.no_lexical_match
    assert all(not h.lexical for h in pack.results)


def test_dense_only_hits_of_an_unrelated_query_are_below_the_floor(fabric):
    """guards against: no calibrated similarity floor (MiniLM 0.44): an unrelated English query's
    neighbours not marked, or a real lexical match marked."""
    pack = fabric.search("quantum chromodynamics gluon")
    assert pack.results and all(h.below_dense_floor for h in pack.results if "dense" in h.channels)
    real = fabric.search("lighthouse keeper")
    assert real.results[0].lexical and not real.results[0].below_dense_floor


def test_traditional_query_finds_simplified_text_with_exact_offsets(fabric):
    """guards against: traditional and simplified Chinese not meeting (``桃園`` ≠ ``桃园``), or a
    highlight that is not the original text's characters."""
    pack = fabric.search("桃園")
    hit = next(h for h in pack.results if h.lexical)
    assert "桃园" in hit.text and {"word", "substring"} <= set(hit.channels)
    assert [s.text for s in hit.highlights if s.highlighted] == ["桃园", "桃园"]
    assert "".join(s.text for s in hit.highlights) == hit.text


@pytest.mark.parametrize(("query", "file", "shown"), [
    ("Bundesverfassungsgericht", "court.txt", "Bundes\u00adverfassungs\u200bgericht"),
    ("bundes\u00adverfassungsgericht", "court.txt", "Bundes\u00adverfassungs\u200bgericht"),
    ("\u0645\u06cc\u062e\u0648\u0627\u0647\u0645", "fa.txt", "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"),
    ("\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645", "fa.txt", "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"),
])
def test_a_word_split_by_an_invisible_character_is_found_typed_plainly(fabric, query, file, shown):
    """guards against (hostile trial 2, 2026-12-05): a word the source splits with a soft hyphen,
    ZWSP or ZWNJ (invisible when rendered) found by no lexical channel when typed as it reads, and
    a highlight that drops the invisible characters from the source's span."""
    pack = fabric.search(query)
    hit = pack.results[0]
    assert hit.citation.source_key == f"fs:corpus/{file}" and hit.lexical and "word" in hit.channels, pack.results
    assert [s.text for s in hit.highlights if s.highlighted] == [shown]
    assert "".join(s.text for s in hit.highlights) == hit.text


@pytest.mark.parametrize(("query", "shown"), [
    ("データベース", "ﾃﾞｰﾀﾍﾞｰｽ"), ("ﾃﾞｰﾀﾍﾞｰｽ", "ﾃﾞｰﾀﾍﾞｰｽ"),
    ("がぎぐ", unicodedata.normalize("NFD", "がぎぐ")), (unicodedata.normalize("NFD", "がぎぐ"), unicodedata.normalize("NFD", "がぎぐ")),
    ("한국어", unicodedata.normalize("NFD", "한국어")),
])
def test_kana_with_a_separate_voiced_mark_and_nfd_hangul_are_found_typed_composed(fabric, query, shown):
    """guards against (hostile trial 8b, 2026-12-05): ``データベース`` typed as any IME types it
    finding nothing in half-width ``ﾃﾞｰﾀﾍﾞｰｽ`` (the mark ``ﾞ`` folded apart from its kana), NFC
    ``がぎぐ`` / ``한국어`` nothing in NFD text; and a highlight that leaves the mark or the jamo out."""
    pack = fabric.search(query, channels={"word", "substring"})
    hit = next(h for h in pack.results if h.citation.source_key == "fs:corpus/kana.txt")
    assert hit.lexical and {"word", "substring"} <= set(hit.channels), hit.channels
    assert shown in [s.text for s in hit.highlights if s.highlighted]
    assert "".join(s.text for s in hit.highlights) == hit.text
    assert fabric.resolve(hit.citation, shown_text=hit.text).status == "verified"


@pytest.mark.parametrize(("query", "file"), [
    ("罪人 -獄", "kumo.txt"), ('罪人 -"獄"', "kumo.txt"), ("罪人 -獄の底", "kumo.txt"), ("桃园 -園", "tw.txt"),
    ("署名 -ン", "token.txt"),
])
def test_an_excluded_character_without_spaces_excludes_every_text_holding_it(fabric, query, file):
    """guards against (hostile trial 8b, 2026-12-05): ``図書館 -館`` serving a text full of 館 from
    the index (the word channel looked for the unigram 館 among the text's bigrams 図書 書館) while
    the scan fallback excluded it: an exclusion that held or not by which path answered."""
    positive = fabric.search(query.split(" -")[0])
    assert any(h.citation.source_key == f"fs:corpus/{file}" and h.lexical for h in positive.results)
    for channels in (None, {"word", "substring"}, {"scan"}):
        pack = fabric.search(query, channels=channels)
        assert all(h.citation.source_key != f"fs:corpus/{file}" for h in pack.results), (channels, pack.results)


@pytest.mark.parametrize(("query", "file", "shown", "other"), [
    ("หนู", "thai.txt", "หนู", None), ("हंस", "hi.txt", "हंस", None),
    ("हस", "hi.txt", None, "झील"), ("जरूर", "hi.txt", "ज़रूर", None),
])
def test_marks_that_spell_a_word_are_kept_and_the_nukta_is_not(fabric, query, file, shown, other):
    """guards against (hostile trial 8b, 2026-12-05): Hindi ``हस`` (laugh) found and highlighted as
    ``हंस`` (swan), and ``झील -हस`` dropping a text about a swan, because folding dropped every
    combining mark in every script. The nukta still folds away (``जरूर`` finds ``ज़रूर``)."""
    key = f"fs:corpus/{file}"
    if shown is None:  # the word is not in the file: excluding it keeps the file
        pack = fabric.search(f"{other} -{query}", channels={"word", "substring"})
        assert any(h.citation.source_key == key for h in pack.results), pack.results
        assert fold(query) not in fold(FILES[file])
        return
    pack = fabric.search(query, channels={"word", "substring"})
    hit = next(h for h in pack.results if h.citation.source_key == key and h.lexical)
    assert shown in [s.text for s in hit.highlights if s.highlighted]


def test_marks_the_word_tokenizer_splits_at_still_fold_away():
    """guards against: a kept virama or Thai tone mark, where tantivy's tokenizer splits a word
    (``प्रेम`` into ``प`` and ``रेम``: the fragment ``प`` would match every word it begins)."""
    from fabric_query.channels.lexical import word_tokens

    assert len(word_tokens("प्रेम प्यार தமிழ்")) == 3
    assert fold("हंस") != fold("हस") and fold("ज़रूर") == fold("जरूर")


def test_a_separate_voiced_mark_and_conjoining_jamo_fold_with_their_character():
    """guards against: a cluster folded apart (``ｶﾞ`` → ``カ`` + a mark) or an origin map that loses
    its place after one; a mark that composes with nothing stays."""
    assert fold("ｶﾞｷﾞｸﾞ") == fold("ガギグ") == fold(unicodedata.normalize("NFD", "ガギグ")) == "ガギグ"
    assert fold_with_map("xﾃﾞｰﾀ") == ("xデータ", [0, 1, 3, 4])
    nfd = unicodedata.normalize("NFD", "한국")
    assert fold_with_map(nfd) == ("한국", [0, 3])
    assert fold("あ\u3099") == "あ\u3099" and fold("ﾞ") == "\u3099"


def test_invisible_format_characters_fold_to_nothing_with_exact_origins():
    """guards against: a folding that drops a visible character, or an origin map that loses its
    place after an ignorable one."""
    assert all(unicodedata.category(c) == "Cf" for c in IGNORABLE) and len(IGNORABLE) == 138
    folded, origin = fold_with_map("A\u00adb\u200bc\u200dD")
    assert folded == "abcd" and origin == [0, 2, 4, 6]
    # Visible format characters are not ignorable: the Arabic number sign is kept.
    assert fold("\u0600") == "\u0600" and fold("x\ufeffy") == "xy"


def test_han_folding_is_one_scalar_per_scalar():
    """guards against: a conversion that changes length (the origin map, so every highlight and
    offset, would no longer be exact); checked over every Han code point of the folded ranges."""
    ranges = [(0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3134F)]
    changed = 0
    for lo, hi in ranges:
        for cp in range(lo, hi + 1):
            ch = chr(cp)
            out = fold_char(ch)
            assert len(out) == 1, hex(cp)
            changed += out != ch
    assert changed > 5000
    assert fold("桃園 頭髮 後來 認證") == fold("桃园 头发 后来 认证") == "桃园 头发 后来 认证"
    folded, origin = fold_with_map("臺灣の桃園")
    assert folded == "台湾の桃园" and origin == list(range(5))


#: Eleven short English files and one Japanese file whose only Latin word is ``Tokyo``: its text is
#: routed to e5, so the MiniLM dense channel (the route of a Latin query) cannot rank it at all.
MIXED = {
    "light.txt": "The lighthouse keeper logged the tide every evening.\n",
    "bread.txt": "Sourdough bread needs a lively starter and patience.\n",
    "bees.txt": "Honey bees dance to tell the hive where the flowers are.\n",
    "roses.txt": "Roses need sun, rich soil and water at the roots.\n",
    "harbour.txt": "The harbour master counted the fishing boats at dusk.\n",
    "chess.txt": "A chess opening controls the centre of the board early.\n",
    "violin.txt": "The violin maker carved the scroll from seasoned maple.\n",
    "river.txt": "The river flooded the lower meadow after the spring rains.\n",
    "train.txt": "The night train to the coast leaves the city station at nine.\n",
    "clock.txt": "The clockmaker oiled the gears of the tower clock each spring.\n",
    "tea.txt": "Green tea is steeped briefly in water below boiling.\n",
    "tokyo.txt": "東京（Tokyo）は日本の首都で、多くの人が電車で通勤しています。\n",
}


@pytest.fixture(scope="module")
def mixed_root(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mixed")
    for rel, text in MIXED.items():
        (tmp / "corpus").mkdir(exist_ok=True)
        (tmp / "corpus" / rel).write_text(text, encoding="utf-8")
    ingest(tmp / "corpus", FabricHome(tmp / "home"))
    return tmp / "home"


def _mixed(root, demotion: bool) -> Fabric:
    # The fusion pinned to the one that exposed the defect (RRF k 20, dense weight 1.5): demotion must
    # hold under any weights, and under these a dense rank beats a word-only one by the most.
    FabricHome(root).layout.config_file.write_text(
        f'{{"query": {{"floor_demotion": {str(demotion).lower()}, "rrf_k": 20, "channel_weights": {{"dense": 1.5}}}}}}')
    return Fabric(root)


def test_a_lexical_match_the_dense_model_cannot_rank_outranks_unrelated_neighbours(mixed_root):
    """guards against: a word match losing to dense-only neighbours the floor calls unrelated (with
    RRF k 20 and dense weight 1.5, dense ranks 1-11 each outscore a word-only rank 1: ``Tokyo`` in a
    Japanese file fell out of the top 10 behind ten below-floor English files)."""
    pack = _mixed(mixed_root, True).search("Tokyo")
    assert pack.results[0].lexical and "Tokyo" in pack.results[0].text
    assert [h.below_dense_floor for h in pack.results[1:]] == [True] * (len(pack.results) - 1)
    # The fixture exercises the defect: without demotion the same fusion buries the match.
    off = _mixed(mixed_root, False).search("Tokyo")
    assert not any(h.lexical for h in off.results[:5])


@pytest.mark.parametrize("query", ["Tokyo", "lighthouse keeper", "tea water", "spring", "東京", "clock tower Tokyo",
                                   "zzqxv wqzzk", "night train"])
def test_no_hit_below_the_floor_precedes_one_above_it(mixed_root, query):
    """guards against: demotion that leaves a below-floor neighbour above evidence, or reorders
    within a group (each group keeps its fused order)."""
    pack = _mixed(mixed_root, True).search(query, limit=20, debug=True)
    flags = [h.below_dense_floor for h in pack.results]
    assert flags == sorted(flags)
    assert set(pack.below_floor_candidates) >= {h.chunk_id for h in pack.results if h.below_dense_floor}
    for group in (False, True):
        scores = [h.fused_score for h in pack.results if h.below_dense_floor is group]
        assert scores == sorted(scores, reverse=True)


#: A natural-language question whose only words in the home, but the answer's, are function words.
QUESTION_HOME = {
    "tyre.txt": "Fixing a flat tyre: lever the tyre off the rim, find the hole and patch the inner tube.\n",
    "meeting.txt": "What we talked about at the meeting: nothing to do before May.\n",
    "garden.txt": "What to do about aphids? Spray the roses with soapy water.\n",
    "boiler.txt": "What to do when the boiler stops: check the pilot light.\n",
    "letters.txt": "Write to me about what you do all day.\n",
}


def test_a_question_matching_only_function_words_is_no_lexical_match(tmp_path):
    """guards against: `what to do about a punctured tire` ranking four files that share only `what`,
    `to`, `do` and `about` with it as word matches — lexical evidence, so floor demotion put them
    above the one note about tyres, which no query word matches (docs/ranking.md, "Floor demotion",
    limits) — and the pack claiming a lexical match."""
    for rel, text in QUESTION_HOME.items():
        (tmp_path / "corpus").mkdir(exist_ok=True)
        (tmp_path / "corpus" / rel).write_text(text, encoding="utf-8")
    home = FabricHome(tmp_path / "home")
    ingest(tmp_path / "corpus", home)
    question = "what to do about a punctured tire"
    pack = Fabric(home.root).search(question)
    assert pack.no_lexical_match and not any(h.lexical for h in pack.results)
    assert pack.results[0].citation.source_key == "fs:corpus/tyre.txt"
    # The home exercises the defect: counted as matches, function words rank above the answer.
    home.layout.config_file.write_text('{"query": {"function_word_matches": true}}')
    old = Fabric(home.root).search(question)
    assert not old.no_lexical_match and old.results[0].lexical
    assert [h.citation.source_key for h in old.results].index("fs:corpus/tyre.txt") > 0


def test_a_quoted_phrase_cut_by_a_chunk_boundary_is_found_in_both_chunks(tmp_path):
    """guards against (trial 13c left it open): a quoted phrase of the document that a chunk boundary
    cuts found nothing and said nothing; its two chunks are hits now, each highlighting its part."""
    words = ("The survey crew counted seabirds on the northern cliffs before dawn and wrote each "
             "tally in pencil while the keeper lit the lamp above them and the tide turned slowly "
             "against the rocks of the harbour wall where fishing boats waited for the morning light").split()
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "long.txt").write_text(" ".join(words) + ".\n", encoding="utf-8")
    home = FabricHome(tmp_path / "home")
    home.layout.config_file.write_text('{"chunking": {"max_tokens": 16}}')
    ingest(tmp_path / "corpus", home)
    chunks = [t for t in home.tables.read("chunks", columns=["text"]).column("text").to_pylist()]
    cut = next(i for i in range(len(chunks) - 1)
               if len(chunks[i].split()) >= 2 and len(chunks[i + 1].split()) >= 2)
    phrase = " ".join(chunks[cut].split()[-2:] + chunks[cut + 1].split()[:2]).rstrip(".")
    assert phrase in " ".join(words) and not any(phrase in c for c in chunks)  # the boundary cuts it
    pack = Fabric(home.root).search(f'"{phrase}"')
    assert sorted(h.text for h in pack.results if h.lexical) == sorted(chunks[cut:cut + 2])
    assert all(h.highlights for h in pack.results if h.lexical)
