"""Lineage audit over real Dagster runs: two runs of the same partition, and the audit names the
one that wrote the rows each release pins (joined on the Lance version); each step's identity is
what the catalog, the manifest and the pinned Lance rows record; a pack audit covers every hit;
``audit_job`` runs in-process and its event log holds no document text."""

from __future__ import annotations

import json
import os

import dagster as dg
import pytest
from conftest import ingest
from typer.testing import CliRunner

from fabric_assets.cli import app
from fabric_assets.lifecycle.audit import AuditError, audit_citation
from fabric_assets.lifecycle.operator import force_reparse
from fabric_assets.lifecycle.rebuild import run_marked
from fabric_query import Fabric
from fabric_resources.home import FabricHome

LIGHTHOUSE = "The lighthouse keeper climbed the spiral stairs every evening.\n"


def test_audit_names_the_one_run_that_wrote_the_pinned_rows(tmp_path, fabric_home):
    """guards against: an audit that lists every run of the partition and cannot say which one
    wrote the rows a release pins (the old notebook's answer)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(LIGHTHOUSE)
    first_runs = ingest(src, fabric_home).run_ids
    c1 = Fabric(fabric_home.root).search("lighthouse keeper").results[0].citation
    force_reparse(fabric_home, "fs:src/light.txt")
    second = run_marked(FabricHome(fabric_home.root))
    assert second.failed_runs == [] and second.run_ids
    c2 = Fabric(fabric_home.root).search("lighthouse keeper").results[0].citation
    assert c2.parse_id == c1.parse_id and c2.release_id != c1.release_id  # same partition, two runs

    home = FabricHome(fabric_home.root)
    os.environ["DAGSTER_HOME"] = str(home.layout.dagster_home)
    with dg.DagsterInstance.from_config(str(home.layout.dagster_home)) as instance:
        wrote = {r.run_id for r in instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("chunks"), asset_partitions=[c1.parse_id]),
            limit=100).records}
        assert len(wrote) == 2  # both runs materialized the partition
        a1, a2 = audit_citation(home, c1, instance), audit_citation(home, c2, instance)
        assert a1.source.source_hash == home.catalog.parse_run(c1.parse_id).source_hash and a1.parser.name
        for audit, expected in ((a1, set(first_runs)), (a2, set(second.run_ids))):
            chunks = next(w for w in audit.writers if w.table == "chunks")
            assert chunks.run_id in expected and chunks.run_id in wrote
            assert chunks.written_version <= chunks.pinned_version
            assert instance.get_run_by_id(chunks.run_id).status == dg.DagsterRunStatus.SUCCESS
        assert {w.run_id for w in a1.writers if w.table == "chunks"} != {w.run_id for w in a2.writers
                                                                           if w.table == "chunks"}
        with pytest.raises(AuditError, match="not in the catalog"):
            audit_citation(home, c1.model_copy(update={"release_id": 999}), instance)
    out = CliRunner().invoke(app, ["audit", c1.model_dump_json(), "--json", "--home", str(home.root)])
    assert out.exit_code == 0, out.output
    (cli,) = json.loads(out.output)
    assert {w["table"]: w["run_id"] for w in cli["writers"]} == {w.table: w.run_id for w in a1.writers}
    # Every cited table's pinned rows have a writer, and it is a run of the right release's ingest.
    for audit, expected in ((a1, set(first_runs)), (a2, set(second.run_ids))):
        assert {w.table for w in audit.writers} >= {"units", "chunks", "lexical_documents", "chunk_vectors"}
        assert all(w.run_id in expected for w in audit.writers if w.table in ("chunks", "lexical_documents"))


HARBOUR = "The harbour master counted the herring boats at dawn.\n"
#: Distinctive words of the corpus: none may reach the audit run's event log.
CORPUS_WORDS = ("lighthouse", "spiral", "stairs", "harbour", "herring", "dawn", "light.txt", "harbour.txt")


def _pack(home: FabricHome):
    pack = Fabric(home.root).search("keeper harbour")
    assert len(pack.results) >= 2 and {h.citation.source_key for h in pack.results} == {
        "fs:src/light.txt", "fs:src/harbour.txt"}
    return pack


def test_each_step_identity_is_what_is_recorded_and_a_pack_audit_covers_every_hit(tmp_path, fabric_home):
    """guards against: an audit that names only the parser (no source size/mtime/path, chunker,
    embedding model, annotation producer); one that reports the current code's identities instead
    of the recorded ones; a pack audit that audits only the first hit."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(LIGHTHOUSE)
    (src / "harbour.txt").write_text(HARBOUR)
    ingest(src, fabric_home)
    home = FabricHome(fabric_home.root)
    pack = _pack(home)
    release = home.catalog.release(pack.release_id)
    pack_file = tmp_path / "pack.json"
    pack_file.write_text(pack.model_dump_json())

    runner = CliRunner()
    from_file = runner.invoke(app, ["audit", str(pack_file), "--json", "--home", str(home.root)])
    from_stdin = runner.invoke(app, ["audit", "-", "--json", "--home", str(home.root)], input=pack.model_dump_json())
    assert from_file.exit_code == 0 and from_stdin.exit_code == 0, from_file.output + from_stdin.output
    audits = json.loads(from_file.output)
    assert audits == json.loads(from_stdin.output)
    assert [a["chunk_id"] for a in audits] == [h.chunk_id for h in pack.results]  # every hit, in rank order
    # A hit given inline (its JSON is no file name, and too long for one) is audited, not a crash.
    inline = runner.invoke(app, ["audit", pack.results[1].model_dump_json(), "--json", "--home", str(home.root)])
    assert inline.exit_code == 0, inline.output
    assert json.loads(inline.output) == [audits[1]]

    tables = release.manifest["tables"]
    for hit, audit in zip(pack.results, audits):
        c = hit.citation
        entry, run = release.manifest["sources"][c.source_key], home.catalog.parse_run(c.parse_id)
        acquired = [a for a in home.catalog.acquisitions(c.source_key) if a["source_hash"] == c.source_hash]
        assert audit["source"] == {"source_hash": c.source_hash, "path": str(src / c.source_key.split("/")[-1]),
                                   "size": entry["size"], "mtime_ns": entry["mtime_ns"],
                                   "media_type": entry["media_type"]}
        assert (audit["source"]["size"], audit["source"]["mtime_ns"]) in {(a["size"], a["mtime_ns"]) for a in acquired}
        assert audit["parser"] == {"name": run.parser_name, "version": run.parser_version,
                                   "config_hash": run.parser_config_hash, "language": run.language}
        chunk = home.tables.read("chunks", parse_ids=[c.parse_id], version=tables["chunks"]).to_pylist()
        (row,) = [r for r in chunk if r["chunk_id"] == c.chunk_id]
        assert audit["chunk"] == {"chunker": row["chunker"], "token_count": row["token_count"],
                                  "text_hash": row["text_hash"], "text_hash_matches": True}
        vectors = home.tables.read("chunk_vectors", parse_ids=[c.parse_id], version=tables["chunk_vectors"])
        (model,) = [m for cid, m in zip(vectors.column("chunk_id").to_pylist(), vectors.column("model").to_pylist())
                    if cid == c.chunk_id]
        assert audit["embeddings"] == [{"table": "chunk_vectors", "model": model}]
        assert audit["annotations"] == []  # annotation is off: the CLI says "none"
    text = runner.invoke(app, ["audit", str(pack_file), "--home", str(home.root)])
    assert text.exit_code == 0 and text.output.count("annotations: none") == len(pack.results)

    # Mutation: the audit reads the recorded parser version, not the parser's code.
    cited = pack.results[0].citation
    with home.catalog.transaction(immediate=True) as con:
        con.execute("UPDATE parse_runs SET parser_version = ? WHERE parse_id = ?", ("0.0-recorded", cited.parse_id))
    os.environ["DAGSTER_HOME"] = str(home.layout.dagster_home)
    with dg.DagsterInstance.from_config(str(home.layout.dagster_home)) as instance:
        assert audit_citation(home, cited, instance).parser.version == "0.0-recorded"
        # A citation whose text hash is not the pinned chunk's is shown as such, not hidden.
        forged = cited.model_copy(update={"text_hash": "0" * 64})
        assert audit_citation(home, forged, instance).chunk.text_hash_matches is False
        with pytest.raises(AuditError, match="pins no chunk"):
            audit_citation(home, cited.model_copy(update={"chunk_id": "f" * 32}), instance)
    bad = runner.invoke(app, ["audit", '{"results": [{"rank": 1}]}', "--home", str(home.root)])
    assert bad.exit_code == 2 and "not a citation or pack" in bad.output


