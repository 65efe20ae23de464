"""Dense ANN indexes through the real pipeline (Dagster runs, Lance, MiniLM, tantivy): activation
builds one per release where ``query.dense_search`` wants it, queries search it and answer as the
exact product does, and the data's life — a deletion, a purge, a snapshot with damage, a repair —
never serves an index that is not the release's nor leaves a purged vector in one.

The corpus is seeded pseudo-English cut into 16-token chunks, enough rows (> 256) for an index;
the settings probe every partition and re-rank every row, so the approximate pass is exhaustive
and the answers must be equal to the exact product's.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from answers import answers_in_fresh_process
from conftest import ingest

from fabric_assets.activation.repair import dense_index_repair
from fabric_assets.lifecycle.purge import PurgeSelector, purge
from fabric_assets.lifecycle.snapshots import create, delete, verify
from fabric_resources.dense_index import MANIFEST_KEY, VECTORS_DATASET
from fabric_resources.home import FabricHome

WORDS = ("harbour tide lamp keeper stairs ledger storm boat herring dawn river bridge mill flour baker "
         "garden orchard apple winter summer letter road carriage station clock tower bell market salt "
         "copper iron forge smith wheel cart field barley wheat rain cloud wind sail anchor rope net "
         "island cliff cave shell sand wave reef light signal map compass north south star moon").split()
CONFIG = {"chunking": {"max_tokens": 16},
          "query": {"dense_search": {"mode": "ann", "partition_rows": 32, "nprobes": 64, "refine_factor": 16}}}
QUERIES = ["harbour keeper lamp", "winter orchard apple", "copper forge smith", "island cliff cave"]


def _corpus(root: Path) -> None:
    rng = random.Random(11)
    for name in ("a.txt", "b.txt", "c.txt", "secret.txt"):
        paragraphs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 12))).capitalize() + "."
                      for _ in range(90)]
        (root / name).write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")


def _search(root: Path, mode: str | None = None) -> dict:
    """Packs (timings aside) from a query process of its own, with ``query.dense_search.mode``
    set to ``mode`` in the home's config first (when given)."""
    if mode is not None:
        config = json.loads((root / "config.json").read_text())
        config["query"]["dense_search"]["mode"] = mode
        (root / "config.json").write_text(json.dumps(config))
    return answers_in_fresh_process(root, QUERIES)


def _ranked(packs: dict) -> dict:
    return {q: [(h["chunk_id"], round(h["fused_score"], 9)) for h in p["results"]] for q, p in packs.items()}


def _record(home: FabricHome) -> dict:
    return home.catalog.current_release().manifest[MANIFEST_KEY]["chunk_vectors"]


def _vector_needles(home: FabricHome, parse_ids: set[str]) -> list[bytes]:
    rows = home.tables.read("chunk_vectors", parse_ids=sorted(parse_ids), columns=["vector"])
    return [np.asarray(v, dtype="<f4").tobytes()[:64] for v in rows.column("vector").to_pylist()]


def _files_holding(root: Path, needles: list[bytes]) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if any(n in data for n in needles):
                found.append(str(path.relative_to(root)))
    return found


