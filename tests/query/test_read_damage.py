"""Damaged or tampered tables fail closed: a projection that cannot serve skips its channel with a
named reason while the others answer, and resolve answers ``stale`` with the reason; resolve calls a
citation verified only when its text is re-derived from the source bytes (issue 13, items 6 and 7)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import ingest

from fabric_query import Fabric
from fabric_query.errors import FabricQueryError
from fabric_resources.home import FabricHome
from fabric_resources.schema import DENSE_DIM

FILES = {
    "a.txt": "The lighthouse keeper logged the tide.\n\nA storm broke the lamp in March.\n",
    "b.txt": "Lighthouse lenses focus the lamp into a beam.\n",
    "c.txt": "Sourdough needs a lively starter and patience.\n",
    "j.txt": "認証トークンは利用者を示す文字列です。\n\n有効期限が切れたら再発行します。\n",
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("damage")
    folder = tmp / "corpus"
    folder.mkdir()
    for rel, text in FILES.items():
        (folder / rel).write_text(text, encoding="utf-8")
    home = FabricHome(tmp / "home")
    ingest(folder, home)
    return tmp


@pytest.fixture
def home(pristine, tmp_path):
    """A private copy of the ingested home (tests damage it), with its folder at the same path."""
    copy = tmp_path / "home"
    shutil.copytree(pristine / "home", copy)
    return FabricHome(copy)


def _publish(home: FabricHome, **changes) -> int:
    current = home.catalog.current_release()
    manifest = {k: v for k, v in current.manifest.items() if k not in ("release_id", "created_at")}
    manifest.update(changes)
    return home.catalog.publish_release(manifest, expected_current=current.release_id).release_id


def _as_older_release(home: FabricHome) -> int:
    """Publish the current release again without each parse's vector digest, as releases were
    before stop 56: its vector tables are then checked as a whole (one damaged parse: channel off)."""
    from fabric_resources.vector_digest import PARSES_MANIFEST_KEY

    current = home.catalog.current_release()
    manifest = {k: v for k, v in current.manifest.items() if k not in ("release_id", "created_at", PARSES_MANIFEST_KEY)}
    return home.catalog.publish_release(manifest, expected_current=current.release_id).release_id


def _vector_file(home: FabricHome, table: str = "chunk_vectors"):
    files = sorted((home.layout.tables / f"{table}.lance" / "data").glob("*.lance"))
    assert len(files) == 1
    return files[0]


@pytest.mark.parametrize("release", ["per-parse digests", "older"])
def test_a_flipped_vector_value_is_never_served_and_named(home, release):
    """guards against: altered vector bytes served as if they were the model's (nothing records what
    was written), or crashing every English query; and (stop 56) one parse's damage turning the dense
    channel off for every query: a release that recorded each parse's digest leaves out that parse's
    source only, named; an older release skips the channel with the reason, as before."""
    if release == "older":
        _as_older_release(home)
    first = home.tables.read("chunk_vectors", columns=["parse_id", "vector"]).slice(0, 1)
    vec = first.column("vector")[0].values.to_numpy()
    path = _vector_file(home)
    data = bytearray(path.read_bytes())
    at = data.find(np.asarray(vec, dtype="<f4").tobytes()[:64])
    assert at >= 0
    data[at + 5] ^= 0x01  # one bit of one float: still finite, still almost unit norm
    path.write_bytes(bytes(data))
    pack = Fabric(home.root).search("lighthouse keeper")
    assert pack.results and pack.results[0].citation.source_key in ("fs:corpus/a.txt", "fs:corpus/b.txt")
    if release == "older":
        assert pack.skipped_channels["dense"].startswith("vector-digest-mismatch: chunk_vectors")
        assert "word" in pack.channels_run and "dense" not in pack.channels_run
        return
    damaged = first.column("parse_id")[0].as_py()
    keys = tuple(sorted(k for k, m in home.catalog.current_release().manifest["sources"].items()
                        if m["parse_id"] == damaged))
    assert "dense" in pack.channels_run and not pack.skipped_channels and pack.dense_sources_left_out == keys
    assert all("dense" not in h.channels for h in pack.results if h.citation.parse_id == damaged)


def test_status_says_the_dense_channel_is_off_and_why(pristine, home):
    """guards against (trial 20a): a release whose vector rows no longer match their digest
    (vector-digest-mismatch) turning the dense channel off for every query while `fabric status`
    named nothing; a sound release names no channel off."""
    from typer.testing import CliRunner

    from fabric_assets.cli import app

    assert Fabric(pristine / "home").status().dense_channels_off == ()
    _as_older_release(home)  # one parse's damage turns the channel off there (a new one leaves it out)
    # A sound answer kept in the home (the check reads every vector) must not outlive the damage.
    assert Fabric(home.root).status().dense_channels_off == () and home.layout.dense_check_cache.exists()
    from fabric_query import release as views

    views._VIEWS.clear()  # the next status as a new process makes it (this one keeps its loaded view)
    vec = home.tables.read("chunk_vectors", columns=["vector"]).column("vector")[0].values.to_numpy()
    path = _vector_file(home)
    data = bytearray(path.read_bytes())
    at = data.find(np.asarray(vec, dtype="<f4").tobytes()[:64])
    data[at + 5] ^= 0x01
    path.write_bytes(bytes(data))
    (off,) = Fabric(home.root).status().dense_channels_off
    assert off.startswith("dense: vector-digest-mismatch: chunk_vectors: ") and "`fabric repair`" in off
    out = CliRunner().invoke(app, ["status", "--home", str(home.root)], env={"COLUMNS": "500"})
    assert out.exit_code == 0 and "dense channel off: dense: vector-digest-mismatch" in out.output, out.output


def test_the_dense_check_is_kept_while_nothing_it_read_changes(pristine, monkeypatch):
    """guards against: every ``fabric status`` reading every vector again (~0.33 s per 100k rows)
    on a home nothing was written to; and a kept answer surviving a change it should not (another
    release, other dense search settings, a table file touched)."""
    from fabric_query import dense_health

    home = FabricHome(pristine / "home")
    home.layout.dense_check_cache.unlink(missing_ok=True)
    assert Fabric(home.root).status().dense_channels_off == ()
    checks = []
    real = dense_health._check
    monkeypatch.setattr(dense_health, "_check", lambda h, r: checks.append(r.release_id) or real(h, r))
    assert Fabric(home.root).status().dense_channels_off == () and checks == []  # kept
    release = home.catalog.current_release()
    table = "chunk_vectors"
    key = dense_health._cache_key(home, release, [table])
    assert key is not None
    data = home.tables.uri(table) + "/data"
    some = sorted(os.listdir(data))[0]
    os.utime(f"{data}/{some}", ns=(1, 1))  # a file's time set back: ctime still moves
    assert dense_health._cache_key(home, release, [table]) != key
    assert Fabric(home.root).status().dense_channels_off == () and len(checks) == 1


def test_flipped_bytes_in_a_vector_file_skip_dense_not_crash(home):
    """guards against: ArrowInvalid from every English query when a vector file is corrupt."""
    path = _vector_file(home)
    data = bytearray(path.read_bytes())
    for i in range(len(data) - 200, len(data)):  # the file's footer and column metadata
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    fabric = Fabric(home.root)
    for q in ("lighthouse keeper", "lamp -storm"):
        pack = fabric.search(q)
        assert pack.skipped_channels["dense"].startswith(("table-unreadable: chunk_vectors",
                                                          "vector-digest-mismatch: chunk_vectors"))
        assert pack.results and "word" in pack.channels_run
    ja = fabric.search("認証トークン")  # the e5 table is untouched: that channel still answers
    assert "dense_multilingual" in ja.channels_run and "dense_multilingual" not in ja.skipped_channels


def test_missing_windows_table_gives_one_chunk_passages(home):
    """guards against: an Arrow error from search when a context-window file is missing."""
    for f in (home.layout.tables / "context_windows.lance" / "data").glob("*.lance"):
        f.unlink()
    pack = Fabric(home.root).search("lighthouse keeper")
    assert pack.skipped_channels["context_windows"].startswith("table-unreadable: context_windows")
    assert pack.results and all(p.window_id is None for p in pack.passages)
    assert "dense" in pack.channels_run
    # dense feedback (on by default) reads window vectors: it says why it did not run
    assert pack.skipped_channels["dense_feedback"].startswith("context-windows-unavailable: table-unreadable")
    assert pack.dense_feedback == ()


def test_missing_chunk_table_is_a_typed_error_and_resolve_says_stale(home):
    """guards against: Arrow errors escaping search and resolve when the chunk table is gone."""
    fabric = Fabric(home.root)
    citation = fabric.search("lighthouse keeper").results[0].citation
    shutil.rmtree(home.layout.tables / "chunks.lance" / "data")
    fresh = Fabric(home.root)
    _publish(home)  # a new release id: a fresh view, no rows cached from before the damage
    with pytest.raises(FabricQueryError, match="chunks"):  # ReleaseUnreadableError
        fresh.search("lighthouse keeper")
    result = fresh.resolve(citation)
    assert result.status == "stale"
    chunk = next(c for c in result.checks if c.check == "chunk")
    assert not chunk.ok and chunk.detail.startswith("table-unreadable: chunks")


def test_an_index_of_another_release_falls_back_to_the_scan(home, pristine, tmp_path):
    """guards against: KeyError when the index generation a release names holds other chunks."""
    other_folder = tmp_path / "other"
    other_folder.mkdir()
    (other_folder / "x.txt").write_text("A lighthouse keeper of another home entirely.\n")
    other = FabricHome(tmp_path / "other-home")
    ingest(other_folder, other)
    gen = other.catalog.current_release().manifest["lexical_generation"]
    shutil.copytree(other.layout.indexes / "lexical" / gen, home.layout.indexes / "lexical" / "gen-00000099")
    _publish(home, lexical_generation="gen-00000099")
    pack = Fabric(home.root).search("lighthouse keeper")
    assert pack.fallback_reason == "index-release-mismatch"
    assert "scan" in pack.channels_run and pack.results
    assert all(h.citation.source_key.startswith("fs:corpus/") for h in pack.results)


def _tamper_text(home: FabricHome, old: str, new: str, rehash: bool = True,
                 tables: tuple[str, ...] = ("units", "chunks", "lexical_documents")) -> int:
    """Rewrite units, chunks and lexical documents (or only ``tables`` of them) consistently (same
    lengths, so every offset and fragment still adds up; with ``rehash`` every recorded text hash
    too) and publish a release that pins the altered versions."""
    assert len(old) == len(new)
    versions = {}
    for table, column in (("units", "text"), ("chunks", "text"), ("lexical_documents", "folded_text")):
        if table not in tables:
            continue
        t = home.tables.read(table)
        hit = pc.match_substring(t.column(column), old if column == "text" else old.lower())
        pids = sorted(set(t.filter(hit).column("parse_id").to_pylist()))
        rows = t.filter(pc.is_in(t.column("parse_id"), pa.array(pids)))
        replaced = pc.replace_substring(rows.column(column), old if column == "text" else old.lower(),
                                        new if column == "text" else new.lower())
        rows = rows.set_column(rows.schema.get_field_index(column), column, replaced)
        if "text_hash" in rows.column_names and rehash:
            from fabric_resources.identity import text_hash

            rows = rows.set_column(rows.schema.get_field_index("text_hash"), "text_hash",
                                   pa.array([text_hash(x) for x in rows.column(column).to_pylist()]))
        versions[table] = home.tables.replace_partitions(table, pids, rows)
    current = home.catalog.current_release()
    gen = home.lexical.build_fresh(home.tables.read("lexical_documents", parse_ids={
        m["parse_id"] for m in current.manifest["sources"].values()}))
    return _publish(home, tables={**current.manifest["tables"], **versions}, lexical_generation=gen)


def test_consistently_altered_tables_resolve_stale(home):
    """guards against: resolve calling altered text verified because it only compares the stored units
    with the stored chunks, never with the source bytes."""
    _tamper_text(home, "keeper", "robber")
    fabric = Fabric(home.root)
    hit = fabric.search("lighthouse robber").results[0]
    assert "robber" in hit.text  # search serves what the tables hold ...
    result = fabric.resolve(hit.citation)
    assert result.status == "stale" and result.text is None  # ... resolve re-derives from the bytes
    text = next(c for c in result.checks if c.check == "text")
    assert not text.ok and "differs" in text.detail


@pytest.mark.parametrize("in_memory", [True, False])
def test_chunk_text_that_differs_from_its_recorded_hash_is_never_served(home, in_memory):
    """guards against (hostile trial, 2026-12-05): a chunk row whose text was rewritten behind
    Fabric's back served as evidence, its citation hashing the altered text, with no warning; on
    both read paths (text held in memory, text read from disk per hit). The others still answer."""
    if not in_memory:
        home.layout.config_file.write_text(json.dumps({"query": {"text_in_memory_max_rows": 0}}))
        home = FabricHome(home.root)
    before = Fabric(home.root).search("lighthouse keeper", limit=3)
    keeper = before.results[0].chunk_id
    assert "keeper" in before.results[0].text and not before.altered_chunks
    _tamper_text(home, "keeper", "robber", rehash=False)
    fabric = Fabric(home.root)
    for query in ("lighthouse robber", "lighthouse keeper", "storm lamp"):
        pack = fabric.search(query, limit=3, debug=True)
        shown = [h.text for h in pack.results] + [p.text for p in pack.passages]
        assert not any("robber" in t for t in shown), (query, shown)
        # The next verified chunks of the fused order take the altered one's place.
        fused = [c[0] if isinstance(c, (list, tuple)) else c for c in pack.stage_candidates["fused"]]
        assert [h.chunk_id for h in pack.results] == [c for c in fused if c != keeper][:3], query
    altered = fabric.search("lighthouse robber", limit=3)
    assert keeper in altered.altered_chunks
    assert not fabric.search("sourdough starter", limit=1).altered_chunks  # the others answer as before
    # Said on every surface, not only in --json and HTTP (hostile trial 2, 2026-12-05): the CLI's
    # text output and the MCP search tool's answer.
    from fabric_query.cli_text import render_pack
    from fabric_query.server.mcp_tools import agent_answer

    _, err = render_pack(altered.model_dump(mode="json"))
    assert "1 chunk(s) left out: their stored text differs" in err
    assert agent_answer(altered)["altered_chunks"] == [keeper]
    # And an agent is told why nothing was eligible, as the CLI prints it under "no results".
    nothing = agent_answer(fabric.search("lighthouse type:exe"))
    assert nothing["results"] == [] and "type" in nothing["unmatched_filters"]
    assert "left out" not in render_pack(fabric.search("sourdough starter", limit=1).model_dump(mode="json"))[1]
    # Nor is the altered unit, as `/v1/units/{id}` and MCP `get_unit` read it (hostile trial, 2026-12-05).
    from fabric_query.errors import ReleaseUnreadableError
    from fabric_query.release import pinned_view
    from fabric_query.units import canonical_unit

    view = pinned_view(FabricHome(home.root))
    with pytest.raises(ReleaseUnreadableError, match="differs from the hash recorded"):
        canonical_unit(view, before.results[0].citation.spans[0].unit_id)
    other = fabric.search("sourdough starter", limit=1).results[0].citation.spans[0].unit_id
    assert canonical_unit(view, other).text.startswith("Sourdough")


def test_a_chunk_altered_under_its_index_is_named_when_a_phrase_check_drops_it(home):
    """guards against (hostile trial 3, 2026-12-05): chunk text rewritten in the table alone (the
    index still holds the words it was cut with) dropped by the word channel's phrase or exclusion
    check on the altered text, unseen: "no results" and no word of the alteration. The altered
    text neither matches nor scores; the pack names the chunk."""
    keeper = Fabric(home.root).search("lighthouse keeper", limit=1).results[0].chunk_id
    _tamper_text(home, "keeper", "robber", rehash=False, tables=("chunks",))
    fabric = Fabric(home.root)
    for query in ('"lighthouse keeper"', "lighthouse keeper -sourdough", "keeper"):
        # The word channel, and the scan that answers when the index cannot (hostile trial 4).
        for channels in (None, ["scan", "dense"]):
            pack = fabric.search(query, limit=3, channels=channels)
            assert keeper in pack.altered_chunks, (query, channels)
            assert keeper not in [h.chunk_id for h in pack.results] and not any("robber" in h.text for h in pack.results)
    assert not fabric.search("sourdough starter", limit=1).altered_chunks


def test_a_forged_chunk_id_does_not_verify(home):
    """guards against: a citation with another chunk's ID, or an invented one, verifying."""
    fabric = Fabric(home.root)
    pack = fabric.search("lighthouse", limit=5)
    a = pack.results[0].citation
    b = next(h.citation for h in pack.results[1:] if h.citation.chunk_id != a.chunk_id)
    assert fabric.resolve(a).status == "verified"
    for forged in (a.model_copy(update={"chunk_id": b.chunk_id}), a.model_copy(update={"chunk_id": "ab" * 16})):
        result = fabric.resolve(forged)
        assert result.status == "stale"
        assert not next(c for c in result.checks if c.check == "chunk").ok


