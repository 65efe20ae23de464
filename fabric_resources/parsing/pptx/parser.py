"""The PPTX parser: per slide its title, the text of its shapes, table cells and speaker notes.

Shapes are read in reading position (the title first, then bands of shapes whose
vertical extents overlap, top to bottom, each left to right: :func:`reading_order`),
group shapes recursively. python-pptx parses attributes only when
they are read, so any read may meet a value it rejects (``<a:off y="zz"/>``,
``<p:cNvPr id="x3"/>``): each slide and each shape is read inside its own net.
An attribute that only places or names a shape (position, id, placeholder kind,
a cell's merge flags) is treated as absent when unreadable; a shape whose text
cannot be read is skipped and listed, as is a slide that cannot be opened. The
deck fails only when the package itself cannot be opened.
"""

from __future__ import annotations

import zipfile
from typing import TYPE_CHECKING, Any

from lxml import etree

from fabric_resources.parsing.document import (
    ParsedDocument, ParsedRelationship, ParsedUnit, ParseError, UnreadPart, exception_text,
)
from fabric_resources.parsing.ooxml import (
    admit_package, element_text, relationship_targets, title_and_language, opened_or_repaired,
)
from fabric_resources.parsing.lxml_limits import syntax_error_reason
from fabric_resources.parsing.pptx import MEDIA_TYPE, PARSER_NAME, PARSER_VERSION
from fabric_resources.parsing.pptx.backdrops import Backdrops
from fabric_resources.parsing.pptx.comments import slide_comments
from fabric_resources.parsing.pptx.text import body_text as _body_text, clean as _clean

if TYPE_CHECKING:
    from fabric_resources.config import OoxmlParserConfig

# Placeholders that number the slide, or a header that a slide never shows (ECMA-376 §19.7.10: a
# header placeholder is for notes and handouts). A footer's or date's text is typed by the deck's
# author and shown on the slide, so it is read (it was left out silently before pptx parser v5).
_FURNITURE = {"SLIDE_NUMBER", "HEADER"}
_TITLES = {"TITLE", "CENTER_TITLE", "VERTICAL_TITLE"}
# Values of an XML Schema boolean (a:tc hMerge, vMerge; p:cNvPr hidden; p:sld show).
_TRUE = {"1", "true"}
_FALSE = {"0", "false"}


def _shape_errors() -> tuple[type[BaseException], ...]:
    """What python-pptx raises on XML it cannot read: its own ``InvalidXmlError`` (a
    ``PythonPptxError``), ``ValueError`` from a number or enumeration attribute, ``KeyError`` from a
    missing relationship, and the rest seen on malformed parts. ParseError (``cap-units``) is not
    one of them: it must end the parse."""
    from pptx.exc import PythonPptxError

    return (PythonPptxError, KeyError, ValueError, AttributeError, TypeError, IndexError, NotImplementedError,
            etree.LxmlError, zipfile.BadZipFile)


