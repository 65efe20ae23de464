"""The word channel (BM25 over the ``word`` field) and the substring channel (exact
character phrases over the ``substring`` field) of the tantivy serving index."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import tantivy

from fabric_query.channels import ChannelResult, ranked
from fabric_query.querylang import ParsedQuery
from fabric_resources.lexical_index import OpenIndex, substring_analyzer, word_analyzer, word_field_text
from fabric_resources.text_folding import UNSPACED
from fabric_resources.schema import (
    INDEX_FIELD_CHUNK_ID,
    INDEX_FIELD_PARSE_ID,
    INDEX_FIELD_SUBSTRING,
    INDEX_FIELD_WORD,
)
from fabric_resources.text_folding import fold

@lru_cache(maxsize=1)
def _word() -> tantivy.TextAnalyzer:
    return word_analyzer()


@lru_cache(maxsize=1)
def _substring() -> tantivy.TextAnalyzer:
    return substring_analyzer()


def word_tokens(text: str) -> list[str]:
    """Folded, stemmed word tokens (CJK runs as character bigrams) exactly as the index makes them."""
    return _word().analyze(word_field_text(fold(text)))


@lru_cache(maxsize=8192)
def _chunk_word_tokens(text: str) -> tuple[str, ...]:
    # Re-scoring tokenizes every candidate (~0.1 ms each); popular chunks and repeated queries
    # hit this. Keyed by the text itself: a view's cached row hands over the same str object.
    return tuple(word_tokens(text))


def substring_tokens(text: str) -> list[str]:
    return _substring().analyze(fold(text))


def needs_substring_channel(parsed: ParsedQuery) -> bool:
    """The substring channel runs when the query has text in a script written without spaces."""
    return any(UNSPACED.search(t) for t in (*parsed.terms, *parsed.phrases))


def _sequence_query(schema: tantivy.Schema, field: str, tokens: list[str]) -> tantivy.Query | None:
    if not tokens:
        return None
    if len(tokens) == 1:
        return tantivy.Query.term_query(schema, field, tokens[0])
    return tantivy.Query.phrase_query(schema, field, tokens)


def build_query(
    schema: tantivy.Schema,
    field: str,
    parsed: ParsedQuery,
    eligible_parse_ids: set[str] | None,
    expansion: list[tuple[str, float]] = (),
) -> tantivy.Query | None:
    """Compile a parsed query for one field; user text is only ever bound as term values.

    Word field: each free-text token is a SHOULD term; each phrase a MUST
    phrase. Substring field: each free-text term and each phrase is an exact
    character sequence (phrase query), SHOULD for terms, MUST for phrases.
    Exclusions are MUST_NOT in both. Eligibility is a MUST term set on the
    parse ID, so BM25 ranks among eligible chunks only.
    """
    analyze = word_tokens if field == INDEX_FIELD_WORD else substring_tokens
    should: list[tantivy.Query] = []
    if field == INDEX_FIELD_WORD:
        for tok in dict.fromkeys(analyze(" ".join(parsed.terms))):
            should.append(tantivy.Query.term_query(schema, field, tok))
    else:
        for term in dict.fromkeys(parsed.terms):
            q = _sequence_query(schema, field, analyze(term))
            if q is not None:
                should.append(q)
    must = [q for q in (_sequence_query(schema, field, analyze(p)) for p in parsed.phrases) if q is not None]
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
        q = _sequence_query(schema, field, analyze(ex))
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
class Feedback:
    """Pseudo-relevance feedback (RM3-style, Lavrenko & Croft 2001; Abdul-Jaleel et al. 2004):
    the ``terms`` best terms of the top ``docs`` first-pass hits, by Σ_d tf(t,d)/|d| · idf(t),
    are added as SHOULD clauses boosted by ``weight`` × their normalised score."""

    docs: int = 10
    terms: int = 10
    weight: float = 0.5


def expansion_terms(
    index: OpenIndex, first_pass: ChannelResult, text_of: Callable[[str], str], query_tokens: set[str], fb: Feedback
) -> list[tuple[str, float]]:
    searcher = index.searcher
    n_docs = max(searcher.num_docs, 1)
    scores: dict[str, float] = {}
    for chunk_id, _ in first_pass[: fb.docs]:
        tokens = word_tokens(text_of(chunk_id))
        if not tokens:
            continue
        for term, tf in Counter(tokens).items():
            if term not in query_tokens and len(term) > 1:
                scores[term] = scores.get(term, 0.0) + tf / len(tokens)
    weighted = []
    for term, s in scores.items():
        df = searcher.doc_freq(INDEX_FIELD_WORD, term)
        if df and df / n_docs < 0.1:  # very common terms carry no topic
            weighted.append((term, s * math.log(n_docs / df)))
    weighted.sort(key=lambda p: (-p[1], p[0]))
    top = weighted[: fb.terms]
    if not top:
        return []
    best = top[0][1]
    return [(t, fb.weight * s / best) for t, s in top]


@dataclass(frozen=True)
class Bm25:
    """Okapi BM25 parameters for re-scoring the word channel's candidates.

    score(d) = Σ_t w_t · idf(t) · tf(t,d)·(k1 + 1) / (tf(t,d) + k1·(1 − b + b·|d|/avgdl)),
    idf(t) = ln(1 + (N − n_t + 0.5)/(n_t + 0.5)) — Robertson & Zaragoza, "The Probabilistic
    Relevance Framework: BM25 and Beyond" (2009), eq. 3.15, with the non-negative idf that
    tantivy and Lucene use. ``w_t`` is 1 for query terms and the boost of a feedback term.
    tantivy fixes k1 = 1.2, b = 0.75; character bigrams want a flatter curve (the eval
    README's reference uses k1 0.9, b 0.4), so the channel re-scores with these instead.
    """

    k1: float
    b: float


def bm25_rescore(
    index: OpenIndex, candidates: list[str], terms: dict[str, float], tokens_of: Callable[[str], Sequence[str]],
    params: Bm25,
) -> ChannelResult:
    """Re-score ``candidates`` (chunk IDs) by :class:`Bm25` ``params`` over word-field ``terms``
    (token → weight); ``tokens_of`` gives a chunk's word-field tokens (:func:`word_tokens`).

    N and n_t are the index's (``num_docs``, ``doc_freq``), avgdl its live documents' mean
    length (:attr:`OpenIndex.word_avgdl`), |d| and tf counted from the chunk's own tokens,
    which the index made with the same analyzer. Returns every candidate, best first.
    """
    searcher = index.searcher
    n_docs = searcher.num_docs
    avgdl = index.word_avgdl or 1.0
    idf = {}
    for term in terms:
        df = searcher.doc_freq(INDEX_FIELD_WORD, term)
        idf[term] = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
    out = []
    for cid in candidates:
        tokens = tokens_of(cid)
        tf = Counter(tokens)
        norm = params.k1 * (1.0 - params.b + params.b * len(tokens) / avgdl)
        out.append((cid, math.fsum(w * idf[t] * tf[t] * (params.k1 + 1.0) / (tf[t] + norm)
                                   for t, w in terms.items() if tf[t])))
    return ranked(out, len(out))


def word_channel(
    index: OpenIndex,
    parsed: ParsedQuery,
    eligible: set[str] | None,
    depth: int,
    feedback: Feedback | None = None,
    text_of: Callable[[str], str] | None = None,
    bm25: Bm25 | None = None,
) -> ChannelResult:
    """BM25 over the word field; with ``feedback`` (and ``text_of``: chunk ID → text) a second
    pass adds expansion terms from the first pass's top chunks. With ``bm25`` each pass's
    candidates (tantivy's top ``depth + 32``) are re-scored by :func:`bm25_rescore`; phrase
    tokens then count as terms.

    Raises
    ------
    ValueError
        ``bm25`` without ``text_of``.
    """
    if bm25 is not None and text_of is None:
        raise ValueError("BM25 re-scoring needs text_of (chunk ID → text)")

    def tokens_of(cid: str) -> tuple[str, ...]:
        return _chunk_word_tokens(text_of(cid))

    query_tokens = word_tokens(" ".join(parsed.terms))
    terms = dict.fromkeys([*query_tokens, *(t for p in parsed.phrases for t in word_tokens(p))], 1.0)

    def one_pass(expansion: list[tuple[str, float]]) -> ChannelResult:
        query = build_query(index.schema, INDEX_FIELD_WORD, parsed, eligible, expansion)
        if query is None:
            return []
        searcher = index.searcher
        # Over-fetch so that ties at the cut are broken by chunk ID, not by doc address.
        hits = searcher.search(query, limit=depth + 32).hits
        pairs = [(searcher.doc(addr)[INDEX_FIELD_CHUNK_ID][0], float(score)) for score, addr in hits]
        if bm25 is None:
            return ranked(pairs, depth)
        weights = terms | {t: w for t, w in expansion if t not in terms}
        return bm25_rescore(index, [c for c, _ in pairs], weights, tokens_of, bm25)[:depth]

    first = one_pass([])
    if feedback is None or text_of is None or not first:
        return first
    expansion = expansion_terms(index, first, text_of, set(query_tokens), feedback)
    if not expansion:
        return first
    return one_pass(expansion)


def substring_channel(index: OpenIndex, parsed: ParsedQuery, eligible: set[str] | None, depth: int) -> ChannelResult:
    return search_field(index, INDEX_FIELD_SUBSTRING, parsed, eligible, depth)
