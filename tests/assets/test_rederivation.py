"""A configuration change re-derives exactly the affected projections of every source and
activates the result; a failure shows in ``fabric status`` with its reason (issue 13, item 4).

Parser settings enter the parse ID, so a parser change re-parses the sources that parser handles
(and no other). Chunker settings enter chunk IDs, so a chunker change re-chunks the stored units
and recomputes every projection made from chunks, without re-parsing.
"""

from __future__ import annotations

import json
import os

import pyarrow.compute as pc
from conftest import ingest
from test_parsing_epub import build_epub, xhtml

from fabric_query import Fabric
from fabric_resources.lexical_health import lexical_health

SHORT = "The lighthouse keeper lit the lamp.\n"
LONG = ("Storms came from the west and the keeper logged every tide. " * 6 + "\n\n") * 2


def _configure(home, config: dict) -> None:
    home.layout.config_file.write_text(json.dumps(config))
    home.__dict__.pop("config", None)  # FabricHome caches its config


def _active(home) -> dict[str, str]:
    return {k: m["parse_id"] for k, m in home.catalog.current_release().manifest["sources"].items()}


def test_a_parser_setting_change_reparses_its_sources_and_a_failure_shows_in_status(tmp_path, fabric_home):
    """guards against: a changed parser cap re-parsing nothing (the scan only hashes files whose
    mtime or size changed), or, after ``touch``, the new parse running while the old one stays
    active and status shows nothing; and against re-parsing sources of another parser."""
    src = tmp_path / "docs"
    src.mkdir()
    (src / "short.txt").write_text(SHORT)
    (src / "long.txt").write_text(LONG)
    (src / "book.epub").write_bytes(build_epub({"c1.xhtml": xhtml("<p>The harbour master rang the bell.</p>")}))
    ingest(src, fabric_home)
    before = _active(fabric_home)
    book_run = fabric_home.catalog.parse_run(before["fs:docs/book.epub"])

    # Below long.txt's size: every text source has a new parse ID, and long.txt's fails.
    _configure(fabric_home, {"parsers": {"text": {"max_bytes": len(LONG.encode()) - 1}}})
    os.utime(src / "short.txt")  # a touched file takes the same path as an untouched one
    summary = ingest(src, fabric_home)
    assert sorted(summary.scan.reparsed + summary.scan.touched) == ["fs:docs/long.txt", "fs:docs/short.txt"]
    after = _active(fabric_home)
    assert after["fs:docs/short.txt"] != before["fs:docs/short.txt"]
    assert fabric_home.catalog.parse_run(after["fs:docs/short.txt"]).status == "ready"
    # The failed re-parse leaves the old parse active and says why.
    assert after["fs:docs/long.txt"] == before["fs:docs/long.txt"]
    status = Fabric(fabric_home.root).status()
    failed = {p.sources: p for p in status.failed}
    assert failed[("fs:docs/long.txt",)].reason == "too-large", status.failed
    assert any(h.citation.source_key == "fs:docs/long.txt" for h in Fabric(fabric_home.root).search("storms tide").results)
    # Another parser's settings did not change: the EPUB was not parsed again.
    assert after["fs:docs/book.epub"] == before["fs:docs/book.epub"]
    assert fabric_home.catalog.parse_run(before["fs:docs/book.epub"]) == book_run

    # A cap that admits it: new parse IDs again, both active, no failure left to report.
    _configure(fabric_home, {"parsers": {"text": {"max_bytes": 1_000_000}}})
    ingest(src, fabric_home)
    final = _active(fabric_home)
    assert final["fs:docs/long.txt"] not in (before["fs:docs/long.txt"], after["fs:docs/long.txt"])
    assert final["fs:docs/short.txt"] not in (before["fs:docs/short.txt"], after["fs:docs/short.txt"])
    assert Fabric(fabric_home.root).status().failed == ()


EN = "\n\n".join(
    "The keeper of the lighthouse climbed the iron stair every evening, trimmed the wick, polished "
    f"the great lens and wrote the state of the tide, the wind and the sky into log book number {i}."
    for i in range(4)) + "\n"
JA = "灯台守は毎晩鉄の階段を上り、芯を切りそろえ、大きなレンズを磨き、潮と風と空の様子を日誌に書き込んだ。" * 3 + "\n"