def _audit_job(home: FabricHome, config: dict) -> dg.ExecuteInProcessResult:
    from fabric_assets.definitions import build_definitions

    os.environ["DAGSTER_HOME"] = str(home.layout.dagster_home)
    job = build_definitions(home.config).resolve_job_def("audit_job")
    return job.execute_in_process(instance=dg.DagsterInstance.get(), raise_on_error=False, run_config={
        "ops": {"audit_op": {"config": config}}, "resources": {"fabric": {"config": {"home": str(home.root)}}}})


def test_audit_job_runs_in_process_and_its_event_log_holds_no_document_text(tmp_path, fabric_home):
    """guards against: an audit only the CLI can run (no Launchpad job); lineage metadata that
    carries a passage's text, a source key or a path into the event log, which is never purged."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(LIGHTHOUSE)
    (src / "harbour.txt").write_text(HARBOUR)
    ingest(src, fabric_home)
    home = FabricHome(fabric_home.root)
    pack = _pack(home)
    pack_file = tmp_path / "pack.json"
    pack_file.write_text(pack.model_dump_json())
    by_pack = _audit_job(home, {"pack_path": str(pack_file)})
    by_chunks = _audit_job(home, {"chunk_ids": [h.chunk_id for h in pack.results]})
    assert by_pack.success and by_chunks.success
    expected = audit_citation(home, pack.results[0].citation, dg.DagsterInstance.get())
    for result in (by_pack, by_chunks):
        (output,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
        meta = {k: v.value for k, v in output.event_specific_data.metadata.items()}
        assert meta["passages"] == len(pack.results) and meta["writer_runs"] >= 1
        lineage = meta["lineage"]
        assert [p["chunk_id"] for p in lineage] == [h.chunk_id for h in pack.results]
        assert lineage[0]["writers"]["chunks"]["run_id"] == next(w.run_id for w in expected.writers
                                                                 if w.table == "chunks")
        assert lineage[0]["parser_config_hash"] == expected.parser.config_hash
        logged = json.dumps([e.to_json() if hasattr(e, "to_json") else str(e) for e in
                             dg.DagsterInstance.get().all_logs(result.run_id)]).lower()
        logged += json.dumps(dg.DagsterInstance.get().get_run_by_id(result.run_id).run_config).lower()
        assert meta["lineage"][0]["chunk_text_hash"] in logged  # the metadata did reach the log
        assert [w for w in CORPUS_WORDS if w in logged] == []
    # Exactly one of pack_path and chunk_ids; an unknown chunk fails the run with the reason.
    assert not _audit_job(home, {}).success
    failed = _audit_job(home, {"chunk_ids": ["f" * 32]})
    assert not failed.success and "pins no chunk" in str(failed.all_events)
    # A pack citing a source the release does not cite: the failure names no source key either.
    forged = json.loads(pack.model_dump_json())
    forged["results"][0]["citation"]["source_key"] = "fs:src/herring-secret.txt"
    pack_file.write_text(json.dumps(forged))
    refused = _audit_job(home, {"pack_path": str(pack_file)})
    logged = json.dumps([str(e) for e in dg.DagsterInstance.get().all_logs(refused.run_id)]).lower()
    assert not refused.success and "does not cite the passage's source" in logged and "herring" not in logged


def test_audit_job_refuses_a_pack_path_that_is_no_regular_file_and_a_release_id_past_64_bits(tmp_path, fabric_home):
    """guards against: ``audit_job`` reading whatever ``pack_path`` names, as the CLI does not
    (``/dev/zero`` filled the run's memory, a FIFO nobody writes to held the run for good), and its
    Launchpad config failing with a Python traceback where the reason belongs (a ``release_id`` past
    64 bits: SQLite's ``OverflowError``; a pack nested too deep to decode: ``RecursionError``)
    (hostile trial 10b). Each fails the run with one line, as a refusal."""
    import threading

    from fabric_assets.ingest import ingest as run_ingest
    from fabric_resources.dagster_resources import FAKE_MODELS  # which model embeds is not what this is about

    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(LIGHTHOUSE)
    os.environ["DAGSTER_HOME"] = str(fabric_home.layout.dagster_home)
    assert run_ingest(src, fabric_home, models=FAKE_MODELS).complete

    def refusal(config: dict) -> str:
        result = _audit_job(fabric_home, config)
        (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
        error = failure.event_specific_data.error
        assert error.cls_name == "Failure", error.message  # a refusal, not a traceback
        return error.message

    fifo = tmp_path / "pack.fifo"
    os.mkfifo(fifo)
    stop = threading.Event()

    def writer() -> None:  # what a reader of the FIFO would get: a pack, so a read does not hang the test
        while not stop.wait(0.05):
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # no reader yet
                continue
            os.write(fd, b"{}")
            os.close(fd)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert "pack_path is not a regular file" in refusal({"pack_path": str(fifo)})
    finally:
        stop.set()
        thread.join()
    assert "pack_path is not a regular file" in refusal({"pack_path": "/dev/zero"})
    nested = tmp_path / "nested.json"
    nested.write_text("[" * 200_000 + "]" * 200_000)
    assert "cannot read pack_path: RecursionError" in refusal({"pack_path": str(nested)})
    assert "release 9223372036854775808 is not in the catalog" in refusal({"release_id": 2 ** 63,
                                                                            "chunk_ids": ["f" * 32]})
    assert not fabric_home.catalog.has_release(-(2 ** 70))


def test_annotation_lineage_is_the_recorded_producer_of_the_overlapping_annotations(tmp_path, fabric_home):
    """guards against: an audit that says nothing of the prompt/LLM behind a chunk's annotations,
    or names the configured model for annotations another producer made."""
    from fake_openai_server import FakeChatServer

    one = "Lovelace wrote long notes on the engine.\n\nThe notes described loops and Bernoulli numbers.\n"
    src = tmp_path / "src"
    src.mkdir()
    (src / "one.txt").write_text(one)

    def configure(base_url: str, model: str) -> None:
        (fabric_home.root / "config.json").write_text(json.dumps({"annotation": {
            "enabled": True, "call_retries": 1, "endpoint": {"base_url": base_url, "model": model, "timeout_s": 10}}}))

    with FakeChatServer() as srv:
        configure(srv.base_url, "fake-model")
        summary = ingest(src, FabricHome(fabric_home.root))
        assert summary.annotation_run_ids and summary.annotation_failed_runs == []
        home = FabricHome(fabric_home.root)
        cited = Fabric(home.root).search("Lovelace notes").results[0].citation
        release = home.catalog.release(cited.release_id)
        os.environ["DAGSTER_HOME"] = str(home.layout.dagster_home)
        with dg.DagsterInstance.from_config(str(home.layout.dagster_home)) as instance:
            audit = audit_citation(home, cited, instance)
        # What the pinned rows say: annotations whose support overlaps one of the chunk's fragments.
        tables = release.manifest["tables"]
        (chunk,) = [r for r in home.tables.read("chunks", parse_ids=[cited.parse_id], version=tables["chunks"]
                                                ).to_pylist() if r["chunk_id"] == cited.chunk_id]
        rows = home.tables.read("annotations", parse_ids=[cited.parse_id], version=tables["annotations"]).to_pylist()
        overlapping = [a for a in rows if any(
            f["unit_id"] == s["unit_id"] and f["start_char"] < max(s["end_char"], s["start_char"] + 1)
            and f["end_char"] > s["start_char"] for f in chunk["fragments"] for s in a["support"])]
        assert overlapping
        (lineage,) = audit.annotations
        assert lineage.producer == {a["producer"] for a in overlapping}.pop()
        assert lineage.annotations == len(overlapping)
        assert set(lineage.memo_keys) == {a["memo_key"] for a in overlapping}
        assert lineage.configured_model == "fake-model"
        assert any(w.table == "annotations" and w.run_id in summary.annotation_run_ids for w in audit.writers)

        configure(srv.base_url, "another-model")  # the config moves on; the rows' producer does not
        home = FabricHome(fabric_home.root)
        with dg.DagsterInstance.from_config(str(home.layout.dagster_home)) as instance:
            (moved,) = audit_citation(home, cited, instance).annotations
        assert moved.producer == lineage.producer and moved.configured_model is None


def test_a_writer_whose_run_record_is_gone_is_flagged_not_vouched_for(tmp_path, fabric_home):
    """guards against: with the run storage (``runs.db``) deleted, the audit naming the run IDs it
    read from the event log exactly as it names runs the instance still holds (hostile trial 8a)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(LIGHTHOUSE)
    ingest(src, fabric_home)
    citation = Fabric(fabric_home.root).search("lighthouse keeper").results[0].citation
    home = FabricHome(fabric_home.root)
    with dg.DagsterInstance.from_config(str(home.layout.dagster_home)) as instance:
        before = audit_citation(home, citation, instance).writers
    assert before and all(w.run_id and w.run_recorded is True for w in before)
    (runs_db,) = home.layout.dagster_home.rglob("runs.db")
    runs_db.unlink()
    with dg.DagsterInstance.from_config(str(home.layout.dagster_home)) as instance:
        after = audit_citation(home, citation, instance).writers
    assert [(w.table, w.run_id) for w in after] == [(w.table, w.run_id) for w in before]
    assert all(w.run_recorded is False for w in after)
    out = CliRunner().invoke(app, ["audit", citation.model_dump_json(), "--home", str(home.root)])
    assert out.exit_code == 0, out.output
    assert " ".join(out.output.split()).count("NO RUN RECORD") == len(after)


def test_audit_prints_a_file_name_with_bidirectional_overrides_escaped(tmp_path, fabric_home):
    """guards against (hostile trial 13a): ``fabric audit`` printing the source's path raw, so a file
    named ``invoice\u202etxt.exe`` showed as ``invoiceexe.txt`` on the line that vouches for the
    cited bytes, while ``search`` beside it printed ``\u202e`` (the source key was escaped, its path
    was not)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "invoice\u202etxt.md").write_text(LIGHTHOUSE)
    ingest(src, fabric_home)
    citation = Fabric(fabric_home.root).search("lighthouse keeper").results[0].citation
    out = CliRunner().invoke(app, ["audit", citation.model_dump_json(), "--home", str(fabric_home.root)])
    assert out.exit_code == 0, out.output
    assert "\u202e" not in out.output
    text = out.output.replace("\n", "")  # the console wraps long lines
    assert "invoice\\u202etxt.md," in text and "fs:src/invoice\\u202etxt.md" in text
