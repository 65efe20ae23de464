"""EvidencePack assembly: ranked chunks → passages, their citations and the selected units, then
the hits (citation, highlights, what each channel and stage said about the chunk).

Reads the pinned release (chunks, context-window membership) and hands the pure
policy in :mod:`fabric_query.passages` its inputs. A release without context
windows (written before they existed) gives one-chunk passages. Highlights come from
:mod:`fabric_query.evidence`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from fabric_query.channels.dense import hit_cosines
from fabric_query.evidence import LEXICAL_CHANNELS, highlight, missing_highlight_reason
from fabric_query.locations import CitedLocation, location_of
from fabric_query.passages import AssembledPassage, HitWindow, MemberChunk, assemble
from fabric_query.release import ProjectionUnavailable, ReleaseView, guarded_read
from fabric_query.types import ChannelHit, Citation, CitedSpan, EvidenceUnit, HighlightSegment, Hit, Passage

if TYPE_CHECKING:
    from fabric_query.context import QueryContext
from fabric_resources.identity import text_hash
from fabric_resources.schema import FRAGMENT_SEPARATOR


def spans_of(chunk_texts: list[str], chunk_fragments: list[list[dict]]) -> tuple[CitedSpan, ...]:
    """Cited spans of consecutive chunks; each fragment's text is read off its chunk's text by length
    (a chunk's text is its fragments' slices joined by FRAGMENT_SEPARATOR), so no unit lookup."""
    spans = []
    for text, frags in zip(chunk_texts, chunk_fragments):
        cursor = 0
        for f in frags:
            s, e = f["start_char"], f["end_char"]
            piece = text[cursor:cursor + (e - s)]
            cursor += (e - s) + len(FRAGMENT_SEPARATOR)
            spans.append(CitedSpan(unit_id=f["unit_id"], start_char=s, end_char=e, start_utf16=f["start_utf16"],
                                   end_utf16=f["end_utf16"], text_hash=text_hash(piece)))
    return tuple(spans)


#: Parses whose unit locations are kept per process (a few KB each; the units of one parse at one
#: table version never change, so the cache needs no invalidation).
MAX_CACHED_LOCATION_PARSES = 256


class ParseLocations(Mapping):
    """Unit ID → :class:`CitedLocation` of one parse's units, each decoded on first access (a
    citation names a few of a parse's hundreds of units; decoding them all cost ~15 ms a query at
    100k chunks). ``rows``: unit ID → (kind, locator, section_path, attributes) as stored."""

    def __init__(self, rows: dict[str, tuple]) -> None:
        self._rows = rows
        self._decoded: dict[str, CitedLocation] = {}

    def __getitem__(self, unit_id: str) -> CitedLocation:
        found = self._decoded.get(unit_id)
        if found is None:
            kind, loc, sp, attrs = self._rows[unit_id]
            found = self._decoded[unit_id] = location_of(unit_id, kind, loc, tuple(sp or ()), attrs)
        return found

    def __contains__(self, unit_id: object) -> bool:
        return unit_id in self._rows

    def __iter__(self):
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


_locations: OrderedDict[tuple[str, int, str], ParseLocations] = OrderedDict()
_locations_lock = threading.Lock()


def unit_locations(view: ReleaseView, parse_id: str) -> Mapping[str, CitedLocation]:
    """Unit ID → location (:func:`fabric_query.locations.location_of`) for one parse of the view,
    from its units at the release's version of the table; ``{}`` when the release records no units
    table or it cannot be read (a citation then carries no locations; its text is still verified)."""
    return prefetch_locations(view, [parse_id]).get(parse_id, {})


def prefetch_locations(view: ReleaseView, parse_ids: list[str]) -> dict[str, Mapping[str, CitedLocation]]:
    """:func:`unit_locations` of several parses, the uncached ones read in one pass over the table
    (each unit's location decoded when a citation first asks for it: :class:`ParseLocations`)."""
    version = view.release.manifest["tables"].get("units")
    if version is None:
        return {}
    root = str(view.home.root)
    found: dict[str, Mapping[str, CitedLocation]] = {}
    with _locations_lock:
        for pid in dict.fromkeys(parse_ids):
            key = (root, int(version), pid)
            if key in _locations:
                _locations.move_to_end(key)
                found[pid] = _locations[key]
    missing = [pid for pid in dict.fromkeys(parse_ids) if pid not in found]
    if not missing:
        return found
    columns = ["parse_id", "unit_id", "kind", "locator", "section_path", "attributes"]
    try:
        # The rows by offset (the view's parse → offsets, read once): a filtered scan of the whole
        # table cost ~50 ms a query at a million chunks.
        offsets = view.unit_offsets
        parts = [offsets[p] for p in missing if p in offsets]
        wanted = np.sort(np.concatenate(parts)).tolist() if parts else []
        t = guarded_read("units", lambda: view.home.tables.take("units", version, wanted, columns)) if wanted else None
    except ProjectionUnavailable:
        return found
    rows: dict[str, dict[str, tuple]] = {pid: {} for pid in missing}
    if t is not None:
        for pid, u, k, loc, sp, a in zip(*(t.column(c).to_pylist() for c in columns)):
            if pid in rows:  # the offsets are the view's: any other parse's row is no citation's
                rows[pid][u] = (k, loc, sp, a)
    read = {pid: ParseLocations(r) for pid, r in rows.items()}
    with _locations_lock:
        for pid, located in read.items():
            _locations[(root, int(version), pid)] = located
        while len(_locations) > MAX_CACHED_LOCATION_PARSES:
            _locations.popitem(last=False)
    return {**found, **read}


#: Copies of a hit's text cited under it at most (:attr:`~fabric_query.types.Hit.same_text`); more are
#: counted (``same_text_omitted``): a paragraph every file of a folder repeats (a licence, a footer)
#: would otherwise make one result hold hundreds of citations.
SAME_TEXT_SHOWN = 20


#: Counted tokens (the chunker's) a chunk needs before its copies collapse under it. A title or
#: heading that several documents share is a label, not a copy of a passage: what follows it differs,
#: and each chunk ranks by its own document's evidence (the texts Cranfield, CACM and JSQuAD share are
#: such titles, 2 to 23 tokens: JSQuAD's 310 article-title chunks, repeated paper titles; collapsing them
#: under the best one moved JSQuAD test from 0.9489 to 0.9456 nDCG@10, docs/ranking.md). A sentence or
#: more repeated word for word is a copy (MED's one shared text, 85 tokens, collapses).
SAME_TEXT_MIN_TOKENS = 24


def same_text_key(text: str) -> str:
    """What two chunks share when a reader sees the same text: the SHA-256 of ``text`` with every run
    of whitespace one space and none at either end (a copy re-wrapped, or saved with other line ends,
    is the same text; a changed letter, case or punctuation mark is not).

    >>> same_text_key("The keeper\\r\\nlit the lamp. ") == same_text_key("The keeper lit  the lamp.")
    True
    >>> same_text_key("The keeper lit the lamp.") == same_text_key("The keeper lit the lamps.")
    False
    """
    return text_hash(" ".join(text.split()))


def locations_of(spans: tuple[CitedSpan, ...], located: Mapping[str, CitedLocation]) -> tuple[CitedLocation, ...]:
    """One location per distinct cited unit, in span order; ``()`` if any unit is not located (a
    citation names every unit's location or none)."""
    units = list(dict.fromkeys(s.unit_id for s in spans))
    if not all(u in located for u in units):
        return ()
    return tuple(located[u] for u in units)


def citation_for(view: ReleaseView, parse_id: str, chunk_id: str, texts: list[str], fragments: list[list[dict]],
                 sources: list[str], located: Mapping[str, CitedLocation] | None = None) -> Citation:
    """The citation of ``texts`` (a chunk, or a passage's members) of ``parse_id``; ``located``: that
    parse's unit locations when the caller read them already (:func:`prefetch_locations`), else they
    are read here (:func:`unit_locations`)."""
    meta = view.sources[sources[0]]
    spans = spans_of(texts, fragments)
    if located is None:
        located = unit_locations(view, parse_id)
    return Citation(
        release_id=view.release_id, source_key=sources[0], source_hash=meta["source_hash"], parse_id=parse_id,
        chunk_id=chunk_id, spans=spans, text_hash=text_hash(FRAGMENT_SEPARATOR.join(texts)),
        also_cited_by=tuple(sources[1:]), locations=locations_of(spans, located),
    )


def _member(view: ReleaseView, chunk_id: str) -> MemberChunk:
    c = view.chunk(chunk_id)
    return MemberChunk(chunk_id, c["text"], tuple(c["fragments"]), int(c.get("token_count") or 0))


def assemble_passages(
    view: ReleaseView, ranked: list[str], sources_by_parse: dict[str, list[str]], max_tokens: int, max_units: int,
    membership: dict[str, tuple[str, tuple[str, ...]]] | None = None,
) -> tuple[list[Passage], list[EvidenceUnit], dict, dict[str, int]]:
    """Passages for ``ranked`` chunk IDs (best first).

    ``membership``: chunk → (window, members), default ``view.context_window_of``; ``{}`` gives
    one-chunk passages (the pipeline passes that when the windows table cannot be read).

    Returns (passages, selected units, assembly trace, chunk_id → passage index).
    """
    if membership is None:
        membership = view.context_window_of
    # One read of the text of every hit and passage member (the view keeps no chunk text).
    view.chunk_rows([m for cid in ranked for m in membership.get(cid, (None, (cid,)))[1]])
    hits = []
    for rank, cid in enumerate(ranked, start=1):
        wid, members = membership.get(cid, (None, (cid,)))
        hits.append(HitWindow(rank, cid, wid, tuple(_member(view, m) for m in members)))
    assembled, trace = assemble(hits, max_tokens, max_units)
    # One read of the units table for every parse the citations below name. Handed down rather than
    # left to the process cache: a request naming more parses than it holds would read them one by one.
    located = prefetch_locations(view, [view.chunk(m.chunk_id)["parse_id"] for p in assembled for m in p.members[:1]])
    passages, units, seen_units = [], [], set()
    for p in assembled:
        passages.append(_passage(view, p, sources_by_parse, located))
        parse_id = view.chunk(p.members[0].chunk_id)["parse_id"]
        source = passages[-1].citation.source_key
        for m in p.members:
            for f in m.fragments:
                if f["unit_id"] not in seen_units:
                    seen_units.add(f["unit_id"])
                    units.append(EvidenceUnit(unit_id=f["unit_id"], parse_id=parse_id, source_key=source))
    passage_of = {cid: i for i, p in enumerate(assembled) for cid in p.hit_chunk_ids}
    return passages, units, trace, passage_of


def _passage(view: ReleaseView, p: AssembledPassage, sources_by_parse: dict[str, list[str]],
             located: Mapping[str, Mapping[str, CitedLocation]]) -> Passage:
    first = view.chunk(p.members[0].chunk_id)
    parse_id = first["parse_id"]
    sources = sources_by_parse.get(parse_id) or view.sources_by_parse[parse_id]
    texts = [m.text for m in p.members]
    return Passage(
        window_id=p.window_id, chunk_ids=tuple(p.chunk_ids), hit_ranks=tuple(p.hit_ranks),
        text=FRAGMENT_SEPARATOR.join(texts), token_count=p.token_count, truncated=p.truncated,
        section_path=tuple(first["section_path"] or ()),
        citation=citation_for(view, parse_id, p.hit_chunk_ids[0], texts, [list(m.fragments) for m in p.members],
                              sources, located.get(parse_id, {})),
    )


@dataclass(frozen=True)
class ChannelEvidence:
    """What the channels that ran said about the chunks, after the hard constraints.

    ``rankings``: channel → its chunk IDs best first (``channels_run`` order); ``scores``:
    channel → chunk ID → (1-based rank in the channel's own list, the channel's score);
    ``provenance``: channel → chunk ID → how the channel found it.
    """

    rankings: dict[str, list[str]]
    scores: dict[str, dict[str, tuple[int, float]]]
    provenance: dict[str, Mapping[str, Any]]

    @cached_property
    def lexical(self) -> frozenset[str]:
        """The chunks some lexical channel ranked (within its ``channel_depth``): lexical evidence."""
        return frozenset(cid for name in LEXICAL_CHANNELS for cid in self.rankings.get(name, ()))


def below_floor(ctx: "QueryContext", channels: ChannelEvidence) -> frozenset[str]:
    """The chunks no lexical channel ranked whose cosine to the query's own vector (not a feedback
    vector) is under ``query.dense_floors`` in every dense channel that ranked them: neighbours, not
    evidence. One cosine per dense-ranked chunk, at most ``channel_depth`` per dense channel."""
    lexical_of = channels.lexical
    below: dict[str, list[bool]] = {}
    for name, floor in ctx.config.query.dense_floors.items():
        neighbours = [c for c in channels.rankings.get(name, ()) if c not in lexical_of]
        for cid, cosine in (hit_cosines(ctx, name, neighbours) if neighbours else {}).items():
            below.setdefault(cid, []).append(cosine < floor)
    return frozenset(cid for cid, flags in below.items() if all(flags))


def assemble_hits(
    ctx: "QueryContext", final: list[str], passages: list[Passage], passage_of: dict[str, int],
    fused_score: Mapping[str, float], channels: ChannelEvidence, stage_scores: Mapping[str, Mapping[str, float]],
    below: Collection[str], copies: Mapping[str, list[str]] | None = None,
) -> tuple[tuple[Hit, ...], tuple[Passage, ...]]:
    """The hits for ``final`` (chunk IDs, best first) and ``passages`` with their highlights;
    ``below`` (:func:`below_floor`) marks hits ``below_dense_floor``; ``copies``: a hit's chunk ID →
    the chunks of its text ranked below it (:func:`~fabric_query.pipeline.verified_top`), cited in
    its ``same_text`` (the first :data:`SAME_TEXT_SHOWN`).

    Each distinct text is highlighted once per query (a one-chunk passage has its hit's text).
    """
    copies = copies or {}
    cited_copies = {cid: found[:SAME_TEXT_SHOWN] for cid, found in copies.items()}
    view = ctx.view
    memo: dict[str, tuple[HighlightSegment, ...]] = {}

    def highlight_of(text: str) -> tuple[HighlightSegment, ...]:
        if text not in memo:
            memo[text] = highlight(text, ctx.parsed)
        return memo[text]

    lexical_of = channels.lexical
    located = prefetch_locations(view, [view.chunk(cid)["parse_id"]
                                        for cid in (*final, *(c for found in cited_copies.values() for c in found))])

    def citation_of(cid: str) -> Citation:
        chunk = view.chunk(cid)
        sources = ctx.sources_by_parse.get(chunk["parse_id"]) or view.sources_by_parse[chunk["parse_id"]]
        return citation_for(view, chunk["parse_id"], cid, [chunk["text"]], [chunk["fragments"]], sources,
                            located.get(chunk["parse_id"], {}))

    hits = []
    for rank, cid in enumerate(final, start=1):
        chunk = view.chunk(cid)
        segments = highlight_of(chunk["text"])
        lexical = cid in lexical_of
        sources = ctx.sources_by_parse.get(chunk["parse_id"]) or view.sources_by_parse[chunk["parse_id"]]
        newer = (view.sources.get(sources[0]) or {}).get("newer")
        hits.append(
            Hit(
                rank=rank, chunk_id=cid, text=chunk["text"], fused_score=fused_score[cid],
                channels={
                    name: ChannelHit(rank=channels.scores[name][cid][0], score=channels.scores[name][cid][1])
                    for name in channels.rankings
                    if cid in channels.scores.get(name, {}) and cid in channels.rankings[name]
                },
                section_path=tuple(chunk["section_path"] or ()),
                citation=citation_of(cid),
                highlights=segments,
                provenance={name: prov[cid] for name, prov in channels.provenance.items() if cid in prov},
                stage_scores={stage: scores[cid] for stage, scores in stage_scores.items() if cid in scores},
                passage=passage_of.get(cid),
                lexical=lexical,
                below_dense_floor=cid in below,
                highlight_missing=(missing_highlight_reason(chunk["text"], ctx.parsed)
                                   if lexical and not any(seg.highlighted for seg in segments) else None),
                source_changed=newer.get("status") if isinstance(newer, dict) else None,
                same_text=tuple(citation_of(c) for c in cited_copies.get(cid, ())),
                same_text_omitted=len(copies.get(cid, ())) - len(cited_copies.get(cid, ())),
            )
        )
    return tuple(hits), tuple(p.model_copy(update={"highlights": highlight_of(p.text)}) for p in passages)