def parse_pptx(data: bytes, config: "OoxmlParserConfig", media_type: str = MEDIA_TYPE) -> ParsedDocument:
    """Parse a PPTX deck into units, slide by slide.

    Returns
    -------
    ParsedDocument
        Per slide, in order: ``slide_title`` (title placeholder), ``paragraph`` (one per text
        shape: its paragraphs joined by ``"\\n"``), ``table_cell`` (``table``, ``row``, ``col``),
        ``speaker_note`` (the notes page), then a ``note`` per review comment and reply on the slide
        (:mod:`.comments`; locator ``{"slide", "part", "note_type": "comment", "note_id"}``, never
        joined to the slide's text; a comments part that cannot be read is listed as
        ``"slide 2: comments"``; the author is not kept). A chart's ``paragraph`` holds its title, axis titles and
        series names; a SmartArt graphic's, the text of its nodes. Locator ``{"slide": 1-based, "shape_id", "shape_name"}``
        (``shape_id`` None when unreadable; shapes inside groups: ``"group_path"``), cells add
        ``table``/``row``/``col``, notes ``{"slide", "notes": true}``. ``section_path`` =
        ``(slide title,)`` or ``("Slide n",)``. A ``speaker_note`` holds the notes placeholder's text, then that of
        text boxes added on the notes page. Slide-number and header placeholders are left
        out; a footer's and a date's text is read like any shape's. After the slides, the layouts' and masters' (:mod:`.backdrops`). A shape whose position is unreadable sorts as one without a position (top
        left), keeping its document order. ``metadata``: ``slides``, ``tables``,
        ``skipped_shapes`` (``[{"slide", "shape", "reason"}]``; ``shape`` is the shape's name,
        ``"notes"``, or None for the whole slide), which are also the document's ``unread`` parts
        (``"slide 2: Table 4"``), ``skipped_parts`` (``[{"part", "reason"}]``: a malformed XML
        part but the presentation part, or one declaring a DTD (OPC forbids it), ``cap-depth`` for one nested past libxml2's 256 levels, or
        a part a relationship names that the package lacks, ``missing-part``; left out so that the
        rest opens, and also ``unread``, a slide's part as that slide: ``"slide 2"``, the reason
        ending with the part's name),
        ``repeated_slide_entries`` (``p:sldId`` entries naming a slide part an earlier one named:
        the slide is read once, at its first entry, and numbered so),
        ``hidden_slides`` (the numbers of slides marked ``show="0"``)
        and ``hidden_shapes`` (how many shapes were left out as hidden).

        A shape marked hidden (``p:cNvPr hidden="1"``, ECMA-376 §19.3.1.12), or inside a hidden
        group, yields no text: PowerPoint neither shows nor prints it. A hidden slide
        (``p:sld show="0"``, §19.3.1.38) is skipped in the slide show but shown in the editor, so
        its text is kept and every locator on it says ``"hidden": true``.

    Raises
    ------
    ParseError
        As :func:`~fabric_resources.parsing.ooxml.admit_package`; ``malformed-pptx`` when the
        package cannot be opened as a presentation; ``cap-units``.
    """
    admit_package(data, config, "pptx")
    import pptx
    from pptx.exc import PackageNotFoundError

    errors = _shape_errors()
    try:
        # A part missing or malformed: the rest is read, that part listed unread.
        deck, lost = opened_or_repaired(data, pptx.Presentation)
        # Not deck.slides: it resolves every slide's relationship at once, so one dangling
        # reference would fail the deck; each slide is resolved inside its own net below.
        slide_ids = list(deck.element.sldIdLst if deck.element.sldIdLst is not None else ())
    except (PackageNotFoundError, *errors) as exc:
        raise ParseError(syntax_error_reason(exc, "malformed-pptx"), exception_text(exc)) from None
    reader = _DeckReader(config.max_units, errors)
    # A slide whose part was left out (malformed, too deep for libxml2, missing) is listed as that
    # slide with the part's reason, once: its relationship went with it, and python-pptx's KeyError
    # for it ("no relationship with key 'rId7'") was listed as a second, misleading reason.
    lost_reasons = dict(lost)
    slide_parts = _slide_parts(data, deck.part.partname, errors) if lost else {}
    listed: set[str] = set()
    # Each slide part is one slide (ECMA-376 Part 1 §19.2.1.33: a p:sldId "specifies a presentation
    # slide", its id unique in the presentation). Two entries naming one part, by one relationship
    # or two, make no second slide: python-pptx yields the slide once per entry, so its text was
    # indexed twice and every later slide's number shifted. The part is read at its first entry,
    # later entries counted in ``repeated_slide_entries``, and slides numbered as the distinct
    # parts stand in the list: nothing is lost, so the deck does not fail.
    read_parts: set = set()
    backdrops = Backdrops()
    repeated = 0
    number = 0
    for slide_id in slide_ids:
        rel = deck.part.rels.get(slide_id.rId)
        part = slide_parts.get(slide_id.rId)
        key = rel.target_part if rel is not None and not rel.is_external else part
        if key is not None and key in read_parts:
            repeated += 1
            continue
        if key is not None:
            read_parts.add(key)
        number += 1
        if part in lost_reasons and slide_id.rId not in deck.part.rels:
            reader.skipped.append({"slide": number, "shape": None, "reason": f"{lost_reasons[part]} ({part})"})
            listed.add(part)
            continue
        try:
            backdrops.note(number, reader.slide(number, deck.part.related_slide(slide_id.rId)), errors)
        except errors as exc:
            reader.skip(number, None, exc)
    backdrops.read(reader, _Placed, _shape_words, reading_order)  # what layouts and masters draw, once each
    title, language = title_and_language(deck, errors)
    return ParsedDocument(
        PARSER_NAME, PARSER_VERSION, MEDIA_TYPE, reader.units, reader.relationships,
        title=title, language=language,
        metadata={"slides": number, "repeated_slide_entries": repeated, "tables": reader.tables,
                  "skipped_shapes": reader.skipped,
                  "hidden_slides": reader.hidden_slides, "hidden_shapes": reader.hidden_shapes,
                  "skipped_parts": [{"part": part, "reason": reason} for part, reason in lost]},
        unread=[UnreadPart(part, reason) for part, reason in lost if part not in listed]
        + [UnreadPart(f"slide {s['slide']}" + (f": {s['shape']}" if s["shape"] else ""), s["reason"])
           for s in reader.skipped],
    )