def test_a_changed_parser_identity_is_named(home):
    """guards against: re-deriving with a parser other than the recorded one and calling it verified."""
    citation = Fabric(home.root).search("lighthouse keeper").results[0].citation
    home.layout.config_file.write_text(json.dumps({"parsers": {"text": {"max_bytes": 12345678}}}))
    result = Fabric(home.root).resolve(citation)
    assert result.status == "stale"
    parse = next(c for c in result.checks if c.check == "parse")
    assert not parse.ok and parse.detail.startswith("parser-changed")


def test_passage_citations_verify_with_every_member(home):
    """The positive case: a passage spanning several chunks re-derives and verifies."""
    fabric = Fabric(home.root)
    pack = fabric.search("lighthouse keeper")
    for p in pack.passages:
        result = fabric.resolve(p.citation)
        assert result.status == "verified", result.checks
        assert result.text == p.text


def test_releases_without_vector_digests_are_served(home):
    """A release written before vector digests existed (no ``vector_digests`` in its manifest) is
    served unverified, never a crash; its vectors are still checked for finite, unit-norm values."""
    _publish(home, vector_digests=None)
    fabric = Fabric(home.root)
    pack = fabric.search("lighthouse keeper")
    assert "dense" in pack.channels_run and not pack.skipped_channels
    path = _vector_file(home)
    data = bytearray(path.read_bytes())
    vec = home.tables.read("chunk_vectors", columns=["vector"]).column("vector")[0].values.to_numpy()
    at = data.find(np.asarray(vec, dtype="<f4").tobytes()[:64])
    data[at:at + 4] = np.asarray([7.0], dtype="<f4").tobytes()  # far off unit norm
    path.write_bytes(bytes(data))
    _publish(home, vector_digests=None)
    assert Fabric(home.root).search("lighthouse keeper").skipped_channels["dense"].startswith(
        "vector-values-invalid: chunk_vectors")
    assert DENSE_DIM == len(vec)


