"""Frozen result types: citations, highlight segments, hits, EvidencePack, resolve results.

Offsets are Unicode scalar offsets (Python ``str`` indices), end-exclusive,
into a unit's canonical text; ``*_utf16`` are the same positions in UTF-16
code units (JavaScript string indices).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Strict, field_validator
from pydantic_core import to_jsonable_python

# CitedLocation lives beside the functions that derive it; imported here with the other result types.
from fabric_query.locations import CitedLocation, location_label



class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


#: An integer a citation carries: ``true`` or ``"1"`` is refused, not read as 1 (a citation is
#: re-verified, so a coerced field is no oracle, but it would be a second spelling of one citation).
WireInt = Annotated[int, Strict()]
#: A string a citation carries: ``b"fs:a.txt"`` is refused, not decoded into the key (pydantic's lax
#: mode read bytes as UTF-8 text: a second spelling of one citation, which verified).
WireStr = Annotated[str, Strict()]


class CitedSpan(_Frozen):
    """One fragment of a passage: a range of one unit's canonical text."""

    unit_id: WireStr
    start_char: WireInt
    end_char: WireInt
    start_utf16: WireInt
    end_utf16: WireInt
    text_hash: WireStr  # SHA-256 hex of unit_text[start_char:end_char]


class Citation(_Frozen):
    """Everything needed to re-verify a passage against its source bytes.

    ``locations``: one per distinct cited unit, in span order (pages, slide, heading path, table
    cell, element path); ``resolve`` re-derives them from the current bytes and checks them.
    Citations made before locations existed carry none and are verified by their text alone.
    """

    release_id: WireInt
    source_key: WireStr
    source_hash: WireStr
    parse_id: WireStr
    chunk_id: WireStr
    spans: tuple[CitedSpan, ...]
    text_hash: WireStr  # SHA-256 hex of the passage text
    also_cited_by: tuple[WireStr, ...] = ()  # other active sources with identical bytes
    locations: tuple[CitedLocation, ...] = ()

    @property
    def unit_ids(self) -> tuple[str, ...]:
        return tuple(s.unit_id for s in self.spans)

    @property
    def label(self) -> str:
        """``p. 7``, ``pp. 7–8``, ``slide 2 > notes``… (:func:`fabric_query.locations.location_label`)."""
        return location_label(self.locations)


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
    #: Chunks ranked below this hit (and above the last result) whose text is this hit's, whitespace
    #: aside (another version of the file, a
    #: copy elsewhere, a paragraph the file repeats), best first, at most :data:`fabric_query.assembly.SAME_TEXT_SHOWN`; each
    #: with its own citation. They take no place in the results (``query.collapse_same_text``); a chunk
    #: shorter than :data:`fabric_query.assembly.SAME_TEXT_MIN_TOKENS` (a shared title) never collapses.
    same_text: tuple[Citation, ...] = ()
    #: Copies found beyond those (counted, not cited).
    same_text_omitted: int = 0
    #: The cited file's bytes changed after the version this hit quotes, and the release still
    #: serves that version: what became of the new bytes' parse (``failed``, ``held`` by a failed
    #: check, ``pending`` or ``parsed`` and not ready yet, ``unparsed``: no parse is due, its type
    #: or size). None when the hit quotes the file's latest version the scan saw.
    source_changed: str | None = None

    @field_validator("provenance")
    @classmethod
    def _json_native(cls, value: dict[str, Any]) -> dict[str, Any]:
        """Held as its JSON form reads back (lists, not tuples), so a hit equals itself after a
        JSON round trip (``model_validate_json(hit.model_dump_json()) == hit``; was unequal: the
        dense routes were tuples)."""
        return to_jsonable_python(value)


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
    #: Why the dense channel answered with the exact product where ``query.dense_search`` wants the
    #: release's ANN index (``"<reason>: <detail>"``, reasons ``dense-index-missing``,
    #: ``dense-index-schema-mismatch``, ``dense-index-unreadable``, ``dense-index-release-mismatch``);
    #: None when nothing was substituted.
    dense_fallback_reason: str | None = None
    #: How the dense channel found its candidates: ``"exact"`` (the product) or ``"ann"`` (the
    #: release's index, candidates re-scored exactly); None when no dense channel ran.
    dense_search: str | None = None
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
    #: Channels that could not run for this release, with the reason (e.g. a model mismatch); also
    #: ``context_windows`` and ``dense_feedback`` when those stages could not serve.
    skipped_channels: dict[str, str] = {}
    #: No lexical channel matched anything: every result is a dense (or graph) neighbour, none holds
    #: a query token.
    no_lexical_match: bool = False
    #: When the filters admit no source (``eligible_sources`` 0): per filter dimension that admits
    #: none by itself (``source``, ``path``, ``prefix``, ``type``, ``lang``, ``after``, ``before``),
    #: what the release has instead; ``{"*": ...}`` when only their conjunction admits none
    #: (:func:`fabric_query.context.unmatched_filters`). Empty otherwise.
    unmatched_filters: dict[str, str] = {}
    #: The chunks whose context windows moved the MiniLM dense channel's query vector
    #: (``query.dense_feedback_weight``; :mod:`fabric_query.channels.dense_feedback`), best first;
    #: empty when no feedback ran. The ``dense`` ranking and its scores are then the second pass's.
    dense_feedback: tuple[str, ...] = ()
    #: Chunks left out of the results and passages because their stored text does not hash to the
    #: text hash recorded when they were cut (the chunks table was altered behind Fabric's back:
    #: restore the home from a snapshot, or re-ingest); empty when nothing was.
    altered_chunks: tuple[str, ...] = ()
    #: Visible sources whose vectors a dense channel left out of its ranking: their
    #: rows do not give the digest the release recorded for their parse (altered or damaged after
    #: they were written; ``fabric repair`` re-embeds them). Their chunks are still found by the word
    #: and substring channels; every other source keeps its dense ranking. Only visible sources are
    #: ever read, so none is named that the caller may not see. Empty when nothing was left out.
    dense_sources_left_out: tuple[str, ...] = ()
    #: Those of :attr:`dense_sources_left_out` whose stored vectors were sound when the release's ANN
    #: index was built from them, and whose rows in that index no longer give their digest (the
    #: index's own bytes damaged, a row relabelled): ``fabric dense-index-repair`` rebuilds the index
    #: from the stored vectors (``fabric repair`` reads the tables, which are sound). Empty otherwise.
    dense_index_sources_left_out: tuple[str, ...] = ()
    #: Quoted phrases (as their folded, stemmed word tokens) the word channel did not look for across
    #: every boundary between two context windows: their rarest word is in more windows than it reads
    #: (``fabric_query.channels.window_seams.SEAM_WINDOWS_CHECKED``), so an occurrence cut by such a
    #: boundary may be missing; empty when every phrase was looked for everywhere.
    unchecked_phrase_seams: tuple[str, ...] = ()
    #: With ``debug=True``: per stage, its candidates in order as ``(chunk_id, score)``: each
    #: channel as ``channel:<name>`` (the list fusion saw), then ``fused``, ``maxsim``, ``reranked``.
    stage_candidates: dict[str, tuple[tuple[str, float], ...]] = {}
    #: With ``debug=True``: the channels' candidates below the dense floor with no lexical match
    #: (what ``below_dense_floor`` marks, and ``query.floor_demotion`` ranks after the rest), in no order.
    below_floor_candidates: tuple[str, ...] = ()
    #: The token budget asked for (``max_tokens``), or None.
    max_tokens: int | None = None
    #: Tokens of the passages returned (whole passages only; never more than ``max_tokens``).
    used_tokens: int = 0
    #: Hits left out because their passage did not fit whole in what was left of the budget.
    dropped_for_budget: int = 0


