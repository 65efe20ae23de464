"""Tests for the storage layer: artifact store, text folding, catalog releases, Lance tables,
and the tantivy serving index (with the read side's word/substring channels)."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_query.channels.lexical import substring_channel, word_channel
from fabric_query.querylang import parse_query
from fabric_resources.artifact_store import ArtifactIntegrityError, ArtifactStore, sha256_hex
from fabric_resources.catalog import StatusUpdate
from fabric_resources.lexical_index import ANALYZER_ID, INDEX_LAYOUT, META_FILE, IndexUnusable, LexicalIndex
from fabric_resources.schema import LEXICAL_DOCUMENTS, SCHEMA_VERSION
from fabric_resources.tables import TableStore
from fabric_resources.text_folding import fold, fold_char, fold_with_map

# ==========================================================================
# Artifact store


@pytest.fixture
def store(tmp_path: Path) -> ArtifactStore:
    return ArtifactStore(tmp_path / "artifacts")


def test_put_file_streams_hashes_and_stores_what_it_read(store, tmp_path):
    """guards against: a streamed copy whose digest is not of the bytes stored, or a second copy."""
    from fabric_resources.artifact_store import STREAM_CHUNK_BYTES

    data = os.urandom(STREAM_CHUNK_BYTES * 2 + 17)
    f = tmp_path / "blob.bin"
    f.write_bytes(data)
    stored = store.put_file(f, max_bytes=len(data))
    assert (stored.digest, stored.size, stored.mtime_ns) == (sha256_hex(data), len(data), f.stat().st_mtime_ns)
    assert store.get(stored.digest) == data
    assert store.put_file(f, max_bytes=len(data)).digest == stored.digest
    assert not any((store.root / "incoming").iterdir())


def test_put_file_refuses_over_the_cap_and_stores_nothing(store, tmp_path):
    """guards against: a file that grew past the cap after its stat being stored anyway."""
    from fabric_resources.artifact_store import ArtifactTooLarge

    f = tmp_path / "big.bin"
    f.write_bytes(b"x" * 5000)
    with pytest.raises(ArtifactTooLarge):
        store.put_file(f, max_bytes=4999)
    assert not store.has(sha256_hex(b"x" * 5000))
    assert not any((store.root / "incoming").iterdir())


def test_put_file_never_blocks_on_a_fifo_nor_follows_a_symlink(store, tmp_path):
    """guards against: a FIFO swapped in for a file hanging the scan (open() blocks until a writer
    comes), and a symlink swapped in pulling bytes from outside the root."""
    from fabric_resources.artifact_store import NotARegularFile

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(NotARegularFile):
        store.put_file(fifo, max_bytes=10)
    target = tmp_path / "secret.txt"
    target.write_text("outside")
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(OSError):
        store.put_file(tmp_path / "link", max_bytes=100)


def test_put_get_roundtrip_and_layout(store):
    """guards against: a different address layout or digest than sha256/<2>/<64>."""
    data = b"hello fabric"
    d = store.put(data)
    assert d == sha256_hex(data)
    assert store.path_for(d) == store.root / "sha256" / d[:2] / d
    assert store.has(d)
    assert store.get(d) == data


def test_put_same_bytes_twice_is_noop(store):
    """guards against: rewriting (and so racing readers of) an existing artifact."""
    d = store.put(b"x")
    p = store.path_for(d)
    before = os.stat(p)
    assert store.put(b"x") == d
    after = os.stat(p)
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)
    assert [f.name for f in p.parent.iterdir()] == [d]  # no temp files left behind


def test_put_expected_digest_mismatch_raises_and_stores_nothing(store):
    """guards against: storing bytes under a name they do not hash to."""
    wrong = sha256_hex(b"other")
    with pytest.raises(ArtifactIntegrityError):
        store.put(b"data", expected_digest=wrong)
    assert not store.has(sha256_hex(b"data"))
    assert not store.has(wrong)


def test_put_expected_digest_match(store):
    """guards against: a correct expected_digest being rejected."""
    assert store.put(b"data", expected_digest=sha256_hex(b"data")) == sha256_hex(b"data")


def test_stored_files_are_read_only(store):
    """guards against: artifacts left writable (write-once broken by accident)."""
    p = store.path_for(store.put(b"ro"))
    mode = stat.S_IMODE(os.stat(p).st_mode)
    assert mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) == 0


def test_corrupted_file_detected_on_get(store):
    """guards against: get() returning bytes without verifying them against the address."""
    d = store.put(b"original")
    p = store.path_for(d)
    os.chmod(p, 0o644)
    p.write_bytes(b"tampered")
    with pytest.raises(ArtifactIntegrityError):
        store.get(d)


def test_get_missing_raises_file_not_found(store):
    """guards against: a missing artifact returning empty bytes."""
    with pytest.raises(FileNotFoundError):
        store.get(sha256_hex(b"never stored"))


@pytest.mark.parametrize("digest", ["", "ab", "A" * 64, "g" * 64, "../" + "a" * 61, "a" * 63, "a" * 65])
def test_path_for_rejects_non_digests(store, digest):
    """guards against: path traversal or malformed names reaching the filesystem."""
    with pytest.raises(ValueError):
        store.path_for(digest)


def test_empty_bytes(store):
    """guards against: the empty artifact being treated as missing."""
    d = store.put(b"")
    assert store.get(d) == b""


# ==========================================================================
# Text folding

_FOLD_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(exclude_categories=("Cs",)),
        st.sampled_from(list("ßﬁİΣσςÅé\u0301\u0308ǅ½ＡＢ") + ["한", "ガ", "😀"]),
    ),
    max_size=40,
)


@settings(max_examples=250, deadline=None)
@given(_FOLD_TEXT)
def test_fold_with_map_origin_property(text):
    """guards against: origin maps that are misaligned with the folded text, go backwards or point outside."""
    folded, origin = fold_with_map(text)
    assert folded == fold(text)
    assert len(origin) == len(folded)
    assert origin == sorted(origin)
    assert all(0 <= o < len(text) for o in origin)
    # the characters with origin i are exactly fold_char(text[i])
    for i, ch in enumerate(text):
        assert "".join(folded[j] for j, o in enumerate(origin) if o == i) == fold_char(ch)


@settings(max_examples=200, deadline=None)
@given(_FOLD_TEXT)
def test_fold_is_per_char(text):
    """guards against: the ASCII fast path or whole-string normalisation diverging from per-char folding."""
    assert fold(text) == "".join(fold_char(c) for c in text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=40))
def test_ascii_fold_is_lower(text):
    """guards against: the ASCII fast path doing something other than lower-casing."""
    assert fold(text) == text.lower()
    assert fold_with_map(text) == (text.lower(), list(range(len(text))))


@pytest.mark.parametrize(
    "a, b",
    [("Café", "cafe"), ("cafe\u0301", "cafe"), ("ΑΒΓ", "αβγ"), ("Straße", "strasse"), ("ﬁle", "file"), ("ÅNGSTRÖM", "angstrom"), ("ＡＢＣ", "abc")],
)
def test_fold_equivalences(a, b):
    """guards against: case/diacritic/compatibility folding missing in some script or length."""
    assert fold(a) == fold(b)


def test_fold_char_combining_mark_is_empty():
    """guards against: bare combining marks surviving folding (would break 'cafe' vs 'café')."""
    assert fold_char("\u0301") == ""
    assert fold_with_map("e\u0301x") == ("ex", [0, 2])


def test_fold_with_map_multi_char_fold():
    """guards against: a one-to-many fold (ß -> ss) mapping its second char to the wrong source index."""
    assert fold_with_map("aßb") == ("assb", [0, 1, 1, 2])


# ==========================================================================
# Catalog releases


# The ``catalog`` fixture (tests/conftest.py) is each backend in turn: SQLite and PostgreSQL.


def _source(parse_id: str) -> dict:
    """A release's source entry with the fields every reader takes (the catalog checks them)."""
    return {"parse_id": parse_id, "media_type": "text/plain"}