def _pinned(home, table: str, release, parse_ids, columns):
    return home.tables.read_active(table, release.manifest["tables"].get(table), parse_ids, columns)


def test_a_chunker_change_rechunks_without_reparsing_and_publishes_the_new_chunks(tmp_path, fabric_home):
    """guards against: a changed chunk cap re-chunking nothing; re-chunking by re-parsing (units
    rewritten); a re-chunked active parse (same parse ID) whose new chunks, vectors, windows or
    lexical documents never reach a release or the serving index."""
    src = tmp_path / "docs"
    src.mkdir()
    (src / "keeper.txt").write_text(EN)
    (src / "keeper-ja.txt").write_text(JA, encoding="utf-8")
    ingest(src, fabric_home)
    home = fabric_home
    active = _active(home)
    parses = set(active.values())
    versions = {t: home.tables.version(t) for t in ("units", "relationships")}
    runs_before = {r.parse_id: r.created_at for r in home.catalog.parse_runs()}
    old_ids = set(_pinned(home, "chunks", home.catalog.current_release(), parses, ["chunk_id"]).column("chunk_id").to_pylist())

    _configure(home, {"chunking": {"max_tokens": 24, "multilingual_max_tokens": 32}})
    summary = ingest(src, home)
    assert sorted(summary.rechunked) == sorted(parses) and summary.rechunk_run_ids and not summary.failed_runs
    assert summary.run_ids == [] and summary.reproject_run_ids == []  # no parse run, no separate re-embedding
    # Not re-parsed: units and relationships were not rewritten, the parse runs are the same.
    assert {t: home.tables.version(t) for t in versions} == versions
    assert {r.parse_id: r.created_at for r in home.catalog.parse_runs()} == runs_before
    assert _active(home) == active
    assert {r.status for r in home.catalog.parse_runs(parses)} == {"ready"}

    release = home.catalog.current_release()
    chunks = _pinned(home, "chunks", release, parses, ["parse_id", "chunk_id", "chunker", "token_count"])
    new_ids = set(chunks.column("chunk_id").to_pylist())
    assert new_ids and not new_ids & old_ids and len(new_ids) > len(old_ids)
    for pid, cap in ((active["fs:docs/keeper.txt"], 24), (active["fs:docs/keeper-ja.txt"], 32)):
        mine = chunks.filter(pc.equal(chunks.column("parse_id"), pid))
        assert set(mine.column("chunker").to_pylist()) == {mine.column("chunker")[0].as_py()}
        assert mine.column("chunker")[0].as_py().endswith(f":max{cap}")
        assert max(mine.column("token_count").to_pylist()) <= cap
    # Everything made from chunks follows them, in the tables the release pins and in the index.
    vectors = set()
    for table in ("chunk_vectors", "chunk_vectors_multilingual"):
        vectors |= set(_pinned(home, table, release, parses, ["chunk_id"]).column("chunk_id").to_pylist())
    assert vectors == new_ids
    assert set(_pinned(home, "lexical_documents", release, parses, ["chunk_id"]).column("chunk_id").to_pylist()) == new_ids
    windows = _pinned(home, "context_windows", release, parses, ["chunk_ids"]).column("chunk_ids").to_pylist()
    assert {c for ids in windows for c in ids} == new_ids
    report = lexical_health(home)
    # One index document per chunk and one per context window (the word channel scores windows).
    assert report.healthy and report.actual_documents == len(new_ids) + len(windows), report
    fabric = Fabric(home.root)
    for q in ("lighthouse keeper", "灯台守"):
        pack = fabric.search(q)
        assert pack.results and {h.chunk_id for h in pack.results} <= new_ids, q
        assert pack.skipped_channels == {}, q

    # Settled: the next ingest neither re-chunks nor publishes.
    again = ingest(src, home)
    assert again.rechunked == [] and again.rechunk_run_ids == []
    assert home.catalog.current_release().release_id == release.release_id


