"""HTTP dense backend and the shared 429-only retry policy, against a real loopback server."""

from __future__ import annotations

import contextlib
import logging
import random
import re
import socket
import time

import numpy as np
import pytest

from fabric_resources.config import DenseHttpConfig, FabricConfig, HttpEndpointConfig
from fabric_resources.models.api_key import ApiKeyFileError
from fabric_resources.models.embedder import MiniLMEmbedder
from fabric_resources.models.http_embedder import EmbeddingResponseError, HttpEmbedder, dense_backend
from fabric_resources.models.http_retry import (
    ModelEndpoint,
    ModelEndpointError,
    RateLimitedError,
    RetryPolicy,
)
from loopback_http import LoopbackServer, Reply, Request

DIM = 4
KEY = "sk-test-SECRET-9f8e7d"


def vector_for(text: str) -> list[float]:
    """Deterministic, text-dependent, not unit-norm: 't7' → [8, 1, 0, 2]."""
    k = int(text[1:])
    return [k + 1.0, 1.0, 0.0, 2.0]


def expected_unit(texts: list[str]) -> np.ndarray:
    raw = np.array([vector_for(t) for t in texts])
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


def embeddings_reply(req: Request, *, shuffle: bool = True) -> Reply:
    data = [{"object": "embedding", "index": i, "embedding": vector_for(t)} for i, t in enumerate(req.body["input"])]
    if shuffle:
        random.Random(len(data)).shuffle(data)
        data.reverse()  # never the identity order, even for two entries
    return Reply(body={"object": "list", "data": data, "model": req.body["model"]})


@pytest.fixture(scope="module")
def _loopback():
    with LoopbackServer(lambda req: Reply(status=599, body={"error": "no responder set"})) as srv:
        yield srv


@pytest.fixture
def serving(_loopback):
    """``with serving(respond) as srv``: one loopback server per module (starting and stopping one
    costs ~0.5 s), given a fresh responder and an empty request log for each use."""

    @contextlib.contextmanager
    def use(respond):
        _loopback.respond = respond
        _loopback.requests.clear()
        yield _loopback

    return use


