"""The EPUB parser's entry point: the four steps in order, bytes -> :class:`ParsedDocument`.

1. :mod:`.archive` — admission of the zip under the caps.
2. :mod:`.package` — container, OPF, manifest, spine, encryption.
3. :mod:`.navigation` — nav document or NCX.
4. :mod:`.content` — the walk over each spine document.
"""

from __future__ import annotations

from fabric_resources.config import EpubParserConfig
from fabric_resources.parsing.document import ParsedDocument, ParseError, UnreadPart, bad_input_net
from fabric_resources.parsing.epub.identity import MEDIA_TYPE, PARSER_NAME, PARSER_VERSION
from fabric_resources.parsing.epub.archive import Archive, MemberUnusable
from fabric_resources.parsing.epub.content import Walker
from fabric_resources.parsing.epub.markup import XHTML_TYPES, parse_content
from fabric_resources.parsing.epub.navigation import read_toc
from fabric_resources.parsing.epub.package import ManifestItem, encrypted_targets, package_path, read_package


def parse_epub_file(data: bytes, config: EpubParserConfig, media_type: str) -> ParsedDocument:
    """:func:`parse_epub` in the plug-ins' calling convention (the target of ``run_parser``)."""
    return parse_epub(data, config)


@bad_input_net
def parse_epub(data: bytes, config: EpubParserConfig) -> ParsedDocument:
    """Parse an EPUB 2 or EPUB 3 file into units in reading order.

    Parameters
    ----------
    data : bytes
        The whole ``.epub`` (a zip). Nothing else is read.
    config : EpubParserConfig
        Admission caps: file bytes, members, declared and actually read
        decompressed bytes, per-member compression ratio, bytes per XML
        document, element nesting depth; and ``max_unit_chars``.

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
        book's), ``part``/``parts`` with locator ``char_start``/``char_end``
        (offsets into the element's text) on the pieces of an element whose text
        is longer than ``max_unit_chars``, ``decoding_repairs`` (U+FFFD
        characters standing for bytes of a UTF-8 document that were not UTF-8).
        ``relationships`` index into ``units``: ``next_in_table_row``,
        ``caption_of`` (table caption -> first cell) and ``note_ref`` (unit
        holding the reference -> note; ``start_char``/``end_char`` are Unicode
        scalar offsets of the marker in the source unit's text, ``label`` is
        that text). ``metadata``: ``epub_version``, ``package_path``,
        ``toc_source``, ``toc_errors``, ``mimetype_missing``,
        ``package_recovered``, ``html_fallback``, ``skipped_documents``
        (``[{"href", "reason"}]``), ``obfuscated_resources``,
        ``unresolved_noterefs``, ``documents_parsed``, ``decoding_repairs``
        (``{href: count}`` of the documents repaired). Zero units is a valid
        result. ``language`` is the language the package declares.

    Raises
    ------
    ParseError
        ``too-large`` (more than ``max_bytes``), ``empty-file``, ``not-a-zip``, ``malformed-container`` (no usable
        container.xml and no OPF), ``malformed-package`` (OPF unreadable, not a
        package, or without spine), ``malformed-xml`` (encryption.xml
        unparseable), ``encrypted`` (zip encryption flag, or encryption.xml
        covering text documents; font obfuscation is tolerated), and the caps
        ``cap-members``, ``cap-decompressed-bytes``,
        ``cap-compression-ratio``, ``cap-xml-bytes``, ``cap-depth``, ``cap-units``, ``cap-table-grid``; and
        ``parser-error`` (naming the exception) for anything no step
        anticipated (:func:`~fabric_resources.parsing.document.bad_input_net`).
        A single content document that cannot be read or parsed (a corrupt
        member, whatever its compression) is skipped and listed in
        ``metadata["skipped_documents"]``, and, with a spine item that names no manifest item, in
        ``unread`` (``"chapter <href>"``: the book is reported partly read; an image or SVG page,
        which holds no text to lose, is not).
    """
    if len(data) > config.max_bytes:
        raise ParseError("too-large", f"{len(data)} bytes > max_bytes {config.max_bytes}")
    arc = Archive(data, config)
    encrypted, obfuscated = encrypted_targets(arc)
    pkg = read_package(arc, package_path(arc))
    text_paths = {i.path for i in pkg.manifest.values() if i.media_type in XHTML_TYPES}
    if encrypted & (text_paths | {i.path for i in pkg.spine if isinstance(i, ManifestItem)}):
        raise ParseError("encrypted", f"encryption.xml lists content documents: {sorted(encrypted & text_paths)[:3]}")
    spine_pos: dict[str, int] = {}
    for index, item in enumerate(pkg.spine):
        if isinstance(item, ManifestItem):
            spine_pos.setdefault(item.path, index)
    toc_source, toc, toc_errors = read_toc(arc, pkg, spine_pos)
    walker = Walker(pkg.language, config.max_unit_chars, config.max_units)
    skipped: list[dict[str, str]] = []
    unread: list[UnreadPart] = []  # text the book has and the parse lost (not an image or SVG page)
    fallback: list[str] = []
    repairs: dict[str, int] = {}
    parsed = 0
    for index, item in enumerate(pkg.spine):
        if not isinstance(item, ManifestItem):
            skipped.append({"href": item, "reason": "missing-manifest-item"})
            unread.append(UnreadPart(f"chapter {item}", "missing-manifest-item"))
            continue
        if item.media_type not in XHTML_TYPES:
            skipped.append({"href": item.href, "reason": f"not-xhtml: {item.media_type}"})
            continue
        if spine_pos.get(item.path) != index:
            skipped.append({"href": item.href, "reason": "duplicate-spine-item"})
            continue
        try:
            content = parse_content(arc.read(item.path), config.max_depth)
        except MemberUnusable as exc:
            skipped.append({"href": item.href, "reason": str(exc)})
            unread.append(UnreadPart(f"chapter {item.href}", str(exc)))
            continue
        if content.used_html_fallback:
            fallback.append(item.href)
        if content.decoding_repairs:
            repairs[item.href] = content.decoding_repairs
        walker.walk(content.root, index, item, toc.get(index, {}), repaired=bool(content.decoding_repairs))
        parsed += 1
    unresolved = walker.resolve_note_refs()
    metadata = {
        "epub_version": pkg.version, "package_path": pkg.path, "toc_source": toc_source,
        "toc_errors": toc_errors, "mimetype_missing": arc.find("mimetype") is None,
        "package_recovered": pkg.recovered, "html_fallback": fallback, "skipped_documents": skipped,
        "obfuscated_resources": obfuscated, "unresolved_noterefs": unresolved, "documents_parsed": parsed,
        "decoding_repairs": repairs,
    }
    return ParsedDocument(
        PARSER_NAME, PARSER_VERSION, MEDIA_TYPE, walker.units, walker.relationships,
        title=pkg.title, language=pkg.language, metadata=metadata, unread=unread,
    )
