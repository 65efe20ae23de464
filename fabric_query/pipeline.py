"""``search()``: the query pipeline over one pinned release.

pin the release → parse the query → eligibility (filters, before any ranking) → channels
(word BM25, CJK substring, dense with section-guided windows — MiniLM or e5 by the query's
script — and, when annotation is on, the grouped graph/annotation channel) → weighted RRF →
ColBERT MaxSim over the fused pool (when configured) → reranker over passages (when
configured) → passages and the EvidencePack (citations, selected units, assembly trace).
"""

from __future__ import annotations

import time

from fabric_query.assembly import assemble_passages, citation_for
from fabric_query.channels.dense import dense_channel, vector_models
from fabric_query.channels.graph import graph_channel
from fabric_query.channels.section import section_guided_dense
from fabric_query.channels.lexical import Bm25, Feedback, needs_substring_channel, substring_channel, word_channel
from fabric_query.channels.scan import scan_channel
from fabric_query.errors import InvalidArgumentError, NoReleaseError
from fabric_query.evidence import highlight
from fabric_query.fusion import convex, rrf
from fabric_query.maxsim import maxsim_rerank
from fabric_query.querylang import ParsedQuery, parse_query
from fabric_query.release import (
    VISIBLE_SOURCES_ONLY,
    ProjectionUnavailable,
    ReleaseView,
    is_storage_failure,
    pinned_view,
)
from fabric_query.rerank import rerank
from fabric_query.types import ChannelHit, EvidencePack, Hit, StageTiming
from fabric_resources.home import FabricHome
from fabric_resources.lexical_index import IndexUnusable
from fabric_resources.language_routing import needs_multilingual
from fabric_resources.models.colbert import shared_colbert_encoder
from fabric_resources.models.embedder import Encoder
from fabric_resources.models.reranker import Reranker
from fabric_resources.models.multilingual import shared_multilingual_embedder


