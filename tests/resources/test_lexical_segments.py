"""Generations assembled from bounded segments: exact BM25 statistics at the cost of the change.

tantivy-py gives no merge, so ``LexicalIndex.write_generation`` writes tantivy's ``meta.json``
itself, listing the previous generation's untouched segments and new ones; these tests pin the
format it relies on, the exactness of every generation against a fresh index of its live
documents, the cost (the segments a change touches, not the index), and what happens when its
segment records or older generations cannot be trusted.
"""

from __future__ import annotations

import json
import random
import uuid

import pyarrow as pa
import pytest
import tantivy

from fabric_resources import tantivy_meta
from fabric_resources.lexical_health import bm25_statistics
from fabric_resources.lexical_index import (ANALYZER_ID, INDEX_LAYOUT, META_FILE, LexicalIndex, OpenIndex,
                                            _register, add_to_writer, deleted_documents, index_schema)
from fabric_resources.lexical_segments import FAN_IN, MAX_SEGMENT_DOCUMENTS, RECORD_PREFIX
from fabric_resources.schema import (INDEX_FIELD_CHUNK_ID, INDEX_FIELD_PARSE_ID, INDEX_FIELD_SUBSTRING,
                                     INDEX_FIELD_WORD, LEXICAL_DOCUMENTS, SCHEMA_VERSION)
from fabric_resources.text_folding import fold

#: Index documents per lexical row: its chunk document and, no context window covering it, a
#: window document of its own (lexical_index.index_documents).
DOCS_PER_ROW = 2

WORDS = ["lighthouse", "keeper", "lamp", "tide", "storm", "beam", "harbour", "rope", "gull", "fog"]
KANJI = list("認証灯台守署名検証港霧")


def _docs(rows) -> pa.Table:
    return pa.table({"parse_id": [r[0] for r in rows], "chunk_id": [r[1] for r in rows],
                     "folded_text": [fold(r[2]) for r in rows], "analyzer": [ANALYZER_ID] * len(rows)},
                    schema=LEXICAL_DOCUMENTS)


def _parse(rng: random.Random, n_docs: int) -> list[tuple[str, str, str]]:
    pid = f"{rng.getrandbits(128):032x}"
    return [(pid, f"{pid}-{i}", " ".join(rng.choices(WORDS, k=rng.randint(1, 12))) + " "
             + "".join(rng.choices(KANJI, k=rng.randint(0, 8)))) for i in range(n_docs)]


def _scores(index: OpenIndex, field: str, token: str) -> dict[str, float]:
    searcher = index.searcher
    hits = searcher.search(tantivy.Query.term_query(index.schema, field, token), limit=100_000).hits
    return {searcher.doc(addr)[INDEX_FIELD_CHUNK_ID][0]: score for score, addr in hits}


def _assert_ranks_like_fresh(got: OpenIndex, rows, scratch) -> None:
    """Every term's scores in ``got`` equal those of a fresh one-segment index of ``rows``."""
    ref = LexicalIndex(scratch, max_segment_documents=1_000_000)
    want = ref.open(ref.build_fresh(_docs(rows)))
    assert deleted_documents(got.searcher) == 0
    assert got.searcher.num_docs == want.searcher.num_docs == DOCS_PER_ROW * len(rows)
    assert want.searcher.num_segments <= 1
    for field in (INDEX_FIELD_WORD, INDEX_FIELD_SUBSTRING):
        terms = [t for t, _ in want.searcher.terms_with_prefix(field, "")]
        for token in terms:
            assert _scores(got, field, token) == _scores(want, field, token), (field, token)
        probe = terms[0] if terms else None
        assert bm25_statistics(got, field, probe) == bm25_statistics(want, field, probe)
    assert got.word_avgdl == want.word_avgdl


def _segments(index: LexicalIndex, gen: str) -> list[tantivy_meta.SegmentMeta]:
    return tantivy_meta.segments(tantivy_meta.load_meta(index.root / gen))


