"""Lexical health by independent reconstruction, repair from canonical tables, and the
defined fallback when the serving index is unusable (issue: lexical retrieval done right)."""

from __future__ import annotations

import json
import shutil

import pyarrow.compute as pc
import pytest
import tantivy
from conftest import ingest

from fabric_assets.activation.repair import lexical_repair
from fabric_assets.sample_corpus import write_sample_corpus
from fabric_query import Fabric
from fabric_resources.home import FabricHome
from fabric_resources.lexical_health import canonical_windows, lexical_health
from fabric_resources.lexical_index import (META_FILE, _register, add_to_writer, index_documents, index_schema, word_analyzer,
                                            word_field_text)
from fabric_resources.schema import INDEX_FIELD_CHUNK_ID, INDEX_FIELD_PARSE_ID, INDEX_FIELD_SUBSTRING, INDEX_FIELD_WORD

QUERIES = ["lighthouse keeper", "sourdough starter", "トークン", "园丁", "storm lamp", "認証"]


@pytest.fixture
def home(tmp_path, fabric_home):
    ingest(write_sample_corpus(tmp_path / "sample"), fabric_home)
    return fabric_home


def _generation_path(home):
    return home.lexical.root / home.catalog.current_release().manifest["lexical_generation"]


def _writer(home):
    index = tantivy.Index.open(str(_generation_path(home)))
    _register(index)
    return index, index.writer(heap_size=15_000_000, num_threads=1)


def _a_chunk(home):
    report = lexical_health(home)
    assert report.healthy, report
    release = home.catalog.current_release()
    chunks = home.tables.read("chunks", version=release.manifest["tables"]["chunks"])
    return chunks.column("chunk_id")[0].as_py(), chunks.column("parse_id")[0].as_py()


def test_healthy_after_ingest_and_after_incremental_activations(home, tmp_path):
    """guards against: health comparing the index with itself, or deleted-but-unmerged
    documents (left in segments by incremental activations) counting as live."""
    report = lexical_health(home)
    assert report.healthy and report.expected_documents == report.actual_documents > 0
    assert all(f.expected_terms > 0 for f in report.fields)
    (tmp_path / "sample/notes/bread.txt").write_text("Rye bread is dense and dark.\n")
    ingest(tmp_path / "sample", home)
    assert lexical_health(home).healthy


def test_health_catches_a_deleted_document(home):
    """guards against: a document missing from the index going unnoticed (row counts alone)."""
    chunk_id, _ = _a_chunk(home)
    _, w = _writer(home)
    w.delete_documents_by_term(INDEX_FIELD_CHUNK_ID, chunk_id)
    w.commit()
    w.wait_merging_threads()
    report = lexical_health(home)
    assert not report.healthy and chunk_id in report.missing_documents
    assert report.actual_documents == report.expected_documents - 1


def test_health_catches_a_wrong_token_with_unchanged_coverage(home):
    """guards against: checking only the document set — LOOM's point: wrong tokens with
    unchanged coverage must be caught by the vocabulary comparison."""
    chunk_id, parse_id = _a_chunk(home)
    _, w = _writer(home)
    w.delete_documents_by_term(INDEX_FIELD_CHUNK_ID, chunk_id)
    w.add_document(tantivy.Document(**{INDEX_FIELD_CHUNK_ID: chunk_id, INDEX_FIELD_PARSE_ID: parse_id,
                                       INDEX_FIELD_WORD: "zzzwrongtoken", "substring": "zzzwrongtoken"}))
    w.commit()
    w.wait_merging_threads()
    report = lexical_health(home)
    assert report.expected_document_digest == report.actual_document_digest
    assert not report.healthy
    assert any("zzzwrongtoken" in f.differing_terms for f in report.fields)


def test_health_catches_a_dropped_field_then_repair_fixes_everything(home):
    """guards against: one field silently empty; repair re-parsing or re-embedding; repair
    changing canonical records."""
    chunk_id, parse_id = _a_chunk(home)
    _, w = _writer(home)
    w.delete_documents_by_term(INDEX_FIELD_CHUNK_ID, chunk_id)
    w.add_document(tantivy.Document(**{INDEX_FIELD_CHUNK_ID: chunk_id, INDEX_FIELD_PARSE_ID: parse_id}))
    w.commit()
    w.wait_merging_threads()
    broken = lexical_health(home)
    assert not broken.healthy and {f.field for f in broken.fields if not f.ok} == {"word", "substring"}

    runs_before = [(r.parse_id, r.updated_at) for r in home.catalog.parse_runs()]
    vectors_version = home.tables.version("chunk_vectors")
    report = lexical_repair(home)
    assert not report.before.healthy and report.after.healthy and report.canonical_unchanged
    assert [(r.parse_id, r.updated_at) for r in home.catalog.parse_runs()] == runs_before
    assert home.tables.version("chunk_vectors") == vectors_version
    assert home.catalog.current_release().release_id == report.release_id


