"""The word channel scores BM25 over context windows and answers with the member chunks that match
on their own (issue 19, change A): statistics per window, evidence per chunk."""

from __future__ import annotations

import math
import random
from collections import Counter

import pyarrow as pa
import pytest
from conftest import ingest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_query import Fabric
from fabric_query.channels.lexical import Feedback, word_channel, word_matches, word_tokens
from fabric_query.querylang import parse_query
from fabric_resources.lexical_health import lexical_health
from fabric_resources.lexical_index import ANALYZER_ID, LexicalIndex, index_documents
from fabric_resources.schema import LEXICAL_DOCUMENTS
from fabric_resources.text_folding import fold

WORDS = ["lighthouse", "keeper", "lamp", "tide", "storm", "beam", "harbour", "rope", "gull", "fog"]


def _index(tmp_path, parses: dict[str, list[list[str]]]):
    """A real generation: ``parses`` maps a parse ID to its windows, each a list of chunk texts."""
    rows, wins, text = [], [], {}
    for pid, windows in parses.items():
        for w, members in enumerate(windows):
            ids = [f"{pid}-w{w}-c{i}" for i in range(len(members))]
            for cid, t in zip(ids, members):
                rows.append((pid, cid, fold(t)))
                text[cid] = t
            wins.append((pid, f"{pid}-w{w}", ids))
    docs = pa.table({"parse_id": [r[0] for r in rows], "chunk_id": [r[1] for r in rows],
                     "folded_text": [r[2] for r in rows], "analyzer": [ANALYZER_ID] * len(rows)},
                    schema=LEXICAL_DOCUMENTS)
    windows = pa.table({"parse_id": [w[0] for w in wins], "window_id": [w[1] for w in wins],
                        "chunk_ids": [w[2] for w in wins]})
    index = LexicalIndex(tmp_path)
    return index.open(index.build_fresh(index_documents(docs, windows))), text, {w[1]: w[2] for w in wins}


def _reference(query: str, windows: dict[str, list[str]], text: dict[str, str], qtf: bool = False,
               weights: dict[str, float] | None = None) -> dict[str, float]:
    """Okapi BM25 (k1 1.2, b 0.75, Lucene's idf) over whole windows, independently of tantivy;
    with ``qtf`` a query word counts as often as it is written; ``weights`` replaces the query's."""
    toks = {w: [t for m in ids for t in word_tokens(text[m])] for w, ids in windows.items()}
    n = len(toks)
    avgdl = sum(map(len, toks.values())) / n
    out = {}
    for w, t in toks.items():
        tf = Counter(t)
        s = 0.0
        counts = Counter(word_tokens(query))
        wq = weights if weights is not None else {term: (counts[term] if qtf else 1) for term in counts}
        for term in wq:
            if tf[term]:
                df = sum(1 for o in toks.values() if term in o)
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                s += wq[term] * idf * tf[term] * 2.2 / (tf[term] + 1.2 * (0.25 + 0.75 * len(t) / avgdl))
        out[w] = s
    return out


def test_a_documents_title_and_body_chunks_add_up_in_its_window(tmp_path):
    """guards against: chunk-level statistics, where the title chunk (``lighthouse``) and the body
    chunk (``keeper``) of one document each hold half the evidence, so a one-chunk document that
    repeats one term outranks the document that holds both (issue 19, the main cause)."""
    opened, text, windows = _index(tmp_path, {
        "a" * 32: [["Lighthouse", "The keeper lit the lamp at dusk and logged the tide."]],
        "b" * 32: [["Lighthouse lighthouse lighthouse over the fog and the gull and the rope."]],
        "c" * 32: [["Storm over the harbour."]],
    })
    ranking = word_channel(opened, parse_query("lighthouse keeper"), None, 10, text_of=text.__getitem__)
    assert [c for c, _ in ranking][:2] == ["a" * 32 + "-w0-c0", "a" * 32 + "-w0-c1"] or \
        [c for c, _ in ranking][:2] == ["a" * 32 + "-w0-c1", "a" * 32 + "-w0-c0"]
    want = _reference("lighthouse keeper", windows, text)
    assert dict(ranking)["a" * 32 + "-w0-c0"] == pytest.approx(want["a" * 32 + "-w0"], rel=1e-9)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 2**32 - 1), st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
