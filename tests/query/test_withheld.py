"""Withheld documents never leak: not their text, nor anything about visible results."""

from __future__ import annotations

import json
import os

import pytest
from answers import first_difference
from conftest import ingest

from fabric_query import Fabric
from fabric_resources.home import FabricHome

VISIBLE = {
    "en": {
        "a.txt": "The lighthouse keeper logged the tide.\n\nA storm broke the lamp in March.\n",
        "b.txt": "Lighthouse lenses focus the lamp into a beam.\n",
        "c.txt": "Sourdough needs a lively starter and patience.\n",
    },
    "ja": {
        "a.txt": "認証トークンは利用者を示す文字列です。\n\n有効期限が切れたら再発行します。\n",
        "b.txt": "トークンの署名を検証してから認証します。\n",
        "c.txt": "灯台守は毎晩ランプに火をともした。\n",
    },
}
WITHHELD = {
    "en": {"private/diary.txt": "lighthouse lighthouse lighthouse keeper lamp tide storm beam " * 20 + "\n"},
    "ja": {"private/memo.txt": "認証トークン認証トークン署名検証 " * 20 + "\n"},
}
QUERIES = {
    "en": ["lighthouse keeper", "lamp", "tide storm", '"lighthouse keeper"', "beam -storm"],
    "ja": ["認証トークン", "認証 トークン", "トークン", "署名", "認証"],
}


def _home(tmp_path, name, files, withheld=()):
    folder = tmp_path / name / "corpus"
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    home = FabricHome(tmp_path / name / "home")
    if withheld:
        home.layout.config_file.write_text(json.dumps({"sources": {"withheld": list(withheld)}}))
    ingest(folder, home)
    return home, folder


def _visible_view(pack):
    """Everything a caller sees, except the release number and timings."""
    return (
        [(h.chunk_id, h.fused_score, {k: (v.rank, v.score) for k, v in h.channels.items()}, h.text,
          h.citation.source_key, h.citation.spans, h.highlights) for h in pack.results],
        pack.channels_run, pack.fallback_reason, pack.eligible_sources,
    )


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_withheld_sources_change_nothing_visible(tmp_path, lang):
    """guards against: withheld text leaking through the substring channel (Theurian's leak on
    Japanese), through BM25 statistics, counts, ranks or budgets; filtering after ranking."""
    with_hidden, _ = _home(tmp_path, "a", {**VISIBLE[lang], **WITHHELD[lang]}, withheld=["corpus/private/*"])
    without, _ = _home(tmp_path, "b", VISIBLE[lang])
    fa, fb = Fabric(with_hidden.root), Fabric(without.root)
    assert fa.status().withheld == tuple(f"fs:corpus/{k}" for k in WITHHELD[lang])
    for q in QUERIES[lang]:
        pa, pb = fa.search(q, limit=10), fb.search(q, limit=10)
        # Exactly, but a dense cosine's last bits (tests/answers.py).
        assert first_difference(pa.model_dump(exclude={"timings"}), pb.model_dump(exclude={"timings"})) is None, q
        assert all("private" not in h.citation.source_key for h in pa.results)


def test_withholding_a_visible_source_removes_every_trace(tmp_path):
    """guards against: deleted-but-unmerged index documents of a newly withheld source still
    moving BM25 scores.

    Dense scores are compared to 1e-5: the visible documents were embedded in one batch with
    the document that is now withheld, and batch padding moves float32 results in the 7th
    digit. Order, lexical scores, counts and texts must be exactly equal."""
    home, folder = _home(tmp_path, "a", {**VISIBLE["en"], **WITHHELD["en"]})
    assert any("private" in h.citation.source_key for h in Fabric(home.root).search("lighthouse").results)
    home.layout.config_file.write_text(json.dumps({"sources": {"withheld": ["corpus/private/*"]}}))
    ingest(folder, FabricHome(home.root))
    reference, _ = _home(tmp_path, "b", VISIBLE["en"])
    fa, fb = Fabric(home.root), Fabric(reference.root)
    for q in QUERIES["en"]:
        a, b = _visible_view(fa.search(q)), _visible_view(fb.search(q))
        assert a[1:] == b[1:], q
        assert [(h[0], h[3], h[4], h[5], h[6]) for h in a[0]] == [(h[0], h[3], h[4], h[5], h[6]) for h in b[0]], q
        for ha, hb in zip(a[0], b[0]):
            assert ha[1] == hb[1]  # fused RRF score: ranks only
            assert ha[2].keys() == hb[2].keys()
            for channel, (rank, score) in ha[2].items():
                assert rank == hb[2][channel][0]
                assert score == (hb[2][channel][1] if channel != "dense" else pytest.approx(hb[2][channel][1], abs=1e-5))


