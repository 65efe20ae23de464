"""Step 3 of the PDF parser: which blocks are headings, and the section path of every block.

From the PDF outline (bookmarks) when the file has one: each entry's title is
matched to a block on its destination page (the heading itself), else its
section starts at the first block at or below the destination. Without an
outline, headings come from font size: short blocks set clearly larger than
the body text.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from fabric_resources.parsing.pdf.layout import Block

_NON_WORD = re.compile(r"\W+")
#: A heading's font is at least this much larger than the body's (ratio of sizes in points).
HEADING_SIZE_RATIO = 1.15
_MAX_HEADING_CHARS = 150


@dataclass(frozen=True)
class OutlineEntry:
    """One bookmark: 1-based level, title, 0-based page index, destination y (points) or None."""

    level: int
    title: str
    page_index: int
    y: float | None


@dataclass(frozen=True)
class PlacedBlock:
    """A block with its 0-based page index, in reading order over the whole document."""

    page_index: int
    block: Block


def _norm(text: str) -> str:
    return _NON_WORD.sub("", text.casefold())


def sections_from_outline(
    placed: list[PlacedBlock], entries: list[OutlineEntry]
) -> tuple[dict[int, int], dict[int, list[tuple[int, str]]]]:
    """Headings and section starts from the outline.

    Returns
    -------
    headings : dict[int, int]
        Block index -> heading level, for blocks that are an entry's title.
    starts : dict[int, list[tuple[int, str]]]
        Block index -> the (level, title) entries whose sections begin at that block.
    """
    by_page: dict[int, list[int]] = {}
    for index, pb in enumerate(placed):
        by_page.setdefault(pb.page_index, []).append(index)
    headings: dict[int, int] = {}
    starts: dict[int, list[tuple[int, str]]] = {}
    for entry in entries:
        candidates = by_page.get(entry.page_index, [])
        if not candidates:
            continue
        title = _norm(entry.title)
        match = None
        if title:
            matching = [i for i in candidates if title in _norm(placed[i].block.text)[: len(title) + 12]]
            if matching:
                match = min(matching, key=lambda i: abs((entry.y or placed[i].block.bbox[3]) - placed[i].block.bbox[3]))
        if match is not None and len(placed[match].block.text) <= _MAX_HEADING_CHARS:
            headings.setdefault(match, entry.level)
            start = match
        elif match is not None:
            start = match
        else:
            below = [i for i in candidates if entry.y is None or placed[i].block.bbox[3] <= entry.y + 2]
            start = below[0] if below else candidates[-1]
        starts.setdefault(start, []).append((entry.level, entry.title.strip()))
    return headings, starts


def sections_from_fonts(placed: list[PlacedBlock]) -> tuple[dict[int, int], dict[int, list[tuple[int, str]]]]:
    """Headings by font size, when there is no outline (same shapes as :func:`sections_from_outline`).

    The body size is the size carrying the most characters (rounded to 0.5 pt). A block of at most
    three lines and ``_MAX_HEADING_CHARS`` characters that starts with a letter or digit, does not
    end in a full stop and is set at least ``HEADING_SIZE_RATIO`` x the body size is a heading,
    unless it is one of a run of three or more such blocks of one size (an author list); levels rank the distinct heading sizes,
    largest first (at most 6).
    """
    weights: Counter[float] = Counter()
    for pb in placed:
        weights[round(pb.block.font_size * 2) / 2] += len(pb.block.text)
    if not weights:
        return {}, {}
    body = weights.most_common(1)[0][0]
    candidates = {}
    for index, pb in enumerate(placed):
        text = pb.block.text
        size = round(pb.block.font_size * 2) / 2
        if (size >= body * HEADING_SIZE_RATIO and len(pb.block.lines) <= 3 and len(text) <= _MAX_HEADING_CHARS
                and not text.endswith(".") and text[0].isalnum()):
            candidates[index] = size
    # A run of three or more same-size candidates (an author list, a table set large) is no heading.
    ordered = sorted(candidates)
    runs: list[list[int]] = []
    for index in ordered:
        if runs and runs[-1][-1] == index - 1 and candidates[runs[-1][-1]] == candidates[index]:
            runs[-1].append(index)
        else:
            runs.append([index])
    for run in runs:
        if len(run) >= 3:
            for index in run:
                del candidates[index]
    ranks = {size: rank for rank, size in enumerate(sorted(set(candidates.values()), reverse=True), start=1)}
    headings = {i: min(ranks[s], 6) for i, s in candidates.items()}
    starts = {i: [(level, placed[i].block.text)] for i, level in headings.items()}
    return headings, starts


_DIGITS = re.compile(r"\d+")
#: How many blocks at the top and at the foot of a page (in reading order) may be running heads.
_EDGE_BLOCKS = 2


def running_heads(placed: list[PlacedBlock]) -> set[int]:
    """Indices of the blocks that are page furniture: running heads and feet, page numbers.

    A block is one when it is among the first or last ``_EDGE_BLOCKS`` blocks of its page, holds at
    most ``_MAX_HEADING_CHARS`` characters, and a block of the same text at the same edge is on
    another page. Texts are compared case-folded, spaces collapsed and every run of digits read as
    one digit, so ``Page 3 of 12`` repeats ``Page 4 of 12``. Such blocks keep their text (a reader
    sees them); the parser only never lets a sentence carry on into or across one.

    >>> from fabric_resources.parsing.pdf.layout import Block, Line
    >>> def pb(page, text): return PlacedBlock(page, Block([Line(text, 0, len(text), (0, 0, 1, 1), 10.0)]))
    >>> sorted(running_heads([pb(0, "Annual review"), pb(0, "The board met"), pb(0, "1"),
    ...                       pb(1, "Annual review"), pb(1, "and decided"), pb(1, "2")]))
    [0, 2, 3, 5]
    """
    by_page: dict[int, list[int]] = {}
    for index, pb in enumerate(placed):
        by_page.setdefault(pb.page_index, []).append(index)
    seen: dict[tuple[str, str], set[int]] = {}
    edges: list[tuple[int, tuple[str, str]]] = []
    for page, indices in by_page.items():
        for edge, chosen in (("head", indices[:_EDGE_BLOCKS]), ("foot", indices[-_EDGE_BLOCKS:])):
            for index in chosen:
                text = placed[index].block.text
                if len(text) > _MAX_HEADING_CHARS:
                    continue
                key = (edge, _DIGITS.sub("0", " ".join(text.casefold().split())))
                seen.setdefault(key, set()).add(page)
                edges.append((index, key))
    return {index for index, key in edges if len(seen[key]) >= 2}


def section_paths(count: int, starts: dict[int, list[tuple[int, str]]]) -> list[tuple[str, ...]]:
    """The section path of each of ``count`` blocks: a section at level n closes those at >= n.
    A block where sections start is inside them (the parser drops a heading's own title)."""
    stack: list[tuple[int, str]] = []
    out = []
    for index in range(count):
        for level, title in starts.get(index, []):
            stack = [(lvl, t) for lvl, t in stack if lvl < level] + [(level, title)]
        out.append(tuple(t for _, t in stack))
    return out
