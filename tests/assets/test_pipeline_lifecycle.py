"""End-to-end lifecycle over real Dagster runs, Lance tables, tantivy and the real model.

Each test ingests a small folder it writes itself, then checks a property of
the whole system: change → new text found and the old citation stale; delete →
gone; bytes back → searchable with no new embedding work; bad input → a failed
parse with a reason that does not stop the other documents; a query pinned to a
release never changes when an activation happens mid-query.
"""

from __future__ import annotations

import os

import dagster as dg
import pytest
from conftest import ingest

from fabric_query import Fabric

LIGHTHOUSE = (
    "The lighthouse keeper climbed the spiral stairs every evening.\n\n"
    "She wrote the tide tables in a green ledger.\n"
)
HARBOUR = "The harbour master counted the herring boats at dawn.\n"
BREAD = "Sourdough bread needs flour, water and a patient baker.\n"


def _write(path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))


def _top_source(fabric: Fabric, query: str) -> str | None:
    pack = fabric.search(query, limit=5)
    return pack.results[0].citation.source_key if pack.results else None


def _materializations(home, asset: str, partition: str) -> int:
    os.environ["DAGSTER_HOME"] = str(home.layout.dagster_home)
    instance = dg.DagsterInstance.get()
    result = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition]), limit=1000
    )
    return len(result.records)


def test_change_delete_restore(tmp_path, fabric_home):
    """guards against: an edited file still citing as verified; a deleted file staying
    searchable; returning bytes being re-parsed and re-embedded."""
    src = tmp_path / "src"
    _write(src / "notes/light.txt", LIGHTHOUSE)
    _write(src / "bread.txt", BREAD)
    first = ingest(src, fabric_home)
    assert first.failed_runs == []
    fabric = Fabric(fabric_home.root)

    pack = fabric.search("lighthouse keeper")
    hit = pack.results[0]
    assert hit.citation.source_key == "fs:src/notes/light.txt"
    assert "word" in hit.channels and "dense" in hit.channels
    old_citation = hit.citation
    verified = fabric.resolve(old_citation)
    assert verified.status == "verified" and verified.text == hit.text
    # Offsets select the cited text from the unit.
    units = fabric_home.tables.read("units", parse_ids=[old_citation.parse_id]).to_pydict()
    unit_text = dict(zip(units["unit_id"], units["text"]))
    pieces = [unit_text[s.unit_id][s.start_char:s.end_char] for s in old_citation.spans]
    assert "\n\n".join(pieces) == hit.text
    assert "".join(seg.text for seg in hit.highlights) == hit.text
    assert any(seg.highlighted and seg.text.lower() == "lighthouse" for seg in hit.highlights)
    old_parse = old_citation.parse_id

    # Change: the new text is found, the old citation is stale (never substituted).
    _write(src / "notes/light.txt", HARBOUR)
    changed = ingest(src, fabric_home)
    assert changed.scan.changed == ["fs:src/notes/light.txt"]
    assert _top_source(fabric, "harbour master herring") == "fs:src/notes/light.txt"
    stale = fabric.resolve(old_citation)
    assert stale.status == "stale" and stale.text is None
    failed = {c.check for c in stale.checks if not c.ok}
    assert {"source-active", "source-bytes"} <= failed
    assert all(r.citation.parse_id != old_parse for r in fabric.search("lighthouse keeper").results)

    # Delete: no longer returned.
    (src / "notes/light.txt").unlink()
    deleted = ingest(src, fabric_home)
    assert deleted.scan.deleted == ["fs:src/notes/light.txt"]
    for q in ("harbour master herring", "lighthouse keeper"):
        assert all(r.citation.source_key != "fs:src/notes/light.txt" for r in fabric.search(q).results)

    # Original bytes back: searchable again, with no parse run and no new embedding.
    before = _materializations(fabric_home, "chunk_vectors", old_parse)
    assert before == 1
    _write(src / "notes/light.txt", LIGHTHOUSE)
    restored = ingest(src, fabric_home)
    assert restored.run_ids == [], "returning bytes must reuse the existing partition"
    assert _materializations(fabric_home, "chunk_vectors", old_parse) == before
    back = fabric.search("lighthouse keeper").results[0]
    assert back.citation.source_key == "fs:src/notes/light.txt" and back.citation.parse_id == old_parse
    assert fabric.resolve(back.citation).status == "verified"


