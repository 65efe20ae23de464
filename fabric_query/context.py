"""The frozen per-query context: everything one ``search`` call is about, read by every stage.

:func:`open_query` checks the arguments, parses the query, pins the release under today's
visibility and applies the filters (eligibility, before any channel ranks) once; channels,
fusion, rescoring stages and evidence assembly then read the :class:`QueryContext` instead of
passing locals along. Values derived from it and shared by several stages — the context
windows, the lexical index's answer, a dense route's query vector — are computed at most once
per query, on first use (:attr:`QueryContext.windows`, :meth:`QueryContext.per_query`).
"""

from __future__ import annotations

import datetime as dt
import json
import numbers
import operator
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from fabric_query.errors import InvalidArgumentError, NoReleaseError, QueryCancelled, ReleaseUnreadableError
from fabric_query.querylang import Filters, ParsedQuery, parse_query
from fabric_query.release import ProjectionUnavailable, ReleaseView, citing_order, guarded_read, pinned_view
from fabric_query.scope import Scope, apply_scope
from fabric_query.types import StageTiming
from fabric_resources.config import FabricConfig
from fabric_resources.fragment_damage import unseen_check
from fabric_resources.home import FabricHome
from fabric_resources.language_routing import needs_multilingual
from fabric_resources.models.embedder import Encoder
from fabric_resources.models.reranker import Reranker

T = TypeVar("T")

#: Largest ``limit`` a search accepts (the CLI's ``--limit`` bound too).
MAX_LIMIT = 1000
#: Release IDs are SQLite integers (64-bit signed).
_MAX_RELEASE_ID = 2**63 - 1


@dataclass(frozen=True)
class Encoders:
    """The query-time models of one search.

    ``dense``: the dense role's query encoder (local MiniLM or HTTP); ``multilingual``: the e5
    query encoder (``None``: the process-wide one, loaded on first use); ``reranker``: the
    reranker role (``None``: the stage is off).
    """

    dense: Encoder
    multilingual: Encoder | None = None
    reranker: Reranker | None = None


#: Worker threads shared by all queries of the process for work started early
#: (:meth:`QueryContext.in_background`). A query whose task has not started when it needs the result
#: cancels it and computes it on its own thread, so busy workers never hold a query up.
BACKGROUND_WORKERS = 4
_BACKGROUND = ThreadPoolExecutor(max_workers=BACKGROUND_WORKERS, thread_name_prefix="fabric-query")


