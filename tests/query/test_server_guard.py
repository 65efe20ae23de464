"""The ASGI guard in front of `fabric serve` (fabric_query/server/guard.py), over a real uvicorn on
loopback: what it answers before any route runs. A home with no release is enough (nothing here
searches), and the query models are not loaded (``load_models`` answers at once)."""

from __future__ import annotations

import json

import httpx
import pytest
from live_server import RecordingAdmin, live_server, wait_ready

from fabric_query import Fabric
from fabric_query.server.app import create_app
from fabric_resources.config import ServerConfig
from fabric_resources.home import FabricHome

MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
LIST_TOOLS = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = FabricHome(tmp_path_factory.mktemp("guard") / "home")
    home.catalog  # an empty catalog: a home Fabric opens, with no release
    fabric = Fabric(home.root)
    with live_server(lambda port: create_app(fabric, ServerConfig(), port=port, load_models=lambda f: {})) as url:
        with httpx.Client(base_url=url, timeout=10) as client:
            wait_ready(client)
            yield client


def test_a_get_on_mcp_is_405_not_a_stream_held_open_for_good(server):
    """guards against (hostile trial 10a): the MCP SDK answering a GET with an event stream that
    stayed open for good though this stateless server never sends on it; 300 such connections were
    all still held 40 s later (past every read deadline), each ~100 KB, towards the process's file
    descriptor limit. Without the guard's answer this read times out (the stream never ends)."""
    for accept in ("text/event-stream", "application/json, text/event-stream", "*/*"):
        r = server.get("/mcp", headers={"accept": accept})
        assert r.status_code == 405, r.text
        assert r.headers["allow"] == "POST" and r.headers["content-type"] == "application/json"
        assert r.json()["error"]["code"] == -32600 and "POST each JSON-RPC message" in r.json()["error"]["message"]
    tools = server.post("/mcp", content=LIST_TOOLS, headers=MCP_HEADERS)  # the transport MCP clients use
    assert tools.status_code == 200 and {t["name"] for t in tools.json()["result"]["tools"]} >= {"search", "resolve"}


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=x"])
def test_a_body_declared_as_another_type_is_415_in_json(server, content_type):
    """guards against (hostile trial 10a): a JSON body sent with another type (``curl -d`` without
    ``-H``: a form) answered ``body: Input should be a valid dictionary`` by the API, and a plain-text
    ``Invalid Content-Type header`` (no JSON at all) by the MCP endpoint."""
    r = server.post("/v1/search", content=b'{"query": "lamp"}', headers={"content-type": content_type})
    assert r.status_code == 415 and r.headers["content-type"] == "application/json", r.text
    error = r.json()["error"]
    assert error["type"] == "UnsupportedMediaType" and "Content-Type: application/json" in error["message"]
    r = server.post("/mcp", content=LIST_TOOLS, headers={**MCP_HEADERS, "content-type": content_type})
    assert r.status_code == 415 and r.headers["content-type"] == "application/json", r.text
    assert r.json()["error"]["code"] == -32600 and "Content-Type: application/json" in r.json()["error"]["message"]


@pytest.mark.parametrize("content_type", [None, "Application/JSON", "application/json; charset=utf-8"])
def test_a_json_body_without_a_type_or_in_another_spelling_is_read_as_json(server, content_type):
    """guards against: a body with no Content-Type read by FastAPI as no body (422 "Field required"
    beside the query it carried), and refused by the MCP SDK in plain text unless spelled exactly
    ``application/json``."""
    headers = {} if content_type is None else {"content-type": content_type}
    r = server.post("/v1/search", content=b'{"query": "lamp"}', headers=headers)
    assert r.status_code == 409 and r.json()["error"]["type"] == "NoReleaseError", r.text  # read: the home has none
    r = server.post("/v1/search", content=b'{"query": "lamp", "query": "x"}', headers=headers)
    assert r.status_code == 422 and "duplicate key 'query'" in r.json()["error"]["message"], r.text
    r = server.post("/mcp", content=LIST_TOOLS, headers={"accept": MCP_HEADERS["accept"], **headers})
    assert r.status_code == 200 and r.json()["result"]["tools"], r.text


