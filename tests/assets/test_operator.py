"""Operator actions over real Dagster runs: a held parse accepted (Dagster job) and discarded
(CLI), a failed parse retried (Dagster job), a forced re-parse (CLI) — each changes exactly what
it should."""

from __future__ import annotations

import os

import dagster as dg
from conftest import ingest
from typer.testing import CliRunner

from fabric_assets.cli import app
from fabric_assets.definitions import build_definitions
from fabric_assets.lifecycle.rebuild import run_marked
from fabric_query import Fabric
from fabric_resources.catalog import StatusUpdate
from fabric_resources.home import FabricHome

LIGHTHOUSE = "The lighthouse keeper climbed the spiral stairs every evening.\n"
HARBOUR = "The harbour master counted the herring boats at dawn.\n"
CANAL = "The canal lock keeper opened the gates for the barges.\n"
BREAD = "Sourdough bread needs flour, water and a patient baker.\n" + "Knead the dough.\n\n" * 40


def _job(home: FabricHome, name: str, op: str, config: dict) -> dg.ExecuteInProcessResult:
    os.environ["DAGSTER_HOME"] = str(home.layout.dagster_home)
    job = build_definitions(home.config).resolve_job_def(name)
    return job.execute_in_process(instance=dg.DagsterInstance.get(), raise_on_error=False, run_config={
        "ops": {op: {"config": config}}, "resources": {"fabric": {"config": {"home": str(home.root)}}}})


def _active(home: FabricHome, key: str) -> str | None:
    release = FabricHome(home.root).catalog.current_release()
    return (release.manifest["sources"].get(key) or {}).get("parse_id")


def _materializations(home: FabricHome, asset: str, partition: str) -> int:
    os.environ["DAGSTER_HOME"] = str(home.layout.dagster_home)
    return len(dg.DagsterInstance.get().fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition]), limit=1000).records)


def _hold_next_parse(monkeypatch):
    import fabric_assets.dense.assets as dense_assets

    real = dense_assets.vectors_finite_unit_norm
    monkeypatch.setattr(dense_assets, "vectors_finite_unit_norm",
                        lambda v: {"passed": False, "detail": "injected"} if v.shape[0] == 1 else real(v))