def test_status_follows_a_pattern_added_while_open_and_the_agent_view_drops_skipped_paths(tmp_path):
    """guards against: ``status`` reading the withheld patterns of when the Fabric opened (a pattern
    added while ``fabric serve`` runs hid the sources from searches at once, but an agent's status
    still named them), and MCP status naming a skipped file inside a withheld folder (a skipped path
    is not a source, so the ``withheld`` list cannot hide it)."""
    from fabric_query.server.client_view import client_status as agent_status
    from fabric_resources.schema import SCAN_SKIPPED_STATE

    home, _ = _home(tmp_path, "open", {**VISIBLE["en"], **WITHHELD["en"]})
    fabric = Fabric(home.root)
    assert fabric.status().withheld == ()
    home.layout.config_file.write_text(json.dumps({"sources": {"withheld": ["corpus/private/*"]}}))
    status = fabric.status()
    assert status.withheld == ("fs:corpus/private/diary.txt",)
    home.catalog.set_state(SCAN_SKIPPED_STATE, {"fs:corpus/private/huge.log": "too-large",
                                                "fs:corpus/big.log": "too-large"})
    agent = agent_status(fabric)
    assert agent["skipped"] == [["fs:corpus/big.log", "too-large"]] and "private" not in json.dumps(agent)
    # Withheld after its release was published: the release still names it, the agent counts it
    # nowhere (hostile trial 6: `active_sources` kept counting it while `present` dropped by one).
    never, _ = _home(tmp_path, "never", VISIBLE["en"])
    for key in ("sources_by_state", "active_sources", "active_parses", "pending"):
        assert agent[key] == agent_status(Fabric(never.root))[key], key
    assert [k for k, _ in fabric.status().skipped] == ["fs:corpus/big.log", "fs:corpus/private/huge.log"]


def test_a_filter_note_never_names_a_withheld_source(tmp_path):
    """guards against: the note on a filter that admits nothing (``unmatched_filters``) counting or
    naming the media types, languages or days of documents withheld after their release was
    published (the release still names them; only visibility hides them)."""
    day = 86_400
    hidden = {"private/plan.md": ("# Plan\n\nThe lighthouse lamp plan.\n", 19500),
              "private/memo.txt": (WITHHELD["ja"]["private/memo.txt"], 18500)}

    def build(name, files):
        folder = tmp_path / name / "corpus"
        for rel, (text, d) in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text, encoding="utf-8")
            os.utime(folder / rel, (d * day, d * day))
        home = FabricHome(tmp_path / name / "home")
        ingest(folder, home)
        return Fabric(home.root), home

    visible = {k: (v, 19000) for k, v in VISIBLE["en"].items()}
    fa, home = build("a", {**visible, **hidden})
    assert fa.search("lamp type:markdown").eligible_sources == 1  # the release holds it
    home.layout.config_file.write_text(json.dumps({"sources": {"withheld": ["corpus/private/*"]}}))
    fa = Fabric(home.root)  # no new ingest: the published release still names the withheld files
    fb, _ = build("b", visible)
    queries = ("lamp type:markdown", "lamp lang:ja", "lamp type:exe", "lamp source:fs:corpus/private/plan.md",
               "lamp after:2023-01-01", "lamp before:2021-01-01")  # days 19358, 18628: between the hidden ones
    for q in queries:
        pa, pb = fa.search(q), fb.search(q)
        assert pa.eligible_sources == 0 and pa.unmatched_filters, q
        assert pa.unmatched_filters == pb.unmatched_filters, q
        note = json.dumps(pa.unmatched_filters)
        assert "markdown" not in note and "ja (" not in note and "2023-05" not in note and "2020-08" not in note, q


