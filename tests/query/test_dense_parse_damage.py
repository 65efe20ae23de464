"""One parse's damaged vectors cost that parse its dense ranking, nobody else theirs.

A release records each active parse's vector digest (``vector_parse_digests``, bound to the table
digest it also records): the reader checks each visible parse's rows on their own, leaves out a
parse whose rows do not give its digest (never ranked, never scored; still found by its words),
and reads no parse a reader may not see, so a withheld source's damage changes nothing it is shown.
A release without per-parse digests (an older home) is checked as a whole, as before.
"""

from __future__ import annotations

import json
import random
import shutil

import numpy as np
import pytest
from answers import first_difference
from conftest import ingest

from typer.testing import CliRunner

from fabric_assets.cli import app
from fabric_query import Fabric
from fabric_query.cli_text import render_pack
from fabric_query import release as views
from fabric_query.scope import Scope
from fabric_resources.home import FabricHome
from fabric_resources.vector_digest import PARSES_MANIFEST_KEY

FILES = {
    "keeper.txt": "The lighthouse keeper logged the tide.\n\nA storm broke the lamp in March.\n",
    "lenses.txt": "Lighthouse lenses focus the lamp into a beam.\n",
    "bread.txt": "Sourdough needs a lively starter and patience.\n\nBake the loaf in a hot oven.\n",
    "harbour.txt": "The harbour pilot guided the ship past the rocks at night.\n",
    "private/diary.txt": "The keeper's diary: the lamp failed, the storm was loud, the tide rose.\n",
}
WITHHELD = "fs:corpus/private/diary.txt"
QUERIES = ["lighthouse keeper", "lamp storm", "bread oven", "ship at night", "tide"]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("parse-damage")
    folder = tmp / "corpus"
    for rel, text in FILES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    ingest(folder, FabricHome(tmp / "home"))
    return tmp


def _copy(pristine, tmp_path, name: str) -> FabricHome:
    copy = tmp_path / name
    shutil.copytree(pristine / "home", copy)
    return FabricHome(copy)


def _parse_of(home: FabricHome, key: str) -> str:
    return home.catalog.current_release().manifest["sources"][key]["parse_id"]


