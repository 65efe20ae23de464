"""libxml2's resource limits, made loud.

In recover mode (every HTML parse, and XML parsed with ``recover=True``) libxml2 does not fail at
its limits — elements nested 256 deep, a text node past its buffer limit: it logs
``ERR_RESOURCE_LIMIT`` and stops building the tree there, so everything after that point (later
sibling paragraphs included) is silently missing from a parse that otherwise looks whole. A parse
that lost text that way must fail with a named reason instead (README, "Formats").

libxml2's HTML parser also checks each attribute of a start tag against every earlier one, in C
where nothing stops it: a page is refused before it reads a tag of more than
:data:`MAX_TAG_ATTRIBUTES` (:func:`raise_on_attribute_flood`). A ``data:`` URL past its limit for
an attribute value (an image a saved page carries) is cut to its header first
(:func:`without_long_data_urls`).
"""

from __future__ import annotations

import html
import re
import secrets
from typing import Any

from fabric_resources.parsing.document import ParseError


def raise_on_resource_limit(parser: Any) -> None:
    """Raise when the lxml ``parser`` (an ``etree.XMLParser`` or ``lxml.html.HTMLParser``, just
    used) stopped at a libxml2 resource limit.

    Raises
    ------
    ParseError
        ``cap-depth`` (elements nested deeper than libxml2 reads: 256 without ``huge_tree``) or
        ``cap-parser-limit`` (another limit, e.g. a text node past libxml2's buffer size).
    """
    for entry in parser.error_log:
        if entry.type_name == "ERR_RESOURCE_LIMIT":
            message = entry.message.strip()
            reason = "cap-depth" if "depth" in message.lower() else "cap-parser-limit"
            raise ParseError(reason, f"libxml2 stopped reading here, the rest would be lost: {message}")


def syntax_error_reason(exc: BaseException, default: str) -> str:
    """``cap-depth`` for libxml2's "Excessive depth in document" (elements nested deeper than the
    256 it reads without ``huge_tree``: a limit, as HTML and EPUB name it), else ``default``."""
    return "cap-depth" if "excessive depth" in str(exc).lower() else default


#: Attributes one start tag may hold before libxml2's HTML parser reads the page. Its check for a
#: repeated name is quadratic (one tag of 20,000 attributes: 0.65 s; 100,000, an 890 kB page: over
#: 90 s in-process); a real element holds tens.
MAX_TAG_ATTRIBUTES = 10_000

# One pass, HTML's tokens as far as they matter here: a comment, a raw-text element (its text is no
# markup: a JSON blob in a <script> is no tag) with its start tag's attributes (group 2), another
# start tag's attributes (group 3). Quoted values may hold ">"; an unclosed one runs to the end.
_QUOTED = r"\"[^\"]*\"|'[^']*'"
_TOKENS = re.compile(
    r"<!--.*?(?:-->|\Z)"
    rf"|<(script|style|xmp|iframe|noembed|noframes|textarea|title|plaintext)\b((?:[^>\"']|{_QUOTED})*)>?.*?(?:</\1|\Z)"
    rf"|<[A-Za-z][^\s/>]*((?:[^>\"']|{_QUOTED})*)",
    re.IGNORECASE | re.DOTALL)
_ATTRIBUTE_NAME = re.compile(r"[\s/][^\s/=>]")  # a name starts after a space or "/" (values dropped)


#: Characters of a ``data:`` URL's payload in an attribute past which it is cut before libxml2 reads
#: the page. libxml2 stops at an attribute value of 10,000,000 bytes (XML_MAX_TEXT_LENGTH, without
#: ``huge_tree``, which would lift its depth limit too), and a page saved whole (SingleFile, a mail
#: client) carries each image as one: a 7.5 MB photo failed the whole page ``cap-parser-limit``,
#: though a browser shows it. A payload this long is an image or a font, never text.
MAX_DATA_URL_PAYLOAD = 65_536
# A data: URL's header (media type and parameters up to the comma, kept so the type still reads) and
# a payload of at least MAX_DATA_URL_PAYLOAD characters (to a quote, space, ">", a CSS url()'s ")" or
# an "&": in a frame's srcdoc the image's own quotes are written "&quot;", and they must stay).
_LONG_DATA_URL = re.compile(rf"""(data:[^,"'\s>&]{{0,256}},)[^"'\s>)&]{{{MAX_DATA_URL_PAYLOAD},}}""", re.IGNORECASE)