def test_the_catalog_is_rechecked_after_the_unlocked_read(home, monkeypatch):
    """guards against: verifying a source that was deleted (or withheld) while its file was being read."""
    import hashlib

    import fabric_query.resolve as resolve_module

    fabric = Fabric(home.root)
    citation = fabric.search("lighthouse keeper").results[0].citation
    assert fabric.resolve(citation).status == "verified"

    class DeletedDuringRead:
        """``hashlib`` as resolve sees it: hashing the bytes just read first marks the source deleted."""

        def sha256(self, data=b""):
            row = home.catalog.source(citation.source_key)
            with home.catalog.transaction(immediate=True) as con:
                home.catalog.upsert_source(con, row._replace(state="deleted"))
            return hashlib.sha256(data)

    monkeypatch.setattr(resolve_module, "hashlib", DeletedDuringRead())
    result = fabric.resolve(citation)
    assert result.status == "stale" and result.text is None


def test_also_cited_by_must_be_cited_and_visible(home):
    """guards against: a citation naming extra sources that the release never showed with its parse."""
    fabric = Fabric(home.root)
    citation = fabric.search("lighthouse keeper").results[0].citation
    for extra in ("fs:corpus/c.txt", "fs:corpus/never.txt"):
        result = fabric.resolve(citation.model_copy(update={"also_cited_by": (extra,)}))
        assert result.status == "stale"
        assert not next(c for c in result.checks if c.check == "release").ok