def test_tantivy_meta_format_is_the_one_the_assembler_writes(tmp_path):
    """guards against: a tantivy upgrade changing meta.json's keys, its segment entries, the names
    of segment files or the order ``segment_ord`` follows, so that a generation Fabric assembles
    by hand is misread (documents lost, or statistics counted from the wrong segments)."""
    path = tmp_path / "ix"
    path.mkdir()
    index = tantivy.Index(index_schema(), path=str(path))
    _register(index)
    writer = index.writer(heap_size=15_000_000, num_threads=1)
    sizes = {"a" * 32: 2, "b" * 32: 3, "c" * 32: 1}
    for pid, n in sizes.items():  # one commit per parse: one segment each, three are too few to merge
        add_to_writer(writer, _docs([(pid, f"{pid[0]}-{i}", "lamp tide") for i in range(n)]))
        writer.commit()
    writer.wait_merging_threads()
    raw = json.loads((path / "meta.json").read_text())
    assert set(raw) - {"payload"} == {"index_settings", "segments", "schema", "opstamp"}
    assert all(set(e) == {"segment_id", "max_doc", "deletes"} for e in raw["segments"])
    listed = tantivy_meta.segments(tantivy_meta.load_meta(path))
    assert sorted(s.max_doc for s in listed) == sorted(DOCS_PER_ROW * n for n in sizes.values())
    assert not any(s.deletes for s in listed)
    for seg in listed:
        names = {p.name for p in tantivy_meta.segment_files(path, seg)}
        assert names == {uuid.UUID(seg.segment_id).hex + ext
                         for ext in (".idx", ".pos", ".term", ".store", ".fast", ".fieldnorm")}
    # segment_ord is the position in meta.json: each parse's documents sit at the position whose
    # segment has exactly as many documents as the parse (the sizes differ).
    index.reload()
    searcher = index.searcher()
    for pid, n in sizes.items():
        hits = searcher.search(tantivy.Query.term_query(index_schema(), INDEX_FIELD_PARSE_ID, pid), limit=10).hits
        assert {listed[a.segment_ord].max_doc for _, a in hits} == {DOCS_PER_ROW * n}
    # A meta.json Fabric writes listing two of the three segments is read as exactly those two.
    tantivy_meta.write_meta(path, tantivy_meta.load_meta(path), [s for s in listed if s.max_doc != DOCS_PER_ROW * 3], 99)
    reopened = tantivy.Index.open(str(path))
    assert reopened.searcher().num_docs == DOCS_PER_ROW * 3 and reopened.searcher().num_segments == 2
    # Another shape fails loudly.
    (path / "meta.json").write_text(json.dumps({**raw, "segment_codecs": {}}))
    with pytest.raises(tantivy_meta.IndexFormatChanged):
        tantivy_meta.load_meta(path)
    (path / "meta.json").write_text(json.dumps({**raw, "segments": [{**raw["segments"][0], "num_docs": 1}]}))
    with pytest.raises(tantivy_meta.IndexFormatChanged):
        tantivy_meta.load_meta(path)


