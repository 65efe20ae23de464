"""What a document's structure may cost the HTML and EPUB parsers (hostile trial 15c): a table's
grid (``fabric_resources/parsing/table_grid.py``: hostile spans and rows fail ``cap-table-grid``
fast, before trafilatura reads the page, and real tables are placed as before) and a start tag's
attributes (``lxml_limits.py``: ``cap-parser-limit`` before libxml2 reads the page)."""

from __future__ import annotations

import bisect
import random
import re
import time
from dataclasses import replace

import pytest

from fabric_resources.config import HtmlParserConfig, IsolationConfig
from fabric_resources.parsing import table_grid
from fabric_resources.parsing.document import ParsedUnit, ParseError
from fabric_resources.parsing.long_units import split_long_text
from fabric_resources.parsing.epub.parser import parse_epub
from fabric_resources.parsing.html import parser as html_parser
from fabric_resources.parsing.table_grid import cell_columns

from test_parsing_epub import CONFIG as EPUB, build_epub, xhtml

HTML = HtmlParserConfig(isolation=IsolationConfig(mode="in-process"))
INTRO = "<p>" + "A paragraph long enough to be the main text of this page. " * 3 + "</p>"


def _page(tables: str) -> bytes:
    return f"<html><body>{INTRO}{tables}</body></html>".encode()


def _reference_columns(rows):
    """The grid placement as stop 47 wrote it (a dict of covered columns), to compare with."""
    last_row: dict[int, int] = {}
    out = []
    for r, cells in enumerate(rows):
        starts, col = [], 0
        for span, down in cells:
            while last_row.get(col, -1) >= r:
                col += 1
            starts.append(col)
            if down > 1:
                for c in range(col, col + span):
                    last_row[c] = r + down - 1
            col += span
        out.append(starts)
    return out


def test_cells_are_placed_as_the_reference_places_them() -> None:
    """guards against: the budgeted placement moving a cell of a real table (seeded tables of
    random spans, overlapping ones included, against the placement before the budget)."""
    rng = random.Random(15)
    for _ in range(2_000):
        rows = [[(rng.choice((1, 1, 1, 2, 3)), rng.choice((1, 1, 1, 2, 3, 65534)))
                 for _ in range(rng.randrange(0, 6))] for _ in range(rng.randrange(1, 8))]
        assert cell_columns(rows) == _reference_columns(rows), rows


def test_rowspans_covering_too_many_slots_fail_before_trafilatura_reads_the_page(monkeypatch) -> None:
    """guards against: one row of cells ``colspan=1000 rowspan=2`` (10,000 of them, 400 kB: over
    120 s in-process, trafilatura padding each row and counting it for every cell, then 10^7
    dictionary writes and 650 MB here) parsed for minutes; now 1,100 of them fail ``cap-table-grid``
    in well under a second, and trafilatura never sees the page."""
    read = []
    monkeypatch.setattr(html_parser, "main_text", lambda text: read.append(text))
    page = _page("<table><tr>" + '<td colspan="1000" rowspan="2">c</td>' * 1_100 + "</tr><tr><td>x</td></tr></table>")
    started = time.monotonic()
    with pytest.raises(ParseError) as caught:
        html_parser.parse_html(page, HTML)
    assert caught.value.reason == "cap-table-grid" and "rowspans" in caught.value.detail
    assert time.monotonic() - started < 5 and read == []


def test_a_row_of_very_many_cells_fails_on_its_layout_and_a_long_table_does_not(monkeypatch) -> None:
    """guards against: trafilatura's table layout, quadratic in a row's cells (one row of 100,000
    plain ``<td>x``, 500 kB: 65 s in-process; 10,000 cells ``colspan=100``: 44 s), run unbounded;
    and empty rows under a wide ``rowspan`` costing nothing though trafilatura fills each."""
    monkeypatch.setattr(html_parser, "main_text", lambda text: None)
    started = time.monotonic()
    with pytest.raises(ParseError) as caught:
        html_parser.parse_html(_page("<table><tr>" + "<td>x" * 25_000 + "</table>"), HTML)
    assert caught.value.reason == "cap-table-grid" and time.monotonic() - started < 5
    monkeypatch.setattr(table_grid, "MAX_LAYOUT_SLOTS", 10_000)
    long_table = "<table>" + "<tr><td>a<td>b<td>c<td>d" * 400 + "</table>"  # 400 x (4 + 1) x 4 = 8,000
    assert len([u for u in html_parser.parse_html(_page(long_table), HTML).units if u.kind == "table_cell"]) == 1_600
    with pytest.raises(ParseError, match="cap-table-grid"):
        html_parser.parse_html(_page(long_table + "<table><tr>" + "<td>x" * 50 + "</table>"), HTML)
    covered = "<table><tr><td colspan=1000 rowspan=0>wide</td></tr>{}</table>"  # 2 x 1000, then 1000 a row
    html_parser.parse_html(_page(covered.format("<tr></tr>" * 7)), HTML)
    with pytest.raises(ParseError, match="cap-table-grid"):
        html_parser.parse_html(_page(covered.format("<tr></tr>" * 9)), HTML)