def test_a_folder_named_in_nfd_is_withheld_by_a_pattern_typed_in_nfc(tmp_path):
    """guards against (hostile trial 8b, 2026-12-05): ``"withheld": ["corpus/privé/*"]`` typed in a
    config (NFC) not matching the folder as macOS names it (NFD ``prive\\u0301``): the folder's files
    were ingested, searchable and cited. Patterns and keys compare in NFC, either way round."""
    import unicodedata

    from fabric_resources.config import SourcesConfig

    nfd = unicodedata.normalize("NFD", "privé")
    files = {f"{nfd}/salary.txt": "The director's salary is zanthoxylum ninety.\n", **VISIBLE["en"]}
    home, _ = _home(tmp_path, "nfd", files, withheld=["corpus/privé/*"])
    fabric = Fabric(home.root)
    pack = fabric.search("salary zanthoxylum director")
    assert all("salary" not in h.citation.source_key for h in pack.results), pack.results
    assert pack.eligible_sources == len(VISIBLE["en"])
    assert [unicodedata.normalize("NFC", k) for k in fabric.status().withheld] == ["fs:corpus/privé/salary.txt"]
    assert SourcesConfig(withheld=(unicodedata.normalize("NFD", "a/é/*"),)).is_withheld("fs:a/é/x.txt")
    # The operator's view finds it by the name as typed too (`fabric status --source privé`).
    assert [p.source_key for p in fabric.source_partitions("privé/salary")] == [f"fs:corpus/{nfd}/salary.txt"]


def test_a_pattern_copied_from_a_printed_key_withholds_what_it_names(tmp_path):
    """guards against: ``"withheld": ["fs:corpus/private/*"]``, the key as ``fabric search`` and
    ``fabric status`` print it, matching nothing (patterns were compared with the key's path only):
    the files the user meant to hide stayed searchable and cited, and nothing said so."""
    from fabric_resources.config import SourcesConfig

    files = {"private/salary.txt": "The director's salary is zanthoxylum ninety.\n", **VISIBLE["en"]}
    home, _ = _home(tmp_path, "fs-prefix", files, withheld=["fs:corpus/private/*"])
    fabric = Fabric(home.root)
    pack = fabric.search("salary zanthoxylum director")
    assert all("salary" not in h.citation.source_key for h in pack.results), pack.results
    assert pack.eligible_sources == len(VISIBLE["en"])
    assert fabric.status().withheld == ("fs:corpus/private/salary.txt",)
    # Both spellings name the same sources, and the prefix is no wildcard for another scheme's keys.
    assert SourcesConfig(withheld=("fs:a/*",)).is_withheld("fs:a/x.txt")
    assert SourcesConfig(withheld=("a/*",)).is_withheld("fs:a/x.txt")
    assert not SourcesConfig(withheld=("fs:b/*",)).is_withheld("fs:a/x.txt")


@pytest.mark.parametrize("pattern", ["corpus/private/", "fs:corpus/private", "corpus/priv*"])
def test_a_pattern_naming_a_folder_withholds_what_is_inside_it(tmp_path, pattern):
    """guards against (trial 24e): ``"withheld": ["corpus/private/"]`` (a folder, as .gitignore
    writes one) or ``"corpus/private"`` matching only a file of that very name: every file in the
    folder was activated, searchable and cited, and nothing said the pattern matched nothing. A
    pattern that matches a folder of the key now withholds everything inside it, at any depth."""
    from fabric_resources.config import SourcesConfig

    files = {"private/salary.txt": "The director's salary is zanthoxylum ninety.\n",
             "private/deep/bonus.txt": "The director's bonus is zanthoxylum forty.\n", **VISIBLE["en"]}
    home, _ = _home(tmp_path, "folder", files, withheld=[pattern])
    fabric = Fabric(home.root)
    pack = fabric.search("salary bonus zanthoxylum director")
    assert all("private" not in h.citation.source_key for h in pack.results), pack.results
    assert pack.eligible_sources == len(VISIBLE["en"])
    assert sorted(fabric.status().withheld) == ["fs:corpus/private/deep/bonus.txt", "fs:corpus/private/salary.txt"]
    # A folder's name is matched whole: a sibling that only starts like it stays visible.
    assert not SourcesConfig(withheld=("a/priv/",)).is_withheld("fs:a/private.txt")
    assert not SourcesConfig(withheld=("a/priv",)).is_withheld("fs:a/private/x.txt")
    assert not SourcesConfig(withheld=("", "/", "fs:")).is_withheld("fs:a/x.txt")


