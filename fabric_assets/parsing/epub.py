"""The EPUB parser: EPUB 2 / EPUB 3 bytes -> canonical units in reading order.

This module owns four steps, all in-process and pure (nothing is read but the
given bytes; lxml runs with entity resolution, DTD loading and network access
off, and ``huge_tree`` off):

1. Admission of the zip (:class:`_Archive`): member count, declared and
   actual decompressed bytes, per-member compression ratio, per-document XML
   size, encrypted members. Any cap breached fails the whole parse.
2. The package: ``META-INF/container.xml`` -> OPF (or any ``.opf`` when the
   container is missing), manifest, spine, title, language, and
   ``META-INF/encryption.xml`` (font obfuscation is tolerated).
3. The table of contents: the EPUB 3 nav document (``epub:type="toc"``), else
   the EPUB 2 NCX. Each entry is a title path and a target (spine document,
   optional fragment id).
4. The walk over each spine XHTML document (:class:`_Walker`): block elements
   become :class:`ParsedUnit` objects; tables, notes, page markers, ruby and
   languages are handled as described on :func:`parse_epub`.

All character positions are Unicode scalar offsets (Python ``str`` indices),
end-exclusive.
"""

from __future__ import annotations

import io
import posixpath
import re
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote

import lxml.html
from lxml import etree

from fabric_assets.parsing.document import ParsedDocument, ParsedRelationship, ParsedUnit, ParseError
from fabric_resources.config import EpubParserConfig

PARSER_NAME = "epub"
PARSER_VERSION = "1"
MEDIA_TYPE = "application/epub+zip"

_XHTML_TYPES = frozenset({"application/xhtml+xml", "text/html"})
_OBFUSCATION = frozenset({"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"})
_EPUB_TYPE = "{http://www.idpf.org/2007/ops}type"
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
_DC = "http://purl.org/dc/elements/1.1/"
_NOTE = frozenset({"footnote", "endnote", "rearnote", "note", "doc-footnote", "doc-endnote"})
_NOTES_SECTION = frozenset({"footnotes", "endnotes", "rearnotes", "doc-endnotes", "doc-footnotes"})
_NOTEREF = frozenset({"noteref", "doc-noteref"})
_PAGEBREAK = frozenset({"pagebreak", "doc-pagebreak"})
_SKIP = frozenset({"head", "script", "style", "template", "rt", "rp", "rtc", "svg", "noscript"})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_BLOCK = frozenset(
    "address article aside blockquote body caption center dd details dialog dir div dl dt fieldset "
    "figcaption figure footer form h1 h2 h3 h4 h5 h6 header hgroup hr html legend li main menu nav "
    "ol p pre section summary table tbody td tfoot th thead tr ul".split()
)
_MEMBER_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError, RuntimeError)


class _Unusable(Exception):
    """A member is missing, unreadable or unparseable; the caller decides what that means."""


# --------------------------------------------------------------------------- zip admission


class _Archive:
    """The zip, admitted under the caps; members are looked up by normalised path."""

    def __init__(self, data: bytes, config: EpubParserConfig) -> None:
        if not data:
            raise ParseError("empty-file", "zero bytes")
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self.zip.infolist()
        except Exception as exc:  # zipfile raises many types on junk input
            raise ParseError("not-a-zip", str(exc)) from None
        self.config = config
        self.read_total = 0
        _admit(infos, config)
        self.members: dict[str, zipfile.ZipInfo] = {}
        self.folded: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            if not info.is_dir():
                name = _member_name(info)
                self.members.setdefault(name, info)
                self.folded.setdefault(name.casefold(), info)

    def find(self, path: str) -> zipfile.ZipInfo | None:
        """The member at ``path`` (exact, NFC, then case-insensitive), or ``None``."""
        key = unicodedata.normalize("NFC", path.lstrip("/"))
        return self.members.get(key) or self.folded.get(key.casefold())

    def read(self, path: str) -> bytes:
        """One XML member's bytes, counting toward the caps while reading."""
        info = self.find(path)
        if info is None:
            raise _Unusable("missing-member")
        cfg = self.config
        if info.file_size > cfg.max_xml_bytes:
            raise ParseError("cap-xml-bytes", f"{path}: {info.file_size} bytes declared")
        ratio_limit = max(info.compress_size, 1) * cfg.max_compression_ratio
        out = bytearray()
        try:
            with self.zip.open(info) as handle:
                while chunk := handle.read(1 << 16):
                    out += chunk
                    self.read_total += len(chunk)
                    if self.read_total > cfg.max_decompressed_bytes:
                        raise ParseError("cap-decompressed-bytes", "while reading")
                    if len(out) > ratio_limit:
                        raise ParseError("cap-compression-ratio", f"{path} while reading")
                    if len(out) > cfg.max_xml_bytes:
                        raise ParseError("cap-xml-bytes", f"{path} while reading")
        except _MEMBER_ERRORS as exc:
            raise _Unusable(f"unreadable-member: {exc}") from None
        return bytes(out)


