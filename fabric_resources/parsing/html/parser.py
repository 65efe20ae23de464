"""The HTML parser: block elements in document order, each with its element path; main text only.

Two steps. The main-text decision is trafilatura's (its extraction of the page's main content,
comments excluded, tables included, no deduplication so the result depends on these bytes alone):
measured on ``../shared/eval/html-extraction`` it leaks far less boilerplate than a tag rule (README,
"Formats"). The walk is lxml's: every block element (paragraph, heading, list item, table cell,
preformatted, quote) whose text trafilatura kept becomes a unit with its element path, so a citation
points at the element. A table cell, whose text trafilatura writes inside a "| a | b |" row line
rather than as a line of its own, is kept when it is a cell of those rows and its table is one
trafilatura kept (most of its cells are in them). Scripts, styles, inert templates, form controls
(but a textarea's text, a button's label, what a text box or a select shows), elements marked ``hidden``,
a ``dialog`` not open, and elements whose inline style says ``display: none`` or ``visibility:
hidden`` never yield text. An equation (MathML) is read in the unit's text, and so is what
:mod:`.rendered` lists (a declarative shadow root, an object's shown fallback, a frame's ``srcdoc``
document, a textarea's text, the words an inline SVG draws)."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import lxml.html
from lxml import etree

from fabric_resources.parsing.element_paths import ElementPaths
from fabric_resources.parsing.document import ParsedDocument, ParsedUnit, ParseError
from fabric_resources.parsing.html import MEDIA_TYPE, PARSER_NAME, PARSER_VERSION
from fabric_resources.parsing.html.encoding import decode_html
from fabric_resources.parsing.html.rendered import (blank_zero_size_text, graft_frames, hide_unslotted,
    settle_shadow_roots, svg_text, trafilatura_view, transparent, unhide_page)
from fabric_resources.parsing.html.tree_repairs import absorb_trailing, unvoid_embeds
from fabric_resources.parsing.inline_style import MEDIA_FALLBACK, control_text, hidden_element as _hidden
from fabric_resources.parsing.lxml_limits import (raise_on_attribute_flood, raise_on_resource_limit,
    without_long_attributes, without_long_data_urls)
from fabric_resources.parsing import table_grid
from fabric_resources.parsing.table_grid import GridBudget, cell_columns, column_span, row_span

if TYPE_CHECKING:
    from fabric_resources.config import HtmlParserConfig

# noembed, noframes, datalist: display: none in the HTML Standard's rendering rules ("Hidden elements");
# libxml2 reads noframes as raw text, so its markup was read as words ("<p>Noframes …</p>"). video, audio:
# MEDIA_FALLBACK. math: its text is read apart (_MATH).
_SKIP = {"script", "style", "noscript", "template", "head", "title", "meta", "link", "svg", "math", "iframe",
         "object", "embed", "canvas", "button", "select", "option", "textarea", "input", "map", "noembed",
         "noframes", "datalist", *MEDIA_FALLBACK}
# MathML (an equation in the page, which browsers render): its text is in the unit, in order (no
# fraction bar or superscript is written, as the DOCX parser reads OMML), but not what a <semantics>
# holds after its first child (annotations: the TeX source, not shown). In the text matched against
# trafilatura's it is what trafilatura writes of it (:func:`_math_tex`): a short paragraph holding
# an equation never matched, and was dropped.
_MATH = "math"
_MATH_UNSHOWN = {"annotation", "annotation-xml"}
#: Skipped tags whose text is read inline all the same (:mod:`.rendered`: an equation, the words an
#: inline SVG draws, a textarea's default text; _CONTROLS: a button's label, what an input or a select shows).
_CONTROLS = ("button", "input", "select")
_READ_INLINE = {_MATH, "svg", "textarea", *_CONTROLS}
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_LEAF_KINDS = {"p": "paragraph", "li": "list_item", "dt": "paragraph", "dd": "paragraph", "td": "table_cell",
               "th": "table_cell", "pre": "preformatted", "blockquote": "blockquote", "figcaption": "figure_caption",
               "caption": "figure_caption", "address": "paragraph", **{h: "heading" for h in _HEADINGS}}
# Not font: it is inline ("wo<font color=red>rld</font>" is one word); one holding blocks (an old page's
# <font><p>…</p></font>) is walked as a container all the same, as any element holding blocks is.
_CONTAINERS = {"html", "body", "div", "section", "article", "main", "header", "footer", "nav", "aside", "ul", "ol",
               "dl", "table", "thead", "tbody", "tfoot", "tr", "figure", "form", "fieldset", "details", "summary",
               "center"}
_BLOCKS = set(_LEAF_KINDS) | _CONTAINERS
#: Elements the HTML Standard's rendering rules display as blocks (§15.3.3) that are neither units nor
#: containers here: their text is read inline, a line apart from the text around it.
_BLOCK_DISPLAY = {"hr", "legend", "hgroup", "menu", "dir", "search", "xmp", "listing", "plaintext"}
_WS = re.compile(r"\s+")
_CELL_BAR = re.compile(r"(?<!\\)\|")  # a column bar of trafilatura's table rows; "\|" is a bar in a cell
_RULE = re.compile(r"-*")
#: Share of a table's cells that trafilatura's rows must hold for the table to count as kept
#: (_Walker._main_table). A judgement, not a fit: on ../shared the one table trafilatura kept rows
#: of is a Wikipedia sidebar (1 of its 14 cells); an article's table it keeps has all of them.
_MAIN_TABLE_SHARE = 0.5
#: Below this many characters an element must equal a whole line of the main text (not just occur in it).
_SHORT = 40


def parse_html(data: bytes, config: "HtmlParserConfig", media_type: str = MEDIA_TYPE) -> ParsedDocument:
    """Parse an HTML page into units of its main text.

    Returns
    -------
    ParsedDocument
        Units in document order: ``heading`` (``level``), ``paragraph``, ``list_item``,
        ``table_cell`` (``table``, ``row``, ``col``), ``preformatted`` (newlines kept),
        ``blockquote``, ``figure_caption``; text whitespace-collapsed. Locator
        ``{"element_path"}`` (lxml path such as ``/html/body/div[2]/p[3]``; loose text inside a
        container adds ``"text_run"``: its 0-based run number). With ``main_text =
        "trafilatura"`` only elements whose text trafilatura kept as main content are units.
        ``section_path``: the h1-h6 titles above. ``encoding``: how the bytes were decoded.
        ``metadata``: ``main_text`` (the mode), ``elements`` (block elements seen),
        ``dropped_elements`` (not main text). ``unread``: frames past the cap (``cap-frames``).

    Raises
    ------
    ParseError
        ``empty-file``, ``too-large``, ``undecodable`` (binary bytes, e.g. a PDF named ``.html``:
        :func:`~fabric_resources.parsing.html.encoding.decode_html`), ``malformed-html`` (no
        document lxml can build),
        ``cap-depth`` (deeper than ``config.max_depth``, or than the 256 libxml2 reads),
        ``cap-parser-limit`` (another libxml2 limit, or a tag of more attributes than it reads in
        good time: :mod:`fabric_resources.parsing.lxml_limits`),
        ``cap-table-grid`` (tables whose rowspans or rows cost more than the page's
        :class:`~fabric_resources.parsing.table_grid.GridBudget`, checked before trafilatura reads it).
    """
    if not data.strip():
        raise ParseError("empty-file", "no content")
    if len(data) > config.max_bytes:
        raise ParseError("too-large", f"{len(data)} bytes > max_bytes {config.max_bytes}")
    text, encoding = decode_html(data)
    # NUL is ignored in a page's text (HTML's "in body" insertion mode), as browsers show it; lxml
    # kept it as U+FFFD and trafilatura dropped it, so the paragraph holding one was lost.
    text = text.replace("\x00", "")
    raise_on_attribute_flood(text)  # before libxml2, which would take minutes over such a tag
    text, frames = without_long_attributes(without_long_data_urls(text))  # each past libxml2's attribute limit
    parser = lxml.html.HTMLParser()
    try:
        root = lxml.html.document_fromstring(text, parser=parser)
    except (etree.ParserError, ValueError) as exc:
        raise ParseError("malformed-html", f"{type(exc).__name__}: {exc}") from None
    raise_on_resource_limit(parser)  # trafilatura parses the same way: it would miss the same text
    # trafilatura reads the page as the walk does: content after </html> in its body, what follows an
    # embed out of it (libxml2 reads embed as a container), frames' documents
    # in them (a frame may hold shadow roots), no text a zero font size or a shadow root hides.
    moved = absorb_trailing(root) | unvoid_embeds(root)
    unhide_page(root)
    settle_shadow_roots(root)
    unslotted = hide_unslotted(root)  # before frames are read: a frame no slot takes is not (graft_frames)
    unread = graft_frames(root, frames)
    if moved | blank_zero_size_text(root) | unslotted:
        text = lxml.html.tostring(root, encoding="unicode")
    view = trafilatura_view(root)  # rendered text trafilatura would drop (shadow roots, SVG text, ...)
    text = text if view is None else view
    walker = _Walker(root.getroottree(), None, config.max_depth)
    walker.place_tables(root)  # before trafilatura, which takes minutes over a table this refuses
    walker.main = main_text(text) if config.main_text == "trafilatura" else None
    walker.walk(root, 0)
    title_el = root.find(".//title")
    title = _WS.sub(" ", title_el.text_content()).strip() if title_el is not None else ""
    lang = root.get("lang") or None
    return ParsedDocument(
        PARSER_NAME, PARSER_VERSION, MEDIA_TYPE, walker.units, title=title or None,
        language=lang.split("-")[0].lower() if lang else None, encoding=encoding,
        metadata={"main_text": config.main_text, "elements": walker.seen, "dropped_elements": walker.dropped},
        unread=unread,
    )


@dataclass
class MainText:
    """trafilatura's main text of a page, as elements are matched against it (:func:`_match_key`).

    ``joined``: the whole text, whitespace-collapsed. ``lines``: how often each of its lines
    occurs (a list item's without trafilatura's ``- `` marker). ``cells``: how often each table cell occurs in its table rows (trafilatura writes a
    kept table as lines ``| a | b |``, escaping a ``|`` inside a cell as ``\\|``). The counts are
    spent as elements match, so each occurrence vouches for one element. ``runs``: every run of
    two or more consecutive lines, short together, without spaces (a short ``<pre>`` block, which
    trafilatura writes a line per line; a short paragraph whose links or bold words it writes each
    on a line of their own, ``Split <b>gua</b>va`` as ``Split`` ``gua`` ``va``)."""

    joined: str
    lines: Counter[str]
    cells: Counter[str]
    runs: frozenset[str] = frozenset()


def main_text(text: str) -> MainText | None:
    """trafilatura's main text of the page (:class:`MainText`); ``None`` when it finds none (then
    every block element counts as main text)."""
    import trafilatura

    extracted = trafilatura.extract(text, include_comments=False, include_tables=True, deduplicate=False,
                                    output_format="txt", with_metadata=False)
    if not extracted:
        return None
    # A list item is written "- text": its text is the line less the marker (a short item never
    # equalled a whole line and was dropped, as table cells were).
    ordered = [_match_key(line[2:] if line.startswith("- ") else line) for line in extracted.splitlines()]
    lines = Counter(ordered)
    lines.pop("", None)
    ordered = [line for line in ordered if line]
    runs = frozenset("".join(ordered[i:j]).replace(" ", "") for i in range(len(ordered))
                     for j in _run_ends(ordered, i))
    cells: Counter[str] = Counter()
    for line, count in lines.items():
        if len(line) > 1 and line[0] == "|" and line[-1] == "|":
            row = [_match_key(cell.replace("\\|", "|")) for cell in _CELL_BAR.split(line[1:-1])]
            if not all(_RULE.fullmatch(cell) for cell in row):  # not the |---|---| below a head row
                for cell in filter(None, row):
                    cells[cell] += count
    return MainText(_match_key(extracted), lines, cells, runs)


def _run_ends(lines: list[str], start: int):
    """The ends of the runs of two or more lines from ``start`` that are shorter than :data:`_SHORT`
    together (only a short element needs a run: a longer one is matched in ``joined``)."""
    size = len(lines[start])
    for end in range(start + 1, len(lines)):
        size += 1 + len(lines[end])
        if size >= _SHORT:
            return
        yield end + 1


def _match_key(text: str) -> str:
    """``text`` as an element is matched against trafilatura's main text: control, format,
    private-use and unassigned characters (Unicode categories C*: the soft hyphen, zero-width
    (non-)joiners, direction marks, a NUL) removed, since trafilatura removes them, and whitespace
    collapsed. Without it a paragraph holding one such character never matched and was dropped —
    most paragraphs of a Persian page (ZWNJ), any with a soft hyphen. Tab, newline, carriage return
    and NEL count as whitespace, as on trafilatura's side. The unit keeps its text as it is."""
    if not text.isprintable():
        text = "".join(ch for ch in text if ch in "\t\n\r\x85" or unicodedata.category(ch)[0] != "C")
    return _WS.sub(" ", text).strip()