def test_status_names_a_pinned_table_version_the_home_cannot_open(home):
    """guards against (hostile trial 2, 2026-12-05): a release that pins a table version the home
    does not hold reported healthy by `fabric status` (searches then failed); and a status that
    flags a healthy home."""
    fabric = Fabric(home.root)
    assert fabric.status().unreadable_tables == ()
    current = home.catalog.current_release()
    _publish(home, tables={**current.manifest["tables"], "chunks": 999})
    st = Fabric(home.root).status()
    assert st.unreadable_tables == ("chunks version 999: not found",)


def test_status_names_a_pinned_table_whose_data_file_is_cut_short_or_missing(home):
    """guards against (hostile trial 9): a chunk_vectors data file truncated, or the chunks data
    file deleted, with `fabric status` reporting the home healthy (dense then skipped
    ``table-unreadable`` and searches failed); and bytes appended past the recorded size (nothing
    lost) flagged."""
    vectors = _vector_file(home)
    with vectors.open("ab") as f:
        f.write(b"tail")
    assert Fabric(home.root).status().unreadable_tables == ()
    pinned = home.catalog.current_release().manifest["tables"]
    os.truncate(vectors, 1000)
    (chunks,) = sorted((home.layout.tables / "chunks.lance" / "data").glob("*.lance"))
    chunks.unlink()
    assert Fabric(home.root).status().unreadable_tables == (
        f"chunk_vectors version {pinned['chunk_vectors']}: data file damaged",
        f"chunks version {pinned['chunks']}: data file missing",
    )


