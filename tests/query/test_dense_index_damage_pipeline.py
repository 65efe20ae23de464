"""A release's dense ANN index over damaged vectors, through the real pipeline (Dagster runs, Lance,
MiniLM, tantivy): what a search and ``fabric status`` say, and that the command they name mends it.

Two homes ingest the same folder of seeded pseudo-English (16-token chunks, enough rows for an
index, ``query.dense_search.mode: ann`` with settings that probe every partition and re-rank every
row, so the index answers as the exact product does); between their two ingests one parse's stored
vectors are damaged in one of them, so the second ingest's activation builds its index over the
damaged rows. The damage is either in the stored vectors (``fabric repair`` re-embeds them) or in
the index's own rows (``fabric dense-index-repair`` rebuilds it from the stored vectors).
"""

from __future__ import annotations

import json
import random
import shutil

import lance
import numpy as np
import pyarrow as pa
import pytest
from answers import first_difference
from conftest import ingest
from typer.testing import CliRunner

from fabric_assets.cli import app
from fabric_assets.lifecycle.snapshots import create, restore, verify
from fabric_query import Fabric
from fabric_query import release as views
from fabric_query.cli_text import render_pack
from fabric_query.scope import Scope
from fabric_resources.dense_index import INDEX_NAME, MANIFEST_KEY, VECTORS_DATASET
from fabric_resources.home import FabricHome

WORDS = ("harbour tide lamp keeper stairs ledger storm boat herring dawn river bridge mill flour baker "
         "garden orchard apple winter summer letter road carriage station clock tower bell market salt "
         "copper iron forge smith wheel cart field barley wheat rain cloud wind sail anchor rope net").split()
CONFIG = {"chunking": {"max_tokens": 16},
          "query": {"dense_search": {"mode": "ann", "partition_rows": 32, "nprobes": 64, "refine_factor": 16}}}
QUERIES = ["harbour keeper lamp", "winter orchard apple", "copper forge smith", "rain cloud sail"]
DAMAGED = "fs:src/c.txt"


def _corpus(src) -> None:
    rng = random.Random(24)
    for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
        paragraphs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 12))).capitalize() + "."
                      for _ in range(120)]
        (src / name).write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")


def _parse_of(home: FabricHome, key: str) -> str:
    return home.catalog.current_release().manifest["sources"][key]["parse_id"]