def _damage(home: FabricHome, parse_id: str, rng: random.Random) -> None:
    """Flip one bit of one float of one of ``parse_id``'s stored vectors (the file still reads)."""
    rows = home.tables.read("chunk_vectors", columns=["parse_id", "vector"])
    mine = [i for i, p in enumerate(rows.column("parse_id").to_pylist()) if p == parse_id]
    vec = np.asarray(rows.column("vector")[rng.choice(mine)].values.to_numpy(), dtype="<f4").tobytes()
    (path,) = sorted((home.layout.tables / "chunk_vectors.lance" / "data").glob("*.lance"))
    data = bytearray(path.read_bytes())
    at = data.find(vec)
    assert at >= 0 and data.find(vec, at + 1) < 0
    data[at + 4 * rng.randrange(len(vec) // 4) + rng.randrange(3)] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))
    views._VIEWS.clear()  # the next search reads the files as they lie now, as a new process would


def _withhold(home: FabricHome, pattern: str) -> None:
    home.layout.config_file.write_text(json.dumps({"sources": {"withheld": [pattern]}}))


def _dense(pack) -> list:
    return [list(pair) for pair in pack.stage_candidates.get("channel:dense", ())]


def _chunks_of(home: FabricHome, parse_id: str) -> set[str]:
    rows = home.tables.read("chunks", columns=["parse_id", "chunk_id"]).to_pylist()
    return {r["chunk_id"] for r in rows if r["parse_id"] == parse_id}


def test_a_damaged_parse_leaves_every_other_parses_dense_ranking_unchanged(pristine, tmp_path):
    """guards against: one parse's damaged vector rows turning the dense channel off for every
    query (``vector-digest-mismatch``), and a damaged row being ranked or scored.

    For every visible parse P (a bit of one of its vectors flipped, which vector and bit drawn by a
    seeded RNG): the dense channel still runs, its ranking equals that of the sound home with P's
    source out of scope (exactly but the cosines' last bits), no chunk of P is ranked by it or
    carries a dense score, P is still found by its words, and the pack and status name P's source."""
    rng = random.Random(56)
    sound = Fabric(pristine / "home")
    keys = sorted(k for k in sound.home.catalog.current_release().manifest["sources"])
    for n, key in enumerate(keys):
        home = _copy(pristine, tmp_path, f"h{n}")
        parse_id = _parse_of(home, key)
        _damage(home, parse_id, rng)
        mine = _chunks_of(home, parse_id)
        others = Scope(source_keys=tuple(k for k in keys if k != key))
        fabric = Fabric(home.root)
        for q in QUERIES:
            pack = fabric.search(q, limit=10, debug=True, channels=["dense"])
            assert "dense" in pack.channels_run and "dense" not in pack.skipped_channels, (key, q)
            assert pack.dense_sources_left_out == (key,), (key, q)
            want = sound.search(q, limit=10, debug=True, channels=["dense"], scope=others)
            assert first_difference(_dense(pack), _dense(want)) is None, (key, q)
            assert not mine & {c for c, _ in _dense(pack)}
            full = fabric.search(q, limit=10, debug=True)
            assert all("dense" not in h.channels for h in full.results if h.chunk_id in mine), (key, q)
        # Still found by its words (its first chunk's text, as a phrase), through a lexical channel.
        text = home.tables.read("chunks", columns=["chunk_id", "text"]).to_pylist()
        words = next(r["text"] for r in text if r["chunk_id"] in mine).split("\n")[0].split()[:4]
        found = fabric.search('"' + " ".join(words) + '"', limit=10)
        assert any(h.chunk_id in mine for h in found.results), key
        status = fabric.status()
        assert status.dense_channels_off == () and status.dense_sources_left_out == (f"dense: {key}",), key
        if n == 0:  # what `fabric search` and `fabric status` print
            _, err = render_pack(pack.model_dump(mode="json"))
            assert f"dense ranking left out {key}: " in err and "`fabric repair`" in err, err
            out = CliRunner().invoke(app, ["status", "--home", str(home.root)], env={"COLUMNS": "500"})
            assert out.exit_code == 0 and f"dense vectors left out: dense: {key}: found by words only" in out.output


def test_a_withheld_sources_damaged_vectors_change_nothing_a_reader_sees(pristine, tmp_path):
    """guards against: a withheld source's damaged vectors switching the dense channel off for every
    reader, a reason that tells them something withheld is there.

    With the source withheld, every pack (all channels, debug) and the status of the home whose
    withheld vectors were damaged equal those of the same home undamaged."""
    rng = random.Random(7)
    sound, damaged = _copy(pristine, tmp_path, "sound"), _copy(pristine, tmp_path, "damaged")
    for home in (sound, damaged):
        _withhold(home, "corpus/private/*")
    for _ in range(3):  # three draws of vector and bit
        _damage(damaged, _parse_of(damaged, WITHHELD), rng)
    a, b = Fabric(sound.root), Fabric(damaged.root)
    for q in QUERIES:
        pa, pb = a.search(q, limit=10, debug=True), b.search(q, limit=10, debug=True)
        assert "dense" in pb.channels_run and pb.dense_sources_left_out == ()
        assert first_difference(pa.model_dump(exclude={"timings"}), pb.model_dump(exclude={"timings"})) is None, q
    sa, sb = a.status().model_dump(exclude={"home"}), b.status().model_dump(exclude={"home"})
    assert sb["dense_channels_off"] == () and sb["dense_sources_left_out"] == ()
    assert first_difference(sa, sb) is None


def test_a_release_without_per_parse_digests_is_checked_as_a_whole(pristine, tmp_path):
    """guards against: an older home (no ``vector_parse_digests``), or a per-parse map that does not
    give back the table digest the release recorded, serving rows that are not what was written.
    Both are checked as a whole, as before: one damaged parse turns the channel off, with the reason."""
    rng = random.Random(3)
    for change in ("absent", "unbound"):
        home = _copy(pristine, tmp_path, change)
        current = home.catalog.current_release()
        manifest = {k: v for k, v in current.manifest.items() if k not in ("release_id", "created_at")}
        if change == "absent":
            del manifest[PARSES_MANIFEST_KEY]
        else:  # one parse's recorded digest swapped for another's: the map no longer binds
            per_parse = manifest[PARSES_MANIFEST_KEY]["chunk_vectors"]
            first, second = sorted(per_parse)[:2]
            per_parse[first], per_parse[second] = per_parse[second], per_parse[first]
        home.catalog.publish_release(manifest, expected_current=current.release_id)
        pack = Fabric(home.root).search("lighthouse keeper")
        assert "dense" in pack.channels_run and pack.dense_sources_left_out == (), change  # sound: served
        _damage(home, _parse_of(home, "fs:corpus/bread.txt"), rng)
        pack = Fabric(home.root).search("lighthouse keeper")
        assert pack.skipped_channels["dense"].startswith("vector-digest-mismatch: chunk_vectors"), change
        assert pack.dense_sources_left_out == ()