def _admit(infos: list[zipfile.ZipInfo], cfg: EpubParserConfig) -> None:
    """Check the declared sizes and flags of all members before anything is read."""
    if len(infos) > cfg.max_members:
        raise ParseError("cap-members", f"{len(infos)} members")
    declared = sum(info.file_size for info in infos)
    if declared > cfg.max_decompressed_bytes:
        raise ParseError("cap-decompressed-bytes", f"{declared} bytes declared")
    for info in infos:
        if info.file_size and info.file_size > max(info.compress_size, 1) * cfg.max_compression_ratio:
            raise ParseError("cap-compression-ratio", f"{info.filename}: {info.file_size}/{info.compress_size}")
        if info.flag_bits & 0x1:
            raise ParseError("encrypted", f"{info.filename}: zip encryption flag")


def _member_name(info: zipfile.ZipInfo) -> str:
    """Member name, repairing UTF-8 names stored without the UTF-8 flag (read as cp437)."""
    name = info.filename
    if not info.flag_bits & 0x800:
        try:
            name = name.encode("cp437").decode("utf-8")
        except (UnicodeError, ValueError):
            pass
    return unicodedata.normalize("NFC", name)


# --------------------------------------------------------------------------- XML helpers


def _xml_parser(recover: bool = False) -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False, no_network=True, huge_tree=False, load_dtd=False,
        recover=recover, remove_comments=True, remove_pis=True,
    )


def _parse_xml(data: bytes, max_depth: int, recover: bool = False) -> etree._Element:
    """Parse one XML document; cap-depth is a ParseError, anything else :class:`_Unusable`."""
    try:
        root = etree.fromstring(data, _xml_parser(recover))
    except etree.XMLSyntaxError as exc:
        if "excessive depth" in str(exc).lower():
            raise ParseError("cap-depth", str(exc)) from None
        raise _Unusable(f"malformed-xml: {exc}") from None
    except (ValueError, etree.LxmlError) as exc:
        raise _Unusable(f"malformed-xml: {exc}") from None
    return _checked(root, max_depth)


def _parse_content(data: bytes, max_depth: int) -> tuple[etree._Element, bool]:
    """Parse XHTML strictly, else with lxml.html. Returns ``(root, used_html_fallback)``."""
    try:
        return _parse_xml(data, max_depth), False
    except _Unusable:
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
        raise _Unusable(f"malformed-xml: {exc}") from None
    return _checked(root, max_depth), True


def _checked(root: etree._Element | None, max_depth: int) -> etree._Element:
    """``root`` once it exists and nests no deeper than ``max_depth`` (else cap-depth)."""
    if root is None:
        raise _Unusable("malformed-xml: empty document")
    depth = 0
    for event, _ in etree.iterwalk(root, events=("start", "end")):
        depth += 1 if event == "start" else -1
        if depth > max_depth:
            raise ParseError("cap-depth", f"nesting deeper than {max_depth}")
    return root


def _local(el: Any) -> str | None:
    """Lower-case local tag name; ``None`` for comments, PIs and entities."""
    tag = el.tag
    if not isinstance(tag, str):
        return None
    return tag.rpartition("}")[2].lower()


def _skipped(el: Any, tag: str | None) -> bool:
    """Not text: comments/entities, script/style/head, ruby readings, ``hidden`` elements."""
    return tag is None or tag in _SKIP or el.get("hidden") is not None


def _by_name(root: etree._Element, name: str) -> list[etree._Element]:
    return [el for el in root.iter() if _local(el) == name]


def _tokens(el: etree._Element) -> set[str]:
    """epub:type and role tokens of an element (XHTML or lxml.html attribute spelling)."""
    raw = " ".join(filter(None, (el.get(_EPUB_TYPE), el.get("epub:type"), el.get("role"))))
    return set(raw.lower().split())


