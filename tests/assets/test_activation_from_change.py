"""Activation from the change: a release built from the sources and parse runs written since the
current one was derived names exactly what a derivation from every source would, through edits,
deletions, additions, reverts, copies, failed parses, withheld sources and purges; and it reads
every source only when it cannot build on the current release."""

from __future__ import annotations

import json

import pytest
from conftest import ingest

from fabric_assets.activation import activate as activation
from fabric_assets.activation.activate import ACTIVATION_MARKS, _derive_sources, activate
from fabric_assets.lifecycle.purge import PurgeSelector, purge
from fabric_assets.projections import LEXICAL_VERDICT, VECTOR_DIGEST_VERDICTS
from fabric_assets.sources.scan import scan
from fabric_resources.catalog.base import Catalog
from fabric_resources.home import FabricHome

NAMES = (LEXICAL_VERDICT, *VECTOR_DIGEST_VERDICTS.values())
TEXTS = {f"note-{i}.txt": f"The keeper of lighthouse {i} logged storm {i} and the tide at dawn.\n" for i in range(6)}


@pytest.fixture
def full_reads(monkeypatch):
    """How many times ``Catalog.sources`` read every source (no keys asked for)."""
    calls = []
    original = Catalog.sources

    def counted(self, *args, **kwargs):
        if not args and not kwargs:  # every source, every root: the activation's full derivation
            calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Catalog, "sources", counted)
    return calls


def _check(home: FabricHome, base) -> dict:
    """The current release's sources, checked against a derivation from every source built on
    ``base`` (the release the activation built on) with the catalog as it is now."""
    home = FabricHome(home.root)  # a fresh configuration read, as the next activation's
    roots = {r.root_id: r.path for r in home.catalog.roots()}
    full, _, _ = _derive_sources(home, base, NAMES, roots, from_change=False)
    current = home.catalog.current_release()
    assert current.manifest["sources"] == full
    assert list(current.manifest["sources"]) == sorted(full)
    return current.manifest["sources"]


def test_a_release_from_the_change_names_what_every_source_gives(tmp_path, fabric_home, full_reads, monkeypatch):
    """guards against: activation from the change keeping a deleted source, missing an edit, a
    revert to an older parse, a copy, a failed parse, a source activated while its parse was
    pending, a newly withheld source or a purged one; and against reading every source on every
    activation."""
    src = tmp_path / "docs"
    src.mkdir()
    for name, text in TEXTS.items():
        (src / name).write_text(text)
    home = fabric_home
    reads: list[int] = []  # every-source reads of the last step's ingest
    ingest(src, home)
    first = home.catalog.current_release()
    assert home.catalog.state(ACTIVATION_MARKS)["release_id"] == first.release_id
    _check(home, None)

    def step(change) -> dict:
        change()
        base = home.catalog.current_release()  # what the activation builds on
        full_reads.clear()
        ingest(src, home)
        reads[:] = list(full_reads)
        return _check(home, base)

    edited = step(lambda: (src / "note-0.txt").write_text(TEXTS["note-0.txt"] + "An edited line.\n"))
    assert reads == []  # from the change: no source read but those written since
    original = first.manifest["sources"]["fs:docs/note-0.txt"]["parse_id"]
    assert edited["fs:docs/note-0.txt"]["parse_id"] != original

    gone = step(lambda: (src / "note-1.txt").unlink())
    assert "fs:docs/note-1.txt" not in gone and reads == []

    added = step(lambda: (src / "copy-of-2.txt").write_text(TEXTS["note-2.txt"]))  # same bytes: same parse
    assert added["fs:docs/copy-of-2.txt"]["parse_id"] == added["fs:docs/note-2.txt"]["parse_id"]

    reverted = step(lambda: (src / "note-0.txt").write_text(TEXTS["note-0.txt"]))  # back to a parse that exists
    assert reverted["fs:docs/note-0.txt"]["parse_id"] == original and reads == []

    failed = step(lambda: (src / "broken.pdf").write_bytes(b"%PDF-1.7 not a PDF at all"))  # a failed parse
    assert "fs:docs/broken.pdf" not in failed and reads == []

    # Activated while its new parse was pending (a sensor's activation between scan and parse run):
    # the parse becomes ready later, with no new write of the source row.
    def scanned_then_activated() -> None:
        (src / "note-3.txt").write_text(TEXTS["note-3.txt"] + "Scanned before it was parsed.\n")
        scan(home)
        activate(home)

    later = step(scanned_then_activated)
    assert later["fs:docs/note-3.txt"]["parse_id"] != first.manifest["sources"]["fs:docs/note-3.txt"]["parse_id"]
    assert reads == []

    # A configuration change (a withheld source) is derived from every source again.
    home.layout.config_file.write_text(json.dumps({"sources": {"withheld": ["docs/note-4.txt"]}}))
    withheld = step(lambda: None)
    assert "fs:docs/note-4.txt" not in withheld and reads != []

    # A purge deletes catalog rows (no change number shows it): all is read again.
    def purge_note() -> None:
        (src / "note-5.txt").unlink()
        ingest(src, home)
        purge(FabricHome(home.root), PurgeSelector(source_keys=("fs:docs/note-5.txt",)))

    purged = step(purge_note)
    assert "fs:docs/note-5.txt" not in purged

    # A process that did not derive the current release (no memo) builds on it from the change too.
    monkeypatch.setattr(activation, "_DERIVED", {})
    again = step(lambda: (src / "note-2.txt").write_text(TEXTS["note-2.txt"] + "Another line.\n"))
    assert again["fs:docs/note-2.txt"]["parse_id"] != added["fs:docs/note-2.txt"]["parse_id"] and reads == []


