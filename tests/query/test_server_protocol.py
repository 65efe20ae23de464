"""The HTTP protocol of `fabric serve` (fabric_query/server/protocol.py) over a real uvicorn on
loopback: a client that stops taking its answer is cut off once the write deadline passes."""

from __future__ import annotations

import socket
import time

import pytest
from live_server import live_server
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from fabric_query.server.protocol import with_read_timeout

#: An answer far past what the kernel's socket buffers and the transport's high-water mark hold.
BIG = 32 * 1024 * 1024


def _big_answer_app(_port: int) -> Starlette:
    async def big(_request):
        return Response(b"x" * BIG, media_type="application/octet-stream")

    return Starlette(routes=[Route("/big", big)])


def _read_all(sock: socket.socket) -> int:
    got = 0
    try:
        while chunk := sock.recv(1 << 20):
            got += len(chunk)
    except (ConnectionResetError, socket.timeout):
        pass
    return got


@pytest.mark.parametrize("stalled_s", [0.0, 6.0])
def test_a_client_that_stops_reading_its_answer_is_cut_off_and_one_that_reads_gets_it_whole(stalled_s):
    """guards against (trial 14b): a client that sent a request and then read nothing (a stalled
    agent) holding its answer in the server's memory for good: uvicorn has no write deadline, and
    its keep-alive close waits for the buffer to drain. With a 2 s deadline, the client that waits
    6 s gets less than the answer (reset); one that reads at once gets all of it."""
    with live_server(_big_answer_app, http=with_read_timeout(2.0)) as url:
        port = int(url.rsplit(":", 1)[1])
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the kernel keeps little for us
        sock.connect(("127.0.0.1", port))
        sock.settimeout(10)
        sock.sendall(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        time.sleep(stalled_s)
        got = _read_all(sock)
        sock.close()
    if stalled_s:
        assert got < BIG, "the stalled client's answer was still held for it"
    else:
        assert got > BIG  # the headers and the whole body


def _ok_app(_port: int) -> Starlette:
    async def ok(_request):
        return Response(b"ok")

    return Starlette(routes=[Route("/", ok)])


def _answer(sock: socket.socket) -> bytes:
    """The whole answer of :func:`_ok_app` on ``sock`` (its headers and body may come apart)."""
    sock.settimeout(10)
    got = b""
    while not got.endswith(b"ok") and (chunk := sock.recv(4096)):
        got += chunk
    return got


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (end of file), waiting for its FIN at most 10 s: a hang guard."""
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_connections_that_owe_a_request_are_bounded_the_oldest_closed_and_a_fresh_client_answered():
    """guards against (trial 21b): no bound on connections that send nothing: each was held for
    request_read_timeout_s (30 s), and a local process holding a few hundred of them used up the
    server's file descriptors, so a fresh client got no answer. Past the bound the oldest silent
    ones are closed (here the read deadline and keep-alive, an hour, close none), the newest kept, and a fresh
    client is answered; a connection whose answer is under way is not counted."""
    with live_server(_ok_app, http=with_read_timeout(3600.0, max_waiting=4), timeout_keep_alive=3600) as url:
        port = int(url.rsplit(":", 1)[1])
        kept_alive = socket.create_connection(("127.0.0.1", port))
        kept_alive.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert _answer(kept_alive).startswith(b"HTTP/1.1 200")  # answered, kept alive: owes a request again
        silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(10)]
        fresh = socket.create_connection(("127.0.0.1", port))
        fresh.settimeout(10)
        fresh.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        answer = _answer(fresh)
        # The kept-alive one and the seven oldest silent ones went; the three newest silent ones stay
        # (with the fresh one, four owed a request when it came).
        closed = [_closed_by_server(kept_alive)] + [_closed_by_server(s) for s in silent[:7]]
        for s in silent[7:]:
            s.setblocking(False)
        still_open = []
        for s in silent[7:]:
            try:
                still_open.append(s.recv(1) != b"")
            except BlockingIOError:
                still_open.append(True)
        for s in [kept_alive, fresh, *silent]:
            s.close()
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ok"), answer
    assert closed == [True] * 8 and still_open == [True] * 3, (closed, still_open)


def test_the_bound_on_waiting_connections_is_a_setting_with_a_sane_default():
    """``server.max_waiting_connections``: far under a process's usual 1024 descriptors, at least 1."""
    from pydantic import ValidationError

    from fabric_resources.config import ServerConfig

    assert ServerConfig().max_waiting_connections == 128
    with pytest.raises(ValidationError):
        ServerConfig(max_waiting_connections=0)
    with pytest.raises(ValueError):
        with_read_timeout(30.0, max_waiting=0)


def _echo_app(_port: int) -> Starlette:
    async def ok(request):
        await request.body()
        return Response(b"ok")

    return Starlette(routes=[Route("/", ok, methods=["GET", "POST"])])


#: A whole request, then part of a second: its headers cut short, or its body.
_WHOLE_AND_PART = {"headers": b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHo",
                   "body": b"GET / HTTP/1.1\r\nHost: x\r\n\r\nPOST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc"}


@pytest.mark.parametrize("cut", sorted(_WHOLE_AND_PART))
@pytest.mark.parametrize("by", ["bound", "read deadline"])
def test_a_request_sent_in_part_behind_an_answered_one_is_owed_as_any_other(cut, by):
    """guards against (trial 21f): a client that pipelines a whole request and part of another
    (headers or body cut short), then goes silent, was neither counted among the connections that
    owe a request nor given the read deadline once its first answer went: the part-sent body held
    the connection for ever (uvicorn's keep-alive timer stops at the request's headers), and any
    number of them escaped max_waiting_connections. Its first request is still answered."""
    bound = by == "bound"
    with live_server(_echo_app, http=with_read_timeout(3600.0 if bound else 0.5, max_waiting=2),
                     timeout_keep_alive=3600) as url:
        port = int(url.rsplit(":", 1)[1])
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(_WHOLE_AND_PART[cut])
        assert _answer(sock).startswith(b"HTTP/1.1 200")
        newer = [socket.create_connection(("127.0.0.1", port)) for _ in range(3 if bound else 0)]
        closed = _closed_by_server(sock)
        for s in [sock, *newer]:
            s.close()
    assert closed
