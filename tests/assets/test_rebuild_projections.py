"""`fabric rebuild-projections` when its re-chunk run fails part-way (hostile trial 8)."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from conftest import ingest
from typer.testing import CliRunner

from fabric_assets.cli import app
from fabric_query import Fabric
from fabric_resources.home import FabricHome
from fabric_resources.tables import TableStore

DOCS = {"light.txt": "The lighthouse keeper climbed the spiral stairs every evening.\n",
        "bread.md": "# Bread\n\nSourdough bread needs flour, water and a patient baker.\n"}


def _ingested(tmp_path, fabric_home):
    """``DOCS`` ingested into ``fabric_home``: (their folder, the release it published)."""
    src = tmp_path / "src"
    src.mkdir()
    for name, text in DOCS.items():
        (src / name).write_text(text)
    ingest(src, fabric_home)
    return src, fabric_home.catalog.current_release()


@contextmanager
def _disk_full_writing_vectors():
    """Within the block, writing ``chunk_vectors`` fails as a full disk does (ENOSPC)."""
    real = TableStore.replace_partitions

    def disk_full(self, table, parse_ids, rows):
        if table == "chunk_vectors":
            raise OSError(28, "No space left on device")
        return real(self, table, parse_ids, rows)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(TableStore, "replace_partitions", disk_full)
        yield


def test_a_failed_rebuild_leaves_the_current_release_serving_every_source(tmp_path, fabric_home):
    """guards against: a rebuild whose re-chunk run failed (a full disk writing the vectors, a
    damaged table) still activating, and publishing a release without every parse it had set back
    to `parsed`: search then answered "no results (0 eligible sources)" for the whole home, and the
    next rebuild, finding no active parse, rebuilt nothing and exited 0."""
    _, before = _ingested(tmp_path, fabric_home)
    with _disk_full_writing_vectors():
        failed = CliRunner().invoke(app, ["rebuild-projections", "--home", str(fabric_home.root)])
    assert failed.exit_code == 3, failed.output
    home = FabricHome(fabric_home.root)
    assert home.catalog.current_release().manifest["sources"] == before.manifest["sources"]
    assert Fabric(home.root).search("lighthouse keeper").results[0].citation.source_key == "fs:src/light.txt"
    again = CliRunner().invoke(app, ["rebuild-projections", "--home", str(fabric_home.root)])
    assert again.exit_code == 0 and "rebuilt 2 parse(s)" in again.output, again.output
    pack = Fabric(home.root).search("sourdough baker")
    assert pack.results[0].citation.source_key == "fs:src/bread.md"
    assert Fabric(home.root).resolve(pack.results[0].citation).status == "verified"


def test_an_ingest_whose_re_chunk_run_fails_publishes_no_release_without_those_sources(tmp_path, fabric_home):
    """guards against: the same through `fabric ingest` after a chunking change: the re-chunk run
    failed (exit 3) and the activation still published a release without the re-chunked sources."""
    import json

    src, before = _ingested(tmp_path, fabric_home)
    (fabric_home.root / "config.json").write_text(json.dumps({"chunking": {"max_tokens": 24}}))
    with _disk_full_writing_vectors():
        failed = CliRunner().invoke(app, ["ingest", str(src), "--home", str(fabric_home.root)])
    assert failed.exit_code == 3, failed.output
    home = FabricHome(fabric_home.root)
    assert home.catalog.current_release().manifest["sources"] == before.manifest["sources"]
    assert Fabric(home.root).search("lighthouse keeper").results
    summary = ingest(src, home)
    assert sorted(summary.rechunked) and not summary.failed_runs
    assert set(home.catalog.current_release().manifest["sources"]) == set(before.manifest["sources"])