def test_publish_first_release_and_swap(catalog):
    """guards against: the pointer not moving, or manifests losing their identity fields."""
    assert catalog.current_release() is None
    r1 = catalog.publish_release({"tables": {}, "sources": {"a": _source("p1")}}, expected_current=None)
    assert catalog.current_release().release_id == r1.release_id
    assert r1.manifest["release_id"] == r1.release_id
    r2 = catalog.publish_release({"tables": {}, "sources": {"b": _source("p2")}}, expected_current=r1.release_id)
    assert r2.release_id > r1.release_id
    cur = catalog.current_release()
    assert cur.release_id == r2.release_id
    assert cur.manifest["sources"] == {"b": _source("p2")}


def test_publish_with_stale_expected_current_raises_and_leaves_pointer(catalog):
    """guards against: a racing activation overwriting the pointer (lost update) or inserting an orphan release."""
    r1 = catalog.publish_release({"sources": {}, "tables": {}, "n": 1}, expected_current=None)
    r2 = catalog.publish_release({"sources": {}, "tables": {}, "n": 2}, expected_current=r1.release_id)
    with pytest.raises(RuntimeError):
        catalog.publish_release({"sources": {}, "tables": {}, "n": 3}, expected_current=r1.release_id)
    with pytest.raises(RuntimeError):
        catalog.publish_release({"sources": {}, "tables": {}, "n": 3}, expected_current=None)
    assert catalog.current_release().release_id == r2.release_id
    assert [r.release_id for r in catalog.releases()] == [r1.release_id, r2.release_id]
    assert len(catalog.events("release-published")) == 2