class Stopwatch:
    """Stage timings of one query: each lap is the time since the previous lap on the same thread
    (ms, 3 decimals). Work started in the background (:meth:`QueryContext.in_background`) laps on
    its own thread from when it began, so such stages overlap the others and the stages can sum to
    more than ``total``."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self._marks: dict[int, float] = {threading.get_ident(): self.started}
        self.timings: list[StageTiming] = []

    def begin(self) -> None:
        """Start this thread's laps now (a background task's first lap counts from here)."""
        self._marks[threading.get_ident()] = time.perf_counter()

    def lap(self, stage: str) -> None:
        now, thread = time.perf_counter(), threading.get_ident()
        self.timings.append(StageTiming(stage=stage, ms=round((now - self._marks.get(thread, self.started)) * 1000, 3)))
        self._marks[thread] = now

    def with_total(self) -> tuple[StageTiming, ...]:
        """The laps so far, then ``total``: the time since the stopwatch started."""
        return (*self.timings, StageTiming(stage="total", ms=round((time.perf_counter() - self.started) * 1000, 3)))


def stop_if_cancelled(cancel: threading.Event | None) -> None:
    """A stage boundary of a query: raises :class:`~fabric_query.errors.QueryCancelled` once
    ``cancel`` is set (the caller stopped waiting), so a query nobody will read stops here instead
    of running to its end. ``None``: the query cannot be cancelled.

    >>> stop_if_cancelled(None); stop_if_cancelled(threading.Event())
    >>> done = threading.Event(); done.set(); stop_if_cancelled(done)
    Traceback (most recent call last):
    ...
    fabric_query.errors.QueryCancelled: the query was cancelled: its caller stopped waiting

    Anything else than None or an event (an object with ``is_set()``: ``threading.Event``,
    ``multiprocessing.Event``) is an :class:`~fabric_query.errors.InvalidArgumentError` (``True``
    was an ``AttributeError`` from deep inside the search).
    """
    if cancel is not None and not callable(getattr(cancel, "is_set", None)):
        raise InvalidArgumentError(f"cancel must be a threading.Event (or None), got {type(cancel).__name__}")
    if cancel is not None and cancel.is_set():
        raise QueryCancelled("the query was cancelled: its caller stopped waiting")


@dataclass(frozen=True)
class WindowMembership:
    """Chunk → (its context window's ID, that window's chunk IDs in reading order).

    ``skipped``: why the release's context windows cannot serve (``{}`` in ``of`` then: no
    section-guided route, and passages are the hits' own chunks).
    """

    of: Mapping[str, tuple[str, tuple[str, ...]]]
    skipped: str | None = None


@dataclass(frozen=True)
class QueryContext:
    """One query over one pinned release, as every stage of :func:`fabric_query.pipeline.search` sees it.

    Attributes
    ----------
    home, config
        The Fabric home and its configuration, read once for the whole query.
    parsed
        The parsed query (:mod:`fabric_query.querylang`).
    view
        The pinned release under today's visibility (:func:`fabric_query.release.pinned_view`).
    eligible
        Parse IDs the filters admit (``None``: every parse of the view).
    sources_by_parse
        Per eligible parse, its eligible source keys (sorted). Shared with the view: do not mutate.
    depth
        Candidates each channel hands to fusion: ``max(query.channel_depth, limit)``.
    limit
        Results wanted.
    encoders
        The query-time models (:class:`Encoders`).
    selected
        Names of the channels this search may run (:func:`fabric_query.channels.registry.select`).
    excluded_chunks
        Chunks of eligible parses that a chunk-level filter (``confidence:``) leaves out; every
        channel's ranking is cut to the others (:meth:`admitted`). ``depth`` counts them in, so a
        channel that ranks chunk by chunk still hands fusion its ``query.channel_depth`` admitted ones.
    clock
        The query's stage timings.
    cancel
        Set by the caller to stop the query at its next stage boundary (:meth:`checkpoint`).
    """

    home: FabricHome
    config: FabricConfig
    parsed: ParsedQuery
    view: ReleaseView
    eligible: frozenset[str] | None
    sources_by_parse: Mapping[str, list[str]]
    depth: int
    limit: int
    encoders: Encoders
    selected: frozenset[str]
    excluded_chunks: frozenset[str] = frozenset()
    clock: Stopwatch = field(default_factory=Stopwatch, compare=False, repr=False)
    cancel: threading.Event | None = field(default=None, compare=False, repr=False)
    _memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    _background: dict[Any, Future] = field(default_factory=dict, compare=False, repr=False)

    def per_query(self, key: Any, compute: Callable[[], T]) -> T:
        """``compute()`` the first time ``key`` is asked for in this query, the same value after (or
        the result of the background task started for ``key``, waited for; its exception is raised
        here, as if ``compute`` had raised it)."""
        if key not in self._memo:
            self._memo[key] = compute()
        value = self._memo[key]
        if isinstance(value, Future):
            if value.cancel():  # still queued behind other queries' work: do it here instead
                self._memo[key] = compute()
                return self._memo[key]
            return value.result()
        return value

    def checkpoint(self) -> None:
        """A stage boundary: raises :class:`~fabric_query.errors.QueryCancelled` once
        :attr:`cancel` is set (:func:`stop_if_cancelled`)."""
        stop_if_cancelled(self.cancel)

    def in_background(self, key: Any, compute: Callable[[], Any], stage: str | None = None) -> None:
        """Start ``compute()`` on a worker thread now; :meth:`per_query` of ``key`` waits for it.
        With ``stage``, the task laps it on its own thread when ``compute`` returns.

        For work that needs nothing another stage computes for this query (a dense channel: its
        encode and its index search release the GIL while the word index is searched). Nothing
        happens when ``key`` is already computed or started.
        """
        if key in self._memo:
            return

        def task() -> Any:
            self.clock.begin()
            value = compute()
            if stage is not None:
                self.clock.lap(stage)
            return value

        self._memo[key] = self._background[key] = _BACKGROUND.submit(task)

    def ran_beside(self, key: Any) -> bool:
        """Whether ``key`` was computed by its background task (not taken back by :meth:`per_query`)."""
        value = self._background.get(key)
        return value is not None and not value.cancelled()

    def cancel_background(self) -> None:
        """Cancel the background work of this query that has not started (a query that failed)."""
        for future in self._background.values():
            future.cancel()

    @cached_property
    def multilingual_text(self) -> bool:
        """The query's positive text is routed to the multilingual model (``language_routing``)."""
        return needs_multilingual(self.parsed.positive_text)

    @cached_property
    def windows(self) -> WindowMembership:
        """The release's context-window membership, or why it cannot be read."""
        try:
            return WindowMembership(self.view.context_window_of)
        except ProjectionUnavailable as exc:
            return WindowMembership({}, exc.describe())

    def admitted(self, ranking: list[tuple[str, float]]) -> list[tuple[str, float]]:
        """``ranking`` without :attr:`excluded_chunks` (order kept), cut to the depth the channel
        would have had without them."""
        if not self.excluded_chunks:
            return ranking
        kept = [p for p in ranking if p[0] not in self.excluded_chunks]
        return kept[: self.depth - len(self.excluded_chunks)]

    @property
    def eligible_sources(self) -> int:
        """Sources the filters admit (``EvidencePack.eligible_sources``)."""
        if self.eligible is None:
            return len(self.view.sources)
        return sum(len(v) for v in self.sources_by_parse.values())