class ResolveCheck(_Frozen):
    check: str
    ok: bool
    detail: str = ""


class ResolveResult(_Frozen):
    """``verified`` only if every check passed; ``stale`` says what changed. Never substitutes text."""

    status: Literal["verified", "stale"]
    checks: tuple[ResolveCheck, ...]
    text: str | None = None  # the cited canonical text, only when verified
    #: When the cited source is not visible (deleted, moved, renamed, unknown or withheld): the visible
    #: sources the current release serves the cited parse for (the same bytes under the same parser),
    #: at most ten; empty otherwise. The citation stays ``stale``: it names the old source.
    active_at: tuple[str, ...] = ()


class CanonicalUnit(_Frozen):
    """One canonical unit of an active, visible parse: its whole text and where it came from.

    ``locator`` and ``attributes`` are the parser's JSON objects (e.g. ``{"page": 3, "bbox": [...]}``
    for PDF); ``text_hash`` is the SHA-256 hex of ``text``.
    """

    unit_id: str
    parse_id: str
    source_keys: tuple[str, ...]
    release_id: int
    ordinal: int
    kind: str
    text: str
    text_hash: str
    locator: dict[str, Any]
    section_path: tuple[str, ...]
    attributes: dict[str, Any]


class ParseProblem(BaseModel):
    """A parse that failed, is held, unfinished or partly read, with the sources it belongs to."""

    model_config = ConfigDict(frozen=True)
    parse_id: str
    status: str
    reason: str | None
    detail: str | None
    sources: tuple[str, ...]