def test_publish_expected_current_on_empty_catalog(catalog):
    """guards against: expecting a release that does not exist being accepted."""
    with pytest.raises(RuntimeError):
        catalog.publish_release({"sources": {}, "tables": {}}, expected_current=7)
    assert catalog.releases() == [] and catalog.current_release() is None


def test_publish_failure_mid_transaction_rolls_back(catalog):
    """guards against: a half-published release (row inserted, pointer not moved) when publishing fails."""
    r1 = catalog.publish_release({"sources": {}, "tables": {}, "n": 1}, expected_current=None)
    with pytest.raises(TypeError):
        catalog.publish_release({"sources": {}, "tables": {}, "bad": object()}, expected_current=r1.release_id)  # not JSON-serialisable
    assert [r.release_id for r in catalog.releases()] == [r1.release_id]
    assert catalog.current_release().release_id == r1.release_id


def test_releases_are_immutable(catalog):
    """guards against: a later publish rewriting earlier manifests (e.g. UPDATE without WHERE)."""
    r1 = catalog.publish_release({"tables": {}, "sources": {"a": _source("p1")}, "lexical_generation": "gen-00000001"}, None)
    snapshot = catalog.release(r1.release_id)
    for i in range(3):
        catalog.publish_release({"tables": {}, "sources": {f"x{i}": _source(f"x{i}")}, "lexical_generation": f"gen-{i + 2:08d}"},
                                catalog.current_release().release_id)
    again = catalog.release(r1.release_id)
    assert again == snapshot
    assert again.manifest["sources"] == {"a": _source("p1")}


def test_publish_does_not_mutate_callers_manifest(catalog):
    """guards against: publish_release adding release_id/created_at into the caller's dict."""
    m = {"sources": {}}
    catalog.publish_release(m, None)
    assert m == {"sources": {}}


def test_read_only_catalog_sees_releases(catalog):
    """guards against: a read-only connection (queries) failing to read the pointer."""
    from conftest import reopened

    r1 = catalog.publish_release({"sources": {}, "tables": {}, "n": 1}, None)
    ro = reopened(catalog, read_only=True)
    assert ro.current_release().release_id == r1.release_id


# ==========================================================================
# Lance tables

P_A, P_B, P_C = "a" * 16, "b" * 16, "c" * 32


def test_parse_runs_by_id_equals_filtering_all_runs(catalog):
    """The keyed lookup (batched past SQLite's parameter limit) answers exactly what filtering
    every run would: same runs, same order, status filter respected, unknown IDs ignored."""
    import random

    ids = [f"{i:016x}" for i in range(1_203)]
    with catalog.transaction(immediate=True) as con:
        for i, pid in enumerate(ids):
            catalog.ensure_parse_run(con, parse_id=pid, source_hash=f"{i:064x}", media_type="text/plain",
                                     parser_name="text", parser_version="1", parser_config_hash="c")
    catalog.set_parse_statuses([StatusUpdate(p, "failed", "test") for p in ids[::7]])
    everything = catalog.parse_runs()
    assert catalog.parse_ids() == set(ids)
    rng = random.Random(7)
    for size in (0, 1, 3, 499, 500, 501, 1_100):
        wanted = rng.sample(ids, size) + ["f" * 16, *rng.sample(ids, min(size, 5))]  # unknown ID, repeats
        assert catalog.parse_runs(wanted) == [r for r in everything if r.parse_id in set(wanted)]
        failed = catalog.parse_runs(wanted, status="failed")
        assert failed == [r for r in everything if r.parse_id in set(wanted) and r.status == "failed"]


def lex_rows(triples) -> pa.Table:
    return pa.Table.from_pylist(
        [{"parse_id": p, "chunk_id": c, "folded_text": t, "analyzer": ANALYZER_ID} for p, c, t in triples],
        schema=LEXICAL_DOCUMENTS,
    )


@pytest.fixture(params=["local", "s3"])
def tables(request, tmp_path: Path) -> TableStore:
    """The tables in a local directory, then in a bucket of moto's S3 server: the same tests for both."""
    if request.param == "local":
        return TableStore(tmp_path / "tables")
    s3 = request.getfixturevalue("moto_s3")
    return TableStore(f"s3://{s3.create_bucket('tables')}/home/tables", s3.storage_options())