def test_bad_input_fails_alone_and_symlinks_are_not_followed(tmp_path, fabric_home):
    """guards against: one undecodable or broken file failing the run for every document;
    a symlink pulling text from outside the root into the index; hidden files indexed."""
    src = tmp_path / "src"
    outside = tmp_path / "outside.txt"
    _write(outside, "Zanzibarian secret outside the root.\n")
    _write(src / "good.txt", BREAD)
    _write(src / "bad.txt", b"\x00\xff\xfe\x00" * 64 + bytes(range(256)))
    _write(src / "broken.epub", b"PK\x03\x04 definitely not a zip")
    _write(src / ".hidden.txt", "Quixotic hidden words.\n")
    _write(src / "photo.png", b"\x89PNG\r\n\x1a\n")
    os.symlink(outside, src / "link.txt")
    summary = ingest(src, fabric_home)
    assert summary.failed_runs == [] and summary.scan.skipped_symlinks == 1
    fabric = Fabric(fabric_home.root)
    status = fabric.status()
    reasons = {p.sources[0]: p.reason for p in status.failed}
    assert reasons == {"fs:src/bad.txt": "undecodable", "fs:src/broken.epub": "not-a-zip"}
    assert ("fs:src/photo.png", "image/png") in status.unsupported
    assert status.active_sources == 1
    assert _top_source(fabric, "sourdough bread") == "fs:src/good.txt"
    assert all("Zanzibarian" not in r.text for r in fabric.search("Zanzibarian").results)
    assert all("Quixotic" not in r.text for r in fabric.search("Quixotic hidden").results)

    # No blind retry: the failed parse is not requested again on the next ingest.
    again = ingest(src, fabric_home)
    assert again.run_ids == [] and again.scan.parse_ids_to_run == []


def test_identical_files_share_a_partition_and_moves_reuse_it(tmp_path, fabric_home):
    """guards against: duplicate bytes parsed twice; a hit citing only one of two identical
    sources; a move re-embedding the content."""
    src = tmp_path / "src"
    _write(src / "a/light.txt", LIGHTHOUSE)
    _write(src / "b/light-copy.txt", LIGHTHOUSE)
    first = ingest(src, fabric_home)
    assert len(first.scan.parse_ids_to_run) == 1
    fabric = Fabric(fabric_home.root)
    cit = fabric.search("lighthouse").results[0].citation
    assert {cit.source_key, *cit.also_cited_by} == {"fs:src/a/light.txt", "fs:src/b/light-copy.txt"}
    scoped = fabric.search("lighthouse path:b/").results[0].citation
    assert scoped.source_key == "fs:src/b/light-copy.txt" and scoped.also_cited_by == ()

    (src / "a/light.txt").rename(src / "a/moved.txt")
    moved = ingest(src, fabric_home)
    assert moved.run_ids == [] and moved.scan.moved == [("fs:src/a/light.txt", "fs:src/a/moved.txt")]
    cit = fabric.search("lighthouse").results[0].citation
    assert {cit.source_key, *cit.also_cited_by} == {"fs:src/a/moved.txt", "fs:src/b/light-copy.txt"}


def test_a_citation_of_a_moved_file_is_stale_and_names_where_its_bytes_are_active(tmp_path, fabric_home):
    """guards against: a citation of a renamed file answering only "no visible source" while the
    same bytes are served under the new name; naming a path that is withheld or no longer active."""
    import json

    src = tmp_path / "src"
    _write(src / "a/light.txt", LIGHTHOUSE)
    ingest(src, fabric_home)
    fabric = Fabric(fabric_home.root)
    cit = fabric.search("lighthouse").results[0].citation
    assert cit.source_key == "fs:src/a/light.txt" and fabric.resolve(cit).status == "verified"

    (src / "a/light.txt").rename(src / "a/moved.txt")
    ingest(src, fabric_home)
    answer = fabric.resolve(cit)
    assert answer.status == "stale" and answer.text is None and answer.active_at == ("fs:src/a/moved.txt",)
    assert "active at fs:src/a/moved.txt" in answer.checks[-1].detail, answer.checks
    # The name it points to resolves a citation made there.
    assert fabric.resolve(fabric.search("lighthouse").results[0].citation).status == "verified"

    fabric_home.layout.config_file.write_text(json.dumps({"sources": {"withheld": ["src/a/moved.txt"]}}))
    assert fabric.resolve(cit).active_at == ()
    fabric_home.layout.config_file.write_text("{}")
    (src / "a/moved.txt").unlink()
    ingest(src, fabric_home)
    assert fabric.resolve(cit).active_at == ()