class _Walker:
    def __init__(self, tree, main: MainText | None, max_depth: int) -> None:
        self.tree = tree
        self.main = main
        self.max_depth = max_depth
        self.units: list[ParsedUnit] = []
        self.sections: list[tuple[int, str]] = []
        self.tables: dict[Any, int] = {}
        self.table_rows: dict[Any, dict[Any, int]] = {}  # a table's own rows (not a nested table's) by position
        self.cell_cols: dict[Any, int] = {}  # a td/th -> the grid column it starts in (table_grid)
        self.grid_budget = GridBudget(layout_slots=table_grid.MAX_LAYOUT_SLOTS)  # the page's tables share it
        self.element_path = ElementPaths(tree)  # getpath's strings, each parent counted once
        self.main_tables: dict[Any, bool] = {}
        self.seen = 0
        self.dropped = 0

    def keep(self, text: str, table=None) -> bool:
        """Whether ``text`` (an element's; ``table``: the table whose cell holds it) is main text."""
        if self.main is None:
            return True
        main = self.main
        text = _match_key(text)
        if not text:
            return False
        # A cell of a table trafilatura kept is main text when one of its rows holds it: it writes
        # rows as "| a | b |" lines, so a short cell never equals a whole line (all were dropped).
        if table is not None and self._main_table(table) and main.cells[text] > 0:
            main.cells[text] -= 1
            return True
        if len(text) < _SHORT:
            # A short text must be a whole line of the main text, and each such line vouches for as
            # many elements as it occurs (a sidebar "Contents" does not ride on the article's heading);
            # or consecutive whole lines (a short <pre>, or "Click <a>here</a> to go." that
            # trafilatura wrote as three lines: it was dropped, its words in no search).
            if main.lines[text] > 0:
                main.lines[text] -= 1
                return True
            return text.replace(" ", "") in main.runs
        if text in main.joined:
            return True
        # trafilatura rewrites some whitespace and inline markup: keep an element most of whose
        # word runs it kept.
        words = text.split(" ")
        pieces = [" ".join(words[i:i + 6]) for i in range(0, len(words), 6)]
        return sum(piece in main.joined for piece in pieces) >= 0.5 * len(pieces)

    def _main_table(self, table) -> bool:
        """Whether trafilatura kept ``table``: at least half of its cells' texts are cells of its
        rows. A sidebar or navigation box it kept one or two rows of (a title, a "venues" link
        on a Wikipedia page) is not, so its short cells still need a whole line of their own."""
        if table not in self.main_tables:
            keys = Counter(k for c in table.iter("td", "th") if _cell_table(c) is table
                           and (k := _match_key(_inline_text(c))))
            held = sum(min(n, self.main.cells[k]) for k, n in keys.items())
            self.main_tables[table] = held >= _MAIN_TABLE_SHARE * sum(keys.values())
        return self.main_tables[table]

    def walk(self, el, depth: int) -> None:
        if depth > self.max_depth:
            raise ParseError("cap-depth", f"elements nested deeper than {self.max_depth}")
        tag = el.tag.lower() if isinstance(el.tag, str) else None
        if tag is None or _skipped(el, tag):
            return
        if tag in _LEAF_KINDS and not self._has_block(el):
            self.leaf(el, tag)
            return
        sections = list(self.sections)
        self._walk_children(el, depth)
        if tag == "iframe":  # a frame's document: its headings head none of the page's paragraphs
            self.sections[:] = sections

    def _walk_children(self, el, depth: int) -> None:
        run: list[tuple[str, str]] = [(el.text or "", el.text or "")]  # (as trafilatura reads it, as shown)
        runs = 0
        for child in el:
            ctag = child.tag.lower() if isinstance(child.tag, str) else None
            # An element of another tag holding blocks (a custom element, <my-card><h2>…</h2><p>…)
            # is walked as a container: read inline, its blocks' texts ran together ("…the
            # harbour.Second paragraph…Card heading") and a heading was no heading. Not a link: a
            # heading inside one is a teaser's title (stern.de's cards inside an article), which
            # as a heading would head the article's next paragraphs.
            if (ctag in _BLOCKS and ctag not in _SKIP) or (ctag is not None and ctag != "a" and self._has_block(child)
                                                           and (ctag not in _SKIP or transparent(child))):
                runs += self.loose(el, run, runs)
                run = []
                self.walk(child, depth + 1)
            elif ctag is not None and (ctag in _READ_INLINE or not _skipped(child, ctag)) and not _hidden(child):
                run.append(_texts(child))
            run.append((child.tail or "", child.tail or ""))
        self.loose(el, run, runs)

    def _has_block(self, el) -> bool:
        return any(isinstance(d.tag, str) and d.tag.lower() in _BLOCKS for d in el.iterdescendants())

    def loose(self, el, run: list[tuple[str, str]], number: int) -> int:
        raw = "".join(matched for matched, _ in run)
        text = _WS.sub(" ", "".join(shown for _, shown in run)).strip()
        if not text:
            return 0
        self.seen += 1
        if not self.keep(raw, _cell_table(el)):
            self.dropped += 1
            return 1
        locator = {"element_path": self.element_path(el), "text_run": number}
        self.units.append(ParsedUnit("paragraph", text, locator, self.path()))
        return 1

    def place_tables(self, root) -> None:
        """Place every table's cells in its grid (:meth:`_grid`); raises ``cap-table-grid`` for
        tables that cost more than the page's :class:`GridBudget`, trafilatura's layout counted."""
        for table in root.iter("table"):
            self._grid(table)

    def _grid(self, table) -> None:
        """Number ``table``'s own rows (a nested table's are its own) and place each of their cells
        in the table's grid, colspan and rowspan counted (:func:`cell_columns`); once per table: per
        cell it was quadratic (a 146 kB table of 8,000 rows took 15 s)."""
        if table is None:
            self.table_rows[table] = {}
            return
        rows = [tr for tr in table.iter("tr") if _nearest_table(tr) is table]
        self.table_rows[table] = {r: i for i, r in enumerate(rows)}
        cells = [[c for c in tr if isinstance(c.tag, str) and c.tag.lower() in ("td", "th")] for tr in rows]
        columns = cell_columns([[(column_span(c.get("colspan")), row_span(c.get("rowspan"))) for c in row]
                                for row in cells], self.grid_budget)
        for row, starts in zip(cells, columns):
            self.cell_cols.update(zip(row, starts))

    def path(self) -> tuple[str, ...]:
        return tuple(title for _, title in self.sections)

    def leaf(self, el, tag: str) -> None:
        check, raw = _texts(el)  # check: matched as trafilatura saw it (_match_key), not as the unit reads
        if tag == "pre":
            text = "\n".join(line.rstrip() for line in raw.strip("\n").splitlines()).strip()
        else:
            text = _WS.sub(" ", raw).strip()
        if not text:
            return
        self.seen += 1
        if not self.keep(check, _cell_table(el)):
            self.dropped += 1
            return
        kind = _LEAF_KINDS[tag]
        locator: dict[str, Any] = {"element_path": self.element_path(el)}
        attributes: dict[str, Any] = {}
        if kind == "heading":
            level = _HEADINGS[tag]
            self.sections[:] = [(lvl, t) for lvl, t in self.sections if lvl < level]
            self.units.append(ParsedUnit("heading", text, locator, self.path(), {"level": level}))
            self.sections.append((level, text))
            return
        if kind == "table_cell":
            row = el.getparent()
            table = _nearest_table(el)
            number = self.tables.setdefault(table, len(self.tables))
            if table not in self.table_rows:
                self._grid(table)
            attributes = {"table": number, "row": self.table_rows[table].get(row, 0),
                          "col": self.cell_cols.get(el, 0), "header": tag == "th"}
            locator.update({k: attributes[k] for k in ("table", "row", "col")})
        self.units.append(ParsedUnit(kind, text, locator, self.path(), attributes))