def without_long_data_urls(text: str) -> str:
    """``text`` (HTML) with the payload of each ``data:`` URL in a start tag's attributes (``src``,
    ``href``, an inline style's ``url(…)``) longer than :data:`MAX_DATA_URL_PAYLOAD` characters
    removed, its header kept (``data:image/jpeg;base64,``); the text, comments and raw-text
    elements' content as they were. ``text`` itself when no such payload is in it.

    >>> page = '<p>data:x,' + 'A' * 70_000 + '</p><img alt="a" src="data:image/png;base64,' + 'A' * 70_000 + '">'
    >>> cut = without_long_data_urls(page)
    >>> cut.startswith(page[:70_010]), cut.endswith('</p><img alt="a" src="data:image/png;base64,">')
    (True, True)
    """
    if _LONG_DATA_URL.search(text) is None:
        return text
    pieces, done = [], 0
    for match in _TOKENS.finditer(text):
        group = 2 if match.group(2) is not None else 3
        if match.group(group) and _LONG_DATA_URL.search(match.group(group)):
            start, end = match.span(group)
            pieces += [text[done:start], _LONG_DATA_URL.sub(r"\1", match.group(group))]
            done = end
    return "".join(pieces) + text[done:]


def raise_on_attribute_flood(text: str) -> None:
    """Raise when a start tag of the HTML ``text`` holds more than :data:`MAX_TAG_ATTRIBUTES`
    attributes (counted generously: an unquoted value after ``= `` counts as a name).

    >>> raise_on_attribute_flood('<p class="a b" id=x>' + "<i " + " ".join(f"a{i}" for i in range(20_001)) + ">")
    Traceback (most recent call last):
    ...
    fabric_resources.parsing.document.ParseError: cap-parser-limit: a start tag of more than 10000 attributes (libxml2 compares each with every other)
    >>> raise_on_attribute_flood("<script>" + "x, " * 30_000 + "</script><p a=1 b='>'>")

    Raises
    ------
    ParseError
        ``cap-parser-limit``.
    """
    for match in _TOKENS.finditer(text):
        attributes = match.group(2) or match.group(3)
        if attributes and len(attributes) > 2 * MAX_TAG_ATTRIBUTES:  # each takes 2 characters at least
            names = len(_ATTRIBUTE_NAME.findall(re.sub(_QUOTED, " ", attributes)))
            if names > MAX_TAG_ATTRIBUTES:
                raise ParseError("cap-parser-limit", f"a start tag of more than {MAX_TAG_ATTRIBUTES} attributes "
                                                     "(libxml2 compares each with every other)")


#: libxml2's limit on one attribute value, in bytes of its decoded text (XML_MAX_TEXT_LENGTH, without
#: ``huge_tree``): one byte more and it stops reading (``ERR_RESOURCE_LIMIT``).
MAX_ATTRIBUTE_VALUE_BYTES = 10_000_000
#: Attributes whose value the HTML parser reads (:mod:`~fabric_resources.parsing.html`): whether and how
#: an element renders (``hidden``, ``style``, sizes, slots, an object's data), a table's spans, an
#: equation's TeX, the page's language, the document a frame shows (``srcdoc``), the text an input
#: shows (``value``). No reader sees the
#: value of any other as text (a ``data-*`` JSON blob, an event handler, a long ``href``).
READ_ATTRIBUTES = frozenset({"hidden", "open", "style", "srcdoc", "class", "id", "lang", "width", "height", "data",
                             "type", "shadowrootmode", "slot", "name", "colspan", "rowspan", "display",
                             "visibility", "font-size", "encoding", "alttext", "value", "placeholder", "label",
                             "size"})
#: Of those, the ones read on some elements only: a frame's document, the value or the hint a text box
#: shows, an option's label, how many rows a select shows (a drop-down or a list box).
_READ_ON = {"srcdoc": {"iframe"}, "value": {"input"}, "placeholder": {"input", "textarea"},
            "label": {"option", "optgroup"}, "size": {"select"}}
_ATTRIBUTE = re.compile(r"""([^\s/=>"']+)(\s*=\s*)("[^"]*"|'[^']*'|[^\s>"']+)""")
_TAG_NAME = re.compile(r"<([A-Za-z][^\s/>]*)")


