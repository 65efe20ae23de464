"""Retention over real Dagster runs and Lance tables: what no retained release needs goes (rows,
old table versions, parse runs, bytes), what a retained release pins stays, ages count."""

from __future__ import annotations

import json
import time

import lance
import pytest
from conftest import ingest

from fabric_assets.lifecycle.retention import UNPINNED_SINCE, cleanup
from fabric_query import Fabric
from fabric_resources.home import FabricHome
from fabric_resources.schema import TABLES

VERSIONS = [f"The lighthouse keeper logged storm number {v} in the green ledger of the tide.\n" for v in range(3)]
BREAD = "Sourdough bread needs flour, water and a patient baker.\n"


def _home(fabric_home, **retention) -> FabricHome:
    fabric_home.layout.config_file.write_text(json.dumps({"retention": retention}))
    return FabricHome(fabric_home.root)


def _table_parses(home: FabricHome, name: str) -> set[str]:
    return set(home.tables.read(name, columns=["parse_id"]).column("parse_id").to_pylist())


def test_cleanup_after_activation_keeps_only_what_the_retained_release_needs(tmp_path, fabric_home):
    """guards against: superseded parses' rows, old Lance versions, parse runs and bytes piling up
    for ever (10 versions of chunks.lance after a few edits); a cleanup breaking the current
    release (search, resolve)."""
    home = _home(fabric_home, releases=1, release_days=0, superseded_days=0, deleted_days=0, failed_days=0)
    src = tmp_path / "src"
    src.mkdir()
    (src / "bread.txt").write_text(BREAD)
    for text in VERSIONS:
        (src / "light.txt").write_text(text)
        assert ingest(src, home).failed_runs == []
    home = FabricHome(home.root)
    release = home.catalog.current_release()
    active = {m["parse_id"] for m in release.manifest["sources"].values()}
    assert [r.release_id for r in home.catalog.releases()] == [release.release_id]
    assert {r.parse_id for r in home.catalog.parse_runs()} == active
    for name in ("units", "chunks", "lexical_documents", "chunk_vectors", "context_windows"):
        assert _table_parses(home, name) <= active, name
        ds = lance.dataset(home.tables.uri(name))
        assert [v["version"] for v in ds.versions()] == [release.manifest["tables"][name]], name
        assert ds.count_rows() == ds.to_table().num_rows  # no deleted row left in a file
    sources = {s.source_key: s.source_hash for s in home.catalog.sources()}
    assert home.artifacts.digests() == set(sources.values())
    assert home.lexical.generations() == [release.manifest["lexical_generation"]]
    fabric = Fabric(home.root)
    hit = fabric.search("storm number 2 lighthouse").results[0]
    assert hit.citation.source_key == "fs:src/light.txt" and "storm number 2" in hit.text
    assert fabric.resolve(hit.citation).status == "verified"
    assert not [r for r in fabric.search("storm number 0").results if "number 0" in r.text]


def test_a_retained_release_keeps_its_parses_and_ages_count_from_unpinning(tmp_path, fabric_home):
    """guards against: cleanup removing rows or versions an older retained release pins (its
    queries would fail), or removing a superseded parse before its time."""
    home = _home(fabric_home, releases=2, release_days=0, superseded_days=7)
    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(VERSIONS[0])
    ingest(src, home)
    first = home.catalog.current_release()
    (src / "light.txt").write_text(VERSIONS[1])
    ingest(src, home)
    (src / "light.txt").write_text(VERSIONS[2])
    ingest(src, home)
    home = FabricHome(home.root)
    releases = home.catalog.releases()
    assert first.release_id not in {r.release_id for r in releases} and len(releases) == 2
    older = releases[0]
    old_parse = next(iter(older.manifest["sources"].values()))["parse_id"]
    assert old_parse in _table_parses(home, "chunks")
    pack = Fabric(home.root).search("storm number 1", release_id=older.release_id)
    assert pack.results and "storm number 1" in pack.results[0].text
    first_parse = next(iter(first.manifest["sources"].values()))["parse_id"]
    since = home.catalog.state(UNPINNED_SINCE)
    assert first_parse in since and old_parse not in since  # v0 unpinned, waiting 7 days
    assert first_parse in _table_parses(home, "chunks")
    report = cleanup(home, now=time.time() + 8 * 86_400)
    assert report.removed["superseded"] == [first_parse]
    assert first_parse not in _table_parses(home, "chunks")
    assert old_parse in _table_parses(home, "chunks")
    for name in TABLES:
        if home.tables.exists(name):
            kept = {v["version"] for v in lance.dataset(home.tables.uri(name)).versions()}
            assert {r.manifest["tables"][name] for r in home.catalog.releases()} <= kept
    pack = Fabric(home.root).search("storm number 1", release_id=older.release_id)
    assert pack.results and "storm number 1" in pack.results[0].text


