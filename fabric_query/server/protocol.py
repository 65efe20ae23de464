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

A chunked body whose chunk-size line declares more than ``max_body_bytes`` is refused as soon as
h11 has read that line (413, the connection closed): such a body can only end past the bound the
guard enforces, so there is nothing to wait for (was: the guard counted the bytes as they came and
the client, having sent a few, kept the connection until the read deadline, 30 s by default).

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
#: The MCP endpoint's path (its errors are JSON-RPC objects).
MCP_PATH = "/mcp"


def refusal_answer(path: str, kind: str, message: str) -> dict[str, Any]:
    """The JSON answer of a request refused before any route: the API's ``{"error": {"type",
    "message"}}``, or on ``/mcp`` a JSON-RPC error (Invalid Request, id null). The MCP SDK's client
    surfaces a JSON-RPC error body and reads any other as "Server returned an error response"
    (trial 14b)."""
    if path.rstrip("/") == MCP_PATH:
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": f"Invalid Request: {kind}: {message}"}}
    return {"error": {"type": kind, "message": message}}


def _declared_chunk_bytes(conn: h11.Connection) -> int:
    """Bytes of the chunk being received that have not arrived yet, as its chunk-size line declared
    them (0 outside a chunked body). h11 keeps them in its reader and has no public accessor; an
    h11 without that attribute reads 0 here, and the guard's count and the read deadline bound the
    body as before (the test of this refusal would fail, not the server)."""
    return int(getattr(getattr(conn, "_reader", None), "_bytes_in_chunk", 0) or 0)


class DeadlineH11Protocol(H11Protocol):
    """:class:`uvicorn.protocols.http.h11_impl.H11Protocol` with a request-read deadline
    (:data:`read_timeout_s` seconds; see the module docstring). Pass a subclass with another
    value as uvicorn's ``http`` (:func:`with_read_timeout`), which also bounds the connections
    waiting for a request to :data:`max_waiting` (the oldest closed first)."""

    read_timeout_s: float = REQUEST_READ_TIMEOUT_S
    max_waiting: int = MAX_WAITING_CONNECTIONS
    #: A chunk declared longer than this is refused at once (None: not checked; the guard bounds the body).
    max_body_bytes: int | None = None
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
        if self.transport.is_closing():
            return
        if (self.max_body_bytes is not None and self.conn.their_state is h11.SEND_BODY
                and _declared_chunk_bytes(self.conn) > self.max_body_bytes):
            self._refuse_now(413, "PayloadTooLarge", f"the body is over {self.max_body_bytes} bytes (a chunk "
                             f"declared {_declared_chunk_bytes(self.conn)})")
            return
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

    def _refuse_now(self, status: int, kind: str, message: str) -> None:
        """Answer the request being received with ``status`` and close the connection, as
        uvicorn answers a request h11 rejects mid-body (:meth:`send_400_response`): the app,
        waiting for the body, then reads a disconnect. When the app has begun its answer (a
        refusal of its own), the connection is only closed."""
        cycle = getattr(self, "cycle", None)
        if self.conn.our_state is h11.SEND_RESPONSE and not (cycle is not None and cycle.response_started):
            body = json.dumps(refusal_answer(self.scope.get("path", ""), kind, message)).encode()
            for event in (h11.Response(status_code=status, headers=[(b"content-type", b"application/json"),
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


def with_read_timeout(seconds: float, max_waiting: int = MAX_WAITING_CONNECTIONS,
                      max_body_bytes: int | None = None) -> type[DeadlineH11Protocol]:
    """:class:`DeadlineH11Protocol` with ``read_timeout_s`` = ``seconds``, at most ``max_waiting``
    (>= 1) connections owing a request, and a chunk declared over ``max_body_bytes`` (the guard's
    ``server.max_body_bytes``; None: not checked) refused at once: a class for one server."""
    if max_waiting < 1:
        raise ValueError(f"max_waiting must be at least 1, not {max_waiting}")
    return type("DeadlineH11Protocol", (DeadlineH11Protocol,),
                {"read_timeout_s": float(seconds), "max_waiting": int(max_waiting), "_waiting": {},
                 "max_body_bytes": max_body_bytes})


__all__ = ["DeadlineH11Protocol", "Disconnected", "MAX_WAITING_CONNECTIONS", "MCP_PATH", "REQUEST_READ_TIMEOUT_S",
           "refusal_answer", "unless_disconnected", "with_read_timeout"]
