"""The DOCX parser: body paragraphs, headings, list items, table cells, headers, footers, notes and review comments.

python-docx opens the package and resolves paragraph styles; the text of each
paragraph is read from its runs here (``w:t``, tabs, breaks, symbols (``w:sym``), an equation's
text (OMML ``m:t``, in its order: no fraction bar or superscript is written); deleted text of
tracked changes, field codes (a field nested in a code included) and hidden runs skipped), so
that note references keep their position. A part the document imports (``w:altChunk``) is read
in place when it is HTML, MHTML or plain text (:mod:`.imported`). Footnotes, endnotes and review comments are read from their own parts (python-docx
has no API for notes; its comments API reads no hidden runs, fields or reference marks) and follow
the body as ``note`` units, after the header and footer parts the sections show (:mod:`.headers`).

A numeric attribute that holds no number (``w:outlineLvl w:val="²"``) is ignored, as Word
ignores it. A body paragraph or table, or a notes part, that cannot be read all the same is
skipped and listed; the document fails only when its package or main part cannot be opened.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from lxml import etree

from fabric_resources.parsing.document import (
    ParsedDocument, ParsedRelationship, ParsedUnit, ParseError, UnreadPart, exception_text,
)
from fabric_resources.parsing.element_paths import ElementPaths
from fabric_resources.parsing.lxml_limits import syntax_error_reason
from fabric_resources.parsing.docx import MEDIA_TYPE, PARSER_NAME, PARSER_VERSION
from fabric_resources.parsing.docx.blocks import BODY_MATH, WRAPPERS, children, joined_lines, story_blocks, wrapped
from fabric_resources.parsing.docx.fields import open_fields
from fabric_resources.parsing.docx.graphics import graphic_parts, graphic_text
from fabric_resources.parsing.docx.headers import (STORY_ROOTS, even_and_odd_pages, section_properties, shown_stories,
    shown_where, unshown_parts)
from fabric_resources.parsing.docx.imported import ImportedParts, imported_reader
from fabric_resources.parsing.docx.runs import paragraph_text, symbol_char
from fabric_resources.parsing.docx.styles import NOTHING_HIDES, hidden_styles, recovered_styles, style_names
from fabric_resources.parsing.ooxml import (
    admit_package,
    decimal_number,
    title_and_language,
    opened_or_repaired,
)

if TYPE_CHECKING:
    from fabric_resources.config import OoxmlParserConfig

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
M = "http://schemas.openxmlformats.org/officeDocument/2006/math"  # OMML: Word's equations
_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_NS = {"w": W}
_HEADING_STYLE = re.compile(r"^(?:heading|überschrift|titre|título|kop)\s*(\d)$", re.IGNORECASE)
# The parts of notes, by the last word of their relationship type: footnotes, endnotes and review
# comments (ECMA-376 §17.13.4.2 w:comment, a reviewer's words beside the text, searched as the notes are).
_NOTE_RELS = {"footnotes": "footnote", "endnotes": "endnote", "comments": "comment"}
# What reading one body element or notes part may raise on XML the walk did not foresee: an error
# of that element (skipped and listed), not of the document. ParseError (cap-units) is not one.
_ELEMENT_ERRORS = (KeyError, ValueError, AttributeError, TypeError, IndexError, etree.LxmlError)
# What a review comment's locator keeps of the place its mark stands in (``marked_in``): a table
# cell's, or a header's, footer's or note's, so a comment on a header is cited as standing beside it.
_MARKED_PLACE = ("table", "row", "col", "note_type", "note_id", "sections", "page_types")
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)


def parse_docx(data: bytes, config: "OoxmlParserConfig", media_type: str = MEDIA_TYPE) -> ParsedDocument:
    """Parse a DOCX file into units in reading order.

    Returns
    -------
    ParsedDocument
        Body units in document order — ``heading`` (style ``Heading n`` or ``Title``, attribute
        ``level``), ``list_item`` (numbered or bulleted paragraphs, ``level``), ``paragraph``,
        ``table_cell`` (``table``, ``row``, ``col``: 0-based; merged cells once) — then one ``note`` per
        header and footer part shown (:meth:`_Walker.headers_and_footers`), then one per footnote, endnote and review comment (``note_id``: its ``w:id``; ``note_type``:
        ``footnote``, ``endnote``, ``comment``; a comment's author and date are not kept). Locators: body
        ``{"part": "word/document.xml" (the main part's own name), "element_path"}`` (lxml path of
        the ``w:p`` or ``w:tc``),
        cells also ``table``/``row``/``col``; notes ``{"part", "note_type", "note_id"}``, a header's
        or footer's with where it shows (``sections``, ``page_types``: :func:`~.headers.shown_where`),
        a comment's marking a cell, a header, a footer or a note with that place (``marked_in``).
        ``section_path``: the heading titles above the unit (for notes: of their reference).
        Relationships: ``note_ref`` from the paragraph (or cell, or note) holding a reference to its note
        (``start_char`` = ``end_char`` = the reference's position in the paragraph text,
        ``label`` = the note's number in order of first reference), ``next_in_table_row``.
        Text: runs joined, breaks as ``"\\n"``, runs of spaces, tabs and no-break spaces one space, ends stripped.
        A SmartArt graphic or chart in a body paragraph, a table cell or a note is a ``paragraph``
        after its text, its words (:mod:`.graphics`), its locator ``{"part": "word/charts/chart1.xml",
        "element_path"}`` (of its ``w:p``, in its own part), a cell's with ``table``/``row``/``col``,
        a note's with ``note_type``/``note_id``.
        Units of an imported HTML or text part (``w:altChunk``) are the HTML or text parser's, in
        place, their locators with ``"part"`` (``word/afchunk.htm``) added.
        ``metadata``: ``tables``, ``notes`` (comments included), ``unresolved_note_refs``, ``unreferenced_notes``
        (``"footnote:3"``, ``"comment:2"``: notes no shown reference marks — deleted, hidden or none — left out, as
        Word shows none of them), ``headers_footers`` (parts read), ``unshown_headers_footers`` (parts no section
        shows, not read), ``skipped_elements``
        (``[{"where", "reason"}]``: a body element by its ``element_path``, a notes part by
        name, a part a relationship names that the package lacks — ``missing-part`` — or a
        malformed XML part but the document part — the parser's error —: Word opens such a
        file, python-docx refused it whole; a malformed styles part's reason also says whether
        what lxml recovered of it was applied, :func:`~.styles.recovered_styles` — or an imported
        part not read, ``alt-chunk: …``), which are also the document's ``unread`` parts;
        ``unmapped_symbols``: ``w:sym`` codes of a symbol font read as nothing (:func:`symbol_char`).

    Raises
    ------
    ParseError
        As :func:`~fabric_resources.parsing.ooxml.admit_package`; ``malformed-docx`` when the
        package or its XML cannot be read; ``cap-units``.
    """
    admit_package(data, config, "docx")
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        # A part missing or malformed: the rest is read, that part listed unread.
        document, lost = opened_or_repaired(data, docx.Document)
    except (PackageNotFoundError, KeyError, ValueError, zipfile.BadZipFile, etree.LxmlError) as exc:
        raise ParseError(syntax_error_reason(exc, "malformed-docx"), exception_text(exc)) from None
    # A malformed styles part was left out to open the package: what lxml recovers of it still hides.
    recovered, lost = recovered_styles(data, str(document.part.partname).lstrip("/"), lost)
    walker = _Walker(document, config.max_units, recovered)
    walker.skipped += [{"where": part, "reason": reason} for part, reason in lost]
    walker.fields = open_fields(document.element.body)
    walker.body(document.element.body)
    walker.count_unmapped_symbols(document.element.body)
    walker.headers_and_footers(document)
    walker.notes(document)
    title, language = title_and_language(document, _ELEMENT_ERRORS)
    return ParsedDocument(
        PARSER_NAME, PARSER_VERSION, MEDIA_TYPE, walker.units, walker.relationships,
        title=title, language=language,
        metadata={"tables": walker.table_count, "notes": walker.note_count,
                  "unresolved_note_refs": walker.unresolved, "unreferenced_notes": walker.unreferenced,
                  "skipped_elements": walker.skipped, "unmapped_symbols": walker.unmapped_symbols,
                  "headers_footers": walker.story_count, "unshown_headers_footers": walker.unshown},
        unread=[UnreadPart(s["where"], s["reason"]) for s in walker.skipped],
    )


class _Walker:
    def __init__(self, document, max_units: int, recovered=None) -> None:
        self.document = document
        self.tree = document.element.getroottree()
        # The main part's own name: a package may call it anything its relationships name (ECMA-376
        # Part 2), and a locator naming word/document.xml there pointed at no part.
        self.part_name = str(document.part.partname).lstrip("/")
        self.element_path = ElementPaths(self.tree)  # getpath once per parent (per call: quadratic)
        self.max_units = max_units
        self.units: list[ParsedUnit] = []
        self.relationships: list[ParsedRelationship] = []
        self.sections: list[tuple[int, str]] = []
        self.table_count = self.note_count = 0
        self.unresolved: list[str] = []
        self.unreferenced: list[str] = []  # notes no shown reference marks: "footnote:3"
        # (unit index, position, note type, note id); unit index None: a mark no unit holds (a comment on an
        # otherwise empty paragraph), its note still shown and numbered, read under mark_paths' section path.
        self.refs: list[tuple[int | None, int, str, str]] = []
        self.mark_paths: dict[tuple[str, str], tuple[str, ...]] = {}
        self.skipped: list[dict[str, str]] = []  # [{"where", "reason"}]
        # Style ID -> name; from a recovered styles part (styles.recovered_styles) when one was malformed.
        self.styles: dict[str, Any] = style_names(recovered) if recovered is not None else {}
        self.recovered = recovered is not None
        try:
            element = recovered if self.recovered else document.styles.element
            self.hidden_styles = hidden_styles(element)
        except _ELEMENT_ERRORS:
            self.hidden_styles = NOTHING_HIDES
        self.unmapped_symbols = 0  # w:sym codes read as nothing (symbol_char): counted, not silent
        self.imported = ImportedParts()  # each imported part parsed once, however many w:altChunk name it
        self.fields: dict = {}  # w:p -> the fields open at its start (fields.open_fields), of the story read
        self.story_count = 0  # header and footer parts read
        self.unshown: list[str] = []  # header and footer parts no section shows

    # -- body ---------------------------------------------------------------
    def body(self, body) -> None:
        for child in body.iterchildren():
            try:
                if child.tag == f"{{{W}}}p" or child.tag in BODY_MATH:
                    self.paragraph(child)
                elif child.tag == f"{{{W}}}tbl":
                    self.table(child)
                elif child.tag == f"{{{W}}}altChunk":
                    self.alt_chunk(child)
                elif child.tag in WRAPPERS:  # a content control, custom XML, alternate content: body content
                    content = wrapped(child)
                    if content is not None:
                        self.body(content)
            except _ELEMENT_ERRORS as exc:
                self.skipped.append({"where": self.element_path(child), "reason": exception_text(exc)})

    def count_unmapped_symbols(self, root) -> None:
        self.unmapped_symbols += sum(1 for sym in root.iter(f"{{{W}}}sym") if symbol_char(sym) is None)

    def _add(self, unit: ParsedUnit) -> int:
        if len(self.units) >= self.max_units:
            raise ParseError("cap-units", f"more than {self.max_units} units")
        self.units.append(unit)
        return len(self.units) - 1

    def path(self) -> tuple[str, ...]:
        return tuple(title for _, title in self.sections)

    def paragraph(self, p) -> None:
        text, refs = paragraph_text(p, self.hidden_styles, self.fields.get(p, ()))
        if text:
            self._paragraph(p, text, refs)
        else:
            self.unheld(refs, self.path())
        self.graphics(p)

    def graphics(self, p, owner=None, place=None, element_path=None, section_path=None) -> None:
        """A unit per SmartArt graphic or chart shown in ``p`` (:mod:`.graphics`), after its text:
        ``paragraph``, its locator naming the graphic's part, ``p`` (``element_path``: in the main
        part, else ``element_path(p)``) and ``place`` (the table cell's ``table``, ``row``, ``col``,
        or the note's ``note_type``, ``note_id``); ``owner``: the part whose relationships name the
        graphics (the notes part's for a note); a malformed part is listed."""
        for unit in self.graphic_units(p, owner, place, element_path, section_path):
            self._add(unit)

    def graphic_units(self, p, owner=None, place=None, element_path=None, section_path=None) -> list[ParsedUnit]:
        """The units :meth:`graphics` adds, not added."""
        units = []
        for part, kind in graphic_parts(p, owner or self.document.part, self.hidden_styles):
            name = str(part.partname).lstrip("/")
            try:
                text = graphic_text(part.blob, kind)
            except etree.LxmlError as exc:
                self.skipped.append({"where": name, "reason": exception_text(exc)})
                continue
            if text:
                locator = {"part": name, "element_path": (element_path or self.element_path)(p), **(place or {})}
                units.append(ParsedUnit("paragraph", text, locator,
                                        self.path() if section_path is None else section_path))
        return units

    def _paragraph(self, p, text: str, refs) -> None:
        style = self.style_name(p)
        locator = {"part": self.part_name, "element_path": self.element_path(p)}
        level = heading_level(style, p)
        if level is not None:
            self.sections[:] = [(lvl, t) for lvl, t in self.sections if lvl < level]
            index = self._add(ParsedUnit("heading", text, locator, self.path(), {"level": level}))
            self.sections.append((level, text))
        elif p.find("w:pPr/w:numPr", _NS) is not None or style.lower().startswith("list"):
            ilvl = p.find("w:pPr/w:numPr/w:ilvl", _NS)
            depth = max(decimal_number(ilvl.get(f"{{{W}}}val")) or 0, 0) if ilvl is not None else 0
            index = self._add(ParsedUnit("list_item", text, locator, self.path(), {"level": depth}))
        else:
            index = self._add(ParsedUnit("paragraph", text, locator, self.path()))
        self.refs.extend((index, pos, kind, note_id) for pos, kind, note_id in refs)

    def table(self, tbl) -> None:
        table = self.table_count
        self.table_count += 1
        for r, tr in enumerate(children(tbl, "tr")):
            previous = None
            col = 0
            for tc in children(tr, "tc"):
                span = tc.find("w:tcPr/w:gridSpan", _NS)
                width = max(decimal_number(span.get(f"{{{W}}}val")) or 1, 1) if span is not None else 1
                # The cell a merge continues (vertically, or by the legacy w:hMerge) shows nothing of its own.
                continued = any(m is not None and m.get(f"{{{W}}}val", "continue") == "continue"
                                for m in (tc.find("w:tcPr/w:vMerge", _NS), tc.find("w:tcPr/w:hMerge", _NS)))
                pieces, refs = [], []
                for p in children(tc, "p", BODY_MATH):  # an equation where a cell's paragraph may stand
                    joined_lines(pieces, refs, *paragraph_text(p, self.hidden_styles, self.fields.get(p, ())))
                text = "\n".join(pieces)
                if not text and not continued:
                    self.unheld(refs, self.path())
                if text and not continued:
                    locator = {"part": self.part_name, "element_path": self.element_path(tc),
                               "table": table, "row": r, "col": col}
                    index = self._add(ParsedUnit("table_cell", text, locator, self.path(),
                                                 {"table": table, "row": r, "col": col, "header": r == 0}))
                    self.refs.extend((index, pos, kind, nid) for pos, kind, nid in refs)
                    if previous is not None:
                        self.relationships.append(ParsedRelationship("next_in_table_row", previous, index))
                    previous = index
                if not continued:  # a cell's graphics after its text, as a body paragraph's
                    for p in children(tc, "p"):
                        self.graphics(p, place={"table": table, "row": r, "col": col})
                for chunk in children(tc, "altChunk"):
                    self.alt_chunk(chunk)
                for nested in children(tc, "tbl"):
                    self.table(nested)
                col += width

    def alt_chunk(self, chunk) -> None:
        """Read an imported part (``w:altChunk``, ECMA-376 §17.17.2.1, that Word renders in place)
        where it stands: HTML by the HTML parser (every text element: it is the author's content,
        no page to take a main text from), MHTML by it from its root HTML part, plain text by the
        text parser, each unit's locator naming the part. Another kind (RTF, another document), an
        external target, or a part those parsers refuse, is listed unread, not skipped in silence."""
        rel = self.document.part.rels.get(chunk.get(f"{{{_R}}}id", ""))
        if rel is not None and rel.is_external:  # python-docx raises on its target_part; no network here
            self.skipped.append({"where": self.element_path(chunk),
                                 "reason": f"alt-chunk: external target not read: {rel.target_ref[:300]}"})
            return
        try:
            part = rel.target_part
            where, kind = str(part.partname).lstrip("/"), part.content_type
        except (KeyError, AttributeError):
            where, kind = self.element_path(chunk), "a missing part"
        reason = f"alt-chunk: imported content ({kind}) not read"
        read = imported_reader(kind)
        if read is None:
            self.skipped.append({"where": where, "reason": reason})
            return
        try:
            imported = self.imported.parse(where, read, part.blob)
        except ParseError as exc:
            self.skipped.append({"where": where, "reason": f"{reason}: {exc.reason} ({exc.detail})"})
            return
        first = len(self.units)
        for unit in imported.units:
            self._add(replace(unit, locator={"part": where, **unit.locator},
                              section_path=self.path() + unit.section_path))
        self.relationships += [replace(rel, source_index=rel.source_index + first,
                                       target_index=rel.target_index + first)
                               for rel in imported.relationships]
        self.skipped += [{"where": f"{where}: {u.where}", "reason": u.reason} for u in imported.unread]

    def style_name(self, p) -> str:
        style = p.find("w:pPr/w:pStyle", _NS)
        style_id = style.get(f"{{{W}}}val") if style is not None else None
        if not style_id:
            return ""
        if style_id not in self.styles and not self.recovered:
            try:
                self.styles[style_id] = self.document.styles.get_by_id(style_id, 1).name or style_id
            except (KeyError, ValueError, AttributeError):
                self.styles[style_id] = style_id
        return self.styles.get(style_id, style_id)

    def story_text(self, stories: list, blocks) -> tuple[str, list[tuple[int, str, str]]]:
        """The text of a story (a note, a header: its own, so no field runs into it from the body;
        ``stories``: its elements) of ``blocks`` (:func:`~.blocks.story_blocks`), a line each, and its
        reference marks (position, note type, note id)."""
        fields = {p: state for element in stories for p, state in open_fields(element).items()}
        pieces: list[str] = []
        refs: list[tuple[int, str, str]] = []
        for p in blocks:
            joined_lines(pieces, refs, *paragraph_text(p, self.hidden_styles, fields.get(p, ())))
        return "\n".join(pieces), refs

    def unheld(self, refs, path: tuple[str, ...]) -> None:
        """Reference marks ``refs`` that stand where no unit is (a paragraph with no text but a
        comment's mark): their notes are shown (and numbered) all the same, under ``path``."""
        for _, kind, nid in refs:
            self.refs.append((None, 0, kind, nid))
            self.mark_paths.setdefault((kind, nid), path)

    # -- headers and footers ----------------------------------------------
    def headers_and_footers(self, document) -> None:
        """One ``note`` unit per header or footer part a section shows (:mod:`.headers`), after the
        body: ``note_type`` ``header`` or ``footer``, ``note_id`` its number among them (1-based,
        in order of first showing), ``hdr_ftr_types`` the types it is shown as; its locator says
        where it shows (:func:`~.headers.shown_where`: the sections of a multi-section document, the
        first, even or odd pages); its graphics after it; no section path (it stands on pages, not
        under a heading). A part repeating an earlier one's words (a section's unlinked copy) adds
        nothing but the sections and pages it shows on; a part no section shows is listed in
        ``unshown``, a malformed one in ``skipped``."""
        sections = section_properties(document.element.body)
        even_and_odd = even_and_odd_pages(document)
        stories = shown_stories(sections, even_and_odd)
        self.unshown += unshown_parts(document.part.rels, stories)
        # Read every part first: a later part of the same words adds its sections to the first's place.
        read: dict[tuple[str, ...], list] = {}
        for story in stories:
            rel = document.part.rels.get(story.rel_id)
            if rel is None or rel.is_external:  # a malformed part, left out and listed when opened; no network
                continue
            part = rel.target_part
            name = str(part.partname).lstrip("/")
            try:
                root = etree.fromstring(part.blob, _PARSER)
            except etree.LxmlError as exc:
                self.skipped.append({"where": name, "reason": exception_text(exc)})
                continue
            if root.tag != STORY_ROOTS[story.kind]:  # the main part named as a header was read again, as one
                self.skipped.append({"where": name, "reason": f"not a {story.kind} part: {root.tag[:100]}"})
                continue
            self.count_unmapped_symbols(root)
            blocks = story_blocks(root)
            text, refs = self.story_text([root], blocks)
            paths = ElementPaths(root.getroottree())
            graphics = [(p, unit) for p in blocks for unit in self.graphic_units(p, part, {}, paths, ())]
            words = (story.kind, text, *(unit.text for _, unit in graphics))
            if not (text or graphics):
                continue
            if words in read:
                types, shown = read[words][-2:]
                types += [t for t in story.types if t not in types]
                shown += story.sections
                continue
            read[words] = [story, name, text, refs, graphics, list(story.types), list(story.sections)]
        numbers = {"header": 0, "footer": 0}
        for story, name, text, refs, graphics, types, shown in read.values():
            numbers[story.kind] += 1
            self.story_count += 1
            path = ()  # page furniture: under no heading, and apart from the body's text when chunked
            place = {"note_type": story.kind, "note_id": str(numbers[story.kind]),
                     **shown_where(types, shown, len(sections), even_and_odd)}
            if text:
                index = self._add(ParsedUnit("note", text, {"part": name, **place}, path,
                                             {**place, "hdr_ftr_types": types}))
                self.refs.extend((index, pos, kind, nid) for pos, kind, nid in refs)
            else:
                self.unheld(refs, path)
            for _, unit in graphics:
                self._add(replace(unit, locator={**unit.locator, **place}))

    # -- notes --------------------------------------------------------------
    def notes(self, document) -> None:
        parts = {}
        for rel in document.part.rels.values():
            name = rel.reltype.rsplit("/", 1)[-1]
            if name in _NOTE_RELS and not rel.is_external:
                parts[_NOTE_RELS[name]] = rel.target_part
        targets: dict[tuple[str, str], int] = {}
        # Word shows a note only where a shown reference marks it: one whose reference was deleted
        # (a tracked change read as accepted) or hidden, or that nothing references, is no text of
        # the document (it was indexed and cited as a note). A comment may mark a note's text, so
        # comments come last, the notes' references counted.
        for note_type in ("footnote", "endnote", "comment"):
            referenced = {(kind, note_id) for _, _, kind, note_id in self.refs}
            part = parts.get(note_type)
            if part is None:
                continue
            try:
                root = etree.fromstring(part.blob, _PARSER)
            except etree.LxmlError as exc:  # the body is still worth reading without its notes
                self.skipped.append({"where": str(part.partname).lstrip("/"), "reason": exception_text(exc)})
                continue
            self.count_unmapped_symbols(root)
            paths = ElementPaths(root.getroottree())
            # Notes of one w:id (invalid, ECMA-376 §17.11.10: the id is what a mark names) are one note:
            # the mark names them all, so each is read, in order, and one locator names their unit.
            by_id: dict[str, list] = {}
            for note in root.findall(f"w:{note_type}", _NS):
                if note.get(f"{{{W}}}type") not in ("separator", "continuationSeparator", "continuationNotice"):
                    by_id.setdefault(note.get(f"{{{W}}}id", ""), []).append(note)
            for note_id, notes in by_id.items():
                if (note_type, note_id) not in referenced:
                    self.unreferenced.append(f"{note_type}:{note_id}")
                    continue
                blocks = [block for note in notes for block in story_blocks(note)]
                text, refs = self.story_text(notes, blocks)  # the comments marking the note's text, at their places
                ref = next((r for r in self.refs if r[2] == note_type and r[3] == note_id and r[0] is not None), None)
                path = self.units[ref[0]].section_path if ref else self.mark_paths.get((note_type, note_id), ())
                place = {"note_type": note_type, "note_id": note_id}
                if note_type == "comment" and ref is not None:  # beside a cell, a header, a note: cited there
                    marked = {k: v for k, v in self.units[ref[0]].locator.items() if k in _MARKED_PLACE}
                    if marked:
                        place["marked_in"] = marked
                if text:
                    index = targets[(note_type, note_id)] = self._add(ParsedUnit(
                        "note", text, {"part": str(part.partname).lstrip("/"), **place}, path,
                        {"note_id": note_id, "note_type": note_type}))
                    self.refs.extend((index, pos, kind, nid) for pos, kind, nid in refs)
                    self.note_count += 1
                else:
                    self.unheld(refs, path)
                for p in blocks:  # its graphics after its text, named by the notes part's relationships
                    self.graphics(p, part, place, paths, path)
        labels: dict[tuple[str, str], int] = {}
        for unit_index, pos, note_type, note_id in self.refs:
            target = targets.get((note_type, note_id))
            if target is None:
                self.unresolved.append(f"{note_type}:{note_id}")
                continue
            label = labels.setdefault((note_type, note_id), sum(1 for k in labels if k[0] == note_type) + 1)
            if unit_index is None:  # shown and numbered, but no unit holds the mark to link from
                continue
            self.relationships.append(ParsedRelationship(
                "note_ref", unit_index, target, {"start_char": pos, "end_char": pos, "label": str(label)}))


def heading_level(style: str, p) -> int | None:
    """1-6 for a heading paragraph (style ``Heading n``, ``Title`` = 1, or an outline level)."""
    match = _HEADING_STYLE.match(style.strip())
    if match:
        return max(1, min(int(match.group(1)), 6))
    if style.strip().lower() == "title":
        return 1
    outline = p.find("w:pPr/w:outlineLvl", _NS)
    level = decimal_number(outline.get(f"{{{W}}}val")) if outline is not None else None
    if level is not None and 0 <= level < 6:  # 6-9: body text; not a number: no outline level
        return level + 1
    return None
