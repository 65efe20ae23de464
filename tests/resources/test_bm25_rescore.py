"""BM25 with configurable k1/b over the word field (character bigrams for CJK), the index's
live-document avgdl, and rebuilding a generation written by an older index layout."""

from __future__ import annotations

import json
import math
from collections import Counter

import pyarrow as pa
import pytest
from conftest import ingest

from fabric_query import Fabric
from fabric_query.channels.lexical import Bm25, bm25_rescore, word_channel, word_tokens
from fabric_query.querylang import parse_query
from fabric_resources.lexical_index import META_FILE, LexicalIndex
from fabric_resources.schema import LEXICAL_DOCUMENTS
from fabric_resources.text_folding import fold

TEXTS = {
    "p1": ["東京は日本の首都であり、東京都庁がある。", "大阪は商業の都市として知られる。"],
    "p2": ["京都には多くの寺院があり、東京から新幹線で行ける。", "東京の人口は非常に多い。東京東京東京。"],
    "p3": ["北海道は日本の北にある広い島で、冬はとても寒い。", "The lighthouse keeper lit the lamp."],
}


def _docs(parse_ids) -> pa.Table:
    rows = [(pid, f"{pid}-c{i}", fold(t)) for pid in parse_ids for i, t in enumerate(TEXTS[pid])]
    return pa.table({"parse_id": [r[0] for r in rows], "chunk_id": [r[1] for r in rows],
                     "folded_text": [r[2] for r in rows], "analyzer": ["test"] * len(rows)},
                    schema=LEXICAL_DOCUMENTS)


def _reference_bm25(query: str, live: dict[str, str], k1: float, b: float) -> dict[str, float]:
    """BM25 computed from the live documents alone, independently of tantivy."""
    toks = {cid: word_tokens(t) for cid, t in live.items()}
    n = len(toks)
    avgdl = sum(len(t) for t in toks.values()) / n
    out = {}
    for cid, t in toks.items():
        tf = Counter(t)
        score = 0.0
        for term in dict.fromkeys(word_tokens(query)):
            df = sum(1 for other in toks.values() if term in other)
            if tf[term]:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                score += idf * tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * len(t) / avgdl))
        out[cid] = score
    return out


@pytest.mark.parametrize("k1,b", [(0.5, 0.3), (0.9, 0.4), (1.2, 0.75), (2.0, 1.0)])
def test_rescore_equals_reference_bm25_over_live_documents(tmp_path, k1, b):
    """guards against: avgdl or N counting deleted documents, a wrong length normalisation, or
    tf counted from different tokens than the index holds."""
    index = LexicalIndex(tmp_path / "lex")
    gen = index.write_generation(None, (), _docs(["p1", "p2", "p3"]))
    gen = index.write_generation(gen, ["p3"], _docs([]), _docs)  # p3 deleted: it must not count
    opened = index.open(gen)
    live = {f"{pid}-c{i}": t for pid in ("p1", "p2") for i, t in enumerate(TEXTS[pid])}
    assert opened.word_avgdl == pytest.approx(sum(len(word_tokens(t)) for t in live.values()) / len(live))
    query = "東京の都市"
    got = dict(bm25_rescore(opened, sorted(live), dict.fromkeys(word_tokens(query), 1.0),
                            lambda cid: word_tokens(live[cid]), Bm25(k1, b)))
    want = _reference_bm25(query, live, k1, b)
    assert got == pytest.approx(want, rel=1e-9)
    assert max(got, key=got.get) == max(want, key=want.get)


def test_word_channel_ranks_by_the_given_parameters(tmp_path):
    """guards against: the channel ignoring the parameters or returning tantivy's scores."""
    index = LexicalIndex(tmp_path / "lex")
    opened = index.open(index.write_generation(None, (), _docs(["p1", "p2", "p3"])))
    text = {f"{pid}-c{i}": t for pid in TEXTS for i, t in enumerate(TEXTS[pid])}
    parsed = parse_query("東京", 1000)
    for params in (Bm25(0.1, 0.0), Bm25(3.0, 0.0), Bm25(1.2, 1.0)):
        ranking = word_channel(opened, parsed, None, 10, text_of=text.__getitem__, bm25=params)
        want = _reference_bm25("東京", text, params.k1, params.b)
        expected = sorted((c for c in want if want[c] > 0), key=lambda c: (-want[c], c))
        assert [c for c, _ in ranking] == expected
        assert [s for _, s in ranking] == pytest.approx([want[c] for c in expected], rel=1e-9)
    with pytest.raises(ValueError):
        word_channel(opened, parsed, None, 10, bm25=Bm25(0.9, 0.4))


