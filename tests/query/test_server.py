"""`fabric serve`'s read side against a real uvicorn on loopback: every read route, the admission
gate, Host / Origin checks, bounded bodies, JSON errors, and a seeded fuzz that never yields a 500."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from conftest import ingest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from live_server import RecordingAdmin, live_server, wait_ready
from slow_stages import SlowStages

from fabric_query import Fabric
from fabric_query.server.app import create_app
from fabric_resources.catalog import CatalogUnavailableError
from fabric_resources.config import ServerConfig
from fabric_resources.home import FabricHome

FILES = {
    "a.txt": "The lighthouse keeper logged the tide.\n\nA storm broke the lamp in March.\n",
    "b.md": "# Lenses\n\nLighthouse lenses focus the lamp into a beam.\n",
    "c.txt": "認証トークンは利用者を示す文字列です。\n\n有効期限が切れたら再発行します。\n",
    "private/diary.txt": "lighthouse keeper secret diary entry about the lamp\n",
}


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    folder = root / "corpus"
    for rel, text in FILES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    home = FabricHome(root / "home")
    home.layout.config_file.write_text(json.dumps({"sources": {"withheld": ["corpus/private/*"]}}))
    ingest(folder, home)
    return home


@pytest.fixture(scope="module")
def fabric(home):
    return Fabric(home.root)


@pytest.fixture(scope="module")
def server(fabric):
    with live_server(lambda port: create_app(fabric, ServerConfig(), port=port)) as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            wait_ready(client)
            yield client


def _error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) == {"error"} and body["error"]["type"] and body["error"]["message"]
    return body["error"]


def _pack_view(pack: dict) -> dict:
    return {k: v for k, v in pack.items() if k != "timings"}


def test_health_and_ready(server):
    assert server.get("/v1/health").json() == {"status": "ok"}
    ready = server.get("/v1/ready").json()
    assert ready["ready"] is True and ready["models"]["dense"] and ready["models"]["multilingual"]


def test_health_does_no_io_and_ready_waits_for_the_models(fabric):
    """guards against: a server that reports ready before its query models load, or a health
    check that touches storage (it must answer while the models are still loading)."""
    loading = threading.Event()

    def slow_models(_fabric):
        loading.wait(30)
        return {"dense": "test"}

    with live_server(lambda port: create_app(fabric, ServerConfig(), port=port, load_models=slow_models)) as url:
        with httpx.Client(base_url=url, timeout=10) as client:
            assert client.get("/v1/health").status_code == 200
            r = client.get("/v1/ready")
            _error(r, 503)
            assert r.headers["retry-after"] == "1"
            _error(client.post("/v1/search", json={"query": "lamp"}), 503)
            loading.set()
            assert wait_ready(client)["models"] == {"dense": "test"}


def test_search_over_http_equals_the_python_api(server, fabric):
    for query in ("lighthouse keeper", "認証トークン", '"lighthouse keeper" -storm'):
        r = server.post("/v1/search", json={"query": query, "limit": 5})
        assert r.status_code == 200, r.text
        direct = json.loads(fabric.search(query, limit=5).model_dump_json())
        assert _pack_view(r.json()) == _pack_view(direct), query
    assert all("private" not in h["citation"]["source_key"]
               for h in server.post("/v1/search", json={"query": "lighthouse diary"}).json()["results"])


def test_resolve_verifies_a_cited_hit_and_never_substitutes(server):
    hit = server.post("/v1/search", json={"query": "lighthouse"}).json()["results"][0]
    r = server.post("/v1/resolve", json={"citation": hit["citation"]})
    assert r.status_code == 200 and r.json()["status"] == "verified"
    bad = {**hit["citation"], "text_hash": "0" * 64}
    r = server.post("/v1/resolve", json={"citation": bad})
    assert r.status_code == 200 and r.json()["status"] == "stale" and r.json()["text"] is None
    _error(server.post("/v1/resolve", json={"citation": {**hit["citation"], "chunk_id": "zz"}}), 400)
    # With the text the hit showed: it must be the cited passage (hit-text), else stale without text.
    shown = server.post("/v1/resolve", json={"citation": hit["citation"], "text": hit["text"]}).json()
    assert shown["status"] == "verified" and shown["checks"][-1] == {
        "check": "hit-text", "ok": True, "detail": "the hit's text is the cited passage"}
    edited = server.post("/v1/resolve", json={"citation": hit["citation"], "text": hit["text"] + " (edited)"}).json()
    assert edited["status"] == "stale" and edited["text"] is None and edited["checks"][-1]["ok"] is False
    _error(server.post("/v1/resolve", json={"citation": hit["citation"], "text": 12}), 422)


def test_status_sources_release_and_units(server, fabric):
    from fabric_query.server.client_view import client_status

    status = server.get("/v1/status").json()
    assert status == client_status(fabric)  # no admin token: a client's view
    sources = server.get("/v1/sources").json()
    by_key = {s["source_key"]: s for s in sources["sources"]}
    assert "fs:corpus/private/diary.txt" not in by_key
    assert by_key["fs:corpus/a.txt"]["active_parse_id"]
    release = server.get("/v1/releases/current").json()
    assert release["release_id"] == sources["release_id"] == status["release_id"]
    assert release["sources"] == 3  # the withheld source is in no count
    hit = server.post("/v1/search", json={"query": "lamp"}).json()["results"][0]
    span = hit["citation"]["spans"][0]
    unit = server.get(f"/v1/units/{span['unit_id']}").json()
    assert unit["text"][span["start_char"]:span["end_char"]] in hit["text"]
    assert unit["parse_id"] == hit["citation"]["parse_id"] and isinstance(unit["locator"], dict)
    _error(server.get("/v1/units/" + "0" * 32), 404)
    _error(server.get("/v1/units/not-hex"), 422)


def test_a_unit_withheld_since_is_answered_as_one_that_never_existed(tmp_path):
    """guards against: /v1/units and /v1/sources telling a source that is withheld now (after its
    release was published) from one that never existed."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "open.txt").write_text("The lamp room is open to visitors.\n", encoding="utf-8")
    (folder / "secret.txt").write_text("The secret lamp code is written here.\n", encoding="utf-8")
    home = FabricHome(tmp_path / "home")
    ingest(folder, home)
    fabric = Fabric(home.root)
    with live_server(lambda port: create_app(fabric, ServerConfig(), port=port)) as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            wait_ready(client)
            hit = next(h for h in client.post("/v1/search", json={"query": "secret lamp code"}).json()["results"]
                       if h["citation"]["source_key"] == "fs:corpus/secret.txt")
            unit_id = hit["citation"]["spans"][0]["unit_id"]
            assert client.get(f"/v1/units/{unit_id}").status_code == 200
            home.layout.config_file.write_text(json.dumps({"sources": {"withheld": ["corpus/secret.txt"]}}))
            r = client.get(f"/v1/units/{unit_id}")
            assert _error(r, 404) == _error(client.get("/v1/units/" + "0" * 32), 404)
            listed = {s["source_key"]: s for s in client.get("/v1/sources").json()["sources"]}
            assert "fs:corpus/secret.txt" not in listed and "secret" not in client.get("/v1/status").text
            assert client.get("/v1/releases/current").json()["sources"] == 1


