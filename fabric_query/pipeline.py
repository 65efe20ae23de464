"""``search()``: pin the release → parse → eligibility → channels → RRF → evidence."""

from __future__ import annotations

import time

from fabric_query.channels.dense import dense_channel
from fabric_query.channels.lexical import Feedback, needs_substring_channel, substring_channel, word_channel
from fabric_query.channels.scan import scan_channel
from fabric_query.errors import NoReleaseError
from fabric_query.evidence import highlight
from fabric_query.fusion import rrf
from fabric_query.querylang import ParsedQuery, parse_query
from fabric_query.release import ReleaseView, release_view
from fabric_query.types import ChannelHit, Citation, CitedSpan, EvidencePack, Hit, StageTiming
from fabric_resources.home import FabricHome
from fabric_resources.identity import text_hash
from fabric_resources.lexical_index import IndexUnusable
from fabric_resources.schema import FRAGMENT_SEPARATOR
from fabric_resources.language_routing import needs_multilingual
from fabric_resources.models.embedder import Embedder
from fabric_resources.models.multilingual import shared_multilingual_embedder


def eligible_parses(view: ReleaseView, parsed: ParsedQuery) -> tuple[set[str] | None, dict[str, list[str]]]:
    """Eligible parse IDs (``None`` = all) and, per parse, its eligible source keys.

    Filters are applied here, before any channel ranks or truncates.
    """
    f = parsed.filters
    by_parse: dict[str, list[str]] = {}
    for key, meta in sorted(view.sources.items()):
        if f.admits(key, meta["media_type"], meta.get("mtime_ns"), meta.get("language")):
            by_parse.setdefault(meta["parse_id"], []).append(key)
    return (set(by_parse) if f.active else None), by_parse


def _citation(view: ReleaseView, chunk: dict, sources: list[str]) -> Citation:
    # The chunk text is its fragments' slices joined by FRAGMENT_SEPARATOR, so each slice is read
    # off the chunk text by length: no unit lookup on the query path.
    spans, cursor, text = [], 0, chunk["text"]
    for frag in chunk["fragments"]:
        s, e = frag["start_char"], frag["end_char"]
        piece = text[cursor:cursor + (e - s)]
        cursor += (e - s) + len(FRAGMENT_SEPARATOR)
        spans.append(
            CitedSpan(
                unit_id=frag["unit_id"], start_char=s, end_char=e,
                start_utf16=frag["start_utf16"], end_utf16=frag["end_utf16"], text_hash=text_hash(piece),
            )
        )
    meta = view.sources[sources[0]]
    return Citation(
        release_id=view.release_id, source_key=sources[0], source_hash=meta["source_hash"],
        parse_id=chunk["parse_id"], chunk_id=chunk["chunk_id"], spans=tuple(spans),
        text_hash=text_hash(chunk["text"]), also_cited_by=tuple(sources[1:]),
    )


def search(
    home: FabricHome,
    query: str,
    embedder: Embedder,
    *,
    limit: int | None = None,
    release_id: int | None = None,
    debug: bool = False,
    multilingual: Embedder | None = None,
) -> EvidencePack:
    """Answer ``query`` from one pinned release.

    Raises
    ------
    QuerySyntaxError, EmptyQueryError, QueryTooLongError
        From the query language.
    NoReleaseError
        Nothing has been activated yet.
    """
    timings: list[StageTiming] = []
    t0 = time.perf_counter()

    def lap(stage: str, since: float) -> float:
        now = time.perf_counter()
        timings.append(StageTiming(stage=stage, ms=round((now - since) * 1000, 3)))
        return now

    cfg = home.config.query
    limit = limit or cfg.default_limit
    parsed = parse_query(query, cfg.max_query_chars)
    release = home.catalog.release(release_id) if release_id else home.catalog.current_release()
    if release is None:
        raise NoReleaseError("no activated release in this home; run `fabric ingest PATH` first")
    view = release_view(home, release)
    t = lap("pin_and_parse", t0)
    eligible, sources_by_parse = eligible_parses(view, parsed)
    t = lap("eligibility", t)

    rankings: dict[str, list[str]] = {}
    channel_scores: dict[str, dict[str, tuple[int, float]]] = {}
    fallback_reason = None
    depth = max(cfg.channel_depth, limit)
    lexical = view.lexical
    lexical_results: dict[str, list[tuple[str, float]]] = {}
    if isinstance(lexical, IndexUnusable):
        fallback_reason = lexical.reason
        lexical_results["scan"] = scan_channel(view, parsed, eligible, depth)
    else:
        feedback = (Feedback(cfg.feedback_docs, cfg.feedback_terms, cfg.feedback_weight)
                    if cfg.feedback_terms else None)
        lexical_results["word"] = word_channel(lexical, parsed, eligible, depth, feedback,
                                               lambda cid: view.chunk(cid)["text"])
        if needs_substring_channel(parsed):
            lexical_results["substring"] = substring_channel(lexical, parsed, eligible, depth)
    t = lap("lexical", t)
    if not needs_multilingual(parsed.positive_text):
        qvec = embedder.encode_queries([parsed.positive_text])[0]
        t = lap("encode_query", t)
        lexical_results["dense"] = dense_channel(view, qvec, eligible, depth)
        t = lap("dense", t)
    elif home.config.dense.multilingual:
        qvec = (multilingual or shared_multilingual_embedder()).encode_queries([parsed.positive_text])[0]
        t = lap("encode_query_multilingual", t)
        lexical_results["dense_multilingual"] = dense_channel(view, qvec, eligible, depth, "chunk_vectors_multilingual")
        t = lap("dense_multilingual", t)
    for name, pairs in lexical_results.items():
        rankings[name] = [cid for cid, _ in pairs]
        channel_scores[name] = {cid: (r, s) for r, (cid, s) in enumerate(pairs, start=1)}
    # Excluded terms and phrases are hard constraints: dense may not bring back what lexical excluded.
    if parsed.excluded or parsed.phrases:
        allowed = set(rankings.get("word", [])) | set(rankings.get("substring", [])) | set(rankings.get("scan", []))
        for name in ("dense", "dense_multilingual"):
            if name in rankings:
                rankings[name] = [c for c in rankings[name] if c in allowed]
    fused = rrf(rankings, cfg.rrf_k, cfg.channel_weights)[:limit]
    t = lap("fusion", t)

    hits = []
    for rank, (cid, score) in enumerate(fused, start=1):
        chunk = view.chunk(cid)
        sources = sources_by_parse.get(chunk["parse_id"]) or view.sources_by_parse[chunk["parse_id"]]
        hits.append(
            Hit(
                rank=rank, chunk_id=cid, text=chunk["text"], fused_score=score,
                channels={
                    name: ChannelHit(rank=channel_scores[name][cid][0], score=channel_scores[name][cid][1])
                    for name in rankings if cid in channel_scores[name] and cid in rankings[name]
                },
                section_path=tuple(chunk["section_path"] or ()),
                citation=_citation(view, chunk, sources),
                highlights=highlight(chunk["text"], parsed),
            )
        )
    lap("evidence", t)
    timings.append(StageTiming(stage="total", ms=round((time.perf_counter() - t0) * 1000, 3)))
    return EvidencePack(
        query=query, release_id=view.release_id, results=tuple(hits), channels_run=tuple(rankings),
        fallback_reason=fallback_reason,
        eligible_sources=sum(len(v) for v in sources_by_parse.values()), timings=tuple(timings),
        channel_rankings={k: tuple(v) for k, v in rankings.items()} if debug else {},
    )