def test_an_index_of_an_older_layout_is_rebuilt_not_extended(tmp_path, fabric_home):
    """guards against: activation extending a generation that lacks the word_length field
    (tantivy would reject or mis-score), or an upgraded home staying on the scan fallback."""
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "a.txt").write_text("東京は日本の首都である。\n\nThe lighthouse keeper lit the lamp.\n")
    ingest(corpus, fabric_home)
    release = fabric_home.catalog.current_release()
    gen = release.manifest["lexical_generation"]
    meta_path = fabric_home.lexical.root / gen / META_FILE
    meta = json.loads(meta_path.read_text())
    meta.pop("layout")
    meta_path.write_text(json.dumps(meta))
    assert not fabric_home.lexical.is_current(gen)
    assert Fabric(fabric_home.root).search("lighthouse").fallback_reason == "index-schema-mismatch"
    with pytest.raises(ValueError):
        fabric_home.lexical.write_generation(gen, (), _docs([]))
    ingest(corpus, fabric_home)  # nothing changed but the index layout
    release = fabric_home.catalog.current_release()
    new_gen = release.manifest["lexical_generation"]
    assert new_gen != gen and fabric_home.lexical.is_current(new_gen)
    # The rebuilt generation has the word field's window documents (issue 19), one per context window.
    windows = fabric_home.tables.read("context_windows", version=release.manifest["tables"]["context_windows"])
    assert fabric_home.lexical.open(new_gen).word_documents == windows.num_rows > 0
    pack = Fabric(fabric_home.root).search("首都")
    assert pack.fallback_reason is None and "word" in pack.channels_run and pack.results


def _served(fabric_home):
    """The current release's index, chunk ID -> text and window ID -> member chunk IDs."""
    release = fabric_home.catalog.current_release()
    opened = fabric_home.lexical.open(release.manifest["lexical_generation"])
    chunks = fabric_home.tables.read("chunks", version=release.manifest["tables"]["chunks"])
    text = dict(zip(chunks.column("chunk_id").to_pylist(), chunks.column("text").to_pylist()))
    windows = fabric_home.tables.read("context_windows", version=release.manifest["tables"]["context_windows"])
    return opened, text, dict(zip(windows.column("window_id").to_pylist(), windows.column("chunk_ids").to_pylist()))


def test_cjk_query_fuses_the_rescored_word_list(tmp_path, fabric_home):
    """guards against: the pipeline fusing tantivy's own scores for a CJK query when bigram
    parameters are configured (the list fusion sees must be the re-scored one)."""
    corpus = tmp_path / "docs"
    corpus.mkdir()
    for name, texts in TEXTS.items():
        (corpus / f"{name}.txt").write_text("\n\n".join(texts) + "\n")
    ingest(corpus, fabric_home)
    fabric = Fabric(fabric_home.root)
    pack = fabric.search("東京の都市", debug=True, limit=50)
    word = pack.stage_candidates["channel:word"]
    params = fabric_home.config.query.bigram_bm25
    assert params is not None
    scores = [s for _, s in word]
    assert scores == sorted(scores, reverse=True)
    opened, text, members = _served(fabric_home)
    window_of = {h.chunk_id: h.provenance["word"]["window_id"] for h in pack.results if "word" in h.channels}
    assert set(window_of) == {c for c, _ in word}
    # The word field's documents are context windows: each hit carries its window's re-scored BM25.
    again = dict(bm25_rescore(opened, sorted(set(window_of.values())), dict.fromkeys(word_tokens("東京の都市"), 1.0),
                              lambda w: [t for m in members[w] for t in word_tokens(text[m])], Bm25(params.k1, params.b)))
    assert scores == pytest.approx([again[window_of[c]] for c, _ in word])


def test_an_english_query_is_rescored_with_the_configured_word_bm25(tmp_path, fabric_home):
    """guards against: `query.word_bm25` read by nothing (the word channel re-scoring English with
    tantivy's 1.2 / 0.75 whatever is configured)."""
    corpus = tmp_path / "docs"
    corpus.mkdir()
    notes = {"a": "The lighthouse keeper lit the lamp at dusk and logged the tide in the ledger every night.",
             "b": "Lighthouse lamp.", "c": "A keeper of bees.", "d": "Sourdough needs a lively starter."}
    for name, text in notes.items():
        (corpus / f"{name}.txt").write_text(text + "\n")
    ingest(corpus, fabric_home)
    opened, text, members = _served(fabric_home)
    query = "lighthouse keeper lamp"

    def word_scores(config: dict) -> dict[str, tuple[str, float]]:
        """chunk ID -> (its window, the word channel's score), feedback off (one pass)."""
        fabric_home.layout.config_file.write_text(json.dumps({"query": {"feedback_terms": 0, **config}}))
        pack = Fabric(fabric_home.root).search(query, debug=True)
        word = dict(pack.stage_candidates["channel:word"])
        return {h.chunk_id: (h.provenance["word"]["window_id"], word[h.chunk_id])
                for h in pack.results if "word" in h.channels}

    def exact(found: dict[str, tuple[str, float]], k1: float, b: float) -> list[float]:
        wids = sorted({w for w, _ in found.values()})
        again = dict(bm25_rescore(opened, wids, dict.fromkeys(word_tokens(query), 1.0),
                                  lambda w: [t for m in members[w] for t in word_tokens(text[m])], Bm25(k1, b)))
        return [again[w] for w, _ in found.values()]

    low, default = word_scores({"word_bm25": {"k1": 0.9, "b": 0.4}}), word_scores({})
    assert len(low) == len(default) == 3  # a, b, c
    assert [s for _, s in low.values()] == pytest.approx(exact(low, 0.9, 0.4))
    assert [s for _, s in default.values()] == pytest.approx(exact(default, 1.2, 0.75))
    assert exact(low, 0.9, 0.4) != pytest.approx(exact(low, 1.2, 0.75))  # the parameters matter here