@pytest.mark.slow
def test_dense_index_through_activation_queries_purge_snapshot_and_repair(tmp_path, fabric_home):
    """guards against: activation not building (or not recording) the index the config asks for;
    queries through the index answering differently from the exact product; a missing index
    answering nothing or silently; a purged source's vectors left in an index file; a snapshot
    restore serving a damaged index; a repair that does not publish what it built."""
    src = tmp_path / "src"
    src.mkdir()
    _corpus(src)
    fabric_home.layout.config_file.write_text(json.dumps(CONFIG))
    assert ingest(src, fabric_home).failed_runs == []
    home = FabricHome(fabric_home.root)
    record = _record(home)
    assert record["generation"] and record["rows"] >= 256 and record["windows"] > 0
    assert record["digest"] == home.catalog.current_release().manifest["vector_digests"]["chunk_vectors"]
    assert home.dense_indexes.generations("chunk_vectors") == [record["generation"]]

    ann = _search(home.root)
    assert all(p["dense_search"] == "ann" and p["dense_fallback_reason"] is None for p in ann.values())
    assert all(p["results"] for p in ann.values())
    exact = _search(home.root, "exact")
    assert all(p["dense_search"] == "exact" for p in exact.values())
    assert _ranked(ann) == _ranked(exact)  # exhaustive settings: the same hits, the same fused scores

    # The index gone: the exact product answers, and the pack says why.
    gen_dir = home.dense_indexes.path("chunk_vectors", record["generation"])
    shutil.move(gen_dir, tmp_path / "moved")
    missing = _search(home.root, "ann")
    assert all(p["dense_search"] == "exact" and p["dense_fallback_reason"].startswith("dense-index-missing")
               for p in missing.values())
    assert _ranked(missing) == _ranked(exact)
    shutil.move(tmp_path / "moved", gen_dir)

    # A deleted source: the next release gets a new index without it; the old one stays while a
    # retained release names it.
    secret_parse = next(m["parse_id"] for k, m in home.catalog.current_release().manifest["sources"].items()
                        if k.endswith("secret.txt"))
    needles = _vector_needles(home, {secret_parse})
    (src / "secret.txt").unlink()
    ingest(src, home)
    home = FabricHome(home.root)
    after_delete = _record(home)
    assert after_delete["generation"] != record["generation"] and after_delete["rows"] < record["rows"]
    assert set(home.dense_indexes.generations("chunk_vectors")) == {record["generation"], after_delete["generation"]}
    assert _files_holding(home.dense_indexes.root, needles)  # the old generation still holds them (sensitive walk)

    # The purge: every index rebuilt from the rows that remain, every other generation gone.
    purge(FabricHome(home.root), PurgeSelector(source_keys=("fs:src/secret.txt",)))
    home = FabricHome(home.root)
    purged = _record(home)
    assert home.dense_indexes.generations("chunk_vectors") == [purged["generation"]]
    assert purged["generation"] not in (record["generation"], after_delete["generation"])
    assert _files_holding(home.dense_indexes.root, needles) == []
    assert _files_holding(home.root / "tables", needles) == []
    served = _search(home.root)
    assert all(p["dense_search"] == "ann" and p["dense_fallback_reason"] is None for p in served.values())

    # A snapshot: verified deep, its index damaged in the home, restored (rebuilt under its name).
    info = create(home, "test")
    assert verify(home, info.snapshot_id, deep=True).ok
    data_file = max((gen := home.dense_indexes.path("chunk_vectors", purged["generation"])).joinpath(
        VECTORS_DATASET, "data").glob("*.lance"), key=lambda p: p.stat().st_size)
    blob = bytearray(data_file.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    with open(data_file, "r+b") as fh:  # in place: the snapshot's hard link shares the damage
        fh.write(blob)
    report = verify(home, info.snapshot_id)
    assert any(f"dense index chunk_vectors/{purged['generation']}" in p for p in report.problems), report.problems
    damaged = _search(home.root)
    # Never served as sound: the exact product answers with the reason, or (a vector's bytes hit,
    # the release recording each parse's digest) the index serves without that parse, named.
    assert all((p["dense_search"] == "exact" and p["dense_fallback_reason"].startswith(
        ("dense-index-release-mismatch", "dense-index-unreadable")))
        or (p["dense_search"] == "ann" and p["dense_sources_left_out"]) for p in damaged.values()), damaged
    from fabric_assets.lifecycle.snapshots import restore

    restore(home, info.snapshot_id)
    home = FabricHome(home.root)
    assert verify(home, info.snapshot_id, deep=True).ok
    restored = _search(home.root)
    assert all(p["dense_search"] == "ann" and p["dense_fallback_reason"] is None for p in restored.values())
    assert _ranked(restored) == _ranked(served)
    delete(home, info.snapshot_id)
    assert gen.is_dir()

    # A repair keeps a sound index and publishes nothing; once bytes of it are flipped, it publishes
    # a release with a freshly built index over the same rows.
    current = home.catalog.current_release_id()
    kept = dense_index_repair(FabricHome(home.root))
    assert not kept.published and kept.release_id == current == FabricHome(home.root).catalog.current_release_id()
    assert kept.after == kept.before
    data_file = max(gen.joinpath(VECTORS_DATASET, "data").glob("*.lance"), key=lambda p: p.stat().st_size)
    blob = bytearray(data_file.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    data_file.write_bytes(blob)
    repaired = dense_index_repair(FabricHome(home.root))
    assert repaired.published and repaired.release_id == current + 1
    home = FabricHome(home.root)
    assert repaired.after["chunk_vectors"]["generation"] != purged["generation"]
    assert _record(home) == repaired.after["chunk_vectors"] and _record(home)["digest"] == purged["digest"]
    assert _ranked(_search(home.root)) == _ranked(served)
