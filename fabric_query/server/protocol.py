"""The HTTP protocol ``fabric serve`` speaks: uvicorn's h11, with a deadline on reading each request.

uvicorn times out a connection idle between requests (``timeout_keep_alive``) but not one that
has started a request and never finishes it: thousands of clients each sending a header line every
few seconds (or a chunked body that never ends) held the server's file descriptors until normal
clients were refused (hostile trial 6). Here a client has ``read_timeout_s`` from the connection,
or from its first byte after a response, to send one whole request (line, headers and body, the
body at most ``server.max_body_bytes``); past it the connection is closed. Once a request is whole
the deadline stops: a slow search is the server's time, not the client's. The same deadline holds
for taking the answer: once the server's write buffer is full, a client that does not take enough
of it for writing to resume within ``read_timeout_s`` is cut off and the buffer freed (was: a
client that stopped reading held its answer, megabytes for a search of ``limit`` 1000, for good;
uvicorn bounds no write, and closing a connection waits for its buffer to drain).

Connections that owe the server a request (connected and silent, sending one, or kept alive after
an answer) are bounded too: past ``max_waiting`` of them the oldest is closed (was: a local process
holding a few hundred silent connections for their 30 s exhausted the server's file descriptors,
and a fresh client got no answer). uvicorn's own ``limit_concurrency`` does not answer it: it
counts those connections and answers the fresh client's request 503, where the silent ones are
what should go. A connection whose request is whole (being answered) is never closed for it.

A request h11 cannot read (a malformed request line or header, a bad chunk size) is answered as
every other error of the API: JSON ``{"error": {"type": "BadRequest", "message": ...}}``, not
uvicorn's plain text.

A client that closes its connection before its answer cancels the work it asked for
(:func:`unless_disconnected`), so the server does not go on with a search nobody will read.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

T = TypeVar("T")

#: ``server.request_read_timeout_s``'s default: seconds to send one whole request.
REQUEST_READ_TIMEOUT_S = 30.0
#: ``server.max_waiting_connections``'s default: connections that owe a request, at most. Far under
#: a process's usual 1024 file descriptors, which the query models and tables share.
MAX_WAITING_CONNECTIONS = 128
#: h11 states in which the client has sent all it will of the current request.
_WHOLE = (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR)


class DeadlineH11Protocol(H11Protocol):
    """:class:`uvicorn.protocols.http.h11_impl.H11Protocol` with a request-read deadline
    (:data:`read_timeout_s` seconds; see the module docstring). Pass a subclass with another
    value as uvicorn's ``http`` (:func:`with_read_timeout`), which also bounds the connections
    waiting for a request to :data:`max_waiting` (the oldest closed first)."""

    read_timeout_s: float = REQUEST_READ_TIMEOUT_S
    max_waiting: int = MAX_WAITING_CONNECTIONS
    #: The connections of this class (one server's: :func:`with_read_timeout` makes a class a
    #: server) that owe a request, oldest first; touched only on the event loop's thread.
    _waiting: dict["DeadlineH11Protocol", None] = {}
    _deadline: asyncio.TimerHandle | None = None
    _write_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()
        self._wait()

    def connection_lost(self, exc: Exception | None) -> None:
        self._waiting.pop(self, None)
        self._disarm()
        self._disarm_write()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # Kept alive: it owes a request again, unless a pipelined one came whole (uvicorn took it
        # up just now). One sent in part behind the answered one (its headers, or its body, cut
        # short) is owed as one under way is: counted, and given the read deadline, which no
        # data_received armed for it (a client sending a whole request and half of another held
        # its connection for ever, uncounted; trial 21f).
        if not self.transport.is_closing() and self.conn.their_state not in _WHOLE:
            self._wait()
            if self.conn.their_state is not h11.IDLE or self.conn.trailing_data[0]:
                self._arm()

    def _wait(self) -> None:
        """Count this connection as owing a request (the newest); close the oldest past the bound."""
        waiting = self._waiting
        waiting.pop(self, None)
        waiting[self] = None
        while len(waiting) > self.max_waiting:
            oldest = next(iter(waiting))
            del waiting[oldest]
            oldest.transport.close()

    def pause_writing(self) -> None:
        """The transport's buffer is over its high-water mark: the client has ``read_timeout_s`` to
        take enough of it for writing to resume."""
        super().pause_writing()
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(self.read_timeout_s, self._write_expired)

    def resume_writing(self) -> None:
        self._disarm_write()
        super().resume_writing()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state in _WHOLE:
            self._disarm()
            self._waiting.pop(self, None)  # the server's turn: never closed for the bound
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

    def _disarm_write(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def _write_expired(self) -> None:
        self._write_deadline = None
        # abort, not close: close waits for the buffer to drain, which is what never happens here.
        self.transport.abort()

    def _expire(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


class Disconnected(Exception):
    """The client closed its connection before the answer was ready; the work was cancelled."""


async def unless_disconnected(receive: Callable[[], Awaitable[dict[str, Any]]],
                              work: Callable[[], Awaitable[T]]) -> T:
    """``await work()``, cancelled (anyio cancellation) if the client disconnects first.

    ``receive``: the request's ASGI ``receive``, once its body has been read whole: uvicorn then
    answers it only with ``http.disconnect``, when the connection closes (Starlette's streaming
    responses listen so). Awaiting it also resumes reading the socket, which is what lets the
    server notice the close while the work runs (uvicorn stops reading a connection once its
    request is whole). Work in the admission gate stops as
    :meth:`~fabric_query.server.gate.AdmissionGate.run` says.

    Raises
    ------
    Disconnected
        The client disconnected before ``work`` ended; nothing can be answered.
    """
    result: Any = None
    failure: Exception | None = None
    finished = False
    async with anyio.create_task_group() as tasks:
        async def cancel_on_disconnect() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass  # a GET's empty body, still to be taken
            tasks.cancel_scope.cancel()

        tasks.start_soon(cancel_on_disconnect)
        try:
            result, finished = await work(), True
        except Exception as exc:  # noqa: BLE001 - raised below as it is: a task group would wrap it in a group
            failure = exc
        tasks.cancel_scope.cancel()  # the answer is ready: stop listening
    if failure is not None:
        raise failure
    if not finished:
        raise Disconnected("the client disconnected before the answer")
    return result


def with_read_timeout(seconds: float, max_waiting: int = MAX_WAITING_CONNECTIONS) -> type[DeadlineH11Protocol]:
    """:class:`DeadlineH11Protocol` with ``read_timeout_s`` = ``seconds`` and at most
    ``max_waiting`` (>= 1) connections owing a request: a class for one server."""
    if max_waiting < 1:
        raise ValueError(f"max_waiting must be at least 1, not {max_waiting}")
    return type("DeadlineH11Protocol", (DeadlineH11Protocol,),
                {"read_timeout_s": float(seconds), "max_waiting": int(max_waiting), "_waiting": {}})


__all__ = ["DeadlineH11Protocol", "Disconnected", "MAX_WAITING_CONNECTIONS", "REQUEST_READ_TIMEOUT_S",
           "unless_disconnected", "with_read_timeout"]
