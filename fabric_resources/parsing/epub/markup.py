"""XML and XHTML reading for the EPUB parser: hardened lxml parsers and element helpers.

lxml runs with entity resolution, DTD loading and network access off and
``huge_tree`` off; nesting deeper than the configured depth is ``cap-depth``.
Before lxml sees a document, :func:`prepare_markup` removes a DOCTYPE's
internal subset (the entities it declares are never expanded, so neither their
declarations nor their references become text), writes HTML's named character
references (``&eacute;``) as the characters they name (without a loaded DTD
the XML parser would drop them), and, for a content document, repairs bytes
that are not UTF-8 in a document that is UTF-8 by declaration, counting them.
The vocabulary constants name the EPUB/XHTML semantics the walk recognises.
"""

from __future__ import annotations

import codecs
import html.entities
import posixpath
import re
import unicodedata
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote

import lxml.html
from lxml import etree

from fabric_resources.parsing.document import ParseError
from fabric_resources.parsing.epub.archive import MemberUnusable
from fabric_resources.parsing.inline_style import MEDIA_FALLBACK, hidden_element
from fabric_resources.parsing.lxml_limits import (MAX_ATTRIBUTE_VALUE_BYTES, raise_on_attribute_flood,
    raise_on_resource_limit, without_long_attributes, without_long_data_urls)

XHTML_TYPES = frozenset({"application/xhtml+xml", "text/html"})
EPUB_TYPE = "{http://www.idpf.org/2007/ops}type"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
DC_NS = "http://purl.org/dc/elements/1.1/"
NOTE_TYPES = frozenset({"footnote", "endnote", "rearnote", "note", "doc-footnote", "doc-endnote"})
NOTES_SECTION_TYPES = frozenset({"footnotes", "endnotes", "rearnotes", "doc-endnotes", "doc-footnotes"})
NOTEREF_TYPES = frozenset({"noteref", "doc-noteref"})
PAGEBREAK_TYPES = frozenset({"pagebreak", "doc-pagebreak"})
# annotation, annotation-xml: what a MathML <semantics> holds after its first child (the TeX source, a
# content-MathML copy), which a reading system does not show; the equation was read twice, "A=πr2A=\pi r^2".
# They occur only there (MathML), so their local name is enough (the HTML parser alike: _MATH_UNSHOWN).
# video, audio: their content is fallback for a reading system without media support (MEDIA_FALLBACK).
SKIPPED_TAGS = frozenset({"head", "script", "style", "template", "rt", "rp", "rtc", "svg", "noscript",
                          "annotation", "annotation-xml", *MEDIA_FALLBACK})
HEADING_TAGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
BLOCK_TAGS = frozenset(
    "address article aside blockquote body caption center dd details dialog dir div dl dt fieldset "
    "figcaption figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr html legend li main menu nav "
    "ol p pre section summary table tbody td tfoot th thead tr ul".split()
)


#: Attributes whose value the EPUB walk reads (:mod:`~fabric_resources.parsing.epub.content`, the
#: navigation, :func:`~fabric_resources.parsing.inline_style.hidden_element`): whether an element
#: renders, anchors and links, a table's spans, a figure's image, a page break's label, semantics and
#: language. Past libxml2's limit, any other value is emptied, as the HTML parser does
#: (:func:`~fabric_resources.parsing.lxml_limits.without_long_attributes`).
READ_ATTRIBUTES = frozenset({"hidden", "open", "style", "id", "name", "href", "src", "alt", "title", "aria-label",
                             "colspan", "rowspan", "epub:type", "role", "lang", "xml:lang"})
_READ_ON = {"name": {"a"}, "src": {"img"}, "alt": {"img"}}


def xml_parser(recover: bool = False) -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False, no_network=True, huge_tree=False, load_dtd=False,
        recover=recover, remove_comments=True, remove_pis=True,
    )