def test_a_held_parse_is_accepted_by_a_job_and_another_discarded_by_the_cli(tmp_path, fabric_home, monkeypatch):
    """guards against: a held parse that can be neither accepted nor discarded; accepting or
    discarding touching anything but that parse and its source's active parse."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(LIGHTHOUSE)
    (src / "bread.txt").write_text(BREAD)
    ingest(src, fabric_home)
    first = _active(fabric_home, "fs:src/light.txt")
    bread = _active(fabric_home, "fs:src/bread.txt")
    _hold_next_parse(monkeypatch)
    (src / "light.txt").write_text(HARBOUR)
    ingest(src, fabric_home)
    (held,) = Fabric(fabric_home.root).status().held
    assert _active(fabric_home, "fs:src/light.txt") == first

    bad = _job(fabric_home, "accept_held_job", "accept_op", {"parse_id": first})  # not held: refused
    assert not bad.success
    result = _job(fabric_home, "accept_held_job", "accept_op", {"parse_id": held.parse_id})
    assert result.success
    assert _active(fabric_home, "fs:src/light.txt") == held.parse_id
    assert _active(fabric_home, "fs:src/bread.txt") == bread
    assert Fabric(fabric_home.root).status().held == ()
    hit = Fabric(fabric_home.root).search("harbour master herring").results[0]
    assert hit.citation.source_key == "fs:src/light.txt" and "harbour" in hit.text

    (src / "light.txt").write_text(CANAL)
    ingest(src, fabric_home)
    (held2,) = Fabric(fabric_home.root).status().held
    out = CliRunner().invoke(app, ["parse", "discard", held2.parse_id, "--home", str(fabric_home.root)])
    assert out.exit_code == 0, out.output
    status = Fabric(fabric_home.root).status()
    assert status.held == () and [(p.parse_id, p.reason) for p in status.failed] == [(held2.parse_id, "discarded")]
    assert _active(fabric_home, "fs:src/light.txt") == held.parse_id  # the accepted one stays
    assert ingest(src, fabric_home).scan.parse_ids_to_run == []  # a discarded parse is not retried blindly


def test_a_failed_parse_is_retried_by_a_job_and_a_forced_reparse_runs_from_the_cli(tmp_path, fabric_home,
                                                                                    monkeypatch):
    """guards against: a failed parse that cannot be retried without changing its bytes; a
    forced re-parse that does not run, or runs more than that one parse."""
    import fabric_assets.parse.assets as parse_assets

    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(LIGHTHOUSE)
    (src / "bread.md").write_text("# Bread\n\n" + BREAD)
    real = parse_assets.parser_for
    monkeypatch.setattr(parse_assets, "parser_for", lambda m: None if m == "text/plain" else real(m))
    ingest(src, fabric_home)
    (failed,) = Fabric(fabric_home.root).status().failed
    assert failed.sources == ("fs:src/light.txt",) and failed.reason == "unsupported-media-type"
    monkeypatch.setattr(parse_assets, "parser_for", real)  # the transient fault is gone
    assert ingest(src, fabric_home).scan.parse_ids_to_run == []  # never retried blindly

    result = _job(fabric_home, "retry_failed_job", "retry_op", {"parse_ids": []})
    assert result.success
    assert FabricHome(fabric_home.root).catalog.parse_run(failed.parse_id).status == "pending"
    run_marked(FabricHome(fabric_home.root))
    assert Fabric(fabric_home.root).status().failed == ()
    assert _active(fabric_home, "fs:src/light.txt") == failed.parse_id
    assert Fabric(fabric_home.root).search("lighthouse keeper").results[0].citation.source_key == "fs:src/light.txt"

    md = _active(fabric_home, "fs:src/bread.md")
    before = {p: _materializations(fabric_home, "units", p) for p in (md, failed.parse_id)}
    out = CliRunner().invoke(app, ["parse", "reparse", "fs:src/bread.md", "--home", str(fabric_home.root)])
    assert out.exit_code == 0, out.output
    assert _materializations(fabric_home, "units", md) == before[md] + 1
    assert _materializations(fabric_home, "units", failed.parse_id) == before[failed.parse_id]
    assert _active(fabric_home, "fs:src/bread.md") == md
    assert Fabric(fabric_home.root).search("sourdough baker").results[0].citation.source_key == "fs:src/bread.md"


def test_a_run_whose_home_config_names_no_folder_fails_saying_so_and_makes_no_home(tmp_path, fabric_home):
    """guards against: a Launchpad run whose ``fabric`` resource names a mistyped home (activation,
    a parse partition, cleanup) opening it as a new home: an empty home made there (catalog, tables,
    Dagster folder) and the run a success with nothing done (hostile trial 10b). Now the run fails
    with one line naming the path, as a refusal (``dg.Failure``), and nothing is made there."""
    from fabric_assets.ingest import ingest as run_ingest
    from fabric_resources.dagster_resources import FAKE_MODELS  # which model embeds is not what this is about

    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(LIGHTHOUSE)
    os.environ["DAGSTER_HOME"] = str(fabric_home.layout.dagster_home)
    assert run_ingest(src, fabric_home, models=FAKE_MODELS).complete
    (pid,) = [s.parse_id for s in fabric_home.catalog.sources()]
    defs = build_definitions(fabric_home.config, FAKE_MODELS, str(fabric_home.root))
    for name, options in (("activation_job", {}), ("parse_job", {"partition_key": pid}), ("cleanup_job", {})):
        typo = tmp_path / f"hoem-{name}"
        result = defs.resolve_job_def(name).execute_in_process(
            instance=dg.DagsterInstance.get(), raise_on_error=False,
            run_config={"resources": {"fabric": {"config": {"home": str(typo)}}}}, **options)
        (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"][:1]
        error = failure.event_specific_data.error
        assert not result.success and f"no Fabric home at {typo}" in error.message, error.message
        assert failure.event_specific_data.user_failure_data is not None  # a refusal, not a crash
        assert not typo.exists()
    assert fabric_home.catalog.current_release().release_id == 1


def test_an_accepted_parse_stays_accepted_through_a_backfill_that_fails_the_same_verdicts(tmp_path, fabric_home,
                                                                                          monkeypatch):
    """guards against: a held parse an operator accepted going back to held, and its file out of
    every release, when a backfill of every partition from the UI re-parsed it (the units step sets
    a re-parsed parse ``parsed``; the gate then found the same failing verdicts and nothing said
    they were accepted) (hostile trial 10b). Now the acceptance is recorded with the verdicts it
    accepted: the same failures keep it ready; a verdict that newly fails holds it again."""
    import fabric_assets.chunks.assets as chunk_assets
    from fabric_assets.activation.activate import activate
    from fabric_assets.ingest import _run_config, ingest as run_ingest, job
    from fabric_assets.lifecycle.operator import accept_held
    from fabric_resources.dagster_resources import FAKE_MODELS  # which model embeds is not what this is about

    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(LIGHTHOUSE)
    os.environ["DAGSTER_HOME"] = str(fabric_home.layout.dagster_home)
    _hold_next_parse(monkeypatch)
    run_ingest(src, fabric_home, models=FAKE_MODELS)
    (held,) = Fabric(fabric_home.root).status().held
    accept_held(fabric_home, held.parse_id)
    assert _active(fabric_home, "fs:src/light.txt") == held.parse_id
    parse_job = job(fabric_home, "parse_job", FAKE_MODELS)

    def backfill() -> tuple[str, str | None]:  # the partition re-parsed as a backfill of parse_job runs it
        assert parse_job.execute_in_process(instance=dg.DagsterInstance.get(), partition_key=held.parse_id,
                                            run_config=_run_config(fabric_home)).success
        activate(fabric_home)
        (run,) = fabric_home.catalog.parse_runs([held.parse_id])
        return run.status, run.reason

    assert backfill() == ("ready", "accepted")
    assert _active(fabric_home, "fs:src/light.txt") == held.parse_id
    monkeypatch.setattr(chunk_assets, "ids_unique", lambda table, column: {"passed": False, "detail": "forced"})
    assert backfill() == ("held", "gate:chunk_ids_are_unique")
    assert _active(fabric_home, "fs:src/light.txt") is None


def test_a_forced_reparse_over_corrupt_stored_bytes_restores_them_or_refuses(tmp_path, fabric_home):
    """Property: a forced re-parse never takes a source out of search for stored bytes that cannot
    be read: bytes its file still holds exactly are stored again first and the re-parse passes;
    when no file holds them any more it is refused (exit 2, nothing changed, the source still
    served); a parse that already failed so is healed by ``parse retry`` (trial 12b).

    guards against: the re-parse reading the tampered artifact, failing ``artifact-unavailable``
    and leaving the file in no search, with neither ``parse retry`` nor ``fabric ingest`` bringing
    it back while the file on disk held exactly the recorded bytes."""
    import stat

    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(LIGHTHOUSE)
    (src / "harbour.txt").write_text(HARBOUR)
    ingest(src, fabric_home)
    key = "fs:src/light.txt"
    digest = FabricHome(fabric_home.root).catalog.source(key).source_hash
    artifact = fabric_home.artifacts.path_for(digest)

    def tamper() -> None:
        artifact.chmod(artifact.stat().st_mode | stat.S_IWUSR)
        data = bytearray(artifact.read_bytes())
        data[4] ^= 0x20
        artifact.write_bytes(bytes(data))

    def served() -> bool:
        hits = Fabric(fabric_home.root).search("lighthouse keeper").results
        return bool(hits) and hits[0].citation.source_key == key and hits[0].lexical

    tamper()
    out = CliRunner().invoke(app, ["parse", "reparse", key, "--home", str(fabric_home.root)])
    assert out.exit_code == 0, out.output
    assert "failed: none" in out.output and served()
    assert fabric_home.artifacts.get(digest) == LIGHTHOUSE.encode()

    tamper()
    (src / "light.txt").write_text(LIGHTHOUSE + "A later line.\n")  # no file holds the recorded bytes now
    out = CliRunner().invoke(app, ["parse", "reparse", key, "--home", str(fabric_home.root)])
    assert out.exit_code == 2 and "no file holds them" in out.output, out.output
    assert served()

    (src / "light.txt").write_text(LIGHTHOUSE)  # the file holds them again: a parse failed meanwhile heals
    home = FabricHome(fabric_home.root)
    home.catalog.set_parse_statuses([StatusUpdate(home.catalog.source(key).parse_id, "failed",
                                                  "artifact-unavailable", "corrupt")])
    out = CliRunner().invoke(app, ["parse", "retry", "--home", str(fabric_home.root)])
    assert out.exit_code == 0 and "failed: none" in out.output, out.output
    assert fabric_home.artifacts.get(digest) == LIGHTHOUSE.encode()


def test_a_reparse_of_a_name_that_is_no_source_key_says_which_key_is_meant(tmp_path, fabric_home):
    """guards against (trial 22e): ``fabric parse reparse light.txt`` (the file's name, as ``fabric
    status --source`` takes it) or ``src/light.txt`` (the path search prints after ``fs:``) answering
    only "no present source with a parse", leaving the user to find that a key starts with ``fs:``."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(LIGHTHOUSE)
    (src / "harbour.txt").write_text(HARBOUR)
    ingest(src, fabric_home)
    for typed in ("light.txt", "src/light.txt"):
        out = CliRunner().invoke(app, ["parse", "reparse", typed, "--home", str(fabric_home.root)])
        said = " ".join(out.output.split())
        assert out.exit_code == 2 and "did you mean fs:src/light.txt? source keys start with fs:" in said, said
    out = CliRunner().invoke(app, ["parse", "reparse", "nothing.txt", "--home", str(fabric_home.root)])
    assert out.exit_code == 2 and "did you mean" not in out.output and "start with fs:" in out.output, out.output
