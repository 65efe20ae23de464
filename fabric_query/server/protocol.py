"""The HTTP protocol ``fabric serve`` speaks: uvicorn's h11, with a deadline on reading each request.

uvicorn times out a connection idle between requests (``timeout_keep_alive``) but not one that
has started a request and never finishes it: thousands of clients each sending a header line every
few seconds (or a chunked body that never ends) held the server's file descriptors until normal
clients were refused (hostile trial 6). Here a client has ``read_timeout_s`` from the connection,
or from its first byte after a response, to send one whole request (line, headers and body, the
body at most ``server.max_body_bytes``); past it the connection is closed. Once a request is whole
the deadline stops: a slow search is the server's time, not the client's.

A request h11 cannot read (a malformed request line or header, a bad chunk size) is answered as
every other error of the API: JSON ``{"error": {"type": "BadRequest", "message": ...}}``, not
uvicorn's plain text.
"""

from __future__ import annotations

import asyncio
import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

#: ``server.request_read_timeout_s``'s default: seconds to send one whole request.
REQUEST_READ_TIMEOUT_S = 30.0
#: h11 states in which the client has sent all it will of the current request.
_WHOLE = (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR)


class DeadlineH11Protocol(H11Protocol):
    """:class:`uvicorn.protocols.http.h11_impl.H11Protocol` with a request-read deadline
    (:data:`read_timeout_s` seconds; see the module docstring). Pass a subclass with another
    value as uvicorn's ``http`` (:func:`with_read_timeout`)."""

    read_timeout_s: float = REQUEST_READ_TIMEOUT_S
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state in _WHOLE:
            self._disarm()
        elif self.conn.their_state is not h11.IDLE or self.conn.trailing_data[0]:
            self._arm()  # a request begun (headers or body under way)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request h11 rejected (``msg``: uvicorn's ``Invalid HTTP request
        received.``, or h11's reason), as the API's JSON error; the connection is then closed."""
        body = json.dumps({"error": {"type": "BadRequest", "message": msg}}).encode()
        for event in (h11.Response(status_code=400, reason=b"Bad Request",
                                   headers=[(b"content-type", b"application/json"),
                                            (b"content-length", str(len(body)).encode()),
                                            (b"connection", b"close")]),
                      h11.Data(data=body), h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        self.transport.close()

    def _arm(self) -> None:
        if self._deadline is None:
            self._deadline = self.loop.call_later(self.read_timeout_s, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def with_read_timeout(seconds: float) -> type[DeadlineH11Protocol]:
    """:class:`DeadlineH11Protocol` with ``read_timeout_s`` = ``seconds``."""
    return type("DeadlineH11Protocol", (DeadlineH11Protocol,), {"read_timeout_s": float(seconds)})


__all__ = ["DeadlineH11Protocol", "REQUEST_READ_TIMEOUT_S", "with_read_timeout"]