def _slide_parts(data: bytes, presentation: str, errors: tuple[type[BaseException], ...]) -> dict[str, str]:
    """rId -> member name of the presentation part's relationships in the package as it came
    (``presentation``: python-pptx's partname, ``/ppt/presentation.xml``); ``{}`` when unreadable
    (then a lost slide is listed as python-pptx words it)."""
    try:
        return relationship_targets(data, str(presentation).lstrip("/"))
    except errors:
        return {}


class _DeckReader:
    """The units of a deck, read slide by slide; what could not be read, listed in ``skipped``."""

    def __init__(self, max_units: int, errors: tuple[type[BaseException], ...]) -> None:
        self.max_units = max_units
        self.errors = errors
        self.units: list[ParsedUnit] = []
        self.relationships: list[ParsedRelationship] = []
        self.skipped: list[dict[str, Any]] = []
        self.tables = 0
        self.hidden_slides: list[int] = []
        self.hidden_shapes = 0

    def add(self, unit: ParsedUnit) -> int:
        if len(self.units) >= self.max_units:
            raise ParseError("cap-units", f"more than {self.max_units} units")
        self.units.append(unit)
        return len(self.units) - 1

    def skip(self, slide: int, shape: str | None, exc: BaseException) -> None:
        self.skipped.append({"slide": slide, "shape": shape, "reason": exception_text(exc)})

    def slide(self, number: int, slide):
        from pptx.shapes.shapetree import SlideShapeFactory

        shapes = [_Placed(shape, group, self.errors) for shape, group in self.flatten(number, slide.shapes, (),
                                                                                        SlideShapeFactory)]
        # Read from the element: python-pptx has no accessor for a slide's show flag.
        hidden = slide.element.get("show", "1").strip().lower() in _FALSE
        if hidden:
            self.hidden_slides.append(number)
        titles = [p for p in shapes if p.kind in _TITLES]
        try:
            title = _text(titles[0].shape) if titles else ""
        except self.errors:  # the shape is listed when its own turn comes below
            title = ""
        path = (title,) if title else (f"Slide {number}",)
        for placed in reading_order(shapes):
            try:
                self.shape(number, placed, title, path, hidden)
            except self.errors as exc:
                self.skip(number, placed.name, exc)
        try:
            notes = self.notes(number, slide.notes_slide) if slide.has_notes_slide else ""
        except self.errors as exc:
            self.skip(number, "notes", exc)
            notes = ""
        if notes:
            where = {"slide": number, "notes": True, **({"hidden": True} if hidden else {})}
            self.add(ParsedUnit("speaker_note", notes, where, path, {"slide": number}))
        self.comments(number, slide.part, path, hidden)
        return slide

    def comments(self, number: int, part, path: tuple[str, ...], hidden: bool) -> None:
        """A ``note`` unit per review comment on the slide (:func:`.comments.slide_comments`), after
        its notes, never joined to the slide's text; a comments part that cannot be read is listed
        as ``comments``."""
        try:
            comments = slide_comments(part)
        except self.errors as exc:
            self.skip(number, "comments", exc)
            return
        for name, comment_id, text in comments:
            if text:
                where = {"slide": number, "part": name, "note_type": "comment", "note_id": comment_id,
                         **({"hidden": True} if hidden else {})}
                self.add(ParsedUnit("note", text, where, path, {"note_type": "comment", "note_id": comment_id}))

    def notes(self, number: int, notes_slide) -> str:
        """The text of a notes page: its notes placeholder's, then that of each text box or shape a
        presenter added on the page (Notes Page view; printed with the notes), in document order.
        Only the placeholder was read: the added boxes' text was silently missing. The page's other
        placeholders (the slide image, its number, the notes master's header and footer) are not
        read; a shape that cannot be read is listed as ``notes: <name>``."""
        from pptx.shapes.shapetree import BaseShapeFactory

        frame = notes_slide.notes_text_frame
        texts = [_frame_text(frame) if frame is not None else ""]
        for shape, _ in self.flatten(number, notes_slide.shapes, (), BaseShapeFactory):
            try:
                if not shape.is_placeholder:
                    texts.append(_diagram_text(shape) or _text(shape))
            except self.errors as exc:
                self.skip(number, f"notes: {_element_name(shape.element)}", exc)
        return _clean("\n".join(texts))

    def flatten(self, number: int, shapes, group: tuple[str, ...], factory) -> list[tuple[Any, tuple[str, ...]]]:
        """The shapes of a tree in document order, groups opened; each element built in its own net.

        Iterating ``shapes`` itself would build every shape at once, and one unreadable element
        (a placeholder of an unknown type) would lose the slide. Such an element is built again
        as a plain shape (placeholder kind ignored); one that cannot be built at all is skipped.
        """
        from pptx.shapes.group import GroupShape
        from pptx.shapes.shapetree import BaseShapeFactory

        out: list[tuple[Any, tuple[str, ...]]] = []
        for element in _shape_elements(shapes.element):
            if _hidden_element(element):
                self.hidden_shapes += 1
                continue
            try:
                try:
                    shape = factory(element, shapes)
                except self.errors:
                    shape = BaseShapeFactory(element, shapes)
                if isinstance(shape, GroupShape):
                    out.extend(self.flatten(number, shape.shapes, (*group, shape.name), BaseShapeFactory))
                else:
                    out.append((shape, group))
            except self.errors as exc:
                self.skip(number, _element_name(element), exc)
        return out

    def shape(self, number: int, placed: "_Placed", title: str, path: tuple[str, ...], hidden: bool) -> None:
        shape, kind = placed.shape, placed.kind
        if kind in _FURNITURE:
            return
        locator: dict[str, Any] = {"slide": number, "shape_id": placed.shape_id, "shape_name": placed.name}
        if hidden:
            locator["hidden"] = True
        if placed.group:
            locator["group_path"] = list(placed.group)
        if getattr(shape, "has_table", False) and shape.has_table:
            self.table(shape.table, locator, path)
            return
        text = _shape_words(shape)
        if not text:
            return
        if kind in _TITLES and text == title:
            self.add(ParsedUnit("slide_title", text, locator, (), {"slide": number}))
        else:
            self.add(ParsedUnit("paragraph", text, locator, path))

    def table(self, table, locator: dict[str, Any], path: tuple[str, ...]) -> None:
        rows = list(table.rows)
        number = self.tables
        self.tables += 1
        for r, row in enumerate(rows):
            previous = None
            for c, cell in enumerate(row.cells):
                if _spanned(cell):
                    continue
                text = _clean(_frame_text(cell.text_frame))
                if text:
                    where = {"table": number, "row": r, "col": c}
                    index = self.add(ParsedUnit("table_cell", text, {**locator, **where}, path,
                                                {**where, "header": r == 0}))
                    if previous is not None:
                        self.relationships.append(ParsedRelationship("next_in_table_row", previous, index))
                    previous = index


