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

import bisect
import re
from dataclasses import dataclass, replace
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
# Whitespace before a line end (the unit text drops it); a CR or LF that is no part of a CRLF.
_SPACE_BEFORE_END = re.compile(r"[^\S\r\n](?:[\r\n]|\Z)")
_LONE_BREAK = re.compile(r"\r(?!\n)|(?<!\r)\n")
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


def _plain_block(text: str, line: _Line) -> tuple[int, bool] | None:
    """Where the run of non-blank lines from ``line`` ends (the end of its last line's text) and
    whether its lines end in CRLF, when each of its lines reads as written: no whitespace before a
    line end, and CRLF ends all of its lines or none; else ``None``."""
    blank = _BLANK_LINE_AFTER.search(text, line.start)
    end = blank.start() if blank else len(text)
    if _SPACE_BEFORE_END.search(text, line.start, end):
        return None
    crlf = text.find("\r\n", line.start, end) != -1
    return None if crlf and _LONE_BREAK.search(text, line.start, end) else (end, crlf)


def _plain_units(text: str, line: _Line, end: int, crlf: bool, cap: float) -> Iterator[list[ParsedUnit]]:
    """The units of the plain run from ``line`` to ``end`` (:func:`_plain_block`), a run's at a
    time, as :func:`paragraph_unit` and :func:`split_unit` make them from its lines, without a
    line object each: its text is the source's with each line end read as ``"\n"``, and an
    offset in it is the source's plus one per CRLF before it (10 million lines of ``a\r``, 20 MB:
    22 s in lines).
    """
    block = text[line.start : end]
    block = block.replace("\r\n", "\n") if crlf else block.replace("\r", "\n")
    counted, ends = 0, 0  # the line ends in block[:counted]

    def where(offset: int) -> tuple[int, int]:  # block offset -> (source offset, line number)
        nonlocal counted, ends
        ends += block.count("\n", counted, offset)
        counted = offset
        return line.start + offset + (ends if crlf else 0), line.number + ends

    start, size = 0, len(block)
    while start < size:
        ink = _INK.search(block, start).start()
        # A run longer than _RUN_CAP_UNITS x cap ends at the first line end past that.
        cut = block.find("\n", start + _RUN_CAP_UNITS * cap) if start + _RUN_CAP_UNITS * cap < size else -1
        stop = size if cut == -1 else cut
        body = block[ink:stop]
        spans = split_long_text(body, cap) if len(body) > cap else [(0, len(body))]
        units = []
        for part, (a, b) in enumerate(spans):
            (char_start, line_start), (last_char, line_end) = where(ink + a), where(ink + b - 1)
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


def paragraph_unit(lines: list[_Line], section_path: tuple[str, ...] = ()) -> ParsedUnit:
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


def split_unit(unit: ParsedUnit, lines: list[_Line], max_chars: int) -> list[ParsedUnit]:
    """``unit`` (built from ``lines`` by :func:`paragraph_unit`) as
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


def text_units(text: str, max_unit_chars: int | None = None, max_units: int | None = None) -> list[ParsedUnit]:
    """Paragraph units in reading order.

    Paragraphs are maximal runs of non-blank lines; a line is blank when it
    holds only whitespace. With ``max_unit_chars``, a longer paragraph becomes
    several units (:func:`split_unit`), and a run of lines longer than 64 times that ends at a
    line end (its lines are held until it ends). With ``max_units``, more units than that
    raise ``ParseError("cap-units")`` as soon as they are made. Markdown has its
    own parser (:mod:`fabric_resources.parsing.markdown`).
    """
    units: list[ParsedUnit] = []
    run: list[_Line] = []
    cap = max_unit_chars if max_unit_chars is not None else float("inf")
    run_chars = [0]

    def close_run() -> None:
        if run:
            units.extend(split_unit(paragraph_unit(run), run, cap))
            run.clear()
            run_chars[0] = 0
            if max_units is not None and len(units) > max_units:
                raise ParseError("cap-units", f"more than {max_units} units")

    found = _next_line(text, 0, 1)
    while found is not None:
        line, pos, number = found
        if run and line.number != run[-1].number + 1:  # a blank line between closes the run
            close_run()
        if not run and (plain := _plain_block(text, line)) is not None:
            end, crlf = plain
            for pieces in _plain_units(text, line, end, crlf, cap):
                units.extend(pieces)
                if max_units is not None and len(units) > max_units:
                    raise ParseError("cap-units", f"more than {max_units} units")
            after = _LINE_BREAK.match(text, end)  # the line end after the run's last line, if any
            pos = after.end() if after else end
            ends = text.count("\n", line.start, end) + (0 if crlf else text.count("\r", line.start, end))
            number = line.number + ends + 1
            found = _next_line(text, pos, number)
            continue
        run.append(line)
        run_chars[0] += len(line.content) + 1
        if run_chars[0] > _RUN_CAP_UNITS * cap:
            # A "paragraph" of millions of short lines (a log, a word list) held ~30x its size
            # as lines; it is cut at a line end instead, into units of the cap as before.
            close_run()
        found = _next_line(text, pos, number)
    close_run()
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
