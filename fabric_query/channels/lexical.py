# Over 500 lines: the word and substring channels share one query analysis, candidate query and exact BM25 re-scoring, kept in one place so the two channels cannot drift apart.
"""The word channel (BM25 over the ``word`` field) and the substring channel (exact
character phrases over the ``substring`` field) of the tantivy serving index.

Both fields are searched once per query by :func:`lexical_serving`: the index answers for both
or for neither. An index that cannot serve the pinned release (missing, another schema, not the
release's documents, a failure while searching) leaves both to the ``scan`` channel
(:mod:`fabric_query.channels.scan`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING, ClassVar

import regex
import tantivy

from fabric_query.channels.base import ChannelResult, ChannelRun, RunsInTurn, ranked
from fabric_query.channels.bm25 import (  # noqa: F401 - Bm25, bm25_rescore: the word channel's API
    TANTIVY_BM25,
    Bm25,
    TermStats,
    bm25_arrays,
    bm25_rescore,
    generation_memo,
    idf_of,
    postings_of,
    rescore,
)
from fabric_query.channels.feedback import Feedback, expansion_terms, rm3_weights  # noqa: F401 - the channel's API
from fabric_query.channels.chunk_rule import GAP, ChunkRule, ReadingOrder
from fabric_query.channels.function_words import function_word_tokens
from fabric_query.channels.window_seams import SeamWindows, ViewReading, seam_windows
from fabric_query.querylang import ParsedQuery
from fabric_query.release import VISIBLE_SOURCES_ONLY, is_storage_failure
from fabric_resources.language_routing import needs_multilingual
from fabric_resources.lexical_index import (
    INDEX_FIELD_MEMBERS,
    IndexUnusable,
    OpenIndex,
    SEPARATOR_RE,
    substring_analyzer,
    word_analyzer,
    word_field_text,
)
from fabric_resources.text_folding import UNSPACED
from fabric_resources.word_segmentation import SEGMENTED_RUN
from fabric_resources.schema import (
    INDEX_FIELD_CHUNK_ID,
    INDEX_FIELD_PARSE_ID,
    INDEX_FIELD_SUBSTRING,
    INDEX_FIELD_WORD,
)
from fabric_resources.text_folding import fold

if TYPE_CHECKING:
    from fabric_query.context import QueryContext


@lru_cache(maxsize=1)
def _word() -> tantivy.TextAnalyzer:
    return word_analyzer()


@lru_cache(maxsize=1)
def _substring() -> tantivy.TextAnalyzer:
    return substring_analyzer()


def word_tokens(text: str) -> list[str]:
    """Folded, stemmed word tokens (CJK runs as character bigrams) exactly as the index makes them."""
    return _word().analyze(word_field_text(fold(text)))


#: A run of word characters that may be such a word (at most 4 bytes a character).
_MAYBE_LONG = regex.compile(r"[\p{Alphabetic}\p{N}]{64,}")


@lru_cache(maxsize=1)
def _surface() -> tantivy.TextAnalyzer:
    return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).build()


def sequence_tokens(text: str) -> list[str]:
    """:func:`word_tokens` with ``GAP`` (:data:`fabric_query.channels.chunk_rule.GAP`) where the index holds an empty position: a word of 255
    bytes or more (a long hash, a base64 run) is dropped from the word field but keeps its position,
    so a phrase query never runs across it (trial 15b: the scan held ``"keeper lamp"`` across one,
    the index did not). The phrase and exclusion checks compare these sequences.

    >>> sequence_tokens("keeper " + "x" * 300 + " lamps") == ["keeper", GAP, "lamp"]
    True
    """
    folded = word_field_text(fold(text))
    if not _MAYBE_LONG.search(folded):
        return _word().analyze(folded)
    out: list[str] = []
    for surface in _surface().analyze(folded):
        out += [GAP] if len(surface.encode()) >= 255 else _word().analyze(surface)
    return out


def phrase_tokens(text: str) -> list[str]:
    """:func:`sequence_tokens` of a quoted phrase or exclusion, without gaps at its ends (they ask for nothing)."""
    tokens = sequence_tokens(text)
    start, end = 0, len(tokens)
    while start < end and tokens[start] == GAP:
        start += 1
    while end > start and tokens[end - 1] == GAP:
        end -= 1
    return tokens[start:end]


@lru_cache(maxsize=1)
def _word_stopped() -> tantivy.TextAnalyzer:
    return word_analyzer(stopwords=True)


@lru_cache(maxsize=1)
def _function_words() -> frozenset[str]:
    return function_word_tokens(word_tokens)


def query_word_tokens(terms: Sequence[str], stopwords: bool = False) -> list[str]:
    """The word tokens of a query's free-text ``terms`` (:func:`word_tokens`), in order, repeats kept;
    with ``stopwords`` without tantivy's English stop words, unless that leaves none.

    >>> query_word_tokens(["the", "keeper", "of", "the", "lighthouse"], stopwords=True)
    ['keeper', 'lighthous']
    >>> query_word_tokens(["to", "be", "or", "not"], stopwords=True)
    ['to', 'be', 'or', 'not']
    """
    text = " ".join(terms)
    if stopwords:
        kept = _word_stopped().analyze(word_field_text(fold(text)))
        if kept:
            return kept
    return word_tokens(text)


def content_terms(terms: Sequence[str], stopwords: bool) -> tuple[str, ...]:
    """``terms`` without those that are stop words only (when ``stopwords``), unless none would remain."""
    if not stopwords:
        return tuple(terms)
    kept = tuple(t for t in terms if _word_stopped().analyze(word_field_text(fold(t))))
    return kept or tuple(terms)


@lru_cache(maxsize=8192)
def _chunk_word_tokens(text: str) -> tuple[str, ...]:
    # Only phrase and exclusion checks need the token sequence; keyed by the text itself (a view's
    # cached row hands over the same str object, whose hash Python keeps).
    return tuple(sequence_tokens(text))


@lru_cache(maxsize=2048)
def _chunk_substring_tokens(text: str) -> tuple[str, ...]:
    # Only a phrase in a script without spaces cut by a seam needs them (chunk_rule.ChunkRule).
    return tuple(substring_tokens(text))


@lru_cache(maxsize=16384)
def _chunk_stats(text: str) -> TermStats:
    # Tokenizing a chunk costs ~0.1 ms; re-scoring needs every candidate's counts on every pass,
    # so they are kept across passes and queries (keyed by text: cheap to hash, unlike token tuples).
    tokens = word_tokens(text)
    return Counter(tokens), len(tokens)


@lru_cache(maxsize=4096)
def _window_stats(texts: tuple[str, ...]) -> TermStats:
    # A window's word-field tokens are its members' tokens in order (the joiner splits every token).
    if len(texts) == 1:
        return _chunk_stats(texts[0])
    counts: Counter = Counter()
    length = 0
    for text in texts:
        member, n = _chunk_stats(text)
        counts.update(member)
        length += n
    return counts, length


def substring_tokens(text: str) -> list[str]:
    """Folded substring-field tokens of ``text`` exactly as the index makes them."""
    return _substring().analyze(fold(text))


def substring_query_tokens(text: str) -> list[str]:
    """The substring tokens a query term, phrase or exclusion must match in sequence: :func:`substring_tokens`
    without separators (punctuation, symbols) at either end, so ``大阪。`` asks for ``大阪`` and
    ``「猫」`` for ``猫``, while ``猫、犬`` asks for the comma between them too.

    >>> substring_query_tokens("「猫、犬」。")
    ['猫', '、', '犬']
    """
    tokens = substring_tokens(text)
    start, end = 0, len(tokens)
    while start < end and SEPARATOR_RE.fullmatch(tokens[start]):
        start += 1
    while end > start and SEPARATOR_RE.fullmatch(tokens[end - 1]):
        end -= 1
    return tokens[start:end]


def needs_substring_channel(parsed: ParsedQuery) -> bool:
    """The substring channel runs when the query has text in a script written without spaces."""
    return any(UNSPACED.search(t) for t in (*parsed.terms, *parsed.phrases))


def reads_as_bigrams(parsed: ParsedQuery) -> bool:
    """Whether the word field reads some of the query as character bigrams: text in a script written
    without spaces other than Thai, Lao, Khmer and Myanmar (:func:`~fabric_resources.lexical_index.word_field_text`)."""
    return any(UNSPACED.search(SEGMENTED_RUN.sub("", t)) for t in (*parsed.terms, *parsed.phrases))


def _sequence_query(schema: tantivy.Schema, field: str, tokens: list[str]) -> tantivy.Query | None:
    if not tokens:
        return None
    if len(tokens) == 1:
        return tantivy.Query.term_query(schema, field, tokens[0])
    if GAP in tokens:  # an empty position of the index (sequence_tokens): the offsets skip it
        return tantivy.Query.phrase_query(schema, field, [(i, t) for i, t in enumerate(tokens) if t != GAP])
    return tantivy.Query.phrase_query(schema, field, tokens)


def build_query(
    schema: tantivy.Schema,
    field: str,
    parsed: ParsedQuery,
    eligible_parse_ids: set[str] | None,
    expansion: list[tuple[str, float]] = (),
    term_weights: Mapping[str, float] | None = None,
) -> tantivy.Query | None:
    """Compile a parsed query for one field; user text is only ever bound as term values.

    Word field: each free-text token is a SHOULD term, boosted by its ``term_weights`` entry (the
    query term frequency the re-scoring uses; absent: 1); each phrase a MUST
    phrase. Substring field: each free-text term and each phrase is an exact
    character sequence (phrase query), SHOULD for terms, MUST for phrases.
    Exclusions are MUST_NOT in both. Eligibility is a MUST term set on the
    parse ID, so BM25 ranks among eligible chunks only.
    """
    analyze = word_tokens if field == INDEX_FIELD_WORD else substring_query_tokens
    should: list[tantivy.Query] = []
    if field == INDEX_FIELD_WORD:
        for tok in dict.fromkeys(analyze(" ".join(parsed.terms))):
            q = tantivy.Query.term_query(schema, field, tok)
            # RM3 with a feedback weight above 1 gives the query's words a negative share: a candidate
            # must not be chosen for lacking them, so they weigh nothing here (the re-scoring keeps RM3's).
            weight = max((term_weights or {}).get(tok, 1.0), 0.0)
            should.append(q if weight == 1.0 else tantivy.Query.boost_query(q, weight))
    else:
        for term in dict.fromkeys(parsed.terms):
            q = _sequence_query(schema, field, analyze(term))
            if q is not None:
                should.append(q)
    sequence = phrase_tokens if field == INDEX_FIELD_WORD else substring_query_tokens
    must = [q for q in (_sequence_query(schema, field, sequence(p)) for p in parsed.phrases) if q is not None]
    if not should and not must:
        return None
    should += [tantivy.Query.boost_query(tantivy.Query.term_query(schema, field, t), w) for t, w in expansion]
    clauses: list[tuple[tantivy.Occur, tantivy.Query]] = [(tantivy.Occur.Must, q) for q in must]
    if must:
        clauses += [(tantivy.Occur.Should, q) for q in should]  # a required phrase matched; terms rank
    else:
        # At least one term must match. Nested, because beside a MUST clause (the eligibility
        # filter) tantivy treats top-level SHOULD clauses as optional: every eligible chunk would match.
        clauses.append((tantivy.Occur.Must, tantivy.Query.boolean_query([(tantivy.Occur.Should, q) for q in should])))
    for ex in parsed.excluded:
        q = _sequence_query(schema, field, sequence(ex))
        if q is not None:
            clauses.append((tantivy.Occur.MustNot, q))
    if eligible_parse_ids is not None:
        clauses.append(
            (tantivy.Occur.Must, tantivy.Query.term_set_query(schema, INDEX_FIELD_PARSE_ID, sorted(eligible_parse_ids)))
        )
    return tantivy.Query.boolean_query(clauses)


def search_field(
    index: OpenIndex, field: str, parsed: ParsedQuery, eligible_parse_ids: set[str] | None, depth: int
) -> ChannelResult:
    query = build_query(index.schema, field, parsed, eligible_parse_ids)
    if query is None:
        return []
    searcher = index.searcher
    # Over-fetch so that ties at the cut are broken by chunk ID, not by doc address.
    result = searcher.search(query, limit=depth + 32)
    pairs = [(searcher.doc(addr)[INDEX_FIELD_CHUNK_ID][0], float(score)) for score, addr in result.hits]
    return ranked(pairs, depth)


@dataclass(frozen=True)
class WordMatches:
    """The word channel's answer: chunks best first, and the window document each one scored in;
    ``unchecked_seams``: quoted phrases (word tokens) not looked for across every window seam
    (:class:`~fabric_query.channels.window_seams.SeamWindows`)."""

    ranking: ChannelResult
    window_of: dict[str, str]
    unchecked_seams: tuple[str, ...] = ()


def word_channel(
    index: OpenIndex,
    parsed: ParsedQuery,
    eligible: set[str] | None,
    depth: int,
    feedback: Feedback | None = None,
    text_of: Callable[[str], str] | None = None,
    bm25: Bm25 | None = None,
    *,
    query_term_frequency: bool = False,
    stopwords: bool = False,
    function_words: frozenset[str] | None = None,
    reading: ReadingOrder | None = None,
) -> ChannelResult:
    """The chunk ranking of :func:`word_matches`."""
    return word_matches(index, parsed, eligible, depth, feedback, text_of, bm25,
                        query_term_frequency=query_term_frequency, stopwords=stopwords,
                        function_words=function_words, reading=reading).ranking


def word_matches(
    index: OpenIndex,
    parsed: ParsedQuery,
    eligible: set[str] | None,
    depth: int,
    feedback: Feedback | None = None,
    text_of: Callable[[str], str] | None = None,
    bm25: Bm25 | None = None,
    prefetch: Callable[[list[str]], object] | None = None,
    *,
    query_term_frequency: bool = False,
    stopwords: bool = False,
    function_words: frozenset[str] | None = None,
    reading: ReadingOrder | None = None,
) -> WordMatches:
    """BM25 over the word field's context-window documents, answered as chunks.

    tantivy finds the window documents that match (its top ``depth + 32``); with ``text_of`` (chunk ID → text)
    they are re-scored exactly over the window statistics by :func:`bm25_rescore` with ``bm25`` (default
    :data:`TANTIVY_BM25`), and with ``feedback`` a second pass adds expansion terms from the first pass's top
    windows. Each window's score goes to its **member chunks that match on their own**: a member holds at
    least one query token, every required phrase as consecutive tokens and no excluded term (text without
    spaces: its characters), so hits, highlights and citations stay per chunk. Members of one window come best
    chunk-level BM25 first (window idf, the chunks' mean length), then reading order; windows by score, then
    ID. Returns at most ``depth`` chunks. Without ``text_of`` members cannot be checked: tantivy's scores,
    exclusions per window, every member of a matched window. With ``query_term_frequency`` a query word's BM25
    term weighs its count in the query (else 1); with ``stopwords`` the query's free-text words lose tantivy's
    English stop words (:func:`query_word_tokens`; phrases keep theirs). With ``function_words`` (index tokens,
    :mod:`fabric_query.channels.function_words`) a member must also hold a query token that is not one of them,
    or a phrase's, when the query has one; scores are unchanged. ``prefetch`` (chunk IDs) is called
    once per pass with every candidate window's members before ``text_of`` is asked for them (a view that
    keeps chunk text on disk reads them in one take). The per-chunk rule is
    :class:`~fabric_query.channels.chunk_rule.ChunkRule`, which the scan fallback applies too. With
    ``reading`` (where each chunk stands in its document) a phrase cut by the boundary of two windows is
    held by both chunks of that seam, whose windows :func:`~fabric_query.channels.window_seams.seam_windows`
    adds to the candidates (scored by their own BM25); without it, a member's seams inside its window only.

    Raises
    ------
    ValueError
        ``bm25`` without ``text_of``.
    """
    if bm25 is not None and text_of is None:
        raise ValueError("BM25 re-scoring needs text_of (chunk ID → text)")
    searcher = index.searcher
    query_tokens = query_word_tokens(parsed.terms, stopwords)
    counts = Counter(query_tokens)
    terms = {t: float(counts[t]) if query_term_frequency else 1.0 for t in counts}
    for p in parsed.phrases:
        for t in word_tokens(p):
            terms.setdefault(t, 1.0)
    checked = text_of is not None
    # Exclusions are checked per member chunk: excluding a window would drop its other chunks too.
    window_query = replace(parsed, excluded=()) if checked else parsed
    if stopwords:  # a window holding only stop words is no candidate
        window_query = replace(window_query, terms=content_terms(parsed.terms, True))
    members_of: dict[str, tuple[str, ...]] = {}
    params = bm25 or TANTIVY_BM25

    # Per generation: stored fields by doc address, window term counts as arrays (Postings).
    # Term counts themselves stay in the bounded caches (_chunk_stats, _window_stats).
    postings = postings_of(index)
    stored_windows = generation_memo(index, "stored-windows")

    def stats_of(wid: str) -> TermStats:
        return _window_stats(tuple(text_of(m) for m in members_of[wid]))

    def one_pass(expansion: list[tuple[str, float]]) -> ChannelResult:
        # The candidates are chosen with the weights they are re-scored with (``weights`` for the
        # query's words, ``expansion`` for feedback terms): a window that only a repeated query word
        # lifts would otherwise miss tantivy's top depth + 32.
        query = build_query(index.schema, INDEX_FIELD_WORD, window_query, eligible, expansion,
                            {t: weights[t] for t in terms})
        if query is None:
            return []
        pairs = []
        # Over-fetch so that ties at the cut are broken by ID, not by doc address.
        for score, addr in searcher.search(query, limit=depth + 32).hits:
            wid, members_of[wid] = members_at(addr)
            pairs.append((wid, float(score)))
        if not checked:
            return ranked(pairs, depth)
        for wid, members in seams.windows.items():  # a phrase across a window seam: no window holds it
            if wid not in members_of:
                members_of[wid] = members
                pairs.append((wid, 0.0))
        if prefetch is not None:  # one read of every member's text (and the chunks beside), not one per member
            beside = ([c for wid, _ in pairs for c in (reading.beside(members_of[wid][0], -1),
                                                        reading.beside(members_of[wid][-1], 1)) if c is not None]
                      if reading is not None and rule.phrases else [])
            prefetch([m for wid, _ in pairs for m in members_of[wid]] + beside)
        return rescore(index, [w for w, _ in pairs], weights, stats_of, params, postings)

    def members_at(addr: tantivy.DocAddress) -> tuple[str, tuple[str, ...]]:
        key = (addr.segment_ord, addr.doc)
        stored = stored_windows.get(key)
        if stored is None:  # a stored-document read per hit: kept for the next pass and query
            doc = searcher.doc(addr)
            stored = stored_windows[key] = (doc[INDEX_FIELD_CHUNK_ID][0], tuple(doc[INDEX_FIELD_MEMBERS]))
        return stored

    rule = ChunkRule.of(parsed, query_tokens, function_words, phrase_tokens, substring_query_tokens)
    seams = (seam_windows(index, rule, eligible, reading, members_at, lambda c: _chunk_word_tokens(text_of(c)),
                          lambda c: _chunk_substring_tokens(text_of(c)), prefetch=prefetch)
             if checked and reading is not None and rule.phrases else SeamWindows({}))
    weights = dict(terms)
    windows = one_pass([])
    if feedback is not None and checked and windows:
        if feedback.method == "rm3":
            stop = _word_stopped() if stopwords else None
            weights = rm3_weights(windows, stats_of, terms, feedback,
                                  (lambda t: not stop.analyze(t)) if stop is not None else (lambda t: False))
            expansion = [(t, w) for t, w in weights.items() if t not in terms]
            windows = one_pass(expansion)
        else:
            expansion = expansion_terms(index, [w for w, _ in windows], stats_of, set(query_tokens), feedback)
            if expansion:
                weights |= {t: w for t, w in expansion if t not in terms}
                windows = one_pass(expansion)
    if not checked:
        out = [(m, s) for w, s in windows for m in members_of[w]][:depth]
        return WordMatches(out, {m: w for w, _ in windows for m in members_of[w]})
    idf = idf_of(index, weights)
    chunk_avgdl = index.chunk_word_avgdl or 1.0
    groups: list[tuple[str, float, list[tuple[str, TermStats]]]] = []
    found = 0
    for wid, score in windows:
        matched = []
        members = members_of[wid]
        for i, m in enumerate(members):
            text = text_of(m)
            stats = _chunk_stats(text)
            if rule.admits(stats[0], _Member(members, i, reading, text_of), lambda: "".join(substring_tokens(text))):
                matched.append((m, stats))
        if matched:
            groups.append((wid, score, matched))
            found += len(matched)
        if found >= depth:
            break
    # Members best chunk-level BM25 first, then reading order (a stable sort); one batch for all.
    # A chunk's row is keyed by its ID, which only a window of that chunk alone shares (same counts).
    several = {m: st for _, _, matched in groups if len(matched) > 1 for m, st in matched}
    member_score = dict(zip(several, bm25_arrays(idf, weights, [postings.row(m, several.__getitem__) for m in several],
                                                  postings.vocab, chunk_avgdl, params)))
    out: ChannelResult = []
    window_of: dict[str, str] = {}
    for wid, score, matched in groups:
        for m, _ in sorted(matched, key=lambda p: -member_score.get(p[0], 0.0)):
            out.append((m, score))
            window_of[m] = wid
    return WordMatches(out[:depth], {m: window_of[m] for m, _ in out[:depth]}, seams.unchecked)


class _Member:
    """Member ``i`` of a window and the chunks beside it (:class:`~fabric_query.channels.chunk_rule.Neighbourhood`):
    the window's members, and across its ends the chunks ``reading`` names (none without it)."""

    def __init__(self, members: Sequence[str], i: int, reading: ReadingOrder | None,
                 text_of: Callable[[str], str]) -> None:
        self._members, self._i, self._reading, self._text_of = members, i, reading, text_of

    def _text(self, step: int) -> str | None:
        j = self._i + step
        if 0 <= j < len(self._members):
            return self._text_of(self._members[j])
        other = self._reading.beside(self._members[self._i], step) if self._reading is not None else None
        return None if other is None else self._text_of(other)

    def words(self, step: int) -> tuple[str, ...] | None:
        text = self._text(step)
        return None if text is None else _chunk_word_tokens(text)

    def substrings(self, step: int) -> tuple[str, ...] | None:
        text = self._text(step)
        return None if text is None else _chunk_substring_tokens(text)