@pytest.mark.parametrize("body, status", [
    ({"query": "lamp", "bogus": 1}, 422),
    ({"query": "lamp", "limit": "5"}, 422),
    ({"query": "lamp", "limit": True}, 422),
    ({"query": "lamp", "limit": 0}, 400),
    ({"query": "lamp", "debug": "yes"}, 422),
    ({"query": ""}, 400),
    ({"query": "x" * 1001}, 400),
    ({"query": 'unclosed "quote'}, 400),
    ({"query": "lamp paht:corpus"}, 400),
    ({"query": "lamp", "channels": ["nope"]}, 400),
    ({"query": "lamp", "release_id": 999999}, 409),
    ({"query": "lamp", "scope": {"pathprefix": ["a"]}}, 422),
    ({}, 422),
    ([], 422),
])
def test_bad_requests_are_json_4xx(server, body, status):
    _error(server.post("/v1/search", json=body), status)


def test_unknown_routes_methods_and_non_json_are_json_errors(server):
    _error(server.get("/v1/nope"), 404)
    _error(server.get("/v1/search"), 405)
    _error(server.post("/v1/search", content=b"{not json", headers={"content-type": "application/json"}), 422)
    _error(server.post("/v1/search", content=b"\xff\xfe", headers={"content-type": "application/json"}), 422)


@pytest.mark.parametrize("route, body, reason", [
    ("/v1/search", b'{"query": "lamp", "query": "storm"}', "duplicate key 'query'"),
    ("/v1/search", b'{"query": "lamp", "scope": {"path_prefix": ["a"], "path_prefix": ["b"]}}',
     "duplicate key 'path_prefix'"),
    ("/v1/resolve", b'{"citation": {}, "text": "a", "text": "b"}', "duplicate key 'text'"),
    ("/v1/search", b'{"query": "lamp", ', "Expecting property name enclosed in double quotes at character 18"),
    ("/v1/search", b'{"query": "lamp", "scope": ' + b"[" * 30_000 + b"]" * 30_000 + b"}",
     "arrays or objects nest too deeply"),
    ("/v1/resolve", b'{"citation": ' + b'{"a": ' * 9_000 + b"1" + b"}" * 9_000 + b"}", "arrays or objects nest too deeply"),
])
def test_a_body_naming_a_key_twice_or_cut_short_is_refused_with_its_reason(server, route, body, reason):
    """guards against (hostile trial 6, left open then): a key named twice silently meaning its
    last value (a proxy that checked the first would pass a different request than Fabric ran);
    a truncated body answered with only ``body.18: JSON decode error``. And (trial 14b) a body
    nested 30,000 deep on a read route: 400 ``HTTPError`` "There was an error parsing the body"
    (FastAPI's words for a ``RecursionError``), where the admin routes said 422 and why."""
    r = server.post(route, content=body, headers={"content-type": "application/json"})
    assert _error(r, 422)["type"] == "RequestValidationError"
    assert r.json()["error"]["message"] == f"the body is not JSON: {reason}", r.text
    once = server.post("/v1/search", content=b'{"query": "storm"}', headers={"content-type": "application/json"})
    assert once.status_code == 200, once.text