class _Placed:
    """A shape with what places and names it, each read once and None (or 0) when unreadable:
    these only order and label the shape's text, so a bad value must not lose it."""

    def __init__(self, shape, group: tuple[str, ...], errors: tuple[type[BaseException], ...]) -> None:
        def read(get, default=None):
            try:
                return get()
            except errors:
                return default

        self.shape, self.group = shape, group
        self.name: str | None = read(lambda: shape.name)
        self.shape_id: int | None = read(lambda: shape.shape_id)
        self.kind: str | None = read(lambda: _placeholder(shape))
        # A placeholder without its own position inherits its layout's (a missing layout: None).
        self.top: int = read(lambda: shape.top, None) or 0
        self.left: int = read(lambda: shape.left, None) or 0
        self.height: int = max(read(lambda: shape.height, None) or 0, 0)


def reading_order(shapes: list) -> list:
    """``shapes`` (each with ``kind``, ``top``, ``left``, ``height`` in EMU) in reading order: the
    title first, then bands top to bottom, each band's shapes left to right (then top to bottom).

    A band is a run of shapes (by top) whose vertical extents overlap: side-by-side boxes of a
    two-column slide are one band, so the left column is read before the right one even where
    the right box starts a little higher (a caption over it, a nudge): sorting by top then left
    read the right column's first box before the left column. Shapes that only touch (one ends
    where the next begins) start a new band, so a grid of boxes reads row by row as before. A
    shape whose position or size is unreadable counts as 0 (top left, no height); the sort is
    stable, so shapes at the same place keep their document order.

    >>> from types import SimpleNamespace as S
    >>> boxes = [S(name="right", kind=None, top=95, left=500, height=300),
    ...          S(name="left", kind=None, top=100, left=50, height=300),
    ...          S(name="footer", kind=None, top=450, left=50, height=20)]
    >>> [b.name for b in reading_order(boxes)]
    ['left', 'right', 'footer']
    """
    titles = [p for p in shapes if p.kind in _TITLES]
    rest = sorted((p for p in shapes if p.kind not in _TITLES), key=lambda p: p.top)
    bands: list[list] = []
    bottom = None
    for p in rest:
        if bottom is not None and p.top < bottom:
            bands[-1].append(p)
            bottom = max(bottom, p.top + p.height)
        else:
            bands.append([p])
            bottom = p.top + p.height
    return titles + [p for band in bands for p in sorted(band, key=lambda p: (p.left, p.top))]