def eligible_parses(view: ReleaseView, parsed: ParsedQuery) -> tuple[set[str] | None, dict[str, list[str]]]:
    """Eligible parse IDs (``None`` = all) and, per parse, its eligible source keys.

    Filters are applied here, before any channel ranks or truncates.
    """
    f = parsed.filters
    if not f.active:
        return None, view.sources_by_parse  # no filter: every source of the release (cached per view)
    by_parse: dict[str, list[str]] = {}
    for key, meta in sorted(view.sources.items()):
        if f.admits(key, meta["media_type"], meta.get("mtime_ns"), meta.get("language")):
            by_parse.setdefault(meta["parse_id"], []).append(key)
    return set(by_parse), by_parse


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
) -> EvidencePack:
    """Answer ``query`` from one pinned release, under today's visibility.

    Parameters
    ----------
    limit
        Results wanted, ``1 <= limit <= MAX_LIMIT`` (default ``query.default_limit``).
    release_id
        A past release to pin (default: the current one). Sources deleted or withheld since are
        not shown through it (:mod:`fabric_query.visibility`).

    A projection that cannot serve (unreadable table, vector rows that do not match the release's
    digest, a model mismatch) skips its channel with a named reason in ``skipped_channels``; an
    unusable word index falls back to a scan of the canonical chunks (``fallback_reason``).

    Raises
    ------
    QuerySyntaxError, EmptyQueryError, QueryTooLongError
        From the query language (also: a query that is not a ``str`` or not valid Unicode).
    InvalidArgumentError
        ``limit``, ``release_id`` or ``debug`` out of range or of the wrong type.
    NoReleaseError
        Nothing has been activated yet, or ``release_id`` does not exist.
    ReleaseUnreadableError
        The release's chunk rows cannot be read.
    """
    timings: list[StageTiming] = []
    t0 = time.perf_counter()

    def lap(stage: str, since: float) -> float:
        now = time.perf_counter()
        timings.append(StageTiming(stage=stage, ms=round((now - since) * 1000, 3)))
        return now

    cfg = home.config.query
    limit = _checked_limit(limit, cfg.default_limit)
    _check_arguments(release_id, debug)
    parsed = parse_query(query, cfg.max_query_chars)
    view = pinned_view(home, release_id)
    if view is None:
        raise NoReleaseError("no activated release in this home; run `fabric ingest PATH` first"
                             if release_id is None else f"release {release_id} does not exist")
    t = lap("pin_and_parse", t0)
    eligible, sources_by_parse = eligible_parses(view, parsed)
    t = lap("eligibility", t)

    rankings: dict[str, list[str]] = {}
    channel_scores: dict[str, dict[str, tuple[int, float]]] = {}
    depth = max(cfg.channel_depth, limit)
    lexical_results: dict[str, list[tuple[str, float]]] = {}
    fallback_reason = _lexical_stage(view, parsed, eligible, depth, lexical_results)
    t = lap("lexical", t)
    skipped: dict[str, str] = {}
    provenance: dict[str, dict[str, dict]] = {}
    try:
        membership = view.context_window_of
    except ProjectionUnavailable as exc:
        # Without windows the section route cannot run and passages are the hits' own chunks.
        membership = {}
        skipped["context_windows"] = exc.describe()
    route = _dense_route(home, parsed.positive_text, embedder, multilingual)
    qvec = None
    if route is not None:
        name, table, encoder = route
        try:
            stored = vector_models(view, table)
        except ProjectionUnavailable as exc:
            stored = None
            skipped[name] = exc.describe()
        if stored and stored != {encoder.identity}:
            skipped[name] = (f"model-mismatch: {table} holds vectors of {sorted(stored)}, the query encoder is "
                             f"{encoder.identity}; re-run the projection (fabric ingest re-embeds stale partitions)")
        elif stored is not None:
            qvec = encoder.encode_queries([parsed.positive_text])[0]
            t = lap("encode_query" if name == "dense" else "encode_query_multilingual", t)
            section = ((cfg.section_guided if name == "dense" else cfg.section_guided_multilingual)
                       and "context_windows" not in skipped)
            if section:
                lexical_results[name], provenance[name] = section_guided_dense(
                    view, qvec, eligible, depth, table, cfg.section_candidate_limit,
                    cfg.section_passages_per_window, cfg.rrf_k)
            else:
                lexical_results[name] = dense_channel(view, qvec, eligible, depth, table)
            t = lap(name, t)
            if name != "dense":
                qvec = None  # the annotation route compares with vectors of the dense model only
    if home.config.annotation.enabled:
        try:
            lexical_results["graph"], provenance["graph"] = graph_channel(
                view, parsed.positive_text, qvec, eligible, depth, home.config,
                query_model=route[2].identity if qvec is not None else None)
        except ProjectionUnavailable as exc:
            skipped["graph"] = exc.describe()
        t = lap("graph", t)
    for name, pairs in lexical_results.items():
        rankings[name] = [cid for cid, _ in pairs]
        channel_scores[name] = {cid: (r, s) for r, (cid, s) in enumerate(pairs, start=1)}
    # Excluded terms and phrases are hard constraints: dense may not bring back what lexical excluded.
    if parsed.excluded or parsed.phrases:
        allowed = set(rankings.get("word", [])) | set(rankings.get("substring", [])) | set(rankings.get("scan", []))
        for name in ("dense", "dense_multilingual", "graph"):
            if name in rankings:
                rankings[name] = [c for c in rankings[name] if c in allowed]
    channel_lists = {name: [(c, channel_scores[name][c][1]) for c in ids] for name, ids in rankings.items()}
    if "dense_multilingual" in rankings and cfg.multilingual_fusion == "convex":
        fused = convex(channel_lists, cfg.convex_weights)
    else:
        fused = rrf(rankings, cfg.rrf_k, cfg.channel_weights)
    t = lap("fusion", t)
    stages: dict[str, list[tuple[str, float]]] = {f"channel:{name}": pairs for name, pairs in channel_lists.items()}
    stages["fused"] = fused[: max(depth, limit)]
    ranked_ids = [cid for cid, _ in fused]
    fused_score = dict(fused)
    stage_scores: dict[str, dict[str, float]] = {}

    late = home.config.late_interaction
    if late.enabled and ranked_ids:
        colbert = shared_colbert_encoder(late.checkpoint, home.config.indexing.colbert_max_tokens,
                                         late.query_max_tokens)
        try:
            scored = maxsim_rerank(view, colbert.encode_query(parsed.positive_text), ranked_ids,
                                   max(late.candidate_pool, limit), model=colbert.identity)
        except ProjectionUnavailable as exc:
            skipped["maxsim"] = exc.describe()
        else:
            ranked_ids = [m.chunk_id for m in scored]
            stage_scores["maxsim"] = {m.chunk_id: m.score for m in scored if m.score is not None}
            stages["maxsim"] = [(m.chunk_id, m.score) for m in scored if m.score is not None]
        t = lap("maxsim", t)
    if reranker is not None and ranked_ids:
        pool_ids = ranked_ids[: max(home.config.reranker.candidate_pool, limit)]
        pool_passages, _, _, pool_passage_of = assemble_passages(
            view, pool_ids, sources_by_parse, home.config.passages.max_tokens, home.config.passages.max_units,
            membership)
        texts = [_rerank_input(pool_passages[pool_passage_of[cid]]) for cid in pool_ids]
        reranked = rerank(parsed.positive_text, list(zip(pool_ids, texts)), reranker, len(pool_ids))
        ranked_ids = [cid for cid, _ in reranked] + ranked_ids[len(pool_ids):]
        stage_scores["rerank"] = {cid: sc for cid, sc in reranked if sc is not None}
        stages["reranked"] = [(cid, sc) for cid, sc in reranked if sc is not None]
        t = lap("rerank", t)

    final = ranked_ids[:limit]
    passages, units, trace, passage_of = assemble_passages(
        view, final, sources_by_parse, home.config.passages.max_tokens, home.config.passages.max_units, membership)
    t = lap("passages", t)
    memo: dict[str, tuple] = {}

    def highlight_of(text: str) -> tuple:
        # A one-chunk passage has its hit's text: highlight each distinct text once per query.
        if text not in memo:
            memo[text] = highlight(text, parsed)
        return memo[text]

    hits = []
    for rank, cid in enumerate(final, start=1):
        chunk = view.chunk(cid)
        sources = sources_by_parse.get(chunk["parse_id"]) or view.sources_by_parse[chunk["parse_id"]]
        hits.append(
            Hit(
                rank=rank, chunk_id=cid, text=chunk["text"], fused_score=fused_score[cid],
                channels={
                    name: ChannelHit(rank=channel_scores[name][cid][0], score=channel_scores[name][cid][1])
                    for name in rankings if cid in channel_scores.get(name, {}) and cid in rankings[name]
                },
                section_path=tuple(chunk["section_path"] or ()),
                citation=citation_for(view, chunk["parse_id"], cid, [chunk["text"]], [chunk["fragments"]], sources),
                highlights=highlight_of(chunk["text"]),
                provenance={name: prov[cid] for name, prov in provenance.items() if cid in prov},
                stage_scores={stage: scores[cid] for stage, scores in stage_scores.items() if cid in scores},
                passage=passage_of.get(cid),
            )
        )
    passages = [p.model_copy(update={"highlights": highlight_of(p.text)}) for p in passages]
    lap("evidence", t)
    timings.append(StageTiming(stage="total", ms=round((time.perf_counter() - t0) * 1000, 3)))
    return EvidencePack(
        query=query, release_id=view.release_id, results=tuple(hits), channels_run=tuple(rankings),
        fallback_reason=fallback_reason,
        eligible_sources=len(view.sources) if eligible is None else sum(len(v) for v in sources_by_parse.values()),
        timings=tuple(timings),
        channel_rankings={k: tuple(v) for k, v in rankings.items()} if debug else {},
        passages=tuple(passages), units=tuple(units), assembly=trace, skipped_channels=skipped,
        stage_candidates={k: tuple(v) for k, v in stages.items()} if debug else {},
    )


