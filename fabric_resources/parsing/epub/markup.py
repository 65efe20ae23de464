"""XML and XHTML reading for the EPUB parser: hardened lxml parsers and element helpers.

lxml runs with entity resolution, DTD loading and network access off and
``huge_tree`` off; nesting deeper than the configured depth is ``cap-depth``.
The vocabulary constants name the EPUB/XHTML semantics the walk recognises.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from typing import Any
from urllib.parse import unquote

import lxml.html
from lxml import etree

from fabric_resources.parsing.document import ParseError
from fabric_resources.parsing.epub.archive import MemberUnusable

XHTML_TYPES = frozenset({"application/xhtml+xml", "text/html"})
EPUB_TYPE = "{http://www.idpf.org/2007/ops}type"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
DC_NS = "http://purl.org/dc/elements/1.1/"
NOTE_TYPES = frozenset({"footnote", "endnote", "rearnote", "note", "doc-footnote", "doc-endnote"})
NOTES_SECTION_TYPES = frozenset({"footnotes", "endnotes", "rearnotes", "doc-endnotes", "doc-footnotes"})
NOTEREF_TYPES = frozenset({"noteref", "doc-noteref"})
PAGEBREAK_TYPES = frozenset({"pagebreak", "doc-pagebreak"})
SKIPPED_TAGS = frozenset({"head", "script", "style", "template", "rt", "rp", "rtc", "svg", "noscript"})
HEADING_TAGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
BLOCK_TAGS = frozenset(
    "address article aside blockquote body caption center dd details dialog dir div dl dt fieldset "
    "figcaption figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr html legend li main menu nav "
    "ol p pre section summary table tbody td tfoot th thead tr ul".split()
)


def xml_parser(recover: bool = False) -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False, no_network=True, huge_tree=False, load_dtd=False,
        recover=recover, remove_comments=True, remove_pis=True,
    )


def parse_xml(data: bytes, max_depth: int, recover: bool = False) -> etree._Element:
    """Parse one XML document; cap-depth is a ParseError, anything else :class:`MemberUnusable`."""
    try:
        root = etree.fromstring(data, xml_parser(recover))
    except etree.XMLSyntaxError as exc:
        if "excessive depth" in str(exc).lower():
            raise ParseError("cap-depth", str(exc)) from None
        raise MemberUnusable(f"malformed-xml: {exc}") from None
    except (ValueError, etree.LxmlError) as exc:
        raise MemberUnusable(f"malformed-xml: {exc}") from None
    return checked_depth(root, max_depth)


def parse_content(data: bytes, max_depth: int) -> tuple[etree._Element, bool]:
    """Parse XHTML strictly, else with lxml.html. Returns ``(root, used_html_fallback)``."""
    try:
        return parse_xml(data, max_depth), False
    except MemberUnusable:
        pass
    try:
        data.decode("utf-8")
        encoding: str | None = "utf-8"
    except UnicodeDecodeError:
        encoding = None
    try:
        parser = lxml.html.HTMLParser(no_network=True, huge_tree=False, encoding=encoding,
                                      remove_comments=True, remove_pis=True)
        root = etree.fromstring(data, parser)
    except (ValueError, etree.LxmlError) as exc:
        raise MemberUnusable(f"malformed-xml: {exc}") from None
    return checked_depth(root, max_depth), True


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
    """Not text: comments/entities, script/style/head, ruby readings, ``hidden`` elements."""
    return tag is None or tag in SKIPPED_TAGS or el.get("hidden") is not None


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