def test_bodies_are_bounded(fabric):
    config = ServerConfig(max_body_bytes=1024)
    with live_server(lambda port: create_app(fabric, config, port=port)) as url:
        with httpx.Client(base_url=url, timeout=30) as client:
            wait_ready(client)
            _error(client.post("/v1/search", json={"query": "lamp " * 400}), 413)

            def chunked():  # no Content-Length: read up to the bound, refused past it
                for _ in range(100):
                    yield b" " * 100

            _error(client.post("/v1/search", content=chunked(), headers={"content-type": "application/json"}), 413)
            assert client.post("/v1/search", json={"query": "lamp"}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1.evil.example", "localhost@evil", "", "a b"])
def test_bad_host_is_421(server, host):
    """guards against: DNS rebinding (a page on evil.example resolving to 127.0.0.1)."""
    _error(server.get("/v1/health", headers={"host": host}), 421)
    _error(server.post("/v1/search", json={"query": "lamp"}, headers={"host": host}), 421)


def test_good_hosts_pass(server):
    port = server.base_url.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}"):
        assert server.get("/v1/health", headers={"host": host}).status_code == 200, host


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://localhost:1", "file://", "http://127.0.0.1.evil"])
def test_bad_origin_is_403(server, origin):
    """guards against: a web page in the user's browser reading or driving the local server."""
    _error(server.post("/v1/search", json={"query": "lamp"}, headers={"origin": origin}), 403)


def test_own_origin_passes(server):
    port = server.base_url.port
    assert server.post("/v1/search", json={"query": "lamp"},
                       headers={"origin": f"http://localhost:{port}"}).status_code == 200


class _SlowFabric:
    """Wraps a Fabric; every search waits for ``release`` first (to fill the gate)."""

    def __init__(self, fabric: Fabric) -> None:
        self._fabric = fabric
        self.home = fabric.home
        self.encoder = fabric.encoder
        self.reranker = None
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)

    def search(self, *args, **kwargs):
        self.entered.release()
        self.release.wait(30)
        return self._fabric.search(*args, **kwargs)


def test_full_gate_answers_503_with_retry_after_at_once(fabric):
    """guards against: queueing past the gate (overload turned into timeouts), or a gate that
    admits more than max_concurrent_queries."""
    slow = _SlowFabric(fabric)
    config = ServerConfig(max_concurrent_queries=2, retry_after_s=3)
    with live_server(lambda port: create_app(slow, config, port=port)) as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            wait_ready(client)
            with ThreadPoolExecutor(2) as pool:
                running = [pool.submit(client.post, "/v1/search", json={"query": "lamp"}) for _ in range(2)]
                for _ in range(2):
                    assert slow.entered.acquire(timeout=30)
                started = time.perf_counter()
                r = client.post("/v1/search", json={"query": "lamp"})
                # At once: the admitted searches hold the gate for up to 30 s; the bound leaves a
                # loaded CI host slack without letting a queued request pass.
                assert time.perf_counter() - started < 5.0
                assert _error(r, 503)["type"] == "GateFull"
                assert r.headers["retry-after"] == "3"
                assert client.get("/v1/health").status_code == 200  # health is never gated
                slow.release.set()
                assert [f.result().status_code for f in running] == [200, 200]
            assert client.post("/v1/search", json={"query": "lamp"}).status_code == 200


def _post_search(port: int, query: str) -> socket.socket:
    """A raw connection that has sent one whole ``POST /v1/search`` (the caller hangs up on it)."""
    body = json.dumps({"query": query}).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (port, len(body), body))
    return sock


