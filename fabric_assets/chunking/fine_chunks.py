"""Fine chunks: pack canonical units in reading order under a token cap.

Pure functions, no I/O. A chunk is a run of whole units (joined by
:data:`SEPARATOR`) or one piece of a unit too long for the cap. Each chunk
keeps *fragments* ``(unit_id, start_char, end_char)`` in Unicode scalars such
that::

    chunk.text == SEPARATOR.join(unit_text[unit_id][s:e] for unit_id, s, e in chunk.fragments)

A heading, or a change of section path, starts a new chunk so a chunk never
spans two sections; the heading travels with the text under it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fabric_resources.schema import FRAGMENT_SEPARATOR

SEPARATOR = FRAGMENT_SEPARATOR
_SENTENCE_END = frozenset(".!?。！？；;」』")


@dataclass(frozen=True)
class ChunkInputUnit:
    unit_id: str
    kind: str
    text: str
    section_path: tuple[str, ...]


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


def _split_unit(text: str, spans: list[tuple[int, int]], max_tokens: int) -> list[tuple[int, int, int]]:
    """Split one long text into ``(start_char, end_char, n_tokens)`` pieces of ≤ ``max_tokens``.

    Prefers to cut after a sentence end in the second half of a window; pieces
    are trimmed of surrounding whitespace and never empty.
    """
    pieces: list[tuple[int, int, int]] = []
    i = 0
    while i < len(spans):
        j = min(i + max_tokens, len(spans))
        if j < len(spans):
            for k in range(j - 1, i + max_tokens // 2 - 1, -1):
                end = spans[k][1]
                if end > 0 and text[end - 1] in _SENTENCE_END:
                    j = k + 1
                    break
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
        Cap on the summed word-piece count of a chunk's fragments.

    Returns
    -------
    list of FineChunk, in reading order, ``ordinal`` 0..n-1.
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be positive")
    all_spans = token_spans([u.text for u in units]) if units else []
    chunks: list[FineChunk] = []
    open_frags: list[Fragment] = []
    open_texts: list[str] = []
    open_tokens = 0
    open_section: tuple[str, ...] = ()
    open_only_headings = False

    def flush() -> None:
        nonlocal open_frags, open_texts, open_tokens
        if open_frags:
            chunks.append(
                FineChunk(len(chunks), SEPARATOR.join(open_texts), tuple(open_frags), open_section, open_tokens)
            )
        open_frags, open_texts, open_tokens = [], [], 0

    for unit, spans in zip(units, all_spans):
        n = max(len(spans), 1)
        if open_frags:
            # A heading stays glued to the text under it, whatever section that text reports.
            glue = open_only_headings and unit.kind != "heading" and open_tokens + n <= max_tokens
            boundary = unit.kind == "heading" or unit.section_path != open_section
            if glue:
                open_section = unit.section_path
            elif boundary or open_tokens + n > max_tokens:
                flush()
        if not open_frags:
            open_section = unit.section_path
            open_only_headings = True
        if n <= max_tokens:
            open_frags.append(Fragment(unit.unit_id, 0, len(unit.text)))
            open_texts.append(unit.text)
            open_tokens += n
            open_only_headings = open_only_headings and unit.kind == "heading"
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