def test_every_hit_holds_a_query_token_and_scores_its_windows_bm25(tmp_path_factory, seed, query_words):
    """guards against: a window's score going to members that hold no query token (a hit with no
    lexical evidence), scores that are not BM25 over the live windows, or a matching member left out."""
    rng = random.Random(seed)
    parses = {f"{rng.getrandbits(128):032x}": [[" ".join(rng.choices(WORDS, k=rng.randint(1, 9)))
                                                for _ in range(rng.randint(1, 3))]
                                               for _ in range(rng.randint(1, 2))]
              for _ in range(rng.randint(1, 5))}
    opened, text, windows = _index(tmp_path_factory.mktemp("win"), parses)
    query = " ".join(query_words)
    matches = word_matches(opened, parse_query(query), None, 1000, text_of=text.__getitem__)
    want = _reference(query, windows, text)
    wanted = set(word_tokens(query))
    got = dict(matches.ranking)
    assert len(got) == len(matches.ranking)
    for cid, score in matches.ranking:
        assert wanted & set(word_tokens(text[cid])), (query, text[cid])
        assert cid in windows[matches.window_of[cid]]
        assert score == pytest.approx(want[matches.window_of[cid]], rel=1e-9)
    expected = {m for w, ids in windows.items() if want[w] > 0 for m in ids if wanted & set(word_tokens(text[m]))}
    assert set(got) == expected
    scores = [s for _, s in matches.ranking]
    assert scores == sorted(scores, reverse=True)


def test_exclusions_and_phrases_hold_per_chunk_not_per_window(tmp_path):
    """guards against: a phrase matched across the join of two member chunks admitting every member
    of the window (only the two chunks of the seam hold it: stop 47; before, none matched), and an
    excluded term in one member dropping the window's other members."""
    opened, text, _ = _index(tmp_path, {"a" * 32: [["The lamp in the storm", "the lamp and the tide lighthouse"],
                                                   ["keeper of the light"]]})
    hits = [c for c, _ in word_channel(opened, parse_query("lamp -storm"), None, 10, text_of=text.__getitem__)]
    assert hits == ["a" * 32 + "-w0-c1"]
    # The window's text holds "lighthouse keeper" across the join of two of its members; the third
    # member holds its words apart.
    joined, jtext, _ = _index(tmp_path / "j", {"b" * 32: [["the lamp lighthouse", "keeper of the lamp",
                                                           "a keeper by the lighthouse"]]})
    hits = word_channel(joined, parse_query('"lighthouse keeper"'), None, 10, text_of=jtext.__getitem__)
    assert sorted(c for c, _ in hits) == ["b" * 32 + "-w0-c0", "b" * 32 + "-w0-c1"]


FILES = {
    "a.txt": "# Lighthouse\n\nThe keeper lit the lamp at dusk and logged the tide in a green ledger.\n",
    "b.txt": "Lighthouse lighthouse over the fog, with gulls.\n",
    "c.txt": "Sourdough needs a lively starter and patience.\n",
}


def test_ingested_home_serves_window_documents_and_health_reconstructs_them(tmp_path, fabric_home):
    """guards against: activation or repair writing chunk-only documents (the word field would then
    rank chunks again), hits that do not say which window scored them, and a lexical-health that
    checks the window documents against the serving index itself instead of rebuilding them."""
    corpus = tmp_path / "docs"
    corpus.mkdir()
    for name, t in FILES.items():
        (corpus / name).write_text(t)
    ingest(corpus, fabric_home)
    fabric = Fabric(fabric_home.root)
    view_windows = fabric.search("lighthouse").results  # warms the view
    release = fabric_home.catalog.current_release()
    opened = fabric_home.lexical.open(release.manifest["lexical_generation"])
    windows = fabric_home.tables.read("context_windows", version=release.manifest["tables"]["context_windows"])
    chunks = fabric_home.tables.read("chunks", version=release.manifest["tables"]["chunks"], columns=["chunk_id"])
    assert opened.word_documents == windows.num_rows and opened.chunk_documents == chunks.num_rows
    pack = fabric.search("lighthouse keeper")
    window_of = {c: w for w, ids in zip(windows.column("window_id").to_pylist(),
                                        windows.column("chunk_ids").to_pylist()) for c in ids}
    word_hits = [h for h in pack.results if "word" in h.channels]
    assert word_hits and view_windows
    for h in word_hits:
        assert h.provenance["word"]["window_id"] == window_of[h.chunk_id]
    assert lexical_health(fabric_home).healthy
    # A generation of chunk-only word documents (each chunk its own window) has the right chunks and
    # terms but the wrong BM25 statistics: health must say so.
    docs = fabric_home.tables.read("lexical_documents", version=release.manifest["tables"]["lexical_documents"])
    gen = fabric_home.lexical.build_fresh(docs)
    manifest = {k: v for k, v in release.manifest.items() if k not in ("release_id", "created_at")}
    fabric_home.catalog.publish_release({**manifest, "lexical_generation": gen}, expected_current=release.release_id)
    report = lexical_health(fabric_home)
    assert not report.healthy and report.missing_documents


