"""A real uvicorn server on 127.0.0.1 for one test: a free port, started and stopped by the test.

``with live_server(make_app) as url: ...`` binds a socket on port 0 (the OS picks a free port),
builds the app with ``make_app(port)`` (the server's Host / Origin rules name the port), runs
uvicorn on it in a daemon thread and waits until it listens; leaving the block asks it to stop
and joins the thread. :class:`RecordingAdmin` is an admin backend for such a server that runs nothing.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import uvicorn


@contextlib.contextmanager
def live_server(make_app, timeout_s: float = 30.0, **config):
    """``config``: more ``uvicorn.Config`` arguments (``http=`` a protocol class, ...)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(make_app(port), host="127.0.0.1", port=port, log_level="warning", access_log=False,
                            lifespan="on", **config)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout_s)
        sock.close()


def wait_ready(client, timeout_s: float = 120.0) -> dict:
    """Poll ``/v1/ready`` until 200 (the query models loaded); its body."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = client.get("/v1/ready")
        if r.status_code == 200:
            return r.json()
        if time.monotonic() > deadline:
            raise AssertionError(f"server not ready: {r.status_code} {r.text}")
        time.sleep(0.05)


class RecordingAdmin:
    """An admin backend for the server's tests: it records what it was asked and runs nothing, and
    offers the operation kinds it is given."""

    def __init__(self, kinds: tuple[str, ...] = ("snapshot",)) -> None:
        self._kinds = kinds
        self.submitted: list[tuple[str, dict]] = []

    def kinds(self) -> tuple[str, ...]:
        return self._kinds

    def submit(self, kind: str, params: dict) -> str:
        self.submitted.append((kind, params))
        return "0" * 32

    def operation(self, operation_id: str) -> dict | None:
        return {"operation_id": operation_id, "status": "succeeded"}

    def close(self) -> None:
        pass
