"""The ASGI middleware in front of every route: Host, Origin, the tokens, bounded headers and bodies.

A path spelt with a trailing slash is read as the path without it. A request without the token a
path needs (the read token where one is set; the admin token on the admin routes) is 401 before its
body is read, so nothing about the body (type, size, JSON) is said to a client before it authenticates.

It runs before routing, so an unknown path with a bad Host is 421 too, and no handler ever sees
more than ``server.max_body_bytes`` of body: a larger ``Content-Length`` is refused before the
body is read (413), and a body sent without one is read up to the bound and refused past it.
A JSON body that names a key twice, or nests past the recursion limit, is refused here too
(:func:`~fabric_query.server.wire.unreadable_json`), for every route: 422 on the API's routes, a
JSON-RPC parse error (400, code -32700) on ``/mcp``.
Every body is JSON: one sent with another declared media type is 415, one sent with none is read
as JSON (:func:`json_media_type`). On ``/mcp`` every refusal is a JSON-RPC error (:func:`_refuse`),
a message whose strings hold half a character is Invalid Request with its id
(:func:`~fabric_query.server.wire.lone_surrogate`), so is JSON that is no JSON-RPC message (a
batch: :func:`~fabric_query.server.wire.not_a_message`), and a client that disconnects before its
answer cancels its call.
"""

from __future__ import annotations

import json

from fabric_query.server.protocol import MCP_PATH, Disconnected, refusal_answer, unless_disconnected
from fabric_query.server.security import ADMIN_PREFIXES, ADMIN_TOKEN_NEEDED, OriginPolicy, bearer_matches, is_admin
from fabric_query.server.wire import (NOT_A_MESSAGE, bad_tool_call, has_unusable_request_id, lone_surrogate,
                                     lone_surrogate_message, not_a_message, unreadable_json)

#: Paths answered without the read token (liveness must stay cheap and unauthenticated).
OPEN_PATHS = frozenset({"/v1/health"})
#: The largest request line plus headers the server takes (bytes): browsers and HTTP clients send a
#: few KiB; this is twice what nginx's default buffers hold (4 x 8 KiB). h11 refuses a header
#: section still incomplete past it; one that arrived whole is measured here (431).
MAX_HEADER_BYTES = 64 * 1024


def _headers(scope) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in scope.get("headers") or ():
        name = k.decode("latin-1").lower()
        if name in out:  # a repeated Host / Origin / Authorization is ambiguous: keep a marker
            out[name] = "\x00repeated"
        else:
            out[name] = v.decode("latin-1")
    return out


