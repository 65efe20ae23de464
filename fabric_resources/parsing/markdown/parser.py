"""The Markdown parser: CommonMark blocks (markdown-it-py) as units with exact source spans.

Two pure steps: ``bytes -> str`` (the text parser's strict
:func:`~fabric_resources.parsing.text.decoding.decode_text`: a file decodes exactly or fails
``"undecodable"``) and ``str -> units`` (:func:`markdown_units`).

Why a real Markdown parser and not a line rule: a ``#`` line inside a fenced code block
(a shell comment) is not a heading, a setext heading (``Title`` over ``=====``) is one, and
list items, block quotes and table cells are units of their own. markdown-it-py follows the
CommonMark spec and gives each block its source lines (``Token.map``).

Each unit's text is the block's source text with its container markers (``>``, list bullets
and their indentation) removed from each line and each line's trailing whitespace removed;
inline markup (``**bold**``, ``[link](url)``) stays as written, so every line of a unit is a
suffix of its source line and the locator maps back onto the decoded file exactly. All
character positions are Unicode scalar offsets (Python ``str`` indices), end-exclusive; line
numbers are 1-based and inclusive.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from markdown_it import MarkdownIt
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.front_matter import front_matter_plugin

from fabric_resources.config import MarkdownParserConfig
from fabric_resources.parsing.document import ParsedDocument, ParsedUnit, ParseError, bad_input_net
from fabric_resources.parsing.long_units import split_long_text
from fabric_resources.parsing.markdown.identity import PARSER_NAME, PARSER_VERSION, TEXT_MARKDOWN
from fabric_resources.parsing.text.decoding import bom_encoding_of, decode_text
from fabric_resources.parsing.text.parser import line_endings, split_lines

__all__ = ["markdown_units", "parse_markdown", "read_markdown"]


@dataclass(frozen=True)
class _Piece:
    """One line of a unit: ``text`` is a substring of source line ``line`` (0-based), without
    trailing whitespace; it starts at ``start`` in the decoded text."""

    line: int
    start: int
    text: str


class _Source:
    """The decoded text by lines, for locating block content."""

    def __init__(self, text: str) -> None:
        self.lines = split_lines(text)

    def piece(self, line: int, content: str) -> _Piece:
        """``content`` (one line of a block, markers removed by markdown-it) as a piece of source
        line ``line``. Where it is not a suffix of the source line (tabs markdown-it expanded),
        the piece is the source line without its leading whitespace and markers."""
        source = self.lines[line]
        kept = source.content.rstrip()
        content = content.rstrip()
        if kept.endswith(content):
            return _Piece(line, source.start + len(kept) - len(content), content)
        found = kept.find(content) if content else -1  # an ATX heading's closing #s follow its title
        if found >= 0:
            return _Piece(line, source.start + found, content)
        content = kept.lstrip(" \t>")
        return _Piece(line, source.start + len(kept) - len(content), content)

    def pieces(self, first: int, contents: list[str]) -> list[_Piece]:
        count = min(len(contents), len(self.lines) - first)
        return [self.piece(first + i, contents[i]) for i in range(count)]


_Block = tuple[ParsedUnit, list[_Piece]]


def _block(kind: str, pieces: list[_Piece], section_path: tuple[str, ...], attributes: dict[str, Any],
           locator_extra: dict[str, Any] | None = None) -> _Block | None:
    """A unit from ``pieces`` and the pieces it is made of (blank leading and trailing lines
    dropped, the first line's leading whitespace too); ``None`` if nothing is left."""
    while pieces and not pieces[0].text.strip():
        pieces = pieces[1:]
    while pieces and not pieces[-1].text.strip():
        pieces = pieces[:-1]
    if not pieces:
        return None
    first, last = pieces[0], pieces[-1]
    lead = len(first.text) - len(first.text.lstrip())
    if lead:
        pieces = [_Piece(first.line, first.start + lead, first.text[lead:]), *pieces[1:]]
        first = pieces[0]
        last = pieces[-1]
    locator = {"char_start": first.start, "char_end": last.start + len(last.text),
               "line_start": first.line + 1, "line_end": last.line + 1, **(locator_extra or {})}
    unit = ParsedUnit(kind=kind, text="\n".join(p.text for p in pieces), locator=locator,
                      section_path=section_path, attributes=attributes)
    return unit, pieces


def _split(unit: ParsedUnit, pieces: list[_Piece], max_chars: int) -> list[ParsedUnit]:
    """``unit`` as pieces of at most ``max_chars`` characters
    (:func:`~fabric_resources.parsing.long_units.split_long_text`), each locator exact, with
    ``part``/``parts`` attributes; a unit within the cap is returned alone and unchanged."""
    if len(unit.text) <= max_chars:
        return [unit]
    unit_starts, position = [], 0
    for piece in pieces:
        unit_starts.append(position)
        position += len(piece.text) + 1  # + the "\n" joining lines

    def where(offset: int) -> tuple[int, int]:
        j = bisect.bisect_right(unit_starts, offset) - 1
        return pieces[j].start + offset - unit_starts[j], pieces[j].line + 1

    spans = split_long_text(unit.text, max_chars)
    out = []
    for part, (start, end) in enumerate(spans):
        (char_start, line_start), (last_char, line_end) = where(start), where(end - 1)
        # The pieces of a heading after the first are paragraphs (the first is the section title).
        kind = "paragraph" if unit.kind == "heading" and part > 0 else unit.kind
        attributes = {**(unit.attributes if kind == unit.kind else {}), "part": part, "parts": len(spans)}
        out.append(replace(unit, kind=kind, text=unit.text[start:end], attributes=attributes,
                           locator={**unit.locator, "char_start": char_start, "char_end": last_char + 1,
                                    "line_start": line_start, "line_end": line_end}))
    return out


# An HTML comment as a browser ends it (HTML's comment states: "<!-->" and "<!--->" are empty ones,
# "--!>" also closes, an unclosed one runs to the end), or an element whose content a browser never
# shows (a script, a stylesheet, an inert template: what a notebook exported to Markdown writes
# before each table, "<style scoped> .dataframe tbody tr th …"), to its end tag or the end of the
# text (a browser shows nothing after an unclosed one): inside a raw HTML block. Group 2 is the start
# tag's ">", empty where it never closes.
_UNSHOWN = r"<(script|style|template)(?=[\s/>])[^>]*(>|\Z)[\s\S]*?(?:</\1\s*>|\Z)"
_HTML_COMMENT = re.compile(r"<!--(?:-?>|[\s\S]*?(?:--!?>|\Z))|" + _UNSHOWN, re.IGNORECASE)
# What CommonMark reads at a "<!--" in running text (spec 0.31, 6.6): an escaped character, a code
# span's backtick run (its content is code, shown as written), else the start of an inline comment,
# or of an inline element whose content is never shown (group 2).
_INLINE = re.compile(r"\\[\s\S]|(`+)|<!--|(?=<(?:script|style|template)[\s/>])", re.IGNORECASE)
_INLINE_UNSHOWN = re.compile(_UNSHOWN, re.IGNORECASE)
_TICKS = re.compile(r"`+")


def _comments(text: str, html: bool) -> list[tuple[int, int]]:
    """The spans of ``text`` (a unit's text) that no renderer shows: HTML comments, and script,
    style and template elements with their content (:data:`_UNSHOWN`): each in a raw HTML block
    (``html``), else the closed inline comments and elements outside code spans. Linear in ``text``: each search starts where the last ended (a closing backtick run
    is found by bisection among the runs of its length, found once)."""
    if "<" not in text:
        return []
    if html:
        return [m.span() for m in _HTML_COMMENT.finditer(text)]
    runs: dict[int, list[int]] = {}  # backtick run length -> the runs' starts, in order
    for run in _TICKS.finditer(text):
        runs.setdefault(run.end() - run.start(), []).append(run.start())
    spans, pos = [], 0
    while (m := _INLINE.search(text, pos)) is not None:
        pos = m.end()
        if m.group(1):  # a code span runs to the next backtick run of the same length; unmatched: literal
            ticks = len(m.group(1))
            starts = runs.get(ticks, [])
            after = bisect.bisect_left(starts, m.end())
            if after < len(starts):
                pos = starts[after] + ticks
        elif m.group(0) == "":  # a script, style or template: its content is not shown
            element = _INLINE_UNSHOWN.match(text, m.start())
            if element is None or not element.group(2):  # a start tag never closed is text, and no ">"
                break  # follows, so none after it closes either
            spans.append(element.span())
            pos = element.end()
        elif m.group(0) == "<!--":
            short = re.compile(r"-?>").match(text, pos)  # "<!-->", "<!--->": empty comments
            end = short.end() if short else text.find("-->", pos) + 3
            if end < 3:  # never closed: no later comment closes either
                break
            spans.append((m.start(), end))
            pos = end
    return spans


def _uncommented(made: _Block | None, html: bool = False) -> list[_Block]:
    """``made`` without its HTML comments: the unit cut where each comment stood into the units of
    the text between (each exact: its lines still pieces of their source lines), none left for a
    block of comments only. A unit without a comment is returned alone and unchanged."""
    if made is None:
        return []
    unit, pieces = made
    spans = _comments(unit.text, html)
    if not spans:
        return [made]
    fragments: list[list[_Piece]] = [[]]
    # The spans are in order and apart: each line looks only at those from the first not ended
    # before it (every span for every line was quadratic: 8,000 lines each with a comment, 2 s).
    offset = first = 0
    for piece in pieces:
        low, high = offset, offset + len(piece.text)
        while first < len(spans) and spans[first][1] <= low:
            first += 1
        at, i = low, first
        while i < len(spans) and spans[i][0] < high:
            start, end = spans[i]
            i += 1
            if end <= at:
                continue
            if start > at:
                fragments[-1].append(_Piece(piece.line, piece.start + at - low, piece.text[at - low:start - low]))
            fragments.append([])
            at = min(max(at, end), high)
        within = first < len(spans) and spans[first][0] < low  # the line starts inside a comment
        if at < high or (at == low and not within):
            fragments[-1].append(_Piece(piece.line, piece.start + at - low, piece.text[at - low:]))
        offset = high + 1  # + the "\n" joining lines
    out = []
    for fragment in fragments:
        trimmed = [_Piece(p.line, p.start, p.text.rstrip()) for p in fragment]
        block = _block(unit.kind, trimmed, unit.section_path, unit.attributes,
                       {k: v for k, v in unit.locator.items() if k not in _SPAN_KEYS})
        if block is not None:
            out.append(block)
    return out


_SPAN_KEYS = frozenset({"char_start", "char_end", "line_start", "line_end"})


def _front_matter(kind: str, source: _Source, closing: int) -> dict[str, Any]:
    """Where a front matter block is: its lines from the opening delimiter (line 0) to the
    ``closing`` one (0-based), both included."""
    end = source.lines[closing]
    return {"format": kind, "char_start": 0, "char_end": end.start + len(end.content),
            "line_start": 1, "line_end": closing + 1}


def _toml_front_matter(source: _Source) -> dict[str, Any] | None:
    """A TOML front matter block (Hugo, Zola: ``+++`` lines around it at the very top), or ``None``."""
    lines = source.lines
    if not lines or lines[0].content.rstrip() != "+++":
        return None
    closing = next((i for i in range(1, len(lines)) if lines[i].content.rstrip() == "+++"), None)
    return None if closing is None else _front_matter("toml", source, closing)


def _parser(config: MarkdownParserConfig) -> MarkdownIt:
    # CommonMark plus GFM tables (the one extension nearly every README uses). Only the block
    # rules run: units keep inline markup as written, and skipping the inline pass makes
    # pathological inline input (200k '[') cost nothing instead of ~10 s.
    # A YAML front matter block (`---` lines around it at the very top: Jekyll, Hugo, Obsidian) is
    # read as such (mdit-py-plugins, the markdown-it-py project's own): plain CommonMark took its
    # closing `---` for a setext underline, so the block became a heading in every later unit's
    # section path (hostile trial 12a).
    # A footnote definition (`[^1]: text`: GitHub, GitLab, Obsidian, MkDocs and Pandoc render it) is
    # read as one, where it stands (mdit-py-plugins' block rule only): plain CommonMark took one
    # whose text is a word, a URL, or a word and a quoted title for a link reference definition,
    # which renders nothing, and its text was silently missing (hostile trial 22c).
    md = (MarkdownIt("commonmark", {"maxNesting": config.max_nesting}).enable("table").use(front_matter_plugin)
          .use(footnote_plugin, inline=False, move_to_end=False))
    return md.disable(["inline", "text_join"])


def markdown_units(text: str, config: MarkdownParserConfig) -> list[ParsedUnit]:
    """Units of a Markdown text in reading order (:func:`read_markdown`'s units)."""
    return read_markdown(text, config).units


class MarkdownRead(NamedTuple):
    units: list[ParsedUnit]
    front_matter: dict[str, Any] | None  # {"format", "char_start", "char_end", "line_start", "line_end"}


def read_markdown(text: str, config: MarkdownParserConfig) -> MarkdownRead:
    """Units of a Markdown text in reading order, and where its front matter is.

    Kinds: ``heading`` (ATX or setext; attribute ``level``; it closes open sections of level
    >= its own and sets the ``section_path`` of the units after it), ``paragraph``,
    ``list_item`` (a paragraph inside a list item; attribute ``depth``, 1 for a top-level
    list), ``blockquote`` (a paragraph inside a block quote), ``note`` (a paragraph of a footnote
    definition, ``[^label]: text``, where it stands; attribute ``label``), ``preformatted`` (fenced or
    indented code, raw HTML blocks; attribute ``info`` for a fence's info string, ``html`` for
    HTML; ``front_matter`` for a front matter block, which sets no section) and ``table_cell``
    (attributes ``table``, ``row``, ``col``, ``header``; 0-based).
    Thematic breaks and empty blocks make no unit. A unit longer than
    ``config.max_unit_chars`` becomes several (``part``/``parts``).

    HTML comments (``<!-- … -->``: in a raw HTML block, or inline outside code spans), which no
    rendered page shows, are no unit text, so nothing is cited from them: a unit holding one is cut
    where it stood into the units of the text around it, each exact; a heading's title is its text
    before the comment, the text after one a paragraph.

    Front matter (at the very top: YAML between ``---`` lines, mdit-py-plugins; TOML between
    ``+++`` lines, Hugo's and Zola's) is one ``preformatted`` unit of the lines between its
    delimiters, attribute ``front_matter``: renderers do not show it, but a note's title, tags and
    aliases are what its owner searches by (Obsidian, Jekyll), and it is shown as written in the
    file a hit cites (hostile trial 12a). Its place is also ``front_matter`` (``{"format":
    "yaml"|"toml", "char_start", "char_end", "line_start", "line_end"}``, delimiters included).

    Locators are ``{"char_start", "char_end", "line_start", "line_end"}`` into ``text``;
    table cells add ``table``, ``row``, ``col`` (rows count from the header row, 0).

    Raises
    ------
    ParseError
        ``"cap-depth"`` when blocks nest ``config.max_nesting - 1`` levels deep or more
        (markdown-it reads no deeper, so their text would be lost); ``"cap-units"`` past
        ``config.max_units`` units.
    """
    source = _Source(text)
    front_matter = _toml_front_matter(source)
    # markdown-it reads TOML front matter lines as blank ones: the lines, so every map, stay the same.
    if front_matter is not None:
        rest = front_matter["line_end"]
        text_read = "\n" * rest + (text[source.lines[rest].start:] if rest < len(source.lines) else "")
    tokens = _parser(config).parse(text if front_matter is None else text_read)
    # markdown-it stops at max_nesting and drops the text of deeper blocks; failing the parse
    # keeps that loss visible (the EPUB parser's depth cap answers the same way).
    if tokens and max(token.level for token in tokens) >= config.max_nesting - 1:
        raise ParseError("cap-depth", f"blocks nested {config.max_nesting - 1} or more levels deep")
    units: list[ParsedUnit] = []
    sections: list[tuple[int, str]] = []
    containers: list[str] = []  # open list items and block quotes, outermost first
    table, row, col = -1, -1, 0
    in_header = False
    cursor_line: int | None = None  # the table row being read, and where its next cell may start
    cursor = 0
    cap = config.max_unit_chars

    def section_path() -> tuple[str, ...]:
        return tuple(title for _, title in sections)

    def emit(made: _Block | None, *, heading_level: int | None = None) -> None:
        if made is None:
            return
        if len(units) >= config.max_units:
            raise ParseError("cap-units", f"more than {config.max_units} units")
        unit, pieces = made
        if heading_level is None:
            units.extend(_split(unit, pieces, cap))
            return
        sections[:] = [(lvl, title) for lvl, title in sections if lvl < heading_level]
        parts = _split(replace(unit, section_path=section_path()), pieces, cap)
        units.append(parts[0])
        sections.append((heading_level, parts[0].text))
        units.extend(replace(p, section_path=section_path()) for p in parts[1:])

    if front_matter is not None:  # TOML: markdown-it read its lines as blank ones
        inner = front_matter["line_end"] - 2
        emit(_block("preformatted", source.pieces(1, [source.lines[i].content for i in range(1, 1 + inner)]),
                    (), {"front_matter": True}))
    for index, token in enumerate(tokens):
        kind = token.type
        if kind in ("list_item_close", "blockquote_close", "footnote_reference_close"):
            containers.pop()
        elif kind == "list_item_open":
            containers.append("list")
        elif kind == "blockquote_open":
            containers.append("quote")
        elif kind == "footnote_reference_open":
            containers.append(f"note:{token.meta.get('label', '')}")
        elif kind == "heading_open" and token.map:
            inline = tokens[index + 1]
            level = int(token.tag[1])
            lines = inline.content.split("\n")
            blocks = _uncommented(_block("heading", source.pieces(token.map[0], lines), (), {"level": level}))
            if blocks:  # the title is what is left before a comment; the text after one, a paragraph
                emit(blocks[0], heading_level=level)
                for unit, pieces in blocks[1:]:
                    emit((replace(unit, kind="paragraph", attributes={}, section_path=section_path()), pieces))
        elif kind == "paragraph_open" and token.map:
            inline = tokens[index + 1]
            depth = containers.count("list")
            inner = containers[-1] if containers else ""
            unit_kind = {"list": "list_item", "quote": "blockquote", "": "paragraph"}.get(inner, "note")
            attributes = ({"depth": depth} if unit_kind == "list_item"
                          else {"label": inner.removeprefix("note:")} if unit_kind == "note" else {})
            for block in _uncommented(_block(unit_kind, source.pieces(token.map[0], inline.content.split("\n")),
                                             section_path(), attributes)):
                emit(block)
        elif kind == "front_matter" and token.map:
            front_matter = _front_matter("yaml", source, token.map[1] - 1)
            emit(_block("preformatted", source.pieces(token.map[0] + 1, token.content.split("\n")), (),
                        {"front_matter": True}))
        elif kind in ("fence", "code_block", "html_block") and token.map:
            first = token.map[0] + (1 if kind == "fence" else 0)
            lines = token.content.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            attributes = {"info": token.info.strip()} if kind == "fence" and token.info.strip() else {}
            if kind == "html_block":  # its comments are shown nowhere: not unit text
                for block in _uncommented(_block("preformatted", source.pieces(first, lines), section_path(),
                                                 {"html": True}), html=True):
                    emit(block)
            else:
                emit(_block("preformatted", source.pieces(first, lines), section_path(), attributes))
        elif kind == "table_open":
            table, row = table + 1, -1
        elif kind in ("thead_open", "tbody_open"):
            in_header = kind == "thead_open"
        elif kind == "tr_open":
            row, col = row + 1, 0
            cursor_line = token.map[0] if token.map else None
            cursor = 0
        elif kind in ("th_open", "td_open"):
            inline = tokens[index + 1]
            content = inline.content.strip()
            if content and cursor_line is not None and cursor_line < len(source.lines):
                line = source.lines[cursor_line]
                found = line.content.find(content, cursor)
                if found < 0 and "|" in content:  # markdown-it reads a cell's "\|" as "|": cite the source's
                    content = content.replace("|", "\\|")
                    found = line.content.find(content, cursor)
                if found >= 0:
                    cursor = found + len(content)
                    piece = _Piece(cursor_line, line.start + found, content)
                else:  # escaped pipes etc.: the cell is located by its row
                    piece = source.piece(cursor_line, line.content.strip())
                cell = {"table": table, "row": row, "col": col}
                for block in _uncommented(_block("table_cell", [piece], section_path(), {**cell, "header": in_header},
                                                 cell)):
                    emit(block)
            col += 1
    return MarkdownRead(units, front_matter)


@bad_input_net
def parse_markdown(data: bytes, config: MarkdownParserConfig, media_type: str = TEXT_MARKDOWN) -> ParsedDocument:
    """Parse a Markdown file into block units (:func:`markdown_units`).

    Parameters
    ----------
    data : bytes
        The whole file.
    config : MarkdownParserConfig
        ``max_bytes`` caps the input size (bytes); ``max_nesting`` the block nesting depth;
        ``max_unit_chars`` the unit length.
    media_type : str
        Recorded in the result.

    Returns
    -------
    ParsedDocument
        Units in reading order; zero units for an empty or whitespace-only file. Locators are
        Unicode scalar offsets into the decoded text after BOM removal and before line-ending
        normalisation. ``metadata`` is ``{"line_endings", "bom"}`` as for plain text, and
        ``front_matter`` (its place: :func:`read_markdown`) for a file that has one.

    Raises
    ------
    ParseError
        ``"too-large"`` when ``len(data) > config.max_bytes``; ``"undecodable"`` as in
        :func:`~fabric_resources.parsing.text.decoding.decode_text`; ``"cap-depth"`` as in
        :func:`markdown_units`.
    """
    if len(data) > config.max_bytes:
        raise ParseError("too-large", f"{len(data)} bytes > max_bytes {config.max_bytes}")
    text, encoding = decode_text(data)
    read = read_markdown(text, config)
    return ParsedDocument(
        parser_name=PARSER_NAME,
        parser_version=PARSER_VERSION,
        media_type=media_type,
        units=read.units,
        title=None,
        encoding=encoding,
        metadata={"line_endings": line_endings(text), "bom": bom_encoding_of(data) is not None,
                  **({"front_matter": read.front_matter} if read.front_matter else {})},
    )