def test_a_removed_table_stops_queries_and_is_never_written_afresh_into_a_release(home, tmp_path):
    """guards against (hostile trial 9): the chunks table's folder removed. A fresh process read
    the pinned version as an empty table (search: "no results" over every eligible source; status:
    healthy), and the next ingest that parsed anything created the table afresh and published a
    release pinning those new rows alone (or, the table still absent, ``chunks: None``): every
    other document silently gone from search."""
    from fabric_resources.tables import TableRemovedError

    pinned = home.catalog.current_release()
    shutil.rmtree(home.layout.tables / "chunks.lance")
    with pytest.raises(FabricQueryError):
        Fabric(home.root).search("lighthouse keeper")
    assert Fabric(home.root).status().unreadable_tables == (f"chunks version {pinned.manifest['tables']['chunks']}: not found",)
    more = tmp_path / "more"
    more.mkdir()
    (more / "x.txt").write_text("A new note about the harbour.\n", encoding="utf-8")
    with pytest.raises(Exception) as raised:
        ingest(more, home)
    chain, exc = [], raised.value
    while exc is not None and exc not in chain:  # causes and contexts can loop
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    assert any(isinstance(e, TableRemovedError) for e in chain)
    assert home.catalog.current_release().release_id == pinned.release_id
    assert not home.tables.exists("chunks")


def test_resolve_names_a_missing_or_swapped_file_by_its_source_key_not_its_path(tmp_path):
    """guards against (stop 40's note): resolve's checks quoting the server's absolute path of a
    source file (``source file /srv/…/a.txt no longer exists``) to whoever asked, an HTTP or MCP
    client too; and a reason that says nothing of which file."""
    import os

    folder = tmp_path / "private-layout" / "corpus"
    folder.mkdir(parents=True)
    (folder / "a.txt").write_text(FILES["a.txt"], encoding="utf-8")
    home = FabricHome(tmp_path / "home")
    ingest(folder, home)
    citation = Fabric(home.root).search("lighthouse keeper").results[0].citation
    (folder / "a.txt").rename(folder / "a.moved")
    for swap in ("removed", "symlink", "fifo"):
        if swap == "symlink":
            (folder / "a.txt").symlink_to(folder / "a.moved")
        elif swap == "fifo":
            (folder / "a.txt").unlink()
            os.mkfifo(folder / "a.txt")
        result = Fabric(home.root).resolve(citation)
        assert result.status == "stale", swap
        details = " ".join(c.detail for c in result.checks if not c.ok)
        assert "fs:corpus/a.txt" in details and str(tmp_path) not in details and "private-layout" not in details, \
            (swap, details)


def test_a_cut_short_chunks_file_is_named_without_the_rust_build_path(home):
    """guards against: `fabric lexical-health` printing Lance's raw error, ending in a source
    location of the machine that built Lance (``/rustc/48a2…/function.rs:250:5``), and the same
    in a search's ``ReleaseUnreadableError`` (hostile trial 8a)."""
    from typer.testing import CliRunner

    from fabric_query.cli import read_app

    (chunks,) = sorted((home.layout.tables / "chunks.lance" / "data").glob("*.lance"))
    os.truncate(chunks, 100)
    with pytest.raises(FabricQueryError) as raised:
        Fabric(home.root).search("lighthouse keeper")
    assert "table-unreadable: chunks" in str(raised.value) and ".rs:" not in str(raised.value)
    # trial 11c: it said "restore the table or re-ingest", but an ingest does not repair a damaged file
    assert "re-ingest" not in str(raised.value) and "fabric status" in str(raised.value), str(raised.value)
    said = CliRunner().invoke(read_app, ["lexical-health", "--home", str(home.root)])
    assert said.exit_code == 2, said.output
    text = " ".join(said.output.split())
    assert "canonical chunks cannot be read" in text and "fabric status" in text and ".rs:" not in text, text


@pytest.mark.parametrize("message, kept", [
    ("LanceError(IO): failed to fill whole buffer, /rustc/48a2/library/core/src/ops/function.rs:250:5",
     "LanceError(IO): failed to fill whole buffer"),
    ("Not found: /h/t.lance/data/a.lance, /home/runner/work/lance/rust/lance-io/src/local.rs:1:2 (x)",
     "Not found: /h/t.lance/data/a.lance (x)"),
    ("no location here: a.txt", "no location here: a.txt"),
    # trial 22b: a location relative to the build's checkout, and a panic's in the Cargo registry
    ("LanceError(IO): file size is too small, rust/lance-io/src/utils.rs:172:20", "LanceError(IO): file size is too small"),
    ("panicked at /home/runner/.cargo/registry/src/index.crates.io-6f1/arrow-buffer-53.0.0/src/buffer/scalar.rs:133:42:"
     " buffer is not aligned", "panicked: buffer is not aligned"),
    ("Invalid range (src/index.rs:4277:29) for object of size 1000", "Invalid range for object of size 1000"),
    ("cannot read fs:code/main.rs:12:3 nor notes.rs:12", "cannot read fs:code/main.rs:12:3 nor notes.rs:12"),
])
def test_storage_error_text_cuts_rust_source_locations_only(message, kept):
    from fabric_resources.storage_errors import storage_error_text

    assert storage_error_text(OSError(message)) == f"OSError: {kept}"


def test_an_ingest_with_nothing_to_do_on_a_home_that_cannot_answer_exits_1(home, pristine):
    """guards against (hostile trial 9a): `fabric ingest` with no change exiting 0 ("every file
    found is searchable") while the release it leaves pins a table whose data file is cut short,
    the table listed in red above the exit."""
    from typer.testing import CliRunner

    from fabric_assets.cli import app

    os.truncate(_vector_file(home), 1000)
    said = CliRunner().invoke(app, ["ingest", str(pristine / "corpus"), "--home", str(home.root)])
    text = " ".join(said.output.split())
    assert said.exit_code == 1, text
    assert "chunk_vectors version" in text and "search cannot answer in full" in text, text