def test_a_source_withheld_since_the_current_release_was_published_is_not_even_named_as_a_restriction(tmp_path):
    """guards against (trial 22b): a source withheld in ``config.json`` after the current release was
    published (no ingest since) made every search say ``fallback_reason: visible-sources-only``,
    and ``/v1/releases/current`` ``visible_sources_only: true``, also to a client over HTTP or MCP:
    it learned that something had been withheld since the last ingest. The pack now equals that of
    a home that never had the source, reasons included; a deleted source is still named."""
    from fabric_query.server.routes import _current_release

    home, _ = _home(tmp_path, "a", {**VISIBLE["en"], **WITHHELD["en"]})
    home.layout.config_file.write_text(json.dumps({"sources": {"withheld": ["corpus/private/*"]}}))
    reference, _ = _home(tmp_path, "b", VISIBLE["en"])
    fa, fb = Fabric(home.root), Fabric(reference.root)
    for q in QUERIES["en"]:
        pa, pb = fa.search(q, limit=10), fb.search(q, limit=10)
        assert first_difference(pa.model_dump(exclude={"timings"}), pb.model_dump(exclude={"timings"})) is None, q
    assert _current_release(fa)["visible_sources_only"] is False
    # A source deleted since is still named: tests/query/test_read_visibility.py::test_past_release_applies_todays_visibility


@pytest.mark.parametrize("damage", ["missing", "unreadable"])
def test_a_source_withheld_since_the_release_is_not_told_by_an_index_that_cannot_serve(tmp_path, damage):
    """guards against (trial 24e): when the release's word and substring index could not serve (a
    home on a read-only mount, where tantivy cannot take its lock file; a generation lost or
    damaged), a home that never held the withheld source answered by scanning the chunks
    (``fallback_reason`` ``index-missing`` or ``index-unreadable``, channel ``scan``), while a home
    whose source was withheld after its release answered from an in-memory index of its visible
    documents (channel ``word``, no reason): a reader learned that a source had been withheld since
    the last ingest. That view now scans too, for the same reason: the packs are equal."""
    import shutil

    home, _ = _home(tmp_path, "a", {**VISIBLE["en"], **WITHHELD["en"]})
    home.layout.config_file.write_text(json.dumps({"sources": {"withheld": ["corpus/private/*"]}}))
    reference, _ = _home(tmp_path, "b", VISIBLE["en"])
    for h in (home, reference):
        lexical = h.layout.indexes / "lexical"
        if damage == "missing":
            shutil.rmtree(lexical)
        else:  # every file of the generation cut to nothing: tantivy cannot open it
            for f in lexical.rglob("*"):
                if f.is_file():
                    f.write_bytes(b"")
    fa, fb = Fabric(home.root), Fabric(reference.root)
    for q in QUERIES["en"]:
        pa, pb = fa.search(q, limit=10, debug=True), fb.search(q, limit=10, debug=True)
        assert pb.fallback_reason == f"index-{damage}", pb.fallback_reason
        assert first_difference(pa.model_dump(exclude={"timings"}), pb.model_dump(exclude={"timings"})) is None, q


def test_a_source_withheld_since_the_release_moves_neither_the_dense_source_nor_the_status(tmp_path):
    """guards against (trial 23c): with ``query.dense_search.mode`` ``ann``, a document withheld
    since the release was published still counted in the rows that decide whether the release's
    ANN index is wanted: searches said ``dense_search: ann`` where a home that never had it says
    ``exact`` (telling a client that something had been withheld since the release); and the dense
    check that ``fabric status`` keeps was answered again for another set of hidden sources, so a
    status still named an index fallback that no search had any more."""
    import shutil

    ann = {"query": {"dense_search": {"mode": "ann"}}}
    # A paragraph a chunk (~110 tokens each: shorter ones are merged), 300 of them.
    words = "harbour pilot ledger cargo anchor beacon signal rope deck mast hull keel sail".split()
    big = "\n\n".join(" ".join(words[(i * 7 + j) % len(words)] for j in range(110)) + f" page {i}."
                      for i in range(300)) + "\n"
    homes = []
    for name, files in (("a", {**VISIBLE["en"], "private/ledger.txt": big}), ("b", VISIBLE["en"])):
        folder = tmp_path / name / "corpus"
        for rel, text in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text, encoding="utf-8")
        home = FabricHome(tmp_path / name / "home")
        home.layout.config_file.write_text(json.dumps(ann))
        ingest(folder, home)
        homes.append(home)
    home, never = homes
    record = home.catalog.current_release().manifest["dense_indexes"]["chunk_vectors"]
    assert record.get("generation"), record  # the ledger's rows make an index (256 rows at least)
    shutil.rmtree(home.dense_indexes.path("chunk_vectors", record["generation"]))
    fa = Fabric(home.root)
    assert fa.status().dense_index_fallback  # kept in dense_check_cache.json (no view held the vectors yet)
    assert fa.search("lamp").dense_fallback_reason.startswith("dense-index-")
    home.layout.config_file.write_text(json.dumps({**ann, "sources": {"withheld": ["corpus/private/*"]}}))
    fb = Fabric(never.root)
    for q in QUERIES["en"]:
        pa, pb = fa.search(q), fb.search(q)
        assert (pa.dense_search, pa.dense_fallback_reason) == (pb.dense_search, pb.dense_fallback_reason) == (
            "exact", None), q
    assert fa.status().dense_index_fallback == fb.status().dense_index_fallback == ()