def test_a_citation_of_an_edited_file_says_whether_its_text_is_still_there_and_where(tmp_path, fabric_home):
    """guards against (stop 48): a citation whose file was edited since answering only "source
    bytes changed" — the user could not tell a preface added above the cited paragraph from the
    paragraph rewritten — and against any of the new text reaching the answer. Stale either way."""
    src = tmp_path / "src"
    _write(src / "log.txt", "The keeper logged the tide.\n\nA storm broke the lamp in March.\n")
    ingest(src, fabric_home)
    fabric = Fabric(fabric_home.root)
    cit = next(h.citation for h in fabric.search('"storm broke the lamp"').results)
    assert fabric.resolve(cit).status == "verified" and [loc.lines for loc in cit.locations] == [(1, 1), (3, 3)]

    def text_now(answer):
        assert answer.status == "stale" and answer.text is None
        assert not any("Preface" in c.detail or "May" in c.detail for c in answer.checks)  # no new text shown
        return next(c for c in answer.checks if c.check == "text-now")

    _write(src / "log.txt", "Preface of the log.\n\nThe keeper logged the tide.\n\nA storm broke the lamp in March.\n")
    moved = text_now(fabric.resolve(cit))
    assert moved.ok and "at lines 3, 5" in moved.detail, moved
    _write(src / "log.txt", "Preface of the log.\n\nA storm broke the lamp in May.\n")
    gone = text_now(fabric.resolve(cit))
    assert not gone.ok and "not in the file's current bytes" in gone.detail
    _write(src / "log.txt", "The keeper logged the tide.\n\nA storm broke the lamp in March.\n")  # back as cited
    back = fabric.resolve(cit)
    assert back.status == "verified" and all(c.check != "text-now" for c in back.checks)
    (src / "log.txt").unlink()
    assert all(c.check != "text-now" for c in fabric.resolve(cit).checks)  # nothing to look in

def test_scan_keys_and_relative_paths_agree_with_source_key_for(tmp_path, fabric_home):
    """guards against: the walk's incremental relative paths drifting from the documented key
    (nested folders, spaces, non-ASCII and backslash names, hidden entries skipped)."""
    from fabric_assets.sources.scan import scan, source_key_for

    src = tmp_path / "src"
    names = ["a.txt", "deep/er/still/b.txt", "sp ace/ünï.md", "日本/語.txt", "back\\slash.txt", "x/.hidden/c.txt",
             ".dot.txt"]
    for name in names:
        _write(src / name, f"text of {name}\n")
    root = fabric_home.catalog.register_root(src)
    report = scan(fabric_home)
    visible = [n for n in names if not any(part.startswith(".") for part in n.split("/"))]
    expected = {source_key_for(src, src / n, root.label) for n in visible}
    assert set(report.new) == expected and len(report.new) == len(visible)
    rows = {s.source_key: s.rel_path for s in fabric_home.catalog.sources(root_id=root.root_id)}
    assert rows == {source_key_for(src, src / n, root.label): n for n in visible}


def test_a_name_that_is_not_utf8_is_skipped_and_reported_not_a_crash(tmp_path, fabric_home):
    """guards against: one Latin-1 file name aborting the scan of every root (the catalog stores
    keys as UTF-8 text) with a traceback and half the scan committed."""
    from fabric_assets.sources.scan import scan

    src = tmp_path / "src"
    _write(src / "good.txt", "A good file.\n")
    raw = os.fsencode(src)
    with open(raw + b"/bad\xffname.txt", "wb") as f:
        f.write(b"latin-1 name\n")
    os.makedirs(raw + b"/caf\xe9")
    with open(raw + b"/caf\xe9/inside.txt", "wb") as f:
        f.write(b"inside a badly named folder\n")
    root = fabric_home.catalog.register_root(src)
    report = scan(fabric_home)
    assert report.new == [f"fs:{root.label}/good.txt"]
    # Each byte UTF-8 does not read as \xNN, as `fabric` prints a control character (trial 17: `ascii()`
    # printed `fs:src/'bad\udcffname.txt'`, quotes inside the key and Python's stand-in for the byte).
    assert sorted(report.skipped_names) == ["bad\\xffname.txt", "caf\\xe9"]
    assert sorted(report.skipped) == [(f"fs:{root.label}/bad\\xffname.txt", "name-not-utf-8"),
                                      (f"fs:{root.label}/caf\\xe9", "name-not-utf-8")]
    assert [s.source_key for s in fabric_home.catalog.sources()] == [f"fs:{root.label}/good.txt"]