def substring_channel(index: OpenIndex, parsed: ParsedQuery, eligible: set[str] | None, depth: int) -> ChannelResult:
    return search_field(index, INDEX_FIELD_SUBSTRING, parsed, eligible, depth)


# ---------------------------------------------------------------------------
# The channels
# ---------------------------------------------------------------------------


#: Per-query key (:meth:`QueryContext.per_query`) of the set of chunks whose altered text the word
#: channel met while checking its candidates (:attr:`EvidencePack.altered_chunks` includes them).
ALTERED_MET = "lexical-altered-met"


#: Per-query key of the quoted phrases the word channel did not look for across every window seam
#: (:attr:`EvidencePack.unchecked_phrase_seams`).
UNCHECKED_SEAMS = "lexical-unchecked-seams"


@dataclass(frozen=True)
class LexicalServing:
    """What the serving index answered for one query.

    ``rankings``: field channel name → its ranking, for the selected channels the query needs
    (``substring`` only for text in a script written without spaces); ``unusable``: why the
    index cannot serve (then ``rankings`` is empty and the scan answers).
    """

    rankings: dict[str, ChannelResult]
    unusable: IndexUnusable | None = None
    #: Field channel name → chunk ID → provenance (the word channel: the window document it scored in).
    provenance: dict[str, dict[str, dict]] = field(default_factory=dict)