def eligible_parses(view: ReleaseView, parsed: ParsedQuery) -> tuple[set[str] | None, dict[str, list[str]]]:
    """Eligible parse IDs (``None`` = all) and, per parse, its eligible source keys.

    Filters are applied here, before any channel ranks or truncates.
    """
    f = parsed.filters
    if not f.active:
        return None, view.sources_by_parse  # no filter: every source of the release (cached per view)
    by_parse: dict[str, list[str]] = {}
    for key, meta in sorted(view.sources.items(), key=citing_order):
        if _admits(f, key, meta):
            by_parse.setdefault(meta["parse_id"], []).append(key)
    return set(by_parse), by_parse


def _admits(filters: Filters, key: str, meta: Mapping[str, Any]) -> bool:
    """Whether ``filters`` admit the source ``key`` of a release view (``meta``: its row of
    ``ReleaseView.sources``)."""
    return filters.admits(key, meta["media_type"], meta.get("mtime_ns"), meta.get("language"))


#: Values of a dimension an unmatched-filter note names at most (most common first).
_NOTE_VALUES = 8


def unmatched_filters(view: ReleaseView, filters: Filters) -> dict[str, str]:
    """Why active ``filters`` admit no source of ``view``: per filter dimension that admits none by
    itself (:meth:`~fabric_query.querylang.Filters.dimensions`), a sentence naming what the release
    has instead (``type`` and ``lang``: its values with their source counts, most common first, a
    source with no identified language as "none identified", which no ``lang:`` admits; ``after`` /
    ``before``: the newest / oldest modification day, UTC; ``path`` and ``prefix``: the first folder
    of its source keys, after ``fs:``, with counts); ``{"*": ...}`` when each admits some
    source and only their conjunction admits none, or when the release has no visible source at
    all; ``{}`` when something is admitted.

    Only sources visible in ``view`` are counted or named, so a note never reveals a withheld
    document. Costs one pass over the release's sources per dimension; asked only for an empty
    result (``EvidencePack.unmatched_filters``).
    """
    sources = view.sources
    if not filters.active or any(_admits(filters, k, m) for k, m in sources.items()):
        return {}
    if not sources:
        return {"*": "this release has no visible source"}
    notes: dict[str, str] = {}
    for key, part in filters.dimensions():
        if any(_admits(part, k, m) for k, m in sources.items()):
            continue
        notes[key] = _unmatched_note(key, part, sources)
    return notes or {"*": "each filter admits some source of this release; none admits a source that all "
                          "the others admit too"}


