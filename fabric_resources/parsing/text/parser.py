"""The plain-text parser: strict encoding detection and paragraph units.

Two pure steps: ``bytes -> str`` (:func:`~fabric_resources.parsing.text.decoding.decode_text`,
strict: a file either decodes exactly or fails with the named reason
``"undecodable"``) and ``str -> units`` (:func:`text_units`); :func:`parse_text`
runs both.

Cleanup is conservative. A unit's text is the source text of its lines with
line endings normalised to ``"\\n"`` and each line's trailing whitespace
removed; markup such as ``<p>`` or Aozora ruby ``《》`` stays as it is, so each
unit's locator maps back onto the decoded file exactly.

All character positions are Unicode scalar offsets (Python ``str`` indices),
end-exclusive; line numbers are 1-based and inclusive.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator, Literal

from fabric_resources.config import TextParserConfig
from fabric_resources.parsing.document import ParsedDocument, ParsedUnit, ParseError, bad_input_net
from fabric_resources.parsing.long_units import split_long_text
from fabric_resources.parsing.text.identity import PARSER_NAME, PARSER_VERSION
from fabric_resources.parsing.text.decoding import bom_encoding_of, decode_text

__all__ = ["decode_text", "parse_text", "text_units", "split_lines", "line_endings"]

LineEndings = Literal["crlf", "lf", "cr", "mixed", "none"]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_INK = re.compile(r"\S")  # not whitespace as str.strip() reads it (both: str.isspace)
# A line end and a blank line after it (or the text's end); a CRLF is one line end.
_BLANK_LINE_AFTER = re.compile(r"(?>\r\n|\r|\n)[^\S\r\n]*+(?:\r\n|\r|\n|\Z)")
# Whitespace before a line end of a run read with "\n" ends (a unit drops it); 2^i source lines.
_TRAILING_SPACE = re.compile(r"[^\S\n]+(?=\n|\Z)")
_LINES = [re.compile(r"(?:[^\r\n]*+(?>\r\n|\r|\n)){%d}" % (1 << i)) for i in range(32)]
# A run of non-blank lines longer than this many max_unit_chars ends at the next line end.
_RUN_CAP_UNITS = 64


# --------------------------------------------------------------------------
# Lines and units


@dataclass(frozen=True, slots=True)
class _Line:
    """One line of the decoded text, without its line ending."""

    number: int  # 1-based
    start: int  # Unicode scalar offset of the line's first char
    content: str

    @property
    def is_blank(self) -> bool:
        return not self.content.strip()


def iter_lines(text: str) -> Iterator[_Line]:
    """The lines of ``text`` as :func:`split_lines` gives them, one at a time."""
    start, number = 0, 0
    for number, match in enumerate(_LINE_BREAK.finditer(text), start=1):
        yield _Line(number, start, text[start : match.start()])
        start = match.end()
    if start < len(text):
        yield _Line(number + 1, start, text[start:])


def split_lines(text: str) -> list[_Line]:
    """Split ``text`` at CRLF, CR and LF (only those end lines).

    A final line ending does not start another line; ``""`` has no lines.
    """
    return list(iter_lines(text))


def _next_line(text: str, pos: int, number: int) -> tuple[_Line, int, int] | None:
    """The first line at or after ``pos`` (the start of line ``number``) that is not blank, and
    where the line after it starts and its number; ``None`` when there is none.

    A blank line sends the walk to the next non-whitespace character, the line breaks before it
    counted in C: a line object per blank line made 50 MB of newlines a 75 s parse.
    """
    size = len(text)
    while pos < size:
        end = _LINE_BREAK.search(text, pos)
        stop = end.start() if end else size
        content = text[pos:stop]
        if content.strip():
            return _Line(number, pos, content), (end.end() if end else size), number + 1
        ink = _INK.search(text, stop)  # past this blank line and every blank one after it
        if ink is None:
            return None
        start = max(text.rfind("\n", pos, ink.start()), text.rfind("\r", pos, ink.start())) + 1
        number += text.count("\n", pos, start) + text.count("\r", pos, start) - text.count("\r\n", pos, start)
        pos = start
    return None


def _run_units(text: str, line: _Line, cap: float) -> tuple[Iterator[list[ParsedUnit]], int, int]:
    """The units of the run of non-blank lines from ``line`` (a list per piece of at most
    :data:`_RUN_CAP_UNITS` x ``cap`` characters), where the line after the run starts, and its
    number, without a line object each (10 million lines of ``a\r``, 20 MB: 22 s as lines; the
    units are those a walk of line objects made: tests/resources/test_parsing_structure_costs.py).
    """
    blank = _BLANK_LINE_AFTER.search(text, line.start)
    end = blank.start() if blank else len(text)
    # The run, each line end one "\n" (str.replace: re.sub held a piece per line, 1.9 GB at 63 MB).
    flat = text[line.start : end].replace("\r\n", "\n").replace("\r", "\n")
    after = _LINE_BREAK.match(text, end)
    return _flat_units(text, line, flat, cap), (after.end() if after else end), line.number + flat.count("\n") + 1


def _flat_units(text: str, line: _Line, flat: str, cap: float) -> Iterator[list[ParsedUnit]]:
    """:func:`_run_units`' units. In ``flat`` an offset counts each line as its characters and one
    line end, as the run's length is counted; a unit drops each line's trailing whitespace, so a
    unit offset is placed by the line it is on, its start in the source found by regular
    expressions of 2^i lines (in C).
    """
    size, start = len(flat), 0
    source, index = line.start, 0  # where line ``index`` of the run starts in the source
    counted, ends = 0, 0  # the line ends in flat[:counted]
    while start < size:
        ink = _INK.search(flat, start).start()
        cut = flat.find("\n", start + _RUN_CAP_UNITS * cap) if start + _RUN_CAP_UNITS * cap < size else -1
        stop = size if cut == -1 else cut  # a run past _RUN_CAP_UNITS x cap ends at a line end
        body = _TRAILING_SPACE.sub("", flat[ink:stop])
        ends += flat.count("\n", counted, ink)
        counted, first = ink, ends  # the unit's first line, in the run
        ink_column = ink - (flat.rfind("\n", 0, ink) + 1)
        cursor = [0, 0, 0]  # a line of the unit, where it starts in body, how far body is counted

        def where(offset: int) -> tuple[int, int]:  # body offset -> (source offset, line number)
            nonlocal source, index
            k = cursor[0] + body.count("\n", cursor[2], offset)
            if k != cursor[0]:
                cursor[:2] = [k, body.rfind("\n", 0, offset) + 1]
            cursor[2] = offset
            left = first + k - index
            for i in range(left.bit_length() - 1, -1, -1):  # skip ``left`` lines of the source
                if left >> i & 1:
                    source = _LINES[i].match(text, source).end()
            index = first + k
            column = offset - cursor[1] + (ink_column if k == 0 else 0)
            return source + column, line.number + index

        spans = split_long_text(body, cap) if len(body) > cap else [(0, len(body))]
        units = []
        for part, (a, b) in enumerate(spans):
            (char_start, line_start), (last_char, line_end) = where(a), where(b - 1)
            locator = {"char_start": char_start, "char_end": last_char + 1, "line_start": line_start,
                       "line_end": line_end}
            attributes = {"part": part, "parts": len(spans)} if len(spans) > 1 else {}
            units.append(ParsedUnit("paragraph", body[a:b], locator, attributes=attributes))
        yield units
        start = stop + 1


def line_endings(text: str) -> LineEndings:
    r"""Which line endings ``text`` uses: one kind, ``"mixed"`` or ``"none"`` (counted in C).

    >>> line_endings("a\r\nb\r\n"), line_endings("a\r\r\n"), line_endings("a"), line_endings("a\n\r")
    ('crlf', 'mixed', 'none', 'mixed')
    """
    crlf = text.count("\r\n")
    counts = {"crlf": crlf, "lf": text.count("\n") - crlf, "cr": text.count("\r") - crlf}
    kinds = [name for name, count in counts.items() if count]
    if not kinds:
        return "none"
    return kinds[0] if len(kinds) == 1 else "mixed"


def text_units(text: str, max_unit_chars: int | None = None, max_units: int | None = None) -> list[ParsedUnit]:
    """Paragraph units in reading order.

    Paragraphs are maximal runs of non-blank lines; a line is blank when it
    holds only whitespace. A unit's text is its lines' (the first without its indentation) less
    each line's trailing whitespace, joined by ``"\n"``; its locator covers exactly that span of
    ``text``. With ``max_unit_chars``, a longer paragraph becomes several units
    (:func:`~fabric_resources.parsing.long_units.split_long_text`, ``part``/``parts``
    attributes), and a run of lines longer than 64 times that ends at a line end. With
    ``max_units``, more units than that raise ``ParseError("cap-units")`` as soon as they are
    made. Markdown has its own parser (:mod:`fabric_resources.parsing.markdown`).
    Blank lines and a run's lines cost no line object each (:func:`_run_units`).
    """
    units: list[ParsedUnit] = []
    cap = max_unit_chars if max_unit_chars is not None else float("inf")
    found = _next_line(text, 0, 1)
    while found is not None:
        pieces, pos, number = _run_units(text, found[0], cap)
        for piece in pieces:
            units.extend(piece)
            if max_units is not None and len(units) > max_units:
                raise ParseError("cap-units", f"more than {max_units} units")
        found = _next_line(text, pos, number)
    return units


# --------------------------------------------------------------------------
# The parser


@bad_input_net
def parse_text(data: bytes, config: TextParserConfig, media_type: str = "text/plain") -> ParsedDocument:
    """Parse a plain-text file into paragraph units.

    Parameters
    ----------
    data : bytes
        The whole file.
    config : TextParserConfig
        ``max_bytes`` caps the input size (bytes).
    media_type : str
        Recorded in the result.

    Returns
    -------
    ParsedDocument
        Units in reading order; zero units for an empty or whitespace-only
        file. Locators are ``{"char_start", "char_end", "line_start",
        "line_end"}``: Unicode scalar offsets (end-exclusive) into the decoded
        text after BOM removal and before line-ending normalisation, and
        1-based inclusive line numbers. ``encoding`` is the codec used;
        ``metadata`` is ``{"line_endings": "crlf"|"lf"|"cr"|"mixed"|"none",
        "bom": bool}``.

    Raises
    ------
    ParseError
        ``"too-large"`` when ``len(data) > config.max_bytes``;
        ``"undecodable"`` as in :func:`decode_text`; ``"cap-units"`` past ``config.max_units``.
    """
    if len(data) > config.max_bytes:
        raise ParseError("too-large", f"{len(data)} bytes > max_bytes {config.max_bytes}")
    text, encoding = decode_text(data)
    return ParsedDocument(
        parser_name=PARSER_NAME,
        parser_version=PARSER_VERSION,
        media_type=media_type,
        units=text_units(text, max_unit_chars=config.max_unit_chars, max_units=config.max_units),
        title=None,
        encoding=encoding,
        metadata={"line_endings": line_endings(text), "bom": bom_encoding_of(data) is not None},
    )
