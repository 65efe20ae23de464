"""The plain-text parser: strict encoding detection and paragraph units.

This module owns two pure steps, ``bytes -> str`` (:func:`decode_text`) and
``str -> units`` (:func:`parse_text`). Decoding is always strict (no
replacement characters): a file either decodes exactly or fails with the
named reason ``"undecodable"``.

Cleanup is conservative. A unit's text is the source text of its lines with
line endings normalised to ``"\\n"`` and each line's trailing whitespace
removed; markup such as ``<p>`` or Aozora ruby ``《》`` stays as it is, so each
unit's locator maps back onto the decoded file exactly.

All character positions are Unicode scalar offsets (Python ``str`` indices),
end-exclusive; line numbers are 1-based and inclusive.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, replace
from typing import Literal

import charset_normalizer

from fabric_resources.config import TextParserConfig
from fabric_resources.parsing.document import ParsedDocument, ParsedUnit, ParseError
from fabric_resources.parsing.text import PARSER_NAME, PARSER_VERSION
from fabric_resources.parsing.text import TEXT_MARKDOWN as MARKDOWN_MEDIA_TYPE

LineEndings = Literal["crlf", "lf", "cr", "mixed", "none"]

# Longest BOMs first: the UTF-32 LE BOM starts with the UTF-16 LE BOM.
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)

_LEGACY_ENCODINGS: tuple[str, ...] = ("cp932", "gb18030")

# Python's cp932 codec maps the single bytes 0x80, 0xA0 and 0xFD-0xFF, which
# Shift_JIS leaves unassigned, to U+0080 and U+F8F0-U+F8F3 (Microsoft's
# table). Real Shift_JIS text never holds them, so a reading that does is
# treated as invalid; otherwise cp932 would "decode" almost any binary.
_CP932_UNASSIGNED_SINGLE_BYTES = frozenset("\x80\uf8f0\uf8f1\uf8f2\uf8f3")

# Controls that never occur in text: the "F" entries of file(1)'s text_chars
# table (libmagic, src/encoding.c): NUL-ACK, SO-SUB, FS-US and DEL. BEL, BS,
# TAB, LF, VT, FF, CR and ESC are allowed.
_NON_TEXT_CONTROLS = frozenset(
    [chr(c) for c in range(0x00, 0x07)]
    + [chr(c) for c in range(0x0E, 0x1B)]
    + [chr(c) for c in range(0x1C, 0x20)]
    + ["\x7f"]
)

# GB2312 lead bytes 0xB0-0xDF (the common Hanzi) fall in cp932's single-byte
# half-width katakana range 0xA1-0xDF, so GB-encoded Chinese read as cp932 is
# mostly half-width katakana, which real Japanese prose hardly uses. Measured
# on the shared corpus (sentences and sentence pairs that decode both ways):
# Chinese read as cp932 >= 0.33, Japanese read as cp932 = 0.0.
_HALFWIDTH_KATAKANA_SHARE_FOR_GB = 0.2

# Below this many bytes charset-normalizer's verdicts are unreliable: on the
# shared corpus it rejected the cp932 reading of short Japanese quotes such as
# 「良秀。 while keeping gb18030.
_MIN_BYTES_FOR_CHARSET_NORMALIZER_VERDICT = 64

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_ENDING_NAMES: dict[str, LineEndings] = {"\r\n": "crlf", "\r": "cr", "\n": "lf"}
_ATX_HEADING = re.compile(r"(#{1,6}) +")


# --------------------------------------------------------------------------
# Decoding


def decode_text(data: bytes) -> tuple[str, str]:
    """Decode a text file strictly, detecting its encoding.

    Order: a BOM (UTF-32, UTF-8, UTF-16) decides alone; otherwise bytes that
    contain NUL are binary; otherwise strict UTF-8; otherwise the legacy CJK
    encodings cp932 (a Shift_JIS superset) and GB18030, choosing between them
    with :func:`choose_legacy_encoding` when both decode.

    Parameters
    ----------
    data : bytes
        The whole file.

    Returns
    -------
    text : str
        The decoded text, without a BOM. Offsets into it are Unicode scalars.
    encoding : str
        Python codec name: ``"utf-8"``, ``"utf-8-sig"``, ``"utf-16"``,
        ``"utf-32"``, ``"cp932"`` or ``"gb18030"``. Empty input is
        ``("", "utf-8")``.

    Raises
    ------
    ParseError
        ``"undecodable"`` when a BOM-declared encoding does not decode, when
        the bytes hold NUL without a UTF-16/32 BOM, when no candidate decodes,
        or when the decoded text holds controls that never occur in text
        (binary data); ``detail`` names what was tried.
    """
    bom_encoding = _bom_encoding(data)
    if bom_encoding is not None:
        try:
            text = data.decode(bom_encoding, errors="strict")
        except UnicodeDecodeError as exc:
            raise ParseError("undecodable", f"BOM declares {bom_encoding}, but {_describe(exc)}") from None
        return _require_text_like(text, bom_encoding), bom_encoding

    nul_offset = data.find(b"\x00")
    if nul_offset >= 0:
        raise ParseError("undecodable", f"binary: NUL byte at offset {nul_offset} and no UTF-16/32 BOM")

    try:
        return _require_text_like(data.decode("utf-8", errors="strict"), "utf-8"), "utf-8"
    except UnicodeDecodeError as exc:
        failures = [f"utf-8 ({_describe(exc)})"]

    readings: dict[str, str] = {}
    for encoding in _LEGACY_ENCODINGS:
        try:
            readings[encoding] = _decode_legacy(data, encoding)
        except UnicodeDecodeError as exc:
            failures.append(f"{encoding} ({_describe(exc)})")
    if not readings:
        raise ParseError("undecodable", "no BOM; tried " + ", ".join(failures))

    encoding = next(iter(readings)) if len(readings) == 1 else choose_legacy_encoding(data, readings["cp932"])
    return _require_text_like(readings[encoding], encoding), encoding


def choose_legacy_encoding(data: bytes, cp932_text: str) -> Literal["cp932", "gb18030"]:
    """Choose cp932 or GB18030 for bytes that decode strictly as both.

    GB18030 decodes almost any byte sequence, so cp932 is the default.
    GB18030 wins when either signal says so:

    1. The cp932 reading looks like GB-encoded Hanzi: at least 20 % of its
       non-ASCII characters are half-width katakana (U+FF61-U+FF9F), and
       charset-normalizer does not keep cp932 while rejecting GB18030.
    2. charset-normalizer keeps GB18030 and rejects cp932, on at least 64
       bytes of input.

    The decision is deterministic: charset-normalizer has no randomness and
    the rule reads only which encodings it keeps.

    Parameters
    ----------
    data : bytes
        The file, without BOM (none was present).
    cp932_text : str
        ``data`` decoded strictly as cp932.

    Returns
    -------
    str
        ``"cp932"`` or ``"gb18030"``.
    """
    kept = {match.encoding for match in charset_normalizer.from_bytes(data, cp_isolation=list(_LEGACY_ENCODINGS))}
    normalizer_prefers_cp932 = "cp932" in kept and "gb18030" not in kept
    normalizer_prefers_gb18030 = "gb18030" in kept and "cp932" not in kept

    if halfwidth_katakana_share(cp932_text) >= _HALFWIDTH_KATAKANA_SHARE_FOR_GB and not normalizer_prefers_cp932:
        return "gb18030"
    if normalizer_prefers_gb18030 and len(data) >= _MIN_BYTES_FOR_CHARSET_NORMALIZER_VERDICT:
        return "gb18030"
    return "cp932"


def halfwidth_katakana_share(text: str) -> float:
    """Share of ``text``'s non-ASCII characters that are half-width katakana.

    Returns
    -------
    float
        In [0, 1]; 0.0 when ``text`` has no non-ASCII character. Counted in
        Unicode scalars; half-width katakana are U+FF61-U+FF9F.
    """
    non_ascii = [ch for ch in text if ord(ch) > 0x7F]
    if not non_ascii:
        return 0.0
    return sum(1 for ch in non_ascii if "\uff61" <= ch <= "\uff9f") / len(non_ascii)


def _bom_encoding(data: bytes) -> str | None:
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding
    return None


def _decode_legacy(data: bytes, encoding: str) -> str:
    """Strict decode; cp932 also rejects bytes that Shift_JIS leaves unassigned."""
    text = data.decode(encoding, errors="strict")
    if encoding == "cp932":
        for index, ch in enumerate(text):
            if ch in _CP932_UNASSIGNED_SINGLE_BYTES:
                offset = len(text[:index].encode(encoding))
                raise UnicodeDecodeError(encoding, data, offset, offset + 1, "byte unassigned in Shift_JIS")
    return text


def _require_text_like(text: str, encoding: str) -> str:
    for index, ch in enumerate(text):
        if ch in _NON_TEXT_CONTROLS:
            raise ParseError(
                "undecodable", f"binary: decodes as {encoding} but holds control U+{ord(ch):04X} at char {index}"
            )
    return text


def _describe(exc: UnicodeDecodeError) -> str:
    return f"{exc.reason} at byte {exc.start}"


# --------------------------------------------------------------------------
# Lines and units


@dataclass(frozen=True)
class _Line:
    """One line of the decoded text, without its line ending."""

    number: int  # 1-based
    start: int  # Unicode scalar offset of the line's first char
    content: str

    @property
    def is_blank(self) -> bool:
        return not self.content.strip()


def split_lines(text: str) -> list[_Line]:
    """Split ``text`` at CRLF, CR and LF (only those end lines).

    A final line ending does not start another line; ``""`` has no lines.
    """
    lines: list[_Line] = []
    start = 0
    for number, match in enumerate(_LINE_BREAK.finditer(text), start=1):
        lines.append(_Line(number, start, text[start : match.start()]))
        start = match.end()
    if start < len(text):
        lines.append(_Line(len(lines) + 1, start, text[start:]))
    return lines


def line_endings(text: str) -> LineEndings:
    """Which line endings ``text`` uses: one kind, ``"mixed"`` or ``"none"``."""
    kinds = {_ENDING_NAMES[match.group()] for match in _LINE_BREAK.finditer(text)}
    if not kinds:
        return "none"
    return kinds.pop() if len(kinds) == 1 else "mixed"


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


def markdown_heading(line: _Line) -> ParsedUnit | None:
    """A heading unit if ``line`` is an ATX heading (1-6 ``#`` then a space).

    The unit text is the title: the rest of the line without its trailing
    whitespace; the locator covers the title only. A line whose title is
    empty is not a heading. The unit's ``section_path`` is left empty for
    :func:`text_units` to fill in.
    """
    match = _ATX_HEADING.match(line.content)
    if match is None:
        return None
    title = line.content[match.end() :].rstrip()
    if not title:
        return None
    char_start = line.start + match.end()
    return ParsedUnit(
        kind="heading",
        text=title,
        locator={
            "char_start": char_start,
            "char_end": char_start + len(title),
            "line_start": line.number,
            "line_end": line.number,
        },
        attributes={"level": len(match.group(1))},
    )


def text_units(text: str, markdown: bool = False) -> list[ParsedUnit]:
    """Paragraph (and, for Markdown, heading) units in reading order.

    Paragraphs are maximal runs of non-blank lines; a line is blank when it
    holds only whitespace. In Markdown a heading line is a unit of its own
    that ends the paragraph before it and sets the ``section_path`` of the
    units after it (a level-n heading closes open sections of level >= n).
    A heading's own ``section_path`` holds the sections enclosing it.
    """
    units: list[ParsedUnit] = []
    sections: list[tuple[int, str]] = []  # (level, title), outermost first
    run: list[_Line] = []

    def section_path() -> tuple[str, ...]:
        return tuple(title for _, title in sections)

    def close_run() -> None:
        if run:
            units.append(paragraph_unit(run, section_path()))
            run.clear()

    for line in split_lines(text):
        heading = markdown_heading(line) if markdown else None
        if heading is not None:
            close_run()
            level = heading.attributes["level"]
            sections[:] = [(lvl, title) for lvl, title in sections if lvl < level]
            units.append(replace(heading, section_path=section_path()))
            sections.append((level, heading.text))
        elif line.is_blank:
            close_run()
        else:
            run.append(line)
    close_run()
    return units


# --------------------------------------------------------------------------
# The parser


def parse_text(data: bytes, config: TextParserConfig, media_type: str = "text/plain") -> ParsedDocument:
    """Parse a plain-text (or Markdown) file into paragraph units.

    Parameters
    ----------
    data : bytes
        The whole file.
    config : TextParserConfig
        ``max_bytes`` caps the input size (bytes).
    media_type : str
        ``"text/markdown"`` turns on heading units and section paths;
        anything else is plain text. Recorded in the result.

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
        ``"undecodable"`` as in :func:`decode_text`.
    """
    if len(data) > config.max_bytes:
        raise ParseError("too-large", f"{len(data)} bytes > max_bytes {config.max_bytes}")
    text, encoding = decode_text(data)
    return ParsedDocument(
        parser_name=PARSER_NAME,
        parser_version=PARSER_VERSION,
        media_type=media_type,
        units=text_units(text, markdown=media_type == MARKDOWN_MEDIA_TYPE),
        title=None,
        encoding=encoding,
        metadata={"line_endings": line_endings(text), "bom": _bom_encoding(data) is not None},
    )
