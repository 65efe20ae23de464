"""Office Open XML (DOCX, PPTX): admission of a package, and reading its numeric attributes.

Shared by the DOCX and PPTX plug-ins. Admission: a zip, checked under caps before any read; the
checks mirror the EPUB archive step: member count, declared decompressed bytes, per-member
compression ratio; a password-protected Office file is an OLE compound file (not a zip) and is
named ``encrypted``.
"""

from __future__ import annotations

import io
import posixpath
import re
import zipfile
from collections.abc import Callable
from typing import TypeVar

from fabric_resources.parsing.document import ParseError
from fabric_resources.parsing.lxml_limits import syntax_error_reason

T = TypeVar("T")

#: The first bytes of an OLE compound file: what Office writes for a password-protected DOCX/PPTX.
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def admit_package(data: bytes, config, kind: str) -> None:
    """Raise :class:`ParseError` unless ``data`` is a zip within ``config``'s caps.

    Parameters
    ----------
    data : bytes
    config
        ``max_members``, ``max_decompressed_bytes``, ``max_compression_ratio``.
    kind : str
        ``"docx"`` or ``"pptx"``: names the ``malformed-<kind>`` reason.

    Raises
    ------
    ParseError
        ``empty-file``, ``encrypted`` (OLE container), ``malformed-<kind>`` (not a zip),
        ``cap-members``, ``cap-decompressed-bytes``, ``cap-compression-ratio``.
    """
    if not data:
        raise ParseError("empty-file", "zero bytes")
    if data.startswith(OLE_MAGIC):
        raise ParseError("encrypted", "an OLE compound file: a password-protected (or pre-2007) Office file")
    try:
        infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ParseError(f"malformed-{kind}", f"not a zip: {exc}") from None
    if len(infos) > config.max_members:
        raise ParseError("cap-members", f"{len(infos)} members")
    seen: set[bytes] = set()
    for info in infos:
        # Part names are equal as case-insensitive ASCII (bytes.lower folds only A-Z), and OPC says a
        # package holding two equal ones is not to be recognized (ECMA-376 Part 2, M1.12): zipfile
        # reads the last of them, another reader the first, so the text indexed is not the one
        # PowerPoint or Word would show.
        folded = info.filename.encode("utf-8", "surrogateescape").lower()
        if folded in seen:
            raise ParseError(f"malformed-{kind}", f"two parts named {info.filename!r}: part names must be unique "
                                                  "(Open Packaging Conventions, ECMA-376 Part 2, M1.12)")
        seen.add(folded)
    declared = sum(info.file_size for info in infos)
    if declared > config.max_decompressed_bytes:
        raise ParseError("cap-decompressed-bytes", f"{declared} bytes declared")
    for info in infos:
        if info.file_size and info.file_size > max(info.compress_size, 1) * config.max_compression_ratio:
            raise ParseError("cap-compression-ratio", f"{info.filename}: {info.file_size}/{info.compress_size}")
        if info.flag_bits & 0x1:
            raise ParseError("encrypted", f"{info.filename}: zip encryption flag")


def declared_bytes(data: bytes) -> int:
    """Uncompressed bytes the zip's members declare, summed (0 when ``data`` is no zip: admission
    names that); the DOCX, PPTX and EPUB plug-ins choose their bounds by it. ``zipfile`` never
    reads a member past its declared size (a lying member fails its CRC), so this bounds what the
    parse can inflate."""
    try:
        return sum(info.file_size for info in zipfile.ZipFile(io.BytesIO(data)).infolist())
    except Exception:  # zipfile raises many types on junk (NotImplementedError for a bad version): the parser names it
        return 0


def without_dangling_relationships(data: bytes) -> tuple[bytes, list[str]]:
    """``data`` (an admitted zip) without the internal relationships whose target part is missing,
    and the missing part names, sorted; ``(data, [])`` when every target is there.

    python-docx loads every part a relationship names and refuses the whole package on the first
    one missing (``KeyError``), though the text is in the document part; Word opens such a file,
    offering to recover it. Targets resolve as python-docx resolves them (relative to the source
    part's folder, unquoted); external targets are left alone. The ``.rels`` XML is read with
    entities unresolved and no network.

    Raises
    ------
    lxml.etree.LxmlError
        A ``.rels`` member that is not XML.
    """
    from lxml import etree

    package, names, parser = _opened(data)
    missing: set[str] = set()
    rewritten: dict[str, bytes] = {}
    for name in sorted(n for n in names if n.endswith(".rels")):
        folder = "/" + posixpath.dirname(posixpath.dirname(name))  # word/_rels/document.xml.rels -> /word
        root = etree.fromstring(package.read(name), parser)
        dropped = False
        for rel in list(root):
            target = rel.get("Target") or ""
            if rel.get("TargetMode") == "External" or not target:
                continue
            part = posixpath.normpath(posixpath.join(folder, target)).lstrip("/")
            if part not in names:
                missing.add(part)
                root.remove(rel)
                dropped = True
        if dropped:
            rewritten[name] = etree.tostring(root, xml_declaration=True, encoding="UTF-8", standalone=True)
    if not rewritten:
        return data, []
    return _repackaged(package, rewritten), sorted(missing)