#: Largest ``limit`` a search accepts (the CLI's ``--limit`` bound too).
MAX_LIMIT = 1000
#: Release IDs are SQLite integers (64-bit signed).
_MAX_RELEASE_ID = 2**63 - 1


def _checked_limit(limit, default: int) -> int:
    if limit is None:
        return default
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidArgumentError(f"limit must be an integer, got {type(limit).__name__}")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgumentError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    return limit


def _check_arguments(release_id, debug) -> None:
    if release_id is not None:
        if isinstance(release_id, bool) or not isinstance(release_id, int):
            raise InvalidArgumentError(f"release_id must be an integer, got {type(release_id).__name__}")
        if not 1 <= release_id <= _MAX_RELEASE_ID:
            raise InvalidArgumentError(f"release_id must be a positive release number, got {release_id}")
    if not isinstance(debug, bool):
        raise InvalidArgumentError(f"debug must be True or False, got {type(debug).__name__}")


class _UnknownChunk(Exception):
    """A lexical channel returned a chunk ID the pinned release does not hold."""


def _lexical_stage(view: ReleaseView, parsed: ParsedQuery, eligible: set[str] | None, depth: int,
                   results: dict[str, list[tuple[str, float]]]) -> str | None:
    """Run the word and substring channels into ``results`` (or the scan when no index can serve);
    return the pack's ``fallback_reason``.

    An index whose documents are not the release's chunks (``index-release-mismatch``) or that
    fails while searching (``index-unreadable``) is treated like a missing one: the scan answers.
    """
    cfg = view.home.config.query
    lexical = view.lexical
    if not isinstance(lexical, IndexUnusable):
        def text_of(cid: str) -> str:
            if cid not in view.chunk_index:
                raise _UnknownChunk(cid)
            return view.chunk(cid)["text"]

        feedback = (Feedback(cfg.feedback_docs, cfg.feedback_terms, cfg.feedback_weight)
                    if cfg.feedback_terms and (cfg.feedback_multilingual
                                               or not needs_multilingual(parsed.positive_text)) else None)
        unspaced = needs_substring_channel(parsed)
        bm25 = Bm25(cfg.bigram_bm25.k1, cfg.bigram_bm25.b) if unspaced and cfg.bigram_bm25 else None
        try:
            found = {"word": word_channel(lexical, parsed, eligible, depth, feedback, text_of, bm25)}
            if unspaced:
                found["substring"] = substring_channel(lexical, parsed, eligible, depth)
            unknown = [c for pairs in found.values() for c, _ in pairs if c not in view.chunk_index]
            if unknown:
                raise _UnknownChunk(unknown[0])
        except _UnknownChunk as exc:
            lexical = IndexUnusable("index-release-mismatch", f"the index returned chunk {exc.args[0]}, "
                                    f"which release {view.release_id} does not hold")
        except BaseException as exc:  # noqa: BLE001 - tantivy raises ValueError or panics on corrupt segments
            if not is_storage_failure(exc):
                raise
            lexical = IndexUnusable("index-unreadable", f"{type(exc).__name__}: {exc}")
        else:
            results.update(found)
            return VISIBLE_SOURCES_ONLY if view.restricted else None
    results["scan"] = scan_channel(view, parsed, eligible, depth)
    return lexical.reason


def _rerank_input(passage) -> str:
    """The reranker sees the passage's heading path, a blank line, then its canonical text."""
    heading = " / ".join(passage.section_path)
    return f"{heading}\n\n{passage.text}" if heading else passage.text


def _dense_route(home: FabricHome, text: str, embedder: Encoder, multilingual: Encoder | None):
    """(channel name, vector table, query encoder) for ``text``, or None when no dense channel applies."""
    if not needs_multilingual(text):
        return "dense", "chunk_vectors", embedder
    if home.config.dense.multilingual:
        return "dense_multilingual", "chunk_vectors_multilingual", multilingual or shared_multilingual_embedder()
    return None
