"""Frozen result types: citations, highlight segments, hits, EvidencePack, resolve results.

Offsets are Unicode scalar offsets (Python ``str`` indices), end-exclusive,
into a unit's canonical text; ``*_utf16`` are the same positions in UTF-16
code units (JavaScript string indices).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CitedSpan(_Frozen):
    """One fragment of a passage: a range of one unit's canonical text."""

    unit_id: str
    start_char: int
    end_char: int
    start_utf16: int
    end_utf16: int
    text_hash: str  # SHA-256 hex of unit_text[start_char:end_char]


class Citation(_Frozen):
    """Everything needed to re-verify a passage against its source bytes."""

    release_id: int
    source_key: str
    source_hash: str
    parse_id: str
    chunk_id: str
    spans: tuple[CitedSpan, ...]
    text_hash: str  # SHA-256 hex of the passage text
    also_cited_by: tuple[str, ...] = ()  # other active sources with identical bytes

    @property
    def unit_ids(self) -> tuple[str, ...]:
        return tuple(s.unit_id for s in self.spans)


class HighlightSegment(_Frozen):
    text: str
    highlighted: bool


class ChannelHit(_Frozen):
    rank: int  # 1-based rank within the channel
    score: float  # the channel's own score (BM25 or cosine); not comparable across channels


class Hit(_Frozen):
    rank: int
    chunk_id: str
    text: str
    fused_score: float  # RRF score
    channels: dict[str, ChannelHit]
    section_path: tuple[str, ...]
    citation: Citation
    highlights: tuple[HighlightSegment, ...]
    #: How channels reached this chunk beyond rank and score: the dense routes (direct /
    #: section-guided window), graph entities, predicates and annotation IDs with their spans.
    provenance: dict[str, Any] = {}
    #: Late-interaction and reranker scores, when those stages ran for this hit.
    stage_scores: dict[str, float] = {}
    #: Index into ``EvidencePack.passages`` of the passage that carries this hit.
    passage: int | None = None
    #: A lexical channel (word, substring or its fallback scan) matched this chunk: its text holds
    #: a query token. False: only dense (or graph) channels found it.
    lexical: bool = False
    #: Not lexical, and every dense channel that ranked it scored it below that channel's calibrated
    #: cosine floor (``query.dense_floors``): a neighbour, not evidence (docs/ranking.md).
    below_dense_floor: bool = False
    #: Why a lexical hit carries no highlighted segment (None when it carries one, or is not lexical).
    highlight_missing: str | None = None


class Passage(_Frozen):
    """A run of consecutive fine chunks of one context window around one or more hits.

    ``text`` is the member chunks' texts joined by a blank line; ``citation`` spans every member
    fragment, so ``resolve`` re-verifies the whole passage. ``truncated``: the window holds chunks
    the passage caps left out.
    """

    window_id: str | None
    chunk_ids: tuple[str, ...]
    hit_ranks: tuple[int, ...]
    text: str
    token_count: int
    truncated: bool
    section_path: tuple[str, ...]
    citation: Citation
    highlights: tuple[HighlightSegment, ...] = ()


class EvidenceUnit(_Frozen):
    """A canonical unit selected by the assembled passages (cited in part or whole)."""

    unit_id: str
    parse_id: str
    source_key: str


class StageTiming(_Frozen):
    stage: str
    ms: float


class EvidencePack(_Frozen):
    """The answer to one query, pinned to one release."""

    query: str
    release_id: int
    results: tuple[Hit, ...]
    channels_run: tuple[str, ...]
    fallback_reason: str | None = None
    eligible_sources: int
    timings: tuple[StageTiming, ...] = ()
    #: With ``debug=True``: each channel's ranked chunk IDs (best first), before fusion.
    channel_rankings: dict[str, tuple[str, ...]] = {}
    #: Passages built from the hits' context windows (see ``fabric_query.passages``).
    passages: tuple[Passage, ...] = ()
    #: The canonical units the passages select, in passage order.
    units: tuple[EvidenceUnit, ...] = ()
    #: How the passages were assembled: policy, caps, tokens used, one event per hit.
    assembly: dict[str, Any] = {}
    #: Channels that could not run for this release, with the reason (e.g. a model mismatch).
    skipped_channels: dict[str, str] = {}
    #: No lexical channel matched anything: every result is a dense (or graph) neighbour, none holds
    #: a query token.
    no_lexical_match: bool = False
    #: With ``debug=True``: per stage, its candidates in order as ``(chunk_id, score)``: each
    #: channel as ``channel:<name>`` (the list fusion saw), then ``fused``, ``maxsim``, ``reranked``.
    stage_candidates: dict[str, tuple[tuple[str, float], ...]] = {}


class ResolveCheck(_Frozen):
    check: str
    ok: bool
    detail: str = ""


class ResolveResult(_Frozen):
    """``verified`` only if every check passed; ``stale`` says what changed. Never substitutes text."""

    status: Literal["verified", "stale"]
    checks: tuple[ResolveCheck, ...]
    text: str | None = None  # the cited canonical text, only when verified