_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
_ALTERNATE = f"{{{_MC}}}AlternateContent"


def _shape_elements(tree) -> list:
    """The shape elements of a ``p:spTree`` or ``p:grpSp`` in document order, as python-pptx's
    ``iter_shape_elms`` gives them, and those of one branch of each ``mc:AlternateContent`` among
    them (ECMA-376 Part 3 §10.2: the ``mc:Choice``, else the ``mc:Fallback``). PowerPoint wraps a
    text box holding an equation so (its fallback is a picture of the text): python-pptx skips
    the wrapper, and the box's text was silently missing."""
    tags = tree._shape_tags
    out = []
    for child in tree.iterchildren():
        if child.tag in tags:
            out.append(child)
        elif child.tag == _ALTERNATE:
            branch = child.find(f"{{{_MC}}}Choice")
            branch = branch if branch is not None else child.find(f"{{{_MC}}}Fallback")
            if branch is not None:
                out.extend(e for e in branch.iterchildren() if e.tag in tags)
    return out


def _element_name(element) -> str | None:
    """The ``name`` of a shape element's ``p:cNvPr``, read without python-pptx (which failed on it)."""
    names = element.xpath("./*[1]/*[local-name()='cNvPr']/@name")
    return str(names[0]) if names else None


def _hidden_element(element) -> bool:
    """Whether a shape element's ``p:cNvPr`` says ``hidden`` (an XML Schema boolean; absent or
    unreadable: shown)."""
    flags = element.xpath("./*[1]/*[local-name()='cNvPr']/@hidden")
    return bool(flags) and str(flags[0]).strip().lower() in _TRUE


def _placeholder(shape) -> str | None:
    if not shape.is_placeholder:
        return None
    return shape.placeholder_format.type.name