def test_parse_id_indexes_ride_with_a_release_and_change_no_answer(tmp_path, fabric_home, monkeypatch):
    """guards against: the parse-ID index commit (a new table version) asking for a release when
    nothing changed, a release that pins the versions before it, or an index that changes what a
    search finds (the threshold is lowered so this small corpus gets its indexes; a home of the
    same files without them is the reference)."""
    from fabric_query import Fabric
    from fabric_resources import tables as table_store
    from fabric_resources.tables import PARSE_ID_INDEX

    src = tmp_path / "docs"
    src.mkdir()
    for name, text in TEXTS.items():
        (src / name).write_text(text)
    ingest(src, fabric_home)
    monkeypatch.setattr(table_store, "PARSE_ID_INDEX_ROWS", 2)
    (src / "note-0.txt").write_text("The keeper of lighthouse 0 logged a calm night and storm 3.\n")
    ingest(src, fabric_home)
    current = fabric_home.catalog.current_release()
    indexed = [n for n in ("chunks", "lexical_documents", "chunk_vectors")
               if any(i["name"] == PARSE_ID_INDEX for i in fabric_home.tables.dataset(n).list_indices())]
    assert indexed == ["chunks", "lexical_documents", "chunk_vectors"]
    # The release pins the versions that hold the indexes (they were made before it was published).
    for n in indexed:
        assert current.manifest["tables"][n] == fabric_home.tables.version(n)
    ingest(src, fabric_home)  # nothing changed: no release, index or not
    assert fabric_home.catalog.current_release().release_id == current.release_id
    monkeypatch.setattr(table_store, "PARSE_ID_INDEX_ROWS", 10**9)
    reference = FabricHome(tmp_path / "reference-home")
    ingest(src, reference)
    assert not any(i["name"] == PARSE_ID_INDEX for i in reference.tables.dataset("chunks").list_indices())

    def answer(home):
        return [(h.chunk_id, round(h.fused_score, 6)) for h in Fabric(home.root).search("keeper storm 3").results]

    assert answer(fabric_home) == answer(reference) and answer(reference)


def test_fragment_merges_ride_with_a_release_and_change_no_answer(tmp_path, fabric_home, monkeypatch):
    """guards against: a fragment merge (a new table version of the same rows) asking for a release
    when nothing changed, a release that pins the versions before it, or a merge that changes what
    a search finds or what an older release reads (the threshold is lowered so a few ingests reach
    it; a home of the same files ingested at once is the reference)."""
    from fabric_query import Fabric
    from fabric_resources import tables as table_store

    src = tmp_path / "docs"
    src.mkdir()
    for name, text in TEXTS.items():  # one ingest per file: a fragment per table each
        (src / name).write_text(text)
        ingest(src, fabric_home)
    before = fabric_home.catalog.current_release()
    chunks_before = fabric_home.tables.read("chunks", version=before.manifest["tables"]["chunks"]).to_pylist()
    assert len(fabric_home.tables.dataset("chunks").get_fragments()) == len(TEXTS)
    monkeypatch.setattr(table_store, "MAX_FRAGMENTS", 2)
    (src / "note-0.txt").write_text("The keeper of lighthouse 0 logged a calm night and storm 3.\n")
    ingest(src, fabric_home)
    current = fabric_home.catalog.current_release()
    for name in ("chunks", "lexical_documents", "chunk_vectors", "units"):
        assert len(fabric_home.tables.dataset(name).get_fragments()) <= 2, name
        assert current.manifest["tables"][name] == fabric_home.tables.version(name), name
    ingest(src, fabric_home)  # nothing changed: no release, merged or not
    assert fabric_home.catalog.current_release().release_id == current.release_id
    # The release before still reads the rows it pinned.
    assert fabric_home.tables.read("chunks", version=before.manifest["tables"]["chunks"]).to_pylist() == chunks_before
    monkeypatch.setattr(table_store, "MAX_FRAGMENTS", 10**6)
    reference = FabricHome(tmp_path / "reference-home")
    ingest(src, reference)

    def answer(home):
        return [(h.chunk_id, round(h.fused_score, 6)) for h in Fabric(home.root).search("keeper storm 3").results]

    assert answer(fabric_home) == answer(reference) and answer(reference)


def test_a_setting_that_derives_nothing_leaves_the_release_hash_and_the_derivation_from_the_change(
        tmp_path, fabric_home, full_reads):
    """guards against (trial 23g): every setting entering the configuration hash that a release
    records and the next activation builds on, so `server.max_waiting_connections` (a server
    limit), a retention period or how the sensors batch runs made the next activation read every
    source again (what a withheld pattern needs) and the release record another hash, though none
    can change what is derived. Now they stay out of it; a withheld pattern still enters it (the
    test above)."""
    src = tmp_path / "docs"
    src.mkdir()
    for name, text in list(TEXTS.items())[:3]:
        (src / name).write_text(text)
    home = fabric_home
    ingest(src, home)
    first = home.catalog.current_release()
    home.layout.config_file.write_text(json.dumps({
        "server": {"max_waiting_connections": 7, "port": 8123, "max_concurrent_queries": 2},
        "retention": {"releases": 5, "runs_days": 3},
        "sources": {"partitions_per_run": 3, "bytes_per_run": 1000000, "unattended": False,
                    "unattended_steps": "in_process"}}))
    (src / "note-0.txt").write_text(TEXTS["note-0.txt"] + "An edited line.\n")
    full_reads.clear()
    ingest(src, FabricHome(home.root))
    assert full_reads == [], "the activation read every source again"
    current = FabricHome(home.root).catalog.current_release()
    assert current.release_id != first.release_id
    assert current.manifest["config_hash"] == first.manifest["config_hash"]
    _check(home, first)
