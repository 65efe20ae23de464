"""An edited file keeps the vectors of its unchanged chunks: only new model inputs are encoded, and
what is reused equals what encoding them again gives (trial 11b: a one-line edit of a 55 MB file
encoded all of its ~135k chunks again)."""

from __future__ import annotations

import random

import dagster as dg
import numpy as np
from conftest import ingest

from fabric_query import Fabric
from fabric_resources.home import FabricHome

WORDS = ("tide lamp keeper storm harbour lens beam glass ring ship night fog signal rock coast wave light "
         "tower stair oil wick pilot anchor chart reef buoy").split()


def _paragraphs(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(90)) + f" Entry {i}." for i in range(n)]


def _vectors(home: FabricHome, source_key: str) -> dict[str, np.ndarray]:
    """Chunk text → the vector the current release serves for it, for one source."""
    release = home.catalog.current_release()
    pid = release.manifest["sources"][source_key]["parse_id"]
    tables = release.manifest["tables"]
    chunks = home.tables.read("chunks", parse_ids=[pid], version=tables["chunks"], columns=["chunk_id", "text"])
    text_of = dict(zip(chunks.column("chunk_id").to_pylist(), chunks.column("text").to_pylist()))
    rows = home.tables.read("chunk_vectors", parse_ids=[pid], version=tables["chunk_vectors"],
                            columns=["chunk_id", "vector"])
    matrix = rows.column("vector").combine_chunks().flatten().to_numpy().reshape(rows.num_rows, -1)
    return {text_of[cid]: matrix[i].copy() for i, cid in enumerate(rows.column("chunk_id").to_pylist())}


def _encode_metadata(home: FabricHome) -> dict:
    with dg.DagsterInstance.from_config(str(home.layout.dagster_home)) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("chunk_vectors"))
        return {k: v.value for k, v in event.asset_materialization.metadata.items()}


def test_an_edit_encodes_only_the_new_chunks_and_reused_vectors_equal_a_fresh_encode(tmp_path, monkeypatch):
    """guards against: every chunk of an edited file encoded again; a reused vector that is not the
    one encoding its input gives (another chunk's, another model's); and reuse across sources."""
    src = tmp_path / "notes"
    src.mkdir()
    paragraphs = _paragraphs(12)
    (src / "a.txt").write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    (src / "b.txt").write_text("Sourdough needs a lively starter and patience.\n", encoding="utf-8")
    home = FabricHome(tmp_path / "home")
    monkeypatch.setenv("DAGSTER_HOME", str(home.layout.dagster_home))
    ingest(src, home)
    before = _vectors(home, "fs:notes/a.txt")
    assert len(before) >= 6 and _encode_metadata(home)["vectors_reused"] == 0

    edited = [*paragraphs]
    edited[5] = "The harbour pilot boarded the tanker at dawn and the fog lifted over the reef. " * 3
    (src / "a.txt").write_text("\n\n".join(edited) + "\n", encoding="utf-8")
    ingest(src, home)
    after = _vectors(home, "fs:notes/a.txt")
    kept = [t for t in after if t in before]
    new = [t for t in after if t not in before]
    meta = _encode_metadata(home)
    assert new and meta["texts_encoded"] == len(new) and meta["vectors_reused"] == len(kept) >= len(before) - 2
    assert all(np.array_equal(after[t], before[t]) for t in kept)

    fresh = FabricHome(tmp_path / "fresh")  # the edited file ingested from nothing: every chunk encoded
    monkeypatch.setenv("DAGSTER_HOME", str(fresh.layout.dagster_home))
    ingest(src, fresh)
    encoded = _vectors(fresh, "fs:notes/a.txt")
    assert set(encoded) == set(after)
    for text in after:  # batching may move the last float bits, no more
        assert np.allclose(after[text], encoded[text], atol=1e-5), text[:40]

    hit = Fabric(home.root).search(" ".join(paragraphs[0].split()[:12])).results[0]
    assert hit.citation.source_key == "fs:notes/a.txt"
    assert Fabric(home.root).resolve(hit.citation).status == "verified"