def _until(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_client_that_disconnects_stops_its_search_and_frees_its_slot(fabric, monkeypatch):
    """guards against: a search whose client hung up running to its end (20 s here), holding its
    gate slot and a thread all that while, so a few impatient clients refused everyone with 503s
    (was: the slot freed only when the query ended). Now the search stops at its next stage
    boundary: after 6 disconnected clients the gate is empty within a second or so, a new query is
    admitted at once, and no stage of theirs runs after that."""
    from fabric_query import pipeline

    slow = SlowStages()
    monkeypatch.setattr(pipeline, "RESCORING", (slow,) * 100)
    config = ServerConfig(max_concurrent_queries=2, retry_after_s=1)
    with live_server(lambda port: create_app(fabric, config, port=port)) as url:
        port = int(url.rsplit(":", 1)[1])
        with httpx.Client(base_url=url, timeout=60) as client:
            wait_ready(client)
            in_flight = lambda: client.get("/v1/ready").json()["in_flight"]  # noqa: E731
            for _ in range(3):
                slow.threads.clear()
                socks = [_post_search(port, "lamp slowly") for _ in range(2)]
                assert _until(lambda: len(slow.threads) == 2, 30), "the slow searches did not start"
                assert _error(client.post("/v1/search", json={"query": "lamp"}), 503)["type"] == "GateFull"
                for sock in socks:
                    sock.close()
                assert _until(lambda: in_flight() == 0, 5), "a disconnected client's search kept its slot"
            runs = slow.runs
            started = time.perf_counter()
            r = client.post("/v1/search", json={"query": "lamp"})
            assert r.status_code == 200 and time.perf_counter() - started < 5.0
            time.sleep(0.5)
            assert slow.runs == runs, "a disconnected client's search went on running"
            assert runs < 6 * 100 // 4  # each stopped within the first quarter of its stages
            # A client that waits gets its answer (cancellation only follows a disconnect).
            monkeypatch.setattr(pipeline, "RESCORING", (slow,) * 3)
            assert client.post("/v1/search", json={"query": "lamp slowly"}).status_code == 200


def test_bearer_comparison_is_exact():
    from fabric_query.server.security import bearer_matches

    assert bearer_matches("Bearer abcdefghijklmnop", "abcdefghijklmnop")
    assert bearer_matches("bearer abcdefghijklmnop", None, "abcdefghijklmnop")
    for header in (None, "", "Bearer", "Bearer abcdefghijklmno", "Basic abcdefghijklmnop",
                   "Bearer abcdefghijklmnopq", "Bearer \udcff"):
        assert not bearer_matches(header, "abcdefghijklmnop")


# --- seeded fuzz -----------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
_field_values = st.one_of(_json, st.sampled_from(["lamp", "", "a" * 1200, "lamp path:", "x lang:ja", 0, -1, 10**9]))
_search_bodies = st.fixed_dictionaries(
    {"query": st.one_of(st.text(max_size=40), _json)},
    optional={k: _field_values for k in ("limit", "scope", "max_tokens", "debug", "release_id", "channels", "extra")},
) | st.fixed_dictionaries({"query": st.just("lamp"), "scope": st.dictionaries(
    st.sampled_from(["source_keys", "path_prefixes", "media_types", "languages", "modified_after",
                     "modified_before", "nope"]), _json, max_size=3)})


@settings(derandomize=True, max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=st.sampled_from(["/v1/search", "/v1/resolve", "/v1/admin/ingest", "/v1/search"]),
       body=st.one_of(_search_bodies, _json, st.binary(max_size=40)))
def test_fuzzed_bodies_never_yield_a_500(server, path, body):
    if isinstance(body, bytes):
        r = server.post(path, content=body, headers={"content-type": "application/json"})
    else:
        r = server.post(path, json=body)
    assert r.status_code < 500, (body, r.text)
    if r.status_code >= 400:
        assert "error" in r.json()


def test_a_config_edited_into_an_invalid_one_is_a_503_naming_it_not_a_500(server, home):
    """guards against: an InternalError 500 with the ConfigError only in the server's log when the
    home's config is edited into an invalid one while the server runs (fresh-user trial)."""
    path = home.layout.config_file
    good = path.read_text()
    try:
        path.write_text(json.dumps({"sources": {"withheld": ["corpus/private/*"]},
                                    "query": {"dense_window_weight": "abc"}}))
        err = _error(server.post("/v1/search", json={"query": "lighthouse"}), 503)
        assert err["type"] == "ConfigError" and "dense_window_weight" in err["message"]
    finally:
        path.write_text(good)
    assert server.post("/v1/search", json={"query": "lighthouse"}).status_code == 200


def test_a_catalog_that_cannot_be_reached_is_a_503_naming_it_not_a_500(server, fabric, monkeypatch):
    """guards against: an InternalError 500 ("see its log") while the PostgreSQL catalog is down
    or restarting; the client is told which catalog and that it may retry."""

    class Down:
        def __getattr__(self, name):
            def unavailable(*args, **kwargs):
                raise CatalogUnavailableError("catalog postgres:db:5432/fabric schema fabric: Connection refused")
            return unavailable

    monkeypatch.setattr(fabric.home, "catalog", Down())
    r = server.post("/v1/search", json={"query": "lighthouse"})
    err = _error(r, 503)
    assert err["type"] == "CatalogUnavailableError" and "Connection refused" in err["message"]
    assert r.headers["retry-after"] == "5"
    monkeypatch.undo()
    assert server.post("/v1/search", json={"query": "lighthouse"}).status_code == 200


def test_sources_is_one_read_an_activation_between_its_reads_changes_nothing(tmp_path, monkeypatch):
    """guards against (trial 18c): /v1/sources read the pinned release's parse IDs, then the
    catalog's sources apart: an ingest between the two (a changed file scanned and activated)
    answered the old release's ID and parse ID with the new version's hash. A real ingest of the
    changed file is run just after the release is pinned; the answer must be the one before."""
    import fabric_query.server.routes as routes

    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "tide.txt").write_text("The tide table was written in green ink.\n", encoding="utf-8")
    home = FabricHome(tmp_path / "home")
    ingest(folder, home)
    fabric = Fabric(home.root)
    before = routes._sources(fabric)
    real_view, ingested = routes.pinned_view, []

    def view_then_ingest(*args, **kwargs):
        view = real_view(*args, **kwargs)
        if not ingested:  # between the release read and whatever the route reads after it
            (folder / "tide.txt").write_text("The tide table was rewritten in red ink.\n", encoding="utf-8")
            ingested.append(ingest(folder, FabricHome(home.root)))
        return view

    monkeypatch.setattr(routes, "pinned_view", view_then_ingest)
    during = routes._sources(fabric)
    monkeypatch.undo()
    assert ingested and FabricHome(home.root).catalog.current_release_id() != before["release_id"]
    assert during == before
    after = routes._sources(fabric)  # the next answer is the new release's, as one read too
    [old], [new] = before["sources"], after["sources"]
    assert after["release_id"] != before["release_id"]
    assert new["source_hash"] != old["source_hash"] and new["active_parse_id"] != old["active_parse_id"]
    # A release retired under every try (retention, a purge) is the busy catalog's 503, not a NameError.
    monkeypatch.setattr(routes, "pinned_view", lambda *a, **k: None)
    with pytest.raises(CatalogUnavailableError, match="retired while /v1/sources read it"):
        routes._sources(fabric)