@pytest.mark.parametrize("damage,reason", [
    ("remove", "index-missing"),
    ("schema", "index-schema-mismatch"),
    ("garbage", "index-unreadable"),
])
def test_unusable_index_is_reported_and_answered_by_the_scan(home, damage, reason):
    """guards against: a silent empty answer when the serving index is missing, written by
    another schema version, or unreadable; the scan ranking a chunk that holds one query word above
    the chunk of the same window that holds both (their window scores tie: the order was the
    chunk IDs', and a re-parse that changed the IDs put the wrong one first)."""
    path = _generation_path(home)
    if damage == "remove":
        import shutil

        shutil.rmtree(path)
    elif damage == "schema":
        meta = json.loads((path / META_FILE).read_text())
        (path / META_FILE).write_text(json.dumps({**meta, "schema_version": 999}))
    else:
        for f in path.iterdir():
            if f.suffix in (".idx", ".term", ".pos", ".store", ".fast", ".fieldnorm") or f.name == "meta.json":
                f.unlink()
                f.write_bytes(b"\x00garbage")
    fabric = Fabric(home.root)
    pack = fabric.search("lighthouse keeper")
    assert pack.fallback_reason == reason
    assert "scan" in pack.channels_run and "word" not in pack.channels_run
    assert pack.results and "lighthouse" in pack.results[0].text.lower()
    assert lexical_health(home).problem == reason