def _lang(el: etree._Element) -> str | None:
    value = el.get(_XML_LANG) or el.get("xml:lang") or el.get("lang")
    return value.strip() or None if value else None


def _primary(lang: str | None) -> str | None:
    return lang.split("-")[0].lower() if lang else None


def _squash(text: str) -> str:
    return " ".join(text.split())


def _plain(el: etree._Element) -> str:
    """Whitespace-normalised text of an element, without ruby readings or scripts."""
    parts: list[str] = []

    def visit(node: etree._Element) -> None:
        if _local(node) not in _SKIP and _local(node) is not None:
            parts.append(node.text or "")
            for child in node:
                visit(child)
                parts.append(child.tail or "")

    visit(el)
    return _squash("".join(parts))


def _join(base_dir: str, href: str) -> str | None:
    """Resolve a relative, percent-encoded href (no fragment) to a normalised zip path."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", href):
        return None  # external (http:, mailto:, data:)
    path = unquote(href.split("?", 1)[0])
    joined = posixpath.normpath(posixpath.join(base_dir, path)).lstrip("/")
    return unicodedata.normalize("NFC", joined) if joined not in ("", ".") else None


# --------------------------------------------------------------------------- package


@dataclass(frozen=True)
class _Item:
    id: str
    href: str  # as written in the manifest
    path: str  # resolved zip path
    media_type: str
    properties: frozenset[str]


@dataclass
class _Package:
    path: str
    version: str
    title: str | None
    language: str | None
    manifest: dict[str, _Item]
    spine: list[_Item | str]  # a str is an idref the manifest lacks
    toc_id: str | None
    recovered: bool


def _package_path(arc: _Archive) -> str:
    """The OPF path from container.xml, else the shallowest ``.opf`` member."""
    try:
        root = _parse_xml(arc.read("META-INF/container.xml"), arc.config.max_depth)
        for rootfile in _by_name(root, "rootfile"):
            full_path = rootfile.get("full-path") or ""
            for candidate in (full_path, unquote(full_path)):
                if candidate and arc.find(candidate):
                    return unicodedata.normalize("NFC", candidate.lstrip("/"))
    except _Unusable:
        pass
    opfs = sorted((n for n in arc.members if n.lower().endswith(".opf")), key=lambda n: (n.count("/"), n))
    if not opfs:
        raise ParseError("malformed-container", "no usable container.xml and no .opf member")
    return opfs[0]


def _read_package(arc: _Archive, path: str) -> _Package:
    try:
        data = arc.read(path)
    except _Unusable as exc:
        raise ParseError("malformed-package", f"{path}: {exc}") from None
    recovered = False
    try:
        root = _parse_xml(data, arc.config.max_depth)
    except _Unusable:
        try:
            root, recovered = _parse_xml(data, arc.config.max_depth, recover=True), True
        except _Unusable as exc:
            raise ParseError("malformed-package", f"{path}: {exc}") from None
    spines = _by_name(root, "spine")
    if _local(root) != "package" or not spines:
        raise ParseError("malformed-package", f"{path}: no package spine")
    base = posixpath.dirname(path)
    manifest: dict[str, _Item] = {}
    for el in _by_name(root, "item"):
        item_id, href = el.get("id"), el.get("href")
        target = _join(base, href.split("#", 1)[0]) if href else None
        if item_id and target and item_id not in manifest:
            props = frozenset((el.get("properties") or "").split())
            manifest[item_id] = _Item(item_id, href, target, (el.get("media-type") or "").lower(), props)
    spine: list[_Item | str] = []
    for ref in _by_name(spines[0], "itemref"):
        idref = ref.get("idref") or ""
        spine.append(manifest.get(idref, idref))
    dc = [el for el in root.iter() if isinstance(el.tag, str) and el.tag.startswith("{" + _DC)]
    titles = [_squash(el.text or "") for el in dc if _local(el) == "title"]
    langs = [_squash(el.text or "") for el in dc if _local(el) == "language"]
    version = "3" if (root.get("version") or "").strip().startswith("3") else "2"
    title, language = next((t for t in titles if t), None), next((t for t in langs if t), None)
    return _Package(path, version, title, language, manifest, spine, spines[0].get("toc"), recovered)


_TEXT_SUFFIXES = (".xhtml", ".html", ".htm", ".opf", ".ncx")


def _encrypted_targets(arc: _Archive) -> tuple[set[str], int]:
    """Paths encryption.xml lists with real encryption, and the count of obfuscated fonts.

    Raises ``encrypted`` at once for text-like targets, so an encrypted OPF is
    reported as encryption rather than as a malformed package.
    """
    if arc.find("META-INF/encryption.xml") is None:
        return set(), 0
    try:
        root = _parse_xml(arc.read("META-INF/encryption.xml"), arc.config.max_depth)
    except _Unusable as exc:
        raise ParseError("malformed-xml", f"META-INF/encryption.xml: {exc}") from None
    targets, obfuscated = set(), 0
    for data in _by_name(root, "encrypteddata"):
        algorithms = {m.get("Algorithm") for m in _by_name(data, "encryptionmethod")}
        if algorithms and algorithms <= _OBFUSCATION:
            obfuscated += 1
            continue
        for ref in _by_name(data, "cipherreference"):
            target = _join("", ref.get("URI") or "")
            if target and target.lower().endswith(_TEXT_SUFFIXES):
                raise ParseError("encrypted", f"{target} is encrypted")
            targets.add(target or "")
    return targets, obfuscated


# --------------------------------------------------------------------------- table of contents

_Toc = dict[int, dict[str, tuple[str, ...]]]  # spine index -> fragment ("" = file) -> title path


def _read_toc(arc: _Archive, pkg: _Package, spine_pos: dict[str, int]) -> tuple[str, _Toc, list[str]]:
    """The TOC as ``(source, entries, errors)``; nav preferred, NCX next, else ``"none"``."""
    toc: _Toc = {}
    errors: list[str] = []

    def add(base: str, href: str | None, path: tuple[str, ...]) -> None:
        if not href or not path:
            return
        file_part, _, frag = href.partition("#")
        target = _join(base, file_part) if file_part else None
        index = spine_pos.get(target) if target else None
        if index is not None:
            entries = toc.setdefault(index, {})
            key = unquote(frag)
            if key not in entries or len(path) >= len(entries[key]):
                entries[key] = path

    nav = next((i for i in pkg.manifest.values() if "nav" in i.properties), None)
    if nav is not None:
        try:
            root, _ = _parse_content(arc.read(nav.path), arc.config.max_depth)
            navs = [el for el in _by_name(root, "nav") if _tokens(el) & {"toc", "doc-toc"}]
            lists = [ol for el in navs[:1] for ol in el.iter() if _local(ol) == "ol"]
            if lists:
                _nav_list(lists[0], (), posixpath.dirname(nav.path), add)
        except _Unusable as exc:
            errors.append(f"nav: {exc}")
        if toc:
            return "nav", toc, errors
    ncx = pkg.manifest.get(pkg.toc_id or "")
    ncx = ncx or next((i for i in pkg.manifest.values() if i.media_type == "application/x-dtbncx+xml"), None)
    if ncx is not None:
        try:
            root = _parse_xml(arc.read(ncx.path), arc.config.max_depth, recover=True)
            for nav_map in _by_name(root, "navmap")[:1]:
                _ncx_points(nav_map, (), posixpath.dirname(ncx.path), add)
        except _Unusable as exc:
            errors.append(f"ncx: {exc}")
        if toc:
            return "ncx", toc, errors
    return "none", toc, errors


def _nav_list(ol: etree._Element, prefix: tuple[str, ...], base: str, add: Any) -> None:
    for li in (c for c in ol if _local(c) == "li"):
        label = next((c for c in li if _local(c) in ("a", "span")), None)
        title = _plain(label) if label is not None else ""
        path = prefix + (title,) if title else prefix
        add(base, label.get("href") if label is not None else None, path)
        for sub in (c for c in li if _local(c) == "ol"):
            _nav_list(sub, path, base, add)


def _ncx_points(parent: etree._Element, prefix: tuple[str, ...], base: str, add: Any) -> None:
    for point in (c for c in parent if _local(c) == "navpoint"):
        label = next((t for lab in point if _local(lab) == "navlabel" for t in lab if _local(t) == "text"), None)
        title = _plain(label) if label is not None else ""
        path = prefix + (title,) if title else prefix
        content = next((c for c in point if _local(c) == "content"), None)
        add(base, content.get("src") if content is not None else None, path)
        _ncx_points(point, path, base, add)


# --------------------------------------------------------------------------- content walk


@dataclass(frozen=True)
class _Ctx:
    """What a container passes down: the kind of its bare text, list state, language."""

    kind: str = "paragraph"
    attrs: tuple[tuple[str, Any], ...] = ()
    lang: str | None = None
    figure: tuple[tuple[str, Any], ...] | None = None
    list_depth: int = 0
    ordered: bool = False
    in_notes: bool = False


@dataclass
class _Buffer:
    """Raw text of one unit being built, with link spans, late page labels and inline notes."""

    parts: list[str] = field(default_factory=list)
    size: int = 0
    has_text: bool = False
    links: list[tuple[int, int, tuple[str, str], bool]] = field(default_factory=list)
    pages: list[str] = field(default_factory=list)
    notes: list[etree._Element] = field(default_factory=list)

    def add(self, text: str | None) -> None:
        if text:
            self.parts.append(text)
            self.size += len(text)
            self.has_text = self.has_text or not text.isspace()


def _normalise(raw: str, pre: bool) -> tuple[str, list[int]]:
    """Normalised text and, per raw index, its output index (-1 when dropped)."""
    out: list[str] = []
    index = [-1] * len(raw)
    pending = False
    for i, ch in enumerate(raw):
        if pre:
            if ch == "\r":
                if raw[i + 1 : i + 2] == "\n":
                    continue
                ch = "\n"
        elif ch.isspace():
            pending = bool(out)
            continue
        if pending:
            out.append(" ")
            pending = False
        index[i] = len(out)
        out.append(ch)
    text = "".join(out)
    if pre:
        lead = len(text) - len(text.lstrip())
        text = text.strip()
        index = [j - lead if 0 <= j - lead < len(text) else -1 for j in index]
    return text, index


class _Walker:
    """Walks spine documents in order, accumulating units and relationships."""

    def __init__(self, doc_lang: str | None) -> None:
        self.doc_lang = doc_lang
        self.units: list[ParsedUnit] = []
        self.relationships: list[ParsedRelationship] = []
        self.refs: list[tuple[int, int, int, str, tuple[str, str], bool]] = []
        self.notes: dict[tuple[str, str], int] = {}
        self.page: str | None = None
        self.toc_path: tuple[str, ...] | None = None
        self.headings: list[tuple[int, str]] = []
        self.tables = self.figures = 0
        self.doc_toc: dict[str, tuple[str, ...]] = {}

    def walk(self, root: etree._Element, spine_index: int, item: _Item, toc: dict[str, tuple[str, ...]]) -> None:
        self.spine_index, self.href, self.doc_path = spine_index, item.href, item.path
        self.doc_dir = posixpath.dirname(item.path)
        self.root_tree = root.getroottree()
        self.root_name = _local(root) or "html"
        ids = {el.get("id") for el in root.iter() if isinstance(el.tag, str) and el.get("id")}
        starts = [path for frag, path in toc.items() if not frag or frag not in ids]
        if starts:
            self.toc_path = max(starts, key=len)
        self.doc_toc = {frag: path for frag, path in toc.items() if frag in ids}
        body = next((c for c in root if _local(c) == "body"), root)
        self._dispatch(body, _Ctx(lang=_lang(root)))

    def resolve_note_refs(self) -> int:
        """Turn collected links into note_ref relationships; return the unresolved noteref count."""
        unresolved = 0
        for source, start, end, label, key, is_noteref in self.refs:
            target = self.notes.get(key)
            if target is None:
                unresolved += is_noteref
            elif target != source:
                attrs = {"start_char": start, "end_char": end, "label": label}
                self.relationships.append(ParsedRelationship("note_ref", source, target, attrs))
        return unresolved

    # -- structure

    def _dispatch(self, el: etree._Element, ctx: _Ctx) -> None:
        tag = _local(el)
        if _skipped(el, tag):
            return
        self._mark(el)
        tokens = _tokens(el)
        ctx = self._with_lang(el, ctx)
        if tokens & _PAGEBREAK:
            self.page = self._page_label(el) or self.page
        elif tokens & _NOTE or (ctx.in_notes and tag == "li"):
            index = self._flat("note", el, ctx, {"note_id": el.get("id")})
            if index is not None and el.get("id"):
                self.notes[(self.doc_path, el.get("id"))] = index
        elif tag in _HEADINGS:
            self._flat("heading", el, ctx, {"level": int(tag[1])})
        elif tag in ("p", "dt", "summary", "legend"):
            self._flat(ctx.kind, el, ctx, dict(ctx.attrs))
        elif tag == "pre":
            self._flat("preformatted", el, ctx, {}, pre=True)
        elif tag == "table":
            self._table(el, ctx)
        elif tag in ("figcaption", "caption"):
            self._flat("figure_caption", el, ctx, dict(ctx.figure or ()))
        elif tag == "figure":
            self._figure(el, ctx)
        else:
            if tokens & _NOTES_SECTION:
                ctx = replace(ctx, in_notes=True)
            if tag in ("ol", "ul", "menu", "dir"):
                ctx = replace(ctx, list_depth=ctx.list_depth + 1, ordered=tag == "ol")
            elif tag == "li":
                attrs = (("depth", max(ctx.list_depth, 1)), ("ordered", ctx.ordered))
                ctx = replace(ctx, kind="list_item", attrs=attrs)
            elif tag == "blockquote":
                ctx = replace(ctx, kind="blockquote", attrs=())
            self._container(el, ctx)

    def _container(self, el: etree._Element, ctx: _Ctx) -> None:
        """Blocks are dispatched; runs of inline content between them become units of ``ctx.kind``."""
        buf = _Buffer()
        buf.add(el.text)
        for child in el:
            tag = _local(child)
            if tag is not None and (tag in _BLOCK or _tokens(child) & _NOTE):
                self._emit(ctx.kind, buf, el, ctx, dict(ctx.attrs))
                buf = _Buffer()
                self._dispatch(child, ctx)
            else:
                self._inline(child, buf, pre=False)
            buf.add(child.tail)
        self._emit(ctx.kind, buf, el, ctx, dict(ctx.attrs))

    def _table(self, el: etree._Element, ctx: _Ctx) -> None:
        table = self.tables
        self.tables += 1
        caption, first_cell, row = None, None, 0
        for part in el:
            tag = _local(part)
            if tag == "caption":
                caption = self._flat("figure_caption", part, self._with_lang(part, ctx), {"table_id": table})
                continue
            rows = [part] if tag == "tr" else [r for r in part if _local(r) == "tr"]
            if tag not in ("tr", "thead", "tbody", "tfoot"):
                continue
            for tr in rows:
                self._mark(tr)
                col, previous = 0, None
                for cell in (c for c in tr if _local(c) in ("td", "th")):
                    attrs = {"table": table, "row": row, "col": col, "header": _local(cell) == "th" or tag == "thead"}
                    current = self._flat("table_cell", cell, self._with_lang(cell, ctx), attrs)
                    span = cell.get("colspan") or "1"
                    col += min(max(int(span), 1), 1000) if span.strip().isdigit() else 1
                    if current is not None:
                        if previous is not None:
                            self.relationships.append(ParsedRelationship("next_in_table_row", previous, current))
                        previous = current
                        first_cell = current if first_cell is None else first_cell
                row += 1
        if caption is not None and first_cell is not None:
            self.relationships.append(ParsedRelationship("caption_of", caption, first_cell, {"table_id": table}))

    def _figure(self, el: etree._Element, ctx: _Ctx) -> None:
        info: dict[str, Any] = {"figure_id": self.figures}
        self.figures += 1
        img = next((e for e in el.iter() if _local(e) == "img"), None)
        if img is not None:
            src = img.get("src")
            info["src"] = _join(self.doc_dir, src) if src else None
            info["alt"] = img.get("alt")
        self._container(el, replace(ctx, figure=tuple(info.items())))

    # -- text

    def _flat(self, kind: str, el: etree._Element, ctx: _Ctx, attrs: dict[str, Any], pre: bool = False) -> int | None:
        """One unit from all the text under ``el``."""
        self._mark(el)
        buf = _Buffer()
        buf.add(el.text)
        for child in el:
            self._inline(child, buf, pre)
            buf.add(child.tail)
        return self._emit(kind, buf, el, ctx, attrs, pre)

    def _inline(self, el: etree._Element, buf: _Buffer, pre: bool) -> None:
        """Append the text of ``el`` (not its tail) to ``buf``."""
        tag = _local(el)
        if _skipped(el, tag):
            return
        self._mark(el)
        tokens = _tokens(el)
        if tokens & _PAGEBREAK:
            label = self._page_label(el)
            if label and buf.has_text:
                buf.pages.append(label)
            elif label:
                self.page = label
            return
        if tokens & _NOTE:
            buf.notes.append(el)
            return
        if tag == "br":
            buf.add("\n" if pre else " ")
            return
        block = tag in _BLOCK
        buf.add(" " if block and not pre else None)
        start = buf.size
        buf.add(el.text)
        for child in el:
            self._inline(child, buf, pre)
            buf.add(child.tail)
        if tag == "a" and "#" in (el.get("href") or ""):
            file_part, _, frag = el.get("href").partition("#")
            target = _join(self.doc_dir, file_part) if file_part else self.doc_path
            if target and frag:
                buf.links.append((start, buf.size, (target, unquote(frag)), bool(tokens & _NOTEREF)))
        buf.add(" " if block and not pre else None)

    def _emit(
        self, kind: str, buf: _Buffer, el: etree._Element, ctx: _Ctx, attrs: dict[str, Any], pre: bool = False
    ) -> int | None:
        """Append a unit unless its normalised text is empty; apply late page labels and inline notes."""
        raw = "".join(buf.parts)
        if buf.links or pre:
            text, index = _normalise(raw, pre)
        else:
            text, index = _squash(raw), []
        unit_index = None
        if text:
            if self.page is not None:
                attrs["page"] = self.page
            if ctx.lang and _primary(ctx.lang) != _primary(self.doc_lang):
                attrs["lang"] = ctx.lang
            if kind == "heading":
                self.headings = [h for h in self.headings if h[0] < attrs["level"]] + [(attrs["level"], text)]
            section = self.toc_path if self.toc_path is not None else tuple(t for _, t in self.headings)
            locator = {"spine_index": self.spine_index, "href": self.href, "element_path": self._path(el)}
            unit_index = len(self.units)
            self.units.append(ParsedUnit(kind, text, locator, section, attrs))  # type: ignore[arg-type]
            for start, end, key, is_noteref in buf.links:
                kept = [index[i] for i in range(start, end) if index[i] >= 0]
                if kept:
                    label = text[kept[0] : kept[-1] + 1]
                    self.refs.append((unit_index, kept[0], kept[-1] + 1, label, key, is_noteref))
        if buf.pages:
            self.page = buf.pages[-1]
        for note in buf.notes:
            self._dispatch(note, ctx)
        return unit_index

    # -- small helpers

    def _mark(self, el: etree._Element) -> None:
        """Entering an element that a TOC entry targets starts that entry's section."""
        if self.doc_toc:
            for name in (el.get("id"), el.get("name") if _local(el) == "a" else None):
                if name and name in self.doc_toc:
                    self.toc_path = self.doc_toc[name]

    def _with_lang(self, el: etree._Element, ctx: _Ctx) -> _Ctx:
        lang = _lang(el)
        return replace(ctx, lang=lang) if lang and lang != ctx.lang else ctx

    def _page_label(self, el: etree._Element) -> str:
        return _squash(el.get("title") or el.get("aria-label") or "") or _plain(el) or el.get("id") or ""

    def _path(self, el: etree._Element) -> str:
        rel = self.root_tree.getelementpath(el)
        rel = re.sub(r"\{[^}]*\}", "", rel)
        return f"/{self.root_name}" + ("" if rel == "." else "/" + rel)