def closed_port_url() -> str:
    """``http://127.0.0.1:PORT`` where nothing listens (a port just released by the kernel)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "dense.key"
    path.write_text(KEY + "\n")
    path.chmod(0o600)
    return path


def dense_config(url: str, **overrides) -> DenseHttpConfig:
    settings = dict(base_url=url + "/v1", model="test-embed", dimensions=DIM, batch_size=3,
                    timeout_s=5.0, max_retries=3, initial_backoff_s=0.0, max_backoff_s=0.0)
    settings.update(overrides)
    return DenseHttpConfig(**settings)


def texts(n: int) -> list[str]:
    return [f"t{i}" for i in range(n)]


# --- order, batching, normalisation ------------------------------------------------------------


def test_order_restored_across_shuffled_batches_and_rows_are_unit_norm(serving):
    with serving(embeddings_reply) as srv:
        emb = HttpEmbedder(dense_config(srv.url))
        out = emb.encode_passages(texts(7))
    assert out.shape == (7, DIM) and out.dtype == np.float32
    np.testing.assert_allclose(out, expected_unit(texts(7)), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    # batches of 3, in input order, each an OpenAI-compatible body
    assert [r.path for r in srv.requests] == ["/v1/embeddings"] * 3
    assert [r.body for r in srv.requests] == [
        {"model": "test-embed", "input": ["t0", "t1", "t2"]},
        {"model": "test-embed", "input": ["t3", "t4", "t5"]},
        {"model": "test-embed", "input": ["t6"]},
    ]
    assert "authorization" not in srv.requests[0].headers  # no key file, no header


def test_queries_use_the_same_path_and_empty_input_sends_nothing(serving):
    with serving(embeddings_reply) as srv:
        emb = HttpEmbedder(dense_config(srv.url))
        q = emb.encode_queries(["t5", "t2"])
        empty = emb.encode_passages([])
    np.testing.assert_allclose(q, expected_unit(["t5", "t2"]), atol=1e-6)
    assert empty.shape == (0, DIM) and empty.dtype == np.float32
    assert len(srv.requests) == 1


def test_identity_names_model_endpoint_and_width():
    emb = HttpEmbedder(dense_config("http://127.0.0.1:9", model="bge-small"))
    assert emb.identity == "http:bge-small@http://127.0.0.1:9/v1:dim4"
    trailing = dense_config("http://127.0.0.1:9").model_copy(update={"base_url": "http://127.0.0.1:9/v1/"})
    assert HttpEmbedder(trailing).identity == "http:test-embed@http://127.0.0.1:9/v1:dim4"


def test_smoke_check_embeds_one_string_and_reports_raw_norm(serving):
    def respond(req: Request) -> Reply:
        return Reply(body={"data": [{"index": 0, "embedding": [3.0, 0.0, 4.0, 0.0]}]})
    with serving(respond) as srv:
        check = HttpEmbedder(dense_config(srv.url)).smoke_check()
    assert len(srv.requests) == 1 and len(srv.requests[0].body["input"]) == 1
    assert check.vector_count == 1 and check.dimensions == DIM and check.retried_attempts == 0
    assert check.norm == pytest.approx(5.0)


def test_smoke_check_fails_on_a_bad_vector(serving):
    def respond(req: Request) -> Reply:
        return Reply(body={"data": [{"index": 0, "embedding": [0.0] * DIM}]})
    with serving(respond) as srv, pytest.raises(EmbeddingResponseError):
        HttpEmbedder(dense_config(srv.url)).smoke_check()


# --- validation ------------------------------------------------------------------------------


def _mutate(mutation):
    def respond(req: Request) -> Reply:
        reply = embeddings_reply(req, shuffle=False)
        mutation(reply.body["data"])
        return reply
    return respond


def _set(i, value):
    def m(data):
        data[i]["embedding"] = value
    return m


MUTATIONS = {
    "wrong dimension": (_set(1, [1.0, 2.0, 3.0]), "dimension 3, expected 4"),
    "NaN value": (_set(1, [1.0, float("nan"), 0.0, 0.0]), "non-finite"),
    "infinite value": (_set(1, [1.0, float("inf"), 0.0, 0.0]), "non-finite"),
    "zero vector": (_set(1, [0.0, 0.0, 0.0, 0.0]), "norm 0.0"),
    "norm overflows": (_set(1, [1e200, 1e200, 0.0, 0.0]), "norm inf"),
    "not numbers": (_set(1, ["a", "b", "c", "d"]), "not a list of numbers"),
    "nested list": (_set(1, [[1.0, 2.0], [3.0, 4.0]]), "not a flat list"),
    "missing index (duplicate in its place)": (lambda d: d[2].update(index=1), "appears more than once"),
    "index out of range": (lambda d: d[2].update(index=3), "not an integer in [0, 3)"),
    "index missing from entry": (lambda d: d[0].pop("index"), "not an integer"),
    "one vector too few": (lambda d: d.pop(), "returned 2 vectors for 3 inputs"),
    "one vector too many": (lambda d: d.append(dict(d[0])), "returned 4 vectors for 3 inputs"),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_invalid_response_raises_naming_the_failure(name, serving):
    mutation, words = MUTATIONS[name]
    with serving(_mutate(mutation)) as srv:
        emb = HttpEmbedder(dense_config(srv.url))
        with pytest.raises(EmbeddingResponseError, match=re.escape(words)):
            emb.encode_passages(texts(3))


def test_validation_names_the_input_position_over_the_whole_call(serving):
    def respond(req: Request) -> Reply:
        reply = embeddings_reply(req, shuffle=False)
        if req.body["input"][0] == "t3":  # second batch
            reply.body["data"][1]["embedding"] = [0.0] * DIM
        return reply
    with serving(respond) as srv, pytest.raises(EmbeddingResponseError, match="input 4 "):
        HttpEmbedder(dense_config(srv.url)).encode_passages(texts(6))


def test_non_json_and_shapeless_bodies_raise(serving):
    with serving(lambda req: Reply(body=b"<html>oops</html>")) as srv:
        with pytest.raises(ModelEndpointError, match="not JSON"):
            HttpEmbedder(dense_config(srv.url)).encode_passages(["t0"])
    with serving(lambda req: Reply(body={"embeddings": []})) as srv:
        with pytest.raises(EmbeddingResponseError, match="no 'data' list"):
            HttpEmbedder(dense_config(srv.url)).encode_passages(["t0"])


# --- retry policy ----------------------------------------------------------------------------


def scripted(statuses: list[int], headers: dict[str, str] | None = None):
    """Reply with each status in turn (429s carry ``headers``), then embeddings."""
    calls = iter(statuses)

    def respond(req: Request) -> Reply:
        status = next(calls, 200)
        if status == 200:
            return embeddings_reply(req)
        return Reply(status=status, body={"error": f"status {status}"}, headers=headers or {})
    return respond


def test_429_then_success_is_retried(serving):
    with serving(scripted([429, 429])) as srv:
        emb = HttpEmbedder(dense_config(srv.url, max_retries=3))
        out = emb.encode_passages(texts(2))
    assert len(srv.requests) == 3
    assert emb.last_retries == 2
    np.testing.assert_allclose(out, expected_unit(texts(2)), atol=1e-6)


def test_429s_beyond_max_retries_raise_after_exactly_max_retries_plus_one_requests(serving):
    with serving(scripted([429] * 10)) as srv:
        emb = HttpEmbedder(dense_config(srv.url, max_retries=2))
        with pytest.raises(RateLimitedError) as info:
            emb.encode_passages(texts(2))
    assert len(srv.requests) == 3
    assert info.value.status == 429 and info.value.retries == 2 and emb.last_retries == 2
    assert "after 2 retries" in str(info.value)


def test_max_retries_zero_means_one_request(serving):
    with serving(scripted([429])) as srv:
        with pytest.raises(RateLimitedError):
            HttpEmbedder(dense_config(srv.url, max_retries=0)).encode_passages(["t0"])
    assert len(srv.requests) == 1


@pytest.mark.parametrize("status", [400, 401, 500, 502, 503])
def test_other_statuses_are_not_retried(status, serving):
    with serving(scripted([status])) as srv:
        with pytest.raises(ModelEndpointError) as info:
            HttpEmbedder(dense_config(srv.url, max_retries=5)).encode_passages(["t0"])
    assert len(srv.requests) == 1
    assert info.value.status == status and info.value.reason == "status" and info.value.retries == 0
    assert f"status {status}" in str(info.value)  # the body excerpt helps the operator


def test_timeout_raises_promptly_and_is_not_retried(serving):
    with serving(lambda req: Reply(body={}, delay_s=3.0)) as srv:
        emb = HttpEmbedder(dense_config(srv.url, timeout_s=0.2, max_retries=3))
        start = time.monotonic()
        with pytest.raises(ModelEndpointError) as info:
            emb.encode_passages(["t0"])
        elapsed = time.monotonic() - start
    assert info.value.reason == "timeout" and info.value.status is None
    assert elapsed < 2.5  # the reply comes after 3 s; slack for a loaded host
    assert len(srv.requests) == 1


def test_connection_refused_is_a_transport_error():
    url = closed_port_url()
    with pytest.raises(ModelEndpointError) as info:
        HttpEmbedder(dense_config(url)).encode_passages(["t0"])
    assert info.value.reason == "transport" and info.value.status is None


def _endpoint(url: str, sleeps: list[float], **overrides) -> ModelEndpoint:
    settings = dict(base_url=url, model="m", timeout_s=5.0, max_retries=4, initial_backoff_s=0.5, max_backoff_s=1.5)
    settings.update(overrides)
    return ModelEndpoint(HttpEndpointConfig(**settings), sleep=sleeps.append)


def test_backoff_is_exponential_and_capped(serving):
    sleeps: list[float] = []
    with serving(scripted([429] * 4)) as srv:
        body = _endpoint(srv.url, sleeps).post_json("embeddings", {"model": "m", "input": ["t0"]})
    assert body["data"][0]["index"] == 0
    assert sleeps == [0.5, 1.0, 1.5, 1.5]


def test_retry_after_seconds_is_honoured_and_capped(serving):
    sleeps: list[float] = []
    with serving(scripted([429], headers={"Retry-After": "1"})) as srv:
        _endpoint(srv.url, sleeps).post_json("embeddings", {"model": "m", "input": ["t0"]})
    with serving(scripted([429], headers={"Retry-After": "120"})) as srv:
        _endpoint(srv.url, sleeps).post_json("embeddings", {"model": "m", "input": ["t0"]})
    with serving(scripted([429], headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})) as srv:
        _endpoint(srv.url, sleeps).post_json("embeddings", {"model": "m", "input": ["t0"]})
    assert sleeps == [1.0, 1.5, 0.5]  # header; header capped at max_backoff_s; date form → exponential


def test_retry_policy_delays():
    p = RetryPolicy(max_retries=3, initial_backoff_s=0.25, max_backoff_s=8.0)
    assert [p.delay_s(k) for k in (1, 2, 3, 4, 5, 6)] == [0.25, 0.5, 1.0, 2.0, 4.0, 8.0]
    assert p.delay_s(1, retry_after_s=0.0) == 0.0
    assert RetryPolicy(3, 0.5, 8.0).delay_s(10_000) == 8.0  # no overflow


# --- the key ---------------------------------------------------------------------------------


def test_bearer_key_is_sent_and_never_in_errors_or_logs(key_file, caplog, serving):
    caplog.set_level(logging.DEBUG)

    def respond(req: Request) -> Reply:
        if len(srv.requests) == 1:
            return Reply(status=429, body={"error": "slow down"})
        # a careless server echoing the credential back in its error body
        return Reply(status=500, body={"error": f"bad header {req.headers.get('authorization')}"})

    with serving(respond) as srv:
        emb = HttpEmbedder(dense_config(srv.url, api_key_file=str(key_file)))
        with pytest.raises(ModelEndpointError) as info:
            emb.encode_passages(["t0"])
    assert [r.headers["authorization"] for r in srv.requests] == [f"Bearer {KEY}"] * 2
    assert KEY not in str(info.value) and KEY not in repr(info.value)
    assert "bad header Bearer ***" in str(info.value)
    assert "model_call.http_retry" in caplog.text  # the retry was logged …
    assert KEY not in caplog.text  # … without the key
    assert KEY not in repr(emb.facts) and emb.facts.api_key_file == str(key_file)


def test_group_readable_key_file_is_refused(key_file):
    key_file.chmod(0o640)
    with pytest.raises(ApiKeyFileError, match="owner-only"):
        HttpEmbedder(dense_config("http://127.0.0.1:9", api_key_file=str(key_file)))


# --- backend selection -----------------------------------------------------------------------


def test_dense_backend_is_exclusive_by_config(key_file):
    http = dense_config("http://127.0.0.1:9", api_key_file=str(key_file))
    local = dense_backend(FabricConfig.model_validate({"dense": {"backend": "local", "http": http.model_dump()}}))
    assert isinstance(local, MiniLMEmbedder)  # an http section alone does not switch the role
    remote = dense_backend(FabricConfig.model_validate({"dense": {"backend": "http", "http": http.model_dump()}}))
    assert isinstance(remote, HttpEmbedder) and remote.identity.startswith("http:test-embed@")


def test_http_backend_never_falls_back_to_local():
    url = closed_port_url()
    backend = dense_backend(FabricConfig.model_validate(
        {"dense": {"backend": "http", "http": dense_config(url).model_dump()}}))
    with pytest.raises(ModelEndpointError):
        backend.smoke_check()
    with pytest.raises(ModelEndpointError):
        backend.encode_queries(["t0"])