def test_an_admin_request_with_two_authorizations_is_refused_whichever_comes_first(fabric):
    """guards against (hostile trial 20d): an admin request carrying two Authorization headers, the
    admin token first and anything second, ran the operation (202), though the guard calls a
    repeated Authorization ambiguous and refuses it for the read token: a proxy or audit log that
    reads the last value saw other credentials than the ones Fabric checked."""
    token = "t" * 43
    admin = RecordingAdmin()
    with live_server(lambda port: create_app(fabric, ServerConfig(), port=port, admin=admin, admin_token=token)) as url:
        with httpx.Client(base_url=url, timeout=30) as client:
            good, other = ("authorization", f"Bearer {token}"), ("authorization", "Bearer someone-else")
            for headers in ([good, other], [other, good], [good, good]):
                _error(client.post("/v1/admin/snapshot", json={}, headers=headers), 401)
                _error(client.get("/v1/operations/" + "0" * 32, headers=headers), 401)
            assert admin.submitted == []
            r = client.post("/v1/admin/snapshot", json={}, headers=[good])  # one is enough
            assert r.status_code == 202 and admin.submitted == [("snapshot", {"note": ""})], r.text
            assert client.get("/v1/operations/" + "0" * 32, headers=[good]).status_code == 200


def test_withheld_sources_are_named_only_to_the_operator(fabric):
    """guards against (hostile trial 20d): ``/v1/status`` and ``/v1/sources`` naming withheld
    sources to every client — with the read token, to everyone it is handed to when the server
    binds another interface than loopback — while the MCP ``status`` tool, the same audience,
    neither names nor counts them. A file's name can be the secret. Only the admin token (the
    operator, whose ``fabric status`` goes through the server with it) sees them, as in-process."""
    from fabric_query.server.client_view import client_status

    admin_token, read_token = "a" * 43, "r" * 43
    withheld = "fs:corpus/private/diary.txt"
    assert withheld in fabric.status().withheld  # the fixture withholds it
    with live_server(lambda port: create_app(fabric, ServerConfig(), port=port, read_token=read_token,
                                             admin=RecordingAdmin(), admin_token=admin_token)) as url:
        reader = {"authorization": f"Bearer {read_token}"}
        with httpx.Client(base_url=url, timeout=60, headers=reader) as client:
            wait_ready(client)
            status, sources = client.get("/v1/status"), client.get("/v1/sources")
            assert status.json() == client_status(fabric)
            assert "private" not in status.text and "private" not in sources.text
            assert {s["source_key"] for s in sources.json()["sources"]} >= {"fs:corpus/a.txt"}
            operator = {"authorization": f"Bearer {admin_token}"}
            assert client.get("/v1/status", headers=operator).json() == json.loads(fabric.status().model_dump_json())
            listed = {s["source_key"]: s for s in client.get("/v1/sources", headers=operator).json()["sources"]}
            assert listed[withheld] == {"source_key": withheld, "state": "withheld"}
            _error(client.get("/v1/sources", headers={"authorization": f"Bearer {admin_token}x"}), 401)


def test_a_clients_status_names_no_absolute_path_and_no_count_over_withheld_rows(home, monkeypatch):
    """guards against (trial 21a): ``/v1/status`` with the read token (and the MCP status tool)
    carrying the home's and the roots' absolute paths (a user name, a folder's name: the
    operator's), also quoted inside a reason's text, and the operator's row counts, which take in
    the rows of withheld parses (``rows_changed``; the dense check's ``its 9 rows of release 1's
    parses``). The admin token's view and the in-process one stay complete."""
    import os

    from fabric_query.server.client_view import client_status
    from fabric_query.types import ParseProblem

    fabric = Fabric(home.root)
    sound = fabric.status()
    (root,) = sound.roots
    assert sound.home == str(home.root) and root.endswith("/corpus")
    text = json.dumps(client_status(fabric))
    assert client_status(fabric)["roots"] == ["corpus"] and "home" not in client_status(fabric)
    assert str(home.root.parent) not in text and os.path.realpath(home.root.parent) not in text, text
    # The diagnostics a damaged home gives the operator (each as Fabric.status words it).
    damaged = sound.model_copy(update={
        "rows_changed": ("chunk_vectors: 2 parse(s), 3 row(s) fewer and 0 more than written",),
        "dense_channels_off": ("dense: vector-digest-mismatch: chunk_vectors: its 9 rows of release 1's parses do "
                               "not match the digest the release recorded",),
        "dense_index_fallback": ("dense: dense-index-release-mismatch: chunk_vectors/gen-00000001: 9 rows, the "
                                 "release recorded 8",),
        "dense_index_problems": (f"chunk_vectors: dense-index-unreadable: chunk_vectors/gen-00000001: OSError: "
                                 f"{home.root}/indexes/dense/chunk_vectors/gen-00000001/vectors.lance: bad",),
        "lexical_index_problem": f"index-unreadable: gen-00000001: {home.root}/indexes/lexical/meta.json: bad",
        "dense_sources_left_out": ("dense: fs:corpus/a.txt", "dense: fs:corpus/private/diary.txt"),
        "dense_index_sources_left_out": ("dense: fs:corpus/private/diary.txt",),
        "unreadable_tables": (f"chunks version 2: {home.tables.root}/chunks.lance/data/x.lance: cut short",),
        "failed": (ParseProblem(parse_id="f" * 32, status="failed", reason="unreadable",
                                detail=f"PermissionError: '{root}/b.md'", sources=("fs:corpus/b.md",)),),
    })
    monkeypatch.setattr(fabric, "status", lambda: damaged)
    admin_token, read_token = "a" * 43, "r" * 43
    with live_server(lambda port: create_app(fabric, ServerConfig(), port=port, read_token=read_token,
                                             admin=RecordingAdmin(), admin_token=admin_token)) as url:
        with httpx.Client(base_url=url, timeout=60, headers={"authorization": f"Bearer {read_token}"}) as client:
            wait_ready(client)
            seen = client.get("/v1/status")
            operator = client.get("/v1/status", headers={"authorization": f"Bearer {admin_token}"}).json()
    assert operator == json.loads(damaged.model_dump_json())
    client = seen.json()
    assert str(home.root.parent) not in seen.text and "home" not in client, seen.text
    assert client["roots"] == ["corpus"] and client["rows_changed"] == ["chunk_vectors"]
    assert client["dense_channels_off"] == ["dense: vector-digest-mismatch"]
    assert client["dense_index_fallback"] == ["dense: dense-index-release-mismatch"]
    assert client["dense_index_problems"] == ["chunk_vectors: dense-index-unreadable"]
    assert client["lexical_index_problem"] == "index-unreadable"
    assert client["dense_sources_left_out"] == ["dense: fs:corpus/a.txt"]  # a withheld source never named
    assert client["dense_index_sources_left_out"] == []
    assert client["unreadable_tables"] == ["chunks version 2: <tables>/chunks.lance/data/x.lance: cut short"]
    assert client["failed"][0]["detail"] == "PermissionError: 'corpus/b.md'"
    assert client["failed"][0]["sources"] == ["fs:corpus/b.md"]  # a source key is not a path


