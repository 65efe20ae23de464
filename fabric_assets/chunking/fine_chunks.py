"""Fine chunks: pack canonical units in reading order under a token cap.

Pure functions, no I/O. A chunk is a run of whole units (joined by
:data:`SEPARATOR`) or one piece of a unit too long for the cap. Each chunk
keeps *fragments* ``(unit_id, start_char, end_char)`` in Unicode scalars such
that::

    chunk.text == SEPARATOR.join(unit_text[unit_id][s:e] for unit_id, s, e in chunk.fragments)

A heading (or a slide's title), or a change of section path, starts a new chunk so a chunk
never spans two sections; the heading travels with the text under it. So does a
unit on another PDF page or PPTX slide than the one the open chunk ends on
(``ChunkInputUnit.place``), so a citation names the page or slide of its text
rather than a range of them (a unit carried over a page break still spans it).

The cap holds whatever the input's shape. Tokens are counted on
:func:`counted_spans`: the tokenizer's word pieces, except that a span longer
than :data:`MAX_TOKEN_CHARS` (WordPiece maps a word of over 100 characters to
one ``[UNK]`` spanning all of it) counts as one token per started
``MAX_TOKEN_CHARS`` characters, and so does a run of that many characters the
tokenizer drops (U+FFFD, controls, long whitespace). So a chunk of at most
``max_tokens`` counted tokens holds fewer than ``2 * MAX_TOKEN_CHARS *
max_tokens`` characters: a 20 MB line without spaces becomes many bounded
chunks, not one of twenty million characters.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import regex

from fabric_resources.schema import FRAGMENT_SEPARATOR

SEPARATOR = FRAGMENT_SEPARATOR
_SENTENCE_END = frozenset(".!?。！？；;」』")

#: Enters the chunker identity (chunk IDs) and the asset's code version; bump it when the
#: packing rule changes. v2: counted spans (the cap holds for any input), word-boundary cuts.
#: v3: a new page or slide starts a chunk (a PDF chunk cited "pp. 1–4" for a phrase on page 2).
#: v4: a slide's title travels with the slide's text as a heading does (it was a chunk of its own).
#: v5: a cut inside a long unit never falls inside a grapheme cluster (Thai, emoji, NFD Hangul).
CHUNKER_VERSION = "fine-v5"

#: Unit kinds that start a chunk and travel with the text under them.
HEADINGS = frozenset({"heading", "slide_title"})

#: Longest span counted as one token (Unicode scalars). Above the longest word piece of
#: all-MiniLM-L6-v2's vocabulary (18 characters, "telecommunications"), so only spans that
#: stand for more than a word piece ([UNK] of an over-long word) are counted by length.
MAX_TOKEN_CHARS = 32


@dataclass(frozen=True)
class ChunkInputUnit:
    """One unit to pack. ``place``: the first and last PDF page, or the PPTX slide twice, the
    unit sits on (its locator's ``page``/``page_end`` or ``slide``); ``None`` for other formats."""

    unit_id: str
    kind: str
    text: str
    section_path: tuple[str, ...]
    place: tuple[int, int] | None = None


@dataclass(frozen=True)
class Fragment:
    unit_id: str
    start_char: int
    end_char: int


@dataclass(frozen=True)
class FineChunk:
    ordinal: int
    text: str
    fragments: tuple[Fragment, ...]
    section_path: tuple[str, ...]
    token_count: int


TokenSpans = Callable[[list[str]], list[list[tuple[int, int]]]]


def counted_spans(text: str, spans: list[tuple[int, int]], max_chars: int = MAX_TOKEN_CHARS) -> list[tuple[int, int]]:
    """The spans the chunker counts as tokens (see the module docstring), in text order.

    Parameters
    ----------
    text : str
    spans : list of (start_char, end_char)
        The tokenizer's word pieces of ``text`` (Unicode scalars), in order; pieces that share
        a span (one character the normaliser expands) stay separate tokens.
    max_chars : int
        Longest counted span.

    Returns
    -------
    list of (start_char, end_char)
        Every word piece of at most ``max_chars`` characters as it is; a longer one cut into
        consecutive spans of at most ``max_chars`` characters, each ending at the last grapheme
        cluster boundary (UAX #29) within reach (at ``max_chars`` when a cluster is longer);
        and every run of at least ``max_chars`` characters outside all pieces cut the same way.
        Each span holds at most ``max_chars`` characters and fewer than ``max_chars`` characters
        lie between two consecutive spans.

    >>> counted_spans("ab " + "x" * 70, [(0, 2), (3, 73)], 32)
    [(0, 2), (3, 35), (35, 67), (67, 73)]
    """
    out: list[tuple[int, int]] = []

    def cut(start: int, end: int) -> None:
        bounds = [m.end() for m in _GRAPHEME.finditer(text, start, end)]
        s = start
        while s < end:
            e = min(s + max_chars, end)
            if e < end:
                k = bisect.bisect_right(bounds, e) - 1
                if k >= 0 and bounds[k] > s:  # else a cluster longer than max_chars: cut where it must be
                    e = bounds[k]
            out.append((s, e))
            s = e

    position = 0
    for start, end in [*spans, (len(text), len(text))]:
        if start - position >= max_chars:
            cut(position, start)
        if end - start > max_chars:
            cut(start, end)
        elif end > start or (start, end) != (len(text), len(text)):
            out.append((start, end))
        position = max(position, end)
    return out


def _split_unit(text: str, spans: list[tuple[int, int]], max_tokens: int) -> list[tuple[int, int, int]]:
    """Split one long text into ``(start_char, end_char, n_tokens)`` pieces of ≤ ``max_tokens``.

    ``spans`` are :func:`counted_spans`. Cuts after the last sentence end in the second half
    of a window, else at the last word boundary (whitespace before a token) there, else at a
    token boundary; a cut never falls inside a grapheme cluster (:func:`_grapheme_cut`); pieces
    are trimmed of surrounding whitespace and never empty.
    """
    pieces: list[tuple[int, int, int]] = []
    i = 0
    while i < len(spans):
        j = min(i + max_tokens, len(spans))
        if j < len(spans):
            half = i + max_tokens // 2
            sentence = next((k + 1 for k in range(j - 1, half - 1, -1)
                             if spans[k][1] > 0 and text[spans[k][1] - 1] in _SENTENCE_END), None)
            word = next((k for k in range(j, max(half, i + 1) - 1, -1)
                         if spans[k][0] > 0 and text[spans[k][0] - 1].isspace()), None)
            j = _grapheme_cut(text, spans, i, sentence or word or j)
        start = spans[i][0] if i > 0 else 0
        end = spans[j][0] if j < len(spans) else len(text)
        while end > start and text[end - 1].isspace():
            end -= 1
        while start < end and text[start].isspace():
            start += 1
        if end > start:
            pieces.append((start, end, j - i))
        i = j
    return pieces


#: One user-perceived character: an extended grapheme cluster (UAX #29, as the ``regex`` module's ``\X``).
_GRAPHEME = regex.compile(r"\X")


def _grapheme_cut(text: str, spans: list[tuple[int, int]], i: int, j: int) -> int:
    """The last cut ``k`` in ``(i, j]`` whose token starts a grapheme cluster; ``j`` when none does
    (a whole window inside one cluster) or ``j`` ends the text. A word piece may start inside a
    cluster — a Thai vowel sign (Thai is written without spaces between words), a syllable of
    decomposed Hangul, an emoji's skin tone or joined person — and a cut there left a mark at the
    head of the next chunk, cut from its letter. Clusters are found from the piece's start (a cut,
    so a boundary) to the cut: a cluster that runs past the cut is still seen to."""
    if j >= len(spans):
        return j
    lo, hi = spans[i][0], spans[j][0]
    starts = {m.start() for m in _GRAPHEME.finditer(text, lo, hi + 1)}
    return next((k for k in range(j, i, -1) if spans[k][0] in starts), j)


#: Characters of unit text tokenized at once by :func:`pack_fine_chunks`. The tokenizer's output
#: is Python lists, ~250 bytes a word piece with the counted copy: a 55 MB text file held 4.4 GB
#: when the whole document was tokenized at once (hostile trial 11b); now a batch at a time.
TOKENIZE_BATCH_CHARS = 1 << 20


def _counted_spans_of(units: Sequence[ChunkInputUnit], token_spans: TokenSpans) -> Iterator[list[tuple[int, int]]]:
    """:func:`counted_spans` of each unit's text, in order, tokenizing runs of units of at most
    :data:`TOKENIZE_BATCH_CHARS` characters (or one longer unit) as they are reached, so the word
    pieces held at once are bounded by the batch, not the document. A text's word pieces do not
    depend on the texts tokenized with it, so the spans are those of one call over every text."""
    limit = TOKENIZE_BATCH_CHARS
    start = 0
    while start < len(units):
        end, size = start, 0
        while end < len(units) and (end == start or size + len(units[end].text) <= limit):
            size += len(units[end].text)
            end += 1
        batch = units[start:end]
        for unit, spans in zip(batch, token_spans([u.text for u in batch])):
            yield counted_spans(unit.text, spans)
        start = end


def pack_fine_chunks(
    units: Sequence[ChunkInputUnit], token_spans: TokenSpans, max_tokens: int
) -> list[FineChunk]:
    """Pack ``units`` (reading order) into fine chunks of at most ``max_tokens`` word pieces.

    Parameters
    ----------
    units : sequence of ChunkInputUnit
        Non-empty texts in reading order.
    token_spans : callable
        ``texts -> [[(start_char, end_char), ...] per text]``, the embedder's
        tokenizer without special tokens (Unicode scalar offsets).
    max_tokens : int
        Cap on the summed count of a chunk's fragments' tokens (:func:`counted_spans`).

    Returns
    -------
    list of FineChunk, in reading order, ``ordinal`` 0..n-1, each with ``token_count <=
    max_tokens`` (so fewer than ``2 * MAX_TOKEN_CHARS * max_tokens`` characters) and fragments
    that reproduce its text exactly.
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be positive")
    chunks: list[FineChunk] = []
    open_frags: list[Fragment] = []
    open_texts: list[str] = []
    open_tokens = 0
    open_section: tuple[str, ...] = ()
    open_place: int | None = None  # the page or slide the open chunk's last unit ends on
    open_only_headings = False

    def flush() -> None:
        nonlocal open_frags, open_texts, open_tokens
        if open_frags:
            chunks.append(
                FineChunk(len(chunks), SEPARATOR.join(open_texts), tuple(open_frags), open_section, open_tokens)
            )
        open_frags, open_texts, open_tokens = [], [], 0

    for unit, spans in zip(units, _counted_spans_of(units, token_spans)):
        n = max(len(spans), 1)
        if open_frags:
            # A heading stays glued to the text under it, whatever section that text reports.
            glue = open_only_headings and unit.kind not in HEADINGS and open_tokens + n <= max_tokens
            moved = unit.place is not None and open_place is not None and unit.place[0] != open_place
            boundary = unit.kind in HEADINGS or unit.section_path != open_section or moved
            if glue:
                open_section = unit.section_path
            elif boundary or open_tokens + n > max_tokens:
                flush()
        if not open_frags:
            open_section = unit.section_path
            open_only_headings = True
        if unit.place is not None:
            open_place = unit.place[1]
        if n <= max_tokens:
            open_frags.append(Fragment(unit.unit_id, 0, len(unit.text)))
            open_texts.append(unit.text)
            open_tokens += n
            open_only_headings = open_only_headings and unit.kind in HEADINGS
            continue
        flush()
        open_section = unit.section_path
        for start, end, count in _split_unit(unit.text, spans, max_tokens):
            open_frags.append(Fragment(unit.unit_id, start, end))
            open_texts.append(unit.text[start:end])
            open_tokens = count
            flush()
    flush()
    return chunks