def test_head_answers_as_get_without_the_body(server):
    """guards against (hostile trial 10a): ``HEAD /v1/health`` (``curl -I``, uptime monitors) answered
    405 Method Not Allowed, though a server MUST answer HEAD wherever it answers GET (RFC 9110)."""
    for path in ("/v1/health", "/v1/ready"):
        got, head = server.get(path), server.head(path)
        assert head.status_code == got.status_code == 200 and head.content == b""
        assert head.headers["content-type"] == got.headers["content-type"]
        assert head.headers["content-length"] == got.headers["content-length"]
    assert server.head("/v1/search").status_code == 405  # POST only, as GET is
    assert server.head("/v1/nope").status_code == 404
    assert server.head("/mcp").status_code == 405 and server.head("/mcp").content == b""


@pytest.mark.parametrize("protocol", ["httptools", "fabric-serve-h11"])
def test_a_request_framed_by_both_content_length_and_transfer_encoding_is_refused_and_closed(protocol, tmp_path):
    """guards against (trial 10a named it; trial 22b: the test ran on uvicorn's default httptools,
    which refuses it, while ``fabric serve`` runs h11, which read the chunks, answered 200 and kept
    the connection open for the request behind): a body framed two ways (Content-Length and chunked
    Transfer-Encoding) answered as if one were absent: where a proxy and this server pick different
    framings, a second request hides in the first (request smuggling). RFC 9112 6.1: rejected, and
    the connection closed after, with the protocol ``fabric serve`` runs too."""
    import socket
    from urllib.parse import urlsplit

    from fabric_query.server.protocol import with_read_timeout

    home = FabricHome(tmp_path / "home")
    home.catalog  # an empty catalog: a home Fabric opens, with no release
    config = {"http": with_read_timeout(30.0)} if protocol == "fabric-serve-h11" else {"http": "httptools"}
    with live_server(lambda port: create_app(Fabric(home.root), ServerConfig(), port=port, load_models=lambda f: {}),
                     **config) as base, httpx.Client(base_url=base, timeout=10) as server:
        wait_ready(server)
        url = urlsplit(str(server.base_url))
        body = b'{"query": "x"}'
        request = (b"POST /v1/search HTTP/1.1\r\nHost: " + url.netloc.encode() + b"\r\nContent-Type: application/json\r\n"
                   b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
                   + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
        behind = b"GET /v1/health HTTP/1.1\r\nHost: " + url.netloc.encode() + b"\r\n\r\n"
        with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
            sock.sendall(request + behind)
            answer = b""
            while chunk := sock.recv(65536):  # the server closes: recv returns b"" at the end
                answer += chunk
        head, _, rest = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400") and b"connection: close" in head.lower(), answer[:300]
        assert b'"results"' not in rest and answer.count(b"HTTP/1.1 ") == 1, answer  # no search, nothing behind
        assert server.post("/v1/search", json={"query": "x"}).status_code != 400  # one framing is served


@pytest.mark.parametrize("path", ["/v1/search", "/mcp"])
def test_a_chunk_declared_over_the_body_bound_is_refused_at_once(path, tmp_path):
    """guards against (stop 55 left it open): a chunked body whose chunk-size line declares far
    more than ``server.max_body_bytes`` (10**12 bytes), then a few bytes and silence, held until
    the read deadline (30 s) and closed without an answer, though such a body could only end past
    the bound. Now 413 at once, in the refusal shape of the path (JSON-RPC on ``/mcp``), the
    connection closed; a chunked body within the bound is still read."""
    import socket
    import time
    from urllib.parse import urlsplit

    from fabric_query.server.protocol import with_read_timeout

    home = FabricHome(tmp_path / "home")
    home.catalog  # an empty catalog: a home Fabric opens, with no release
    config = ServerConfig()
    with live_server(lambda port: create_app(Fabric(home.root), config, port=port, load_models=lambda f: {}),
                     http=with_read_timeout(30.0, max_body_bytes=config.max_body_bytes)) as base, \
            httpx.Client(base_url=base, timeout=10) as server:
        wait_ready(server)
        url = urlsplit(str(server.base_url))
        head = (f"POST {path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json\r\n"
                "Accept: application/json, text/event-stream\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
                ).encode()

        def exchange(body: bytes) -> bytes:
            with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
                sock.sendall(head + body)
                answer = b""
                while chunk := sock.recv(65536):  # the server closes: recv returns b"" at the end
                    answer += chunk
                return answer

        started = time.monotonic()
        answer = exchange(f"{10**12:x}\r\n".encode() + b'{"query": "')  # then silence: the rest never comes
        assert time.monotonic() - started < 5, "waited for the read deadline"
        status, _, rest = answer.partition(b"\r\n\r\n")
        assert status.startswith(b"HTTP/1.1 413") and b"connection: close" in status.lower(), answer[:300]
        said = json.loads(rest)
        if path == "/mcp":
            assert said["error"]["code"] == -32600 and "PayloadTooLarge" in said["error"]["message"], said
        else:
            assert said["error"]["type"] == "PayloadTooLarge" and "65536" in said["error"]["message"], said
        body = json.dumps({"query": "x"} if path != "/mcp" else json.loads(LIST_TOOLS)).encode()
        answer = exchange(f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
        assert not answer.startswith(b"HTTP/1.1 413"), answer[:300]


@pytest.mark.parametrize("request_id", ["null", "true", "1.5", "[1]", '{"a": 1}'])
def test_an_mcp_request_with_an_id_mcp_does_not_allow_is_400_invalid_request(server, request_id):
    """guards against: a request whose id is null, a boolean, a float, an array or an object taken
    by the MCP SDK for a notification and answered 202 with no body (its sender learned nothing)."""
    body = f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/list"}}'.encode()
    r = server.post("/mcp", content=body, headers=MCP_HEADERS)
    assert r.status_code == 400 and r.json()["id"] is None and r.json()["error"]["code"] == -32600, r.text
    assert server.post("/mcp", content=LIST_TOOLS, headers=MCP_HEADERS).status_code == 200


@pytest.mark.parametrize("body, request_id", [
    (b'[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]', None),  # a batch
    (b'{}', None),
    (b'{"jsonrpc": "1.0", "id": 7, "method": "tools/list"}', 7),
    (b'{"jsonrpc": "2.0", "id": "q", "method": "tools/call", "params": ["search"]}', "q"),
])
def test_json_that_is_no_json_rpc_message_is_invalid_request_as_over_stdio(server, body, request_id):
    """guards against (trial 23h): the MCP SDK answered such a body -32602 (Invalid params) with id
    null and its pydantic dump ("4 validation errors for union[JSONRPCRequest, …]", a link each),
    where JSON-RPC 2.0 and `fabric mcp` over stdio say Invalid Request (-32600)."""
    r = server.post("/mcp", content=body, headers=MCP_HEADERS)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert r.json()["id"] == request_id and error["code"] == -32600, r.text
    assert "not a JSON-RPC 2.0 message" in error["message"] and "validation error" not in error["message"], r.text
    assert server.post("/mcp", content=LIST_TOOLS, headers=MCP_HEADERS).status_code == 200


@pytest.mark.parametrize("path, body", [
    ("/v1/search", b'{"query": "lamp \\ud83d"}'),
    ("/v1/search", b'{"query": "lamp", "scope": {"path_prefixes": ["\\udc00x"]}}'),
])
def test_a_string_holding_half_a_character_is_refused_saying_so_on_the_api(server, path, body):
    """guards against (trial 23h): the API answered "Input should be a valid string, unable to parse
    raw data as a unicode string" (pydantic's words), where `/mcp` names the lone surrogate and what
    to send; the field is still named."""
    r = server.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    message = r.json()["error"]["message"]
    assert "half of a character" in message and "send each character whole" in message, message
    assert "body.query" in message or "body.scope.path_prefixes.0" in message, message


def test_a_refusal_on_mcp_is_a_json_rpc_error_the_agent_is_shown(server):
    """guards against (trial 14b): the guard's refusals on ``/mcp`` (a body over the bound: an agent
    pasting a document into ``query``; a Host or Origin the server does not accept) answered in the
    API's ``{"error": {"type"}}`` shape, which the MCP SDK's client does not read: the agent was told
    only "Server returned an error response". As JSON-RPC errors, the SDK hands it the reason."""
    import asyncio

    from mcp import Client

    async def call():
        async with Client(str(server.base_url.join("/mcp"))) as client:
            with pytest.raises(Exception) as refused:
                await client.call_tool("search", {"query": "lamp " * 20_000})
            return str(refused.value)

    assert "PayloadTooLarge: the body is over 65536 bytes" in asyncio.run(call())
    for headers, status, kind in (({"host": "evil.example"}, 421, "MisdirectedRequest"),
                                  ({"origin": "https://evil.example"}, 403, "ForbiddenOrigin")):
        r = server.post("/mcp", content=LIST_TOOLS, headers={**MCP_HEADERS, **headers})
        assert r.status_code == status and r.json()["jsonrpc"] == "2.0", r.text
        assert r.json()["error"]["code"] == -32600 and kind in r.json()["error"]["message"], r.text
    r = server.post("/v1/search", content=b'{"query": "lamp"}', headers={"origin": "https://evil.example"})
    assert r.status_code == 403 and r.json()["error"]["type"] == "ForbiddenOrigin"  # the API keeps its shape


def test_a_host_or_origin_refusal_names_the_setting_that_admits_it(server):
    """guards against (trial 20g): a 421 said only "the Host header does not name this server" and a
    403 "requests from this Origin are not accepted", so an operator who reached the server by a LAN
    name was not told what admits it: the setting, in the home's config.json, read at start-up."""
    for headers, setting in (({"host": "evil.example"}, "server.allowed_hosts"),
                             ({"origin": "https://evil.example"}, "server.allowed_origins")):
        for r in (server.get("/v1/status", headers=headers),  # the API's error, and MCP's JSON-RPC one
                  server.post("/mcp", content=LIST_TOOLS, headers={**MCP_HEADERS, **headers})):
            message = r.json()["error"]["message"]
            assert setting in message and "config.json" in message and "restart" in message, r.text


def test_an_mcp_message_holding_half_a_character_is_answered_with_its_id(server):
    """guards against (trial 14b): a tool call one of whose strings holds a lone surrogate (a client
    that cut a hit's text by UTF-16 units, through an emoji, and sent it to ``resolve``) answered
    "Parse error: unexpected end of hex escape at line 1 column 106" with id null, though the body
    is JSON. A whole pair still passes."""
    call = ('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", '
            '"params": {"name": "search", "arguments": {"query": "%s"}}}')
    r = server.post("/mcp", content=(call % "lamp \\ud83d").encode(), headers=MCP_HEADERS)
    assert r.status_code == 400 and r.json()["id"] == 7, r.text
    assert r.json()["error"]["code"] == -32600 and "\\ud83d, half of a character" in r.json()["error"]["message"]
    r = server.post("/mcp", content=(call % "lamp \\ud83d\\ude00").encode(), headers=MCP_HEADERS)
    assert r.status_code == 200 and r.json()["id"] == 7, r.text  # answered by the tool (this home has no release)


@pytest.mark.parametrize("body, reason", [
    (b'{"query": "caf\xe9"}', "not UTF-8, -16 or -32 text: invalid continuation byte at byte 14"),  # Latin-1
    (b'{"query": "\xff"}', "not UTF-8, -16 or -32 text: invalid start byte at byte 11"),
    (b'{"query": "lamp", "limit": ' + b"1" * 5000 + b"}", "a number has more than 4300 digits"),
])
def test_a_body_that_is_not_text_or_holds_a_number_too_long_is_refused_with_its_reason(server, body, reason):
    """guards against (hostile trial 20d): a body whose bytes are not UTF-8 (a client that sent
    Latin-1, whatever charset it declared) or that holds a number of 5,000 digits answered 400
    ``HTTPError`` "There was an error parsing the body" on the read routes (FastAPI's words for any
    decoding failure but a JSONDecodeError), and the admin routes called the number "not UTF-8, -16
    or -32 text". Each is now the API's 422 naming why, and a JSON-RPC parse error on ``/mcp``."""
    for route in ("/v1/search", "/v1/resolve"):
        for content_type in ("application/json", "application/json; charset=latin-1"):
            r = server.post(route, content=body, headers={"content-type": content_type})
            assert r.status_code == 422 and r.json()["error"]["type"] == "RequestValidationError", r.text
            assert r.json()["error"]["message"] == f"the body is not JSON: {reason}"
    call = (b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "search", "arguments": '
            + body + b"}}")
    r = server.post("/mcp", content=call, headers=MCP_HEADERS)
    assert r.status_code == 400 and r.json()["error"]["code"] == -32700, r.text
    assert r.json()["error"]["message"].startswith(f"Parse error: {reason.split(' at byte')[0]}"), r.text  # its own offset
    assert server.post("/v1/search", content=b'{"query": "lamp"}').status_code != 422


def test_a_websocket_handshake_is_refused_before_any_route_even_one_that_would_accept_it():
    """guards against (hostile trial 20d): the guard passed WebSocket connections through unchecked
    (no Host, Origin or token check), so a WebSocket route added to the app would answer any page
    or DNS-rebound host. Every handshake is refused at the guard: the app below accepts one."""
    import base64
    import os
    import socket

    from fabric_query.server.guard import Guard
    from fabric_query.server.security import OriginPolicy

    accepted = []

    async def app(scope, receive, send):
        if scope["type"] == "websocket":
            await receive()
            accepted.append(scope["path"])
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.close", "code": 1000})
        elif scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})

    with live_server(lambda port: Guard(app, OriginPolicy("127.0.0.1", port), 65536)) as url:
        host, port = url.removeprefix("http://").split(":")
        key = base64.b64encode(os.urandom(16)).decode()
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall((f"GET /ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
            status_line = sock.recv(4096).split(b"\r\n", 1)[0]
    assert status_line.startswith(b"HTTP/1.1 403"), status_line
    assert accepted == []


ADMIN_TOKEN, READ_TOKEN = "a" * 43, "r" * 43
#: Bodies that are refused for what they are (415 type, 413 size, 422 JSON) once a client is let in.
_JUDGED_BODIES = [
    ("text/plain", b'{"path": "/tmp"}'),
    ("application/x-www-form-urlencoded", b"path=/tmp"),
    ("application/json", b'{"path": "/a", "path": "/b"}'),
    ("application/json", b"{not json"),
    ("application/json", b'{"note": "' + b"x" * 70_000 + b'"}'),
]


@pytest.mark.parametrize("content_type, body", _JUDGED_BODIES)
def test_a_client_without_the_token_is_told_401_before_anything_about_its_body(tmp_path, content_type, body):
    """guards against (trial 24b): an admin request without the admin token, and (with a read token)
    any request without it, whose body had the wrong type, size or JSON was answered 415, 413 or 422
    (the admin routes checked their token only once the guard had judged the body): a client that
    had not authenticated learnt the body bound and format of the admin API. Now 401 comes first on
    every admin route, with or without a read token, on the read routes and on ``/mcp``; with the
    token the body is judged as before."""
    home = FabricHome(tmp_path / "home")
    home.catalog
    fabric = Fabric(home.root)
    headers = {"content-type": content_type, "accept": MCP_HEADERS["accept"]}
    admin = RecordingAdmin(kinds=("ingest", "snapshot"))
    for read_token in (None, READ_TOKEN):
        make = lambda port: create_app(fabric, ServerConfig(), port=port, load_models=lambda f: {},  # noqa: E731
                                       admin=admin, admin_token=ADMIN_TOKEN, read_token=read_token)
        with live_server(make) as url, httpx.Client(base_url=url, timeout=10) as client:
            routes = ["/v1/admin/ingest", "/v1/admin/snapshot", "/v1/admin/snapshot/", "/v1/admin/nope",
                      "/v1/operations/" + "0" * 32]
            if read_token:
                routes += ["/v1/search", "/v1/resolve", "/mcp", "/mcp/", "/v1/status", "/v1/nope"]
            for route in routes:
                for auth in ({}, {"authorization": "Bearer wrong"}, {"authorization": "Basic " + ADMIN_TOKEN}):
                    r = client.post(route, content=body, headers={**headers, **auth})
                    assert r.status_code == 401, (route, auth, r.status_code, r.text)
                    assert r.headers["www-authenticate"] == "Bearer"
                    said = r.json()["error"]["message"]
                    assert "Bearer" in said and "token" in said and "bytes" not in said, said
            if read_token:  # the read token lets a client read, never use the admin routes
                assert client.get("/v1/health/").status_code == 200  # health needs no token, spelt either way
                r = client.post("/v1/admin/snapshot", content=body,
                                headers={**headers, "authorization": f"Bearer {READ_TOKEN}"})
                assert r.status_code == 401 and "admin-token" in r.json()["error"]["message"], r.text
                r = client.post("/v1/search", content=body, headers={**headers, "authorization": f"Bearer {READ_TOKEN}"})
                assert r.status_code in (413, 415, 422), r.text
            # With the admin token the body is judged as it was.
            r = client.post("/v1/admin/snapshot", content=body,
                            headers={**headers, "authorization": f"Bearer {ADMIN_TOKEN}"})
            assert r.status_code in (413, 415, 422), r.text
    assert admin.submitted == []


def _normalised(r: httpx.Response) -> tuple[int, object]:
    try:
        answer = r.json()
    except ValueError:
        answer = r.content
    return r.status_code, answer


def test_a_route_with_a_trailing_slash_answers_as_the_route(server):
    """guards against (trial 24b): ``POST /v1/search/`` (and every route spelt with a trailing
    slash) answered ``307 Temporary Redirect`` with an empty body, which httpx, and most HTTP
    libraries for a POST, do not follow: the client saw an empty answer and no error. Now each
    route answers with or without the slash alike, its checks included; an unknown route is 404 both
    ways."""
    search, citation = {"query": "lamp"}, {"citation": {"release_id": 1}}
    for method, path, body in (("GET", "/v1/health", None), ("GET", "/v1/ready", None),
                               ("GET", "/v1/status", None), ("GET", "/v1/sources", None),
                               ("GET", "/v1/releases/current", None), ("GET", "/v1/units/" + "0" * 32, None),
                               ("GET", "/v1/openapi.json", None), ("POST", "/v1/search", search),
                               ("POST", "/v1/resolve", citation), ("POST", "/v1/search", {"query": ["lamp"]}),
                               ("POST", "/v1/admin/snapshot", {}), ("GET", "/v1/operations/x", None),
                               ("GET", "/v1/nope", None), ("POST", "/mcp", json.loads(LIST_TOOLS)),
                               ("GET", "/mcp", None)):
        plain = server.request(method, path, json=body, headers=MCP_HEADERS if path == "/mcp" else {})
        for spelt in (path + "/", path + "//"):
            slashed = server.request(method, spelt, json=body, headers=MCP_HEADERS if path == "/mcp" else {})
            assert slashed.status_code != 307 and "location" not in slashed.headers, (spelt, slashed.headers)
            assert _normalised(slashed) == _normalised(plain), (spelt, slashed.text, plain.text)
    assert server.get("/v1/nope/").json()["error"]["message"] == (
        "no route /v1/nope: the API's routes are listed at /v1/openapi.json")  # was "Not Found"
    assert server.get("/v1/search/").json()["error"]["message"] == "GET is not allowed on /v1/search; it takes POST"


def test_a_tool_argument_of_the_wrong_type_is_named_with_the_type_it_takes(server):
    """guards against (trial 24b): an MCP ``tools/call`` whose argument had the wrong JSON type (a
    list or a number for the query, a string for ``limit``, an array for the citation, a missing
    ``unit_id``) handed the agent pydantic's whole dump: "1 validation error for searchArguments …
    [type=string_type, input_value=['a', 'b'], input_type=list] For further information visit
    https://errors.pydantic.dev/…", echoing the value sent. Now one line names each argument and the
    JSON type it takes, as the API's 422s now do (they said "Input should be a valid tuple")."""
    def call(name: str, arguments: dict) -> str:
        message = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        r = server.post("/mcp", json=message, headers=MCP_HEADERS)
        assert r.status_code == 200 and r.json()["result"]["isError"], r.text
        return r.json()["result"]["content"][0]["text"]

    for name, arguments, said in (
            ("search", {"query": ["a", "b"]}, "search: invalid argument(s): query takes a string, not an array"),
            ("search", {"query": 5}, "search: invalid argument(s): query takes a string, not an integer"),
            ("search", {"query": "lamp", "limit": "3", "scope": {"languages": "en"}},
             "search: invalid argument(s): limit takes an integer, not a string; scope.languages takes an array, "
             "not a string"),
            ("search", {"query": "lamp", "scope": [1]}, "search: invalid argument(s): scope takes an object, not an array"),
            ("search", {"query": "lamp", "scope": "notes/"},
             "search: invalid argument(s): scope takes an object, not a string"),
            ("search", {"query": "lamp", "scope": {"path_prefix": ["a"]}},
             "search: invalid argument(s): scope.path_prefix is not a field this request takes"),
            ("resolve", {"citation": [1]}, "resolve: invalid argument(s): citation takes an object, not an array"),
            ("get_unit", {}, "get_unit: invalid argument(s): unit_id is required"),
            ("get_unit", {"unit_id": 5}, "get_unit: invalid argument(s): unit_id takes a string, not an integer")):
        text = call(name, arguments)
        assert text.endswith(said), text
        assert "pydantic" not in text and "input_value" not in text and "validation error" not in text, text
    # A rule of the value itself keeps its own reason.
    assert call("search", {"query": "lamp", "scope": {"modified_after": "2024-1-1"}}).endswith(
        "scope.modified_after: expects a calendar day YYYY-MM-DD (UTC), got '2024-1-1'")
    # The API's 422 names the field and the JSON type, as the tool does.
    for body, said in (({"query": ["a"]}, "body.query takes a string, not an array"),
                       ({"query": "a", "scope": {"languages": "en"}}, "body.scope.languages takes an array, not a string"),
                       ({"query": "a", "debug": "yes"}, "body.debug takes true or false, not a string")):
        r = server.post("/v1/search", json=body)
        assert r.status_code == 422 and r.json()["error"]["message"] == f"invalid request: {said}", r.text


@pytest.mark.parametrize("params, said", [
    ({"name": "search", "arguments": "x"}, "params.arguments takes an object, not a string"),
    ({"name": "search", "arguments": [1]}, "params.arguments takes an object, not an array"),
    ({"name": 5}, "params.name takes a string, not an integer"),
    ({}, "params.name is required"),
    (None, "params.name is required"),
])
def test_a_tool_call_whose_params_cannot_be_read_says_which_and_why(server, params, said):
    """guards against (trial 24b): a ``tools/call`` whose ``arguments`` were not an object (a string,
    a list) or whose ``name`` was missing or a number was answered -32602 "Invalid request
    parameters" with empty data (the SDK keeps pydantic's words off the wire, and every other word
    with them). Now the same code names the field and what it takes, with the request's id."""
    message = {"jsonrpc": "2.0", "id": "q1", "method": "tools/call", **({} if params is None else {"params": params})}
    r = server.post("/mcp", json=message, headers=MCP_HEADERS)
    error = r.json()["error"]
    assert r.json()["id"] == "q1" and error["code"] == -32602, r.text
    assert error["message"].startswith(f"Invalid params: {said} (tools/call takes"), r.text
    fine = {**message, "params": {"name": "get_unit", "arguments": {"unit_id": "0" * 32}}}  # read as before
    assert "result" in server.post("/mcp", json=fine, headers=MCP_HEADERS).json()


@pytest.mark.parametrize("content_type", [None, "application/json", "text/plain"])
def test_an_empty_post_to_mcp_is_a_json_rpc_parse_error(server, content_type):
    """guards against (trial 24b): ``POST /mcp`` with an empty body and no ``Content-Type`` (or a
    type other than JSON) answered the SDK's plain-text ``Invalid Content-Type header``, the one
    answer of ``/mcp`` an MCP client cannot read. Now a JSON-RPC Parse error whatever the type."""
    headers = {"accept": MCP_HEADERS["accept"], **({} if content_type is None else {"content-type": content_type})}
    for body in (b"", b"  \r\n"):
        r = server.post("/mcp", content=body, headers=headers)
        assert r.status_code == 400 and r.headers["content-type"] == "application/json", r.text
        assert r.json()["error"] == {"code": -32700, "message": "Parse error: the body is empty; POST one JSON-RPC message"}