def _nearest_table(el):
    return next((a for a in el.iterancestors() if isinstance(a.tag, str) and a.tag.lower() == "table"), None)


def _cell_table(el):
    """The table whose cell ``el`` is or is inside (the nearest one), else ``None``."""
    in_cell = False
    for a in (el, *el.iterancestors()):
        tag = a.tag.lower() if isinstance(a.tag, str) else ""
        in_cell = in_cell or tag in ("td", "th")
        if tag == "table":
            return a if in_cell else None
    return None


#: Ruby annotations: the reading of the base text (furigana), not the text itself (as EPUB's parser).
_RUBY_READINGS = ("rt", "rp", "rtc")

#: MediaWiki's "[edit]" link beside each section heading (Wikipedia, Fandom, any MediaWiki site; its skins
#: render ``<span class="mw-editsection">`` in it): a heading read "Details[edit]", and every section path below.
_EDIT_SECTION = "mw-editsection"


def _texts(el) -> tuple[str, str]:
    """``el``'s text as trafilatura reads it (ruby readings inline, ``漢(かん)字じ``; a MediaWiki
    heading with its ``[edit]`` link; an equation as its TeX, :func:`_math_tex`) and as the unit
    keeps it: the base text only (``漢字``, found by a search for it and cited as it reads), no edit
    link (:data:`_EDIT_SECTION`), an equation's shown text (:data:`_MATH`)."""
    matched = _inline_text(el)
    if next(el.iter(*_RUBY_READINGS, _MATH, *_CONTROLS, "textarea"), None) is None and not any(map(_edit_link, el.iter("span"))):
        return matched, matched
    return matched, _inline_text(el, shown=True)