# --------------------------------------------------------------------------- entry point


def parse_epub(data: bytes, config: EpubParserConfig) -> ParsedDocument:
    """Parse an EPUB 2 or EPUB 3 file into units in reading order.

    Parameters
    ----------
    data : bytes
        The whole ``.epub`` (a zip). Nothing else is read.
    config : EpubParserConfig
        Admission caps: members, declared and actually read decompressed
        bytes, per-member compression ratio, bytes per XML document, element
        nesting depth.

    Returns
    -------
    ParsedDocument
        ``units`` (length N) in spine order, each with whitespace-collapsed
        text (``preformatted`` keeps its newlines; ruby ``rt``/``rp``,
        script/style/head and ``hidden`` elements are dropped), a locator
        ``{"spine_index", "href", "element_path"}`` and ``section_path`` = the
        titles of the TOC entry (nav, else NCX) whose target is the last one
        reached in reading order (a unit containing a target belongs to it),
        or the h1-h6 heading stack before any entry applies. Attributes:
        ``level`` (heading), ``depth``/``ordered`` (list_item),
        ``table``/``row``/``col``/``header`` (table_cell; table is the 0-based
        table number in the book), ``table_id`` or ``figure_id``/``src``/``alt``
        (figure_caption), ``note_id`` (note), ``page`` (label of the last page
        marker passed), ``lang`` (when its primary subtag differs from the
        book's). ``relationships`` index into ``units``: ``next_in_table_row``,
        ``caption_of`` (table caption -> first cell) and ``note_ref`` (unit
        holding the reference -> note; ``start_char``/``end_char`` are Unicode
        scalar offsets of the marker in the source unit's text, ``label`` is
        that text). ``metadata``: ``epub_version``, ``package_path``,
        ``toc_source``, ``toc_errors``, ``mimetype_missing``,
        ``package_recovered``, ``html_fallback``, ``skipped_documents``
        (``[{"href", "reason"}]``), ``obfuscated_resources``,
        ``unresolved_noterefs``, ``documents_parsed``. Zero units is a valid
        result.

    Raises
    ------
    ParseError
        ``empty-file``, ``not-a-zip``, ``malformed-container`` (no usable
        container.xml and no OPF), ``malformed-package`` (OPF unreadable, not a
        package, or without spine), ``malformed-xml`` (encryption.xml
        unparseable), ``encrypted`` (zip encryption flag, or encryption.xml
        covering text documents; font obfuscation is tolerated), and the caps
        ``cap-members``, ``cap-decompressed-bytes``,
        ``cap-compression-ratio``, ``cap-xml-bytes``, ``cap-depth``. No other
        exception is raised for bad input. A single content document that
        cannot be read or parsed is skipped and listed in
        ``metadata["skipped_documents"]``.
    """
    try:
        return _parse(data, config)
    except ParseError:
        raise
    except (etree.LxmlError, *_MEMBER_ERRORS, KeyError, UnicodeError) as exc:  # safety net for bad input
        raise ParseError("malformed-package", f"{type(exc).__name__}: {exc}") from None