class _UnknownChunk(Exception):
    """A lexical channel returned a chunk ID the pinned release does not hold."""


def lexical_serving(ctx: "QueryContext") -> LexicalServing:
    """The index's answer for ``ctx`` (searched once per query, on first use)."""
    return ctx.per_query("lexical-serving", lambda: _serve(ctx))


def _serve(ctx: "QueryContext") -> LexicalServing:
    """Search the word and substring fields; an index whose documents are not the release's chunks
    (``index-release-mismatch``) or that fails while searching (``index-unreadable``) is treated like
    a missing one."""
    view, parsed, cfg = ctx.view, ctx.parsed, ctx.config.query
    lexical = view.lexical
    if isinstance(lexical, IndexUnusable):
        return LexicalServing({}, lexical)

    altered = ctx.per_query(ALTERED_MET, set)

    def text_of(cid: str) -> str:
        if cid not in view.chunk_index:
            raise _UnknownChunk(cid)
        row = view.chunk(cid)
        if row["altered"]:
            # Text rewritten behind Fabric's back neither matches nor scores (a phrase check on it
            # dropped the chunk unseen: "no results", no word of the alteration); the pack names it.
            altered.add(cid)
            return ""
        return row["text"]

    feedback = (Feedback(cfg.feedback_docs, cfg.feedback_terms, cfg.feedback_weight, cfg.feedback_method)
                if cfg.feedback_terms and (cfg.feedback_multilingual
                                           or not needs_multilingual(parsed.positive_text)) else None)
    unspaced = needs_substring_channel(parsed)
    # Thai and Lao are cut into words, not bigrams: scored as words are (no such collection measured
    # the bigram parameters; they were chosen on JSQuAD).
    chosen = cfg.bigram_bm25 if reads_as_bigrams(parsed) else cfg.word_bm25
    bm25 = Bm25(chosen.k1, chosen.b) if chosen else None
    try:
        found, provenance = {}, {}
        if WORD.name in ctx.selected:
            matches = word_matches(lexical, parsed, ctx.eligible, ctx.depth, feedback, text_of, bm25,
                                   prefetch=lambda ids: view.chunk_rows(view.known_chunks(ids)),
                                   query_term_frequency=cfg.query_term_frequency,
                                   stopwords=cfg.stopwords == "english",
                                   function_words=None if cfg.function_word_matches else _function_words(),
                                   reading=ViewReading(view))
            found[WORD.name] = matches.ranking
            ctx.per_query(UNCHECKED_SEAMS, set).update(matches.unchecked_seams)
            provenance[WORD.name] = {c: {"window_id": w} for c, w in matches.window_of.items()}
        if unspaced and SUBSTRING.name in ctx.selected:
            ranking = substring_channel(lexical, parsed, ctx.eligible, ctx.depth)
            if parsed.excluded:  # the word channel's exclusions hold for every lexical hit (chunk_rule)
                rule = ChunkRule.of(parsed, (), None, phrase_tokens, substring_query_tokens)
                known = [c for c, _ in ranking if c in view.chunk_index]
                view.chunk_rows(known)
                ranking = [(c, s) for c, s in ranking if c not in view.chunk_index or not rule.excludes(
                    _chunk_word_tokens(text_of(c)), lambda c=c: "".join(substring_tokens(text_of(c))))]
            found[SUBSTRING.name] = ranking
        unknown = [c for pairs in found.values() for c, _ in pairs if c not in view.chunk_index]
        if unknown:
            raise _UnknownChunk(unknown[0])
    except _UnknownChunk as exc:
        return LexicalServing({}, IndexUnusable("index-release-mismatch", f"the index returned chunk {exc.args[0]}, "
                                                f"which release {view.release_id} does not hold"))
    except BaseException as exc:  # noqa: BLE001 - tantivy raises ValueError or panics on corrupt segments
        if not is_storage_failure(exc):
            raise
        return LexicalServing({}, IndexUnusable("index-unreadable", f"{type(exc).__name__}: {exc}"))
    return LexicalServing(found, provenance=provenance)


@dataclass(frozen=True)
class IndexFieldChannel(RunsInTurn):
    """A channel answered by one field of the serving index (:func:`lexical_serving`)."""

    name: str
    stage: ClassVar[str] = "lexical"
    hard_constraint_carrier: ClassVar[bool] = True  # required phrases are MUST, exclusions MUST_NOT
    fallback: ClassVar[str] = "scan"

    def applies(self, ctx: "QueryContext") -> bool:
        return self.name in lexical_serving(ctx).rankings

    def run(self, ctx: "QueryContext") -> ChannelRun:
        # A restricted view is searched through an in-memory index of its visible sources; the
        # answer says so only for a source deleted since, never for one withheld (trial 22b).
        serving = lexical_serving(ctx)
        return ChannelRun(serving.rankings[self.name], provenance=serving.provenance.get(self.name, {}),
                          fallback_reason=VISIBLE_SOURCES_ONLY if ctx.view.visible_sources_only else None)

    def fusion(self, config) -> None:
        return None


WORD = IndexFieldChannel("word")
SUBSTRING = IndexFieldChannel("substring")