def test_a_change_costs_its_segments_not_the_index(tmp_path):
    """guards against: removing a parse re-indexing the whole index (one segment when built in
    one go: ~0.5-0.7 ms per chunk, 50-70 s per activation at 100k chunks), which makes change →
    release grow with the index (issue 17)."""
    rng = random.Random(17)
    parses = [_parse(rng, 3) for _ in range(1_000)]
    index = LexicalIndex(tmp_path / "lex")
    gen = index.build_fresh(_docs([r for p in parses for r in p]))
    built = _segments(index, gen)
    assert len(built) == -(-DOCS_PER_ROW * 3_000 // MAX_SEGMENT_DOCUMENTS)
    assert all(s.max_doc <= MAX_SEGMENT_DOCUMENTS for s in built)
    by_id = {p[0][0]: p for p in parses}
    edited, deleted = rng.sample(sorted(by_id), 2)
    added = [_parse(rng, 3), _parse(rng, 3)]
    reindexed = []

    def documents_of(ids):
        reindexed.extend(ids)
        return _docs([r for pid in ids for r in by_id[pid]])

    new = index.write_generation(gen, [edited, deleted], _docs([r for p in added for r in p]), documents_of)
    kept = {s.segment_id for s in _segments(index, new)}
    touched = [s for s in built if s.segment_id not in kept]
    assert 1 <= len(touched) <= 2 < len(built)  # the others are the previous generation's, as they were
    re_added = sum(len(by_id[p]) for p in reindexed)
    assert DOCS_PER_ROW * re_added == sum(s.max_doc for s in touched) - DOCS_PER_ROW * 6 <= 2 * MAX_SEGMENT_DOCUMENTS
    live = [r for pid, rows in by_id.items() if pid not in (edited, deleted) for r in rows]
    _assert_ranks_like_fresh(index.open(new), live + [r for p in added for r in p], tmp_path / "ref")


def _random_changes(tmp_path, cap: int, steps: int, seed: int) -> None:
    rng = random.Random(seed)
    index = LexicalIndex(tmp_path / "lex", max_segment_documents=cap)
    live: dict[str, list] = {}
    gen = None
    for step in range(steps):
        removed = rng.sample(sorted(live), k=min(len(live), rng.choice([0, 0, 1, 2, 4])))
        added = [_parse(rng, rng.choice([1, 1, 2, 3, 5, 9, 14])) for _ in range(rng.randint(0 if gen else 1, 4))]
        previous = gen
        before = {p.name: p.read_bytes() for p in (index.root / gen).iterdir()} if gen else {}
        for pid in removed:
            del live[pid]
        live.update({p[0][0]: p for p in added})
        add = _docs([r for p in added for r in p])
        gen = index.build_fresh(add) if gen is None else index.write_generation(
            gen, removed, add, lambda ids: _docs([r for pid in ids for r in live[pid]]))
        rows = [r for p in live.values() for r in p]
        _assert_ranks_like_fresh(index.open(gen), rows, tmp_path / f"ref-{step}")
        listed = _segments(index, gen)
        assert all(0 < s.max_doc <= cap and not s.deletes for s in listed), (step, listed)
        assert sum(s.max_doc for s in listed) == DOCS_PER_ROW * len(rows)
        if previous:
            assert {p.name: p.read_bytes() for p in (index.root / previous).iterdir()} == before, step


def test_random_changes_over_small_segments_rank_like_a_fresh_index(tmp_path):
    """guards against: a segment kept although it holds a removed document, a document of a
    segment left out not indexed again (or twice), a parse larger than a segment losing its other
    part, consolidation of small segments dropping documents, and a new generation changing the
    files of the previous one (they share them by hard links)."""
    _random_changes(tmp_path, cap=DOCS_PER_ROW * 6, steps=30, seed=1713)


def test_a_parse_cut_between_shared_segments_is_rewritten_whole(tmp_path, monkeypatch):
    """guards against: a parse whose documents sit in two segments beside other parses (a batch
    halved because it outgrew the writer's heap is cut anywhere) being indexed twice, or losing
    its other part, when only one of those segments is rewritten."""
    import fabric_resources.lexical_segments as lexical_segments

    def anywhere(parse_ids, cap):  # fixed-size cuts that ignore parse boundaries
        return [(lo, min(lo + cap, len(parse_ids))) for lo in range(0, len(parse_ids), cap)]

    monkeypatch.setattr(lexical_segments, "_batches", anywhere)
    _random_changes(tmp_path, cap=DOCS_PER_ROW * 5, steps=20, seed=99)


def test_small_segments_from_many_small_changes_are_consolidated(tmp_path):
    """guards against: every activation leaving one more tiny segment (each costs every query a
    little: docs/benchmarks.md), and against consolidation re-indexing much per activation: by
    size tier, a document is indexed again once per tier, at most FAN_IN - 1 small segments per tier."""
    rng = random.Random(5)
    cap = 32
    tiers = 2  # small segments hold 1-15 documents: tiers 1-3 and 4-15 (each change adds 4 here)
    index = LexicalIndex(tmp_path / "lex", max_segment_documents=cap)
    live = [_parse(rng, 2) for _ in range(32)]
    gen = index.build_fresh(_docs([r for p in live for r in p]))
    indexed = []
    for _ in range(60):
        one = _parse(rng, 2)
        live.append(one)
        gen = index.write_generation(gen, [], _docs(one), lambda ids: _docs(
            [r for p in live for r in p if r[0] in set(ids)]))
        indexed.append(index.last_write["documents_indexed"])
        small = [s.max_doc for s in _segments(index, gen) if s.max_doc < cap // 2]
        assert len(small) <= (FAN_IN - 1) * tiers, small
        assert index.last_write["documents_indexed"] <= 2 * cap
    assert sum(indexed) <= 60 * 2 * DOCS_PER_ROW * (tiers + 1), indexed  # each document: added, then once per tier
    assert len(_segments(index, gen)) <= len(live) * 2 * DOCS_PER_ROW // (cap // 2) + (FAN_IN - 1) * tiers
    _assert_ranks_like_fresh(index.open(gen), [r for p in live for r in p], tmp_path / "ref")


def test_segment_records_that_disagree_with_the_index_are_not_trusted(tmp_path):
    """guards against: a damaged or swapped segment record (which parses a segment holds) making
    a later change keep a removed parse's documents, index a parse twice or drop a segment's
    other documents: the index confirms every record a change uses, else everything is rebuilt."""
    rng = random.Random(8)
    index = LexicalIndex(tmp_path / "lex", max_segment_documents=DOCS_PER_ROW * 4)
    parses = {p[0][0]: p for p in (_parse(rng, 2) for _ in range(8))}
    gen = index.build_fresh(_docs([r for p in parses.values() for r in p]))
    listed = _segments(index, gen)
    paths = [index.root / gen / f"{RECORD_PREFIX}{s.file_prefix}json" for s in listed]
    first, second = (json.loads(p.read_text()) for p in paths[:2])
    # Swap one parse between the two records: counts still add up to each segment's documents.
    a, b = sorted(first["parses"])[0], sorted(second["parses"])[0]
    first["parses"][b] = first["parses"].pop(a)
    second["parses"][a] = second["parses"].pop(b)
    for p, rec in zip(paths, (first, second)):
        p.unlink()  # a hard link shared with no one here, but never write through one
        p.write_text(json.dumps(rec))
    victim = sorted(set(first["parses"]) - {b})[0]  # a parse the first record lists truly
    new = index.write_generation(gen, [victim], _docs([]), lambda ids: _docs([r for i in ids for r in parses[i]]))
    assert index.last_write["rebuilt"]
    del parses[victim]
    _assert_ranks_like_fresh(index.open(new), [r for p in parses.values() for r in p], tmp_path / "ref")


def test_a_generation_from_before_bounded_segments_is_rebuilt_once(tmp_path):
    """guards against: extending a generation written before segments were bounded (one segment,
    no segment records: every later removal would re-index it all), or trusting its layout."""
    rng = random.Random(3)
    parses = {p[0][0]: p for p in (_parse(rng, 3) for _ in range(20))}
    index = LexicalIndex(tmp_path / "lex", max_segment_documents=8)
    old = index.root / "gen-00000001"
    old.mkdir(parents=True)
    ix = tantivy.Index(index_schema(), path=str(old))  # as the previous Fabric wrote it
    _register(ix)
    writer = ix.writer(heap_size=15_000_000, num_threads=1)
    add_to_writer(writer, _docs([r for p in parses.values() for r in p]))
    writer.commit()
    writer.wait_merging_threads()
    (old / META_FILE).write_text(json.dumps({"schema_version": SCHEMA_VERSION, "analyzer": ANALYZER_ID,
                                             "layout": INDEX_LAYOUT, "generation": old.name}))
    docs_of = lambda ids: _docs([r for i in ids for r in parses[i]])  # noqa: E731
    gone = sorted(parses)[0]
    del parses[gone]
    gen = index.write_generation(old.name, [gone], _docs([]), docs_of)
    assert index.last_write["rebuilt"] and all(s.max_doc <= 8 for s in _segments(index, gen))
    gone = sorted(parses)[0]
    del parses[gone]
    gen = index.write_generation(gen, [gone], _docs([]), docs_of)
    assert not index.last_write["rebuilt"] and index.last_write["documents_indexed"] < 8
    _assert_ranks_like_fresh(index.open(gen), [r for p in parses.values() for r in p], tmp_path / "ref")


#: point → code run before ``write_generation`` in a child process, replacing one function so that
#: the process kills itself there with SIGKILL.
_KILL_DURING_WRITE = {
    # The second new segment's files are being moved into the scratch generation.
    "segment-moved": (
        "import os, signal\n_real, _moved = os.replace, []\n"
        "def _replace(src, dst, *a, **k):\n"
        "    if '.build' in os.fspath(src):\n"
        "        _moved.append(dst)\n"
        "        if len(_moved) == 8:\n"
        "            os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return _real(src, dst, *a, **k)\n"
        "os.replace = _replace\n"),
    # Everything is written (meta.json, Fabric's record); the scratch directory is being renamed.
    "before-rename": (
        "import os, signal\n_real = os.replace\n"
        "def _replace(src, dst, *a, **k):\n"
        "    if os.path.basename(os.fspath(dst)).startswith('gen-'):\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return _real(src, dst, *a, **k)\n"
        "os.replace = _replace\n"),
}


@pytest.mark.parametrize("point", sorted(_KILL_DURING_WRITE))
def test_a_writer_killed_mid_assembly_leaves_the_previous_generation_whole(tmp_path, point):
    """guards against: kill -9 while a generation is assembled changing a file of the previous
    generation (they share files by hard links), leaving a directory that lists as a generation,
    or a scratch directory that makes the next write fail, index twice or stay behind."""
    import subprocess
    import sys

    rng = random.Random(41)
    parses = {p[0][0]: p for p in (_parse(rng, 3) for _ in range(12))}
    index = LexicalIndex(tmp_path / "lex", max_segment_documents=4)
    gen = index.build_fresh(_docs([r for p in parses.values() for r in p]))
    before = {p.name: p.read_bytes() for p in (index.root / gen).iterdir()}
    removed = sorted(parses)[:2]
    added = [_parse(rng, 3) for _ in range(3)]
    (tmp_path / "change.json").write_text(json.dumps({"live": parses, "removed": removed, "added": added}))
    child = _KILL_DURING_WRITE[point] + f"""
import json, pyarrow as pa
from fabric_resources.lexical_index import ANALYZER_ID, LexicalIndex
from fabric_resources.schema import LEXICAL_DOCUMENTS
from fabric_resources.text_folding import fold
change = json.load(open({str(tmp_path / "change.json")!r}))
def docs(rows):
    return pa.table({{"parse_id": [r[0] for r in rows], "chunk_id": [r[1] for r in rows],
                     "folded_text": [fold(r[2]) for r in rows], "analyzer": [ANALYZER_ID] * len(rows)}},
                    schema=LEXICAL_DOCUMENTS)
LexicalIndex({str(index.root)!r}, max_segment_documents=4).write_generation(
    {gen!r}, change["removed"], docs([r for p in change["added"] for r in p]),
    lambda ids: docs([r for i in ids for r in change["live"][i]]))
"""
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert done.returncode == -9, done.stderr[-2000:]
    left = sorted(p.name for p in index.root.iterdir() if p.name.startswith("."))
    assert left, "the kill did not land inside the assembly"
    assert index.generations() == [gen]
    assert {p.name: p.read_bytes() for p in (index.root / gen).iterdir()} == before
    index.open(gen)  # still serves

    for pid in removed:
        del parses[pid]
    parses.update({p[0][0]: p for p in added})
    new = index.write_generation(gen, removed, _docs([r for p in added for r in p]),
                                 lambda ids: _docs([r for i in ids for r in parses[i]]))
    assert sorted(p.name for p in index.root.iterdir()) == sorted([gen, new])
    _assert_ranks_like_fresh(index.open(new), [r for p in parses.values() for r in p], tmp_path / "ref")


def test_an_assembled_generation_tantivy_reads_otherwise_is_a_typed_error(tmp_path, monkeypatch):
    """guards against: a hand-written meta.json that tantivy reads otherwise than written (here it
    lists one segment fewer) becoming a generation, or failing with anything but
    ``IndexFormatChanged`` (it was a NameError)."""
    rng = random.Random(2)
    parses = [_parse(rng, 3) for _ in range(6)]
    index = LexicalIndex(tmp_path / "lex", max_segment_documents=4)
    gen = index.build_fresh(_docs([r for p in parses for r in p]))
    real = tantivy_meta.write_meta
    monkeypatch.setattr(tantivy_meta, "write_meta", lambda d, t, listed, o: real(d, t, listed[:-1], o))
    with pytest.raises(tantivy_meta.IndexFormatChanged, match="tantivy sees"):
        index.write_generation(gen, [], _docs(_parse(rng, 2)))
    assert index.generations() == [gen]
    assert sorted(p.name for p in index.root.iterdir()) == [gen]


def test_the_home_builds_generations_with_the_configured_segment_size(tmp_path):
    """guards against: ``indexing.lexical_segment_documents`` not reaching the home's index."""
    import json

    from fabric_resources.home import FabricHome

    home = FabricHome(tmp_path / "home")
    assert home.lexical.max_segment_documents == 1024
    home.layout.config_file.write_text(json.dumps({"indexing": {"lexical_segment_documents": 65536}}))
    assert FabricHome(tmp_path / "home").lexical.max_segment_documents == 65536