class OutdatedParses(BaseModel):
    """Active sources whose parse was made by another parser identity (name, version, ``parsers``
    settings) than the one this Fabric gives their bytes now: they are served as parsed then, their
    citations resolve ``stale`` (``parser-changed``), and the next ``fabric ingest`` parses them
    again (pending until then if a scan already saw them)."""

    model_config = ConfigDict(frozen=True)
    parser: str
    parsed_with: str  # the recorded parser version
    #: This Fabric's parser and version for the sources' media type; None when it parses it no more
    #: (the sources then keep their old parse until deleted).
    current_parser: str | None
    current_version: str | None
    #: Same parser and version, other ``parsers`` settings (the config hash differs).
    settings_changed: bool
    sources: tuple[str, ...]


class SourcePartition(BaseModel):
    """One parse of one version of a source: its Dagster ``parses`` partition and its standing."""

    model_config = ConfigDict(frozen=True)
    #: The parse ID, which is the partition key in Dagster (the partitions tab of any parse asset
    #: finds it by typing part of it).
    parse_id: str
    source_hash: str
    #: The parse's status in the catalog (pending, parsed, ready, held, failed).
    status: str
    #: Whether this is the parse of the source's current version.
    current: bool
    #: Whether the current release serves this parse for this source.
    active: bool


class SourcePartitions(BaseModel):
    """A source and every partition of its versions (``fabric status --source``), oldest first."""

    model_config = ConfigDict(frozen=True)
    source_key: str
    state: str
    #: The Dagster run tag naming it on every run over its partitions (UI: Runs → Filter → Tag).
    run_tag: str
    partitions: tuple[SourcePartition, ...]


