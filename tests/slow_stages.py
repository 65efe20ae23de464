"""A slow search for tests of cancellation: a rescoring stage to put many times over into
``fabric_query.pipeline.RESCORING`` (``monkeypatch.setattr(pipeline, "RESCORING", (slow,) * 100)``),
so a query has many stage boundaries to stop at."""

from __future__ import annotations

import threading
import time

from fabric_query.stages.base import Rescored


class SlowStages:
    """A rescoring stage of 0.2 s a run that applies to queries with the word ``slowly``; ``runs``
    counts its runs, ``threads`` the threads that ran it (clear it to count anew)."""

    name = candidates_key = "slow"

    def __init__(self) -> None:
        self.runs = 0
        self.threads: set[int] = set()
        self._lock = threading.Lock()

    def applies(self, ctx) -> bool:
        return "slowly" in ctx.parsed.positive_text

    def run(self, ctx, ranked):
        with self._lock:
            self.runs += 1
            self.threads.add(threading.get_ident())
        time.sleep(0.2)
        return Rescored(ranked=ranked)