def test_default_retention_keeps_releases_inside_its_window_beyond_the_count(tmp_path, fabric_home):
    """guards against: the cleanup after activation deleting a release a reader pinned by its ID
    minutes ago because newer ones pushed it out of the count (`retention.releases`)."""
    home = _home(fabric_home, releases=1, superseded_days=0)  # release_days: the default window
    src = tmp_path / "src"
    src.mkdir()
    for text in VERSIONS:
        (src / "light.txt").write_text(text)
        assert ingest(src, home).failed_runs == []
        if text == VERSIONS[0]:
            first = FabricHome(home.root).catalog.current_release()
    home = FabricHome(home.root)
    assert first.release_id in {r.release_id for r in home.catalog.releases()}
    pack = Fabric(home.root).search("storm number 0", release_id=first.release_id)
    assert pack.results and "storm number 0" in pack.results[0].text
    first_parse = next(iter(first.manifest["sources"].values()))["parse_id"]
    assert first_parse in _table_parses(home, "chunks")  # pinned by a release inside the window
    report = cleanup(home, now=time.time() + 8 * 86_400)  # past the window: the count decides
    assert first.release_id in report.releases_removed
    assert [r.release_id for r in home.catalog.releases()] == [home.catalog.current_release_id()]
    assert first_parse not in _table_parses(home, "chunks")


def _write_orphan(home: FabricHome, donor: str, orphan: str) -> None:
    """Rows of ``donor`` in units and chunks written again under ``orphan``, a parse ID with no
    parse run: what a run still writing when a cleanup removed its parse leaves behind."""
    import pyarrow as pa

    for name in ("units", "chunks"):
        rows = home.tables.read(name, parse_ids=[donor])
        rows = rows.set_column(rows.schema.get_field_index("parse_id"), "parse_id",
                               pa.array([orphan] * rows.num_rows, rows.schema.field("parse_id").type))
        home.tables.replace_partitions(name, [orphan], rows)


def test_rows_of_a_parse_without_a_run_are_removed_when_written_after_any_cleanup(tmp_path, fabric_home):
    """guards against: a cleanup that reads only what was committed since the last one missing
    orphan rows (a parse whose run is gone) written before it, after it, or kept while pinned;
    and orphans found once being forgotten by the next cleanup."""
    home = _home(fabric_home, releases=1, release_days=0, superseded_days=0, deleted_days=0, failed_days=0)
    src = tmp_path / "src"
    src.mkdir()
    (src / "bread.txt").write_text(BREAD)
    assert ingest(src, home).failed_runs == []
    donor = next(iter(home.catalog.current_release().manifest["sources"].values()))["parse_id"]
    first, second = "a" * 32, "b" * 32
    _write_orphan(home, donor, first)
    # The ingest's activation ran a cleanup: this one reads the fragments committed since.
    assert cleanup(home).removed.get("orphaned") == [first]
    assert cleanup(home).removed.get("orphaned") is None
    _write_orphan(home, donor, second)
    assert cleanup(home).removed.get("orphaned") == [second]
    for name in ("units", "chunks"):
        assert _table_parses(home, name) == {donor}, name
    assert {r.parse_id for r in home.catalog.parse_runs()} == {donor}