def _unmatched_note(key: str, part: Filters, sources: Mapping[str, Mapping[str, Any]]) -> str:
    def counted(values) -> str:
        common = Counter(values).most_common()
        shown = ", ".join(f"{v} ({n})" for v, n in common[:_NOTE_VALUES])
        return shown + (f", and {len(common) - _NOTE_VALUES} more" if len(common) > _NOTE_VALUES else "")

    if key == "type":
        return f"no source has this media type; the release has: {counted(m['media_type'] for m in sources.values())}"
    if key == "lang":
        return ("no source is in this language; the release has: "
                + counted(m.get("language") or "none identified" for m in sources.values()))
    times = [m["mtime_ns"] for m in sources.values() if m.get("mtime_ns") is not None]
    # Whole seconds: ns / 1e9 rounds 23:59:59.9999999 up into the next day, which the filter excludes.
    day = lambda ns: dt.datetime.fromtimestamp(ns // 1_000_000_000, dt.timezone.utc).date().isoformat()  # noqa: E731
    if key == "after":
        return "no source was modified on or after that day" + (f"; the newest on {day(max(times))}" if times else "")
    if key == "before":
        return "no source was modified before that day" + (f"; the oldest on {day(min(times))}" if times else "")
    if key == "source":
        # A key typed as the path `fabric search` prints after `fs:` (visible sources only).
        meant = [f"fs:{k}" for k in part.sources if f"fs:{k}" in sources]
        return "no visible source has that key" + (
            f" (did you mean {', '.join(meant)}? source keys start with fs:)" if meant else "")
    # The folders the keys start with (what `prefix:` matches after `fs:`): a second folder named like
    # a registered one is keyed `notes-<hash>/`, which a user typing `notes/` cannot guess (trial 14c).
    tops = counted(k.split(":", 1)[-1].split("/", 1)[0] + "/" for k in sources)
    return {"path": "no source key contains that text", "prefix": "no source key starts with that prefix"}[key] + (
        f"; the release's keys start with: {tops}")


def low_confidence_chunks(view: ReleaseView, eligible: set[str] | None, min_confidence: float | None
                          ) -> frozenset[str]:
    """Chunks (of the ``eligible`` parses, ``None``: all) holding text of an ``ocr_text`` unit whose
    ``confidence`` (mean word confidence, 0-1, :mod:`fabric_resources.parsing.pdf.ocr`) is below
    ``min_confidence``, or has none; ``frozenset()`` without the filter.

    Units read from a text layer or a file carry no confidence and never exclude a chunk: their
    text is what the source holds. Reads the ``units`` table (kind and attributes) of those
    parses only when the filter is given.

    Raises
    ------
    ReleaseUnreadableError
        The units table cannot be read: the filter cannot be honoured, and answering without it
        would show what it excludes.
    """
    if min_confidence is None:
        return frozenset()
    parses = view.sources_by_parse if eligible is None else {p: view.sources_by_parse[p] for p in eligible}
    version = view.release.manifest["tables"].get("units")
    low: set[str] = set()
    try:
        for batch in guarded_read("units", lambda: list(view.home.tables.read_active_batches(
                "units", version, parses, ["unit_id", "kind", "attributes"],
                unreadable_ok=unseen_check(view.home, "units", parses)))):
            for unit_id, kind, attributes in zip(*(batch.column(c).to_pylist() for c in ("unit_id", "kind",
                                                                                          "attributes"))):
                if kind == "ocr_text" and not _confidence_at_least(attributes, min_confidence):
                    low.add(unit_id)
    except ProjectionUnavailable as exc:
        raise ReleaseUnreadableError(f"confidence: cannot read the OCR confidences ({exc.describe()})") from exc
    if not low:
        return frozenset()
    chunks = view.chunks
    out = set()
    for cid, pid, frags in zip(chunks.column("chunk_id").to_pylist(), chunks.column("parse_id").to_pylist(),
                               view.chunk_fragments):
        if (eligible is None or pid in eligible) and any(f["unit_id"] in low for f in frags):
            out.add(cid)
    return frozenset(out)


def _confidence_at_least(attributes: str, threshold: float) -> bool:
    try:
        value = json.loads(attributes).get("confidence")
    except (ValueError, AttributeError):
        return False
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= threshold


def plain_integer(value, name: str) -> int:
    """``value`` as a plain ``int``: any integer type (``numpy.int64(5)`` from an array) but ``bool``,
    which is no count. Raises :class:`InvalidArgumentError` naming ``name`` for anything else."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(f"{name} must be an integer, got {type(value).__name__}")
    return operator.index(value)


def checked_limit(limit, default: int) -> int:
    """``limit``, or ``default`` when it is ``None``.

    Raises
    ------
    InvalidArgumentError
        Not an integer, or outside ``1..MAX_LIMIT``.
    """
    if limit is None:
        return default
    limit = plain_integer(limit, "limit")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgumentError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    return limit


def check_arguments(release_id, debug) -> int | None:
    """``release_id`` as a plain ``int`` (:func:`plain_integer`), or ``None``. Raises
    :class:`InvalidArgumentError` for a ``release_id`` that is not a positive 64-bit integer or a
    ``debug`` that is not a bool."""
    if release_id is not None:
        release_id = plain_integer(release_id, "release_id")
        if not 1 <= release_id <= _MAX_RELEASE_ID:
            raise InvalidArgumentError(f"release_id must be a positive release number, got {release_id}")
    if not isinstance(debug, bool):
        raise InvalidArgumentError(f"debug must be True or False, got {type(debug).__name__}")
    return release_id


def open_query(home: FabricHome, config: FabricConfig, query: str, encoders: Encoders, *, limit: int,
               release_id: int | None, selected: frozenset[str], clock: Stopwatch,
               scope: "Scope | dict | None" = None, cancel: threading.Event | None = None,
               pinned: list[int] | None = None) -> QueryContext:
    """Parse ``query``, pin the release (default: the current one) and apply the filters.

    Laps ``pin_and_parse`` and ``eligibility`` on ``clock``. ``limit`` and ``release_id`` are
    already checked (:func:`checked_limit`, :func:`check_arguments`); ``scope`` adds the structured
    filters (:func:`fabric_query.scope.apply_scope`); ``cancel``: :attr:`QueryContext.cancel`,
    checked here once the release is pinned; ``pinned``, when given, gets the pinned release's ID
    as soon as it is pinned (before its rows are read: :func:`fabric_query.pipeline.search` asks
    whether it was retired while the query read it).

    Raises
    ------
    QuerySyntaxError, EmptyQueryError, QueryTooLongError
        From the query language.
    InvalidArgumentError
        A bad ``scope``, or one that filters a dimension the query string filters too.
    NoReleaseError
        Nothing has been activated yet, or ``release_id`` does not exist.
    QueryCancelled
        ``cancel`` was set.
    """
    parsed = apply_scope(parse_query(query, config.query.max_query_chars), scope)
    view = pinned_view(home, release_id)
    if view is None:
        raise NoReleaseError("no activated release in this home; run `fabric ingest PATH` first"
                             if release_id is None else f"release {release_id} does not exist")
    if pinned is not None:
        pinned.append(view.release_id)
    clock.lap("pin_and_parse")
    stop_if_cancelled(cancel)
    eligible, sources_by_parse = eligible_parses(view, parsed)
    excluded = low_confidence_chunks(view, eligible, parsed.filters.min_confidence)
    clock.lap("eligibility")
    return QueryContext(
        home=home, config=config, parsed=parsed, view=view,
        eligible=None if eligible is None else frozenset(eligible), sources_by_parse=sources_by_parse,
        depth=max(config.query.channel_depth, limit) + len(excluded), limit=limit, encoders=encoders,
        selected=selected, excluded_chunks=excluded, clock=clock, cancel=cancel,
    )