def _ids(t: pa.Table) -> list[tuple[str, str]]:
    return sorted(zip(t.column("parse_id").to_pylist(), t.column("chunk_id").to_pylist()))


def test_replace_partitions_replaces_only_those(tables):
    """guards against: replacing deleting other partitions' rows, or appending without deleting."""
    v1 = tables.replace_partitions("lexical_documents", [P_A, P_B], lex_rows([(P_A, "1", "x"), (P_A, "2", "y"), (P_B, "3", "z")]))
    v2 = tables.replace_partitions("lexical_documents", [P_A], lex_rows([(P_A, "4", "w")]))
    assert v2 > v1
    assert _ids(tables.read("lexical_documents")) == [(P_A, "4"), (P_B, "3")]
    # idempotent re-materialization
    tables.replace_partitions("lexical_documents", [P_A], lex_rows([(P_A, "4", "w")]))
    assert _ids(tables.read("lexical_documents")) == [(P_A, "4"), (P_B, "3")]


def test_replace_with_no_rows_deletes_partition(tables):
    """guards against: an empty result leaving the partition's stale rows."""
    tables.replace_partitions("lexical_documents", [P_A, P_B], lex_rows([(P_A, "1", "x"), (P_B, "3", "z")]))
    tables.replace_partitions("lexical_documents", [P_A], lex_rows([]))
    assert _ids(tables.read("lexical_documents")) == [(P_B, "3")]


def test_old_version_still_readable(tables):
    """guards against: pinned readers seeing later writes (releases pin table versions)."""
    v1 = tables.replace_partitions("lexical_documents", [P_A], lex_rows([(P_A, "1", "x")]))
    tables.replace_partitions("lexical_documents", [P_A, P_C], lex_rows([(P_A, "9", "new"), (P_C, "8", "c")]))
    assert _ids(tables.read("lexical_documents", version=v1)) == [(P_A, "1")]
    assert _ids(tables.read("lexical_documents")) == [(P_A, "9"), (P_C, "8")]


def test_read_by_parse_ids(tables):
    """guards against: the parse_id filter returning other partitions, or an empty ID list reading everything."""
    tables.replace_partitions("lexical_documents", [P_A, P_B], lex_rows([(P_A, "1", "x"), (P_B, "3", "z")]))
    assert _ids(tables.read("lexical_documents", parse_ids=[P_B])) == [(P_B, "3")]
    assert tables.read("lexical_documents", parse_ids=[]).num_rows == 0
    assert tables.read("lexical_documents", parse_ids=[P_B], columns=["chunk_id"]).column_names == ["chunk_id"]


def test_read_active_streams_only_the_pinned_versions_active_parses(tables):
    """guards against: the streaming read returning another version's rows, a parse outside the
    release, losing rows at batch boundaries, or columns it was not asked for."""
    v1 = tables.replace_partitions("lexical_documents", [P_A, P_B, P_C], lex_rows(
        [(P_A, str(i), "a") for i in range(5)] + [(P_B, "b1", "b"), (P_C, "c1", "c"), (P_C, "c2", "c")]))
    tables.replace_partitions("lexical_documents", [P_A], lex_rows([(P_A, "new", "x")]))
    for batch_rows in (1, 2, 3, 1000):
        batches = list(tables.read_active_batches("lexical_documents", v1, {P_A, P_C}, ["chunk_id"], batch_rows))
        assert all(b.schema.names == ["chunk_id"] and b.num_rows > 0 for b in batches)
        got = sorted(c for b in batches for c in b.column("chunk_id").to_pylist())
        assert got == ["0", "1", "2", "3", "4", "c1", "c2"]
    t = tables.read_active("lexical_documents", v1, [P_B], ["parse_id", "chunk_id"])
    assert _ids(t) == [(P_B, "b1")]
    assert tables.read_active("lexical_documents", None, [P_A], ["chunk_id"]).num_rows == 0
    empty = tables.read_active("lexical_documents", v1, [], ["chunk_id", "parse_id"])
    assert empty.num_rows == 0 and empty.column_names == ["chunk_id", "parse_id"]
    assert tables.count_rows("lexical_documents", v1) == 8


def test_read_missing_table_is_empty_with_schema(tables):
    """guards against: reading a never-written table raising instead of returning an empty table."""
    t = tables.read("chunks")
    assert t.num_rows == 0 and t.schema.names == [f.name for f in tables_schema("chunks")]


def tables_schema(name):
    from fabric_resources.schema import TABLES

    return TABLES[name]