def test_status_names_a_lexical_index_that_cannot_serve(home):
    """guards against (trial 10c): the serving index's term dictionaries cut short, every search
    falling back to scanning the chunks (`fallback_reason: index-unreadable`), while `fabric status`
    named nothing; and a status that flags a healthy index."""
    assert Fabric(home.root).status().lexical_index_problem is None
    gen = home.catalog.current_release().manifest["lexical_generation"]
    terms = sorted((home.layout.root / "indexes" / "lexical" / gen).glob("*.term"))
    assert terms
    for path in terms:
        os.truncate(path, 20)
    fabric = Fabric(home.root)
    problem = fabric.status().lexical_index_problem
    assert problem.startswith("index-unreadable: ") and gen in problem and "magic" in problem, problem
    assert fabric.search("lighthouse keeper").fallback_reason == "index-unreadable"


def test_status_names_a_dense_index_that_cannot_serve_and_repair_clears_it(tmp_path, monkeypatch):
    """guards against (stop 43 left it): a dense ANN index generation whose data file is cut
    short, the dense channel answering with the exact product (`dense_fallback_reason`) while
    `fabric status` named nothing; and a status that flags a sound index."""
    from typer.testing import CliRunner

    from fabric_assets.cli import app

    root = tmp_path / "home"
    root.mkdir()
    (root / "config.json").write_text(json.dumps({"query": {"dense_search": {"mode": "ann"}}}))
    home = FabricHome(root)
    monkeypatch.setenv("DAGSTER_HOME", str(home.layout.dagster_home))
    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper logged the tide.\n\nA storm broke the lamp in March.\n")
    # An index is built from 256 vectors on (MIN_INDEX_ROWS): one long note of short chunks.
    rng = np.random.default_rng(3)
    words = ["tide", "lamp", "harbour", "lens", "beam", "ring", "ship", "fog", "signal", "rock", "coast", "wave"]
    (src / "b.txt").write_text("\n\n".join(" ".join(rng.choice(words, 110)) + f" entry {i}." for i in range(300)) + "\n")
    ingest(src, home)
    assert home.catalog.current_release().manifest["dense_indexes"]["chunk_vectors"]["generation"]
    assert Fabric(root).status().dense_index_problems == ()
    record = home.catalog.current_release().manifest["dense_indexes"]["chunk_vectors"]
    files = sorted((home.dense_indexes.path("chunk_vectors", record["generation"])).rglob("data/*.lance"))
    assert files
    for path in files:
        os.truncate(path, path.stat().st_size // 2)
    fabric = Fabric(root)
    (problem,) = fabric.status().dense_index_problems
    assert problem.startswith("chunk_vectors: dense-index-unreadable: ") and record["generation"] in problem, problem
    assert fabric.search("lighthouse keeper").dense_fallback_reason.startswith("dense-index-unreadable")
    said = CliRunner().invoke(app, ["status", "--home", str(root)])
    assert "dense-index-repair" in " ".join(said.output.split()), said.output
    fixed = CliRunner().invoke(app, ["dense-index-repair", "--home", str(root)])
    assert fixed.exit_code == 0, fixed.output
    assert Fabric(root).status().dense_index_problems == ()
    # A table with no index is told why and what answers instead (trial 22e: the repair printed
    # `chunk_vectors_multilingual: - -> none (too-few-rows)`); the rebuilt one, old and new generation.
    said = " ".join(fixed.output.split())
    assert ("chunk_vectors_multilingual: no index (0 rows, fewer than the 256 an index is built from): the exact "
            "product over every vector answers") in said, said
    assert f"chunk_vectors: {record['generation']} -> " in said and " rows, " in said, said
    # Run again on the repaired index: it reads whole, is kept, and no release is published.
    current = home.catalog.current_release_id()
    again = CliRunner().invoke(app, ["dense-index-repair", "--home", str(root)])
    said = " ".join(again.output.split())
    assert again.exit_code == 0 and f"nothing to repair; release {current} stays current" in said, said
    assert "sound (read whole), kept" in said and FabricHome(root).catalog.current_release_id() == current


def test_a_home_moved_under_an_open_fabric_is_named_and_never_made_again(home, tmp_path):
    """guards against: a Fabric (a running server's, an MCP session's) whose home was moved or
    deleted making a new, empty catalog at the old path at its next call (its first catalog open,
    or any later connection), then answering "no activated release; run fabric ingest" and a status
    of an empty home: the user's corpus looked gone, and a stray home was left behind."""
    from fabric_resources.catalog.records import CatalogUnavailableError

    used, fresh = Fabric(home.root), Fabric(home.root)
    assert used.search("lighthouse").results  # its catalog open and connected once
    home.root.rename(tmp_path / "moved")
    for fabric in (used, fresh):
        for call in (lambda: fabric.search("lighthouse"), fabric.status):
            with pytest.raises(CatalogUnavailableError, match="gone: its home was moved or deleted"):
                call()
    assert not home.root.exists()
    assert Fabric(tmp_path / "moved").search("lighthouse").results  # the home itself is whole


def test_a_check_answered_by_vectors_loaded_before_the_damage_is_not_kept(home):
    """guards against (trial 20h): a process that loaded the vectors before they were damaged (a
    running ``fabric serve``) answering the check from memory and keeping that answer under the
    damaged files' key: every later ``fabric status`` said the channel serves while each new
    process's search skipped it (vector-digest-mismatch); and the reverse, a failure remembered from
    before a repair kept under the repaired files' key."""
    from fabric_query import release as views

    home.layout.dense_check_cache.unlink(missing_ok=True)
    _as_older_release(home)  # one parse's damage turns the channel off there (a new one leaves it out)
    fabric = Fabric(home.root)
    assert "dense" in fabric.search("lighthouse keeper").channels_run  # vectors loaded, as a server's
    path = _vector_file(home)
    sound = path.read_bytes()
    vec = home.tables.read("chunk_vectors", columns=["vector"]).column("vector")[0].values.to_numpy()
    data = bytearray(sound)
    at = data.find(np.asarray(vec, dtype="<f4").tobytes()[:64])
    data[at + 5] ^= 0x01
    path.write_bytes(bytes(data))
    fabric.status()  # answered from the vectors this process loaded before
    views._VIEWS.clear()  # a new process
    assert Fabric(home.root).search("lighthouse keeper").skipped_channels["dense"].startswith("vector-digest-mismatch")
    views._VIEWS.clear()
    assert Fabric(home.root).status().dense_channels_off[0].startswith("dense: vector-digest-mismatch")
    # Repaired by hand with the same process's failure remembered: not kept either.
    fabric = Fabric(home.root)
    assert fabric.status().dense_channels_off
    path.write_bytes(sound)
    fabric.status()
    views._VIEWS.clear()
    assert "dense" in Fabric(home.root).search("lighthouse keeper").channels_run
    views._VIEWS.clear()
    assert Fabric(home.root).status().dense_channels_off == ()


@pytest.mark.parametrize("which", ["dense_check_cache", "row_audit_cache"])
def test_a_cache_file_that_is_not_a_plain_small_json_file_is_a_miss(home, which):
    """guards against (trial 20h): ``fabric status`` hanging on a FIFO put in place of a cache file
    (or reading a link to /dev/zero without end, or a huge file whole), trusting what a FIFO's
    writer hands it, and a RecursionError traceback from JSON nested past Python's depth."""
    import threading

    from fabric_query import dense_health
    from fabric_query import release as views
    from fabric_resources import row_audit

    path = getattr(home.layout, which)
    release = home.catalog.current_release()
    tables = [t for t in ("chunk_vectors", "chunk_vectors_multilingual") if release.manifest["tables"].get(t) is not None]
    if which == "dense_check_cache":
        key, forged = dense_health._cache_key(home, release, tables), {"off": ["dense: forged"]}
    else:
        runs = home.catalog.parse_run_overview()
        active = {m["parse_id"] for m in release.manifest["sources"].values()}
        key, forged = row_audit._cache_key(home, active, runs), {"changed": [["chunks", [["f" * 32, 1, 2]]]]}
    assert key is not None
    path.unlink(missing_ok=True)
    path.write_text("[" * 200_000, encoding="utf-8")
    status = Fabric(home.root).status()
    assert status.dense_channels_off == () and status.rows_changed == ()
    path.unlink()
    os.mkfifo(path)
    payload = json.dumps({"key": key, **forged}).encode()

    def writer():
        try:
            with open(path, "wb") as fifo:  # blocks until a reader opens it
                fifo.write(payload)
        except OSError:
            pass

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    views._VIEWS.clear()
    status = Fabric(home.root).status()
    assert status.dense_channels_off == () and status.rows_changed == (), status
    if thread.is_alive():  # the FIFO was never opened: let the writer go
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    thread.join()
    path.unlink()
    with open(path, "wb") as fh:
        fh.truncate(row_audit.MAX_CACHE_BYTES + 1)  # sparse: no disk used
    assert row_audit.read_cache_file(path) is None


@pytest.fixture(scope="module")
def ann_pristine(tmp_path_factory):
    """A home whose release has a dense ANN index (``dense_search.mode: ann``) over 301 chunks."""
    tmp = tmp_path_factory.mktemp("ann-damage")
    root = tmp / "home"
    root.mkdir()
    (root / "config.json").write_text(json.dumps({"query": {"dense_search": {"mode": "ann"}}}))
    src = tmp / "notes"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper logged the tide.\n\nA storm broke the lamp in March.\n")
    # An index is built from 256 vectors on (MIN_INDEX_ROWS): one long note of short chunks.
    rng = np.random.default_rng(3)
    words = ["tide", "lamp", "harbour", "lens", "beam", "ring", "ship", "fog", "signal", "rock", "coast", "wave"]
    (src / "b.txt").write_text("\n\n".join(" ".join(rng.choice(words, 110)) + f" entry {i}." for i in range(300)) + "\n")
    ingest(src, FabricHome(root))
    return root


@pytest.mark.parametrize("release", ["per-parse digests", "older"])
def test_status_names_an_ann_index_a_search_would_not_use(ann_pristine, tmp_path, monkeypatch, release):
    """guards against (trial 21a): one bit flipped inside the ANN index's vector file (every file
    still reads, so ``dense_index_problems`` is empty): each search answered with the exact product
    (``dense-index-release-mismatch``) while ``fabric status`` looked healthy; a kept check that
    outlives the damage (its key must cover the index's files) or forgets the fallback it found.
    (Stop 56) where the release recorded each parse's digest, the index serves and leaves out only
    the damaged parse's rows, and status and the pack name its source instead."""
    import lance
    from typer.testing import CliRunner

    from fabric_assets.cli import app
    from fabric_query import dense_health
    from fabric_query import release as views

    shutil.copytree(ann_pristine, tmp_path / "home")
    home = FabricHome(tmp_path / "home")
    if release == "older":
        _as_older_release(home)
    status = Fabric(home.root).status()
    assert status.dense_index_fallback == () and status.dense_index_problems == ()
    assert home.layout.dense_check_cache.exists()  # a sound answer kept: the damage must not reuse it
    views._VIEWS.clear()
    record = home.catalog.current_release().manifest["dense_indexes"]["chunk_vectors"]
    folder = home.dense_indexes.path("chunk_vectors", record["generation"]) / "vectors.lance"
    first = lance.dataset(str(folder)).to_table(columns=["parse_id", "vector"]).slice(0, 1)
    vec = first.column("vector")[0].values.to_numpy()
    (path,) = sorted(folder.glob("data/*.lance"))
    data = bytearray(path.read_bytes())
    at = data.find(np.asarray(vec, dtype="<f4").tobytes()[:64])
    assert at >= 0
    data[at + 5] ^= 0x01
    path.write_bytes(bytes(data))

    if release != "older":
        damaged = first.column("parse_id")[0].as_py()
        (key,) = [k for k, m in home.catalog.current_release().manifest["sources"].items() if m["parse_id"] == damaged]
        status = Fabric(home.root).status()
        assert (status.dense_index_fallback, status.dense_channels_off) == ((), ())
        assert status.dense_sources_left_out == (f"dense: {key}",)
        views._VIEWS.clear()
        pack = Fabric(home.root).search("lighthouse keeper", debug=True)
        assert pack.dense_search == "ann" and pack.dense_fallback_reason is None
        assert pack.dense_sources_left_out == (key,)
        ranked = {c for c, _ in pack.stage_candidates["channel:dense"]}
        mine = {r["chunk_id"] for r in home.tables.read("chunk_vectors", columns=["parse_id", "chunk_id"]).to_pylist()
                if r["parse_id"] == damaged}
        assert ranked and not ranked & mine
        views._VIEWS.clear()
        monkeypatch.setattr(dense_health, "_check", lambda h, r: pytest.fail("checked again on an unchanged home"))
        assert Fabric(home.root).status().dense_sources_left_out == (f"dense: {key}",)  # kept as found
        monkeypatch.undo()
        # Withheld now: a reader is told nothing of it, and the index serves the rest as before.
        config = json.loads(home.layout.config_file.read_text())
        home.layout.config_file.write_text(json.dumps({**config, "sources": {"withheld": [key.split(":", 1)[1]]}}))
        views._VIEWS.clear()
        pack = Fabric(home.root).search("lighthouse keeper")
        assert (pack.dense_search, pack.dense_fallback_reason, pack.dense_sources_left_out) == ("ann", None, ())
        status = Fabric(home.root).status()
        assert (status.dense_index_fallback, status.dense_channels_off, status.dense_sources_left_out) == ((), (), ())
        return
    status = Fabric(home.root).status()
    assert status.dense_index_problems == () and status.dense_channels_off == ()  # every file reads
    (fallback,) = status.dense_index_fallback
    assert fallback.startswith(f"dense: dense-index-release-mismatch: chunk_vectors/{record['generation']}: ")
    views._VIEWS.clear()
    pack = Fabric(home.root).search("lighthouse keeper")
    assert "dense" in pack.channels_run and fallback == f"dense: {pack.dense_fallback_reason}"
    # Kept as found: a later status answers from the cache, the fallback with it.
    views._VIEWS.clear()
    monkeypatch.setattr(dense_health, "_check", lambda h, r: pytest.fail("checked again on an unchanged home"))
    assert Fabric(home.root).status().dense_index_fallback == (fallback,)
    out = CliRunner().invoke(app, ["status", "--home", str(home.root)], env={"COLUMNS": "500"})
    assert out.exit_code == 0 and "dense index not used: dense: dense-index-release-mismatch" in out.output, out.output


def test_status_says_a_dense_channel_whose_vectors_are_another_models_is_off(home, monkeypatch):
    """guards against (trial 21a): a query encoder other than the one that wrote the vectors (the
    dense backend switched to HTTP) skipping the dense channel for every query (``model-mismatch``)
    while ``fabric status`` named nothing; the comparison must not be kept in the dense check's
    cache (its key does not cover the encoder), and an encoder that cannot be made (a missing key
    file, which a search raises) must not fail the status."""
    from fabric_query import dense_health
    from fabric_query import release as views

    assert Fabric(home.root).status().dense_channels_off == () and home.layout.dense_check_cache.exists()
    views._VIEWS.clear()
    http = {"base_url": "http://127.0.0.1:9/v1", "model": "other-embed"}
    home.layout.config_file.write_text(json.dumps({"dense": {"backend": "http", "http": http}}))
    monkeypatch.setattr(dense_health, "_check", lambda h, r: pytest.fail("checked again on unchanged files"))
    (off,) = Fabric(home.root).status().dense_channels_off  # e5's channel still matches its vectors
    assert off.startswith("dense: model-mismatch: chunk_vectors holds vectors of ['all-MiniLM-L6-v2@") and \
        "the query encoder is http:other-embed@http://127.0.0.1:9/v1:dim384" in off and "fabric ingest" in off, off
    monkeypatch.undo()
    pack = Fabric(home.root).search("lighthouse keeper")
    assert off == f"dense: {pack.skipped_channels['dense']}"
    home.layout.config_file.write_text(json.dumps({"dense": {"backend": "http", "http": {
        **http, "api_key_file": str(home.root / "no-such-key")}}}))
    assert Fabric(home.root).status().dense_channels_off == ()  # not compared: the search raises instead
    home.layout.config_file.write_text("{}")
    assert Fabric(home.root).status().dense_channels_off == ()
