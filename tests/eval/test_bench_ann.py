"""`fabric bench ann`: growth by seeded perturbation (pure parts), and a tiny run end to end."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from conftest import ingest

from fabric_assets.measurement.bench_ann import (
    bench_ann,
    calibrate_sigma,
    derived_id,
    nearest_other_cosines,
    perturbed,
    summary_rows,
)

WORDS = ("harbour tide lamp keeper stairs ledger storm boat herring dawn river bridge mill flour baker "
         "garden orchard apple winter summer letter road carriage station clock tower bell market salt "
         "copper iron forge smith wheel cart field barley wheat rain cloud wind sail anchor rope net").split()


def _unit_rows(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_perturbation_is_seeded_unit_norm_and_at_the_calibrated_distance():
    """guards against: an unseeded growth (two runs measuring different corpora), copies that are
    not unit vectors, or a σ that does not give the cosine it was calibrated for."""
    base = _unit_rows(2000, 1)
    centres = _unit_rows(20, 2)
    base = centres[np.arange(2000) % 20] + 0.9 * base  # some neighbourhood structure
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    sigma, c_nn = calibrate_sigma(base, seed=0)
    assert 0 < c_nn < 1 and math.isclose(1 / math.sqrt(1 + sigma ** 2), c_nn, rel_tol=1e-9)
    a, b = perturbed(base, sigma, 0, 3), perturbed(base, sigma, 0, 3)
    assert np.array_equal(a, b) and not np.array_equal(a, perturbed(base, sigma, 0, 4))
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    cos_to_origin = np.einsum("ij,ij->i", a, base)
    assert abs(float(np.median(cos_to_origin)) - c_nn) < 0.02
    # the statistic leaves a row itself (and exact duplicates) out
    assert np.all(nearest_other_cosines(base[:5], base) < 0.9999)


def test_derived_ids_keep_width_and_copy_zero():
    pid = "ab" * 16
    assert derived_id(pid, 0) == pid
    assert len(derived_id(pid, 1)) == len(pid) and derived_id(pid, 1) != derived_id(pid, 2)
    assert all(c in "0123456789abcdef" for c in derived_id(pid, 7))


@pytest.mark.slow
def test_tiny_growth_builds_a_release_and_measures_exact_against_ann(tmp_path, fabric_home):
    """guards against: grown copies sharing chunk or window IDs (rows collapsing in the view), a grown
    release the query side cannot serve (windows naming unknown chunks, a lexical index of other
    documents), an ANN run that does not use the index it built, recall computed on the wrong lists."""
    src = tmp_path / "src"
    src.mkdir()
    rng = random.Random(3)
    for name in ("a.txt", "b.txt", "c.txt"):
        paragraphs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 12))).capitalize() + "."
                      for _ in range(60)]
        (src / name).write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    fabric_home.layout.config_file.write_text(json.dumps({"chunking": {"max_tokens": 16}}))
    assert ingest(src, fabric_home).failed_runs == []
    queries = ["harbour keeper lamp", "winter orchard apple", "copper forge smith"]
    exhaustive = {"partition_rows": 32, "nprobes": 256, "refine_factor": 64}
    result = bench_ann(fabric_home.root, tmp_path / "work", queries, target_rows=700, settings=[exhaustive], repeat=1)
    grown = result["grown"]
    assert grown["copies"] == math.ceil(700 / grown["source_rows"]) >= 2
    assert grown["rows"]["chunk_vectors"] == grown["copies"] * grown["source_rows"]
    assert 0 < grown["grown_median_nearest_cosine"] <= 1 and grown["sigma"] > 0
    exact = result["exact"]
    assert exact["chunks"] == grown["rows"]["chunks"]  # every copy's chunks in the view: no ID collapsed
    assert exact["sources"] == {"english": ["exact"]} and exact["dense_fallback_reasons"] == []
    (ann,) = result["ann"]
    assert ann["build"]["record"]["rows"] == grown["rows"]["chunk_vectors"]
    assert ann["result"]["sources"] == {"english": ["ann"]} and ann["result"]["dense_fallback_reasons"] == []
    recall = ann["result"]["recall"]["english"]
    assert recall["recall@10"]["mean"] == 1.0 and recall["recall@100"]["mean"] == 1.0  # exhaustive settings
    assert recall["hybrid_top10_overlap"]["mean"] == 1.0
    assert set(ann["ratios"]["english"]) == {"end_to_end_p50", "end_to_end_p95", "dense_p50", "dense_p95"}
    assert result["source_default"]["sources"] == {"english": ["exact"]}  # auto keeps the product when small
    assert len(summary_rows(result)) == 3
