"""The defined fallback when the serving index is unusable: a scan of canonical chunks.

It uses the index's own analyzers in Python, so it matches what the index
would: a chunk that contains a query word token (folded, stemmed) scores one
point per distinct query word token its context window contains (the word
field's documents are windows; :mod:`fabric_resources.lexical_index`), and one
per query term in a script without spaces that occurs in it exactly (chunks that
tie are ordered by how many distinct query word tokens each holds itself: a
fraction of a point); required
phrases must occur (folded); a chunk with an excluded term is dropped. Slower
than the index, never silently empty.

As a channel (``scan``) it runs in place of ``word`` and ``substring`` when the index cannot serve
(their ``fallback``), or on its own when a search names it without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fabric_query.channels.base import ChannelResult, ChannelRun, RunsInTurn, ranked
from fabric_query.channels.lexical import (ALTERED_MET, SUBSTRING, WORD, lexical_serving, substring_query_tokens,
                                          substring_tokens, word_tokens)
from fabric_query.querylang import ParsedQuery
from fabric_query.release import ProjectionUnavailable, ReleaseView
from fabric_resources.text_folding import UNSPACED

if TYPE_CHECKING:
    from fabric_query.context import QueryContext


def _compact(text: str) -> str:
    return "".join(substring_tokens(text))


def _compact_query(text: str) -> str:
    return "".join(substring_query_tokens(text))


def scan_channel(view: ReleaseView, parsed: ParsedQuery, eligible: set[str] | None, depth: int,
                 altered: set[str] | None = None) -> ChannelResult:
    """Every eligible chunk whose text matches ``parsed`` (module docstring), best first, at most
    ``depth``. A chunk whose stored text no longer hashes to its record neither matches nor scores;
    those are added to ``altered`` (when given) for the pack to name."""
    wanted = set(word_tokens(" ".join(parsed.terms)))
    cjk_terms = {_compact_query(t) for t in parsed.terms if UNSPACED.search(t)} - {""}
    required = [_compact_query(p) for p in parsed.phrases]
    banned_words = set(word_tokens(" ".join(t for t in parsed.excluded if not UNSPACED.search(t))))
    banned_cjk = {_compact_query(t) for t in parsed.excluded if UNSPACED.search(t)} - {""}
    ids = view.chunks.column("chunk_id").to_pylist()
    texts = view.chunk_texts
    pids = view.chunk_parse_ids
    untrusted = view.chunks_altered
    found = {cid: set(word_tokens(text)) & wanted for cid, text in zip(ids, texts)
             if cid not in untrusted} if wanted else {}
    try:
        window_of = view.context_window_of
    except ProjectionUnavailable:
        window_of = {}  # each chunk its own window, as the index builds it without windows
    pairs = []
    for i, (cid, text) in enumerate(zip(ids, texts)):
        if eligible is not None and pids[i] not in eligible:
            continue
        if cid in untrusted:  # a phrase or exclusion check on the altered text dropped it unseen
            if altered is not None:
                altered.add(cid)
            continue
        tokens = set(word_tokens(text))
        compact = _compact(text)
        if tokens & banned_words or any(b in compact for b in banned_cjk):
            continue
        if not all(r in compact for r in required):
            continue
        words = set().union(*(found.get(m, ()) for m in window_of.get(cid, (cid, (cid,)))[1])) if tokens & wanted else ()
        score = len(words) + sum(1 for t in cjk_terms if t in compact) + len(required)
        if score:
            # Ties between the chunks of one window go to the chunk holding more of the words itself
            # (a fraction under one point: it only orders what the window score leaves equal).
            pairs.append((cid, score + len(tokens & wanted) / (len(wanted) + 1)))
    return ranked(pairs, depth)


class ScanChannel(RunsInTurn):
    """The ``scan`` channel: :func:`scan_channel` as the index channels' fallback."""

    name = "scan"
    stage = "lexical"
    hard_constraint_carrier = True  # phrases must occur, chunks with an excluded term are dropped
    fallback = None
    #: The channels it answers for.
    replaces = (WORD.name, SUBSTRING.name)

    def _instead_of_index(self, ctx: "QueryContext") -> bool:
        return any(name in ctx.selected for name in self.replaces)

    def applies(self, ctx: "QueryContext") -> bool:
        return lexical_serving(ctx).unusable is not None if self._instead_of_index(ctx) else True

    def run(self, ctx: "QueryContext") -> ChannelRun:
        reason = lexical_serving(ctx).unusable.reason if self._instead_of_index(ctx) else None
        return ChannelRun(scan_channel(ctx.view, ctx.parsed, ctx.eligible, ctx.depth, ctx.per_query(ALTERED_MET, set)),
                          fallback_reason=reason)

    def fusion(self, config) -> None:
        return None


SCAN = ScanChannel()
