"""Reading a part a DOCX imports (``w:altChunk``, ECMA-376 §17.17.2.1) by the project's own parsers.

Word renders such a part in place, as if its content were typed there; HTML-to-DOCX converters
write a whole document as one. HTML is read by the HTML parser with every text element kept
(``main_text = "all"``: it is the author's content, no web page to take a main text from, and
trafilatura's choice would drop short paragraphs), plain text by the text parser, MHTML (a web
page saved as one MIME message, RFC 2557: what Word writes an ``.mht`` chunk as) by the HTML
parser from its root HTML part (the standard library's ``email`` reads the MIME). Their other
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


def _mhtml(data: bytes) -> ParsedDocument:
    """The root HTML part of an MHTML message (RFC 2557 §5: the part the ``start`` parameter names
    by ``Content-ID``, else the first ``text/html`` part), read as HTML in the charset its MIME
    header declares (as a browser reads an HTTP header's, over a ``<meta>``) where that is a WHATWG
    label. ``ParseError`` ``malformed-mhtml`` when it holds no HTML part (its images and styles are
    no text)."""
    import email.utils
    from email import policy

    from fabric_resources.parsing.html.encoding import LABELS

    try:
        message = email.message_from_bytes(data, policy=policy.compat32)
        # A Content-ID as "<id>"; the start parameter's angle brackets the email package takes off.
        start = email.utils.collapse_rfc2231_value(message.get_param("start") or "").strip().strip("<>")
        parts = [p for p in message.walk() if p.get_content_type() == "text/html" and not p.is_multipart()]
        root = next((p for p in parts if start and str(p.get("Content-ID", "")).strip().strip("<>") == start),
                    parts[0] if parts else None)
    except (RecursionError, ValueError, LookupError, TypeError) as exc:  # nested past Python's stack
        raise ParseError("malformed-mhtml", f"{type(exc).__name__}: {exc}"[:300]) from None
    if root is None:
        raise ParseError("malformed-mhtml", "no text/html part")
    body = root.get_payload(decode=True) or b""
    codec = LABELS.get((root.get_content_charset() or "").strip().lower())
    if codec is not None:  # to UTF-8, which the HTML parser reads first: the declared charset decides
        body = body.decode(codec, errors="replace").encode("utf-8")
    return _html(body)


_READERS = {"text/html": _html, "application/xhtml+xml": _html, "text/plain": _text,
            "message/rfc822": _mhtml, "multipart/related": _mhtml}


def imported_reader(content_type: str) -> Callable[[bytes], ParsedDocument] | None:
    """The parse of an imported part of ``content_type`` (parameters ignored), or ``None`` for a
    kind no parser here reads (RTF: no RTF library is installed; another WordprocessingML document).

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
