"""The defined fallback when the serving index is unusable: a scan of canonical chunks.

It uses the index's own analyzers in Python and the word channel's per-chunk rule
(:class:`~fabric_query.channels.chunk_rule.ChunkRule`: an evidence token, the function-word rule,
phrases held alone or across a seam with the chunk before or after in reading order, inside a
context window or between two, exclusions), and for a query with text in a script without spaces
the substring channel's (:func:`~fabric_query.channels.chunk_rule.substring_admits`), so it matches
the chunks the index's word and substring channels match together (trial 15b: it held phrases as
characters with spaces dropped, so ``"house keeper"`` matched ``lighthouse keeper``; it had no seam
nor function-word rule; an excluded phrase dropped every chunk holding any of its words; a
phrase of punctuation matched every chunk).

Its scores are its own, by design (no BM25 statistics without the index): a matching chunk scores
one point per distinct query word token its context window contains (the word field's documents
are windows; :mod:`fabric_resources.lexical_index`), one per query term in a script without spaces
that occurs in it exactly and one per quoted phrase; chunks that tie are ordered by how many
distinct query word tokens each holds itself (a fraction of a point). Slower than the index,
never silently empty.

As a channel (``scan``) it runs in place of ``word`` and ``substring`` when the index cannot serve
(their ``fallback``), or on its own when a search names it without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fabric_query.channels.base import ChannelResult, ChannelRun, RunsInTurn, ranked
from fabric_query.channels.chunk_rule import GAP, ChunkRule, substring_admits
from fabric_query.channels.lexical import (ALTERED_MET, SUBSTRING, WORD, _function_words, lexical_serving,
                                          needs_substring_channel, phrase_tokens, query_word_tokens,
                                          sequence_tokens, substring_query_tokens, substring_tokens)
from fabric_query.querylang import ParsedQuery
from fabric_query.release import ProjectionUnavailable, ReleaseView
from fabric_resources.text_folding import UNSPACED

if TYPE_CHECKING:
    from fabric_query.context import QueryContext


def _compact_query(text: str) -> str:
    return "".join(substring_query_tokens(text))


def _sequences(texts) -> list[list[str]]:
    return [seq for seq in (substring_query_tokens(t) for t in dict.fromkeys(texts)) if seq]


def scan_channel(view: ReleaseView, parsed: ParsedQuery, eligible: set[str] | None, depth: int,
                 altered: set[str] | None = None, *, stopwords: bool = False,
                 function_words: frozenset[str] | None = None) -> ChannelResult:
    """Every eligible chunk whose text matches ``parsed`` (module docstring), best first, at most
    ``depth``. ``stopwords`` and ``function_words`` as the word channel's
    (:func:`fabric_query.channels.lexical.word_matches`). A chunk whose stored text no longer
    hashes to its record neither matches nor scores (nor holds a phrase's part for the chunk beside
    it, as the word channel reads it); those are added to ``altered`` (when given) for the pack to name."""
    query_tokens = query_word_tokens(parsed.terms, stopwords)
    rule = ChunkRule.of(parsed, query_tokens, function_words, phrase_tokens, substring_query_tokens)
    wanted = set(query_tokens)
    cjk_terms = {_compact_query(t) for t in parsed.terms if UNSPACED.search(t)} - {""}
    substring = needs_substring_channel(parsed)
    sub_terms, sub_phrases, sub_excluded = (_sequences(parsed.terms), _sequences(parsed.phrases),
                                            _sequences(parsed.excluded))
    ids = view.chunks.column("chunk_id").to_pylist()
    untrusted = view.chunks_altered
    texts = ["" if cid in untrusted else text for cid, text in zip(ids, view.chunk_texts)]
    pids = view.chunk_parse_ids
    tokens = [sequence_tokens(text) for text in texts]  # as the index's positions hold them (GAP: a long word)
    sets = [set(t) - {GAP} for t in tokens]
    try:
        window_of = view.context_window_of
    except ProjectionUnavailable:
        window_of = {}  # each chunk its own window, as the index builds it without windows
    row_of = {cid: i for i, cid in enumerate(ids)}
    n = len(ids)

    substrings: dict[int, list[str]] = {}

    def substrings_at(i: int) -> list[str]:
        found = substrings.get(i)
        if found is None:
            found = substrings[i] = substring_tokens(texts[i])
        return found

    pairs = []
    for i, cid in enumerate(ids):
        if eligible is not None and pids[i] not in eligible:
            continue
        if cid in untrusted:  # a phrase or exclusion check on the altered text dropped it unseen
            if altered is not None:
                altered.add(cid)
            continue
        row = _Row(i, n, pids, tokens, substrings_at)
        matched = rule.admits(sets[i], row, lambda: "".join(row.substrings(0)))
        if not matched and substring:
            matched = (substring_admits(row.substrings(0), sub_terms, sub_phrases, sub_excluded)
                       and not rule.excludes(tokens[i], lambda: "".join(row.substrings(0))))
        if not matched:
            continue
        members = window_of.get(cid, (cid, (cid,)))[1]
        words = set().union(*(sets[row_of[m]] & wanted for m in members if m in row_of))
        compact = "".join(row.substrings(0)) if cjk_terms else ""
        score = len(words) + sum(1 for t in cjk_terms if t in compact) + len(parsed.phrases)
        # Ties between the chunks of one window go to the chunk holding more of the words itself
        # (a fraction under one point: it only orders what the window score leaves equal).
        pairs.append((cid, score + len(sets[i] & wanted) / (len(wanted) + 1)))
    return ranked(pairs, depth)


class _Row:
    """Chunk row ``i`` of the scan and the rows beside it in its parse's reading order (the view's
    chunks are sorted by parse, then ordinal): :class:`~fabric_query.channels.chunk_rule.Neighbourhood`."""

    def __init__(self, i: int, n: int, pids, tokens: list[list[str]], substrings_at) -> None:
        self._i, self._n, self._pids, self._tokens, self._substrings_at = i, n, pids, tokens, substrings_at

    def _row(self, step: int) -> int | None:
        j = self._i + step
        return j if 0 <= j < self._n and self._pids[j] == self._pids[self._i] else None

    def words(self, step: int) -> list[str] | None:
        j = self._row(step)
        return None if j is None else self._tokens[j]

    def substrings(self, step: int) -> list[str] | None:
        j = self._row(step)
        return None if j is None else self._substrings_at(j)


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
        cfg = ctx.config.query
        ranking = scan_channel(ctx.view, ctx.parsed, ctx.eligible, ctx.depth, ctx.per_query(ALTERED_MET, set),
                               stopwords=cfg.stopwords == "english",
                               function_words=None if cfg.function_word_matches else _function_words())
        return ChannelRun(ranking, fallback_reason=reason)

    def fusion(self, config) -> None:
        return None


SCAN = ScanChannel()