def _decoded(body: bytes):
    """``body`` as JSON, or None when it is none (the MCP SDK answers that itself)."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def json_media_type(content_type: str | None) -> bool:
    """Whether a body declared ``content_type`` is read as JSON: ``application/json``, a ``+json``
    type, or none declared (a client that forgot the header; ``curl -d`` declares a form instead).

    >>> json_media_type("application/json; charset=utf-8"), json_media_type(None), json_media_type("text/plain")
    (True, True, False)
    """
    kind = (content_type or "application/json").split(";")[0].strip().lower() or "application/json"
    return kind == "application/json" or kind.endswith("+json")


async def _send_error(send, status: int, kind: str, message: str, extra_headers=()) -> None:
    await _send_json(send, status, {"error": {"type": kind, "message": message}}, extra_headers)


async def _refuse(send, scope, status: int, kind: str, message: str, extra_headers=()) -> None:
    """A refusal before any route: the API's JSON error, or on ``/mcp`` a JSON-RPC error (Invalid
    Request, id null) at the same status. The MCP SDK's client surfaces a JSON-RPC error body and
    reads any other as "Server returned an error response", so an agent whose call was over the
    body bound, or whose Host or token the server refused, was never told which (trial 14b)."""
    await _send_json(send, status, refusal_answer(scope.get("path", ""), kind, message), extra_headers)


async def _send_json(send, status: int, answer: dict, extra_headers=()) -> None:
    body = json.dumps(answer).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *extra_headers]})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """Wraps an ASGI app.

    Parameters
    ----------
    policy
        The Host / Origin rules.
    max_body_bytes
        Largest request body (bytes).
    read_token, admin_token
        When ``read_token`` is set, every path but :data:`OPEN_PATHS` needs ``Authorization:
        Bearer`` with the read or the admin token (401 otherwise).
    """

    def __init__(self, app, policy: OriginPolicy, max_body_bytes: int, read_token: str | None = None,
                 admin_token: str | None = None) -> None:
        self.app = app
        self.policy = policy
        self.max_body_bytes = max_body_bytes
        self.read_token = read_token
        self.admin_token = admin_token

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "websocket":
            # The API has no WebSocket route; refusing every handshake here (403) keeps one added
            # later from being served without the Host, Origin and token checks above HTTP.
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        raw_headers = scope.get("headers") or ()
        if sum(len(k) + len(v) + 4 for k, v in raw_headers) > MAX_HEADER_BYTES:  # ": " and CRLF each
            await _refuse(send, scope, 431, "RequestHeaderFieldsTooLarge",
                              f"the request's headers are over {MAX_HEADER_BYTES} bytes")
            return
        path = scope.get("path", "")
        if len(path) > 1 and path.endswith("/"):
            # `/v1/search/` is `/v1/search`: Starlette answered it 307 with no body, which httpx and
            # most HTTP libraries do not follow for a POST, so the client saw an empty answer; the
            # MCP SDK's client did follow it (a second request). One answer for both spellings, the
            # checks below included (`/v1/health/` needs no token either; trial 24b).
            path = path.rstrip("/") or "/"
            scope = {**scope, "path": path, "raw_path": (scope.get("raw_path") or b"/").rstrip(b"/") or b"/"}
        headers = _headers(scope)
        if "content-length" in headers and "transfer-encoding" in headers:
            # A body framed two ways: where a proxy in front reads the other framing, a second
            # request hides in this one (request smuggling). RFC 9112 6.1 lets a server refuse it
            # and requires the connection closed after. httptools refuses it itself; h11, which
            # `fabric serve` runs, reads the chunks and kept the connection open (trial 22b).
            await _refuse(send, scope, 400, "BadRequest", "the body is framed both by Content-Length and by "
                          "Transfer-Encoding (RFC 9112 6.1); send one of them", [(b"connection", b"close")])
            return
        if not self.policy.host_ok(headers.get("host")):
            # The operator reads the remedy here (trial 20g): the name goes into config.json, not a flag.
            await _refuse(send, scope, 421, "MisdirectedRequest",
                          "the Host header does not name this server: it answers loopback names and its "
                          "bound host; add another name to server.allowed_hosts in the home's config.json "
                          "and restart the server")
            return
        if not self.policy.origin_ok(headers.get("origin")):
            await _refuse(send, scope, 403, "ForbiddenOrigin",
                          "requests from this Origin are not accepted: only this server's own loopback origin "
                          "is; add another to server.allowed_origins in the home's config.json and restart the "
                          "server")
            return
        if self.read_token and path not in OPEN_PATHS \
                and not bearer_matches(headers.get("authorization"), self.read_token, self.admin_token):
            # Where the token is, as the admin routes say (trial 22e: "needs a bearer token (read or
            # admin)" left a new client to find which token, and where, in the README).
            await _refuse(send, scope, 401, "Unauthorized",
                          "this server needs Authorization: Bearer <token>, the token being the content of the "
                          "file read-token (or admin-token) in the served home",
                          [(b"www-authenticate", b"Bearer")])
            return
        if self.admin_token and path.startswith(ADMIN_PREFIXES) and not is_admin(
                [v.decode("latin-1") for k, v in raw_headers if k.lower() == b"authorization"], self.admin_token):
            # Before the body's size, type and JSON are judged: a client without the token learnt
            # from a 413, 415 or 422 the bound and the body's format before it was told to
            # authenticate (trial 24b). The routes check the token again.
            await _refuse(send, scope, 401, "Unauthorized", ADMIN_TOKEN_NEEDED, [(b"www-authenticate", b"Bearer")])
            return
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                await _refuse(send, scope, 400, "BadRequest", "Content-Length is not a number")
                return
            if int(length) > self.max_body_bytes:
                await _refuse(send, scope, 413, "PayloadTooLarge", f"the body is over {self.max_body_bytes} bytes")
                return
        if scope["method"] == "HEAD":
            # A server MUST answer HEAD as it answers GET, without the body (RFC 9110 9.1, 9.3.2);
            # FastAPI routes a GET route's HEAD nowhere (405), so `curl -I /v1/health` and the
            # monitors that probe with HEAD were told the health check does not exist. The app sees
            # a GET; uvicorn, whose own scope still says HEAD, sends the headers only.
            scope = {**scope, "method": "GET"}
        if scope["method"] == "GET" and scope.get("path", "").rstrip("/") == MCP_PATH:
            # The MCP app answers POSTs statelessly (one JSON answer each) and never sends a
            # server-initiated message, yet the SDK answers a GET with an SSE stream that stays open
            # for good: each held a connection and ~100 KB (300 streams, still open 40 s later),
            # past every read deadline, until the process ran out of file descriptors. The MCP
            # transport lets a server without such a stream answer 405.
            await _send_json(send, 405, {"jsonrpc": "2.0", "id": None,
                                         "error": {"code": -32600, "message": "Method Not Allowed: this server "
                                                   "sends no event stream; POST each JSON-RPC message"}},
                             [(b"allow", b"POST")])
            return
        if scope["method"] in ("GET", "HEAD", "DELETE", "OPTIONS") and length is None \
                and "transfer-encoding" not in headers:
            await self.app(scope, receive, send)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await _refuse(send, scope, 413, "PayloadTooLarge", f"the body is over {self.max_body_bytes} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body, replayed = b"".join(chunks), False
        is_mcp = scope.get("path", "").rstrip("/") == MCP_PATH
        if is_mcp and scope["method"] == "POST" and not body.strip():
            # Sent with no Content-Type or another one, the MCP SDK answered an empty body in plain
            # text ("Invalid Content-Type header"), not as a JSON-RPC error its clients read (trial 24b).
            await _send_json(send, 400, {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32700, "message": "Parse error: the body is empty; POST one JSON-RPC message"}})
            return
        if body and scope["method"] in ("POST", "PUT", "PATCH"):
            declared = headers.get("content-type")
            if not json_media_type(declared):
                # Past here a body of another type was read as no body at all: FastAPI answered a
                # JSON object sent as a form (`curl -d` without -H) "body: Input should be a valid
                # dictionary", and the MCP SDK a plain-text "Invalid Content-Type header", the one
                # answer of the server that was not JSON.
                refusal = f"the body must be JSON (Content-Type: application/json), not {declared[:100]!r}"
                if is_mcp:
                    await _send_json(send, 415, {"jsonrpc": "2.0", "id": None,
                                                 "error": {"code": -32600, "message": f"Unsupported Media Type: {refusal}"}})
                else:
                    await _send_error(send, 415, "UnsupportedMediaType", refusal)
                return
            # Both readers behind the guard ignore a body without a JSON type (FastAPI) or refuse it
            # (the MCP SDK, which takes only the exact lower-case `application/json`): the type this
            # body is read as is declared to them so.
            scope = {**scope, "headers": [*(h for h in raw_headers if h[0].lower() != b"content-type"),
                                          (b"content-type", b"application/json")]}
        unreadable = unreadable_json(body)
        if unreadable:
            if is_mcp:
                await _send_json(send, 400, {"jsonrpc": "2.0", "id": None,
                                             "error": {"code": -32700, "message": f"Parse error: {unreadable}"}})
            else:
                await _send_error(send, 422, "RequestValidationError", f"the body is not JSON: {unreadable}")
            return
        if is_mcp and has_unusable_request_id(body):
            await _send_json(send, 400, {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32600, "message": "Invalid Request: an MCP request id is a string or an integer"}})
            return
        if is_mcp and (half := lone_surrogate(body)) is not None:
            # The SDK's reader calls it "Parse error: unexpected end of hex escape"; the API's routes
            # name the field ("unable to parse raw data as a unicode string") themselves.
            escape, request_id = half
            await _send_json(send, 400, {"jsonrpc": "2.0", "id": request_id, "error": {
                "code": -32600, "message": lone_surrogate_message(escape)}})
            return
        if is_mcp and scope["method"] == "POST" and (refused := not_a_message(body))[0]:
            # The SDK answers -32602 (Invalid params) with a pydantic dump of every union member.
            await _send_json(send, 400, {"jsonrpc": "2.0", "id": refused[1], "error": {
                "code": -32600, "message": NOT_A_MESSAGE}})
            return
        if is_mcp and scope["method"] == "POST" and (why := bad_tool_call(_decoded(body))) is not None:
            # The SDK answers -32602 with no word of what was wrong; the same code, saying it.
            await _send_json(send, 200, {"jsonrpc": "2.0", "id": _decoded(body)["id"],
                                         "error": {"code": -32602, "message": why}})
            return

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the client's disconnect, as the server reports it

        if is_mcp:
            # The MCP SDK runs a tool call to its end whether or not its POST is still open: a
            # search whose client hung up (or whose SDK client abandoned it: on HTTP it aborts the
            # POST instead of sending notifications/cancelled) held its gate slot to the end (trial
            # 14b). Cancelled here, the SDK ends the request's transport and with it the tool,
            # whose search the gate then stops (the read routes do the same for themselves).
            try:
                await unless_disconnected(receive, lambda: self.app(scope, replay, send))
            except Disconnected:
                pass  # nobody is left to answer
            return
        await self.app(scope, replay, send)
