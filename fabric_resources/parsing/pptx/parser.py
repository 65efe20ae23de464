"""The PPTX parser: per slide its title, the text of its shapes, table cells and speaker notes.

Shapes are read in reading position (top to bottom, then left to right; the
title first), group shapes recursively. A shape that cannot be read (a
malformed part python-pptx rejects) is skipped and listed; the deck fails only
when the package itself cannot be opened.
"""

from __future__ import annotations

import io
import re
import zipfile
from typing import TYPE_CHECKING, Any

from lxml import etree

from fabric_resources.parsing.document import ParsedDocument, ParsedRelationship, ParsedUnit, ParseError
from fabric_resources.parsing.ooxml import admit_package
from fabric_resources.parsing.pptx import MEDIA_TYPE, PARSER_NAME, PARSER_VERSION

if TYPE_CHECKING:
    from fabric_resources.config import OoxmlParserConfig

_SPACES = re.compile(r"[ \t\u00a0\u000b]+")
# Placeholders that repeat the master's furniture rather than the slide's content.
_FURNITURE = {"DATE", "FOOTER", "SLIDE_NUMBER", "HEADER"}
_TITLES = {"TITLE", "CENTER_TITLE", "VERTICAL_TITLE"}
_SHAPE_ERRORS = (KeyError, ValueError, AttributeError, TypeError, IndexError, etree.LxmlError, zipfile.BadZipFile)


def parse_pptx(data: bytes, config: "OoxmlParserConfig", media_type: str = MEDIA_TYPE) -> ParsedDocument:
    """Parse a PPTX deck into units, slide by slide.

    Returns
    -------
    ParsedDocument
        Per slide, in order: ``slide_title`` (title placeholder), ``paragraph`` (one per text
        shape: its paragraphs joined by ``"\\n"``), ``table_cell`` (``table``, ``row``, ``col``),
        ``speaker_note`` (the notes page). Locator ``{"slide": 1-based, "shape_id", "shape_name"}``
        (shapes inside groups: ``"group_path"``), cells add ``table``/``row``/``col``, notes
        ``{"slide", "notes": true}``. ``section_path`` = ``(slide title,)`` or ``("Slide n",)``.
        Date, footer and slide-number placeholders are left out. ``metadata``: ``slides``,
        ``skipped_shapes`` (``[{"slide", "shape", "reason"}]``).

    Raises
    ------
    ParseError
        As :func:`~fabric_resources.parsing.ooxml.admit_package`; ``malformed-pptx`` when the
        package cannot be opened as a presentation; ``cap-units``.
    """
    admit_package(data, config, "pptx")
    import pptx
    from pptx.exc import PackageNotFoundError

    try:
        deck = pptx.Presentation(io.BytesIO(data))
        slides = list(deck.slides)
    except (PackageNotFoundError, *_SHAPE_ERRORS) as exc:
        raise ParseError("malformed-pptx", f"{type(exc).__name__}: {exc}") from None
    units: list[ParsedUnit] = []
    rels: list[ParsedRelationship] = []
    skipped: list[dict[str, Any]] = []
    tables = 0

    def add(unit: ParsedUnit) -> int:
        if len(units) >= config.max_units:
            raise ParseError("cap-units", f"more than {config.max_units} units")
        units.append(unit)
        return len(units) - 1

    for number, slide in enumerate(slides, start=1):
        try:
            shapes = _flatten(slide.shapes, ())
        except _SHAPE_ERRORS as exc:
            skipped.append({"slide": number, "shape": None, "reason": f"{type(exc).__name__}: {exc}"})
            continue
        title_shapes = [s for s, _ in shapes if _placeholder(s) in _TITLES]
        title = _text(title_shapes[0]) if title_shapes else ""
        path = (title,) if title else (f"Slide {number}",)
        ordered = sorted(shapes, key=lambda sg: (_placeholder(sg[0]) not in _TITLES, _top(sg[0]), _left(sg[0])))
        for shape, group in ordered:
            try:
                kind = _placeholder(shape)
                if kind in _FURNITURE:
                    continue
                locator: dict[str, Any] = {"slide": number, "shape_id": shape.shape_id, "shape_name": shape.name}
                if group:
                    locator["group_path"] = list(group)
                if getattr(shape, "has_table", False) and shape.has_table:
                    for r, row in enumerate(shape.table.rows):
                        previous = None
                        for c, cell in enumerate(row.cells):
                            if cell.is_spanned:
                                continue
                            text = _clean(cell.text_frame.text)
                            if text:
                                index = add(ParsedUnit("table_cell", text, {**locator, "table": tables, "row": r, "col": c},
                                                       path, {"table": tables, "row": r, "col": c, "header": r == 0}))
                                if previous is not None:
                                    rels.append(ParsedRelationship("next_in_table_row", previous, index))
                                previous = index
                    tables += 1
                    continue
                text = _text(shape)
                if not text:
                    continue
                if kind in _TITLES and text == title:
                    add(ParsedUnit("slide_title", text, locator, (), {"slide": number}))
                else:
                    add(ParsedUnit("paragraph", text, locator, path))
            except _SHAPE_ERRORS as exc:
                skipped.append({"slide": number, "shape": getattr(shape, "name", None),
                                "reason": f"{type(exc).__name__}: {exc}"})
        try:
            notes = _clean(slide.notes_slide.notes_text_frame.text) if slide.has_notes_slide and slide.notes_slide.notes_text_frame else ""
        except _SHAPE_ERRORS as exc:
            skipped.append({"slide": number, "shape": "notes", "reason": f"{type(exc).__name__}: {exc}"})
            notes = ""
        if notes:
            add(ParsedUnit("speaker_note", notes, {"slide": number, "notes": True}, path, {"slide": number}))
    core = deck.core_properties
    return ParsedDocument(
        PARSER_NAME, PARSER_VERSION, MEDIA_TYPE, units, rels,
        title=(core.title or "").strip() or None, language=(core.language or "").strip() or None,
        metadata={"slides": len(slides), "tables": tables, "skipped_shapes": skipped},
    )


def _flatten(shapes, group: tuple[str, ...]) -> list[tuple[Any, tuple[str, ...]]]:
    out = []
    for shape in shapes:
        if shape.shape_type is not None and shape.shape_type == 6:  # MSO_SHAPE_TYPE.GROUP
            out.extend(_flatten(shape.shapes, (*group, shape.name)))
        else:
            out.append((shape, group))
    return out


def _placeholder(shape) -> str | None:
    if not shape.is_placeholder:
        return None
    try:
        return shape.placeholder_format.type.name
    except (ValueError, AttributeError, KeyError):
        return None


def _top(shape) -> int:
    return shape.top if shape.top is not None else 0


def _left(shape) -> int:
    return shape.left if shape.left is not None else 0


def _text(shape) -> str:
    return _clean(shape.text_frame.text) if getattr(shape, "has_text_frame", False) and shape.has_text_frame else ""


def _clean(text: str) -> str:
    lines = [_SPACES.sub(" ", line).strip() for line in text.replace("\r", "\n").split("\n")]
    return "\n".join(line for line in lines if line)
