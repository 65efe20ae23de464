"""The column a table cell starts in, as HTML's table model places it (pure).

A cell's ``col`` in Fabric's locators names a column of the table's grid, not the cell's position
in its row: a cell after one with ``colspan="2"`` starts two columns on, and a cell in a row under
one with ``rowspan="2"`` skips the column the cell above still covers (HTML Standard, "Forming a
table": the slots a cell covers, and the "ascending" of ``rowspan`` into later rows). The HTML and
EPUB parsers share this, so the same markup gets the same coordinates in both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

# HTML's "rules for parsing non-negative integers": optional whitespace and "+", then ASCII
# digits, anything after them ignored ("2px" is 2). Other values ("²", "", "x") leave the span at 1.
_NON_NEGATIVE_INTEGER = re.compile(r"[\t\n\f\r ]*\+?([0-9]+)")

#: HTML's clamps: colspan 1..1000, rowspan 0..65534 (0: to the end of the table here, as HTML
#: extends it to the end of its row group).
MAX_COLSPAN, MAX_ROWSPAN = 1000, 65534


def _integer(value: str | None, clamp: int) -> int | None:
    match = _NON_NEGATIVE_INTEGER.match(value or "")
    if match is None:
        return None
    digits = match.group(1).lstrip("0")
    # Past 5 digits it is over either clamp; int() refuses more than 4,300 digits.
    return min(int(digits or "0"), clamp) if len(digits) <= 5 else clamp


def column_span(value: str | None) -> int:
    """The columns a cell spans by its ``colspan`` value, as HTML parses it; 1 when invalid.

    A bad value is an error of that one cell's markup, not of the document.

    >>> column_span("2"), column_span(" 3px"), column_span("²"), column_span(None), column_span("0"), column_span("99999")
    (2, 3, 1, 1, 1, 1000)
    >>> column_span("0002"), column_span("9" * 5000)
    (2, 1000)
    """
    n = _integer(value, MAX_COLSPAN)
    return 1 if n is None else max(n, 1)


def row_span(value: str | None) -> int:
    """The rows a cell spans by its ``rowspan`` value (1 when absent or invalid; 0 reads as
    :data:`MAX_ROWSPAN`, every row after it).

    >>> row_span("3"), row_span(None), row_span("x"), row_span("0"), row_span("70000")
    (3, 1, 1, 65534, 65534)
    """
    n = _integer(value, MAX_ROWSPAN)
    return 1 if n is None else (MAX_ROWSPAN if n == 0 else n)


def cell_columns(rows: Iterable[Sequence[tuple[int, int]]]) -> list[list[int]]:
    """For each row, given each cell's ``(colspan, rowspan)`` in order, the grid column each cell
    starts in (0-based): a cell takes the first column from where the row's previous cell ended
    that no cell of an earlier row still covers.

    >>> cell_columns([[(1, 2), (2, 1)], [(1, 1), (1, 1)]])
    [[0, 1], [1, 2]]
    >>> cell_columns([[(1, 1), (1, 3), (1, 1)], [(1, 1), (1, 1)], [(1, 1)]])
    [[0, 1, 2], [0, 2], [0]]
    """
    last_row: dict[int, int] = {}  # column -> the last row an earlier row's cell covers it in
    out = []
    for r, cells in enumerate(rows):
        starts = []
        col = 0
        for span, down in cells:
            while last_row.get(col, -1) >= r:
                col += 1
            starts.append(col)
            if down > 1:  # no per-row bookkeeping: a hostile rowspan costs its columns once
                for c in range(col, col + span):
                    last_row[c] = r + down - 1
            col += span
        out.append(starts)
    return out