def test_flipped_bytes_in_postings_positions_or_norms_are_unhealthy_and_repair_rebuilds(home):
    """guards against (hostile trial 9): bytes flipped inside a segment's postings (.idx),
    positions (.pos) or field norms (.fieldnorm) reported healthy by `fabric lexical-health` (and
    its asset check) while tantivy decoded them without an error: answers changed with no fallback,
    or a panic at query time fell back to the scan. tantivy's footer CRC of each file now says so."""
    path = _generation_path(home)

    def flip(f):
        data = bytearray(f.read_bytes())
        footer = int.from_bytes(data[-8:-4], "little") + 8
        for i in range((len(data) - footer) // 2, (len(data) - footer) // 2 + 4):
            data[i] ^= 0xA5
        f.write_bytes(bytes(data))

    for ext in (".idx", ".pos", ".fieldnorm"):
        (target,) = [f for f in sorted(path.iterdir()) if f.suffix == ext][:1]
        flip(target)
        report = lexical_health(home)
        assert not report.healthy and report.problem == f"index-damaged: {target.name}: checksum mismatch", ext
        flip(target)  # back as it was
    assert lexical_health(home).healthy
    flip(target)
    repaired = lexical_repair(home)
    assert not repaired.before.healthy and repaired.after.healthy


def test_a_corrupt_term_dictionary_falls_back_and_repair_rebuilds_it(home, monkeypatch):
    """guards against (hostile trial, 2026-12-05): a generation whose term dictionary is garbage
    past its header (it opens and counts its documents, then every term lookup raises tantivy's
    "An IO error occurred: 'Unsupported dictionary type …'") raising a ValueError traceback out of
    search, out of lexical-health, and out of lexical-repair, whose health check ran first: the one
    remedy died. Term lookups of that generation fail here as they did on the damaged file (a
    byte-level corruption that does this depends on the dictionary's size and layout)."""
    import fabric_resources.lexical_health as health
    from fabric_resources.lexical_index import LexicalIndex, OpenIndex

    damaged = home.catalog.current_release().manifest["lexical_generation"]
    opened_damaged: list[OpenIndex] = []  # the home's damaged generation (a scratch one has its name too)
    real_open = LexicalIndex.open
    def open_(self, generation, *args, **kwargs):
        index = real_open(self, generation, *args, **kwargs)
        if self.root == home.lexical.root and generation == damaged:
            opened_damaged.append(index)
        return index
    def corrupt(real):
        def lookup(index, *args):
            if any(index is d for d in opened_damaged):
                raise ValueError("An IO error occurred: 'Unsupported dictionary type, found 1431655764'")
            return real(index, *args)
        return lookup
    monkeypatch.setattr(LexicalIndex, "open", open_)
    monkeypatch.setattr(OpenIndex, "_count", corrupt(OpenIndex._count))
    monkeypatch.setattr(health, "_vocabulary", corrupt(health._vocabulary))
    pack = Fabric(home.root).search("lighthouse keeper")
    assert pack.fallback_reason == "index-unreadable" and "lighthouse" in pack.results[0].text.lower()
    report = lexical_health(home)
    assert not report.healthy and report.problem.startswith("index-unreadable")
    repaired = lexical_repair(home)
    assert not repaired.before.healthy and repaired.after.healthy and repaired.canonical_unchanged
    assert home.catalog.current_release().manifest["lexical_generation"] != damaged
    pack = Fabric(home.root).search("lighthouse keeper")
    assert pack.fallback_reason is None and "word" in pack.channels_run


def test_building_an_index_never_answers_less_than_having_none(home):
    """guards against: the index missing matches that a plain scan of canonical chunks finds."""
    from fabric_query.channels.lexical import needs_substring_channel, substring_channel, word_channel
    from fabric_query.channels.scan import scan_channel
    from fabric_query.querylang import parse_query
    from fabric_query.release import release_view

    view = release_view(home, home.catalog.current_release())
    for q in QUERIES:
        parsed = parse_query(q)
        scanned = {c for c, _ in scan_channel(view, parsed, None, 1000)}
        indexed = {c for c, _ in word_channel(view.lexical, parsed, None, 1000)}
        if needs_substring_channel(parsed):
            indexed |= {c for c, _ in substring_channel(view.lexical, parsed, None, 1000)}
        assert scanned, q
        assert scanned <= indexed, (q, scanned - indexed)


def _rewrite_generation(home, word_length_of):
    """Replace the serving generation's segments by one fresh segment of the release's lexical
    documents, with ``word_length_of(chunk_id, right_length)`` as each word_length: no deleted
    document is left behind, so only the lengths can differ."""
    gen_path = _generation_path(home)
    meta = (gen_path / META_FILE).read_text()
    release = home.catalog.current_release()
    docs = home.tables.read("lexical_documents", parse_ids={m["parse_id"] for m in release.manifest["sources"].values()},
                            version=release.manifest["tables"]["lexical_documents"])
    docs = index_documents(docs, canonical_windows(home, release)).to_pylist()
    shutil.rmtree(gen_path)
    gen_path.mkdir()
    index = tantivy.Index(index_schema(), path=str(gen_path))
    _register(index)
    w = index.writer(heap_size=15_000_000, num_threads=1)
    for d in docs:
        doc = tantivy.Document(**{INDEX_FIELD_CHUNK_ID: d["chunk_id"], INDEX_FIELD_PARSE_ID: d["parse_id"],
                                  "kind": d["kind"]})
        length = 0
        if d["kind"] == "window":  # the word field's documents (lexical_index.index_documents)
            word = word_field_text(d["folded_text"])
            doc.add_text(INDEX_FIELD_WORD, word)
            for m in d["members"]:
                doc.add_text("members", m)
            length = max(word_length_of(m, len(word_analyzer().analyze(word))) for m in d["members"])
        else:
            doc.add_text(INDEX_FIELD_SUBSTRING, d["folded_text"])
        doc.add_unsigned("word_length", length)
        w.add_document(doc)
    w.commit()
    w.wait_merging_threads()
    (gen_path / META_FILE).write_text(meta)


def test_health_catches_a_wrong_document_length(home):
    """guards against: a document whose word_length (BM25's |d| for CJK re-scoring) is wrong
    while its terms are right, which the vocabulary comparison alone cannot see."""
    chunk_id, _ = _a_chunk(home)
    _rewrite_generation(home, lambda cid, n: 100_000 if cid == chunk_id else n)
    report = lexical_health(home)
    assert all(f.ok for f in report.fields) and report.expected_document_digest == report.actual_document_digest
    assert report.deleted_documents == 0
    assert not report.healthy and report.actual_word_tokens > report.expected_word_tokens
    assert lexical_repair(home).after.healthy


def test_health_catches_a_deleted_but_unmerged_document(home):
    """guards against: health comparing only live documents and live document frequencies,
    while BM25 ranks by statistics that still count a deleted document its segment holds
    (issue 13, item 5: lexical-health said healthy while 29 of 56 queries scored differently)."""
    chunk_id, parse_id = _a_chunk(home)
    release = home.catalog.current_release()
    docs = home.tables.read("lexical_documents", parse_ids=[parse_id],
                            version=release.manifest["tables"]["lexical_documents"])
    one = docs.filter(pc.equal(docs.column("chunk_id"), chunk_id))
    # Delete the document and add the very same one again: the live documents, terms, live
    # frequencies and lengths are all right; the old copy still counts in N, df and avgdl.
    _, w = _writer(home)
    w.delete_documents_by_term(INDEX_FIELD_CHUNK_ID, chunk_id)
    chunk_doc = index_documents(one)
    add_to_writer(w, chunk_doc.filter(pc.equal(chunk_doc.column("kind"), "chunk")))  # its window document stays
    w.commit()
    w.wait_merging_threads()
    report = lexical_health(home)
    assert report.expected_document_digest == report.actual_document_digest
    assert report.expected_word_tokens == report.actual_word_tokens
    assert not report.healthy and report.deleted_documents == 1
    for f in report.fields:
        assert f.actual_bm25[0] == f.expected_bm25[0] + 1, f  # N as BM25 counts it
    assert lexical_repair(home).after.healthy


def test_the_health_table_names_the_field_of_each_vocabulary_and_bm25_row(monkeypatch):
    """guards against (found by a trial on 2026-12-07): `fabric lexical-health` printed two rows
    "vocabulary" and two "BM25 N, avgdl" with no field name: rich read `[word]` and `[substring]`
    in the labels as style tags and dropped them."""
    import io

    from rich.console import Console

    import fabric_query.cli as cli
    from fabric_resources.lexical_health import FieldComparison, HealthReport

    fields = tuple(FieldComparison(field=f, expected_digest="ab" * 8, actual_digest="ab" * 8, expected_terms=3,
                                   actual_terms=3, differing_terms=(), expected_bm25=(2, 1.5), actual_bm25=(2, 1.5))
                   for f in (INDEX_FIELD_WORD, INDEX_FIELD_SUBSTRING))
    report = HealthReport(release_id=1, generation="gen-00000001", canonical_digest="cd" * 8, expected_documents=2,
                          actual_documents=2, expected_document_digest="ef" * 8, actual_document_digest="ef" * 8,
                          missing_documents=(), unexpected_documents=(), fields=fields)
    out = io.StringIO()
    monkeypatch.setattr(cli, "console", Console(file=out, width=200))
    cli.print_health(report, "lexical health")
    text = out.getvalue()
    for f in (INDEX_FIELD_WORD, INDEX_FIELD_SUBSTRING):
        assert f"vocabulary[{f}]" in text and f"BM25 N, avgdl[{f}]" in text, text


def test_a_repair_publishes_a_release_only_when_it_rebuilt_something(home):
    """guards against: `fabric lexical-repair` (and `dense-index-repair`) on a sound home
    publishing a new release over the same rows every time it ran: nothing a search sees changed,
    yet the release took one of the slots retention keeps, pushing the oldest kept one out. A
    repair that rebuilds still publishes exactly one."""
    from typer.testing import CliRunner

    from fabric_assets.cli import app

    def releases():
        return [r.release_id for r in FabricHome(home.root).catalog.releases()]

    kept = releases()
    for command in ("lexical-repair", "dense-index-repair", "repair"):
        out = CliRunner().invoke(app, [command, "--home", str(home.root)])
        said = " ".join(out.output.split())
        assert out.exit_code == 0, said
        assert releases() == kept, (command, said)
        if command != "repair":  # `fabric repair` says "no damaged table data file" (tests/assets/test_repair.py)
            assert "nothing to repair" in said and f"release {kept[-1]} stays current" in said, said
    chunk_id, _ = _a_chunk(home)
    _, w = _writer(home)
    w.delete_documents_by_term(INDEX_FIELD_CHUNK_ID, chunk_id)
    w.commit()
    w.wait_merging_threads()
    out = CliRunner().invoke(app, ["lexical-repair", "--home", str(home.root)])
    assert out.exit_code == 0, out.output
    assert releases() == [*kept, kept[-1] + 1] and f"published release {kept[-1] + 1}" in out.output
    assert lexical_health(FabricHome(home.root)).healthy
