"""A real HTTP server on 127.0.0.1 for testing HTTP clients (embeddings, rerank, chat).

``respond(request) -> Reply`` decides each answer; every request is recorded. The server
runs in a daemon thread (one thread per connection), so slow replies do not block others.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: Any  # parsed JSON, or raw bytes when not JSON


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # JSON-serialisable, or bytes sent as-is
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


class LoopbackServer:
    """``with LoopbackServer(respond) as srv: srv.url`` → ``http://127.0.0.1:PORT``."""

    def __init__(self, respond: Callable[[Request], Reply]) -> None:
        self.respond = respond
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Without TCP_NODELAY the stdlib handler adds ~40 ms per reply that no real server adds.
            disable_nagle_algorithm = True

            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                req = Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with outer._lock:
                    outer.requests.append(req)
                reply = outer.respond(req)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                payload = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass

            do_GET = do_POST = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "LoopbackServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
