"""Reading a part a DOCX imports (``w:altChunk``, ECMA-376 §17.17.2.1) by the project's own parsers.

Word renders such a part in place, as if its content were typed there; HTML-to-DOCX converters
write a whole document as one. HTML is read by the HTML parser with every text element kept
(``main_text = "all"``: it is the author's content, no web page to take a main text from, and
trafilatura's choice would drop short paragraphs), plain text by the text parser. Their other
settings are their defaults (not the ``parsers.html`` / ``parsers.text`` sections): the part is
bounded by the package's caps already. Their output is the DOCX parser's output here, so a change
of either parser's version that changes it needs a DOCX version too (as Markdown's follows text's).
"""

from __future__ import annotations

from collections.abc import Callable

from fabric_resources.parsing.document import ParsedDocument, ParseError


def _html(data: bytes) -> ParsedDocument:
    from fabric_resources.config import HtmlParserConfig
    from fabric_resources.parsing.html.parser import parse_html

    return parse_html(data, HtmlParserConfig(main_text="all"))


def _text(data: bytes) -> ParsedDocument:
    from fabric_resources.config import TextParserConfig
    from fabric_resources.parsing.text.parser import parse_text

    return parse_text(data, TextParserConfig())


_READERS = {"text/html": _html, "application/xhtml+xml": _html, "text/plain": _text}


def imported_reader(content_type: str) -> Callable[[bytes], ParsedDocument] | None:
    """The parse of an imported part of ``content_type`` (parameters ignored), or ``None`` for a
    kind no parser here reads (RTF, MHTML, another WordprocessingML document).

    >>> imported_reader("text/html; charset=utf-8") is _html, imported_reader("application/rtf")
    (True, None)
    """
    return _READERS.get(content_type.split(";")[0].strip().lower())


class ImportedParts:
    """The parses of one document's imported parts, each part parsed once however many ``w:altChunk``
    name it. Read again per reference, a part that yields no units (a megabyte of empty ``div``) named
    by a few thousand ``w:altChunk`` (distinct relationships to the same part, or one reused) cost
    that many parses in the ingest process, where no timeout reaches (hostile trial 18e: a 250 kB
    package naming one such part 100 times took 21 s); the units cap does not bound what adds no
    unit. Parsed once, the cost is bounded by the package's own (capped) bytes."""

    def __init__(self) -> None:
        self._done: dict[str, ParsedDocument | ParseError] = {}

    def parse(self, where: str, read: Callable[[bytes], ParsedDocument], blob: bytes) -> ParsedDocument:
        """``read(blob)``, or what it gave (or raised) the first time part ``where`` was read."""
        if where not in self._done:
            try:
                self._done[where] = read(blob)
            except ParseError as exc:
                self._done[where] = exc
        done = self._done[where]
        if isinstance(done, ParseError):
            raise done
        return done