def test_an_interrupted_rechunk_resumes_without_reparsing_and_a_failing_one_is_held(tmp_path, fabric_home,
                                                                                    monkeypatch):
    """guards against: a killed re-chunk leaving an active parse with half-rewritten rows in a
    release, or being finished by a full re-parse; a re-chunk that fails its gate staying silent."""
    import fabric_assets.chunks.assets as chunk_assets
    import fabric_assets.ingest as ingest_module

    src = tmp_path / "docs"
    src.mkdir()
    (src / "keeper.txt").write_text(EN)
    ingest(src, fabric_home)
    home = fabric_home
    (key, pid), = _active(home).items()
    release = home.catalog.current_release()
    units_version = home.tables.version("units")

    real = ingest_module._execute

    def killed(job, *args, **kwargs):
        if job.name == "rechunk_job":
            raise KeyboardInterrupt("killed during the re-chunk")
        return real(job, *args, **kwargs)

    _configure(home, {"chunking": {"max_tokens": 24}})
    monkeypatch.setattr(ingest_module, "_execute", killed)
    try:
        ingest(src, home)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the re-chunk was not reached")
    monkeypatch.setattr(ingest_module, "_execute", real)
    status = Fabric(home.root).status()
    assert [(p.parse_id, p.reason) for p in status.unfinished] == [(pid, "rechunk")]
    assert home.catalog.current_release().release_id == release.release_id  # still served as it was

    summary = ingest(src, home)
    assert summary.rechunked == [pid] and summary.run_ids == [] and not summary.failed_runs
    assert home.tables.version("units") == units_version
    assert _active(home) == {key: pid} and Fabric(home.root).status().unfinished == ()
    chunkers = _pinned(home, "chunks", home.catalog.current_release(), {pid}, ["chunker"]).column("chunker")
    assert {c.endswith(":max24") for c in chunkers.to_pylist()} == {True}

    def failing(table, column):
        return {"passed": False, "detail": "forced by the test"}

    _configure(home, {"chunking": {"max_tokens": 32}})
    real_ids_unique = chunk_assets.ids_unique
    monkeypatch.setattr(chunk_assets, "ids_unique", failing)
    ingest(src, home)
    held = {p.parse_id: p for p in Fabric(home.root).status().held}
    assert "chunk_ids_are_unique" in held[pid].reason and held[pid].sources == (key,)
    # Its rows were rewritten in place and failed: no release serves them.
    assert key not in _active(home)
    assert lexical_health(home).healthy

    # Other settings give the held parse another chance; it passes and is served again.
    monkeypatch.setattr(chunk_assets, "ids_unique", real_ids_unique)
    _configure(home, {"chunking": {"max_tokens": 24}})
    summary = ingest(src, home)
    assert summary.rechunked == [pid] and _active(home) == {key: pid}
    assert Fabric(home.root).status().held == ()


