"""The text a slide shows from its layout and its master: a company name, a confidentiality notice
in a text box drawn on every slide.

PowerPoint draws a slide over its layout's shapes and those over its master's (ECMA-376 Part 1
§19.3.1.38, §19.3.1.39: ``showMasterSp`` absent or true). A slide marked ``showMasterSp="0"``
("Hide background graphics") shows neither; a layout so marked hides its master's shapes. Only
shapes that are not placeholders show: a placeholder of a layout or master is a frame the slide
fills with its own (read with the slide), and its text is a prompt ("Click to edit Master title
style") no slide shows. Each part is read once, however many slides show it, as a DOCX header is.
"""

from __future__ import annotations

from typing import Any

_FALSE = {"0", "false"}
_SLIDE_NUMBER = "\u2039#\u203a"  # "‹#›", what a slide-number field holds on a layout or master


def _shows(element) -> bool:
    """A ``showMasterSp`` flag: absent or unreadable, shown."""
    return (element.get("showMasterSp") or "1").strip().lower() not in _FALSE


class Backdrops:
    """The layouts and masters the slides show, each with the slides showing it, in order of first showing."""

    def __init__(self) -> None:
        self.shown: dict[Any, tuple[str, Any, list[int]]] = {}  # part -> (kind, layout or master, slide numbers)

    def note(self, number: int, slide, errors: tuple[type[BaseException], ...]) -> None:
        """Record what slide ``number`` shows of its layout and master; a dangling or unreadable
        layout shows nothing (the slide itself is read as before)."""
        if not _shows(slide.element):
            return
        try:
            layout = slide.slide_layout
        except errors:
            return
        try:
            master = layout.slide_master if _shows(layout.element) else None
        except errors:
            master = None
        for kind, obj in (("master", master), ("layout", layout)):  # the master is drawn beneath
            if obj is not None:
                self.shown.setdefault(obj.part, (kind, obj, []))[2].append(number)

    def read(self, reader, placed_shape, shape_words, reading_order) -> None:
        """Add a ``note`` unit to ``reader`` (the parser's ``_DeckReader``; ``placed_shape``,
        ``shape_words`` and ``reading_order`` its ``_Placed``, ``_shape_words`` and
        ``reading_order``, passed so this module imports no parser) per shape of text each
        shown layout and master draws, in reading order: locator ``{"part", "note_type": "layout"
        | "master", "note_id"`` (its number among them, by first showing) ``, "slides"`` (those
        showing it) ``, "shape_id", "shape_name"}``, no section path (it stands on many slides). A
        shape that cannot be read is listed under the first slide showing the part."""
        from pptx.shapes.shapetree import BaseShapeFactory

        from fabric_resources.parsing.pptx.text import clean

        numbers = {"layout": 0, "master": 0}
        for part, (kind, obj, slides) in self.shown.items():
            first = slides[0]
            name = str(part.partname).lstrip("/")
            try:
                shapes = [placed_shape(shape, group, reader.errors) for shape, group in reader.flatten(
                    first, obj.shapes, (), BaseShapeFactory) if not shape.is_placeholder]
            except reader.errors as exc:
                reader.skip(first, name, exc)
                continue
            units = []
            for placed in reading_order(shapes):
                try:
                    text = shape_words(placed.shape)
                    # A slide-number field's text here is PowerPoint's stand-in, each slide showing its own number.
                    text = clean(text.replace(_SLIDE_NUMBER, ""))
                except reader.errors as exc:
                    reader.skip(first, f"{name}: {placed.name}", exc)
                    continue
                if text:
                    units.append((placed, text))
            if not units:
                continue
            numbers[kind] += 1
            place = {"note_type": kind, "note_id": str(numbers[kind]), "slides": list(slides)}
            for placed, text in units:
                locator = {"part": name, **place, "shape_id": placed.shape_id, "shape_name": placed.name}
                if placed.group:
                    locator["group_path"] = list(placed.group)
                reader.add(_unit(text, locator, place))


def _unit(text: str, locator: dict, place: dict):
    from fabric_resources.parsing.document import ParsedUnit

    return ParsedUnit("note", text, locator, (), dict(place))
