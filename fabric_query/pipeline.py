"""``search()``: one query over one pinned release, as stages over one context.

1. **context** — check the arguments, parse the query, pin the release under today's
   visibility, apply the filters (eligibility, before any ranking): one frozen
   :class:`~fabric_query.context.QueryContext` (:mod:`fabric_query.context`);
2. **channels** — each registered channel that is selected and applies ranks chunk IDs, in
   registry order (:mod:`fabric_query.channels.registry`: word BM25, CJK substring, the scan
   fallback, dense — MiniLM or e5 by the query's script, section-guided — and, when annotation
   is on, the grouped graph/annotation channel); a projection that cannot serve skips its channel;
3. **hard constraints** — with required phrases or excluded terms, the channels that do not carry
   them keep only chunks a carrier ranked; with ``query.dense_feedback_weight``, the MiniLM dense
   channel then searches again from a query vector moved towards the first pass's best documents
   (:mod:`fabric_query.channels.dense_feedback`);
4. **fusion** — weighted RRF, or the method a channel that ran asks for (the e5 route's
   ``query.multilingual_fusion``) (:mod:`fabric_query.fusion`); hits below the dense floor with no
   lexical match then rank after the rest (``query.floor_demotion``);
5. **rescoring** — ColBERT MaxSim over the fused pool, then the reranker over passages, each when
   configured (:mod:`fabric_query.stages`);
6. **evidence** — passages from context windows, citations, highlights, selected units, assembly
   trace: the EvidencePack (:mod:`fabric_query.assembly`).

Between stages (and between the channel stages and the rescoring stages), a query whose
``cancel`` event is set stops with :class:`~fabric_query.errors.QueryCancelled`
(:meth:`~fabric_query.context.QueryContext.checkpoint`): a stage under way is not interrupted.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from dataclasses import replace
from itertools import groupby

from fabric_query.budget import checked_budget, spend_budget
from fabric_query.assembly import (
    SAME_TEXT_MIN_TOKENS, ChannelEvidence, assemble_hits, assemble_passages, below_floor, same_text_key,
)
from fabric_query.channels.base import Channel, ChannelRun
from fabric_query.channels.dense import DENSE
from fabric_query.channels.dense_feedback import dense_feedback
from fabric_query.channels.lexical import ALTERED_MET, UNCHECKED_SEAMS
from fabric_query.channels.registry import CHANNELS, not_applied, select
from fabric_query.context import (  # noqa: F401 - MAX_LIMIT, eligible_parses: still imported from here (latency_bench)
    MAX_LIMIT,
    Encoders,
    QueryContext,
    Stopwatch,
    check_arguments,
    checked_limit,
    eligible_parses,
    open_query,
    stop_if_cancelled,
    unmatched_filters,
)
from fabric_query.errors import NoReleaseError, ReleaseUnreadableError
from fabric_query.evidence import LEXICAL_CHANNELS
from fabric_query.fusion import FusionMethod, fuse
from fabric_query.release import _forget_release
from fabric_query.scope import Scope
from fabric_query.stages.base import RescoringStage
from fabric_query.stages.maxsim import MAXSIM
from fabric_query.stages.rerank import RERANK
from fabric_query.types import EvidencePack
from fabric_resources.home import FabricHome
from fabric_resources.models.embedder import Encoder
from fabric_resources.models.reranker import Reranker

#: Rescoring stages, in the order they run.
RESCORING: tuple[RescoringStage, ...] = (MAXSIM, RERANK)


def search(
    home: FabricHome,
    query: str,
    embedder: Encoder,
    *,
    limit: int | None = None,
    release_id: int | None = None,
    debug: bool = False,
    multilingual: Encoder | None = None,
    reranker: Reranker | None = None,
    channels: Collection[str] | None = None,
    scope: Scope | dict | None = None,
    max_tokens: int | None = None,
    cancel: threading.Event | None = None,
) -> EvidencePack:
    """Answer ``query`` from one pinned release, under today's visibility.

    Parameters
    ----------
    embedder, multilingual, reranker
        The dense role's query encoder; the e5 query encoder (default: the process-wide one); the
        reranker (default: none, the stage is off).
    limit
        Results wanted, ``1 <= limit <= MAX_LIMIT`` (default ``query.default_limit``).
    release_id
        A past release to pin (default: the current one). Sources deleted or withheld since are
        not shown through it (:mod:`fabric_query.visibility`).
    channels
        Names of the channels to run (default: every registered one that applies;
        :data:`~fabric_query.channels.registry.CHANNEL_NAMES`). ``word`` and ``substring`` bring
        their fallback ``scan``. With required phrases or excluded terms, results come from the
        hard-constraint carriers among them only (a dense-only search of ``"a phrase"`` answers
        nothing it could not prove).
    scope
        The structured twin of the query string's filters (:class:`fabric_query.scope.Scope`, or
        its dict); a dimension is given in the scope or in the query string, not both.
    max_tokens
        A token budget: whole passages, best first, while they fit (:mod:`fabric_query.budget`),
        each grown around its hit to ``min(passages.max_tokens, max_tokens)`` at most;
        ``used_tokens`` and ``dropped_for_budget`` say what it cost. Default: no budget.
    cancel
        Set it (from another thread) to stop the query at its next stage boundary: the search
        raises :class:`~fabric_query.errors.QueryCancelled` there. What the stages computed so far
        is dropped; caches they filled on the way (the pinned release view, an opened index, a
        memoised query vector) stay, as after any query, and nothing is written (the read side
        writes nothing). A stage under way runs to its end first (a channel search, the reranker);
        a channel started beside the others (:func:`run_channels`) that has not begun is
        cancelled, one already running finishes on its worker thread and its ranking is dropped.
        Default: the query cannot be cancelled.

    A projection that cannot serve (unreadable table, vector rows that do not match the release's
    digest, a model mismatch) skips its channel with a named reason in ``skipped_channels``; an
    unusable word index falls back to a scan of the canonical chunks (``fallback_reason``); a wanted
    dense ANN index that cannot serve falls back to the exact product (``dense_fallback_reason``).

    Raises
    ------
    QuerySyntaxError, EmptyQueryError, QueryTooLongError
        From the query language (also: a query that is not a ``str`` or not valid Unicode).
    InvalidArgumentError
        ``limit``, ``release_id``, ``debug``, ``channels``, ``scope`` or ``max_tokens`` out of
        range or of the wrong type, a ``cancel`` that is not an event (no ``is_set()``), an unknown
        channel name, or a scope field that the query string also filters on.
    NoReleaseError
        Nothing has been activated yet, or ``release_id`` does not exist (or was retired, by
        retention or a purge, while the query ran).
    ReleaseUnreadableError
        The release's chunk rows cannot be read.
    QueryCancelled
        ``cancel`` was set before the query ended.

    A query of the current release that retention or a purge retired while it ran (its table
    versions and index generation may go part-way through; a cleanup retires a release before it
    removes a file of it) is answered again, whole, from the release current then, up to
    :data:`RETIRED_RETRIES` times: never an answer that a removed file cut short or a damage
    reported for files a cleanup removed.
    """
    for attempt in range(RETIRED_RETRIES + 1):
        pinned: list[int] = []
        try:
            pack = _answer(home, query, embedder, limit=limit, release_id=release_id, debug=debug,
                           multilingual=multilingual, reranker=reranker, channels=channels, scope=scope,
                           max_tokens=max_tokens, cancel=cancel, pinned=pinned)
        except ReleaseUnreadableError:
            if not _retired_meanwhile(home, pinned, release_id) or attempt == RETIRED_RETRIES:
                raise
            continue
        if (pack.skipped_channels or pack.fallback_reason or pack.dense_fallback_reason) and attempt < RETIRED_RETRIES \
                and _retired_meanwhile(home, pinned, release_id):
            continue  # a projection read failed: its files may be what the retirement removed
        return pack
    raise AssertionError("unreachable")  # pragma: no cover


#: Times a query of the current release is asked again when the release it pinned was retired while
#: it ran (each retry pins the release current then: a second retirement needs a second activation).
RETIRED_RETRIES = 2


def _retired_meanwhile(home: FabricHome, pinned: list[int], release_id: int | None) -> bool:
    """Whether the release the query pinned (``pinned``: its ID, once pinned) has left the catalog
    since: True means ask again. A release pinned by its ID (``release_id``) is not swapped for
    another: that raises :class:`NoReleaseError`, as for a release retired before the query."""
    if not pinned or home.catalog.has_release(pinned[0]):
        return False
    _forget_release((str(home.root), pinned[0]))  # its cached view may hold failures (or purged text)
    if release_id is not None:
        raise NoReleaseError(f"release {release_id} was retired (by retention or a purge) while the query ran; "
                             "ask again without a release ID for the current one")
    return True


def _answer(home: FabricHome, query: str, embedder: Encoder, *, limit: int | None, release_id: int | None,
            debug: bool, multilingual: Encoder | None, reranker: Reranker | None,
            channels: Collection[str] | None, scope: Scope | dict | None, max_tokens: int | None,
            cancel: threading.Event | None, pinned: list[int]) -> EvidencePack:
    """:func:`search` once; the ID of the release it pinned goes into ``pinned``."""
    stop_if_cancelled(cancel)  # already set (the caller gave up before the work began): nothing starts
    clock = Stopwatch()
    config = home.config
    limit = checked_limit(limit, config.query.default_limit)
    release_id = check_arguments(release_id, debug)
    max_tokens = checked_budget(max_tokens)
    selected = select(channels)
    ctx = open_query(home, config, query, Encoders(embedder, multilingual, reranker), limit=limit,
                     release_id=release_id, selected=selected, clock=clock, scope=scope, cancel=cancel,
                     pinned=pinned)

    runs, channel_skips = run_channels(ctx, CHANNELS)
    if channels is not None and not runs and not channel_skips:
        # Only named channels, and none applies to this query: its empty answer says why (it read
        # as "nothing matches": `["substring"]` for an English query, `["dense"]` for a Japanese one).
        channel_skips = {c.name: not_applied(c, ctx) for c in CHANNELS if c.name in set(channels)}
    evidence = apply_hard_constraints(ctx, runs)
    ctx.checkpoint()
    feedback = dense_feedback(ctx, evidence.rankings)
    if feedback is not None and feedback.run is not None:
        runs = {**runs, DENSE.name: (DENSE, feedback.run)}  # same key: the channel order is kept
        evidence = apply_hard_constraints(ctx, runs)
    scored = {name: [(c, evidence.scores[name][c][1]) for c in ids] for name, ids in evidence.rankings.items()}
    below = below_floor(ctx, evidence)
    fused = fuse(fusion_method(runs, ctx), evidence.rankings, scored, config.query, below)
    clock.lap("fusion")
    ctx.checkpoint()

    candidates = {f"channel:{name}": pairs for name, pairs in scored.items()}
    candidates["fused"] = fused[: ctx.depth]
    ranked, stage_scores, stage_skips = rescore(ctx, [cid for cid, _ in fused], candidates)

    ctx.checkpoint()
    final, membership, altered, copies = verified_top(ctx.view, ranked, limit, ctx.windows.of,
                                                      config.query.collapse_same_text)
    altered |= ctx.per_query(ALTERED_MET, set)
    # Under a budget a passage grows to the budget at most: grown to the configured cap first, the best
    # hit's passage could outgrow a budget its own chunk fits, and be dropped for a lower hit's.
    passage_tokens = config.passages.max_tokens if max_tokens is None else min(config.passages.max_tokens, max_tokens)
    passages, units, trace, passage_of = assemble_passages(
        ctx.view, final, ctx.sources_by_parse, passage_tokens, config.passages.max_units, membership)
    clock.lap("passages")
    ctx.checkpoint()
    hits, passages = assemble_hits(ctx, final, passages, passage_of, dict(fused), evidence, stage_scores, below,
                                   copies)
    clock.lap("evidence")
    stage_notes = {"context_windows": ctx.windows.skipped} if ctx.windows.skipped else {}
    if feedback is not None and feedback.skipped is not None:
        stage_notes["dense_feedback"] = feedback.skipped
    return spend_budget(EvidencePack(
        query=query, release_id=ctx.view.release_id, results=hits, channels_run=tuple(evidence.rankings),
        fallback_reason=next((r.fallback_reason for _, r in runs.values() if r.fallback_reason), None),
        dense_fallback_reason=next((r.dense_fallback_reason for _, r in runs.values() if r.dense_fallback_reason),
                                   None),
        dense_search=next((r.dense_search for _, r in runs.values() if r.dense_search), None),
        eligible_sources=ctx.eligible_sources, timings=clock.with_total(),
        channel_rankings={k: tuple(v) for k, v in evidence.rankings.items()} if debug else {},
        passages=passages, units=tuple(units), assembly=trace,
        skipped_channels={**stage_notes, **channel_skips, **stage_skips},
        stage_candidates={k: tuple(v) for k, v in candidates.items()} if debug else {},
        below_floor_candidates=tuple(sorted(below)) if debug else (),
        no_lexical_match=not any(evidence.rankings.get(name) for name in LEXICAL_CHANNELS),
        unmatched_filters=unmatched_filters(ctx.view, ctx.parsed.filters) if ctx.eligible_sources == 0 else {},
        dense_feedback=feedback.chunk_ids if feedback is not None else (),
        altered_chunks=tuple(sorted(altered)),
        dense_sources_left_out=tuple(sorted({key for _, r in runs.values() for p in r.dense_left_out
                                             for key in ctx.view.sources_by_parse.get(p, ())})),
        dense_index_sources_left_out=tuple(sorted({key for _, r in runs.values() for p in r.dense_index_left_out
                                                   for key in ctx.view.sources_by_parse.get(p, ())})),
        unchecked_phrase_seams=tuple(sorted(ctx.per_query(UNCHECKED_SEAMS, set))),
    ), max_tokens)


def verified_top(view, ranked: list[str], limit: int, membership, collapse: bool = False
                 ) -> tuple[list[str], dict, set[str], dict[str, list[str]]]:
    """The first ``limit`` of ``ranked`` whose stored text is what was cut (:meth:`ReleaseView.altered`),
    the window membership of those (a window with an altered member gives a one-chunk passage),
    every altered chunk met, and with ``collapse`` each kept chunk's copies: chunks ranked below it
    whose text is its own (:func:`~fabric_query.assembly.same_text_key`), which take no place in the
    ``limit`` (a chunk under :data:`~fabric_query.assembly.SAME_TEXT_MIN_TOKENS` never collapses). Only
    the rows the passages read anyway are read, unless some are altered or copies."""
    final: list[str] = []
    altered: set[str] = set()
    copies: dict[str, list[str]] = {}
    kept_by_text: dict[str, str] = {}
    start = 0
    while len(final) < limit and start < len(ranked):
        batch = ranked[start:start + limit]
        start += limit
        bad = view.altered(batch)
        altered |= bad
        for cid in batch:
            if cid in bad:
                continue
            row = view.chunk(cid)
            if collapse and int(row.get("token_count") or 0) >= SAME_TEXT_MIN_TOKENS:
                key = same_text_key(row["text"])
                first = kept_by_text.setdefault(key, cid)
                if first != cid:
                    copies.setdefault(first, []).append(cid)
                    continue
            final.append(cid)
            if len(final) == limit:
                break
    windows = {cid: membership[cid] for cid in final if cid in membership}
    bad = view.altered([m for _, members in windows.values() for m in members])
    altered |= bad
    return final, {cid: w for cid, w in windows.items() if not bad.intersection(w[1])}, altered, copies


def run_channels(ctx: QueryContext, channels: tuple[Channel, ...]
                 ) -> tuple[dict[str, tuple[Channel, ChannelRun]], dict[str, str]]:
    """Run the selected channels that apply, in order; one lap per stage in which any applied.
    Channels that run beside the others (``Channel.runs_beside``) start first, on a worker thread, and are waited
    for in their turn: they lap their stage on their thread, and ``<stage>_wait`` here is the time
    the query waited for them (a task still queued when its turn comes runs here, in turn).

    Returns the channels that ranked (name → (channel, run), in order) and those that were
    skipped (name → reason).
    """
    runs: dict[str, tuple[Channel, ChannelRun]] = {}
    skipped: dict[str, str] = {}
    for channel in channels:
        if channel.name in ctx.selected and channel.runs_beside(ctx):
            ctx.in_background(("channel-run", channel.name), lambda c=channel: c.run(ctx), stage=channel.stage)
    try:
        for stage, group in groupby(channels, key=lambda c: c.stage):
            applied = []
            for channel in group:
                if channel.name not in ctx.selected or not channel.applies(ctx):
                    continue
                applied.append(channel.name)
                result = ctx.per_query(("channel-run", channel.name), lambda: channel.run(ctx))
                if ctx.excluded_chunks and result.skipped is None:  # a chunk-level filter (confidence:)
                    result = replace(result, ranking=ctx.admitted(result.ranking))
                if result.skipped is not None:
                    skipped[channel.name] = result.skipped
                else:
                    runs[channel.name] = (channel, result)
            if applied:
                # A stage that ran on a worker thread lapped there; here the query waited for it.
                beside = all(ctx.ran_beside(("channel-run", name)) for name in applied)
                ctx.clock.lap(f"{stage}_wait" if beside else stage)
                ctx.checkpoint()  # raised inside the try: channels not yet begun are cancelled
    except BaseException:
        ctx.cancel_background()  # the query has failed: work not yet started is not wanted
        raise
    return runs, skipped


def apply_hard_constraints(ctx: QueryContext, runs: dict[str, tuple[Channel, ChannelRun]]) -> ChannelEvidence:
    """Channel rankings as fusion sees them: with required phrases or excluded terms, a channel that
    is not a hard-constraint carrier keeps only chunks some carrier ranked (a dense channel may not
    bring back what the lexical ones excluded)."""
    rankings = {name: [cid for cid, _ in run.ranking] for name, (_, run) in runs.items()}
    if ctx.parsed.excluded or ctx.parsed.phrases:
        allowed = set().union(*(rankings[name] for name, (ch, _) in runs.items() if ch.hard_constraint_carrier))
        for name, (channel, _) in runs.items():
            if not channel.hard_constraint_carrier:
                rankings[name] = [c for c in rankings[name] if c in allowed]
    return ChannelEvidence(
        rankings=rankings,
        scores={name: {cid: (r, s) for r, (cid, s) in enumerate(run.ranking, start=1)} for name, (_, run) in runs.items()},
        provenance={name: run.provenance for name, (_, run) in runs.items()},
    )


def fusion_method(runs: dict[str, tuple[Channel, ChannelRun]], ctx: QueryContext) -> FusionMethod:
    """The method the first channel that ran asks for (:meth:`Channel.fusion`), else RRF."""
    for channel, _ in runs.values():
        method = channel.fusion(ctx.config.query)
        if method is not None:
            return method
    return FusionMethod.RRF


def rescore(ctx: QueryContext, ranked: list[str], candidates: dict[str, list[tuple[str, float]]]
            ) -> tuple[list[str], dict[str, dict[str, float]], dict[str, str]]:
    """Run the rescoring stages that apply over ``ranked``, adding each one's candidates.

    Returns the final order, the stages' scores (stage → chunk ID → score) and the skipped stages.
    """
    scores: dict[str, dict[str, float]] = {}
    skipped: dict[str, str] = {}
    for stage in RESCORING:
        if not ranked or not stage.applies(ctx):
            continue
        ctx.checkpoint()
        result = stage.run(ctx, ranked)
        if result.skipped is not None:
            skipped[stage.name] = result.skipped
        else:
            ranked = result.ranked
            scores[stage.name] = result.scores
            candidates[stage.candidates_key] = result.candidates
        ctx.clock.lap(stage.name)
    return ranked, scores, skipped