def test_a_clients_pack_counts_no_rows_of_a_withheld_source_in_a_skip_reason(tmp_path):
    """guards against (trial 23c): a search over HTTP (no or the read token) or MCP of a release
    whose vectors no longer match their digest carried ``vector-digest-mismatch: chunk_vectors: its
    N rows of release 1's parses …``, N counting the rows of a document withheld since the release,
    a count the client's status leaves out (trial 21a). The operator's pack keeps it."""
    import numpy as np

    from fabric_query.server.client_view import client_search

    from fabric_resources.vector_digest import PARSES_MANIFEST_KEY

    home, _ = _home(tmp_path, "a", {**VISIBLE["en"], **WITHHELD["en"]})
    # A release as written before stop 56 (no per-parse digests): its vectors are checked as a
    # whole, so damage turns the channel off with the row count in the reason (a release with
    # them leaves the damaged parse out alone: tests/query/test_dense_parse_damage.py).
    current = home.catalog.current_release()
    manifest = {k: v for k, v in current.manifest.items() if k not in ("release_id", "created_at", PARSES_MANIFEST_KEY)}
    older = home.catalog.publish_release(manifest, expected_current=current.release_id).release_id
    home.layout.config_file.write_text(json.dumps({"sources": {"withheld": ["corpus/private/*"]}}))
    (path,) = (home.layout.tables / "chunk_vectors.lance" / "data").glob("*.lance")
    vec = home.tables.read("chunk_vectors", columns=["vector"]).column("vector")[0].values.to_numpy()
    data = bytearray(path.read_bytes())
    at = data.find(np.asarray(vec, dtype="<f4").tobytes()[:64])
    data[at + 5] ^= 0x01  # one bit of one float
    path.write_bytes(bytes(data))
    fabric = Fabric(home.root)
    operator = fabric.search("lighthouse keeper").skipped_channels["dense"]
    rows = home.tables.count_rows("chunk_vectors", home.catalog.current_release().manifest["tables"]["chunk_vectors"])
    assert operator.startswith(f"vector-digest-mismatch: chunk_vectors: its {rows} rows of release {older}'s parses")
    client = client_search(fabric, "lighthouse keeper")
    assert client.skipped_channels == {"dense": "vector-digest-mismatch: chunk_vectors"}, client.skipped_channels


def test_a_deleted_withheld_source_is_counted_nowhere_a_client_reads(tmp_path):
    """guards against (trial 24a): a client's status (MCP ``status``,
    ``/v1/status`` without the admin token) counting a withheld source the scan has since found
    deleted in ``sources_by_state`` (``deleted: 1``): a client would learn that a document it may
    not see existed. Its counts equal those of a home that never had the document; the operator's
    own status still counts it."""
    from fabric_query.server.client_view import client_status

    home, folder = _home(tmp_path, "deleted", {**VISIBLE["en"], **WITHHELD["en"]})
    home.layout.config_file.write_text(json.dumps({"sources": {"withheld": ["corpus/private/*"]}}))
    (folder / "private" / "diary.txt").unlink()
    ingest(folder, home)
    fabric = Fabric(home.root)
    assert fabric.status().sources_by_state.get("deleted") == 1  # the operator's view
    never, _ = _home(tmp_path, "never", VISIBLE["en"])
    seen, want = client_status(fabric), client_status(Fabric(never.root))
    for key in ("sources_by_state", "active_sources", "active_parses", "pending", "withheld", "roots"):
        assert seen[key] == want[key], (key, seen[key], want[key])
    assert "private" not in json.dumps(seen)