def test_a_pages_tables_share_one_budget_and_a_books_chapters_do_too(monkeypatch) -> None:
    """guards against: a budget per table (or per chapter), which a page of many tables each just
    under it multiplies without bound."""
    monkeypatch.setattr(table_grid, "MAX_GRID_SLOTS", 150)  # the table: 60 covered, 60 moved past
    monkeypatch.setattr(html_parser, "main_text", lambda text: None)
    table = "<table><tr><td colspan=60 rowspan=2>a</td><td>b</td></tr><tr><td>c</td></tr></table>"
    cols = {u.text: u.attributes["col"] for u in html_parser.parse_html(_page(table), HTML).units
            if u.kind == "table_cell"}
    assert cols == {"a": 0, "b": 60, "c": 60}
    with pytest.raises(ParseError, match="cap-table-grid"):
        html_parser.parse_html(_page(table * 2), HTML)
    assert len(parse_epub(build_epub({"a.xhtml": xhtml(table)}), EPUB).units) == 3
    with pytest.raises(ParseError, match="cap-table-grid"):
        parse_epub(build_epub({"a.xhtml": xhtml(table), "b.xhtml": xhtml(table)}), EPUB)


def test_a_start_tag_of_very_many_attributes_is_refused_before_libxml2_reads_it(monkeypatch) -> None:
    """guards against: libxml2's HTML parser, which compares each attribute of a tag with every
    earlier one (one ``<p>`` of 100,000 attributes, an 890 kB page: over 90 s in-process, nothing
    able to stop it), reading such a page or a malformed EPUB chapter (read by lxml.html); a long
    script or a tag of a few attributes is no such tag."""
    from fabric_resources.parsing import lxml_limits

    monkeypatch.setattr(lxml_limits, "MAX_TAG_ATTRIBUTES", 500)
    flood = "<p " + " ".join(f"a{i}=1" for i in range(600)) + ">flooded</p>"
    with pytest.raises(ParseError) as caught:
        html_parser.parse_html(_page(flood), HTML)
    assert caught.value.reason == "cap-parser-limit" and "attributes" in caught.value.detail
    with pytest.raises(ParseError, match="cap-parser-limit"):
        parse_epub(build_epub({"a.xhtml": xhtml(f"<p>unclosed {flood}<br>")}), EPUB)
    fine = "<script>" + "var x = [" + "1, " * 5_000 + "];</script><p a='>' b=\"x y\" " + "c " * 400 + ">kept</p>"
    monkeypatch.setattr(html_parser, "main_text", lambda text: None)
    assert "kept" in [u.text for u in html_parser.parse_html(_page(fine), HTML).units]
    monkeypatch.setattr(lxml_limits, "MAX_TAG_ATTRIBUTES", 10_000)
    started = time.monotonic()
    with pytest.raises(ParseError, match="cap-parser-limit"):
        html_parser.parse_html(_page("<p " + " ".join(f"a{i}=1" for i in range(60_000)) + ">x</p>"), HTML)
    assert time.monotonic() - started < 5


def _reference_paragraph(lines, section_path: tuple[str, ...] = ()):
    """One paragraph unit from consecutive non-blank lines.

    The text runs from the first non-whitespace character to the last
    character kept; each line loses its trailing whitespace and the lines are
    joined with ``"\\n"``. The locator's ``char_start``/``char_end`` (Unicode
    scalars, end-exclusive) cover exactly that span of the decoded text.
    """
    first, last = lines[0], lines[-1]
    kept = [line.content.rstrip() for line in lines]
    leading = len(kept[0]) - len(kept[0].lstrip())
    kept[0] = kept[0][leading:]
    return ParsedUnit(
        kind="paragraph",
        text="\n".join(kept),
        locator={
            "char_start": first.start + leading,
            "char_end": last.start + len(last.content.rstrip()),
            "line_start": first.number,
            "line_end": last.number,
        },
        section_path=section_path,
    )