def _damage_stored_vector(home: FabricHome, parse_id: str) -> None:
    """Flip one bit of one float of one of ``parse_id``'s stored vectors (its data file still reads)."""
    rows = home.tables.read("chunk_vectors", columns=["parse_id", "vector"])
    mine = [i for i, p in enumerate(rows.column("parse_id").to_pylist()) if p == parse_id]
    needle = np.asarray(rows.column("vector")[mine[len(mine) // 2]].values.to_numpy(), dtype="<f4").tobytes()
    for path in (home.layout.tables / "chunk_vectors.lance" / "data").glob("*.lance"):
        data = bytearray(path.read_bytes())
        at = data.find(needle)
        if at >= 0:
            data[at + 4 * 7 + 1] ^= 0x10
            path.write_bytes(bytes(data))
            views._VIEWS.clear()  # read as a new process would
            return
    raise AssertionError("vector not found in any data file")


@pytest.fixture(scope="module")
def homes(tmp_path_factory):
    """(sound home, damaged home): both ingest ``src``, then a fifth file is added and both ingest
    again; before that second ingest, one stored vector of ``DAMAGED``'s parse is damaged in the
    second home, so its activation builds the index over the damaged rows."""
    tmp = tmp_path_factory.mktemp("ann-left-out")
    src = tmp / "src"
    src.mkdir()
    _corpus(src)
    pair = (FabricHome(tmp / "sound"), FabricHome(tmp / "damaged"))
    for home in pair:
        home.layout.config_file.write_text(json.dumps(CONFIG))
        assert ingest(src, home).failed_runs == []
    _damage_stored_vector(pair[1], _parse_of(pair[1], DAMAGED))
    (src / "e.txt").write_text("The harbour keeper lit the lamp at dawn.\n", encoding="utf-8")
    for home in pair:
        assert ingest(src, home).failed_runs == []
    views._VIEWS.clear()
    return FabricHome(pair[0].root), FabricHome(pair[1].root)


def _copy(home: FabricHome, tmp_path, name: str) -> FabricHome:
    shutil.copytree(home.root, tmp_path / name)
    views._VIEWS.clear()
    return FabricHome(tmp_path / name)


def _dense(pack) -> list:
    return [list(pair) for pair in pack.stage_candidates.get("channel:dense", ())]


def _chunks_of(home: FabricHome, key: str) -> set[str]:
    parse_id = _parse_of(home, key)
    return {r["chunk_id"] for r in home.tables.read("chunks", columns=["parse_id", "chunk_id"]).to_pylist()
            if r["parse_id"] == parse_id}


def _ranked(home: FabricHome) -> dict:
    views._VIEWS.clear()
    fabric = Fabric(home.root)
    return {q: [(h.chunk_id, h.fused_score) for h in fabric.search(q, limit=10).results] for q in QUERIES}


def _status_output(home: FabricHome) -> str:
    """What `fabric status` prints, on a console 500 columns wide: `COLUMNS` alone does not set it
    where the CLI's console was made while another test had set `COLUMNS` (its width is fixed then),
    and a wrapped line cut the command a hint names in two."""
    from unittest.mock import patch

    from rich.console import Console

    import fabric_query.cli as cli

    views._VIEWS.clear()
    env = {"COLUMNS": "500", "DAGSTER_HOME": str(home.layout.dagster_home)}
    with patch.object(cli, "console", Console(width=500)):
        out = CliRunner().invoke(app, ["status", "--home", str(home.root)], env=env)
    assert out.exit_code == 0, out.output
    return out.output


def _status_lines(home: FabricHome) -> list[str]:
    return [line.strip() for line in _status_output(home).splitlines() if "dense vectors left out" in line]


def test_activation_over_one_parses_damaged_vectors_leaves_out_that_parse_alone(homes):
    """guards against (trial 24a): no end-to-end check that an activation building the ANN index
    over a home where one parse's stored vectors are damaged serves the others through the index.

    The index records that parse as left out; every search goes through the index (no fallback
    reason), names that source in ``dense_sources_left_out`` (stored vectors: ``fabric repair``),
    ranks none of its chunks by the dense channel yet finds them by their words, and ranks every
    other parse as the undamaged home does with that source out of scope."""
    sound, damaged = homes
    parse_id = _parse_of(damaged, DAMAGED)
    record = damaged.catalog.current_release().manifest[MANIFEST_KEY]["chunk_vectors"]
    assert record["generation"] and record["left_out"] == [parse_id], record
    assert "left_out" not in sound.catalog.current_release().manifest[MANIFEST_KEY]["chunk_vectors"]
    mine = _chunks_of(damaged, DAMAGED)
    assert mine == _chunks_of(sound, DAMAGED)  # the same chunk IDs in both homes
    others = Scope(source_keys=tuple(k for k in sound.catalog.current_release().manifest["sources"] if k != DAMAGED))
    views._VIEWS.clear()
    a, b = Fabric(sound.root), Fabric(damaged.root)
    for q in QUERIES:
        pack = b.search(q, limit=10, debug=True)
        assert (pack.dense_search, pack.dense_fallback_reason) == ("ann", None), q
        assert pack.dense_sources_left_out == (DAMAGED,) and pack.dense_index_sources_left_out == (), q
        assert all("dense" not in h.channels for h in pack.results if h.chunk_id in mine), q
        # The dense channel alone (a full search moves its query vector by the word hits' windows).
        got = b.search(q, limit=10, debug=True, channels=["dense"])
        assert _dense(got) and not mine & {c for c, _ in _dense(got)}, q
        want = a.search(q, limit=10, debug=True, channels=["dense"], scope=others)
        assert want.dense_search == "ann" and first_difference(_dense(got), _dense(want)) is None, q
        _, err = render_pack(pack.model_dump(mode="json"))
        assert f"dense ranking left out {DAMAGED}: stored vectors" in err and "`fabric repair`" in err, err
    text = {r["chunk_id"]: r["text"] for r in damaged.tables.read("chunks", columns=["chunk_id", "text"]).to_pylist()}
    words = text[sorted(mine)[3]].split()[:4]
    found = b.search('"' + " ".join(w.strip(".") for w in words) + '"', limit=10)
    assert any(h.chunk_id in mine and "dense" not in h.channels for h in found.results), words
    status = b.status()
    assert status.dense_sources_left_out == (f"dense: {DAMAGED}",) and status.dense_index_sources_left_out == ()
    assert _status_lines(damaged) == [f"dense vectors left out: dense: {DAMAGED}: found by words only until "
                                      "`fabric repair`"]


def _relabel_first_row(home: FabricHome) -> tuple[str, str]:
    """Label the index generation's first row (a chunk of one parse) with the next parse's ID (its
    data rewritten, its vector index trained again): the stored vectors stay sound. Returns the two
    parses' source keys."""
    record = home.catalog.current_release().manifest[MANIFEST_KEY]["chunk_vectors"]
    path = home.dense_indexes.path("chunk_vectors", record["generation"]) / VECTORS_DATASET
    t = lance.dataset(str(path)).to_table()
    ids = t.column("parse_id").to_pylist()
    other = sorted(set(ids) - {ids[0]})[0]
    key_of = {m["parse_id"]: k for k, m in home.catalog.current_release().manifest["sources"].items()}
    keys = (key_of[ids[0]], key_of[other])
    ids[0] = other
    t = t.set_column(t.schema.get_field_index("parse_id"), "parse_id", pa.array(ids, pa.string()))
    spec = record["spec"]
    ds = lance.write_dataset(t, str(path), mode="overwrite")
    ds.create_index("vector", spec["index_type"], name=INDEX_NAME, metric=spec["metric"],
                    num_partitions=spec["num_partitions"], num_bits=spec["num_bits"])
    views._VIEWS.clear()
    return keys


def test_a_relabelled_index_row_names_the_command_that_rebuilds_the_index(homes, tmp_path):
    """guards against (trial 24a): an ANN index row relabelled with another parse's ID (the stored
    vectors sound) left both parses out of dense ranking with the hint "until `fabric repair`",
    which finds nothing to mend (it reads the tables), so the hint never cleared.

    Status, its CLI line and ``fabric search`` name ``fabric dense-index-repair`` for those sources
    (``dense_index_sources_left_out``); ``fabric repair`` leaves them out still; ``fabric
    dense-index-repair`` publishes a rebuilt index, after which nothing is left out and every query
    ranks as before the damage."""
    sound, _ = homes
    home = _copy(sound, tmp_path, "relabelled")
    before = _ranked(home)
    keys = _relabel_first_row(home)
    named = tuple(sorted(f"dense: {k}" for k in keys))
    status = Fabric(home.root).status()
    assert status.dense_sources_left_out == named and status.dense_index_sources_left_out == named, status
    lines = _status_lines(home)
    assert len(lines) == 2 and all("`fabric dense-index-repair`" in line and "`fabric repair`" not in line
                                   for line in lines), lines
    pack = Fabric(home.root).search(QUERIES[0], limit=10)
    assert pack.dense_search == "ann" and pack.dense_index_sources_left_out == tuple(sorted(keys))
    _, err = render_pack(pack.model_dump(mode="json"))
    assert "`fabric dense-index-repair` rebuilds it" in err and "`fabric repair`" not in err, err

    env = {"COLUMNS": "500", "DAGSTER_HOME": str(home.layout.dagster_home)}
    out = CliRunner().invoke(app, ["repair", "--home", str(home.root)], env=env)
    assert out.exit_code == 0, out.output
    assert len(_status_lines(home)) == 2  # not mended by the command the hint used to name
    out = CliRunner().invoke(app, ["dense-index-repair", "--home", str(home.root)], env=env)
    assert out.exit_code == 0 and "published release" in out.output, out.output
    views._VIEWS.clear()
    status = Fabric(home.root).status()
    assert status.dense_sources_left_out == status.dense_index_sources_left_out == ()
    assert _status_lines(home) == []
    assert first_difference(_ranked(home), before) is None


def test_a_snapshot_restore_keeps_the_parses_an_index_left_out(homes, tmp_path):
    """guards against (trial 24a): a snapshot restore of a home whose ANN index
    recorded a left-out parse serving that parse's damaged rows, or losing the index, once the
    generation's files were damaged (rebuilt under its name) or with them intact (linked back),
    in place and into a new home.

    After each restore the index serves (no fallback reason), leaves out the same parse only,
    and every query ranks as before."""
    _, damaged = homes
    home = _copy(damaged, tmp_path, "snap")
    before = _ranked(home)
    record = home.catalog.current_release().manifest[MANIFEST_KEY]["chunk_vectors"]
    info = create(home, "left-out")
    problems = verify(home, info.snapshot_id, deep=True).problems
    assert not [p for p in problems if p.startswith("dense index")], problems
    gen = home.dense_indexes.path("chunk_vectors", record["generation"])
    data_file = max(gen.joinpath(VECTORS_DATASET, "data").glob("*.lance"), key=lambda p: p.stat().st_size)
    blob = bytearray(data_file.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    with open(data_file, "r+b") as fh:  # in place: the snapshot's hard link shares the damage
        fh.write(blob)
    for into in (None, tmp_path / "elsewhere", None):  # damaged files rebuilt; into a new home; linked back
        views._VIEWS.clear()
        restored = FabricHome(restore(FabricHome(home.root), info.snapshot_id, into=into).root)
        assert restored.catalog.current_release().manifest[MANIFEST_KEY]["chunk_vectors"] == record
        if into is None:
            problems = verify(restored, info.snapshot_id, deep=True).problems
            assert not [p for p in problems if p.startswith("dense index")], problems
        fabric = Fabric(restored.root)
        for q in QUERIES:
            pack = fabric.search(q, limit=10)
            assert (pack.dense_search, pack.dense_fallback_reason) == ("ann", None), (restored.root, q)
            assert pack.dense_sources_left_out == (DAMAGED,) and pack.dense_index_sources_left_out == ()
        assert first_difference(_ranked(restored), before) is None


def test_an_older_release_without_an_index_over_damaged_vectors_names_the_command_that_mends_them(homes, tmp_path):
    """guards against (trial 24a): a release that records the table digest only (before per-parse
    digests) whose activation found its vectors damaged records no index (``skipped:
    vector-digest-mismatch``); its ``dense-index-missing`` reason said "run `fabric
    dense-index-repair`", which reads the same rows, skips again and publishes nothing.

    The reason (and the status line) name `fabric repair`, and that command mends it: the release
    it publishes has an index, nothing is off or left out, and every query ranks as before."""
    from fabric_assets.activation.dense_index import dense_index_records
    from fabric_resources.vector_digest import PARSES_MANIFEST_KEY

    sound, _ = homes
    home = _copy(sound, tmp_path, "older")
    before = _ranked(home)
    _damage_stored_vector(home, _parse_of(home, DAMAGED))
    current = home.catalog.current_release()
    manifest = {k: v for k, v in current.manifest.items() if k not in ("release_id", "created_at", PARSES_MANIFEST_KEY)}
    active = sorted({m["parse_id"] for m in manifest["sources"].values()})
    manifest[MANIFEST_KEY] = dense_index_records(home, manifest["tables"], active, manifest["vector_digests"])
    assert manifest[MANIFEST_KEY]["chunk_vectors"]["skipped"] == "vector-digest-mismatch"
    home.catalog.publish_release(manifest, expected_current=current.release_id)
    views._VIEWS.clear()
    (fallback,) = Fabric(home.root).status().dense_index_fallback
    assert fallback.startswith("dense: dense-index-missing: ") and "`fabric repair`" in fallback, fallback
    env = {"COLUMNS": "500", "DAGSTER_HOME": str(home.layout.dagster_home)}
    shown = _status_output(home)
    assert "dense index not used" in shown and "dense-index-repair" not in shown, shown

    out = CliRunner().invoke(app, ["repair", "--home", str(home.root)], env=env)
    assert out.exit_code == 0, out.output
    views._VIEWS.clear()
    home = FabricHome(home.root)
    assert home.catalog.current_release().manifest[MANIFEST_KEY]["chunk_vectors"]["generation"]
    status = Fabric(home.root).status()
    assert (status.dense_index_fallback, status.dense_channels_off, status.dense_sources_left_out) == ((), (), ())
    assert first_difference(_ranked(home), before) is None
