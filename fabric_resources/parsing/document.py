"""What a parser returns: canonical units and relationships, before IDs.

Parsers are pure functions ``bytes -> ParsedDocument`` that raise
:class:`ParseError` with a named reason on bad input. IDs (parse ID, unit ID)
are assigned later by the asset that stores the units, from the parse ID and
each unit's position in ``ParsedDocument.units`` (reading order).

All character positions are Unicode scalar offsets (Python ``str`` indices),
end-exclusive.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

UnitKind = Literal[
    "paragraph",
    "heading",
    "list_item",
    "table_cell",
    "figure_caption",
    "note",
    "blockquote",
    "preformatted",
    "slide_title",  # PPTX: a slide's title placeholder
    "speaker_note",  # PPTX: the notes page of a slide
    "ocr_text",  # text recognised on an image (PDF page without a text layer); attributes: confidence
]

RelationshipKind = Literal[
    "note_ref",  # a unit references a note; attributes: start_char, end_char of the marker, label
    "caption_of",  # a caption describes a figure or table; attributes: figure_id / table_id
    "next_in_table_row",  # cell -> next cell of the same row
]

ParseErrorReason = Literal[
    "undecodable",
    "too-large",
    "empty-file",
    "not-a-zip",
    "malformed-container",
    "malformed-package",
    "malformed-xml",
    "encrypted",
    "cap-members",
    "cap-decompressed-bytes",
    "cap-compression-ratio",
    "cap-xml-bytes",
    "cap-depth",
    "unsupported-media-type",
    # formats beyond text and EPUB (pdf, docx, pptx, html)
    "malformed-pdf",  # not a PDF, truncated or corrupt past what PDFium repairs
    "malformed-docx",
    "malformed-pptx",
    "malformed-html",
    "cap-pages",
    "cap-objects",
    "cap-page-objects",
    "cap-chars",
    "cap-image-pixels",
    "cap-units",
    "cap-memory",  # the child process ran out of its address-space limit
    "timeout",  # the child process ran past its wall-clock limit
    "parser-crashed",  # the child process died (signal) without a result
    "parser-error",  # a library raised something other than a named reason on this input
    "ocr-unavailable",  # no text layer anywhere and no OCR engine
    "no-text",  # a PDF whose pages hold neither text nor images
]


class ParseError(Exception):
    """Bad input: the parse run fails with ``reason`` (a stable name) and ``detail``."""

    def __init__(self, reason: ParseErrorReason, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class ParsedUnit:
    """One canonical unit of text in reading order.

    Attributes
    ----------
    kind : UnitKind
    text : str
        The canonical text; never empty, never only whitespace.
    locator : dict
        Where the unit sits in the source. Plain text: ``{"char_start",
        "char_end", "line_start", "line_end"}`` (Unicode scalars / 1-based
        lines into the decoded file, end-exclusive chars, inclusive lines).
        EPUB: ``{"spine_index", "href", "element_path"}`` (element path like
        ``/html/body/section[2]/p[3]``).
    section_path : tuple[str, ...]
        Titles of the enclosing sections, outermost first (model input only).
    attributes : dict
        Kind-specific extras (JSON-serialisable): ``level`` for headings,
        ``table``/``row``/``col``/``header`` for cells, ``note_id`` for notes,
        ``page`` (label of the last page marker before the unit), ``lang``.
    """

    kind: UnitKind
    text: str
    locator: dict[str, Any]
    section_path: tuple[str, ...] = ()
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ParsedRelationship:
    """A typed edge between two units, by their index in ``ParsedDocument.units``."""

    kind: RelationshipKind
    source_index: int
    target_index: int
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ParsedDocument:
    """A parser's whole output for one content object."""

    parser_name: str
    parser_version: str
    media_type: str
    units: list[ParsedUnit]
    relationships: list[ParsedRelationship] = field(default_factory=list)
    title: str | None = None
    language: str | None = None
    encoding: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