def test_a_table_where_only_withheld_parses_changed_is_not_named_to_a_client(tmp_path, monkeypatch):
    """guards against (trial 22b): a client's status (``/v1/status`` without the admin token, MCP
    ``status``) naming in ``rows_changed`` a table whose rows changed behind Fabric's back only for
    withheld documents (withheld after the release that still serves them was published): a
    client learned that something about withheld documents changed. A table where a visible
    document's rows changed is still named to it; the operator sees both."""
    import lance

    from fabric_assets.measurement.bench_status import fabricate_home
    from fabric_query.server.client_view import client_status

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home" / "dagster"))
    home = fabricate_home(tmp_path / "home", 3, log=lambda _: None)
    active = home.catalog.current_release().manifest["sources"]
    hidden, shown = sorted(active)[:2]
    home.layout.config_file.write_text(json.dumps({"sources": {"withheld": [hidden]}}))

    def delete(table: str, key: str) -> None:
        lance.dataset(str(home.layout.tables / f"{table}.lance")).delete(f"parse_id = '{active[key]['parse_id']}'")

    delete("chunks", hidden)
    fabric = Fabric(home.root)
    assert [r.split(":")[0] for r in fabric.status().rows_changed] == ["chunks"]  # the operator's view
    assert client_status(fabric)["rows_changed"] == [], client_status(fabric)
    delete("units", shown)
    delete("lexical_documents", hidden)
    delete("lexical_documents", shown)
    assert [r.split(":")[0] for r in fabric.status().rows_changed] == ["units", "chunks", "lexical_documents"]
    with live_server(lambda port: create_app(fabric, ServerConfig(), port=port)) as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            wait_ready(client)
            seen = client.get("/v1/status").json()
    assert seen["rows_changed"] == ["units", "lexical_documents"] and seen["withheld"] == [], seen


def test_a_search_error_or_skip_reason_quoting_the_homes_path_reaches_a_client_without_it(home, fabric, monkeypatch):
    """guards against (trial 22b): a search over HTTP (read token or none) or MCP whose chunks data
    file was gone answered ``ReleaseUnreadableError: … Not found: home/u/fab/tables/chunks.lance/
    data/….lance`` (and a dense channel's skip reason quoted its file the same way): the home's
    path, which a client's status never names (trial 21a). The operator (admin token) still reads
    it whole; the documents' text and citations are untouched."""
    from fabric_query.errors import ReleaseUnreadableError

    tables = str(home.tables.root)
    where = f"Not found: {tables.lstrip('/')}/chunks.lance/data/x.lance"  # as Lance writes a local path
    real = fabric.search
    sound = real("lighthouse keeper")
    skipped = sound.model_copy(update={"skipped_channels": {"dense": f"table-unreadable: chunk_vectors: {where}"}})
    damaged = {"on": True}

    def search(*args, **kwargs):
        if damaged["on"]:
            raise ReleaseUnreadableError(f"release 1: table-unreadable: chunks: {where}; `fabric status` names it")
        return skipped

    monkeypatch.setattr(fabric, "search", search)
    admin_token = "a" * 43
    mcp_call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "search", "arguments": {"query": "lighthouse keeper"}}}
    mcp_headers = {"accept": "application/json, text/event-stream"}
    with live_server(lambda port: create_app(fabric, ServerConfig(), port=port, admin=RecordingAdmin(),
                                             admin_token=admin_token)) as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            wait_ready(client)
            answers = [client.post("/v1/search", json={"query": "lighthouse keeper"}),
                       client.post("/mcp", json=mcp_call, headers=mcp_headers)]
            operator = client.post("/v1/search", json={"query": "lighthouse keeper"},
                                   headers={"authorization": f"Bearer {admin_token}"})
            damaged["on"] = False
            answers += [client.post("/v1/search", json={"query": "lighthouse keeper"}),
                        client.post("/mcp", json=mcp_call, headers=mcp_headers)]
    assert answers[0].status_code == 503 and "<tables>/chunks.lance/data/x.lance" in answers[0].text, answers[0].text
    assert where in operator.json()["error"]["message"]
    for answer in answers:
        assert tables.lstrip("/") not in answer.text and "<tables>/chunks.lance" in answer.text, answer.text
    pack = answers[2].json()
    assert pack["skipped_channels"] == {"dense": "table-unreadable: chunk_vectors: Not found: <tables>/chunks.lance/data/x.lance"}
    assert [h["citation"] for h in pack["results"]] == [json.loads(h.citation.model_dump_json()) for h in sound.results]