def test_a_home_inside_the_ingested_folder_is_not_ingested(tmp_path, monkeypatch):
    """guards against: Fabric indexing its own tables, logs and SQLite files as sources, and
    finding them changed on every ingest."""
    from fabric_resources.home import FabricHome

    docs = tmp_path / "docs"
    _write(docs / "light.txt", LIGHTHOUSE)
    home = FabricHome(docs / "index")
    monkeypatch.setenv("DAGSTER_HOME", str(home.layout.dagster_home))  # restored after the test
    first = ingest(docs, home)
    second = ingest(docs, home)
    assert first.scan.new == ["fs:docs/light.txt"]
    assert second.scan.new == second.scan.changed == []
    assert [s.source_key for s in home.catalog.sources()] == ["fs:docs/light.txt"]


def test_a_file_deleted_while_its_root_was_away_leaves_the_release(tmp_path, fabric_home):
    """guards against: sources marked access_lost (root unmounted) never being deleted once the
    root is back, so a deleted file stayed searchable for good."""
    roots = tmp_path / "r1"
    notes, other = roots / "notes", tmp_path / "r2" / "other"
    _write(notes / "keep.txt", LIGHTHOUSE)
    _write(notes / "ghost.txt", "The ghostlyword lives only in this file.\n")
    _write(other / "bread.txt", BREAD)
    ingest(notes, fabric_home)
    ingest(other, fabric_home)
    fabric = Fabric(fabric_home.root)

    def cited(query: str) -> set[str]:
        return {r.citation.source_key for r in fabric.search(query).results}

    assert "fs:notes/ghost.txt" in cited("ghostlyword")

    notes.rename(roots / "notes-away")  # the root is unavailable for one ingest
    away = ingest(other, fabric_home)
    assert sorted(away.scan.access_lost) == ["fs:notes/ghost.txt", "fs:notes/keep.txt"]
    assert "fs:notes/ghost.txt" in cited("ghostlyword")  # unavailable is not deleted

    (roots / "notes-away").rename(notes)
    (notes / "ghost.txt").unlink()
    back = ingest(notes, fabric_home)
    assert back.scan.deleted == ["fs:notes/ghost.txt"]
    assert "fs:notes/ghost.txt" not in cited("ghostlyword")
    assert "fs:notes/keep.txt" in cited("lighthouse keeper")


def test_activation_during_a_query_never_changes_its_answer(tmp_path, fabric_home, monkeypatch):
    """guards against: a query reading the new index or tables half-way through after an
    activation swapped the release pointer."""
    from fabric_assets.activation.activate import activate
    from fabric_assets.ingest import dagster_instance, run_pending
    from fabric_assets.sources.scan import scan
    from fabric_query.channels import dense

    src = tmp_path / "src"
    _write(src / "light.txt", LIGHTHOUSE)
    _write(src / "bread.txt", BREAD)
    ingest(src, fabric_home)
    fabric = Fabric(fabric_home.root)
    baseline = fabric.search("lighthouse keeper tide").model_dump(exclude={"timings"})

    # Parse a change (not yet activated), then activate it from inside the running query.
    _write(src / "light.txt", "The lighthouse keeper retired; the tide tables were burnt.\n")
    _write(src / "more.txt", "Another lighthouse keeper kept tide tables too.\n")
    report = scan(fabric_home)
    run_pending(fabric_home, dagster_instance(fabric_home), report.parse_ids_to_run)
    # The dense stage of the default configuration (direct, or through the section-guided route).
    stage = "section_guided_dense" if fabric_home.config.query.section_guided else "dense_channel"
    real_dense = getattr(dense, stage)
    activated = []

    def dense_then_activate(*args, **kwargs):
        activated.append(activate(fabric_home).release_id)
        return real_dense(*args, **kwargs)

    monkeypatch.setattr(dense, stage, dense_then_activate)
    during = fabric.search("lighthouse keeper tide").model_dump(exclude={"timings"})
    assert activated and activated[0] != baseline["release_id"]
    assert during == baseline
    monkeypatch.setattr(dense, stage, real_dense)
    after = fabric.search("lighthouse keeper tide")
    assert after.release_id == activated[0]
    assert {r.citation.source_key for r in after.results} >= {"fs:src/more.txt"}