def test_a_rederivation_launched_from_the_ui_that_fails_its_gate_is_held_not_published(tmp_path, fabric_home,
                                                                                       monkeypatch):
    """guards against: a re-derivation run outside ``fabric ingest`` (a partition of ``rechunk_job``
    launched from the UI, or only the ``chunks`` asset materialized for one partition) whose new
    verdict fails leaving the parse ``ready``, so the next activation published its failing rows:
    only ``fabric ingest``'s own re-chunk sent a parse back to the gate (hostile trial 10b). Now a
    gate verdict that changes outcome sends a ready or held parse back to ``parsed``; the next
    activation holds it or makes it ready again. An operator's acceptance of a held parse survives
    a re-run whose verdicts fail as they did when it was accepted."""
    import dagster as dg

    import fabric_assets.chunks.assets as chunk_assets
    from fabric_assets.activation.activate import activate
    from fabric_assets.ingest import _run_config, ingest as run_ingest, job
    from fabric_assets.lifecycle.operator import accept_held
    from fabric_resources.dagster_resources import FAKE_MODELS  # which model embeds is not what this is about

    src = tmp_path / "docs"
    src.mkdir()
    (src / "keeper.txt").write_text(EN)
    (src / "short.txt").write_text(SHORT)
    os.environ["DAGSTER_HOME"] = str(fabric_home.layout.dagster_home)
    assert run_ingest(src, fabric_home, models=FAKE_MODELS).complete
    home = fabric_home
    active = _active(home)
    keeper, short = active["fs:docs/keeper.txt"], active["fs:docs/short.txt"]
    rechunk_job = job(home, "rechunk_job", FAKE_MODELS)

    def launch(partition: str, *assets: str) -> None:  # one partition, as the UI's launchpad runs it
        result = rechunk_job.execute_in_process(
            instance=dg.DagsterInstance.get(), partition_key=partition, run_config=_run_config(home),
            asset_selection=[dg.AssetKey(a) for a in assets] or None)
        assert result.success

    def status(pid: str) -> tuple[str, str | None]:
        (run,) = home.catalog.parse_runs([pid])
        return run.status, run.reason

    real_ids_unique = chunk_assets.ids_unique
    monkeypatch.setattr(chunk_assets, "ids_unique", lambda table, column: {"passed": False, "detail": "forced"})
    launch(keeper)
    launch(short, "chunks")
    assert status(keeper) == status(short) == ("parsed", "regate")
    activate(home)
    assert status(keeper)[0] == status(short)[0] == "held"
    # Their rows were rewritten in place and failed: no release serves them.
    assert _active(home) == {}
    assert lexical_health(home).healthy

    # The same partition re-derived again, passing: ready and served again.
    monkeypatch.setattr(chunk_assets, "ids_unique", real_ids_unique)
    launch(keeper)
    activate(home)
    assert status(keeper)[0] == "ready" and _active(home) == {"fs:docs/keeper.txt": keeper}

    # Accepted as it is by an operator, then re-derived with the same failing verdict: still accepted.
    accept_held(home, short)
    monkeypatch.setattr(chunk_assets, "ids_unique", lambda table, column: {"passed": False, "detail": "forced"})
    launch(short, "chunks")
    activate(home)
    assert status(short) == ("ready", "accepted") and _active(home)["fs:docs/short.txt"] == short


def test_status_names_sources_an_older_parser_made_until_the_ingest_parses_them_again(tmp_path, fabric_home,
                                                                                      monkeypatch, capsys):
    """guards against: after an upgrade that changes a parser (or a ``parsers`` setting), `fabric
    status` saying nothing while every citation of those files resolves ``parser-changed``; naming
    sources of another parser; still naming them after the ingest that re-parsed them; and an agent
    learning the names of withheld sources from the list."""
    from dataclasses import replace

    from fabric_query.cli import print_status
    from fabric_query.server.client_view import without_withheld
    from fabric_resources.parsing import registry

    src = tmp_path / "docs"
    src.mkdir()
    (src / "short.txt").write_text(SHORT)
    (src / "long.txt").write_text(LONG)
    (src / "book.epub").write_bytes(build_epub({"c1.xhtml": xhtml("<p>The harbour master rang the bell.</p>")}))
    ingest(src, fabric_home)
    assert Fabric(fabric_home.root).status().outdated == ()

    # An upgrade that bumps the text parser's version, as every reader of the registry sees it.
    from fabric_assets.sources import scan

    text_spec = registry.parser_for("text/plain")
    bumped = replace(text_spec, version="99")
    parsers = tuple(bumped if s is text_spec else s for s in registry.PARSERS)
    monkeypatch.setattr(registry, "PARSERS", parsers)
    monkeypatch.setattr(scan, "PARSERS", parsers)
    for media_type in text_spec.media_types:
        monkeypatch.setitem(registry._BY_MEDIA_TYPE, media_type, bumped)
    status = Fabric(fabric_home.root).status()
    [outdated] = status.outdated
    assert (outdated.parser, outdated.parsed_with, outdated.current_parser, outdated.current_version,
            outdated.settings_changed) == (text_spec.name, text_spec.version, text_spec.name, "99", False)
    assert outdated.sources == ("fs:docs/long.txt", "fs:docs/short.txt")
    print_status(fabric_home.root, status)
    line = " ".join(capsys.readouterr().out.split())
    assert (f"outdated 2 source(s) parsed by {text_spec.name} {text_spec.version}, this Fabric's is "
            f"{text_spec.name} 99") in line and "parser-changed" in line, line
    hidden = without_withheld(status.model_dump(mode="json"), lambda k: k.endswith("long.txt"), {}, {})
    assert [o["sources"] for o in hidden["outdated"]] == [["fs:docs/short.txt"]]
    assert without_withheld(status.model_dump(mode="json"), lambda k: k.endswith(".txt"), {}, {})["outdated"] == []

    ingest(src, fabric_home)  # re-parses both under version 99
    assert Fabric(fabric_home.root).status().outdated == ()
    monkeypatch.undo()

    # A settings change alone is named as such; back on the shipped version, the files are outdated again.
    _configure(fabric_home, {"parsers": {"text": {"max_bytes": 1_000_000}}})
    [outdated] = Fabric(fabric_home.root).status().outdated
    assert (outdated.parsed_with, outdated.current_version, outdated.settings_changed) == ("99", text_spec.version,
                                                                                           False)
    ingest(src, fabric_home)
    assert Fabric(fabric_home.root).status().outdated == ()
    _configure(fabric_home, {"parsers": {"text": {"max_bytes": 2_000_000}}})
    [outdated] = Fabric(fabric_home.root).status().outdated
    assert outdated.settings_changed and outdated.sources == ("fs:docs/long.txt", "fs:docs/short.txt")