class _CountingSearcher:
    """A tantivy searcher that counts stored-document reads (``doc``)."""

    def __init__(self, searcher) -> None:
        self._searcher = searcher
        self.doc_reads = 0

    def doc(self, addr):
        self.doc_reads += 1
        return self._searcher.doc(addr)

    def __getattr__(self, name):
        return getattr(self._searcher, name)


def test_a_repeated_query_reads_no_stored_window_again_and_ranks_the_same(tmp_path):
    """guards against: the word channel's per-query cost growing with its candidates — every query
    re-reading each candidate window's stored fields and re-counting its terms in Python, twice with
    feedback (issue 19's latency regression: ~4x main's word channel, docs/benchmarks.md "Word
    channel cost") — and against what is kept per generation changing a ranking."""
    rng = random.Random(19)
    parses = {f"{p:032x}": [[" ".join(rng.choices(WORDS, k=rng.randint(3, 14))) for _ in range(rng.randint(1, 4))]
                            for _ in range(3)] for p in range(12)}
    opened, text, _ = _index(tmp_path / "a", parses)
    fresh, _, _ = _index(tmp_path / "b", parses)
    feedback = Feedback(5, 20, 0.5)
    for query in ("lighthouse keeper", "storm over the harbour", "fog gull rope lamp"):
        parsed = parse_query(query)
        first = word_matches(opened, parsed, None, 40, feedback, text.__getitem__)
        assert first.ranking
        counting = _CountingSearcher(opened.searcher)
        opened.searcher = counting
        again = word_matches(opened, parsed, None, 40, feedback, text.__getitem__)
        opened.searcher = counting._searcher
        assert counting.doc_reads == 0
        assert again == first
        assert word_matches(fresh, parsed, None, 40, feedback, text.__getitem__) == first
        fresh.memo.clear()  # every query on this one starts from nothing kept


def test_query_term_frequency_weighs_a_word_written_twice_twice(tmp_path):
    """guards against: a repeated query word counted once (CACM query 64: the one relevant document
    holds ``EL1``, which the request writes twice, and lost to documents matching ``list``)."""
    opened, text, windows = _index(tmp_path, {
        "a" * 32: [["The EL1 language and its data types."]],
        "b" * 32: [["A list of articles, a list of languages, a list of lists."]],
        "c" * 32: [["Storm over the harbour."]],
    })
    query = "list articles on EL1 (EL1 may be written EL/1)"
    plain = dict(word_channel(opened, parse_query(query), None, 10, text_of=text.__getitem__))
    counted = dict(word_channel(opened, parse_query(query), None, 10, text_of=text.__getitem__,
                                query_term_frequency=True))
    a = "a" * 32 + "-w0-c0"
    assert counted[a] == pytest.approx(2 * plain[a], rel=1e-12)  # its one query word is written twice
    for qtf, ranking in ((False, plain), (True, counted)):
        want = _reference(query, windows, text, qtf=qtf)
        assert {c.rsplit("-c", 1)[0]: s for c, s in ranking.items()} == pytest.approx(
            {w: v for w, v in want.items() if v}, rel=1e-9)


def test_query_term_frequency_chooses_the_candidates_it_rescores(tmp_path):
    """guards against: tantivy's candidate query counting each query word once while the re-scoring
    counts repeats, so a window that only the repeated word lifts is never a candidate. Forty short
    windows hold the rarer ``gull`` and outrank ``a`` (``fog``, in sixty windows) unless ``fog``,
    written five times, weighs five times: at depth 1 tantivy returns 33 windows."""
    filler = " ".join(["harbour"] * 12)
    parses = {"a" * 32: [["fog"]]}
    parses |= {f"g{i:031d}": [["gull"]] for i in range(40)}
    parses |= {f"f{i:031d}": [[f"fog {filler}"]] for i in range(59)}
    opened, text, windows = _index(tmp_path, parses)
    query = "gull fog fog fog fog fog"
    want = _reference(query, windows, text, qtf=True)
    best = max(want, key=want.get)
    assert best == "a" * 32 + "-w0"
    plain = _reference(query, windows, text)
    assert sum(v > plain[best] for v in plain.values()) >= 33  # without the weights, out of the candidates
    top = word_channel(opened, parse_query(query), None, 1, text_of=text.__getitem__, query_term_frequency=True)
    assert [c for c, _ in top] == [best + "-c0"]
    assert top[0][1] == pytest.approx(want[best], rel=1e-9)


