"""Channels that run beside the others (``Channel.runs_beside``): the pipeline starts them on a
worker thread as the query opens and waits for them in their turn. What a query answers must not
depend on it: the same runs, the same order, the same skips, the same exceptions; only the
timings say it happened (``<stage>`` lapped on the worker, ``<stage>_wait`` on the query's thread).

The channels here are stand-ins that record what they see; the real dense channel through the
real pipeline is compared with the exact product in tests/assets/test_dense_index_lifecycle.py
(there the ANN route runs beside the word search and the exact one does not).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest

from fabric_query.channels.base import ChannelRun
from fabric_query.context import QueryContext, Stopwatch
from fabric_query.pipeline import run_channels

WAIT_S = 10.0


@dataclass(eq=False)
class Standin:
    """A channel whose run returns ``ranking`` (or raises ``error``) after ``before`` is set."""

    name: str
    stage: str
    beside: bool
    ranking: list = field(default_factory=list)
    skipped: str | None = None
    error: Exception | None = None
    before: threading.Event | None = None
    after: threading.Event = field(default_factory=threading.Event)
    threads: list = field(default_factory=list)
    hard_constraint_carrier = False
    fallback = None

    def applies(self, ctx) -> bool:
        return True

    def runs_beside(self, ctx) -> bool:
        return self.beside

    def run(self, ctx) -> ChannelRun:
        self.threads.append(threading.get_ident())
        if self.before is not None and not self.before.wait(WAIT_S):
            raise AssertionError(f"{self.name} waited {WAIT_S} s for a channel that never ran")
        self.after.set()
        if self.error is not None:
            raise self.error
        return ChannelRun.skip(self.skipped) if self.skipped else ChannelRun(list(self.ranking))

    def fusion(self, config):
        return None


def _ctx(*channels: Standin) -> QueryContext:
    # Only what run_channels reads is real; the rest is never touched here.
    return QueryContext(home=None, config=None, parsed=None, view=None, eligible=None, sources_by_parse={},
                        depth=10, limit=10, encoders=None, selected=frozenset(c.name for c in channels),
                        clock=Stopwatch())


def _channels(beside: bool, **dense) -> tuple[Standin, Standin]:
    word = Standin("word", "lexical", False, ranking=[("c1", 2.0), ("c2", 1.0)])
    vector = Standin("dense", "dense", beside, ranking=[("c2", 0.9), ("c3", 0.5)], **dense)
    return word, vector


def test_a_channel_beside_runs_while_the_channels_before_it_run():
    """guards against: 'beside' that still runs one after the other (the word search would finish
    before the dense run starts, and this dense run waits for the word search to be under way)."""
    word, vector = _channels(True)
    vector.before = threading.Event()
    word.before = vector.after  # the word channel runs only once the dense run has begun ...
    started = threading.Event()
    word_run = word.run

    def word_starts_then_runs(ctx):
        vector.before.set()  # ... and the dense run may finish only once the word channel started
        started.set()
        return word_run(ctx)

    word.run = word_starts_then_runs
    ctx = _ctx(word, vector)
    runs, skipped = run_channels(ctx, (word, vector))
    assert started.is_set() and list(runs) == ["word", "dense"] and skipped == {}
    assert ctx.ran_beside(("channel-run", "dense")) and sorted(t.stage for t in ctx.clock.timings) == [
        "dense", "dense_wait", "lexical"]
    assert vector.threads[0] != word.threads[0] == threading.get_ident()


@pytest.mark.parametrize("dense", [{}, {"skipped": "dense-index-missing: gone"}], ids=["ranks", "skips"])
def test_beside_or_in_turn_the_runs_are_the_same(dense):
    """guards against: a run started early whose result lands under another name, in another
    order, or is lost (a skip not reported, a ranking cut or duplicated)."""
    answers = []
    for beside in (False, True):
        word, vector = _channels(beside, **dense)
        ctx = _ctx(word, vector)
        runs, skipped = run_channels(ctx, (word, vector))
        answers.append(({n: r.ranking for n, (_, r) in runs.items()}, list(runs), skipped))
        stages = sorted(t.stage for t in ctx.clock.timings)
        # Beside: lapped on the worker, waited for here; unless still queued in its turn (run here).
        assert stages in ([["dense", "dense_wait", "lexical"], ["dense", "lexical"]] if beside
                          else [["dense", "lexical"]])
        assert len(vector.threads) == 1  # run once, not once early and once in turn
    assert answers[0] == answers[1]


def test_an_error_beside_is_raised_as_it_would_be_in_turn():
    """guards against: an exception on the worker thread swallowed (a query answering without its
    dense channel and without saying so) or raised as another type."""
    for beside in (False, True):
        word, vector = _channels(beside, error=KeyError("boom"))
        with pytest.raises(KeyError, match="boom"):
            run_channels(_ctx(word, vector), (word, vector))


def test_a_channel_not_selected_is_not_started_beside():
    """guards against: a channel the caller left out (``channels=``) still run on the worker."""
    word, vector = _channels(True)
    ctx = QueryContext(home=None, config=None, parsed=None, view=None, eligible=None, sources_by_parse={},
                       depth=10, limit=10, encoders=None, selected=frozenset({"word"}), clock=Stopwatch())
    runs, _ = run_channels(ctx, (word, vector))
    assert list(runs) == ["word"] and vector.threads == []


def test_a_query_whose_task_is_queued_does_the_work_itself():
    """guards against: a query held up behind other queries' background work (every worker busy):
    its dense run waits in the queue while the query idles. It must take the task back and run it."""
    from fabric_query.context import _BACKGROUND, BACKGROUND_WORKERS

    release = threading.Event()
    busy = [_BACKGROUND.submit(release.wait, WAIT_S) for _ in range(BACKGROUND_WORKERS)]
    try:
        word, vector = _channels(True)
        ctx = _ctx(word, vector)
        runs, _ = run_channels(ctx, (word, vector))
        assert [t.stage for t in ctx.clock.timings] == ["lexical", "dense"]
        assert not release.is_set() and list(runs) == ["word", "dense"]
        assert vector.threads == [threading.get_ident()]  # run here, once
        assert ctx.ran_beside(("channel-run", "dense")) is False
    finally:
        release.set()
        for f in busy:
            f.result(WAIT_S)


def test_a_failed_query_cancels_work_not_yet_started():
    """guards against: a query that failed in its word search leaving its dense run queued, to run
    later against a view the query no longer holds."""
    from fabric_query.context import _BACKGROUND, BACKGROUND_WORKERS

    release = threading.Event()
    busy = [_BACKGROUND.submit(release.wait, WAIT_S) for _ in range(BACKGROUND_WORKERS)]
    try:
        word, vector = _channels(True)
        word.error = RuntimeError("word index unreadable")
        ctx = _ctx(word, vector)
        with pytest.raises(RuntimeError, match="unreadable"):
            run_channels(ctx, (word, vector))
        assert ctx._memo[("channel-run", "dense")].cancelled()
    finally:
        release.set()
        for f in busy:
            f.result(WAIT_S)
    assert vector.threads == []
