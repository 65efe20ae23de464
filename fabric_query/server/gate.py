"""The admission gate: at most ``server.max_concurrent_queries`` query requests run at once.

Blocking query work runs in a thread pool of exactly that many threads. A request that finds
every slot taken is refused at once (:class:`GateFull`, answered 503 with ``Retry-After``),
never queued: a queue would only turn overload into timeouts (the Data Store's admission rule).
A slot is released when the work itself ends, not when its request goes away, so a client that
disconnects cannot let more work run than the gate admits. What a disconnect does instead is ask
the work to stop: the task awaiting :meth:`AdmissionGate.run` is cancelled (the HTTP routes cancel
it when their client disconnects, :func:`fabric_query.server.protocol.unless_disconnected`; the MCP
SDK when a client cancels its request), the gate sets the work's ``cancel`` event, and a search
stops at its next stage boundary (:func:`fabric_query.pipeline.search`), freeing its slot then.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class GateFull(Exception):
    """Every slot of the gate is taken; retry after ``retry_after_s`` seconds."""

    def __init__(self, limit: int, retry_after_s: int) -> None:
        super().__init__(f"{limit} queries are running, the most this server admits at once; retry later")
        self.limit = limit
        self.retry_after_s = retry_after_s


class AdmissionGate:
    """``await gate.run(fn, *args)`` runs ``fn`` in the pool, or raises :class:`GateFull` at once.

    Parameters
    ----------
    limit
        Slots (and pool threads), ``>= 1``.
    retry_after_s
        What a refused request is told to wait (seconds).
    """

    def __init__(self, limit: int, retry_after_s: int) -> None:
        if limit < 1:
            raise ValueError("the gate needs at least one slot")
        self.limit = limit
        self.retry_after_s = retry_after_s
        self._pool = ThreadPoolExecutor(max_workers=limit, thread_name_prefix="fabric-query")
        self._lock = threading.Lock()
        self._in_flight = 0
        #: Work items admitted and refused since the gate opened.
        self.admitted = 0
        self.refused = 0

    @property
    def in_flight(self) -> int:
        """Work items admitted and not finished."""
        return self._in_flight

    def _release(self, _future) -> None:
        with self._lock:
            self._in_flight -= 1

    async def run(self, fn: Callable[..., T], *args, cancel: threading.Event | None = None) -> T:
        """Run ``fn(*args)`` in the pool when a slot is free.

        ``cancel``: the event ``fn`` checks to stop early (a search's ``cancel``). When the task
        awaiting this call is cancelled, ``cancel`` is set and the cancellation goes on at once;
        the slot stays taken until ``fn`` has returned or raised (its result is dropped).

        Raises
        ------
        GateFull
            Every slot is taken.
        """
        with self._lock:
            if self._in_flight >= self.limit:
                self.refused += 1
                raise GateFull(self.limit, self.retry_after_s)
            self._in_flight += 1
            self.admitted += 1
        try:
            future = self._pool.submit(fn, *args)
        except BaseException:
            self._release(None)
            raise
        future.add_done_callback(self._release)
        try:
            # Cancelled, it cancels the pool's future too: work not yet begun never runs.
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:  # anyio's cancellation, on the asyncio backend
            if cancel is not None:
                cancel.set()
            raise

    def close(self) -> None:
        """Stop taking work; running work finishes."""
        self._pool.shutdown(wait=False, cancel_futures=True)
