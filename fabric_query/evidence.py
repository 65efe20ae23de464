"""Evidence: exact highlights of a passage (citations are assembled in :mod:`fabric_query.assembly`).

Highlights follow LOOM's structured projection: insert start/end markers that
are proven absent from the passage (private-use delimiters around a counter,
checked against the passage), then parse the marked string back into segments
and require ``"".join(seg.text) == passage``. A passage that already contains
``<mark>``, ``<script>`` or private-use characters stays literal text.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

import regex

from fabric_query.channels.lexical import substring_query_tokens, word_tokens
from fabric_resources.lexical_index import SUBSTRING_TOKEN_RE
from fabric_resources.offsets import utf16_offset  # noqa: F401  (re-exported for callers)
from fabric_resources.text_folding import UNSPACED
from fabric_resources.word_segmentation import SEGMENTED_RUN, segmented_words, word_token
from fabric_query.querylang import ParsedQuery
from fabric_query.types import HighlightSegment
from fabric_resources.text_folding import CLUSTER_TAIL, fold_with_map

#: A word as the word index's tokenizer reads one: a run of alphanumeric characters (tantivy's simple
#: tokenizer splits at every character that is not ``char::is_alphanumeric``: Unicode Alphabetic or
#: Numeric). The vowel signs of Devanagari, Bengali, Tamil… are alphabetic (``\w`` alone cut ``झील``
#: at its ``ी``, so no query word was found in it); connector punctuation is not (``\w`` took
#: ``snake_case`` as one word, so the query ``case`` highlighted ``snake_`` too), nor is an enclosing
#: mark such as the keycap U+20E3.
_WORD = regex.compile(r"[\p{Alphabetic}\p{N}]+")
#: A run of word characters in scripts with spaces: how the word index splits a word that glues
#: Latin to Japanese (``これはpythonのコード`` holds the token ``python``).
_SPACED_RUN = regex.compile(f"(?:(?!{UNSPACED.pattern})[\\p{{Alphabetic}}\\p{{N}}])+")

#: The channels whose hits hold a query token in their own text (lexical evidence).
LEXICAL_CHANNELS = ("word", "substring", "scan")


class HighlightError(Exception):
    """The marked passage does not parse back into the passage (a Fabric bug, never user input)."""


def collision_free_markers(passage: str) -> tuple[str, str]:
    """Start and end markers that occur nowhere in ``passage`` (LOOM's ``collision_free_markers``)."""
    suffix = 0
    while True:
        start = f"\ue000FABRIC-{suffix:016x}-START\ue001"
        end = f"\ue000FABRIC-{suffix:016x}-END\ue001"
        if start not in passage and end not in passage:
            return start, end
        suffix += 1


def match_ranges(passage: str, parsed: ParsedQuery) -> list[tuple[int, int]]:
    """Unicode-scalar ranges of ``passage`` that match the query's positive terms, merged, sorted.

    Words match by their folded, stemmed token (as the word index does);
    terms in scripts without spaces match as folded character sequences (as the substring
    index does), and so do their character bigrams (as the word index does: a passage the
    word channel found by ``トー ーク クン`` of ``認証トークン`` highlights ``トークン``).
    """
    folded, origin = fold_with_map(passage)
    if not folded:
        return []
    # A phrase of several words in a script with spaces highlights where its words run in order,
    # as the word index's phrase query matched them, not each of its words wherever it stands (a
    # search for "Basalt Holdings of Tarnwick" highlighted every "of"; hostile trial 13c). One
    # without such a run in this passage highlights the part a chunk seam cut off at the passage's
    # end or start (the word channel matched it across that seam); with neither, its words, as before.
    phrase_ranges, found = _phrase_ranges(folded, origin, parsed.phrases)
    stems = _stems(" ".join((*parsed.terms, *(p for p in parsed.phrases if p not in found))))
    # Decide per distinct word, then find its occurrences: a passage repeats most of its words. A
    # word glued to a script without spaces is decided per run of the other script in it.
    pieces: set[str] = set()
    for w in set(_WORD.findall(folded)):
        pieces.update(_SPACED_RUN.findall(w) if UNSPACED.search(w) else (w,))
    hits = {w for w in pieces if stems.intersection(_word_tokens_cached(w))}
    ranges: list[tuple[int, int]] = list(phrase_ranges)
    if hits:
        for m in _WORD.finditer(folded):
            if m.group() in hits:
                ranges.append((origin[m.start()], origin[m.end() - 1] + 1))
            elif UNSPACED.search(m.group()):
                for r in _SPACED_RUN.finditer(folded, m.start(), m.end()):
                    if r.group() in hits:
                        ranges.append((origin[r.start()], origin[r.end() - 1] + 1))
    unspaced = [p for p in parsed.phrases if UNSPACED.search(p)]
    needles = {"".join(substring_query_tokens(t)) for t in (*parsed.terms, *unspaced) if UNSPACED.search(t)} - {""}
    if not needles:
        ranges += _bigram_ranges(folded, origin, (*parsed.terms, *parsed.phrases))
        return _merge(_extend_over_marks(passage, ranges))
    # As the substring index reads the passage (SUBSTRING_TOKEN_RE: whitespace and middle dots are no
    # tokens, other punctuation is): its tokens' characters, in order (was: all but
    # whitespace, so a term the index matched across a "、" had no highlight).
    compact = [(i, folded[i]) for m in SUBSTRING_TOKEN_RE.finditer(folded) for i in range(m.start(), m.end())]
    hay = "".join(c for _, c in compact)

    def add(start: int, length: int) -> None:
        ranges.append((origin[compact[start][0]], origin[compact[start + length - 1][0]] + 1))

    # Scripts without spaces highlight exact occurrences of the whole term; a phrase that is not in
    # the passage whole highlights its part that a seam cut off at the passage's end or start, and
    # none of its bigrams elsewhere (trial 15b: the chunk after the seam had no highlight).
    parts = set()
    for phrase in unspaced:
        needle = "".join(substring_query_tokens(phrase))
        if len(needle) < 2 or needle in hay:
            continue
        if hay and hay in needle[1:-1]:  # a middle piece of a phrase longer than the passage
            parts.add(phrase)
            needles.discard(needle)
            add(0, len(hay))
            continue
        head = next((j for j in range(len(needle) - 1, 0, -1) if hay.endswith(needle[:j])), 0)
        tail = next((j for j in range(len(needle) - 1, 0, -1) if hay.startswith(needle[-j:])), 0)
        if head or tail:
            parts.add(phrase)
            needles.discard(needle)
            if head:
                add(len(hay) - head, head)
            if tail:
                add(0, tail)
    ranges += _bigram_ranges(folded, origin, (*parsed.terms, *(p for p in parsed.phrases if p not in parts)))
    for needle in needles:
        start = hay.find(needle)
        while start >= 0:
            add(start, len(needle))
            start = hay.find(needle, start + 1)
    return _merge(_extend_over_marks(passage, ranges))


def _phrase_ranges(folded: str, origin: list[int], phrases: Iterable[str]) -> tuple[list[tuple[int, int]], set[str]]:
    """Ranges of the passage where a phrase's word tokens occur consecutively (the first word's start
    to the last word's end), and the phrases found so. Only phrases of two or more tokens in scripts
    with spaces; tokens are the word index's (folded, stemmed), read per word of ``folded``."""
    wanted = {p: tuple(_word_tokens_cached(p)) for p in phrases if not UNSPACED.search(p)}
    wanted = {p: seq for p, seq in wanted.items() if len(seq) >= 2}
    if not wanted:
        return [], set()
    tokens: list[tuple[str, int, int]] = []  # (token, start, end) in folded
    for m in _WORD.finditer(folded):
        if UNSPACED.search(m.group()):
            tokens.append(("", m.start(), m.end()))  # another script: no phrase of these runs over it
            continue
        tokens.extend((tok, m.start(), m.end()) for tok in _word_tokens_cached(m.group()))
    stems = [t for t, _, _ in tokens]
    ranges: list[tuple[int, int]] = []
    found: set[str] = set()

    def add(i: int, k: int) -> None:
        ranges.append((origin[tokens[i][1]], origin[tokens[i + k - 1][2] - 1] + 1))

    for phrase, seq in wanted.items():
        k = len(seq)
        for i in range(len(stems) - k + 1):
            if tuple(stems[i:i + k]) == seq:
                add(i, k)
                found.add(phrase)
        if phrase in found:
            continue
        # Not here whole: the part a seam cut off, at the passage's end (the phrase's first words)
        # or its start (its last words), as the word channel matched it (chunk_rule.ChunkRule).
        n = len(stems)
        if 0 < n < k and any(tuple(seq[i:i + n]) == tuple(stems) for i in range(1, k - n)):
            add(0, n)  # a middle piece of a phrase longer than the passage
            found.add(phrase)
            continue
        head = next((j for j in range(k - 1, 0, -1) if n >= j and tuple(stems[n - j:]) == seq[:j]), 0)
        tail = next((j for j in range(k - 1, 0, -1) if n >= j and tuple(stems[:j]) == seq[k - j:]), 0)
        if head:
            add(n - head, head)
        if tail:
            add(0, tail)
        if head or tail:
            found.add(phrase)
    return ranges, found


def _bigram_ranges(folded: str, origin: list[int], terms: Iterable[str]) -> list[tuple[int, int]]:
    """Ranges of ``folded``'s word-field tokens in scripts without spaces that the query's terms
    share: any two adjacent such characters are one of the index's bigrams; a single character
    is a token only where it stands alone (``word_field_text``); a Thai, Lao, Khmer or Myanmar token
    is a word where the passage's own run is cut into that word (so ``ไล`` is not marked inside
    ``ไลน``), compared as its token (``word_token``: a Khmer word's coeng signs dropped, other marks
    coded) and marked whole."""
    grams = {t for t in _stems(" ".join(terms)) if UNSPACED.search(t)}
    words = {g for g in grams if SEGMENTED_RUN.fullmatch(g)}
    grams -= words
    out = []
    if words:
        for run in SEGMENTED_RUN.finditer(folded):
            at = run.start()
            for word in segmented_words(run.group()):
                if word_token(word) in words:
                    out.append((origin[at], origin[at + len(word) - 1] + 1))
                at += len(word)
    for g in grams:
        start = folded.find(g)
        while start >= 0:
            end = start + len(g)
            alone = len(g) > 1 or ((start == 0 or not UNSPACED.match(folded[start - 1]))
                                   and (end == len(folded) or not UNSPACED.match(folded[end])))
            if alone:
                out.append((origin[start], origin[end - 1] + 1))
            start = folded.find(g, start + 1)
    return out


def missing_highlight_reason(passage: str, parsed: ParsedQuery) -> str:
    """Why a passage a lexical channel matched has no highlighted segment (it should never happen:
    the highlighter finds every token kind the lexical channels match; this names the exception)."""
    if not passage:
        return "empty-text"
    if not fold_with_map(passage)[0]:
        return "text-folds-to-nothing"
    return "no-query-token-found-in-text"


@lru_cache(maxsize=1024)
def _stems(text: str) -> frozenset[str]:
    return frozenset(word_tokens(text))


@lru_cache(maxsize=65536)
def _word_tokens_cached(word: str) -> tuple[str, ...]:
    return tuple(word_tokens(word))


#: One user-perceived character (an extended grapheme cluster, UAX #29).
_GRAPHEME = regex.compile(r"\X")


def _extend_over_marks(passage: str, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Grow each range over the combining marks that follow it, so a letter keeps its accent, and
    over the rest of a cluster its folding composed (a half-width ``ﾞ``, NFD Hangul's jamo); then
    to whole grapheme clusters (UAX #29) at both ends: a character bigram of a script whose vowel
    signs are marks (Thai ``ีย`` of ``เชียงใหม่``, which the word index holds) began a highlight
    on a vowel sign cut from its consonant (``เข[ีย]น``), drawn as a mark on a dotted circle."""
    out = []
    starts: list[int] | None = None
    for a, b in ranges:
        while b < len(passage) and (unicodedata.category(passage[b]) in ("Mn", "Me")
                                    or CLUSTER_TAIL.match(passage[b])):
            b += 1
        if 0 < a < len(passage) or b < len(passage):
            if starts is None:
                starts = [m.start() for m in _GRAPHEME.finditer(passage)] + [len(passage)]
            a = starts[bisect.bisect_right(starts, a) - 1]
            b = starts[bisect.bisect_left(starts, b)]
        out.append((a, b))
    return out


def _merge(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def mark(passage: str, ranges: list[tuple[int, int]]) -> tuple[str, str, str]:
    """The passage with collision-free markers around ``ranges``; returns (marked, start, end)."""
    start, end = collision_free_markers(passage)
    parts, cursor = [], 0
    for a, b in ranges:
        parts += [passage[cursor:a], start, passage[a:b], end]
        cursor = b
    parts.append(passage[cursor:])
    return "".join(parts), start, end


def parse_marked(marked: str, start: str, end: str, passage: str) -> tuple[HighlightSegment, ...]:
    """Parse a marked string into segments; reject nesting, unmatched or empty spans.

    Raises
    ------
    HighlightError
        If the markers are malformed or the segments do not reconcatenate to ``passage``.
    """
    # split() with a capturing group alternates text and marker: text, marker, text, ..., text.
    tokens = re.split(f"({re.escape(start)}|{re.escape(end)})", marked)
    segment = HighlightSegment  # (validated construction measured 2x faster than model_construct)
    segments: list[HighlightSegment] = [segment(text=tokens[0], highlighted=False)] if tokens[0] else []
    inside, current = False, ""
    for k in range(1, len(tokens), 2):
        marker, text = tokens[k], tokens[k + 1]
        if marker == start:
            if inside:
                raise HighlightError("nested highlight start")
            inside, current = True, text
            continue
        if not inside:
            raise HighlightError("highlight end without start")
        if not current:
            raise HighlightError("empty highlight")
        segments.append(segment(text=current, highlighted=True))
        inside = False
        if text:
            segments.append(segment(text=text, highlighted=False))
    if inside:
        raise HighlightError("unclosed highlight")
    if "".join(s.text for s in segments) != passage:
        raise HighlightError("segments do not reproduce the passage")
    return tuple(segments)


def highlight(passage: str, parsed: ParsedQuery) -> tuple[HighlightSegment, ...]:
    """Highlight segments of ``passage`` whose concatenation equals it exactly."""
    if not passage:
        return ()
    marked, start, end = mark(passage, match_ranges(passage, parsed))
    return parse_marked(marked, start, end, passage)
