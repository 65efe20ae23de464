"""Model identity: a model change makes exactly the affected projections stale, queries never mix
models, and re-projection recomputes them without re-parsing.

The "new model" is the HTTP dense backend against a real loopback server (OpenAI-compatible
``/v1/embeddings``) that returns deterministic unit vectors.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
from conftest import ingest
from loopback_http import LoopbackServer, Reply, Request

DIM = 384


def fake_vector(text: str) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(DIM)
    return (v / np.linalg.norm(v)).tolist()


def embeddings(req: Request) -> Reply:
    inputs = req.body["input"]
    data = [{"object": "embedding", "index": i, "embedding": fake_vector(t)} for i, t in enumerate(inputs)]
    return Reply(body={"object": "list", "data": data, "model": req.body["model"]})


def code_versions(home_dir) -> dict[str, str]:
    """Asset code versions as a fresh process loading the definitions for ``home_dir`` sees them."""
    code = ("import json; from fabric_assets.definitions import defs; "
            "g = defs().resolve_asset_graph(); "
            "print(json.dumps({k.to_user_string(): g.get(k).code_version for k in g.get_all_asset_keys()}))")
    env = {**os.environ, "FABRIC_HOME": str(home_dir), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_model_change_reprojects_only_the_dense_projection(fabric_home, tmp_path):
    from fabric_assets.model_identity import stale_partitions
    from fabric_query.api import Fabric

    src = tmp_path / "docs"
    src.mkdir()
    (src / "keeper.txt").write_text("The lighthouse keeper lit the lamp.\n\nStorms came from the west.\n")
    (src / "bread.txt").write_text("Sourdough bread rises slowly with a lively starter.\n")
    ingest(src, fabric_home)
    before_versions = code_versions(fabric_home.root)
    runs_before = {r.parse_id: (r.status, r.created_at) for r in fabric_home.catalog.parse_runs()}
    tables_before = {t: fabric_home.tables.version(t) for t in ("units", "chunks", "context_windows")}
    chunk_ids = sorted(fabric_home.tables.read("chunks", columns=["chunk_id"]).column("chunk_id").to_pylist())
    active = set(runs_before)
    assert stale_partitions(fabric_home, active) == {}

    with LoopbackServer(embeddings) as server:
        fabric_home.layout.config_file.write_text(json.dumps(
            {"dense": {"backend": "http", "http": {"base_url": server.url + "/v1", "model": "fake-embed"}}}))
        fabric_home.__dict__.pop("config", None)  # FabricHome caches its config
        after_versions = code_versions(fabric_home.root)
        changed = {k for k in before_versions if before_versions[k] != after_versions[k]}
        # Exactly the projections computed by the dense model (annotation vectors share its space).
        assert changed == {"chunk_vectors", "annotation_vectors"}, changed

        stale = stale_partitions(fabric_home, active)
        assert stale == {"chunk_vectors": sorted(active)}

        # Before re-projection, a query never compares an HTTP-model vector with MiniLM vectors.
        fabric = Fabric(fabric_home.root)
        pack = fabric.search("lighthouse lamp")
        assert "dense" in pack.skipped_channels and "model-mismatch" in pack.skipped_channels["dense"]
        assert "dense" not in pack.channels_run and pack.results  # lexical still answers

        served_before = len(server.requests)
        summary = ingest(src, fabric_home)
        assert summary.reproject_run_ids and not summary.failed_runs
        assert len(server.requests) > served_before  # the chunks were embedded by the new model
        # No re-parse: the same parse runs, still ready; canonical and chunk tables at the same versions
        # (only the vectors verdict of each parse was recorded again).
        assert {r.parse_id: (r.status, r.created_at) for r in fabric_home.catalog.parse_runs()} == runs_before
        assert {t: fabric_home.tables.version(t) for t in tables_before} == tables_before
        assert sorted(fabric_home.tables.read("chunks", columns=["chunk_id"]).column("chunk_id").to_pylist()) == chunk_ids
        vectors = fabric_home.tables.read("chunk_vectors", columns=["chunk_id", "model"])
        assert set(vectors.column("model").to_pylist()) == {"http:fake-embed@" + server.url + "/v1:dim384"}
        assert stale_partitions(fabric_home, active) == {}

        fabric = Fabric(fabric_home.root)
        pack = fabric.search("lighthouse lamp")
        assert pack.skipped_channels == {} and "dense" in pack.channels_run
        # The release that answered pins the re-projected table version.
        manifest = fabric_home.catalog.release(pack.release_id).manifest
        assert manifest["tables"]["chunk_vectors"] == fabric_home.tables.version("chunk_vectors")


def test_unchanged_models_skip_the_stale_check_and_a_model_change_runs_it(fabric_home, tmp_path, monkeypatch):
    """guards against: every ingest reading all active parses' vector rows (a cost that grows
    with the corpus), and against skipping the check after a model change."""
    import fabric_assets.ingest as ingest_module
    from fabric_assets.model_identity import expected_identities

    src = tmp_path / "docs"
    src.mkdir()
    (src / "keeper.txt").write_text("The lighthouse keeper lit the lamp.\n")
    ingest(src, fabric_home)
    assert fabric_home.catalog.state(ingest_module.PROJECTION_MODELS) == expected_identities(fabric_home.config)
    calls = []
    real = ingest_module.stale_partitions
    monkeypatch.setattr(ingest_module, "stale_partitions", lambda *a: calls.append(a) or real(*a))
    (src / "bread.txt").write_text("Sourdough bread rises slowly with a lively starter.\n")
    ingest(src, fabric_home)
    assert calls == []
    with LoopbackServer(embeddings) as server:
        fabric_home.layout.config_file.write_text(json.dumps(
            {"dense": {"backend": "http", "http": {"base_url": server.url + "/v1", "model": "fake-embed"}}}))
        fabric_home.__dict__.pop("config", None)
        summary = ingest(src, fabric_home)
        assert len(calls) == 1 and summary.reproject_run_ids and not summary.failed_runs
        assert fabric_home.catalog.state(ingest_module.PROJECTION_MODELS) == expected_identities(fabric_home.config)