def _reference_split(unit: ParsedUnit, lines, max_chars: int):
    """``unit`` (built from ``lines`` by :func:`_reference_paragraph`) as
    pieces of at most ``max_chars`` characters (:func:`~fabric_resources.parsing.long_units.split_long_text`).

    Each piece is a unit whose locator covers exactly its own span of the decoded text, with
    ``part``/``parts`` attributes; a unit within the cap is returned alone and unchanged.
    """
    if len(unit.text) <= max_chars:
        return [unit]
    # Where each kept line starts, in the unit's text and in the decoded text.
    unit_starts, decoded_starts, position = [], [], 0
    for index, line in enumerate(lines):
        skipped = unit.locator["char_start"] - line.start if index == 0 else 0  # indentation
        unit_starts.append(position)
        decoded_starts.append(line.start + skipped)
        position += len(line.content.rstrip()) - skipped + 1  # + the "\n" joining kept lines

    def where(offset: int) -> tuple[int, int]:
        j = bisect.bisect_right(unit_starts, offset) - 1
        return decoded_starts[j] + offset - unit_starts[j], lines[j].number

    spans = split_long_text(unit.text, max_chars)
    pieces = []
    for part, (start, end) in enumerate(spans):
        (char_start, line_start), (last_char, line_end) = where(start), where(end - 1)
        attributes = {**unit.attributes, "part": part, "parts": len(spans)}
        pieces.append(replace(
            unit, text=unit.text[start:end], attributes=attributes,
            locator={"char_start": char_start, "char_end": last_char + 1, "line_start": line_start,
                     "line_end": line_end},
        ))
    return pieces


def _reference_text_units(text: str, cap: int, max_units: int | None = None):
    """Plain text's units as stop 47 made them (a line object per line, blank ones too)."""
    from fabric_resources.parsing.text.parser import _RUN_CAP_UNITS, iter_lines

    units, run, chars = [], [], 0
    for line in list(iter_lines(text)) + [None]:
        if line is None or line.is_blank or chars > _RUN_CAP_UNITS * cap:
            if run:
                units.extend(_reference_split(_reference_paragraph(run), run, cap))
            run, chars = [], 0
        if line is not None and not line.is_blank:
            run.append(line)
            chars += len(line.content) + 1
    return units


def test_blank_lines_and_plain_runs_cost_no_line_objects_and_units_are_as_before() -> None:
    """guards against: a line object made per blank line (50 MB of newlines: 75 s in-process, no
    child, nothing able to stop it) or per line of a run (20 MB of ``a\\r``: 22 s); and the walks
    that skip them moving a unit, a locator or a line number (seeded texts of every line ending,
    Unicode spaces and separators, indentation; runs cut at the cap and split)."""
    from fabric_resources.parsing.text.parser import _RUN_CAP_UNITS, line_endings, text_units

    started = time.monotonic()
    assert text_units("\n" * 5_000_000 + "  last\r\n" + "\r\n \t\u3000\r" * 500_000) != []
    assert len(text_units("a\r" * 2_000_000, 16_384)) == 248 and len(text_units("a\r\n" * 1_000_000, 16_384)) == 124
    assert len(text_units("a \n" * 1_000_000 + "b\r\nc \r" * 500_000, 16_384)) == 247
    assert time.monotonic() - started < 4  # 6.6 s, 5 s, 2.4 s and 5.6 s before
    started = time.monotonic()
    assert len(text_units("word " * 4_000_000, 16_384)) == 1_221  # one line of 20 MB
    assert time.monotonic() - started < 4  # 1.5 s before; 7.5 s counting each piece's line from the start
    rng = random.Random(47)
    pieces = ["a", "word ", " ", "\t", "\n", "\r", "\r\n", "\u3000", "\x1c", "\u2028", "\xa0", "\x0b", "é"]
    for _ in range(3_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 60)))
        assert text_units(text, 256) == _reference_text_units(text, 256), repr(text)
    plain = ["a", "word", " ", "\n", "\r", "é", "x y", "\n\n", "\n \r"]
    crlf = ["a", "word", " ", "\r\n", "é", "x y", "\r\n\r\n", "\r\n \r\n", "\r\n\u3000\r\n"]
    for size, pieces in [(5_000, plain), (5_000, crlf)] * 10 + [(60, plain), (60, crlf)] * 1_000:
        text = "".join(rng.choice(pieces) for _ in range(size))  # runs past _RUN_CAP_UNITS x 256, cut at a line end
        assert text_units(text, 256) == _reference_text_units(text, 256), repr(text[:200])
    for long_run in ("ab\ncd \r\n" * 5_000, "ab\rcd\n" * 5_000, "x" * 40_000 + "\ny" * 9_000,
                     " a\u3000\r\n\x0bb\t\r" * 4_000, ("word " * 3_000 + "\r\n") * 8):
        assert len(long_run) > _RUN_CAP_UNITS * 256
        assert text_units(long_run, 256) == _reference_text_units(long_run, 256)
        assert text_units(long_run) == _reference_text_units(long_run, float("inf"))
    for text in ("", "a", "a\r\n", "a\r\r\n", "a\n\r", "\r", "a\nb\n"):
        kinds = {"\r\n": "crlf", "\r": "cr", "\n": "lf"}
        found = {kinds[m.group()] for m in re.finditer(r"\r\n|\r|\n", text)}
        assert line_endings(text) == ("none" if not found else found.pop() if len(found) == 1 else "mixed")