def test_query_stop_words_leave_the_query_not_the_index(tmp_path):
    """guards against: a window that holds only a stop word of the query matching it; stop words
    dropped from phrases (which the index keeps), or a query of stop words only answering nothing."""
    opened, text, _ = _index(tmp_path, {
        "a" * 32: [["The keeper of the light."]],
        "b" * 32: [["It is the end of the line, and that is that."]],
        "c" * 32: [["To be or not to be."]],
    })

    def ids(q, **kw):
        return [c[0] for c, _ in word_channel(opened, parse_query(q), None, 10, text_of=text.__getitem__, **kw)]

    assert ids("the keeper of it") == ["a", "b"]  # plain: "the", "of" and "it" match b
    assert ids("the keeper of it", stopwords=True) == ["a"] == ids("keeper")
    assert ids('"keeper of the light"', stopwords=True) == ["a"]  # a phrase keeps its stop words
    assert ids("to be or not", stopwords=True) == ids("to be or not") == ["c"]  # nothing else left: all kept


def test_rm3_feedback_scores_with_the_relevance_model_of_the_first_pass(tmp_path):
    """guards against: the rm3 method falling back to the idf expansion or to no second pass, or a
    feedback-only window becoming a hit: the second pass scores every hit by exact BM25 under the
    RM3 weights of the first pass's top windows, and a chunk without a query word is no hit."""
    from fabric_query.channels.feedback import rm3_weights

    opened, text, windows = _index(tmp_path, {
        "a" * 32: [["Lighthouse keeper lamp beam lamp beam."]],
        "b" * 32: [["Lighthouse keeper fog."]],
        "c" * 32: [["Lamp beam lens gull."]],
        "d" * 32: [["Keeper of the harbour rope."]],
    })
    query = parse_query("lighthouse keeper")
    fb = Feedback(2, 5, 0.5, "rm3")
    first = word_channel(opened, query, None, 10, text_of=text.__getitem__)
    second = word_channel(opened, query, None, 10, fb, text_of=text.__getitem__)
    assert {c[0] for c, _ in second} == {"a", "b", "d"}  # c holds only feedback terms
    stats = {w: (Counter(t for m in ids for t in word_tokens(text[m])),
                 sum(len(word_tokens(text[m])) for m in ids)) for w, ids in windows.items()}
    weights = rm3_weights([(c.rsplit("-c", 1)[0], s) for c, s in first], stats.__getitem__,
                          {"lighthous": 1.0, "keeper": 1.0}, fb)
    assert "lamp" in weights and "beam" in weights and weights["lighthous"] > 0.5
    assert math.fsum(weights.values()) == pytest.approx(2.0)  # scaled by the query's total weight
    want = _reference("", windows, text, weights=weights)
    assert {c.rsplit("-c", 1)[0]: s for c, s in second} == pytest.approx(
        {w: want[w] for w in ("a" * 32 + "-w0", "b" * 32 + "-w0", "d" * 32 + "-w0")}, rel=1e-9)


def test_function_words_alone_are_no_word_match_and_move_no_score(tmp_path):
    """guards against: a chunk holding only `what`, `to`, `do`, `about` of a natural-language question
    ranking as a word match (lexical evidence, exempt from floor demotion, a dense feedback document)
    on a small home where their idf is high; the rule changing any score; a quoted phrase of function
    words, or a query of nothing else, answering nothing."""
    from fabric_query.channels.lexical import _function_words

    opened, text, _ = _index(tmp_path, {
        "a" * 32: [["What we do about the weather is talk about it."]],
        "b" * 32: [["What to do when the boiler stops: check the pilot light."]],
        "c" * 32: [["A punctured tire is patched from the inside once the wheel is off."]],
        "d" * 32: [["Sourdough needs a lively starter."]],
    })
    fw = _function_words()
    assert {"what", "to", "do", "about", "a"} <= fw and "tire" not in fw

    def ranking(q, **kw):
        return {c[0]: s for c, s in word_channel(opened, parse_query(q), None, 10, text_of=text.__getitem__, **kw)}

    question = "what to do about a punctured tire"
    plain, ruled = ranking(question), ranking(question, function_words=fw)
    assert set(plain) == {"a", "b", "c", "d"} and set(ruled) == {"c"}  # d holds "a" and nothing else
    assert ruled["c"] == plain["c"]  # the function words still score
    assert set(ranking("what to do", function_words=fw)) == {"a", "b"}  # nothing else asked: they match
    assert set(ranking('"what we do" tire', function_words=fw)) == {"a"}  # the phrase is asked for on purpose


