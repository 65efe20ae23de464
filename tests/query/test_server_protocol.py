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