def _damage_fragments_of(home, parse_id, tables=("chunks", "chunk_vectors")):
    """Cut short the data file of each fragment of ``tables`` whose rows are all ``parse_id``'s
    (as a disk error leaves it: Lance can read no footer); return the tables damaged."""
    damaged = []
    for table in tables:
        ds = home.tables.dataset(table)
        for fragment in ds.get_fragments():
            ids = set(fragment.to_table(columns=["parse_id"]).column("parse_id").to_pylist())
            if ids == {parse_id}:
                path = home.layout.tables / f"{table}.lance" / "data" / fragment.metadata.files[0].path
                with open(path, "r+b") as f:
                    f.truncate(10)
                damaged.append(table)
    return damaged


def _answers(fabric):
    """Every query's pack but for the release's number (it counts the ingests run) and timings."""
    def unnumbered(value):
        if isinstance(value, dict):
            return {k: unnumbered(v) for k, v in value.items() if k != "release_id"}
        if isinstance(value, (list, tuple)):
            return [unnumbered(v) for v in value]
        return value

    return {q: unnumbered(fabric.search(q, limit=10).model_dump(exclude={"timings"})) for q in QUERIES["en"]}


def test_a_damaged_data_file_of_a_withheld_document_changes_nothing_a_reader_sees(tmp_path):
    """guards against (trial 24f): a data file of ``chunks`` (or ``chunk_vectors``) holding only the
    rows of a document withheld since the release (its own ingest wrote it), lost or cut short,
    made a client's status say ``chunks version 3: data file damaged`` and every search fail
    (``ReleaseUnreadableError``; the dense channel off for ``chunk_vectors``): every scan read
    every fragment, so a reader learned something of a document it may not see, and lost its
    searches. Such a file is now read around (the visible parses' rows are all in the readable
    ones, by the counts their writes recorded): answers and the client's status equal those of a
    home that never had the document; the operator's status still names the damage."""
    from fabric_query.server.client_view import client_status

    home, folder = _home(tmp_path, "a", VISIBLE["en"])
    (folder / "private").mkdir()
    (folder / "private" / "diary.txt").write_text(WITHHELD["en"]["private/diary.txt"], encoding="utf-8")
    ingest(folder, home)
    home.layout.config_file.write_text(json.dumps({"sources": {"withheld": ["corpus/private/*"]}}))
    secret = home.catalog.current_release().manifest["sources"]["fs:corpus/private/diary.txt"]["parse_id"]
    assert _damage_fragments_of(home, secret) == ["chunks", "chunk_vectors"]
    never, _ = _home(tmp_path, "b", VISIBLE["en"])
    fabric, reference = Fabric(home.root), Fabric(never.root)
    operator = fabric.status().unreadable_tables
    assert {t.split(" ")[0] for t in operator} == {"chunks", "chunk_vectors"}, operator
    seen, want = _answers(fabric), _answers(reference)
    for q in QUERIES["en"]:
        assert seen[q]["results"], q
        assert first_difference(seen[q], want[q]) is None, (q, first_difference(seen[q], want[q]))
    got, expected = client_status(fabric), client_status(reference)
    for key in ("unreadable_tables", "dense_channels_off", "dense_index_problems", "rows_changed",
                "sources_by_state", "active_sources", "active_parses", "withheld", "failed", "unfinished"):
        assert got[key] == expected[key], (key, got[key], expected[key])
    assert "private" not in json.dumps(got)
    assert fabric.status().unreadable_tables == operator  # the operator still sees the damage


def test_a_damaged_data_file_holding_a_visible_document_too_still_fails_the_reader(tmp_path):
    """guards against (trial 24f): reading around a damaged data file must not serve a visible
    document without the rows it held. A fragment holding a withheld document's rows and a
    visible one's (one ingest wrote both) still fails every search with
    ``ReleaseUnreadableError``, and the client's status still names it."""
    from fabric_query.errors import ReleaseUnreadableError
    from fabric_query.server.client_view import client_status

    home, _ = _home(tmp_path, "a", {**VISIBLE["en"], **WITHHELD["en"]})
    home.layout.config_file.write_text(json.dumps({"sources": {"withheld": ["corpus/private/*"]}}))
    (fragment,) = home.tables.dataset("chunks").get_fragments()
    with open(home.layout.tables / "chunks.lance" / "data" / fragment.metadata.files[0].path, "r+b") as f:
        f.truncate(10)
    fabric = Fabric(home.root)
    with pytest.raises(ReleaseUnreadableError):
        fabric.search("lamp")
    assert [t.split(":")[0].split(" ")[0] for t in client_status(fabric)["unreadable_tables"]] == ["chunks"]