def _skipped(el, tag: str) -> bool:
    """Whether the walk reads nothing of ``el`` (its lower-case ``tag``): a tag of :data:`_SKIP` but a
    rendered one (:func:`~fabric_resources.parsing.html.rendered.transparent`), or hidden."""
    return (tag in _SKIP and not transparent(el)) or _hidden(el)


def _edit_link(el) -> bool:
    return _EDIT_SECTION in (el.get("class") or "").split()


def _inline_text(el, shown: bool = False) -> str:
    """Text of ``el`` and its descendants, skipping script/style and the like (and, with ``shown``,
    ruby readings and MediaWiki's edit links: what the unit keeps), an equation (MathML) as its text
    with ``shown``, else as trafilatura writes it; ``<br>``, and a rule or block (:data:`_BLOCKS`,
    :data:`_BLOCK_DISPLAY`) around its text, -> a line end."""
    parts: list[str] = []

    def add(node) -> None:
        tag = node.tag.lower() if isinstance(node.tag, str) else None
        if tag is None:  # comment or processing instruction
            return
        if tag in _CONTROLS and (not shown or _hidden(node)):  # trafilatura drops them: in the unit's text only
            return
        if tag in ("input", "select") or (tag == "textarea" and shown and not _hidden(node)):
            parts.append(control_text(node))  # a textarea's placeholder too, as an input's: in the unit only
            return
        if tag in _READ_INLINE and tag != "button" and not _hidden(node):
            parts.append((node.text or "") if tag == "textarea" else svg_text(node) if tag == "svg"
                         else _math_text(node) if shown else _math_tex(node))
            return
        if (_skipped(node, tag) and tag != "button") or (shown and (tag in _RUBY_READINGS or _edit_link(node))):
            return
        # A rule or a block read inline (a legend, an xmp; a link's paragraphs, a teaser card's) ends a
        # line where it stands: "<div>first part<hr>second part</div>" read "first partsecond part",
        # "<a><p>one</p><p>two</p></a>" "onetwo", neither word found.
        block = tag in _BLOCK_DISPLAY or tag in _BLOCKS
        if tag == "br" or block:
            parts.append("\n")
        parts.append(node.text or "")
        for child in node:
            add(child)
            parts.append(child.tail or "")
        if block:
            parts.append("\n")

    add(el)
    return "".join(parts)