def test_a_path_a_reason_quotes_at_a_sentences_end_in_a_uri_or_as_lance_writes_it_reaches_no_client():
    """guards against (trial 21f): the replacement missed a path followed by a full stop
    (``cannot read /home/u/fab.``), quoted as a ``file://`` URI, or as Lance quotes a local one,
    without its leading ``/`` (``Dataset at path home/u/fab/tables/chunks.lance was not found``):
    each reached a client whole. Still untouched: a source key's folders, a longer path sharing the
    home's as a prefix, a file named like the home with a suffix."""
    from fabric_query.server.client_view import without_paths

    names = {"/srv/data/corpus": "corpus"}
    places = {"/home/u/fab": "<home>", **names, "/home/u/fab/tables": "<tables>"}
    texts = {
        "cannot read /home/u/fab.": "cannot read <home>.",
        "see file:///home/u/fab/tables/chunks.lance: gone": "see file://<tables>/chunks.lance: gone",
        "Dataset at path home/u/fab/tables/chunks.lance was not found: Not found: home/u/fab/x":
            "Dataset at path <tables>/chunks.lance was not found: Not found: <home>/x",
        "at /srv/data/corpus/b.md!": "at corpus/b.md!",
        "fs:corpus/data/x /home/u/fab2/y /home/u/fab.bak": "fs:corpus/data/x /home/u/fab2/y /home/u/fab.bak",
    }
    status = {"home": "/home/u/fab", "roots": ["/srv/data/corpus"],
              "failed": [{"reason": t, "sources": ["fs:corpus/b.md"]} for t in texts]}
    seen = [p["reason"] for p in without_paths(status, names, places)["failed"]]
    assert seen == list(texts.values())


@contextlib.contextmanager
def _announced_server(home, fabric, admin_token: str):
    """A live server of ``fabric`` with ``admin_token``, ready and announced in the home's
    server.json (as ``fabric serve`` announces itself) while the block runs: the CLI's and
    :func:`fabric_query.remote.call`'s requests go to it."""
    from fabric_query.server.discovery import remove_server_file, write_server_file

    with live_server(lambda port: create_app(fabric, ServerConfig(), port=port, admin=RecordingAdmin(),
                                             admin_token=admin_token)) as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            wait_ready(client)
        write_server_file(home.root, "127.0.0.1", int(url.rsplit(":", 1)[1]), "9.9")
        try:
            yield url
        finally:
            remove_server_file(home.root)


def test_the_operators_commands_through_the_server_see_what_they_see_in_process(home, fabric):
    """guards against: ``fabric status`` through a running server losing the withheld sources it
    lists in-process, now that ``/v1/status`` names them only to the admin token; and the admin
    token going anywhere but loopback, whatever a server.json names."""
    from fabric_query.remote import _token, call
    from fabric_query.server.security import ADMIN_TOKEN_FILE, ensure_token

    token_file = home.root / ADMIN_TOKEN_FILE
    token = ensure_token(token_file)
    try:
        with _announced_server(home, fabric, token):
            answer = call(home.root, "GET", "/v1/status")
        assert answer == json.loads(fabric.status().model_dump_json())
        assert "fs:corpus/private/diary.txt" in answer["withheld"]
        assert _token(home.root, "127.0.0.1") == _token(home.root, "localhost") == token
        assert _token(home.root, "192.0.2.7") is None  # no read token here; never the admin token
    finally:
        token_file.unlink()


def test_a_root_whose_every_source_is_withheld_is_not_named_to_a_client(home, fabric):
    """guards against (trial 20h): ``/v1/status`` (and the MCP status tool) naming, in ``roots``,
    the folder of a root whose every file is withheld (``sources.withheld: ["corpus/*"]``): its
    path names what is withheld (``/home/me/layoffs-2027``). The operator still sees it."""
    from fabric_query.server.client_view import client_status

    config = home.layout.config_file
    kept = config.read_text()
    root = fabric.status().roots[0]
    assert root.endswith("/corpus") and client_status(fabric)["roots"] == ["corpus"]  # a visible file under it
    try:
        config.write_text(json.dumps({"sources": {"withheld": ["corpus/*"]}}))
        seen = client_status(fabric)
        assert seen["roots"] == [] and "corpus" not in json.dumps(seen), seen
        config.write_text(json.dumps({"sources": {"withheld": ["corpus/*.txt", "corpus/*.md"]}}))
        assert client_status(fabric)["roots"] == []  # each file withheld, by other patterns
        assert root in fabric.status().roots
    finally:
        config.write_text(kept)
    assert client_status(fabric)["roots"] == ["corpus"]