@pytest.mark.parametrize("bad", ["x' OR 1=1", "x' OR 1=1 --", "ABCDEF0123456789", "abc", "a" * 65, "'); DROP TABLE x; --"])
def test_malformed_parse_id_rejected(tables, bad):
    """guards against: a non-hex parse ID reaching the Lance filter string (injection)."""
    tables.replace_partitions("lexical_documents", [P_A], lex_rows([(P_A, "1", "x")]))
    with pytest.raises(ValueError):
        tables.replace_partitions("lexical_documents", [bad], lex_rows([]))
    with pytest.raises(ValueError):
        tables.read("lexical_documents", parse_ids=[bad])
    assert _ids(tables.read("lexical_documents")) == [(P_A, "1")]


def test_parse_id_with_trailing_newline_rejected(tables):
    """guards against: a parse ID with a trailing newline passing validation into the filter string."""
    with pytest.raises(ValueError):
        tables.read("lexical_documents", parse_ids=[P_A + "\n"])


def test_rows_outside_replaced_set_raise(tables):
    """guards against: a write that silently adds rows for partitions it does not replace (duplicates)."""
    tables.replace_partitions("lexical_documents", [P_B], lex_rows([(P_B, "3", "z")]))
    v = tables.version("lexical_documents")
    with pytest.raises(ValueError):
        tables.replace_partitions("lexical_documents", [P_A], lex_rows([(P_A, "1", "x"), (P_B, "4", "dup")]))
    assert tables.version("lexical_documents") == v
    assert _ids(tables.read("lexical_documents")) == [(P_B, "3")]


def test_unknown_table_name(tables):
    """guards against: writing an ad-hoc table outside the schema contract."""
    with pytest.raises(KeyError):
        tables.replace_partitions("nope", [P_A], lex_rows([]))


# ==========================================================================
# Serving index + word/substring channels

PIDS = {name: f"{i:016x}" for i, name in enumerate(["jp", "en", "greek", "bm25", "cjk", "misc", "ko"], start=1)}

BASE_DOCS = [
    ("jp", "c-jp-1", "署名付きトークンを持つ"),
    ("jp", "c-jp-2", "認証の仕組み"),
    ("jp", "c-jp-3", "トーク番組の話"),
    ("en", "c-en-1", "concatenate these strings"),
    ("en", "c-en-2", "the cat sat on the mat"),
    ("greek", "c-gr-1", "ΑΒΓ letters upper"),
    ("bm25", "c-bm-1", " ".join(["alpha"] * 40)),
    ("bm25", "c-bm-2", "alpha beta in one place"),
    ("bm25", "c-bm-3", "unrelated filler text one"),
    ("bm25", "c-bm-4", "more unrelated filler two"),
    ("cjk", "c-cjk-1", "日本"),
    ("cjk", "c-cjk-2", "本日は晴天"),
    ("misc", "c-misc-1", "signed token with expiry"),
    ("misc", "c-misc-2", "signed certificate only"),
    ("ko", "c-ko-1", "한국어 문서"),
    ("ko", "c-ko-2", "カラスが鳴く"),
]


def base_docs_of(parse_ids) -> pa.Table:
    """The BASE_DOCS of ``parse_ids``: what activation reads for parses that stay."""
    return lex_docs([d for d in BASE_DOCS if PIDS.get(d[0], d[0]) in set(parse_ids)])


def lex_docs(docs) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"parse_id": PIDS.get(p, p), "chunk_id": c, "folded_text": fold(t), "analyzer": ANALYZER_ID}
            for p, c, t in docs
        ],
        schema=LEXICAL_DOCUMENTS,
    )


@pytest.fixture(scope="module")
def lexical(tmp_path_factory):
    li = LexicalIndex(tmp_path_factory.mktemp("indexes"))
    gen = li.build_fresh(lex_docs(BASE_DOCS))
    return li, gen


@pytest.fixture(scope="module")
def index(lexical):
    li, gen = lexical
    return li.open(gen)


def ids(pairs) -> list[str]:
    return [c for c, _ in pairs]


def sub(index, q, eligible=None, depth=10):
    return ids(substring_channel(index, parse_query(q), eligible, depth))


def word(index, q, eligible=None, depth=10):
    return ids(word_channel(index, parse_query(q), eligible, depth))


def test_cjk_substring_exact(index):
    """guards against: a CJK term not matching inside an unspaced run."""
    assert sub(index, "トークン") == ["c-jp-1"]


def test_cjk_no_ngram_false_positive(index):
    """guards against: n-gram indexing letting 'トーク番組' match a doc sharing only 'トーク'."""
    assert sub(index, "トーク番組") == ["c-jp-3"]
    assert "c-jp-1" not in sub(index, "トーク番組")