def test_ctrl_c_during_an_ingest_stops_it_and_activates_nothing(tmp_path, fabric_home, monkeypatch):
    """guards against: Dagster swallowing a SIGINT into a failed run, after which the ingest went
    on to activate and the CLI exited 0."""
    import signal

    import fabric_assets.dense.assets as dense_assets

    src = tmp_path / "src"
    _write(src / "light.txt", LIGHTHOUSE)
    ingest(src, fabric_home)
    before = fabric_home.catalog.current_release().release_id
    _write(src / "bread.txt", BREAD)
    real_check = dense_assets.vectors_finite_unit_norm

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C in the terminal sends
        return real_check(*args, **kwargs)

    monkeypatch.setattr(dense_assets, "vectors_finite_unit_norm", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ingest(src, fabric_home)
    assert fabric_home.catalog.current_release().release_id == before
    monkeypatch.setattr(dense_assets, "vectors_finite_unit_norm", real_check)

    import fabric_assets.activation.assets as activation_assets  # now during the activation run
    real_activate = activation_assets.activate

    def interrupted_activation(home):
        os.kill(os.getpid(), signal.SIGINT)
        return real_activate(home)

    monkeypatch.setattr(activation_assets, "activate", interrupted_activation)
    with pytest.raises(KeyboardInterrupt):
        ingest(src, fabric_home)
    assert fabric_home.catalog.current_release().release_id == before
    monkeypatch.setattr(activation_assets, "activate", real_activate)
    again = ingest(src, fabric_home)  # the interrupted work is finished by the next ingest
    assert again.activation["published"]
    assert "fs:src/bread.txt" in {r.citation.source_key for r in Fabric(fabric_home.root).search("sourdough").results}


def test_gate_failure_holds_the_new_parse_and_keeps_the_old_one(tmp_path, fabric_home, monkeypatch):
    """guards against: activating a parse whose per-parse verdict failed; one bad parse
    blocking the other parses of the same multi-partition run."""
    import fabric_assets.dense.assets as dense_assets

    src = tmp_path / "src"
    _write(src / "light.txt", LIGHTHOUSE)
    ingest(src, fabric_home)
    fabric = Fabric(fabric_home.root)
    old = fabric.search("lighthouse").results[0].citation

    real = dense_assets.vectors_finite_unit_norm

    def fail_for_harbour(vectors):
        return {"passed": False, "detail": "injected"} if vectors.shape[0] == 1 else real(vectors)

    _write(src / "light.txt", HARBOUR)  # one chunk → injected failure
    _write(src / "bread.txt", BREAD + "\n" + "Knead the dough.\n\n" + "Bake it hot.\n" * 80)  # several chunks
    monkeypatch.setattr(dense_assets, "vectors_finite_unit_norm", fail_for_harbour)
    summary = ingest(src, fabric_home)
    assert len(summary.run_ids) == 1  # both parses in one run
    status = fabric.status()
    assert [p.sources for p in status.held] == [("fs:src/light.txt",)]
    assert "vectors_are_finite_and_unit_norm" in status.held[0].reason
    # The previous version stays active; the other document of the run activated.
    assert fabric.search("lighthouse").results[0].citation.parse_id == old.parse_id
    assert _top_source(fabric, "sourdough knead dough") == "fs:src/bread.txt"
    assert all("harbour" not in r.text for r in fabric.search("harbour herring").results)


@pytest.mark.parametrize("query", ["", "path:notes/", "-lighthouse", '"unclosed'])
def test_bad_queries_raise_typed_errors(tmp_path, fabric_home, query):
    """guards against: a filter-only or malformed query returning an empty answer as if healthy."""
    from fabric_query.errors import QuerySyntaxError

    _write(tmp_path / "src/light.txt", LIGHTHOUSE)
    ingest(tmp_path / "src", fabric_home)
    with pytest.raises(QuerySyntaxError):
        Fabric(fabric_home.root).search(query)


def test_a_parse_whose_run_died_is_reported_and_run_again(tmp_path, fabric_home, monkeypatch):
    """guards against: a run killed after parsing leaving its source out of every release, not
    shown in `status`, and never re-run until the file changes."""
    import fabric_assets.dense.assets as dense_assets

    src = tmp_path / "src"
    _write(src / "light.txt", LIGHTHOUSE)
    ingest(src, fabric_home)
    _write(src / "bread.txt", BREAD)

    def killed(vectors):
        raise KeyboardInterrupt  # what a kill during the embedding step leaves behind

    with monkeypatch.context() as m:
        m.setattr(dense_assets, "vectors_finite_unit_norm", killed)
        try:
            ingest(src, fabric_home)
        except KeyboardInterrupt:
            pass
    fabric = Fabric(fabric_home.root)
    status = fabric.status()
    assert [p.sources for p in status.unfinished] == [("fs:src/bread.txt",)]
    assert _top_source(fabric, "sourdough starter") != "fs:src/bread.txt"
    summary = ingest(src, fabric_home)  # the file did not change
    assert summary.retried == [status.unfinished[0].parse_id] and not summary.failed_runs
    # Resumed, not reported as a chunking change (it was "re-chunked (chunking changed)" too).
    assert summary.rechunked == summary.retried and summary.rechunked_by_change == []
    assert fabric.status().unfinished == ()
    assert _top_source(fabric, "sourdough starter") == "fs:src/bread.txt"
    assert _top_source(fabric, "lighthouse") == "fs:src/light.txt"


@pytest.mark.parametrize("swapped", ["root", "parent"])
def test_a_root_swapped_for_a_symlink_is_not_walked_and_its_sources_are_kept(tmp_path, fabric_home, swapped):
    """guards against: a registered root (or a folder above it) replaced by a symbolic link being
    walked, so whoever can write the root's parent has any folder the Fabric user can read taken
    in and served (the walk never follows a link inside a root); the root's sources deleted."""
    from fabric_assets.sources.scan import scan

    base = tmp_path / "base"
    docs = base / "docs"
    docs.mkdir(parents=True)
    (docs / "x.txt").write_text("ok rootone\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "s.txt").write_text("outsidesecretmarker\n")
    fabric_home.catalog.register_root(docs)
    assert scan(fabric_home).new == ["fs:docs/x.txt"]
    if swapped == "root":
        docs.rename(base / "docs.real")
        docs.symlink_to(outside, target_is_directory=True)
    else:  # the folder above the root becomes a link to a tree holding a `docs` of its own
        (outside / "docs").mkdir()
        (outside / "docs" / "s.txt").write_text("outsidesecretmarker\n")
        base.rename(tmp_path / "base.real")
        base.symlink_to(outside, target_is_directory=True)
    report = scan(fabric_home)
    assert report.new == [] and report.deleted == [] and report.access_lost == ["fs:docs/x.txt"]
    ((key, reason),) = report.skipped
    assert key == "fs:docs/" and reason.startswith("root-is-symlink: ") and str(outside) in reason
    assert {s.source_key: s.state for s in fabric_home.catalog.sources()} == {"fs:docs/x.txt": "access_lost"}


@pytest.mark.parametrize("gone", ["removed", "link-loop"])
def test_ingest_of_a_registered_root_that_is_gone_scans_and_says_so(tmp_path, fabric_home, gone):
    """guards against (stop 40's note): `fabric ingest ROOT` of a registered root that is gone or
    became a symbolic-link loop refused as "not a directory" before any scan, so its files stayed
    served as present with nothing saying the root cannot be observed; a path never registered
    accepted as one."""
    from fabric_assets.ingest import NotADirectoryRoot, ingest

    docs = tmp_path / "docs"
    _write(docs / "x.txt", "ok rootone\n")
    first = ingest(docs, fabric_home)
    assert first.complete and first.scan.new == ["fs:docs/x.txt"]
    docs.rename(tmp_path / "docs.away")
    if gone == "link-loop":
        (tmp_path / "loop").symlink_to(docs)
        docs.symlink_to(tmp_path / "loop")
    away = ingest(docs, fabric_home)
    assert away.scan.access_lost == ["fs:docs/x.txt"] and not away.complete
    ((key, reason),) = away.scan.skipped
    assert key == "fs:docs/" and reason.startswith("root-unavailable: ")
    assert {s.source_key: s.state for s in fabric_home.catalog.sources()} == {"fs:docs/x.txt": "access_lost"}
    with pytest.raises(NotADirectoryRoot):
        ingest(tmp_path / "never-registered", fabric_home)
    assert [r.path for r in fabric_home.catalog.roots()] == [str(docs)]

    docs.unlink(missing_ok=True)
    (tmp_path / "docs.away").rename(docs)
    back = ingest(docs, fabric_home)
    assert back.complete and back.scan.skipped == []
    assert {s.source_key: s.state for s in fabric_home.catalog.sources()} == {"fs:docs/x.txt": "present"}


def test_a_root_whose_drive_was_unmounted_keeps_its_files(tmp_path, fabric_home, monkeypatch):
    """guards against (trial 21c): a root that is a mount point, its drive unmounted, leaves its
    mount point as an empty folder: the scan recorded every file deleted and published a release
    without them (a real tmpfs, `umount`: "sources: 2 deleted", no result). Files deleted from a
    mounted drive, and a folder that simply is empty, are still deleted."""
    from fabric_assets.sources.scan import scan

    docs = tmp_path / "drive"
    _write(docs / "x.txt", "on the drive\n")
    _write(docs / "y.txt", "also on the drive\n")
    is_mount = {"now": True}
    real_ismount = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda p: is_mount["now"] if os.fspath(p) == str(docs) else real_ismount(p))
    fabric_home.catalog.register_root(docs)
    assert sorted(scan(fabric_home).new) == ["fs:drive/x.txt", "fs:drive/y.txt"]
    (docs / "y.txt").unlink()  # deleted on the mounted drive: a deletion
    assert scan(fabric_home).deleted == ["fs:drive/y.txt"]

    (docs / "x.txt").unlink()
    is_mount["now"] = False  # unmounted: the mount point is left, empty
    for _ in range(2):  # and stays so: the next scan does not take it as an empty folder either
        away = scan(fabric_home)
        assert away.deleted == [] and away.access_lost in ([], ["fs:drive/x.txt"])
        ((key, reason),) = away.skipped
        assert key == "fs:drive/" and reason.startswith("root-unavailable: ") and "unmounted" in reason
        assert {s.source_key: s.state for s in fabric_home.catalog.sources()} == {
            "fs:drive/x.txt": "access_lost", "fs:drive/y.txt": "deleted"}

    _write(docs / "z.txt", "written into the bare folder\n")  # no drive: the folder is what it holds
    bare = scan(fabric_home)
    assert bare.new == ["fs:drive/z.txt"] and bare.deleted == ["fs:drive/x.txt"] and bare.skipped == []
    (docs / "z.txt").unlink()  # and a plain folder emptied is a deletion
    assert scan(fabric_home).deleted == ["fs:drive/z.txt"]


def test_a_root_bind_mounted_from_the_same_file_system_keeps_its_files_when_unmounted(tmp_path, fabric_home,
                                                                                       monkeypatch):
    """guards against (trial 21f): `os.path.ismount` compares a folder's device with its parent's,
    so a root bind-mounted from the same file system (`mount --bind /tmp/t21/bs /tmp/t21/bd`) was
    never recorded as a mount point; unmounted, its empty folder was a deletion of every file (a
    real bind mount: "1 deleted"). The mount table names it (its escapes read as the path)."""
    from fabric_assets.sources import walk
    from fabric_assets.sources.scan import scan

    docs = tmp_path / "bound drive"
    _write(docs / "x.txt", "on the bound drive\n")
    table = tmp_path / "mountinfo"
    escaped = os.path.realpath(docs).replace(" ", "\\040")
    table.write_text(f"22 1 0:21 / / rw - ext4 /dev/sda1 rw\n99 22 0:21 /src {escaped} rw - ext4 /dev/sda1 rw\n")
    monkeypatch.setattr(walk, "MOUNT_TABLE", str(table))
    fabric_home.catalog.register_root(docs)
    assert scan(fabric_home).new == ["fs:bound drive/x.txt"]

    (docs / "x.txt").unlink()
    table.write_text("22 1 0:21 / / rw - ext4 /dev/sda1 rw\n")  # unmounted
    away = scan(fabric_home)
    assert away.deleted == [] and away.access_lost == ["fs:bound drive/x.txt"]
    ((key, reason),) = away.skipped
    assert reason.startswith("root-unavailable: ") and "unmounted" in reason


def test_a_same_size_edit_with_its_date_set_back_is_seen_and_a_chmod_changes_nothing(tmp_path, fabric_home):
    """guards against: a file rewritten with bytes of the same size and its modification time put
    back (`cp -p`, `rsync -t`, `tar x`, `touch -d`) passing the (mtime, size) prescreen for ever, its
    old text served and its citations stale; and a change of the inode alone (chmod) re-parsing."""
    import time

    from fabric_assets.sources.scan import scan

    src = tmp_path / "notes"
    src.mkdir()
    (src / "c.txt").write_text("charlieunique is here\n")
    (src / "k.txt").write_text("kept as it is\n")
    fabric_home.catalog.register_root(src)
    assert sorted(scan(fabric_home).new) == ["fs:notes/c.txt", "fs:notes/k.txt"]
    time.sleep(0.01)  # the inode change lands after the last scan began, whatever the clock's grain
    before = os.stat(src / "c.txt")
    (src / "c.txt").write_text("charlieswaped is here\n")  # same size
    os.utime(src / "c.txt", ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(src / "c.txt")
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    os.chmod(src / "k.txt", 0o600)  # the inode changes, the bytes do not
    report = scan(fabric_home)
    assert report.changed == ["fs:notes/c.txt"] and report.touched == [] and report.new == []
    assert scan(fabric_home).changed == []  # once seen, the next scan trusts (mtime, size) again


@pytest.mark.parametrize("swap", ["symlink", "folder"])
def test_a_folder_swapped_during_the_scan_is_not_walked_and_nothing_in_it_is_lost(tmp_path, fabric_home,
                                                                                  monkeypatch, swap):
    """guards against (hostile trial 7, 2026-12-05): a subfolder swapped for a symbolic link (or
    another folder) while the scan hashes other files being listed by its path, so the link was
    followed and a folder outside the root ingested and served; and that folder's own sources
    being taken as deleted."""
    import hashlib

    from fabric_assets.sources.scan import scan

    root = tmp_path / "docs"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    (root / "a" / "ok.txt").write_text("harmless\n")
    (root / "b" / "f.txt").write_text("first\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "ok.txt").write_text("TOPSECRET payroll numbers\n")  # the name the attacker knows
    fabric_home.catalog.register_root(root)
    assert sorted(scan(fabric_home).new) == ["fs:docs/a/ok.txt", "fs:docs/b/f.txt"]

    store = fabric_home.artifacts
    real_put = store.put_file

    def put_then_swap(path, *args, **kwargs):  # `b` is walked before `a`: swap `a` while b/f.txt is read
        out = real_put(path, *args, **kwargs)
        if not (root / "a.real").exists():
            (root / "a").rename(root / "a.real")
            if swap == "symlink":
                (root / "a").symlink_to(outside, target_is_directory=True)
            else:
                outside.rename(root / "a")
        return out

    monkeypatch.setattr(store, "put_file", put_then_swap)
    (root / "b" / "f.txt").write_text("second\n")
    report = scan(fabric_home)
    assert report.changed == ["fs:docs/b/f.txt"] and report.new == [] and report.deleted == []
    assert [(k, r.split(":")[0]) for k, r in report.skipped] == [("fs:docs/a", "unreadable-folder")]
    assert fabric_home.catalog.source("fs:docs/a/ok.txt").source_hash == hashlib.sha256(b"harmless\n").hexdigest()


def test_a_file_opened_is_the_file_listed_or_nothing_is_stored(tmp_path, fabric_home):
    """guards against: a file opened by its path after a folder above it was swapped, its bytes
    stored as the listed file's."""
    from fabric_resources.artifact_store import FileReplaced, file_digest

    listed, other = tmp_path / "listed.txt", tmp_path / "other.txt"
    listed.write_text("listed\n")
    other.write_text("other\n")
    ident = (os.stat(listed).st_dev, os.stat(listed).st_ino)
    assert file_digest(listed, ident) is not None and file_digest(other, ident) is None
    with pytest.raises(FileReplaced):
        fabric_home.artifacts.put_file(other, 1000, ident)
    assert fabric_home.artifacts.put_file(listed, 1000, ident).size == len("listed\n")
