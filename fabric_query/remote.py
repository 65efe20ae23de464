"""The read commands' client of a running ``fabric serve`` of the same home.

:func:`call` finds the server through ``<home>/server.json`` (:mod:`fabric_query.server.discovery`:
written by the server, its process checked alive), sends one JSON request over loopback with the
standard library's HTTP client (cheap to import: a command answered by the server loads neither
Arrow nor Lance nor a model), and returns the JSON answer. It answers ``None`` whenever the
server cannot answer for it — none is running, it is not ready, its gate is full, the connection
fails — and the command then runs in-process as it always did, with identical output. An error
about the request itself (a query syntax error, a bad citation) comes back as
:class:`RemoteError` with the read side's error type and message, printed as the in-process
command prints it.

``FABRIC_USE_SERVER=0`` turns the client off (always in-process).
"""

from __future__ import annotations

import http.client
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

#: Seconds to wait for a connection to a server that the home says is running (loopback).
CONNECT_TIMEOUT_S = 2.0
#: Seconds to wait for its answer (a search is milliseconds; a first resolve reads source bytes).
ANSWER_TIMEOUT_S = 120.0


class RemoteError(Exception):
    """The server refused the request itself (4xx): ``kind`` is the read side's error type."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _token(home_root: Path, host: str) -> str | None:
    """The bearer a command on this home sends to a server at ``host``: the admin token when this
    user can read it and ``host`` is loopback (the operator: ``/v1/status`` and ``/v1/sources`` then
    name withheld sources, as in-process; never sent off the machine, whatever server.json names),
    else the read token when there is one, else None."""
    from fabric_query.server.discovery import READ_TOKEN_FILE
    from fabric_query.server.security import ADMIN_TOKEN_FILE, TokenFileError, is_loopback, load_token

    for name in ((ADMIN_TOKEN_FILE,) if is_loopback(host) else ()) + (READ_TOKEN_FILE,):
        try:
            return load_token(home_root / name)
        except (TokenFileError, OSError):
            continue
    return None


def call(home_root: Path, method: str, path: str, body: dict[str, Any] | None = None, *,
         operator: bool = False) -> Any | None:
    """The server's JSON answer to ``method path``, or None when the command should run in-process.
    With ``operator`` (``fabric status``), None too unless the server says it answered as to the
    operator (the admin token: ``fabric_query.server.routes.VIEW_HEADER``): a client's view names no
    withheld source, which the operator's command lists in-process.

    Raises
    ------
    RemoteError
        The server answered 4xx (other than "not ready" and "gate full"): the request is bad.
    """
    if os.environ.get("FABRIC_USE_SERVER", "1") == "0":
        return None
    from fabric_query.server.discovery import read_server_file

    record = read_server_file(home_root)
    if record is None:
        return None
    try:
        url = urlsplit(record.url)
        host, port = url.hostname, url.port
    except ValueError:  # a damaged server.json (bad port, unclosed bracket): run in-process
        return None
    headers = {"content-type": "application/json", "accept": "application/json"}
    token = _token(home_root, host or "")
    if token:
        headers["authorization"] = f"Bearer {token}"
    payload = None if body is None else json.dumps(body).encode("utf-8")
    conn = http.client.HTTPConnection(host, port, timeout=CONNECT_TIMEOUT_S)
    try:
        conn.connect()
        conn.sock.settimeout(ANSWER_TIMEOUT_S)
        conn.request(method, path, body=payload, headers=headers)
        response = conn.getresponse()
        data = json.loads(response.read() or b"null")
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        conn.close()
    if response.status < 400:
        # The header's name as routes.VIEW_HEADER spells it (not imported: this client loads no server code).
        if operator and response.getheader("fabric-view") != "operator":
            return None  # no admin token sent (not loopback, not readable) or not this server's
        return data
    error = (data or {}).get("error", {}) if isinstance(data, dict) else {}
    kind = error.get("type", "")
    # 413 is the server's own bound on bodies (`server.max_body_bytes`), not a verdict on the request:
    # a 12,000-character query printed "PayloadTooLarge: the body is over 65536 bytes" through the
    # server and "QueryTooLongError: … the limit is 1000" in-process; the in-process path says why.
    if 400 <= response.status < 500 and response.status not in (409, 413) and kind not in ("", "Unauthorized"):
        raise RemoteError(kind, str(error.get("message", "")))
    return None  # not ready, gate full, no release, a body over the server's bound, a server fault: in-process answers