def test_a_phrase_across_the_seam_of_two_chunks_matches_both(tmp_path):
    """guards against (trial 13c left it open): a quoted phrase that runs from the end of one chunk
    into the next found nothing, with no reason given, though the word index matched its window;
    a seam rule that admits a chunk holding only the phrase's words apart, or one not beside the seam."""
    opened, text, _ = _index(tmp_path, {
        "a" * 32: [["The lighthouse keeper", "lit the lamp at dusk.", "Gulls cried over the rocks."]],
        "b" * 32: [["A keeper lit fires.", "The lamp was lit."]],
    })

    def ids(q):
        return sorted(c for c, _ in word_channel(opened, parse_query(q), None, 10, text_of=text.__getitem__))

    assert ids('"keeper lit the lamp"') == ["a" * 32 + "-w0-c0", "a" * 32 + "-w0-c1"]
    assert ids('"keeper lit the lamp" gulls') == ["a" * 32 + "-w0-c0", "a" * 32 + "-w0-c1"]  # c2: no phrase
    assert ids('"lamp at dusk"') == ["a" * 32 + "-w0-c1"]  # inside one chunk: that chunk alone
    assert ids('"fires the lamp"') == ["b" * 32 + "-w0-c0", "b" * 32 + "-w0-c1"]
    assert ids('"lighthouse lamp"') == []  # the words apart: no phrase anywhere


class _Reading:
    """Reading order of ``_index``'s parses: their windows' chunks in order."""

    def __init__(self, windows: dict[str, list[str]]) -> None:
        self._window = {c: (w, tuple(ids)) for w, ids in windows.items() for c in ids}
        order: dict[str, list[str]] = {}
        for w, ids in windows.items():
            order.setdefault(w.split("-")[0], []).extend(ids)
        self._at = {c: (ids, i) for ids in order.values() for i, c in enumerate(ids)}

    def beside(self, chunk_id, step):
        ids, i = self._at[chunk_id]
        return ids[i + step] if 0 <= i + step < len(ids) else None

    def window(self, chunk_id):
        return self._window[chunk_id]


def test_a_phrase_across_the_seam_of_two_windows_matches_both(tmp_path):
    """guards against (trial 15b): a quoted phrase that runs from the last chunk of one context window
    into the first chunk of the next found nothing and said nothing (neither window document holds
    it); the seam search admitting a chunk that holds the words apart, a window of a parse the
    filters leave out, or a phrase it could not check for lack of reading order reported as checked."""
    from fabric_query.channels.chunk_rule import ChunkRule
    from fabric_query.channels.lexical import substring_tokens
    from fabric_query.channels.window_seams import seam_windows

    a, b = "a" * 32, "b" * 32
    opened, text, windows = _index(tmp_path, {
        a: [["The lighthouse keeper"], ["lit the lamp at dusk.", "Gulls cried over the rocks."]],
        b: [["A keeper lit fires."], ["The lamp was lit by a keeper."]],
    })
    reading = _Reading(windows)

    def ids(q, eligible=None, **kw):
        return sorted(c for c, _ in word_channel(opened, parse_query(q), eligible, 10, text_of=text.__getitem__, **kw))

    assert ids('"keeper lit the lamp"') == []  # without reading order: inside a window only
    assert ids('"keeper lit the lamp"', reading=reading) == [f"{a}-w0-c0", f"{a}-w1-c0"]
    assert ids('"keeper lit the lamp" gulls', reading=reading) == [f"{a}-w0-c0", f"{a}-w1-c0"]
    assert ids('"fires the lamp"', reading=reading) == [f"{b}-w0-c0", f"{b}-w1-c0"]
    assert ids('"keeper lit the lamp"', {b}, reading=reading) == []
    assert ids('"lighthouse lamp"', reading=reading) == []  # the words apart: no phrase anywhere
    assert ids('"lit the lamp" -gulls', reading=reading) == [f"{a}-w1-c0"]  # inside a chunk, as before
    # A phrase whose rarest word is in more windows than are read is reported, never silently missed.
    searcher = opened.searcher

    def members_at(addr):
        doc = searcher.doc(addr)
        return doc["chunk_id"][0], tuple(doc["members"])

    rule = ChunkRule(frozenset(), (("keeper", "lit", "the", "lamp"),), (None,), (), frozenset())
    tokens = lambda c: word_tokens(text[c])  # noqa: E731
    found = seam_windows(opened, rule, None, reading, members_at, tokens, substring_tokens, cap=1)
    assert found.unchecked == ("keeper lit the lamp",)
    found = seam_windows(opened, rule, None, reading, members_at, tokens, substring_tokens)
    assert found.unchecked == () and set(found.windows) == {f"{a}-w0", f"{a}-w1"}