def test_a_new_chunker_version_rechunks_at_the_next_ingest_without_a_settings_change(tmp_path, fabric_home,
                                                                                    monkeypatch):
    """guards against (hostile trial 13c): an upgraded Fabric whose packing rule changed
    (``CHUNKER_VERSION``) re-chunking nothing, because the ingest compared only the chunking
    settings: the home kept chunks cut by the old rule for good, under chunk IDs the new Fabric
    would not give them."""
    from fabric_assets.chunking import fine_chunks

    src = tmp_path / "docs"
    src.mkdir()
    (src / "keeper.txt").write_text(EN)
    ingest(src, fabric_home)
    parses = set(_active(fabric_home).values())
    monkeypatch.setattr(fine_chunks, "CHUNKER_VERSION", "fine-test")
    monkeypatch.setattr("fabric_assets.chunks.assets.CHUNKER_VERSION", "fine-test")
    summary = ingest(src, fabric_home)
    assert sorted(summary.rechunked) == sorted(parses) and not summary.failed_runs
    chunks = _pinned(fabric_home, "chunks", fabric_home.catalog.current_release(), parses, ["chunker"])
    assert {c.split(":")[0] for c in chunks.column("chunker").to_pylist()} == {"fine-test"}


def test_an_upgrade_that_changes_a_parser_and_the_chunker_parses_again_once_and_rechunks_nothing_twice(
        tmp_path, fabric_home):
    """guards against: an ingest after a change of both a parser and the chunking (an upgrade moving
    a parser version and the chunker at once) re-parsing a file under the new chunker *and*
    re-chunking its old active parse, which the activation then drops: the upgrade's work doubled
    and the summary saying "re-chunked (not re-parsed)" of files it re-parsed; and against the
    settings being recorded as checked while an old parse stays active (its re-parse held)."""
    from fabric_assets.projections import CHUNKER_SETTINGS

    src = tmp_path / "docs"
    src.mkdir()
    (src / "keeper.txt").write_text(EN)
    (src / "book.epub").write_bytes(build_epub({"c1.xhtml": xhtml(f"<p>{EN}</p>")}))
    ingest(src, fabric_home)
    before = _active(fabric_home)
    _configure(fabric_home, {"parsers": {"text": {"max_bytes": 1_000_000}},
                             "chunking": {"max_tokens": 24, "multilingual_max_tokens": 32}})
    summary = ingest(src, fabric_home)
    after = _active(fabric_home)
    assert summary.scan.reparsed == ["fs:docs/keeper.txt"] and after["fs:docs/keeper.txt"] != before["fs:docs/keeper.txt"]
    # The text file was parsed again under the new chunker; only the EPUB (same parse) was re-chunked.
    assert summary.rechunked == [before["fs:docs/book.epub"]] and not summary.failed_runs
    release = fabric_home.catalog.current_release()
    for parse in after.values():
        chunks = _pinned(fabric_home, "chunks", release, [parse], ["token_count"])
        assert chunks.num_rows and max(chunks.column("token_count").to_pylist()) <= 32
    # The old parse was superseded, so the check is recorded clean only by the next ingest.
    again = ingest(src, fabric_home)
    assert again.rechunked == [] and fabric_home.catalog.state(CHUNKER_SETTINGS) is not None
    assert ingest(src, fabric_home).rechunked == []