def test_cjk_one_and_two_char_terms(index):
    """guards against: short CJK terms below an n-gram size missing, or character order being ignored."""
    assert sorted(sub(index, "日")) == ["c-cjk-1", "c-cjk-2"]
    assert sub(index, "日本") == ["c-cjk-1"]
    assert sub(index, "本日") == ["c-cjk-2"]
    assert sub(index, "晴") == ["c-cjk-2"]


def test_cjk_mixed_terms_are_or(index):
    """guards against: free-text CJK terms AND-ed (or only the first used)."""
    assert sorted(sub(index, "認証 トークン")) == ["c-jp-1", "c-jp-2"]


def test_cjk_phrase_is_required(index):
    """guards against: a quoted phrase treated as optional."""
    assert sub(index, '認証 "トークン"') == ["c-jp-1"]


def test_word_boundaries(index):
    """guards against: 'cat' matching inside 'concatenate'."""
    assert word(index, "cat") == ["c-en-2"]
    assert word(index, "concatenate") == ["c-en-1"]


def test_word_stemming(index):
    """guards against: query and index analyzed differently (plural query must find singular)."""
    assert word(index, "cats") == ["c-en-2"]


def test_greek_case_folding(index):
    """guards against: folding applied at index time but not at query time (or vice versa)."""
    assert word(index, "αβγ") == ["c-gr-1"]
    assert word(index, "ΑΒΓ") == ["c-gr-1"]


def test_repetition_does_not_beat_coverage(index):
    """guards against: scoring by raw term frequency (no BM25 saturation)."""
    assert word(index, "alpha beta")[0] == "c-bm-2"


def test_excluded_term_is_must_not(index):
    """guards against: exclusions ignored by the word channel."""
    assert sorted(word(index, "signed")) == ["c-misc-1", "c-misc-2"]
    assert word(index, "signed -token") == ["c-misc-2"]


def test_query_text_is_bound_not_parsed(index):
    """guards against: tantivy query-parser syntax in user text (OR, *, :) being interpreted."""
    assert word(index, "cat OR 1=1") == ["c-en-2"]
    assert word(index, "*") == []
    # an unknown key:value is literal text; the word analyzer splits it like any punctuation
    assert word(index, "title:cat") == word(index, "title cat") == ["c-en-2"]


def test_korean_syllable_no_false_positive(index):
    """guards against: a 1-syllable Korean query matching a different syllable that starts with it."""
    assert sub(index, "하") == []


def test_kana_voicing_marks_not_folded(index):
    """guards against: distinct kana words (ガラス/カラス) folding to the same index terms."""
    assert sub(index, "ガラス") == []


def test_ties_broken_by_chunk_id(tmp_path):
    """guards against: equal BM25 scores ordered by doc address instead of chunk ID."""
    li = LexicalIndex(tmp_path / "idx")
    order = ["c5", "c2", "c9", "c1", "c7"]
    ix = li.open(li.build_fresh(lex_docs([("misc", c, "same words here") for c in order])))
    assert word(ix, "same") == sorted(order)
    assert word(ix, "same", depth=2) == ["c1", "c2"]


def test_eligibility_applies_before_ranking(tmp_path):
    """guards against: filtering after truncation (ranking truncates before filtering)."""
    li = LexicalIndex(tmp_path / "idx")
    eligible_pid = "e" * 16
    docs = [(f"{i:016x}", f"c-{i:03d}", "token token token") for i in range(50)]
    docs.append((eligible_pid, "c-eligible", "token " + " ".join(f"filler{i}" for i in range(60))))
    ix = li.open(li.build_fresh(lex_docs(docs)))
    assert "c-eligible" not in word(ix, "token", depth=10)  # without filters it ranks below the cut
    assert word(ix, "token", eligible={eligible_pid}, depth=10) == ["c-eligible"]
    assert word(ix, "token", eligible=set(), depth=10) == []


def _snapshot(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.is_file()}


