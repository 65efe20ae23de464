"""Pieces of a paragraph too long to be one unit: cut at sentence, then word, then character boundaries.

A parser emits a source paragraph longer than its ``max_unit_chars`` as several
units, one per piece, so no unit (and nothing that shows a unit) grows with the
input: a 20 MB file on one line becomes bounded units instead of one unit of
twenty million characters. Pure; all positions are Unicode scalar offsets
(Python ``str`` indices), end-exclusive.
"""

from __future__ import annotations

import re
import unicodedata

# A sentence ends after . ! ? … (and any closing quotes or brackets) before whitespace, after a
# CJK full stop / exclamation / question mark (no space follows those), or at a line break.
_SENTENCE_END = re.compile(r"[.!?…](?:[\"'”’»」』)\]]*)(?=\s)|[。！？．]|\n")
_SPACE = re.compile(r"\s+")
# Marks that attach to the character before them: a cut before one would split a grapheme.
_ATTACHING = frozenset({"Mn", "Mc", "Me"})


def split_long_text(text: str, max_chars: int) -> list[tuple[int, int]]:
    """Cut ``text`` into pieces of at most ``max_chars`` characters.

    Each cut falls, in this order of preference, after the last sentence end, at the last
    whitespace, or at the last character boundary (never before a combining mark, unless a
    whole window is marks) within the piece's second half, so no piece is shorter than half
    the cap unless it is the last one. Whitespace at a cut belongs to no piece.

    Parameters
    ----------
    text : str
        Any text; whitespace-only or empty text has no pieces.
    max_chars : int
        The cap, in Unicode scalars; at least 2.

    Returns
    -------
    list of (start, end)
        In order, non-overlapping, each ``0 < end - start <= max_chars``, neither end on
        whitespace; the text between two pieces (and before the first, after the last) is
        whitespace only. A text within the cap (after trimming) is one piece.

    Raises
    ------
    ValueError
        If ``max_chars < 2``.

    >>> text = "One. Two three four. Five"
    >>> [text[s:e] for s, e in split_long_text(text, 12)]
    ['One. Two', 'three four.', 'Five']
    >>> text = "abcdefghij"
    >>> [text[s:e] for s, e in split_long_text(text, 4)]
    ['abcd', 'efgh', 'ij']
    """
    if max_chars < 2:
        raise ValueError("max_chars must be at least 2")
    pieces: list[tuple[int, int]] = []
    n = len(text)
    i = 0
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return pieces
        end = n
        if n - i > max_chars:
            end = _cut(text, i, i + max_chars, i + max_chars // 2)
        cut = end
        while end > i and text[end - 1].isspace():
            end -= 1
        pieces.append((i, end))
        i = cut


def _cut(text: str, start: int, limit: int, floor: int) -> int:
    """Where the piece starting at ``start`` ends: a boundary in ``(floor, limit]``."""
    last = None
    for match in _SENTENCE_END.finditer(text, floor, limit):
        last = match.end()
    if last is not None and last > floor:
        return last
    for match in _SPACE.finditer(text, floor + 1, limit + 1):
        last = match.start()
    if last is not None and last > start:
        return last
    cut = limit
    while cut > floor and unicodedata.category(text[cut]) in _ATTACHING:
        cut -= 1
    return cut if cut > floor else limit