def _math_text(math) -> str:
    """What a MathML ``math`` element shows, as text in document order: its tokens' text, not a
    ``semantics``' annotations (:data:`_MATH_UNSHOWN`) nor what an inline style or ``hidden`` hides."""
    parts: list[str] = []

    def add(node) -> None:
        for child in node:
            tag = child.tag.lower() if isinstance(child.tag, str) else None
            if tag is not None and tag not in _MATH_UNSHOWN and not _hidden(child):
                parts.append(child.text or "")
                add(child)
            parts.append(child.tail or "")

    parts.append(math.text or "")
    add(math)
    return "".join(parts)


_TEX = etree.XPath('.//*[local-name()="annotation"][@encoding="application/x-tex"]')


def _math_tex(math) -> str:
    """What trafilatura writes of a MathML ``math`` element (its ``recover_math``): its TeX
    annotation, else its ``alttext``, trimmed, as ``\\(…\\)`` (``\\[…\\]`` for ``display="block"``);
    nothing when it has neither."""
    annotation = _TEX(math)
    tex = _WS.sub(" ", (annotation[0].text or "") if annotation else (math.get("alttext") or "")).strip()
    if not tex:
        return ""
    return f"\\[{tex}\\]" if math.get("display") == "block" else f"\\({tex}\\)"
