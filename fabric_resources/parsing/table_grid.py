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

from fabric_resources.parsing.document import ParseError

# HTML's "rules for parsing non-negative integers": optional whitespace and "+", then ASCII
# digits, anything after them ignored ("2px" is 2). Other values ("²", "", "x") leave the span at 1.
_NON_NEGATIVE_INTEGER = re.compile(r"[\t\n\f\r ]*\+?([0-9]+)")

#: HTML's clamps: colspan 1..1000, rowspan 0..65534 (0: to the end of the table here, as HTML
#: extends it to the end of its row group).
MAX_COLSPAN, MAX_ROWSPAN = 1000, 65534

#: Grid slots the tables of one document may cost here (columns a rowspan covers, covered columns a
#: cell is moved past): each is a step of Python. A real table costs a few per spanning cell, a
#: hostile one 10^7 a row; 2^20 take ~0.3 s and 8 MB.
MAX_GRID_SLOTS = 1 << 20

#: Row layout an HTML page's tables may cost: per row, (its cells + 1) x its width in columns
#: (covered ones counted). trafilatura, which reads a page before Fabric does, counts a row's
#: elements for each cell it places and each covered column it fills, so a row costs it about that:
#: ~6.5 ns a slot here (one row of 30,000 cells 4.4 s; 100,000 cells, 500 kB, 65 s in-process).
#: 2^29 is ~3.5 s of it and holds a row as wide as a spreadsheet (16,384 columns, 2.7 x 10^8) or
#: 100,000 rows of 40 cells (1.6 x 10^8).
MAX_LAYOUT_SLOTS = 1 << 29


class GridBudget:
    """What a document's tables may still cost (one per document, shared by its tables): the
    grid slots (:data:`MAX_GRID_SLOTS` when not given), and where ``layout_slots`` is given
    (HTML, for trafilatura: :data:`MAX_LAYOUT_SLOTS`) the row layout.

    >>> budget = GridBudget(5)
    >>> cell_columns([[(3, 2)]], budget), budget.left
    ([[0]], 2)
    >>> cell_columns([[(3, 2)]], budget)
    Traceback (most recent call last):
    ...
    fabric_resources.parsing.document.ParseError: cap-table-grid: tables whose rowspans cover more than 5 grid slots
    >>> cell_columns([[(1, 1)] * 3] * 2, GridBudget(layout_slots=15))
    Traceback (most recent call last):
    ...
    fabric_resources.parsing.document.ParseError: cap-table-grid: table rows whose cells x widths pass 15 slots
    """

    def __init__(self, slots: int | None = None, layout_slots: int | None = None) -> None:
        self.slots = self.left = MAX_GRID_SLOTS if slots is None else slots
        self.layout_slots = self.layout_left = layout_slots

    def spend(self, slots: int) -> None:
        """Take ``slots`` off the grid budget; raises ``ParseError("cap-table-grid")`` past it."""
        self.left -= slots
        if self.left < 0:
            raise ParseError("cap-table-grid", f"tables whose rowspans cover more than {self.slots} grid slots")

    def lay_out(self, cells: int, width: int) -> None:
        """Take a row of ``cells`` cells and ``width`` columns off the layout budget, if any;
        raises ``ParseError("cap-table-grid")`` past it."""
        if self.layout_left is not None:
            self.layout_left -= (cells + 1) * width
            if self.layout_left < 0:
                raise ParseError("cap-table-grid", f"table rows whose cells x widths pass {self.layout_slots} slots")


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


def cell_columns(rows: Iterable[Sequence[tuple[int, int]]], budget: GridBudget | None = None) -> list[list[int]]:
    """For each row, given each cell's ``(colspan, rowspan)`` in order, the grid column each cell
    starts in (0-based): a cell takes the first column from where the row's previous cell ended
    that no cell of an earlier row still covers.

    ``budget`` (a fresh :class:`GridBudget` when not given) pays for each column a ``rowspan``
    cell covers and each covered column a cell is moved past; a cell without ``rowspan`` costs
    nothing; and each row its layout (:meth:`GridBudget.lay_out`). Raises
    ``ParseError("cap-table-grid")`` when the budget runs out.

    >>> cell_columns([[(1, 2), (2, 1)], [(1, 1), (1, 1)]])
    [[0, 1], [1, 2]]
    >>> cell_columns([[(1, 1), (1, 3), (1, 1)], [(1, 1), (1, 1)], [(1, 1)]])
    [[0, 1, 2], [0, 2], [0]]
    """
    budget = GridBudget() if budget is None else budget
    last_row: list[int] = []  # column -> the last row an earlier row's cell covers it in (-1: none)
    out = []
    for r, cells in enumerate(rows):
        starts = []
        col = 0
        for span, down in cells:
            start = col
            while col < len(last_row) and last_row[col] >= r:
                col += 1
            starts.append(col)
            cost = col - start
            if down > 1:  # no per-row bookkeeping: a hostile rowspan costs its columns once
                end = col + span
                if end > len(last_row):
                    last_row.extend([-1] * (end - len(last_row)))
                last_row[col:end] = [r + down - 1] * span
                cost += span
            if cost:
                budget.spend(cost)
            col += span
        budget.lay_out(len(starts), max(col, len(last_row)))
        out.append(starts)
    return out