def test_a_broken_snapshots_link_keeps_the_activation_and_every_release_and_is_reported(tmp_path, fabric_home):
    """guards against (trial 20a): with retention.after_activation, a home whose `snapshots` is a
    broken link (snapshots on media not mounted) failing each activation's run after its release
    was published (SnapshotError: the ingest exited 2) and stopping the whole cleanup; and the
    opposite mutation, the cleanup reading it as "no snapshots" and removing releases they may pin.
    What needs no snapshot still goes (rows of a parse with no run); `fabric cleanup` still refuses."""
    from typer.testing import CliRunner

    from fabric_assets.cli import app
    from fabric_assets.lifecycle.snapshots import SnapshotError

    home = _home(fabric_home, releases=1, release_days=0, superseded_days=0, deleted_days=0, failed_days=0)
    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(VERSIONS[0])
    assert ingest(src, home).failed_runs == []
    donor = next(iter(home.catalog.current_release().manifest["sources"].values()))["parse_id"]
    (home.root / "snapshots").symlink_to(tmp_path / "unmounted" / "snapshots")
    _write_orphan(home, donor, "a" * 32)
    generations = home.lexical.generations()
    (src / "light.txt").write_text(VERSIONS[1])
    summary = ingest(src, home)
    assert summary.failed_runs == [] and summary.activation["published"] is True
    assert "snapshots is not a folder" in summary.activation["cleanup_snapshots_problem"]
    home = FabricHome(home.root)
    # 1 and 2 kept (with the link whole only 3 stays: 2 re-published over compacted versions as 3)
    releases = [r.release_id for r in home.catalog.releases()]
    assert releases == [1, 2, 3] and home.catalog.current_release_id() == summary.activation["release_id"] == 3
    assert set(generations) <= set(home.lexical.generations()) and donor in _table_parses(home, "chunks")
    assert "a" * 32 not in _table_parses(home, "chunks")  # the orphan's rows went all the same
    with pytest.raises(SnapshotError, match="snapshots is not a folder"):
        cleanup(home)
    assert [r.release_id for r in home.catalog.releases()] == releases
    (src / "light.txt").write_text(VERSIONS[2])
    out = CliRunner().invoke(app, ["ingest", str(src), "--home", str(home.root)], env={"COLUMNS": "2000"})
    assert out.exit_code == 0, out.output
    assert "warning: the cleanup after the activation kept every release and index generation: " in out.output


def test_a_release_a_snapshot_pins_stays_when_a_cleanup_re_published_it(tmp_path, fabric_home):
    """guards against (found by a trial on 2026-12-05): retention leaving out every re-published
    ("replaced") release before asking whether a snapshot pins it, so the release a snapshot holds
    left the catalog once a cleanup had re-published it (as it does after a restore in place makes
    that release current again)."""
    from fabric_assets.lifecycle.republish import republish
    from fabric_assets.lifecycle.snapshots import create

    home = _home(fabric_home, releases=1, superseded_days=0)
    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(VERSIONS[0])
    assert ingest(src, home).failed_runs == []
    home = FabricHome(home.root)
    pinned = home.catalog.current_release()
    create(home, "pins the first release")
    again = republish(home, pinned, pinned.manifest["tables"], note={"cleanup": True})
    (src / "light.txt").write_text(VERSIONS[1])
    assert ingest(src, home).failed_runs == []
    home = FabricHome(home.root)
    report = cleanup(home, now=time.time() + 8 * 86_400)  # past the window: the count decides
    assert again.release_id in report.releases_removed  # replaced, not pinned: goes
    assert pinned.release_id not in report.releases_removed
    assert home.catalog.release(pinned.release_id) is not None


def test_releases_and_parses_stamped_while_the_clock_was_ahead_age_once_it_is_set_back(tmp_path, fabric_home,
                                                                                     monkeypatch):
    """guards against (hostile trial 16a): a release published, or a parse first found unpinned,
    while the clock was a year ahead (a hardware clock that NTP later set back) being kept by every
    cleanup until the clock caught up, whatever `retention` says: a negative age is inside any
    window, so with `releases: 1`, days 0 the old release, its parse's rows and bytes stayed."""
    home = _home(fabric_home, releases=1, release_days=0, superseded_days=0, deleted_days=0, failed_days=0)
    src = tmp_path / "src"
    src.mkdir()
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 365 * 86400)  # a year ahead
    (src / "light.txt").write_text(VERSIONS[0])
    ingest(src, home)
    (src / "light.txt").write_text(VERSIONS[1])
    ingest(src, home)  # its cleanup finds the first version's parse unpinned, a year ahead
    monkeypatch.setattr(time, "time", real)  # set back
    (src / "light.txt").write_text(VERSIONS[2])
    ingest(src, home)
    home = FabricHome(home.root)
    release = home.catalog.current_release()
    active = {m["parse_id"] for m in release.manifest["sources"].values()}
    assert [r.release_id for r in home.catalog.releases()] == [release.release_id]
    assert {r.parse_id for r in home.catalog.parse_runs()} == active
    assert home.artifacts.digests() == {s.source_hash for s in home.catalog.sources()}