def test_a_withheld_roots_folder_is_not_named_by_what_the_scan_says_of_it(home, fabric, monkeypatch):
    """guards against (trial 21f): a root left out of a client's ``roots`` (its every file withheld,
    each by its own pattern) was still named in ``skipped``: its ``root-unavailable`` entry
    (``fs:corpus/``, its drive unmounted; its path read as its label) and a file skipped under it."""
    from fabric_query.server.client_view import client_status

    config = home.layout.config_file
    kept = config.read_text()
    sound = fabric.status()
    (root,) = sound.roots
    monkeypatch.setattr(fabric, "status", lambda: sound.model_copy(update={"skipped": (
        ("fs:corpus/", f"root-unavailable: {root} is not a folder now (gone, unmounted, or a symbolic-link loop)"),
        ("fs:corpus/huge.bin", "too-large"))}))
    assert [k for k, _ in client_status(fabric)["skipped"]] == ["fs:corpus/", "fs:corpus/huge.bin"]  # visible
    try:
        config.write_text(json.dumps({"sources": {"withheld": ["corpus/*.txt", "corpus/*.md"]}}))
        seen = client_status(fabric)
        assert seen["roots"] == [] and seen["skipped"] == [] and "corpus" not in json.dumps(seen), seen
    finally:
        config.write_text(kept)


def test_fabric_status_never_prints_a_clients_view_as_the_operators(home, fabric):
    """guards against (trial 20h): ``fabric status`` through a running server printing the view
    the server gives a client (no withheld source named or counted) whenever its admin token was
    not sent (the server bound to an address that is not loopback, the admin-token file unreadable)
    or was not this server's: the operator was shown no withheld source at all."""
    from typer.testing import CliRunner

    from fabric_assets.cli import app
    from fabric_query.remote import call
    from fabric_query.server.security import ADMIN_TOKEN_FILE, ensure_token

    withheld = "fs:corpus/private/diary.txt"
    token_file = home.root / ADMIN_TOKEN_FILE
    token = ensure_token(token_file)
    try:
        with _announced_server(home, fabric, "o" * 43):  # not the file's token
            assert call(home.root, "GET", "/v1/status")["withheld"] == []  # a client's view
            assert call(home.root, "GET", "/v1/status", operator=True) is None  # so: in-process
            out = CliRunner().invoke(app, ["status", "--json", "--home", str(home.root)])
        assert out.exit_code == 0 and withheld in json.loads(out.output)["withheld"], out.output
        with _announced_server(home, fabric, token):
            assert withheld in call(home.root, "GET", "/v1/status", operator=True)["withheld"]
    finally:
        token_file.unlink()


def test_a_request_without_the_read_token_is_told_which_token_and_where(fabric):
    """guards against (trial 22e): a server bound to every interface answering a client that sent no
    token "this server needs a bearer token (read or admin)", which names neither the header nor the
    file a new user takes the token from (the admin routes' refusal names both)."""
    with live_server(lambda port: create_app(fabric, ServerConfig(), port=port, read_token="r" * 43,
                                             admin=RecordingAdmin(), admin_token="a" * 43)) as url:
        with httpx.Client(base_url=url, timeout=30) as client:
            said = _error(client.post("/v1/search", json={"query": "x"}), 401)["message"]
    assert "Authorization: Bearer" in said and "read-token" in said and "admin-token" in said, said


def test_a_token_file_holding_other_than_printable_ascii_is_refused_and_never_a_500(fabric, tmp_path):
    """guards against (hostile trial 20d): an admin or read token file an operator wrote by hand
    with a non-ASCII passphrase (``pässwörd…``) was read with U+FFFD in place of each byte and
    accepted; every request that then carried a bearer made the comparison raise
    ``UnicodeEncodeError``: a 500 on the admin routes, and with a read token a plain-text 500 from
    the guard on every route. The server now refuses to start with such a file, and a token given
    to the app directly is compared without raising."""
    import os

    from fabric_query.server.security import TokenFileError, load_token

    path = tmp_path / "read-token"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, "pässwörd-correct-horse-battery\n".encode())
    os.close(fd)
    with pytest.raises(TokenFileError, match="printable ASCII"):
        load_token(path)
    path.write_text("correct horse battery staple 42\n")  # spaces and punctuation are fine
    assert load_token(path) == "correct horse battery staple 42"

    token = "pässwörd-correct-horse-battery"
    with live_server(lambda port: create_app(fabric, ServerConfig(), port=port, read_token=token,
                                             admin=RecordingAdmin(), admin_token=token)) as url:
        with httpx.Client(base_url=url, timeout=30) as client:
            for headers in ({"authorization": "Bearer wrong-token-of-some-length"}, {}):
                _error(client.get("/v1/status", headers=headers), 401)
                _error(client.post("/v1/admin/snapshot", json={}, headers=headers), 401)
