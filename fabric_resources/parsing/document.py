"""What a parser returns: canonical units and relationships, before IDs.

Parsers are pure functions ``bytes -> ParsedDocument`` that raise
:class:`ParseError` with a named reason on bad input; any other exception a
parser lets out is turned into ``ParseError("parser-error", ...)`` at its entry
point (:func:`bad_input_net`), so one document's input can never fail more than
that document. IDs (parse ID, unit ID)
are assigned later by the asset that stores the units, from the parse ID and
each unit's position in ``ParsedDocument.units`` (reading order).

All character positions are Unicode scalar offsets (Python ``str`` indices),
end-exclusive.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import sqlite3
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, Literal, ParamSpec, TypeVar

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
    "cap-table-grid",  # tables whose rowspans cover more grid slots than a document may (table_grid)
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
    "unreadable-pages",  # a PDF none of whose pages could be read, some failing (PDFium, OCR)
]

#: Characters of a ``ParseError`` detail kept in the catalog.
DETAIL_CHARS = 500


# " at 0x7f5b30516d40" inside an object repr ("<_io.BytesIO object at 0x…>", "<Element p at 0x…>").
_OBJECT_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+(?=>)")


def stable_text(text: str) -> str:
    """``text`` without the memory addresses of the object reprs it quotes.

    Library messages quote their arguments (python-pptx: ``file '<_io.BytesIO object at
    0x7f…>' is not a PowerPoint file``); the address differs on every run, and a failure reason
    must read the same each time the same bytes are parsed.

    >>> stable_text("file '<_io.BytesIO object at 0x7f5b30516d40>' is not a PowerPoint file")
    "file '<_io.BytesIO object>' is not a PowerPoint file"
    """
    return _OBJECT_ADDRESS.sub("", text)


def exception_text(exc: BaseException) -> str:
    """``"<Type>: <message>"`` of ``exc``, without memory addresses (:func:`stable_text`): the
    reason given for a part of a document that could not be read."""
    return stable_text(f"{type(exc).__name__}: {exc}")


class ParseError(Exception):
    """Bad input: the parse run fails with ``reason`` (a stable name) and ``detail``.

    ``detail`` is kept without memory addresses (:func:`stable_text`), whoever wrote it.
    """

    def __init__(self, reason: ParseErrorReason, detail: str = "") -> None:
        detail = stable_text(detail)
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def describe_exception(exc: BaseException) -> str:
    """``"<module>.<Type>: <message> (at <file>:<line>)"``, the innermost frame of the traceback.

    What a ``parser-error`` detail says, so an unanticipated failure can be found without
    the traceback (which is not kept).
    """
    kind = type(exc)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {PurePath(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return stable_text(f"{name}: {exc}")[: DETAIL_CHARS - len(where)] + where


_P = ParamSpec("_P")
_R = TypeVar("_R")

# What an OS error says about the machine, not about a file's bytes: no space or quota left, a
# file-size limit (``ulimit -f``), a read-only file system, no file descriptors or kernel memory.
_MACHINE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EMFILE,
                             errno.ENFILE, errno.ENOMEM})


def machine_fault(exc: BaseException) -> bool:
    """Whether ``exc`` is an ``OSError`` of the machine's resources (:data:`_MACHINE_ERRNOS`) or
    SQLite's ``SQLITE_FULL`` (a catalog or Dagster database on a full disk): transient and Fabric's
    to report, never a property of the document being read or parsed."""
    if isinstance(exc, sqlite3.Error):
        return (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF == sqlite3.SQLITE_FULL
    return isinstance(exc, OSError) and exc.errno in _MACHINE_ERRNOS


# tantivy (Rust, through PyO3) raises a ValueError holding the io::Error's Debug text:
# `... path: "/h/indexes/...", err: Os { code: 24, kind: TooManyOpenFiles, message: "..." } ...`,
# or its Display text, which ends in the errno: a commit on a full disk raised
# `An IO error occurred: 'No space left on device (os error 28)'` (trial 15, stop 48).
_RUST_OS_ERROR = re.compile(r'(?:path: "(?P<path>[^"]*)", err: )?Os \{ code: (?P<code>\d+), kind: '
                            r"|\(os error (?P<display_code>\d+)\)")


def rust_os_error(exc: BaseException) -> OSError | None:
    """The ``OSError`` a Rust library's ``ValueError`` reports in its text (tantivy's index writer
    out of descriptors or disk), or its ``OSError`` with no errno of its own (Lance's
    ``LanceError(IO): … (os error 28)``: a purge rewriting a table on a full disk, trial 21c), when
    that errno is a machine fault (:data:`_MACHINE_ERRNOS`); else ``None``."""
    if not (isinstance(exc, ValueError) or (isinstance(exc, OSError) and exc.errno is None)):
        return None
    found = _RUST_OS_ERROR.search(str(exc))
    code = int(found["code"] or found["display_code"]) if found is not None else None
    if code not in _MACHINE_ERRNOS:
        return None
    return OSError(code, os.strerror(code), *((found["path"],) if found["path"] else ()))


def exception_chain(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc``, then its cause (else context), and so on; each once (a chain can loop)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        yield exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__


def machine_fault_in(exc: BaseException) -> BaseException | None:
    """The first :func:`machine_fault` in ``exc``'s chain of causes and contexts (SQLAlchemy and
    Dagster wrap the error they met), or ``None``. A Rust library's ``ValueError`` that reports
    such an OS error (:func:`rust_os_error`) is answered as that ``OSError``."""
    for link in exception_chain(exc):
        if machine_fault(link):
            return link
        if (rust := rust_os_error(link)) is not None:
            return rust
    return None


def bad_input_net(parse: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorate a parser entry point: any exception but ``ParseError`` and ``MemoryError`` leaves it
    as ``ParseError("parser-error", describe_exception(exc))``.

    A parser is pure (it reads nothing but its input bytes), so an exception raised inside it is
    a property of that input or a parser bug; either way it fails that one document, never the run
    that parses it with others. ``MemoryError`` is left alone: it says more about the machine than
    about the input (the admission caps bound what an input may make a parser allocate), and
    failing a document for it would make a transient fault permanent (a failed parse of the same
    bytes is not retried). So is an ``OSError`` of the machine's resources (:func:`machine_fault`:
    disk full, ``ulimit -f``, no file descriptors): py3langid unpacks its model into a temporary
    file when first used, and a full ``/tmp`` failed every document of the run as ``parser-error``,
    for good. ``BaseException`` subclasses that are not ``Exception`` (``KeyboardInterrupt``,
    ``SystemExit``) pass through as well.
    """

    @functools.wraps(parse)
    def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return parse(*args, **kwargs)
        except (ParseError, MemoryError):
            raise
        except Exception as exc:
            if machine_fault(exc):
                raise
            raise ParseError("parser-error", describe_exception(exc)) from exc

    return guarded


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
        ``page`` (label of the last page marker before the unit), ``lang``;
        ``part``/``parts`` (0-based index and count) on the pieces of a source
        paragraph longer than the parser's ``max_unit_chars``
        (:mod:`fabric_resources.parsing.long_units`); ``decoding_repairs`` (the
        number of U+FFFD characters in the text that stand for bytes that did
        not decode) where the parser repaired the decoding.
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
class UnreadPart:
    """A part of a document its parser could not read, in a parse that still has units.

    Such a parse is searchable and reported as partly read (``fabric status``, the ingest
    summary): ``"<where>: <reason>"``.

    Attributes
    ----------
    where : str
        The part as a reader finds it: ``"page 3"`` (PDF), ``"slide 2: Table 4"`` (PPTX),
        ``"table 1"`` (DOCX).
    reason : str
        A named reason (``ocr-unavailable``) or the library's objection
        (:func:`exception_text`).
    """

    where: str
    reason: str


@dataclass(frozen=True)
class ParsedDocument:
    """A parser's whole output for one content object.

    ``unread`` lists the parts the parser skipped because it could not read them; each format
    defines them once, in its parser (its ``metadata`` may describe them in more detail).
    """

    parser_name: str
    parser_version: str
    media_type: str
    units: list[ParsedUnit]
    relationships: list[ParsedRelationship] = field(default_factory=list)
    title: str | None = None
    language: str | None = None
    encoding: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    unread: list[UnreadPart] = field(default_factory=list)