def _spanned(cell) -> bool:
    """Whether a table cell is covered by a merge (its text belongs to the merge origin).

    Read from the ``a:tc`` attributes directly: python-pptx raises on a value that is not an
    XML boolean, and an unreadable merge flag is treated as absent (the cell is read).
    """
    tc = cell._tc  # python-pptx has no public accessor for the cell element
    return tc.get("hMerge") in _TRUE or tc.get("vMerge") in _TRUE


_DGM = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_NS = {"a": _A, "m": "http://schemas.openxmlformats.org/officeDocument/2006/math",
       "c": "http://schemas.openxmlformats.org/drawingml/2006/chart", "dgm": _DGM,
       "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships"}


# Compiled with their namespaces: python-pptx's element classes override ``xpath`` with its own map.
_PIECES = etree.XPath("./a:r/a:t/text() | ./a:fld/a:t/text() | ./a:br", namespaces=_NS)
_CHART_TEXTS = etree.XPath("./c:chart/c:title/c:tx | ./c:chart/c:plotArea/*/c:title/c:tx"
                           " | ./c:chart/c:plotArea/*/c:ser/c:tx", namespaces=_NS)
_RICH = etree.XPath("./c:rich/a:p", namespaces=_NS)
# The c:v elements, not their text() nodes: a comment inside one splits it into two nodes, read as two lines.
_CACHED = etree.XPath("./c:strRef/c:strCache/c:pt/c:v | ./c:v", namespaces=_NS)
_DIAGRAM_DATA = etree.XPath(f"./a:graphic/a:graphicData[@uri='{_DGM}']/dgm:relIds/@r:dm", namespaces=_NS)
_DIAGRAM_POINTS = etree.XPath("./dgm:ptLst/dgm:pt[not(@type) or @type='node' or @type='asst']/dgm:t/a:p",
                              namespaces=_NS)


def _paragraph_text(paragraph) -> str:
    """One ``a:p``'s text: its runs and fields, a line break (``a:br``) as a new line."""
    return "".join(piece if isinstance(piece, str) else "\n" for piece in _PIECES(paragraph))


def _chart_text(chart) -> str:
    """The words a chart shows (ECMA-376 Part 1, §21.2): its title, its axis titles and its series
    names, each rich text (``c:tx/c:rich``) or a cell reference's cached value
    (``c:tx/c:strRef/c:strCache``); one per line, in the chart part's order, repeats once. Category labels and
    values are data, not read. python-pptx reads a chart but gives it no text, so it was silently
    missing (pptx parser v4)."""
    space = chart._chartSpace  # python-pptx has no accessor for axis or series title elements
    texts: list[str] = []
    for tx in _CHART_TEXTS(space):
        rich = _RICH(tx)
        if rich:
            texts.extend(_paragraph_text(p) for p in rich)
        else:
            texts.extend(element_text(v) for v in _CACHED(tx))
    return _clean("\n".join(dict.fromkeys(t for t in texts if t.strip())))


def _diagram_text(shape) -> str:
    """The text of a SmartArt graphic: the text of every content point of its data model
    (``dgm:dataModel``, ECMA-376 Part 1, §21.4; points of type ``node``, the default, and
    ``asst``), in the model's order, one paragraph a line. ``""`` for any other graphic frame.
    python-pptx does not read SmartArt, so its text was silently missing (pptx parser v4)."""
    from pptx.oxml import parse_xml

    ids = _DIAGRAM_DATA(shape.element)
    if not ids:
        return ""
    model = parse_xml(shape.part.related_part(str(ids[0])).blob)
    return _clean("\n".join(_paragraph_text(p) for p in _DIAGRAM_POINTS(model)))


def _shape_words(shape) -> str:
    """A shape's text: a chart's words, a SmartArt graphic's, else its text frame's."""
    if getattr(shape, "has_chart", False) and shape.has_chart:
        return _chart_text(shape.chart)
    return _diagram_text(shape) or _text(shape)


def _text(shape) -> str:
    return _clean(_frame_text(shape.text_frame)) if getattr(shape, "has_text_frame", False) and shape.has_text_frame else ""


def _frame_text(frame) -> str:
    """A text frame's text (:func:`.text.body_text`)."""
    return _body_text(frame._txBody)  # python-pptx has no accessor for the wrapper
