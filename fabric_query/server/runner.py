"""Run an app on uvicorn and announce it in ``<home>/server.json`` while it listens."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import uvicorn

from fabric_query.server.discovery import remove_server_file, write_server_file
from fabric_query.server.guard import MAX_HEADER_BYTES
from fabric_query.server.protocol import MAX_WAITING_CONNECTIONS, REQUEST_READ_TIMEOUT_S, with_read_timeout


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that writes the home's server file once its socket listens and removes
    it when it stops (also when the port was 0: the file names the port the OS gave)."""

    def __init__(self, config: uvicorn.Config, home_root: Path, version: str,
                 on_listening: Callable[[str], None] | None = None) -> None:
        super().__init__(config)
        self.home_root = home_root
        self.version = version
        self.on_listening = on_listening
        self.announced: str | None = None
        self.stopped_by: int | None = None

    def handle_exit(self, sig: int, frame) -> None:
        self.stopped_by = sig
        super().handle_exit(sig, frame)

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets)
        if self.should_exit or not self.servers:
            return
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        self.announced = write_server_file(self.home_root, self.config.host or host, port, self.version).url
        if self.on_listening is not None:
            try:
                self.on_listening(self.announced)
            except BaseException:  # e.g. stdout a closed pipe: no shutdown will run to remove the file
                remove_server_file(self.home_root)
                raise

    async def shutdown(self, sockets=None) -> None:
        try:
            await super().shutdown(sockets)
        finally:
            remove_server_file(self.home_root)


class ListenError(OSError):
    """The server's socket cannot be bound (the port is in use or not allowed, the host is not an
    address of this machine): one line naming the address and the reason."""


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (``port`` 0: any free one), as uvicorn binds it
    (``SO_REUSEADDR``; IPv6 when ``host`` holds a colon), for :func:`serve`.

    Raises
    ------
    ListenError
        If it cannot be bound. Left to uvicorn, the failure was its own log line and a
        ``sys.exit`` inside the event loop, which aborted the process (exit 134, "FATAL:
        exception not rethrown") once the query models' threads were running.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise ListenError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except (OSError, OverflowError) as exc:  # OverflowError: a port past 65535 from a caller
        sock.close()
        why = getattr(exc, "strerror", None) or str(exc)
        raise ListenError(getattr(exc, "errno", None), f"cannot listen on {host}:{port}: {why}") from None
    sock.set_inheritable(True)
    return sock


def serve(app, host: str, port: int, home_root: Path, version: str, log_level: str = "warning",
          on_listening: Callable[[str], None] | None = None,
          request_read_timeout_s: float = REQUEST_READ_TIMEOUT_S, sock: socket.socket | None = None,
          max_waiting_connections: int = MAX_WAITING_CONNECTIONS, max_body_bytes: int | None = None) -> int | None:
    """Serve ``app`` on ``host:port`` until SIGINT / SIGTERM (uvicorn's own handling).

    ``on_listening(url)`` is called once the socket listens, with the URL ``server.json`` names
    (the port the OS gave when ``port`` is 0). ``request_read_timeout_s``: seconds a client has to
    send a whole request, ``max_waiting_connections``: connections owing one held at once, the
    oldest closed past it, ``max_body_bytes``: a chunk declared longer is refused at once
    (:mod:`fabric_query.server.protocol`). ``sock``: the socket
    :func:`listen` bound (bound here when None).

    Raises :class:`ListenError` when ``sock`` is None and ``host:port`` cannot be bound.

    Returns the number of the signal that stopped the server, or None. Uvicorn re-raises that
    signal after shutting down, which ends the process as the signal would have; but a process
    started with SIGINT ignored (``fabric serve &`` from a script: POSIX shells start background
    jobs so) survives the re-raise, and the caller must exit 128 + the number itself.
    """
    # h11, not httptools: httptools bounds no header, and one client sending an endless header
    # slowed every other request to 10-20 s and grew the process without limit (hostile trial 6).
    # h11 refuses a header section past MAX_HEADER_BYTES with a 400 and closes the connection; the
    # protocol closes one that takes longer than request_read_timeout_s to send its request.
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False,
                            lifespan="on", server_header=False, timeout_graceful_shutdown=10,
                            http=with_read_timeout(request_read_timeout_s, max_waiting_connections, max_body_bytes),
                            h11_max_incomplete_event_size=MAX_HEADER_BYTES)
    server = _AnnouncingServer(config, Path(home_root), version, on_listening)
    server.run(sockets=[sock if sock is not None else listen(host, port)])
    return server.stopped_by
