"""A parse retention keeps though no source points at it (a file's superseded first version, a
deleted file's parse) is taken back by a scan when a file with its bytes appears: the file put back,
or another file with the same bytes. Its rows sat unaudited meanwhile (`fabric status` and
`fabric repair` look at the parses a source serves or waits for), so rows changed outside Fabric in
that time must be caught before a release serves them: the parse is parsed again from the bytes."""

from __future__ import annotations

import lance
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import ingest, ingest_versions

from fabric_query import Fabric
from fabric_resources.home import FabricHome

OLD = "The lighthouse keeper logged storm number seven in the green ledger of the tide.\n"
NEW = "Sourdough bread needs flour, water and a patient baker who waits all night.\n"


def _tamper(home: FabricHome, parse_id: str, how: str) -> None:
    """Change ``parse_id``'s rows in the latest table versions behind Fabric's back."""
    if how == "row-deleted":
        lance.dataset(str(home.layout.tables / "chunks.lance")).delete(f"parse_id = '{parse_id}'")
        return
    table, column = ("chunk_vectors", "vector") if how == "vector-altered" else ("chunks", "text")
    rows = home.tables.read(table, parse_ids={parse_id})
    assert rows.num_rows
    if how == "vector-altered":
        vectors = np.asarray(rows.column("vector").to_pylist(), dtype=np.float32)
        vectors[0, :2] = vectors[0, 1::-1]  # still unit norm and finite: only the digest tells
        values = pa.array(list(vectors), type=rows.schema.field("vector").type)
    else:
        values = pc.replace_substring(rows.column("text"), "keeper", "robber")
    rows = rows.set_column(rows.schema.get_field_index(column), column, values)
    home.tables.replace_partitions(table, [parse_id], rows)


@pytest.mark.parametrize("how", ["text-rewritten", "row-deleted", "vector-altered"])
@pytest.mark.parametrize("back", ["put-back", "same-bytes-elsewhere"])
def test_a_parse_taken_back_is_checked_and_parsed_again_when_its_rows_changed(tmp_path, fabric_home, how, back):
    """guards against (trial 24g): a superseded parse whose rows were changed outside Fabric while
    no source pointed at it (a chunk's text rewritten, a chunk row deleted, a vector altered) was
    taken back as it was by the scan that found a file with its bytes, and the ingest published it:
    the file was found by no search (its chunk left out as altered, or gone) or was left out of the
    dense channel, while status, the ingest and the repair said nothing of it. Now the scan checks a
    parse it takes back against what its writes recorded (row counts, vector digests, text hashes)
    and parses it again from the bytes first: the file is served whole and its citation verifies."""
    home = fabric_home
    src = tmp_path / "src"
    src.mkdir()
    (src / "light.txt").write_text(OLD)
    assert ingest(src, home).failed_runs == []
    (old,) = {m["parse_id"] for m in home.catalog.current_release().manifest["sources"].values()}
    (src / "light.txt").write_text(NEW)  # OLD's parse superseded, its rows kept (superseded_days)
    assert ingest(src, home).failed_runs == []
    _tamper(FabricHome(home.root), old, how)
    (src / ("light.txt" if back == "put-back" else "copy.txt")).write_text(OLD)
    summary = ingest(src, FabricHome(home.root))
    assert summary.failed_runs == []

    fabric = Fabric(home.root)
    status = fabric.status()
    assert status.rows_changed == () and status.unreadable_tables == (), status
    pack = fabric.search("lighthouse keeper storm number seven", debug=True)
    assert pack.altered_chunks == () and pack.dense_sources_left_out == () and "dense" in pack.channels_run
    (hit,) = [h for h in pack.results if "storm" in h.text]
    assert hit.text == OLD.strip() and hit.citation.parse_id == old
    assert fabric.resolve(hit.citation).status == "verified"
    assert not any("robber" in h.text for h in fabric.search("lighthouse robber").results)
    assert summary.scan.parse_ids_to_run == [old]  # parsed again, by the ingest that took it back


def test_a_parse_taken_back_unchanged_is_not_parsed_again(tmp_path, fabric_home):
    """guards against (trial 24g): the check of a parse taken back costing a parse when its rows
    are as written: a file put back with its first bytes is served from the kept rows at once."""
    home = fabric_home
    src = tmp_path / "src"
    ingest_versions(src / "light.txt", home, OLD, NEW)
    (src / "light.txt").write_text(OLD)
    summary = ingest(src, FabricHome(home.root))
    assert summary.failed_runs == [] and summary.scan.parse_ids_to_run == []
    hit = Fabric(home.root).search("lighthouse keeper storm").results[0]
    assert hit.text == OLD.strip() and Fabric(home.root).resolve(hit.citation).status == "verified"


def test_a_parse_two_files_shared_is_checked_when_one_comes_back_after_both_went(tmp_path, fabric_home):
    """guards against (trial 24g): two files with the same bytes share one parse; while one is still
    there its parse is served (status and repair audit it), but once both are deleted nothing did,
    and a chunk text rewritten then was published as it was when one came back: the file found by
    no search. Now the scan that takes it back parses it again; the file is served whole."""
    home = fabric_home
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text(OLD)
    (src / "b.txt").write_text(OLD)
    assert ingest(src, home).failed_runs == []
    (shared,) = {m["parse_id"] for m in home.catalog.current_release().manifest["sources"].values()}
    (src / "a.txt").unlink()
    assert ingest(src, home).failed_runs == []
    (src / "b.txt").unlink()
    assert ingest(src, FabricHome(home.root)).failed_runs == []
    _tamper(FabricHome(home.root), shared, "text-rewritten")
    (src / "a.txt").write_text(OLD)
    assert ingest(src, FabricHome(home.root)).failed_runs == []
    fabric = Fabric(home.root)
    pack = fabric.search("lighthouse keeper storm")
    assert pack.altered_chunks == () and [h.citation.source_key for h in pack.results] == ["fs:src/a.txt"]
    assert pack.results[0].text == OLD.strip() and fabric.resolve(pack.results[0].citation).status == "verified"