class Status(BaseModel):
    """What a home holds: sources by state, the current release, problems with reasons."""

    model_config = ConfigDict(frozen=True)
    home: str
    roots: tuple[str, ...]
    sources_by_state: dict[str, int]
    release_id: int | None
    active_sources: int
    active_parses: int
    failed: tuple[ParseProblem, ...]
    held: tuple[ParseProblem, ...]
    pending: int
    #: Parsed but not yet gated: its run is still going, or was killed (the next ingest re-runs it),
    #: or it finished and the ingest stopped before activating (the next ingest activates it).
    unfinished: tuple[ParseProblem, ...] = ()
    #: Whether a ``fabric ingest`` is running now (a live process holds the home's ingest lock):
    #: it finishes the unfinished parses; ``False``: none is, so they were interrupted (or wait
    #: for an activation, or a Dagster daemon's run). ``None``: the lock could not be asked.
    ingest_running: bool | None = None
    #: Source keys (present, not withheld) whose parse passed its checks (``ready``) but that the
    #: current release does not serve in that version: an activation has not run since, or it
    #: failed (a full disk while writing the index); the next ingest or activation publishes them.
    #: A search meanwhile serves the version the release holds, or nothing for a new file.
    unpublished: tuple[str, ...] = ()
    unsupported: tuple[tuple[str, str], ...]  # (source key, media type)
    withheld: tuple[str, ...]  # source keys kept out of every release by policy
    #: (path, reason) of what the last scan found but could not take in (too-large, unreadable,
    #: not-a-regular-file, unreadable-folder, name-not-utf-8); see ``schema.SCAN_SKIPPED_STATE``.
    skipped: tuple[tuple[str, str], ...] = ()
    #: Parses that are searchable but left parts unread (image-only PDF pages without OCR, a PPTX
    #: shape or a DOCX part python-pptx/python-docx cannot read): reason ``failed-units``, detail
    #: lists them (``page 3: ocr-unavailable; slide 2: Table 4: KeyError: …``).
    partial: tuple[ParseProblem, ...] = ()
    #: Freshness: when the last source scan ran (unix time; None before any) and when the current
    #: release was published.
    last_scan_at: float | None = None
    release_created_at: float | None = None
    #: An in-place snapshot restore was interrupted before it had forgotten what came after the
    #: snapshot; the next ingest (or restore, or purge) finishes it.
    restore_pending: bool = False
    #: Purges (tombstone IDs) stopped part-way: some of what they remove may still be in the home
    #: (a snapshot taken before, rows, bytes, names); running the purge again (any purge) finishes them.
    purges_unfinished: tuple[int, ...] = ()
    #: The current release's pinned table versions the home cannot open (``"chunks version 999:
    #: not found"``): the tables or the catalog were altered, so searches fail until a restore or
    #: the next ingest (which publishes the versions the home holds); or whose data file is missing
    #: or cut short (``"chunk_vectors version 2: data file damaged"``, ``… data file missing``):
    #: its rows are lost until ``fabric repair`` re-derives them or a snapshot restore brings them
    #: back. Empty when all open. When
    #: the object store holding the tables cannot be used, one entry ``"every table: the object
    #: store cannot be used: <reason> (<the store's word>)"`` (bucket-missing, access-denied, unreachable).
    unreadable_tables: tuple[str, ...] = ()
    #: Why the current release's lexical index generation cannot serve (``"index-unreadable:
    #: gen-00000003: …"``; searches then fall back to scanning the chunks, ``fallback_reason``), or
    #: None. Opening it and counting its chunk documents, ~1 ms; `fabric lexical-health` checks more
    #: (every segment file's checksum, the statistics) and `fabric lexical-repair` rebuilds it.
    lexical_index_problem: str | None = None
    #: Each dense ANN index of the current release that cannot serve (``"chunk_vectors:
    #: dense-index-unreadable: chunk_vectors/gen-…: …"``): the dense channel then answers with the
    #: exact product (slower at scale, ``dense_fallback_reason``) until ``fabric dense-index-repair``.
    dense_index_problems: tuple[str, ...] = ()
    #: Each dense channel that is off for every query of the current release, and why, as a search
    #: finds it before encoding the query (``"dense: vector-digest-mismatch: chunk_vectors: …"``:
    #: rows altered, damaged, deleted or added after a release that recorded a table digest only
    #: (older than per-parse digests: :attr:`dense_sources_left_out` otherwise); also
    #: ``table-unreadable``, ``vector-values-invalid``; ``model-mismatch``: the vectors are another
    #: model's than the query encoder's, until ``fabric ingest`` re-embeds them). Found by loading
    #: the table's vectors (or its ANN index) into the view searches share, as the first search does.
    dense_channels_off: tuple[str, ...] = ()
    #: Each dense channel whose ANN index the dense search settings want but a search of the
    #: current release would not use, and why (``"dense: dense-index-release-mismatch:
    #: chunk_vectors/gen-…: its rows' digest is not release 3's …"``: bytes altered inside a file
    #: that still reads; also ``dense-index-missing``, ``-unreadable``, ``-schema-mismatch``): the
    #: channel answers with the exact product (slower at scale, ``dense_fallback_reason``) until
    #: ``fabric dense-index-repair``. Found in the same pass as ``dense_channels_off``.
    dense_index_fallback: tuple[str, ...] = ()
    #: Each visible source whose vectors a dense channel leaves out of its ranking (``"dense:
    #: fs:notes/a.md"``): their rows do not give the digest the current release recorded for their
    #: parse (altered or damaged since they were written) — the channel serves every other source,
    #: and those sources are still found by their words — until ``fabric repair`` re-embeds them.
    #: Found in the same pass as ``dense_channels_off``; a withheld source is never read, so never named.
    dense_sources_left_out: tuple[str, ...] = ()
    #: Those of :attr:`dense_sources_left_out` (same form) whose damage is the ANN index's own rows,
    #: not the stored vectors it was built from: ``fabric dense-index-repair`` rebuilds it.
    dense_index_sources_left_out: tuple[str, ...] = ()
    #: Tables whose latest version holds, for some active parses, another number of rows than the
    #: parse's last write recorded (``"chunk_vectors: 1 parse(s), 3 row(s) fewer and 0 more than
    #: written"``; :mod:`fabric_resources.row_audit`): rows deleted or added outside Fabric, every
    #: data file still readable. The next release (or the current one, if it pins that version)
    #: serves those parses with rows missing — for vector rows their sources are left out of dense
    #: ranking (:attr:`dense_sources_left_out`; an older release turns the channel off,
    #: ``vector-digest-mismatch``) — until ``fabric repair`` re-derives them.
    rows_changed: tuple[str, ...] = ()
    #: Active sources parsed by an older parser (or other settings) than this Fabric's, grouped by
    #: parser identity; see :class:`OutdatedParses`.
    outdated: tuple[OutdatedParses, ...] = ()