#: "<!DOCTYPE" in each encoding a part may be written in (UTF-8, UTF-16: OPC M1.17).
_DOCTYPE_MARKS = tuple("<!DOCTYPE".encode(codec) for codec in ("utf-8", "utf-16-le", "utf-16-be"))
#: Why a part declaring a DTD is not read.
DTD_REASON = ("a DTD declaration, which the Open Packaging Conventions forbid a package's XML "
              "(ECMA-376 Part 2, M1.18)")


class DtdDeclared(ValueError):
    """The package's main part, its content types or its package relationships declare a DTD: the
    package is not to be read (OPC M1.18); the caller names it ``malformed-<kind>``."""


def _declares_dtd(xml: bytes, parser) -> bool:
    """Whether the XML member ``xml`` declares a DTD. python-docx and python-pptx parse parts with
    entities unresolved, so a reference to one the DTD declares cut the text where it stood
    (``<a:t>bullet &x; kiwi</a:t>`` read ``bullet``) and nothing said so; PowerPoint and Word
    refuse such a part, as OPC tells a consumer to. A member that is not well-formed is not
    counted here: the malformed-part check names it (an entity expansion past libxml2's limit too)."""
    if not any(mark in xml for mark in _DOCTYPE_MARKS):
        return False
    from lxml import etree

    try:
        docinfo = etree.fromstring(xml, parser).getroottree().docinfo
    except etree.LxmlError:
        return False
    return bool(docinfo.doctype) or docinfo.internalDTD is not None or docinfo.externalDTD is not None


def _unreadable(exc: BaseException) -> str:
    """Why a part is left out: ``cap-depth`` for libxml2's depth limit, named as HTML and EPUB name
    it (its own words advise an option Fabric does not take), else lxml's error."""
    if syntax_error_reason(exc, "") == "cap-depth":
        return f"cap-depth: elements nested deeper than the 256 levels libxml2 reads (line {getattr(exc, 'lineno', '?')})"
    return f"{type(exc).__name__}: {exc}"


def relationship_targets(data: bytes, part: str) -> dict[str, str]:
    """The internal relationships of ``part`` (a member name, ``ppt/presentation.xml``) in the
    package ``data`` (an admitted zip): rId -> target member name, resolved as
    :func:`without_dangling_relationships` resolves them; ``{}`` when the part has no ``.rels``.

    Raises
    ------
    lxml.etree.LxmlError
        Its ``.rels`` member is not XML.
    """
    from lxml import etree

    package, names, parser = _opened(data)
    folder, base = posixpath.split(part)
    rels = posixpath.join(folder, "_rels", base + ".rels")
    if rels not in names:
        return {}
    targets = {}
    for rel in etree.fromstring(package.read(rels), parser):
        target = rel.get("Target") or ""
        if rel.get("TargetMode") != "External" and target and rel.get("Id"):
            targets[rel.get("Id")] = posixpath.normpath(posixpath.join("/" + folder, target)).lstrip("/")
    return targets


def _opened(data: bytes):
    """``data`` (an admitted zip) opened: the package, its member names, and the XML parser its
    parts are read with (entities unresolved, no network)."""
    from lxml import etree

    package = zipfile.ZipFile(io.BytesIO(data))
    return package, set(package.namelist()), etree.XMLParser(resolve_entities=False, no_network=True)


