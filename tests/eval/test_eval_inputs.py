"""``fabric eval`` on a user's own BEIR folder: malformed input named in one line, no query or
document dropped in silence, a reused ``--work-dir`` scoring the corpus it is given (trial 11d)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from fabric_assets.measurement.harness import (
    BeirCollection, BeirFormatError, WorkDirError, collection_is_cjk, document_ranker, in_split, judged_queries,
    load_beir, unscorable_judgements, write_corpus,
)

GOOD_CORPUS = '{"_id": "d1", "title": "T", "text": "bees"}\n{"_id": "d2", "text": "bread"}\n'
GOOD_QUERIES = '{"_id": "1", "text": "bees"}\n{"_id": "2", "text": "bread"}\n'
GOOD_QRELS = "query-id\tcorpus-id\tscore\n1\td1\t1\n2\td2\t2\n"


def _folder(root: Path, corpus: str | bytes = GOOD_CORPUS, queries: str | bytes = GOOD_QUERIES,
            qrels: str | bytes = GOOD_QRELS) -> Path:
    (root / "qrels").mkdir(parents=True)
    for path, content in ((root / "corpus.jsonl", corpus), (root / "queries.jsonl", queries),
                          (root / "qrels" / "test.tsv", qrels)):
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return root


@pytest.mark.parametrize("file, kwargs, message", [
    ("corpus.jsonl:2", {"corpus": '{"_id": "d1", "text": "x"}\n{"_id": "d2", "text": \n'}, "not JSON"),
    ("corpus.jsonl:1", {"corpus": '["d1", "x"]\n'}, "not a JSON object"),
    ("corpus.jsonl:1", {"corpus": '{"title": "x", "text": "y"}\n'}, "_id must be"),
    ("corpus.jsonl:1", {"corpus": '{"_id": 1.0, "text": "y"}\n'}, "_id must be"),  # "1.0" would match no qrels "1"
    ("corpus.jsonl:2", {"corpus": '{"_id": "d1", "text": "x"}\n{"_id": "d1", "text": "y"}\n'}, "duplicate _id 'd1'"),
    ("corpus.jsonl:1", {"corpus": '{"_id": "d1", "text": 5}\n'}, "'text' must be a string"),
    ("corpus.jsonl", {"corpus": ""}, "no document"),
    ("corpus.jsonl", {"corpus": '{"_id": "d1", "text": "caf\xe9"}\n'.encode("latin-1")}, "not UTF-8"),
    ("queries.jsonl:2", {"queries": '{"_id": "1", "text": "a"}\n{"_id": "1", "text": "b"}\n'}, "duplicate _id '1'"),
    ("queries.jsonl:1", {"queries": '{"_id": "1"}\n'}, "no 'text'"),
    ("test.tsv:1", {"qrels": "1 0 d1 1\n2 0 d2 1\n"}, "expected query-id<TAB>corpus-id<TAB>score"),  # TREC, spaces
    ("test.tsv:2", {"qrels": "1\t0\td1\t1\n2\t0\td2\t1\n"}, "score 'd2' is not an integer"),  # TREC, tabs
    ("test.tsv:1", {"qrels": "1\td1\t1.0\n"}, "score '1.0' is not an integer"),  # was taken for a header
    ("test.tsv:3", {"qrels": "q\td\ts\n1\td1\t1\n1\td1\t0\n"}, "judges 'd1' again with another score"),
])
def test_malformed_beir_input_is_named_with_its_file_and_line(tmp_path, file, kwargs, message):
    """guards against: a traceback (JSONDecodeError, KeyError, ValueError) for a bad line, or a
    silent loss: a whitespace-separated qrels file read as no judgement at all (every query then
    unscored), a later duplicate replacing an earlier entry, a float ID that matches nothing."""
    with pytest.raises(BeirFormatError) as caught:
        load_beir(_folder(tmp_path / "c", **kwargs))
    assert file in str(caught.value) and message in str(caught.value)


def test_tolerated_beir_variants_read_as_the_plain_file(tmp_path):
    """guards against: a byte-order mark (a Windows editor's) failing the corpus or becoming part of
    a header-less qrels file's first query ID; CRLF, extra qrels columns, integer IDs or a repeated
    identical judgement refused."""
    crlf_bom = _folder(tmp_path / "a", corpus=b"\xef\xbb\xbf" + GOOD_CORPUS.replace("\n", "\r\n").encode(),
                       queries=b"\xef\xbb\xbf" + GOOD_QUERIES.encode(),
                       qrels=b"\xef\xbb\xbf1\td1\t1\textra\r\n2\td2\t2\r\n2\td2\t2\r\n")
    c = load_beir(crlf_bom)
    assert c.corpus == {"d1": ("T", "bees"), "d2": ("", "bread")} and c.queries == {"1": "bees", "2": "bread"}
    assert c.qrels == {"1": {"d1": 1}, "2": {"d2": 2}}
    ints = load_beir(_folder(tmp_path / "b", corpus='{"_id": 7, "text": "x"}\n', queries='{"_id": 3, "text": "y"}\n',
                             qrels="3\t7\t1\n"))
    assert ints.corpus == {"7": ("", "x")} and ints.qrels == {"3": {"7": 1}}
    (tmp_path / "empty").mkdir()
    with pytest.raises(BeirFormatError, match="corpus.jsonl"):
        load_beir(tmp_path / "empty")


def test_collection_is_named_after_the_folder_even_when_given_as_dot(tmp_path, monkeypatch):
    """guards against: ``fabric eval .`` naming the collection '' and writing its corpus into the
    work dir itself, beside the home it then ingested (a KeyError)."""
    folder = _folder(tmp_path / "mine")
    monkeypatch.chdir(folder)
    assert load_beir(Path(".")).name == "mine"
    monkeypatch.chdir(folder / "qrels")
    assert load_beir(Path("..")).name == "mine"


def test_only_queries_with_a_relevant_document_are_run_and_none_is_refused(tmp_path):
    """guards against: a query judged only 0 run and counted in ``queries`` but left out of every
    mean, and a qrels file that matches no query (or a split with none) reported as zeros; judgements
    no run can show (a document or a query text missing) lowering the figures unsaid."""
    c = BeirCollection("c", {"d1": ("", "x")}, {"2": "a", "4": "b", "6": "c", "\u00b2": "d"},
                       {"2": {"d1": 1}, "4": {"d1": 0}, "8": {"d1": 1}, "\u00b2": {"d1": 1}})
    assert judged_queries(c, "all") == ["2", "\u00b2"]  # a non-ASCII digit ID no longer fails in_split
    assert in_split("\u00b2", "dev") != in_split("\u00b2", "test")
    judged = BeirCollection("c", c.corpus, c.queries, {**c.qrels, "2": {"d1": 1, "d9": 2, "d8": 0}, "10": {"d1": 1}})
    assert unscorable_judgements(judged, "all", ["2", "\u00b2"]) == {"missing_documents": 1, "queries_without_text": 2}
    with pytest.raises(BeirFormatError, match="no query of the dev split"):
        judged_queries(BeirCollection("c", c.corpus, {"2": "a"}, {"2": {"d1": 1}}), "dev")


class _View:
    """The two things :func:`document_ranker` reads of a release view."""

    def __init__(self, sources: dict[str, str], chunks: list[tuple[str, str]]):
        self.sources = {key: {"parse_id": parse} for key, parse in sources.items()}
        self.chunks = pa.table({"chunk_id": [c for c, _ in chunks], "parse_id": [p for _, p in chunks]})


def test_every_copy_of_an_identical_text_is_ranked(tmp_path):
    """guards against: entries of identical text (one content-addressed parse) ranked as the first
    copy only, so a relevant second copy could never be found (CACM: 191 such entries, 10 of them
    judged relevant); and a chunk of another collection's source mapped to nothing in silence."""
    c = BeirCollection("col", {"b": ("", "same"), "a": ("", "same"), "z": ("", "other")}, {}, {})
    names = write_corpus(c, tmp_path / "col")
    by_id = {doc: name for name, doc in names.items()}
    view = _View({f"fs:col/{by_id['a']}": "P1", f"fs:col/{by_id['b']}": "P1", f"fs:col/{by_id['z']}": "P2"},
                 [("c1", "P1"), ("c2", "P2"), ("c3", "P1")])
    docs = document_ranker(view, c, names)
    assert docs(["c2", "c1", "c3", "gone"]) == ["z", "a", "b"]
    assert docs(["c3"]) == ["a", "b"]
    foreign = _View({f"fs:col/{by_id['a']}": "P1", "fs:other/000000-x.txt": "P3"}, [])
    with pytest.raises(WorkDirError, match="fs:other/000000-x.txt"):
        document_ranker(foreign, c, names)


def test_write_corpus_removes_its_own_files_of_an_earlier_corpus(tmp_path):
    """guards against: a reused work dir keeping the files of removed (or renumbered) entries, which
    the ingest then kept in the home: ``fabric eval`` failed with a KeyError on a changed corpus."""
    folder = tmp_path / "col"
    first = write_corpus(BeirCollection("col", {"d1": ("", "x"), "d2": ("", "y")}, {}, {}), folder)
    (folder / "notes.txt").write_text("mine")
    second = write_corpus(BeirCollection("col", {"d0": ("", "w"), "d2": ("", "y")}, {}, {}), folder)
    assert sorted(p.name for p in folder.iterdir()) == sorted([*second, "notes.txt"])
    assert set(first) != set(second)


def test_a_reused_work_dir_scores_the_changed_corpus_as_a_fresh_one_does(tmp_path):
    """guards against: a second ``fabric eval --work-dir`` after the corpus changed failing (the
    removed entry's file ingested again) or scoring otherwise than a fresh work dir: bm25s padded its
    list with chunks sharing no query term, in the table's order, which a reused home keeps otherwise."""
    from fabric_assets.measurement.eval_run import run_eval

    def collection(root: Path, docs: dict[str, tuple[str, str]]) -> Path:
        return _folder(root, corpus="".join(json.dumps({"_id": k, "title": t, "text": x}) + "\n"
                                            for k, (t, x) in docs.items()),
                       queries='{"_id": "2", "text": "sourdough bread"}\n{"_id": "4", "text": "zebra stripes"}\n',
                       qrels="2\td5\t1\n4\td4\t1\n")

    docs = {"d1": ("Lighthouse", "The keeper lit the lamp every evening."),
            "d2": ("Bread", "Sourdough bread rises slowly."), "d3": ("Boats", "Boats came back before the storm."),
            "d4": ("Bees", "Honey bees dance to tell the hive where flowers grow.")}
    first = run_eval(collection(tmp_path / "v1" / "col", docs), work_dir=tmp_path / "work")
    assert first["unscorable"] == {"missing_documents": 1, "queries_without_text": 0}  # d5 is not in v1
    changed = {"d0": ("Kites", "Children fly kites on the beach."), **{k: v for k, v in docs.items() if k != "d1"},
               "d5": docs["d2"]}  # d5 repeats d2 (title and text): one parse for both
    beir = collection(tmp_path / "v2" / "col", changed)
    reused = run_eval(beir, work_dir=tmp_path / "work")
    fresh = run_eval(beir, work_dir=tmp_path / "fresh")
    assert reused["documents"] == fresh["documents"] == 5 and reused["metrics"] == fresh["metrics"]
    # bm25s: "sourdough bread" ranks d2 then its copy d5 (the judged one: it was never ranked);
    # "zebra stripes" shares no term with any entry and retrieves nothing (it ranked all five).
    assert fresh["metrics"]["bm25s"]["MRR@10"] == pytest.approx(0.25)
    assert fresh["metrics"]["bm25s"]["Recall@100"] == pytest.approx(0.5)


def test_eval_and_eval_tune_refuse_bad_collections_in_one_line_before_any_ingest(tmp_path):
    """guards against: a traceback for a malformed file; a mistyped ``--config`` read as the defaults
    and reported as the file's figures; eval-tune taking part with a collection
    that has no dev query (margin 0 everywhere: as the worst margin it decided the leximin choice),
    or with two folders of one name (one work dir, one report name)."""
    from typer.testing import CliRunner

    from fabric_assets.cli import app

    bad = _folder(tmp_path / "bad", corpus='{"_id": "d1", "text": "x"}\n{"_id": "d1", "text": "y"}\n')
    out = CliRunner().invoke(app, ["eval", str(bad), "--work-dir", str(tmp_path / "w")])
    assert out.exit_code == 2 and "corpus.jsonl:2: duplicate _id 'd1'" in out.output, out.output
    assert out.exception is None or isinstance(out.exception, SystemExit)
    out = CliRunner().invoke(app, ["eval", str(_folder(tmp_path / "good")), "--config", str(tmp_path / "typo.json"),
                                   "--work-dir", str(tmp_path / "w")])
    assert out.exit_code == 2 and "typo.json: no such file" in out.output, out.output  # it scored the defaults
    even = _folder(tmp_path / "even", queries='{"_id": "2", "text": "bread"}\n', qrels="2\td2\t1\n")
    out = CliRunner().invoke(app, ["eval-tune", str(even), "--work-dir", str(tmp_path / "w"), "--quick"])
    assert out.exit_code == 2 and "no query of the dev split" in out.output, out.output
    same = [_folder(tmp_path / side / "col") for side in ("a", "b")]
    out = CliRunner().invoke(app, ["eval-tune", *map(str, same), "--work-dir", str(tmp_path / "w"), "--quick"])
    assert out.exit_code == 2 and "both named 'col'" in out.output, out.output
    for name in ("home", "lancedb-baseline"):  # the work dir's own folders: a RootOverlapError traceback
        out = CliRunner().invoke(app, ["eval", str(_folder(tmp_path / name)), "--work-dir", str(tmp_path / "w")])
        assert out.exit_code == 2 and f"named {name!r}" in out.output, out.output
    assert not (tmp_path / "w").exists()  # refused before anything was written


def test_a_japanese_collection_without_japanese_titles_is_scored_as_cjk():
    """guards against: the CJK test reading the titles only, so a Japanese collection with empty or
    English titles got English baselines (bm25s on whitespace tokens, flat cosine over MiniLM vectors
    its e5-routed chunks do not have) and the English stage variants."""
    text = "梅雨は東アジアの広範囲においてみられる特有の気象現象で、5月から7月にかけて来る雨の多い期間のこと。"
    for title in ("", "Rainy season"):
        assert collection_is_cjk(BeirCollection("ja", {f"d{i}": (title, text) for i in range(3)}, {}, {}))
    assert not collection_is_cjk(BeirCollection("en", {"d1": ("梅雨", "The rainy season in East Asia lasts from May "
                                                                      "to July, with many wet and cloudy days.")}, {}, {}))


def test_an_eval_holds_its_work_dir_and_refuses_a_folder_it_did_not_make(tmp_path):
    """guards against: ``--work-dir`` pointed at a user's folder (an eval writes, overwrites and
    removes files there: ``NNNNNN-*.txt`` of its own naming), and two evals on one work dir at once
    (each writes its ``--config`` into the shared home: one scored the other's settings)."""
    from typer.testing import CliRunner

    from fabric_assets.cli import app
    from fabric_assets.measurement.harness import WORK_DIR_MARK, claimed_work_dir

    col = BeirCollection("col", {"d1": ("", "x")}, {}, {})
    mine = tmp_path / "notes"
    (mine / "col").mkdir(parents=True)
    (mine / "col" / "000000-plan.txt").write_text("my plan")
    (mine / "diary.txt").write_text("mine")
    with pytest.raises(WorkDirError, match=r"did not write \(diary.txt\)"):
        with claimed_work_dir(mine, col):
            pass
    out = CliRunner().invoke(app, ["eval", str(_folder(tmp_path / "col")), "--work-dir", str(mine)])
    assert out.exit_code == 2 and "did not write (diary.txt)" in out.output, out.output
    assert sorted(p.name for p in mine.rglob("*")) == ["000000-plan.txt", "col", "diary.txt"]
    assert (mine / "col" / "000000-plan.txt").read_text() == "my plan"

    older = tmp_path / "older"  # a work dir an older Fabric made: no mark, only its own entries
    for name in ("col", "home", "lancedb-baseline"):
        (older / name).mkdir(parents=True)
    with claimed_work_dir(older, col):
        assert (older / WORK_DIR_MARK).exists()
        with pytest.raises(WorkDirError, match="another fabric eval is using"):
            with claimed_work_dir(older, col):
                pass
    (older / "later.txt").write_text("written after it was marked")
    with claimed_work_dir(older, col):  # released, and marked: its own again
        pass


def test_lexical_baselines_index_every_chunk_of_a_mixed_language_collection(tmp_path):
    """guards against (trial 11d): bm25s and LanceDB FTS indexing only the chunks that have a vector
    of the query's model, so in an English collection a Japanese document (its chunks have e5
    vectors) was out of their reach while Fabric's word channel found it: a baseline handicapped."""
    from fabric_assets.measurement.eval_run import run_eval

    docs = {"d1": ("Lighthouse", "The keeper lit the lamp every evening before the storm."),
            "d2": ("Bread", "Sourdough bread rises slowly overnight in a cool kitchen."),
            "d3": ("湿度計", "Zirconia センサーは東京の研究所で開発され、湿度と温度を同時に測定する装置として知られている。")}
    beir = _folder(tmp_path / "mixed", corpus="".join(json.dumps({"_id": k, "title": t, "text": x}) + "\n"
                                                       for k, (t, x) in docs.items()),
                   queries='{"_id": "2", "text": "zirconia"}\n', qrels="2\td3\t1\n")
    result = run_eval(beir, work_dir=tmp_path / "work")
    assert result["chunks_without_query_model_vector"] == 1
    for lexical in ("bm25s", "lancedb-fts", "fabric:word"):
        assert result["metrics"][lexical]["MRR@10"] == pytest.approx(1.0), lexical
    assert result["metrics"]["flat-cosine"]["Recall@100"] == 0.0  # its vector is e5's: out of reach, and said


def test_eval_says_each_step_as_it_begins(tmp_path, monkeypatch):
    """guards against (fresh-user trial 19c): `fabric eval ../shared/eval/cranfield` printed nothing
    for minutes while it ingested, so it read as hung. The ingest is announced before it runs,
    naming the document count and the scratch home; then the baselines and the queries. And its
    Markdown table, written to a file, had rows cut across lines."""
    from typer.testing import CliRunner

    import fabric_assets.measurement.eval_run as eval_run
    from fabric_assets.cli import app

    seen_at_ingest: list[str] = []
    real_ingest = eval_run.ingest

    def ingest(path, home, *args, **kwargs):
        seen_at_ingest.extend(said)
        return real_ingest(path, home, *args, **kwargs)

    said: list[str] = []
    monkeypatch.setattr(eval_run, "ingest", ingest)
    eval_run.run_eval(_folder(tmp_path / "col"), work_dir=tmp_path / "work", progress=said.append)
    assert len(seen_at_ingest) == 1 and "ingesting 2 documents of col" in seen_at_ingest[0], seen_at_ingest
    assert str(tmp_path / "work") in seen_at_ingest[0]
    assert [line.split()[0] for line in said] == ["ingesting", "building", "running"], said
    assert " queries through Fabric, " in said[2] and "baselines" in said[2], said

    out = CliRunner().invoke(app, ["eval", str(tmp_path / "col"), "--work-dir", str(tmp_path / "work")])
    assert out.exit_code == 0 and "ingesting 2 documents of col" in out.output, out.output
    # The table is Markdown whatever the width: each row whole on its line (rows of 90 and more
    # characters were cut at 80 where stdout is no terminal).
    rows = [line for line in out.output.splitlines() if line.startswith("|")]
    assert rows and all(line.endswith("|") and line.count("|") == rows[0].count("|") for line in rows), out.output
    assert max(map(len, rows)) > 80