def test_generation_isolation(tmp_path):
    """guards against: writing a new generation modifying the previous one (shared hard-linked files)."""
    li = LexicalIndex(tmp_path / "idx")
    g1 = li.build_fresh(lex_docs(BASE_DOCS))
    before = _snapshot(li.root / g1)
    new_docs = lex_docs([("n" * 16, "c-new-1", "a brand new cat"), ("n" * 16, "c-new-2", "fresh トークン")])
    g2 = li.write_generation(g1, [PIDS["en"], PIDS["jp"]], new_docs, base_docs_of)
    assert g1 != g2 and li.generations() == [g1, g2]
    old, new = li.open(g1), li.open(g2)
    # the old generation still has the removed parses and none of the new docs
    assert word(old, "cat") == ["c-en-2"]
    assert word(old, "fresh") == []
    assert sub(old, "トークン") == ["c-jp-1"]
    # the new one is previous - removed + added
    assert word(new, "cat") == ["c-new-1"]
    assert word(new, "concatenate") == []
    assert sub(new, "トークン") == ["c-new-2"]
    assert word(new, "αβγ") == ["c-gr-1"]  # untouched parse carried over
    # byte-level: no file of the old generation changed
    after = {k: v for k, v in _snapshot(li.root / g1).items() if k in before}
    assert after == before


def test_generation_chain_and_remove(tmp_path):
    """guards against: a third generation resurrecting removed docs or remove_generations deleting kept ones."""
    li = LexicalIndex(tmp_path / "idx")
    g1 = li.build_fresh(lex_docs(BASE_DOCS))
    g2 = li.write_generation(g1, [PIDS["en"]], lex_docs([]), base_docs_of)
    g3 = li.write_generation(g2, [], lex_docs([("n" * 16, "c-new", "cat again")]))
    assert word(li.open(g3), "cat") == ["c-new"]
    assert li.remove_generations({g3}) == [g1, g2]
    assert li.generations() == [g3]
    with pytest.raises(IndexUnusable) as ei:
        li.open(g1)
    assert ei.value.reason == "index-missing"


def test_open_missing_generation(tmp_path):
    """guards against: a missing generation raising a raw tantivy/OS error instead of a fallback reason."""
    li = LexicalIndex(tmp_path / "idx")
    with pytest.raises(IndexUnusable) as ei:
        li.open("gen-00000042")
    assert ei.value.reason == "index-missing"


@pytest.mark.parametrize(
    "patch",
    [{"schema_version": SCHEMA_VERSION + 1}, {"analyzer": "something-else"}, {"schema_version": None}],
)
def test_open_schema_mismatch(lexical, tmp_path, patch):
    """guards against: reading an index written under another schema/analyzer version."""
    li, gen = lexical
    copy = LexicalIndex(tmp_path / "idx")
    shutil.copytree(li.root / gen, copy.root / gen)
    meta = json.loads((copy.root / gen / META_FILE).read_text())
    meta.update(patch)
    (copy.root / gen / META_FILE).write_text(json.dumps(meta))
    with pytest.raises(IndexUnusable) as ei:
        copy.open(gen)
    assert ei.value.reason == "index-schema-mismatch"


def test_open_garbage_index_files(tmp_path):
    """guards against: tantivy's error on corrupt files escaping instead of index-unreadable."""
    li = LexicalIndex(tmp_path / "idx")
    g = li.root / "gen-00000001"
    g.mkdir(parents=True)
    (g / META_FILE).write_text(json.dumps({"schema_version": SCHEMA_VERSION, "analyzer": ANALYZER_ID,
                                           "layout": INDEX_LAYOUT}))
    (g / "meta.json").write_text("this is not tantivy")
    with pytest.raises(IndexUnusable) as ei:
        li.open("gen-00000001")
    assert ei.value.reason == "index-unreadable"


def test_open_garbage_fabric_meta(lexical, tmp_path):
    """guards against: an unparsable fabric_index.json raising JSONDecodeError."""
    li, gen = lexical
    copy = LexicalIndex(tmp_path / "idx")
    shutil.copytree(li.root / gen, copy.root / gen)
    (copy.root / gen / META_FILE).write_bytes(b"\x00\xff{not json")
    with pytest.raises(IndexUnusable) as ei:
        copy.open(gen)
    assert ei.value.reason == "index-unreadable"


def test_open_truncated_segment_files(lexical, tmp_path):
    """guards against: corrupt segment files escaping as raw errors/panics instead of index-unreadable."""
    li, gen = lexical
    copy = LexicalIndex(tmp_path / "idx")
    shutil.copytree(li.root / gen, copy.root / gen)
    for p in (copy.root / gen).iterdir():
        if p.suffix in (".term", ".idx", ".store", ".pos", ".fast", ".fieldnorm"):
            p.write_bytes(b"garbage")
    try:
        copy.open(gen)
        outcome = "opened"
    except IndexUnusable as exc:
        outcome = exc.reason
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - pyo3 panics derive from BaseException
        outcome = f"{type(exc).__module__}.{type(exc).__name__}"
    assert outcome == "index-unreadable"


