"""The Fabric home is never a source: ``fabric ingest`` and the server's admin ingest refuse the
home and any folder inside it, a root registered inside it earlier is not walked, and a new home is
readable by its owner only (it holds copies of private documents and the admin token)."""

from __future__ import annotations

import stat

import pytest

from fabric_assets.ingest import ingest
from fabric_assets.operations import PipelineAdmin
from fabric_assets.sources.scan import scan
from fabric_resources.catalog import RootOverlapError
from fabric_resources.home import FabricHome


def test_ingest_refuses_the_home_and_folders_inside_it(fabric_home):
    """guards against: the home's catalog, artifacts and admin token copied into the home as
    searchable sources (the fresh-user trial of 2026-12-04 found the token among the artifacts)."""
    inside = fabric_home.root / "notes"
    inside.mkdir()
    (inside / "secret.txt").write_text("not a source\n")
    for path in (fabric_home.root, inside, fabric_home.root / "dagster"):
        with pytest.raises(RootOverlapError, match="Fabric home"):
            ingest(path, fabric_home)
    assert fabric_home.catalog.roots() == []
    admin = PipelineAdmin(fabric_home)
    try:
        with pytest.raises(ValueError, match="Fabric home"):
            admin.submit("ingest", {"path": str(fabric_home.root)})
        assert fabric_home.catalog.operations("pending") == []
    finally:
        admin.close()


def test_a_root_registered_inside_the_home_is_not_walked(fabric_home, tmp_path):
    """guards against: a root that an older version let in (or a catalog edited by hand) still
    feeding the home's own files into the index."""
    inside = fabric_home.root / "notes"
    inside.mkdir()
    (inside / "secret.txt").write_text("not a source\n")
    fabric_home.catalog.register_root(inside)
    outside = tmp_path / "docs"
    outside.mkdir()
    (outside / "a.txt").write_text("A real source.\n")
    fabric_home.catalog.register_root(outside)
    report = scan(fabric_home)
    assert report.new == ["fs:docs/a.txt"]
    assert [(k, r.split(":")[0]) for k, r in report.skipped] == [("fs:notes/", "root-inside-home")]


def test_a_root_that_holds_the_home_skips_the_home(tmp_path, monkeypatch):
    """guards against: refusing (or walking into) the common layout where the home lies in the
    folder a user ingests."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("A real source.\n")
    home = FabricHome(corpus / "home")
    (home.root / "planted.txt").write_text("inside the home\n")
    home.catalog.register_root(corpus)
    assert scan(home).new == ["fs:corpus/a.txt"]


def test_another_fabric_home_in_a_source_folder_is_not_walked(tmp_path):
    """guards against: a second home (a snapshot restored into the notes folder, say) read as
    sources — its stored copies, catalog and tables, 64 files in the hostile trial of 2026-12-05 —
    and the same home registered as a root itself."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("A real source.\n")
    other = FabricHome(corpus / "restored")
    other.catalog.register_root(corpus)  # creates its catalog
    other.artifacts.put(b"a stored copy of a private document\n")
    (other.root / "planted.txt").write_text("inside the other home\n")
    home = FabricHome(tmp_path / "home")
    home.catalog.register_root(corpus)
    report = scan(home)
    assert report.new == ["fs:corpus/a.txt"]
    assert [(k, r.split(":")[0]) for k, r in report.skipped] == [("fs:corpus/restored", "fabric-home")]
    second = FabricHome(tmp_path / "second")
    second.catalog.register_root(other.root)
    report = scan(second)
    assert report.new == [] and [(k, r.split(":")[0]) for k, r in report.skipped] == [("fs:restored/", "fabric-home")]


def test_a_new_home_is_readable_by_its_owner_only(tmp_path):
    home = FabricHome(tmp_path / "deep" / "home")
    assert stat.S_IMODE(home.root.stat().st_mode) & 0o077 == 0
    made = tmp_path / "made-by-user"
    made.mkdir(mode=0o755)
    assert stat.S_IMODE(FabricHome(made).root.stat().st_mode) == 0o755, "a folder the user made keeps its mode"


def test_the_file_system_root_and_system_folders_are_refused_as_roots(fabric_home):
    """guards against (hostile trial 7, 2026-12-05): `{"path": "/./.."}` over HTTP registering `/`
    (every file the server can read, /proc/*/environ included), or a root in /proc, /sys or /dev,
    where reading some pseudo-files (/proc/kmsg) blocks for ever."""
    from fabric_assets.ingest import NotADirectoryRoot, admissible_root

    for path in ("/", "/./..", "/proc", "/proc/self", "/sys/kernel", "/dev"):
        with pytest.raises(NotADirectoryRoot, match="system folder"):
            admissible_root(path, fabric_home)
    assert fabric_home.catalog.roots() == []
    admin = PipelineAdmin(fabric_home)
    try:
        with pytest.raises(ValueError, match="system folder"):
            admin.submit("ingest", {"path": "/proc/self/fd"})
    finally:
        admin.close()