def _parse(data: bytes, config: EpubParserConfig) -> ParsedDocument:
    arc = _Archive(data, config)
    encrypted, obfuscated = _encrypted_targets(arc)
    pkg = _read_package(arc, _package_path(arc))
    text_paths = {i.path for i in pkg.manifest.values() if i.media_type in _XHTML_TYPES}
    if encrypted & (text_paths | {i.path for i in pkg.spine if isinstance(i, _Item)}):
        raise ParseError("encrypted", f"encryption.xml lists content documents: {sorted(encrypted & text_paths)[:3]}")
    spine_pos: dict[str, int] = {}
    for index, item in enumerate(pkg.spine):
        if isinstance(item, _Item):
            spine_pos.setdefault(item.path, index)
    toc_source, toc, toc_errors = _read_toc(arc, pkg, spine_pos)
    walker = _Walker(pkg.language)
    skipped: list[dict[str, str]] = []
    fallback: list[str] = []
    parsed = 0
    for index, item in enumerate(pkg.spine):
        if not isinstance(item, _Item):
            skipped.append({"href": item, "reason": "missing-manifest-item"})
            continue
        if item.media_type not in _XHTML_TYPES:
            skipped.append({"href": item.href, "reason": f"not-xhtml: {item.media_type}"})
            continue
        if spine_pos.get(item.path) != index:
            skipped.append({"href": item.href, "reason": "duplicate-spine-item"})
            continue
        try:
            root, used_fallback = _parse_content(arc.read(item.path), config.max_depth)
        except _Unusable as exc:
            skipped.append({"href": item.href, "reason": str(exc)})
            continue
        if used_fallback:
            fallback.append(item.href)
        walker.walk(root, index, item, toc.get(index, {}))
        parsed += 1
    unresolved = walker.resolve_note_refs()
    metadata = {
        "epub_version": pkg.version, "package_path": pkg.path, "toc_source": toc_source,
        "toc_errors": toc_errors, "mimetype_missing": arc.find("mimetype") is None,
        "package_recovered": pkg.recovered, "html_fallback": fallback, "skipped_documents": skipped,
        "obfuscated_resources": obfuscated, "unresolved_noterefs": unresolved, "documents_parsed": parsed,
    }
    return ParsedDocument(
        PARSER_NAME, PARSER_VERSION, MEDIA_TYPE, walker.units, walker.relationships,
        title=pkg.title, language=pkg.language, metadata=metadata,
    )