def _retire_mid_query(tmp_path, fabric_home, monkeypatch, module, name: str):
    """A home keeping one release (chunk text read from the table per query, as past
    ``query.text_in_memory_max_rows``), and ``module.name`` wrapped so that, the first time the query
    reaches it, the file is edited, a neighbour deleted and another renamed, and an ingest activates
    them: its cleanup retires the release the query pinned and removes its versions and index."""
    fabric_home.layout.config_file.write_text(json.dumps({
        "retention": {"releases": 1, "release_days": 0, "superseded_days": 0, "deleted_days": 0, "failed_days": 0},
        "query": {"text_in_memory_max_rows": 0}}))
    home = FabricHome(fabric_home.root)
    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(VERSIONS[0])
    (src / "bread.txt").write_text(BREAD)
    (src / "gone.txt").write_text("The lighthouse keeper's ghostly lamp burnt blue.\n")
    ingest(src, home)
    first = home.catalog.current_release_id()
    real, fired = getattr(module, name), []

    def activate_then(*args, **kwargs):
        if not fired:
            fired.append(True)
            (src / "light.txt").write_text(VERSIONS[1])
            (src / "gone.txt").unlink()
            (src / "bread.txt").rename(src / "loaf.txt")
            ingest(src, FabricHome(home.root))
            assert not FabricHome(home.root).catalog.has_release(first)  # retired, its files gone
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, activate_then)
    _files_go_after_their_release(monkeypatch, home, first)
    return home, first, fired


def _files_go_after_their_release(monkeypatch, home: FabricHome, release_id: int) -> None:
    """A removal of the index generation or a table version release ``release_id`` pins asserts
    that the release has left the catalog already (a query that pinned it and still finds it there
    read whole files)."""
    from fabric_resources.lexical_index import LexicalIndex
    from fabric_resources.tables import TableStore

    manifest = home.catalog.release(release_id).manifest
    real_generations, real_versions = LexicalIndex.remove_generations, TableStore.forget_versions

    def retired() -> bool:
        return not FabricHome(home.root).catalog.has_release(release_id)

    def remove_generations(self, keep, *args, **kwargs):
        assert manifest["lexical_generation"] in set(keep) or retired(), "its index generation went first"
        return real_generations(self, keep, *args, **kwargs)

    def forget_versions(self, name, keep=(), *args, **kwargs):
        keep = set(keep)
        assert manifest["tables"].get(name) in keep | {None, self.version(name)} or retired(), f"{name} went first"
        return real_versions(self, name, keep, *args, **kwargs)

    monkeypatch.setattr(LexicalIndex, "remove_generations", remove_generations)
    monkeypatch.setattr(TableStore, "forget_versions", forget_versions)


def test_a_query_whose_release_a_cleanup_retires_mid_flight_answers_whole_from_the_next(
        tmp_path, fabric_home, monkeypatch):
    """guards against (trial 17b): a query that pinned the release a cleanup then retired (`releases:
    1`; also the current release a cleanup re-publishes, whatever the retention) read its removed
    table versions part-way: `ReleaseUnreadableError` "`fabric status` names the damage ... `fabric
    repair`" for a home with no damage. The release is pinned and nothing of it read yet (a view loaded cold:
    at many chunks a load takes seconds); a query that had read its rows before answers whole from
    it (held in the trial, as `test_pipeline_lifecycle.py`'s activation during a query)."""
    import fabric_query.context as context

    home, first, fired = _retire_mid_query(tmp_path, fabric_home, monkeypatch, context, "eligible_parses")
    fabric = Fabric(home.root)
    during = fabric.search("lighthouse keeper storm")
    assert fired
    monkeypatch.undo()
    after = Fabric(home.root).search("lighthouse keeper storm")
    assert during.release_id == after.release_id != first
    assert not during.skipped_channels and during.fallback_reason is None
    assert during.model_dump(exclude={"timings"}) == after.model_dump(exclude={"timings"})
    assert "fs:src/gone.txt" not in {h.citation.source_key for h in during.results}
    assert fabric.resolve(during.results[0].citation).status == "verified"


def test_a_query_pinned_by_id_whose_release_is_retired_mid_flight_says_so(tmp_path, fabric_home, monkeypatch):
    """guards against (trial 17b): the same query pinned by its release ID answering a damage (and
    `fabric repair`) for a release retention retired: it is a release that no longer exists."""
    import fabric_query.context as context
    from fabric_query.errors import NoReleaseError

    home, first, _ = _retire_mid_query(tmp_path, fabric_home, monkeypatch, context, "eligible_parses")
    with pytest.raises(NoReleaseError, match=f"release {first} was retired"):
        Fabric(home.root).search("lighthouse keeper", release_id=first)