def _repackaged(package: zipfile.ZipFile, replaced: dict[str, bytes], dropped: frozenset[str] = frozenset()) -> bytes:
    """``package`` written again, each member in ``replaced`` with its new bytes, those in ``dropped`` left out."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as written:
        for info in package.infolist():
            if info.filename not in dropped:
                written.writestr(info, replaced.get(info.filename) or package.read(info.filename))
    return out.getvalue()


def without_unreadable_parts(data: bytes) -> tuple[bytes, list[tuple[str, str]]]:
    """``data`` (an admitted zip) without its XML parts (and relationship parts) that are not
    well-formed or declare a DTD (:data:`DTD_REASON`), but the package's main part,
    ``[Content_Types].xml`` and ``_rels/.rels``, then without the relationships whose target is missing
    (:func:`without_dangling_relationships`); and what went, ``(part, reason)`` sorted by part:
    the parser's error for a malformed part, ``missing-part`` for a missing one. ``(data, [])``
    when nothing is unreadable but the main part, which is the caller's to refuse.

    python-docx and python-pptx parse every XML part they load when the package opens, so one
    malformed part of no text (``docProps/core.xml``, ``word/settings.xml``, a notes slide, a
    slide master) failed the whole document; Word and PowerPoint offer to repair such a file.

    Raises
    ------
    lxml.etree.LxmlError
        A ``.rels`` member that is not XML.
    DtdDeclared
        The main part, ``[Content_Types].xml`` or ``_rels/.rels`` declares a DTD.
    """
    from lxml import etree

    package, names, parser = _opened(data)
    main = {"[Content_Types].xml"}
    if "_rels/.rels" in names:
        for rel in etree.fromstring(package.read("_rels/.rels"), parser):
            if (rel.get("Type") or "").endswith("/officeDocument"):
                main.add(posixpath.normpath((rel.get("Target") or "").lstrip("/")))
    for name in sorted(main | {"_rels/.rels"}):
        if name in names and _declares_dtd(package.read(name), parser):
            raise DtdDeclared(f"{name}: {DTD_REASON}")
    broken: dict[str, str] = {}
    for name in sorted(names - main - {"_rels/.rels"}):
        if name.endswith((".xml", ".rels")):
            xml = package.read(name)
            try:
                etree.fromstring(xml, parser)
            except etree.LxmlError as exc:
                if name.endswith(".xml"):  # a malformed .rels is the relationships step's to refuse
                    broken[name] = _unreadable(exc)
                continue
            if _declares_dtd(xml, parser):
                broken[name] = DTD_REASON
    if broken:
        data = _repackaged(package, {}, frozenset(broken))
    data, missing = without_dangling_relationships(data)
    lost = {**{part: "missing-part" for part in missing}, **broken}
    return data, sorted(lost.items())


def opened_or_repaired(data: bytes, open_package: Callable[[io.BytesIO], T]) -> tuple[T, list[tuple[str, str]]]:
    """``open_package`` (python-docx's ``Document``, python-pptx's ``Presentation``) of ``data``,
    and ``[]``; where a part is missing or malformed, of ``data`` without its unreadable parts
    (:func:`without_unreadable_parts`), and those parts with their reasons, for the caller to
    list as unread.

    A part declaring a DTD is unreadable (:data:`DTD_REASON`).

    Raises
    ------
    KeyError, lxml.etree.XMLSyntaxError
        The package cannot be opened and no part but the main one is unreadable.
    DtdDeclared
        The main part, ``[Content_Types].xml`` or ``_rels/.rels`` declares a DTD.
    """
    from lxml import etree

    if not _any_dtd(data):
        try:
            return open_package(io.BytesIO(data)), []
        except (KeyError, etree.XMLSyntaxError):
            repaired, lost = without_unreadable_parts(data)
            if not lost:
                raise
            return open_package(io.BytesIO(repaired)), lost
    repaired, lost = without_unreadable_parts(data)
    return open_package(io.BytesIO(repaired)), lost


def _any_dtd(data: bytes) -> bool:
    """Whether an XML member of ``data`` (an admitted zip) may declare a DTD (holds ``<!DOCTYPE``):
    then the package is opened only without the parts that do (:func:`without_unreadable_parts`).
    One read of each member, bounded by the admission caps; python-pptx and python-docx read them all."""
    package = zipfile.ZipFile(io.BytesIO(data))
    return any(name.endswith((".xml", ".rels")) and any(m in package.read(name) for m in _DOCTYPE_MARKS)
               for name in package.namelist())


# ST_DecimalNumber is an xsd:int: optional sign, ASCII digits, surrounding XML whitespace. Not
# str.isdigit (it accepts "²", which int() refuses) nor int() alone (it accepts "٣" and "1_0", and
# refuses more than 4,300 digits): leading zeros aside, at most 9 digits, so int() never sees more.
_DECIMAL_NUMBER = re.compile(r"[ \t\n\r]*([+-]?)0*([0-9]{1,9})[ \t\n\r]*")


def decimal_number(value: str | None) -> int | None:
    """The integer an OOXML ``ST_DecimalNumber`` attribute holds; None when it holds none.

    A value that is not one (``"²"``, ``"x"``, ``"two"``, past 9 digits) is ignored by the
    caller, as Word ignores it: a bad attribute is an error of that element, not of the file.

    >>> decimal_number("2"), decimal_number(" -1 "), decimal_number("007"), decimal_number("²"), decimal_number(None)
    (2, -1, 7, None, None)
    >>> decimal_number("1" * 10), decimal_number("1_0"), decimal_number("٣")
    (None, None, None)
    """
    match = _DECIMAL_NUMBER.fullmatch(value or "")
    if match is None:
        return None
    return int(match.group(1) + match.group(2))


def element_text(element) -> str:
    """All the text of an element holding text (``w:t``, ``m:t``, ``a:t``, a chart's ``c:v``), its
    comments and processing instructions skipped, as Word and PowerPoint skip them.

    ``element.text`` (and ``findtext``) is only what precedes the element's first child node, so an
    XML comment inside a run's text cut it there: ``High <!-- x --> water`` read ``High``, and
    nothing said the rest was lost.

    >>> from lxml import etree
    >>> element_text(etree.fromstring("<t>High <!-- x --> wa<?pi y?>ter</t>"))
    'High  water'
    """
    return "".join(element.itertext())


def title_and_language(document, errors: tuple[type[BaseException], ...]) -> tuple[str | None, str | None]:
    """The ``dc:title`` and ``dc:language`` of a python-docx or python-pptx ``document``'s core
    properties (``docProps/core.xml``), ``None`` where blank; both ``None`` when that part cannot
    be read (one of ``errors``): a bad core part costs the title, never the text."""
    try:
        core = document.core_properties
        return (core.title or "").strip() or None, (core.language or "").strip() or None
    except errors:
        return None, None