def test_eligibility_filter_does_not_make_terms_optional(tmp_path):
    """guards against: a MUST eligibility clause turning the query's SHOULD terms optional, so
    every eligible chunk 'matches' a query it does not contain (found by a fresh-user trial)."""
    import pyarrow as pa

    from fabric_query.channels.lexical import substring_channel, word_channel
    from fabric_query.querylang import parse_query
    from fabric_resources.lexical_index import ANALYZER_ID, LexicalIndex
    from fabric_resources.schema import LEXICAL_DOCUMENTS
    from fabric_resources.text_folding import fold

    pa_ = "a" * 32
    docs = pa.table({"parse_id": [pa_, pa_], "chunk_id": ["c1", "c2"],
                     "folded_text": [fold("the quick fox"), fold("認証トークン")],
                     "analyzer": [ANALYZER_ID, ANALYZER_ID]}, schema=LEXICAL_DOCUMENTS)
    index = LexicalIndex(tmp_path / "idx")
    opened = index.open(index.build_fresh(docs))
    for q in ("xyzzyqq", "zebra", '"slow fox"'):
        assert word_channel(opened, parse_query(q), {pa_}, 10) == [], q
    assert [c for c, _ in word_channel(opened, parse_query("fox"), {pa_}, 10)] == ["c1"]
    assert substring_channel(opened, parse_query("署名"), {pa_}, 10) == []
    assert [c for c, _ in substring_channel(opened, parse_query("トークン"), {pa_}, 10)] == ["c2"]


def test_a_replace_is_one_commit_so_no_version_lacks_the_partition(tables):
    """guards against: a replace written as a delete then an append (two commits): the version
    between them has the partition gone, and two writers replacing it at once both append."""
    v1 = tables.replace_partitions("lexical_documents", [P_A, P_B], lex_rows([(P_A, "1", "x"), (P_B, "3", "z")]))
    v2 = tables.replace_partitions("lexical_documents", [P_A], lex_rows([(P_A, "2", "y")]))
    v3 = tables.replace_partitions("lexical_documents", [P_A], lex_rows([]))
    assert (v2, v3) == (v1 + 1, v2 + 1)
    assert [_ids(tables.read("lexical_documents", version=v)) for v in (v1, v2, v3)] == [
        [(P_A, "1"), (P_B, "3")], [(P_A, "2"), (P_B, "3")], [(P_B, "3")]]
    # Nothing to replace and nothing to write: no commit at all.
    assert tables.replace_partitions("lexical_documents", [P_C], lex_rows([])) == v3


def test_a_scan_reads_around_a_damaged_fragment_only_when_told_with_offsets_still_those_of_the_version(tmp_path):
    """guards against (trial 24f): a data file cut short failed every scan of its table, also for a
    reader of none of its rows (a client whose scope withholds the document it holds). Told which
    fragments it may go without, the scan reads the others fragment by fragment, after the rows
    already yielded, and each row's ``_offset`` (what ``take`` reads by) still counts the skipped
    fragment's rows; told none, or not asked, it raises as before."""
    tables = TableStore(tmp_path / "tables")
    for pid, n in ((P_A, 5), (P_B, 3), (P_C, 4)):  # one fragment each, in this order
        tables.replace_partitions("lexical_documents", [pid], lex_rows([(pid, f"{pid[0]}{i}", "x") for i in range(n)]))
    version = tables.version("lexical_documents")
    whole = tables.read_active("lexical_documents", version, [P_A, P_C], ["chunk_id"], with_offsets=True)
    damaged = tables.dataset("lexical_documents").get_fragments()[1]
    with open(tables.root / "lexical_documents.lance" / "data" / damaged.metadata.files[0].path, "r+b") as f:
        f.truncate(10)
    with pytest.raises(ValueError):
        tables.read_active("lexical_documents", version, [P_A, P_C], ["chunk_id"])
    with pytest.raises(ValueError):
        tables.read_active("lexical_documents", version, [P_A, P_C], ["chunk_id"], unreadable_ok=lambda ds: ())
    asked = []
    read = pa.Table.from_batches(list(tables.read_active_batches(
        "lexical_documents", version, [P_A, P_C], ["chunk_id"], batch_rows=2, with_offsets=True,
        unreadable_ok=lambda ds: asked.append(ds.version) or {damaged.fragment_id})))
    assert asked == [version]
    assert read.to_pylist() == whole.to_pylist()
    assert read.column("_offset").to_pylist() == [0, 1, 2, 3, 4, 8, 9, 10, 11]
    taken = tables.take("lexical_documents", version, read.column("_offset").to_pylist(), ["chunk_id"])
    assert taken.column("chunk_id").to_pylist() == read.column("chunk_id").to_pylist()