_XML_DECLARATION = re.compile(rb"""^<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")
_NON_ASCII_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)  # the UTF-32 BOMs start with these
_DOCTYPE = re.compile(rb"<!DOCTYPE\s", re.IGNORECASE)
_ENTITY_DECLARATION = re.compile(rb"""<!ENTITY\s+(%\s+)?([^\s%;&<>"']+)\s+(?:"([^"]*)"|'([^']*)')?""")
_CHARACTER_REFERENCE = re.compile(rb"&#(?:x([0-9A-Fa-f]{1,6})|([0-9]{1,7}));")
_NAMED_REFERENCE = re.compile(rb"&([A-Za-z][A-Za-z0-9]*);")
_XML_PREDEFINED = frozenset({b"amp", b"lt", b"gt", b"quot", b"apos"})
_UTF8_NAMES = frozenset({"utf-8", "utf8"})
_REPLACEMENT_UTF8 = "\ufffd".encode("utf-8")


@dataclass(frozen=True)
class PreparedMarkup:
    """A document's bytes as lxml gets them, and what preparing them changed.

    Attributes
    ----------
    data : bytes
    decoding_repairs : int
        Byte sequences that were not UTF-8 in a UTF-8 document, each now U+FFFD.
    utf8 : bool
        Whether the document is UTF-8 (no UTF-16/32 BOM, no other encoding declared); only
        then are ``data`` rewritten at all.
    """

    data: bytes
    decoding_repairs: int = 0
    utf8: bool = True


def prepare_markup(data: bytes, repair_utf8: bool = False) -> PreparedMarkup:
    """Make one XML/XHTML document safe and exact to parse (module docstring).

    Parameters
    ----------
    data : bytes
        The member's bytes.
    repair_utf8 : bool
        Replace each maximal ill-formed UTF-8 subsequence with U+FFFD (Unicode's "best
        practice", which Python's ``errors="replace"`` follows) and count them. Only for a
        document that is UTF-8 by its declaration (XML 1.0 section 4.3.3: no BOM and no
        encoding declaration means UTF-8).

    Returns
    -------
    PreparedMarkup
        A document in UTF-16/32 or declared in another encoding is returned as it is: its
        bytes cannot be rewritten as ASCII patterns, and lxml decodes it by its declaration.
    """
    declared = _XML_DECLARATION.match(data)
    encoding = declared.group(1).decode("ascii").lower() if declared else "utf-8"
    if data.startswith(_NON_ASCII_BOMS):
        return PreparedMarkup(data, utf8=False)
    if data.startswith(codecs.BOM_UTF8):
        encoding = "utf-8"
    utf8 = encoding in _UTF8_NAMES
    repairs = 0
    if utf8 and repair_utf8:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            repaired = data.decode("utf-8", errors="replace")
            repairs = repaired.count("\ufffd") - data.count(_REPLACEMENT_UTF8)
            data = repaired.encode("utf-8")
    data, declared_entities = _without_internal_subset(data)
    return PreparedMarkup(_with_character_references(data, declared_entities), repairs, utf8)


def _without_internal_subset(data: bytes) -> tuple[bytes, frozenset[bytes]]:
    """``data`` without the internal subset of its DOCTYPE (``<!DOCTYPE html [ ... ]>`` becomes
    ``<!DOCTYPE html>``); references to the general entities that subset declared become their
    replacement text when that is plain text and character references (``<!ENTITY nbsp "&#160;">``,
    as some converters write), and nothing otherwise: an entity whose value refers to other
    entities (how a "billion laughs" amplifies) or to an external file is never expanded. Plain
    values are substituted once each, so the output grows at most linearly in the input."""
    match = _DOCTYPE.search(data, 0, 4096)
    if match is None:
        return data, frozenset()
    i, quote, n = match.end(), None, len(data)
    while i < n:  # the external ID may quote a "[" or ">"
        ch = data[i:i + 1]
        if quote:
            quote = None if ch == quote else quote
        elif ch in (b'"', b"'"):
            quote = ch
        elif ch in (b"[", b">"):
            break
        i += 1
    if data[i:i + 1] != b"[":
        return data, frozenset()
    head, j = data[:i].rstrip(), i + 1
    while j < n:  # the subset ends at the first "]" outside quotes and comments
        if data.startswith(b"<!--", j):
            end = data.find(b"-->", j + 4)
            j = n if end < 0 else end + 3
            continue
        ch = data[j:j + 1]
        if quote:
            quote = None if ch == quote else quote
        elif ch in (b'"', b"'"):
            quote = ch
        elif ch == b"]":
            break
        j += 1
    subset = data[i + 1:j]
    close = data.find(b">", j)
    rest = data[close + 1:] if close >= 0 else b""
    values: dict[bytes, bytes] = {}
    for m in _ENTITY_DECLARATION.finditer(subset):
        if m.group(1) or m.group(2) in values:  # a parameter entity, or a repeated declaration (the first binds)
            continue
        value = m.group(3) if m.group(3) is not None else m.group(4)
        plain = value is not None and b"&" not in _CHARACTER_REFERENCE.sub(b"", value) and b"%" not in value
        values[m.group(2)] = _escaped_text(value) if plain else b""
    if values:
        rest = _NAMED_REFERENCE.sub(lambda m: values.get(m.group(1), m.group(0)), rest)
    return head + b">" + rest, frozenset(values)


def _escaped_text(value: bytes) -> bytes:
    """An entity's literal value as character data: its character references kept, markup escaped."""
    return value.replace(b"&", b"&amp;").replace(b"<", b"&lt;").replace(b">", b"&gt;").replace(
        b"&amp;#", b"&#")


def _with_character_references(data: bytes, declared: frozenset[bytes]) -> bytes:
    """HTML named character references as numeric ones, but the five XML predefines its own."""

    def numeric(match: re.Match[bytes]) -> bytes:
        name = match.group(1)
        if name in _XML_PREDEFINED or name in declared:
            return match.group(0)
        chars = html.entities.html5.get(name.decode("ascii") + ";")
        return match.group(0) if chars is None else "".join(f"&#{ord(c)};" for c in chars).encode("ascii")

    return _NAMED_REFERENCE.sub(numeric, data)


def parse_xml(data: bytes, max_depth: int, recover: bool = False) -> etree._Element:
    """Parse one XML document (after :func:`prepare_markup`); cap-depth is a ParseError,
    anything else :class:`MemberUnusable`."""
    return _parse_prepared_xml(prepare_markup(data).data, max_depth, recover)


def _parse_prepared_xml(data: bytes, max_depth: int, recover: bool = False) -> etree._Element:
    parser = xml_parser(recover)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        if "excessive depth" in str(exc).lower():
            raise ParseError("cap-depth", str(exc)) from None
        raise MemberUnusable(f"malformed-xml: {exc}") from None
    except (ValueError, etree.LxmlError) as exc:
        raise MemberUnusable(f"malformed-xml: {exc}") from None
    raise_on_resource_limit(parser)  # recovering, libxml2 stops at its limits without failing
    return checked_depth(root, max_depth)


@dataclass(frozen=True)
class ContentRoot:
    """A parsed content document: its root, whether lxml.html had to read it, its repairs."""

    root: etree._Element
    used_html_fallback: bool
    decoding_repairs: int


def parse_content(data: bytes, max_depth: int) -> ContentRoot:
    """Parse XHTML strictly, else with lxml.html, after :func:`prepare_markup` (UTF-8 repaired)."""
    prepared = prepare_markup(data, repair_utf8=True)
    if len(prepared.data) > MAX_ATTRIBUTE_VALUE_BYTES:
        # An attribute value past libxml2's limit (an embedded image's data: URL, a data-* blob)
        # failed the chapter's parse and with it the book: cut as the HTML parser cuts one, in the
        # chapter's own encoding (a windows-1252 or Shift_JIS chapter was not cut; trial 24c).
        codec = "utf-8" if prepared.utf8 else _declared_codec(prepared.data)  # repaired: UTF-8 now
        text = None
        if codec is not None:
            try:
                text = prepared.data.decode(codec)
            except UnicodeDecodeError:
                pass
        if text is None:  # not cut: should libxml2 stop at a limit, the chapter's loss, not the book's
            try:
                return _parsed_content(prepared, max_depth)
            except ParseError as exc:
                if exc.reason != "cap-parser-limit":
                    raise
                raise MemberUnusable(f"cap-parser-limit: a chapter Python cannot read as its encoding "
                                     f"({_declared_name(prepared.data)[:40]}) is not cut to what libxml2 reads: "
                                     f"{exc.detail}") from None
        cut, _ = without_long_attributes(without_long_data_urls(text), READ_ATTRIBUTES, _READ_ON)
        if cut != text:  # what the cut writes is ASCII or the chapter's own characters: it encodes back
            prepared = replace(prepared, data=cut.encode(codec, "xmlcharrefreplace"))
    return _parsed_content(prepared, max_depth)


def _parsed_content(prepared: PreparedMarkup, max_depth: int) -> ContentRoot:
    try:
        return ContentRoot(_parse_prepared_xml(prepared.data, max_depth), False, prepared.decoding_repairs)
    except MemberUnusable:
        pass
    raise_on_attribute_flood(prepared.data.decode("latin-1"))  # its markup is ASCII in any encoding read here
    try:
        parser = lxml.html.HTMLParser(no_network=True, huge_tree=False, encoding="utf-8" if prepared.utf8 else None,
                                      remove_comments=True, remove_pis=True)
        root = etree.fromstring(prepared.data, parser)
    except (ValueError, etree.LxmlError) as exc:
        raise MemberUnusable(f"malformed-xml: {exc}") from None
    raise_on_resource_limit(parser)
    return ContentRoot(checked_depth(root, max_depth), True, prepared.decoding_repairs)


def _declared_name(data: bytes) -> str:
    """The encoding a non-UTF-8 chapter gives: its byte order mark's, else its XML declaration's."""
    if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return "utf-32"
    if data.startswith(_NON_ASCII_BOMS):
        return "utf-16"
    declared = _XML_DECLARATION.match(data)
    return declared.group(1).decode("ascii") if declared else "utf-8"


def _declared_codec(data: bytes) -> str | None:
    """The Python codec of :func:`_declared_name`; ``None`` for a name Python does not know."""
    try:
        return codecs.lookup(_declared_name(data)).name
    except LookupError:
        return None


def checked_depth(root: etree._Element | None, max_depth: int) -> etree._Element:
    """``root`` once it exists and nests no deeper than ``max_depth`` (else cap-depth)."""
    if root is None:
        raise MemberUnusable("malformed-xml: empty document")
    depth = 0
    for event, _ in etree.iterwalk(root, events=("start", "end")):
        depth += 1 if event == "start" else -1
        if depth > max_depth:
            raise ParseError("cap-depth", f"nesting deeper than {max_depth}")
    return root


def local_name(el: Any) -> str | None:
    """Lower-case local tag name; ``None`` for comments, PIs and entities."""
    tag = el.tag
    if not isinstance(tag, str):
        return None
    return tag.rpartition("}")[2].lower()


def is_skipped(el: Any, tag: str | None) -> bool:
    """Not text: comments/entities, script/style/head, ruby readings, elements marked ``hidden`` or
    hidden by their inline style (:func:`~fabric_resources.parsing.inline_style.hidden_element`)."""
    return tag is None or tag in SKIPPED_TAGS or hidden_element(el)


def by_name(root: etree._Element, name: str) -> list[etree._Element]:
    return [el for el in root.iter() if local_name(el) == name]


def type_tokens(el: etree._Element) -> set[str]:
    """epub:type and role tokens of an element (XHTML or lxml.html attribute spelling)."""
    raw = " ".join(filter(None, (el.get(EPUB_TYPE), el.get("epub:type"), el.get("role"))))
    return set(raw.lower().split())


def lang_of(el: etree._Element) -> str | None:
    value = el.get(XML_LANG) or el.get("xml:lang") or el.get("lang")
    return value.strip() or None if value else None


def primary_lang(lang: str | None) -> str | None:
    return lang.split("-")[0].lower() if lang else None


def squash(text: str) -> str:
    return " ".join(text.split())


def plain_text(el: etree._Element) -> str:
    """Whitespace-normalised text of an element, without ruby readings or scripts."""
    parts: list[str] = []

    def visit(node: etree._Element) -> None:
        if local_name(node) not in SKIPPED_TAGS and local_name(node) is not None:
            parts.append(node.text or "")
            for child in node:
                visit(child)
                parts.append(child.tail or "")

    visit(el)
    return squash("".join(parts))


def join_href(base_dir: str, href: str) -> str | None:
    """Resolve a relative, percent-encoded href (no fragment) to a normalised zip path."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", href):
        return None  # external (http:, mailto:, data:)
    path = unquote(href.split("?", 1)[0])
    joined = posixpath.normpath(posixpath.join(base_dir, path)).lstrip("/")
    return unicodedata.normalize("NFC", joined) if joined not in ("", ".") else None