def test_a_phrase_without_spaces_cut_by_any_seam_matches_both_chunks(tmp_path):
    """guards against (trial 15b): a Japanese or Chinese phrase cut by a chunk boundary, inside a
    window or between two, found by neither lexical channel (the word field's bigrams stop at each
    chunk's end, so the bigram spanning the seam exists nowhere; the substring field holds chunks);
    a seam admitting characters that stand apart, or across a punctuation mark the phrase lacks."""
    a = "a" * 32
    opened, text, windows = _index(tmp_path, {a: [["ランプを灯して", "潮の満ち引きを記録した。"], ["嵐の夜に灯台"]],
                                              "b" * 32: [["潮が灯して"]]})
    reading = _Reading(windows)

    def ids(q):
        return sorted(c for c, _ in word_channel(opened, parse_query(q), None, 10, text_of=text.__getitem__,
                                                 reading=reading))

    assert ids('"灯して潮"') == [f"{a}-w0-c0", f"{a}-w0-c1"]  # a seam inside the window
    assert ids('"した。嵐"') == [f"{a}-w0-c1", f"{a}-w1-c0"]  # a seam between two windows
    assert ids('"した嵐"') == []  # the phrase lacks the full stop the text has there
    assert ids('"灯して"') == [f"{a}-w0-c0", "b" * 32 + "-w0-c0"]  # inside a chunk, as before


def test_a_phrase_longer_than_a_chunk_matches_every_chunk_it_runs_through(tmp_path):
    """guards against (trial 15b): a quoted phrase (a pasted sentence) that runs through a whole
    chunk from the one before into the one after found nothing: the seam rule looked at two chunks
    only; and a window seam inside such a phrase left out of the seam search."""
    a = "a" * 32
    opened, text, windows = _index(tmp_path, {a: [["The lighthouse keeper", "lit"], ["the lamp at dusk.", "Gulls."]]})
    reading = _Reading(windows)

    def ids(q):
        return sorted(c for c, _ in word_channel(opened, parse_query(q), None, 10, text_of=text.__getitem__,
                                                 reading=reading))

    assert ids('"lighthouse keeper lit the lamp"') == [f"{a}-w0-c0", f"{a}-w0-c1", f"{a}-w1-c0"]
    assert ids('"keeper lit the lamp at dusk gulls"') == [f"{a}-w0-c0", f"{a}-w0-c1", f"{a}-w1-c0", f"{a}-w1-c1"]
    assert ids('"keeper lit lamp"') == []


def test_a_phrase_runs_over_a_dropped_long_word_only_as_the_text_does(tmp_path):
    """guards against (trial 15b): a word of 255 bytes or more (dropped by the word field, its
    position kept empty) joining the words on either side: the scan held ``"keeper lamp"`` in
    ``keeper <300 x> lamp`` where the index did not, and the index missed the phrase as written."""
    long = "x" * 300
    opened, text, windows = _index(tmp_path, {"a" * 32: [[f"The keeper {long} lamp here.", "Gulls."]]})

    def ids(q):
        return [c for c, _ in word_channel(opened, parse_query(q), None, 10, text_of=text.__getitem__,
                                           reading=_Reading(windows))]

    assert ids(f'"keeper {long} lamp"') == ["a" * 32 + "-w0-c0"]
    assert ids(f'"keeper {"y" * 300} lamp"') == ["a" * 32 + "-w0-c0"]  # any dropped word, as the index reads it
    assert ids('"keeper lamp"') == []
    assert ids(f'lamp -"{long} lamp"') == []