def without_long_attributes(text: str, read: frozenset[str] = READ_ATTRIBUTES,
                            read_on: dict[str, set[str]] | None = None) -> tuple[str, dict[str, str]]:
    """``text`` (HTML, or an EPUB's XHTML) with each attribute value past :data:`MAX_ATTRIBUTE_VALUE_BYTES`
    made one libxml2 reads, nothing a reader sees lost, and the frame documents set aside: ``(text, frames)``.

    A value the parser does not read (not in ``read``, the HTML parser's :data:`READ_ATTRIBUTES` by
    default; or read only on the tags ``read_on`` names for it) is emptied; an inline
    ``style`` keeps the declarations that decide whether text shows
    (:func:`~fabric_resources.parsing.inline_style.rendering_declarations`), a ``select``'s ``size``
    the number a browser reads of it; an ``iframe``'s
    ``srcdoc`` is replaced by a token, ``frames`` mapping it to the decoded document, which the
    parser reads where the frame stands as it reads any frame's. The text, comments and raw-text
    elements stay as they were; one pass over the page.

    >>> page = '<p data-json="' + 'x' * 10_000_001 + '" class=c>Text</p>'
    >>> without_long_attributes(page)[0]
    '<p data-json="" class=c>Text</p>'

    Raises
    ------
    ParseError
        ``cap-parser-limit`` naming the attribute, for another read attribute (a ``class``, a
        ``style`` of rendering declarations alone) past the limit: cut, it would read otherwise.
    """
    frames: dict[str, str] = {}
    read_on = _READ_ON if read_on is None else read_on
    if _bytes(text) <= MAX_ATTRIBUTE_VALUE_BYTES:
        return text, frames
    pieces, done = [], 0
    for match in _TOKENS.finditer(text):
        group = 2 if match.group(2) is not None else 3
        attributes = match.group(group)
        if (group == 3 and _TAG_NAME.match(match.group(0)).group(1).lower() == "option"
                and "option" in read_on.get("label", ())):  # the HTML parser's: it reads what a select shows
            pieces, done = _option_text_within_limit(text, match.end(), pieces, done)
        if not attributes or len(attributes) <= MAX_ATTRIBUTE_VALUE_BYTES // 4:  # a UTF-8 character: 4 bytes at most
            continue
        tag = (match.group(1) if group == 2 else _TAG_NAME.match(match.group(0)).group(1)).lower()
        cut = _ATTRIBUTE.sub(lambda m: _within_limit(m, tag, frames, read, read_on), attributes)
        if cut != attributes:
            start, end = match.span(group)
            pieces += [text[done:start], cut]
            done = end
    return "".join(pieces) + text[done:], frames


#: Characters of an option's label (its ``label``, else its text) kept where it passes libxml2's limit
#: for one value or text node: a browser shows an option on one line of a box, cut at the box's edge,
#: so the start is what it shows (the whole page failed ``cap-parser-limit``; trial 24c).
MAX_OPTION_LABEL_CHARS = 10_000
_PARTIAL_REFERENCE = re.compile(r"&#?[0-9A-Za-z]{0,40}\Z")


def _option_text_within_limit(text: str, tag_end: int, pieces: list[str], done: int) -> tuple[list[str], int]:
    """``pieces`` and ``done`` (:func:`without_long_attributes`'s) with the text run after an
    ``<option>`` start tag ending before ``tag_end`` cut to :data:`MAX_OPTION_LABEL_CHARS` when it
    passes :data:`MAX_ATTRIBUTE_VALUE_BYTES` (libxml2 stops there, for a text node too)."""
    start = text.find(">", tag_end) + 1
    end = text.find("<", start) if start else -1
    end = len(text) if end < 0 else end
    if (not start or end - start <= MAX_ATTRIBUTE_VALUE_BYTES // 4
            or _bytes(html.unescape(text[start:end])) <= MAX_ATTRIBUTE_VALUE_BYTES):
        return pieces, done
    kept = _PARTIAL_REFERENCE.sub("", text[start:start + MAX_OPTION_LABEL_CHARS])  # no reference cut in half
    return pieces + [text[done:start], kept], end


def _within_limit(match: re.Match, tag: str, frames: dict[str, str], read: frozenset[str],
                  read_on: dict[str, set[str]]) -> str:
    name, equals, quoted = match.groups()
    raw = quoted[1:-1] if quoted[0] in "\"'" else quoted
    if len(raw) <= MAX_ATTRIBUTE_VALUE_BYTES // 4 or _bytes(raw) <= MAX_ATTRIBUTE_VALUE_BYTES:
        return match.group(0)
    name = name.lower()
    value = html.unescape(raw)
    if name not in read or tag not in read_on.get(name, {tag}):
        return f'{name}{equals}""'
    if name == "srcdoc":
        token = f"fabric-srcdoc-{secrets.token_hex(16)}"  # no page can name it
        frames[token] = value
        return f'{name}{equals}"{token}"'
    if name == "label" and tag in ("option", "optgroup"):  # shown on one line, its start: see MAX_OPTION_LABEL_CHARS
        return f'{name}{equals}"{html.escape(value[:MAX_OPTION_LABEL_CHARS])}"'
    if name == "size":  # a number: what a browser reads of it, however many zeros lead it
        from fabric_resources.parsing.inline_style import non_negative_integer

        number = non_negative_integer(value)
        return f'{name}{equals}"{"" if number is None else number}"'
    if name == "style":
        from fabric_resources.parsing.inline_style import rendering_declarations

        kept = rendering_declarations(value)
        if _bytes(kept) <= MAX_ATTRIBUTE_VALUE_BYTES:
            return f'{name}{equals}"{html.escape(kept)}"'
    if _bytes(value) <= MAX_ATTRIBUTE_VALUE_BYTES:
        return match.group(0)  # its character references made it look longer than libxml2 reads it
    raise ParseError("cap-parser-limit", f"a <{tag}> {name}= attribute past the {MAX_ATTRIBUTE_VALUE_BYTES:,} "
                                         "bytes libxml2 reads; the page reads it, so it is not cut")


def _bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))
