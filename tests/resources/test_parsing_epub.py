"""Tests for the EPUB parser (fabric_resources.parsing.epub).

Synthetic EPUBs are built in memory with zipfile; the real files come from
../shared/corpus/epub and ../shared/corpus/epub-edge and are skipped when that
folder is absent. Each docstring names the mutation of the parser it guards
against.
"""

from __future__ import annotations

import io
import posixpath
import struct
import time
import zipfile
from pathlib import Path
from urllib.parse import quote

import pytest

from fabric_resources.parsing.document import ParsedDocument, ParseError
from fabric_resources.parsing.epub import PARSER_NAME, PARSER_VERSION
from fabric_resources.parsing.epub.parser import parse_epub
from fabric_resources.config import EpubParserConfig

SHARED = Path(__file__).resolve().parents[3] / "shared"
CORPUS = SHARED / "corpus" / "epub"
EDGE = SHARED / "corpus" / "epub-edge"
CONFIG = EpubParserConfig()
CONTAINER = (
    '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
    '<rootfiles><rootfile full-path="{path}" media-type="application/oebps-package+xml"/></rootfiles></container>'
)


# --------------------------------------------------------------------------- builders


def xhtml(body: str, lang: str = "en") -> str:
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" '
        f'xml:lang="{lang}" lang="{lang}"><head><title>t</title><style>p {{ color: red }}</style>'
        f"<script>var hidden = 1;</script></head><body>{body}</body></html>"
    )


def nav_doc(ol: str) -> str:
    return xhtml(f'<nav epub:type="toc" id="toc"><h1>Contents</h1>{ol}</nav>')


def ncx_doc(points: str) -> str:
    return (
        '<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">'
        f"<head/><docTitle><text>T</text></docTitle><navMap>{points}</navMap></ncx>"
    )


def build_epub(
    docs: dict[str, str | bytes],
    *,
    nav: str | None = None,
    ncx: str | None = None,
    version: str = "3.0",
    lang: str = "en",
    title: str = "Synthetic",
    opf_path: str = "OEBPS/content.opf",
    opf: str | None = None,
    container: bool = True,
    mimetype: bool = True,
    extra: dict[str, str | bytes] | None = None,
    extra_items: str = "",
    spine_extra: str = "",
) -> bytes:
    """An EPUB whose spine is ``docs`` in order (keys are manifest hrefs relative to the OPF)."""
    base = opf_path.rpartition("/")[0]
    items, refs = [], []
    for i, href in enumerate(docs):
        items.append(f'<item id="d{i}" href="{quote(href)}" media-type="application/xhtml+xml"/>')
        refs.append(f'<itemref idref="d{i}"/>')
    if nav is not None:
        items.append('<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>')
    if ncx is not None:
        items.append('<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>')
    if opf is None:
        toc_attr = ' toc="ncx"' if ncx is not None else ""
        opf = (
            f'<?xml version="1.0" encoding="utf-8"?><package xmlns="http://www.idpf.org/2007/opf" version="{version}" '
            'unique-identifier="uid"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
            f'<dc:identifier id="uid">x</dc:identifier><dc:title>{title}</dc:title><dc:language>{lang}</dc:language>'
            f'</metadata><manifest>{"".join(items)}{extra_items}</manifest>'
            f'<spine{toc_attr}>'
            f'{"".join(refs)}{spine_extra}</spine></package>'
        )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        if mimetype:
            zf.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        if container:
            zf.writestr("META-INF/container.xml", CONTAINER.format(path=opf_path))
        zf.writestr(opf_path, opf)
        join = lambda href: posixpath.normpath(posixpath.join(base, href))  # noqa: E731
        for href, content in docs.items():
            zf.writestr(join(href), content)
        if nav is not None:
            zf.writestr(join("nav.xhtml"), nav)
        if ncx is not None:
            zf.writestr(join("toc.ncx"), ncx)
        for name, content in (extra or {}).items():
            zf.writestr(name, content)
    return buf.getvalue()


def reason(data: bytes, config: EpubParserConfig = CONFIG) -> str:
    with pytest.raises(ParseError) as info:
        parse_epub(data, config)
    return info.value.reason


def texts(doc: ParsedDocument, kind: str | None = None) -> list[str]:
    return [u.text for u in doc.units if kind is None or u.kind == kind]


def unit_with(doc: ParsedDocument, needle: str):
    return next(u for u in doc.units if needle in u.text)


def _records(data: bytes, signature: bytes, name_len_at: int, name_at: int, name: str) -> list[int]:
    """Offsets of the zip records (local or central) for member ``name``."""
    found, start = [], data.find(signature)
    while start != -1:
        name_len = struct.unpack_from("<H", data, start + name_len_at)[0]
        if data[start + name_at : start + name_at + name_len] == name.encode():
            found.append(start)
        start = data.find(signature, start + 4)
    return found


def patch_central(data: bytes, name: str, offset: int, fmt: str, value: int) -> bytes:
    """Overwrite a field of ``name``'s central-directory record (offset from its signature)."""
    raw = bytearray(data)
    (start,) = _records(data, b"PK\x01\x02", 28, 46, name)
    struct.pack_into(fmt, raw, start + offset, value)
    return bytes(raw)


def set_encryption_flag(data: bytes, name: str) -> bytes:
    """Set general-purpose flag bit 0 (traditional encryption) on ``name``'s headers."""
    raw = bytearray(data)
    for start in _records(data, b"PK\x03\x04", 26, 30, name):
        raw[start + 6] |= 0x01
    for start in _records(data, b"PK\x01\x02", 28, 46, name):
        raw[start + 8] |= 0x01
    return bytes(raw)


SIMPLE = {"ch1.xhtml": xhtml("<h1>One</h1><p>Hello world.</p>")}


# --------------------------------------------------------------------------- failures


def test_not_a_zip_and_empty() -> None:
    """Guards against letting zipfile.BadZipFile (or any non-ParseError) escape for junk bytes."""
    assert reason(b"hello, this is plainly not a zip file") == "not-a-zip"
    assert reason(b"") == "empty-file"
    whole = build_epub(SIMPLE)
    assert reason(whole[: len(whole) // 2]) == "not-a-zip"


def test_missing_container_without_opf_is_malformed_container() -> None:
    """Guards against treating an archive with neither container.xml nor any OPF as an empty book."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("mimetype", "application/epub+zip")
        zf.writestr("OEBPS/ch1.xhtml", SIMPLE["ch1.xhtml"])
    assert reason(buf.getvalue()) == "malformed-container"


def test_missing_container_falls_back_to_root_opf() -> None:
    """Guards against requiring META-INF/container.xml when the OPF sits at the zip root."""
    doc = parse_epub(build_epub(SIMPLE, container=False, opf_path="package.opf"), CONFIG)
    assert texts(doc) == ["One", "Hello world."]
    assert doc.metadata["package_path"] == "package.opf"


def test_container_pointing_nowhere_with_no_opf() -> None:
    """Guards against a KeyError escaping when container.xml names a missing rootfile."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("META-INF/container.xml", CONTAINER.format(path="OEBPS/missing.opf"))
    assert reason(buf.getvalue()) == "malformed-container"


@pytest.mark.parametrize(
    "opf",
    [
        "this is not xml at all",
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata/><manifest/></package>',
        '<?xml version="1.0"?><notapackage><spine/></notapackage>',
    ],
    ids=["garbage", "no-spine", "wrong-root"],
)
def test_malformed_package(opf: str) -> None:
    """Guards against accepting an OPF that is unparseable, lacks a spine, or is not a package."""
    assert reason(build_epub(SIMPLE, opf=opf)) == "malformed-package"


def test_sloppy_opf_is_recovered() -> None:
    """Guards against failing books whose OPF has a bare '&' in the title (common in the wild)."""
    data = build_epub(SIMPLE, title="Pride & Prejudice")
    doc = parse_epub(data, CONFIG)
    assert doc.metadata["package_recovered"] is True
    assert texts(doc) == ["One", "Hello world."]


@pytest.mark.parametrize("target", ["OEBPS/ch1.xhtml", "OEBPS/content.opf"])
def test_encryption_xml_listing_text_is_encrypted(target: str) -> None:
    """Guards against parsing DRM'd content documents as text, or reporting an encrypted OPF
    as a malformed package."""
    enc = (
        '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
        'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
        '<enc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/>'
        f'<enc:CipherData><enc:CipherReference URI="{target}"/></enc:CipherData>'
        "</enc:EncryptedData></encryption>"
    )
    data = build_epub(SIMPLE, extra={"META-INF/encryption.xml": enc})
    if target.endswith(".opf"):
        data = build_epub(SIMPLE, opf="\x00\x93 ciphertext", extra={"META-INF/encryption.xml": enc})
    assert reason(data) == "encrypted"


def test_font_obfuscation_is_not_encryption() -> None:
    """Guards against rejecting books whose only encryption.xml entry is IDPF font obfuscation."""
    enc = (
        '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
        'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
        '<enc:EncryptionMethod Algorithm="http://www.idpf.org/2008/embedding"/>'
        '<enc:CipherData><enc:CipherReference URI="OEBPS/font.otf"/></enc:CipherData>'
        "</enc:EncryptedData></encryption>"
    )
    doc = parse_epub(build_epub(SIMPLE, extra={"META-INF/encryption.xml": enc, "OEBPS/font.otf": b"x"}), CONFIG)
    assert doc.metadata["obfuscated_resources"] == 1
    assert texts(doc) == ["One", "Hello world."]


def test_zip_encryption_flag_is_encrypted() -> None:
    """Guards against ignoring the zip-level encryption flag bit on a member."""
    data = set_encryption_flag(build_epub(SIMPLE), "OEBPS/ch1.xhtml")
    assert reason(data) == "encrypted"


def test_cap_members() -> None:
    """Guards against skipping the member-count cap (checked before any member is read)."""
    extra = {f"OEBPS/img{i}.png": b"x" for i in range(10)}
    assert reason(build_epub(SIMPLE, extra=extra), EpubParserConfig(max_members=8)) == "cap-members"


def test_cap_decompressed_bytes_on_declared_sizes() -> None:
    """Guards against summing only the members that are read instead of all declared sizes."""
    filler = {f"OEBPS/blob{i}.bin": bytes(range(256)) * 120 for i in range(3)}  # 3 x 30 KB, barely compressible
    config = EpubParserConfig(max_decompressed_bytes=50_000, max_compression_ratio=1000)
    assert reason(build_epub(SIMPLE, extra=filler), config) == "cap-decompressed-bytes"


def test_cap_compression_ratio() -> None:
    """Guards against admitting a zip bomb member (5 MB of zeros deflates ~1000:1)."""
    bomb = {"OEBPS/bomb.css": b"\0" * 5_000_000}
    assert reason(build_epub(SIMPLE, extra=bomb)) == "cap-compression-ratio"


def test_lying_declared_size_never_reads_more() -> None:
    """Guards against trusting a declared size without a bounded read: a member whose central
    directory understates its size must fail or be skipped, never parsed beyond what was declared."""
    data = build_epub({"ch1.xhtml": xhtml("<p>" + "word " * 2000 + "</p>"), "ch2.xhtml": SIMPLE["ch1.xhtml"]})
    lied = patch_central(data, "OEBPS/ch1.xhtml", 24, "<I", 100)  # uncompressed size field
    doc = parse_epub(lied, EpubParserConfig(max_decompressed_bytes=20_000))
    assert [s["href"] for s in doc.metadata["skipped_documents"]] == ["ch1.xhtml"]
    assert texts(doc) == ["One", "Hello world."]


def test_cap_xml_bytes() -> None:
    """Guards against parsing one arbitrarily large XML document."""
    big = {"ch1.xhtml": xhtml("<p>" + "x" * 5000 + "</p>")}
    assert reason(build_epub(big), EpubParserConfig(max_xml_bytes=2000)) == "cap-xml-bytes"


def test_cap_depth_configured_and_libxml2_limit() -> None:
    """Guards against recursing into deeply nested content: both a configured depth below
    libxml2's and libxml2's own limit (reported as cap-depth, not malformed-xml or a skip)."""
    deep = {"ch1.xhtml": xhtml("<div>" * 40 + "deep" + "</div>" * 40)}
    assert reason(build_epub(deep), EpubParserConfig(max_depth=20)) == "cap-depth"
    deeper = {"ch1.xhtml": xhtml("<div>" * 300 + "deep" + "</div>" * 300)}
    assert reason(build_epub(deeper)) == "cap-depth"
    assert texts(parse_epub(build_epub(deep), CONFIG)) == ["deep"]
    # Not well-formed (an unclosed <br>): read by lxml.html, which recovers by stopping at 256
    # levels; the chapter's later text was silently lost, the book active.
    broken = {"ch1.xhtml": xhtml("<p>one<br></p>" + "<div>" * 300 + "deep" + "</div>" * 300 + "<p>after</p>")}
    assert reason(build_epub(broken)) == "cap-depth"
    assert texts(parse_epub(build_epub({"ch1.xhtml": xhtml("<p>one<br></p><p>after</p>")}), CONFIG)) == ["one", "after"]


def test_mutated_bytes_raise_only_parse_error() -> None:
    """Guards against any exception other than ParseError escaping for corrupted archives."""
    data = build_epub(SIMPLE, nav=nav_doc('<ol><li><a href="ch1.xhtml">One</a></li></ol>'))
    for position in range(0, len(data), 23):
        corrupt = bytearray(data)
        corrupt[position] ^= 0xFF
        try:
            parse_epub(bytes(corrupt), CONFIG)
        except ParseError:
            pass


# --------------------------------------------------------------------------- structure


def test_metadata_identity_and_missing_mimetype() -> None:
    """Guards against failing on a missing mimetype member or losing title/language/version."""
    doc = parse_epub(build_epub(SIMPLE, mimetype=False, title="My Book", lang="fr-CA"), CONFIG)
    assert (doc.parser_name, doc.parser_version) == (PARSER_NAME, PARSER_VERSION) == ("epub", "10")
    assert doc.media_type == "application/epub+zip"
    assert (doc.title, doc.language) == ("My Book", "fr-CA")
    assert doc.metadata["mimetype_missing"] is True
    assert doc.metadata["epub_version"] == "3"
    assert parse_epub(build_epub(SIMPLE), CONFIG).metadata["mimetype_missing"] is False


def test_block_kinds_and_whitespace() -> None:
    """Guards against dropping bare div text, merging nested list items, collapsing <pre>
    newlines, or leaking script/style/head text."""
    body = (
        "<section><h2>Heading\n  two</h2><p>  A   para\n graph. </p>"
        "<div>loose text<p>inner</p>tail text</div>"
        "<ul><li>apple<ol><li>nested</li></ol></li></ul>"
        "<blockquote><p>Quoted.</p></blockquote><pre>line 1\n    line 2</pre><p>   </p></section>"
    )
    doc = parse_epub(build_epub({"c.xhtml": xhtml(body)}), CONFIG)
    got = [(u.kind, u.text) for u in doc.units]
    assert got == [
        ("heading", "Heading two"),
        ("paragraph", "A para graph."),
        ("paragraph", "loose text"),
        ("paragraph", "inner"),
        ("paragraph", "tail text"),
        ("list_item", "apple"),
        ("list_item", "nested"),
        ("blockquote", "Quoted."),
        ("preformatted", "line 1\n    line 2"),
    ]
    items = [u.attributes for u in doc.units if u.kind == "list_item"]
    assert items == [{"depth": 1, "ordered": False}, {"depth": 2, "ordered": True}]
    assert doc.units[0].attributes == {"level": 2}
    assert not any("hidden" in t or "color" in t for t in texts(doc))


def test_an_element_hidden_by_its_inline_style_yields_no_text() -> None:
    """guards against (hostile trial 17c): a chapter's element whose inline style hides it
    (``display: none``; ``visibility: hidden`` unless a descendant sets it back), a block or a
    span, indexed and cited where no reader sees it (the HTML parser read the style, the EPUB
    parser only the ``hidden`` attribute); ``hidden="until-found"`` text is kept, as in HTML."""
    body = (
        "<p>Visible heron paragraph.</p>"
        '<p style="display:none">Display none shrew paragraph.</p>'
        '<p>Kept <span style="DISPLAY: None !important">secretspan </span>stoat words.</p>'
        '<div style="visibility: hidden"><p>Invisible vole paragraph.</p></div>'
        '<div style="visibility:hidden"><p style="visibility:visible">Shown again marten.</p></div>'
        '<p hidden="until-found">Until found ermine.</p>'
    )
    doc = parse_epub(build_epub({"c.xhtml": xhtml(body)}), CONFIG)
    assert texts(doc) == ["Visible heron paragraph.", "Kept stoat words.", "Shown again marten.",
                          "Until found ermine."]


def test_a_mathml_equation_is_read_once_without_its_annotations() -> None:
    """guards against (trial 20b): a MathML ``<semantics>``' annotations (the TeX source in
    ``<annotation>``, a content-MathML copy in ``<annotation-xml>``), which no reading system
    shows, read as body text after the equation ("The area is A=πr2A=\\pi r^2Aarea ..."), in a
    paragraph, in loose text and in a heading; the equation's shown tokens stay read, as the HTML
    parser reads them."""
    math = ('<math xmlns="http://www.w3.org/1998/Math/MathML"><semantics><mrow><mi>A</mi><mo>=</mo><mi>π</mi>'
            '<msup><mi>r</mi><mn>2</mn></msup></mrow><annotation encoding="application/x-tex">A=\\pi r^2</annotation>'
            '<annotation-xml encoding="MathML-Content"><apply><eq/><ci>A</ci><ci>Contentcopy</ci></apply>'
            '</annotation-xml></semantics></math>')
    body = f"<h1>Circle {math}</h1><p>The area is {math} for radius r.</p><div>Loose {math} text.</div>"
    doc = parse_epub(build_epub({"c1.xhtml": xhtml(body)}), CONFIG)
    assert texts(doc) == ["Circle A=πr2", "The area is A=πr2 for radius r.", "Loose A=πr2 text."], texts(doc)


def test_the_fallback_text_of_a_video_or_audio_element_yields_no_text() -> None:
    """guards against (trial 22f): an EPUB chapter's ``<video>``/``<audio>`` fallback ("Your reading
    system does not support video.", a paragraph inside the player), which a reading system that
    plays the media never shows, indexed and cited; the HTML parser's rule (trial 22c), shared."""
    body = ("<p>Before the clip.</p><video src='a.mp4' controls='controls'><p>Your reading system does not "
            "support video.</p></video><div>Loose <audio src='b.mp3'>No audio here.</audio> text.</div>"
            "<p>After the clip.</p>")
    doc = parse_epub(build_epub({"c1.xhtml": xhtml(body)}), CONFIG)
    assert texts(doc) == ["Before the clip.", "Loose text.", "After the clip."], texts(doc)


def test_locator_element_path_is_readable() -> None:
    """Guards against namespace-laden or '*' XPaths and wrong spine index / manifest href."""
    body = "<section><p>a</p></section><section><p>b</p><p>c</p><p>d</p></section>"
    doc = parse_epub(build_epub({"x.xhtml": SIMPLE["ch1.xhtml"], "Text/y.xhtml": xhtml(body)}), CONFIG)
    unit = next(u for u in doc.units if u.text == "d")
    assert unit.locator == {"spine_index": 1, "href": "Text/y.xhtml", "element_path": "/html/body/section[2]/p[3]"}


def test_tables_cells_rows_and_caption() -> None:
    """Guards against one unit per table (instead of per cell), wrong row/col/header, colspan
    ignored, missing next_in_table_row links, or a table counter that restarts per file."""
    table = (
        "<table><caption>Prices</caption><thead><tr><th>Item</th><th>Cost</th></tr></thead>"
        '<tbody><tr><td>Tea</td><td colspan="2">2 <em>gold</em></td><td>x</td></tr></tbody></table>'
    )
    doc = parse_epub(build_epub({"a.xhtml": xhtml(table), "b.xhtml": xhtml("<table><tr><td>z</td></tr></table>")}), CONFIG)
    cells = [(u.text, u.attributes) for u in doc.units if u.kind == "table_cell"]
    assert cells == [
        ("Item", {"table": 0, "row": 0, "col": 0, "header": True}),
        ("Cost", {"table": 0, "row": 0, "col": 1, "header": True}),
        ("Tea", {"table": 0, "row": 1, "col": 0, "header": False}),
        ("2 gold", {"table": 0, "row": 1, "col": 1, "header": False}),
        ("x", {"table": 0, "row": 1, "col": 3, "header": False}),
        ("z", {"table": 1, "row": 0, "col": 0, "header": False}),
    ]
    caption = doc.units[0]
    assert (caption.kind, caption.text, caption.attributes) == ("figure_caption", "Prices", {"table_id": 0})
    row_links = [r for r in doc.relationships if r.kind == "next_in_table_row"]
    pairs = [(doc.units[r.source_index].text, doc.units[r.target_index].text) for r in row_links]
    assert pairs == [("Item", "Cost"), ("Tea", "2 gold"), ("2 gold", "x")]
    caption_of = [r for r in doc.relationships if r.kind == "caption_of"]
    assert [(r.source_index, doc.units[r.target_index].text) for r in caption_of] == [(0, "Item")]


def test_a_cell_under_a_rowspan_starts_past_the_column_it_covers() -> None:
    """guards against: rowspan ignored, the cells of the row below one that spans two rows cited a
    column to the left (the HTML parser shares the grid: table_grid)."""
    table = ("<table><tr><td rowspan=\"2\">Mon</td><td>high</td></tr><tr><td>low</td></tr>"
             "<tr><td>Tue</td><td>calm</td></tr></table>")
    doc = parse_epub(build_epub({"a.xhtml": xhtml(table)}), CONFIG)
    at = {u.text: (u.attributes["row"], u.attributes["col"]) for u in doc.units if u.kind == "table_cell"}
    assert at == {"Mon": (0, 0), "high": (0, 1), "low": (1, 1), "Tue": (2, 0), "calm": (2, 1)}


def test_figure_caption_attributes() -> None:
    """Guards against losing the figure's image src/alt or emitting figcaption as a paragraph."""
    body = '<figure id="f"><img src="../Images/cat%201.png" alt="A cat"/><figcaption>The <b>cat</b>.</figcaption></figure>'
    doc = parse_epub(build_epub({"Text/c.xhtml": xhtml(body)}), CONFIG)
    (unit,) = doc.units
    assert unit.kind == "figure_caption" and unit.text == "The cat."
    assert unit.attributes == {"figure_id": 0, "src": "OEBPS/Images/cat 1.png", "alt": "A cat"}


def test_notes_and_note_refs_across_files() -> None:
    """Guards against missing cross-file notes, refs without epub:type, off-by-N marker offsets,
    and treating ordinary fragment links as note references."""
    ch1 = xhtml(
        '<p>Text<a epub:type="noteref" href="notes.xhtml#n1">1</a> more and <a href="#fn2">[2]</a> and '
        '<a href="notes.xhtml#other">link</a>.</p><aside epub:type="footnote" id="fn2"><p>Local  note.</p></aside>'
    )
    notes = xhtml(
        '<section epub:type="endnotes"><h2 id="other">Notes</h2>'
        '<ol><li id="n1"><p>Endnote one.</p></li></ol></section>'
    )
    doc = parse_epub(build_epub({"ch1.xhtml": ch1, "notes.xhtml": notes}), CONFIG)
    note_units = [(u.text, u.attributes["note_id"]) for u in doc.units if u.kind == "note"]
    assert note_units == [("Local note.", "fn2"), ("Endnote one.", "n1")]
    refs = [r for r in doc.relationships if r.kind == "note_ref"]
    assert len(refs) == 2
    for ref in refs:
        source = doc.units[ref.source_index]
        assert source.text == "Text1 more and [2] and link."
        assert source.text[ref.attributes["start_char"] : ref.attributes["end_char"]] == ref.attributes["label"]
        assert doc.units[ref.target_index].kind == "note"
    assert sorted((r.attributes["label"], r.attributes["start_char"]) for r in refs) == [("1", 4), ("[2]", 15)]


def test_page_markers_set_page_and_are_not_units() -> None:
    """Guards against emitting page numbers as text, or applying a mid-paragraph marker to
    the paragraph that contains it instead of the following units."""
    body = (
        '<p>Before</p><div><span epub:type="pagebreak" id="pg12">12</span></div><p>After '
        '<span role="doc-pagebreak" title="13"/> continues</p><p>Next</p>'
    )
    doc = parse_epub(build_epub({"c.xhtml": xhtml(body)}), CONFIG)
    assert [(u.text, u.attributes.get("page")) for u in doc.units] == [
        ("Before", None),
        ("After continues", "12"),
        ("Next", "13"),
    ]


def test_ruby_keeps_base_text_only() -> None:
    """Guards against duplicating ruby readings (rt/rp) into the searchable text."""
    body = (
        "<p><ruby>漢<rt>かん</rt>字<rt>じ</rt></ruby>を"
        "<ruby><rb>読</rb><rp>(</rp><rt>よ</rt><rp>)</rp></ruby>む</p>"
    )
    doc = parse_epub(build_epub({"c.xhtml": xhtml(body, lang="ja")}, lang="ja"), CONFIG)
    assert texts(doc) == ["漢字を読む"]


def test_lang_attribute_only_when_different() -> None:
    """Guards against tagging every unit with a language or never tagging foreign passages."""
    body = '<p>Hello</p><p xml:lang="fr">Bonjour</p><div lang="de"><p>Guten Tag</p></div>'
    doc = parse_epub(build_epub({"c.xhtml": xhtml(body, lang="en")}, lang="en-US"), CONFIG)
    got = [(u.text, u.attributes.get("lang")) for u in doc.units]
    assert got == [("Hello", None), ("Bonjour", "fr"), ("Guten Tag", "de")]


CHAPTERS = {
    "ch1.xhtml": xhtml('<h1>P1</h1><p>intro</p><section id="c2"><h2>C2</h2><p>body two</p></section>'),
    "ch2.xhtml": xhtml("<p>still two</p>"),
    "ch3.xhtml": xhtml("<p>third</p>"),
}
NAV = nav_doc(
    '<ol><li><a href="ch1.xhtml">Part One</a><ol><li><a href="ch1.xhtml#c2">Chapter Two</a></li></ol></li>'
    '<li><span>Part Two</span><ol><li><a href="ch3.xhtml">Chapter Three</a></li></ol></li></ol>'
)
NCX = ncx_doc(
    '<navPoint id="a"><navLabel><text>Part One</text></navLabel><content src="ch1.xhtml"/>'
    '<navPoint id="b"><navLabel><text>Chapter Two</text></navLabel><content src="ch1.xhtml#c2"/></navPoint></navPoint>'
    '<navPoint id="c"><navLabel><text>Part Two</text></navLabel><content src="ch3.xhtml"/>'
    '<navPoint id="d"><navLabel><text>Chapter Three</text></navLabel><content src="ch3.xhtml"/></navPoint></navPoint>'
)
EXPECTED_PATHS = {
    "intro": ("Part One",),
    "body two": ("Part One", "Chapter Two"),
    "still two": ("Part One", "Chapter Two"),
    "third": ("Part Two", "Chapter Three"),
}


@pytest.mark.parametrize("toc", ["nav", "ncx"])
def test_section_paths_from_toc(toc: str) -> None:
    """Guards against ignoring fragment targets, restarting the section at each file, or
    choosing a shallower entry when several target the same spot (nav and NCX alike)."""
    if toc == "nav":
        data = build_epub(CHAPTERS, nav=NAV, ncx=ncx_doc(""))
    else:
        data = build_epub(CHAPTERS, ncx=NCX, version="2.0")
    doc = parse_epub(data, CONFIG)
    assert doc.metadata["toc_source"] == toc
    for needle, path in EXPECTED_PATHS.items():
        assert unit_with(doc, needle).section_path == path


def test_nav_preferred_over_ncx() -> None:
    """Guards against the NCX overriding the EPUB 3 nav when both exist."""
    ncx = ncx_doc('<navPoint id="a"><navLabel><text>Wrong</text></navLabel><content src="ch1.xhtml"/></navPoint>')
    doc = parse_epub(build_epub(CHAPTERS, nav=NAV, ncx=ncx), CONFIG)
    assert unit_with(doc, "intro").section_path == ("Part One",)


def test_section_paths_fall_back_to_headings() -> None:
    """Guards against empty section paths when the book has no TOC."""
    body = "<h1>A</h1><p>a1</p><h2>B</h2><p>b1</p><h1>C</h1><p>c1</p>"
    doc = parse_epub(build_epub({"c.xhtml": xhtml(body)}), CONFIG)
    assert doc.metadata["toc_source"] == "none"
    assert [(u.text, u.section_path) for u in doc.units if u.kind == "paragraph"] == [
        ("a1", ("A",)),
        ("b1", ("A", "B")),
        ("c1", ("C",)),
    ]


def test_awkward_hrefs_and_duplicate_manifest_items() -> None:
    """Guards against failing on percent-encoded / spaced / UTF-8 / '../' hrefs and duplicate items."""
    docs = {"Text/my chapter é.xhtml": xhtml("<p>spaced</p>"), "../Shared/up.xhtml": xhtml("<p>up a level</p>")}
    dup = '<item id="d0" href="Text/my%20chapter%20%C3%A9.xhtml" media-type="application/xhtml+xml"/>'
    data = build_epub(docs, extra_items=dup)
    doc = parse_epub(data, CONFIG)
    assert texts(doc) == ["spaced", "up a level"]
    assert doc.units[1].locator["href"] == "../Shared/up.xhtml"


def test_bad_content_documents_are_skipped_or_recovered() -> None:
    """Guards against failing the whole book for one broken document, and against silently
    dropping a merely non-well-formed XHTML file instead of using the HTML fallback."""
    sloppy = "<html><body><p>Caf&eacute; &nbsp;open<br></p><p>unclosed</body></html>"
    docs = {"ok.xhtml": xhtml("<p>fine</p>"), "sloppy.xhtml": sloppy, "empty.xhtml": b""}
    image = '<item id="img" href="pic.png" media-type="image/png"/>'
    data = build_epub(docs, extra_items=image, spine_extra='<itemref idref="img"/><itemref idref="nope"/>')
    doc = parse_epub(data, CONFIG)
    assert texts(doc) == ["fine", "Café open", "unclosed"]
    assert doc.metadata["html_fallback"] == ["sloppy.xhtml"]
    skipped = {s["href"]: s["reason"] for s in doc.metadata["skipped_documents"]}
    assert set(skipped) == {"empty.xhtml", "pic.png", "nope"}
    assert skipped["pic.png"].startswith("not-xhtml")


def test_zero_units_is_a_valid_result() -> None:
    """Guards against raising for a well-formed book whose documents hold no text."""
    doc = parse_epub(build_epub({"c.xhtml": xhtml('<div><img src="a.png" alt=""/></div>')}), CONFIG)
    assert doc.units == [] and doc.relationships == []


# --------------------------------------------------------------------------- real corpus


def corpus_files() -> list[Path]:
    if not CORPUS.is_dir() or not EDGE.is_dir():
        pytest.skip("../shared/corpus not present")
    return sorted(CORPUS.glob("*.epub")) + sorted(EDGE.glob("*.epub"))


def corpus_doc(name: str) -> ParsedDocument:
    path = CORPUS / name
    if not path.exists():
        pytest.skip("../shared/corpus not present")
    return parse_epub(path.read_bytes(), CONFIG)


def test_corpus_parses_or_fails_cleanly_and_fast() -> None:
    """Guards against any non-ParseError exception on real books, empty/whitespace unit text,
    non-str section paths, dangling relationship indices, and parsing that is too slow."""
    started = time.perf_counter()
    for path in corpus_files():
        try:
            doc = parse_epub(path.read_bytes(), CONFIG)
        except ParseError:
            continue
        assert doc.units, path.name
        for unit in doc.units:
            assert unit.text and unit.text == unit.text.strip(), path.name
            assert isinstance(unit.section_path, tuple) and all(isinstance(s, str) for s in unit.section_path)
            assert set(unit.locator) == {"spine_index", "href", "element_path"}
        for rel in doc.relationships:
            assert 0 <= rel.source_index < len(doc.units) and 0 <= rel.target_index < len(doc.units)
    assert time.perf_counter() - started < 10.0


def test_great_expectations() -> None:
    """Guards against losing body text of a large EPUB 3 book (Standard Ebooks layout)."""
    doc = corpus_doc("charles-dickens_great-expectations.epub")
    assert any("Pip" in u.text for u in doc.units)
    assert doc.metadata["toc_source"] == "nav"
    assert unit_with(doc, "My father’s family name being Pirrip").section_path == ("I",)


def test_wasteland_note_refs() -> None:
    """Guards against noteref offsets that do not select the marker in the source unit."""
    doc = corpus_doc("wasteland.epub")
    refs = [r for r in doc.relationships if r.kind == "note_ref"]
    assert len(refs) == 50  # one per <a epub:type="noteref"> in the file
    for ref in refs:
        source, target = doc.units[ref.source_index], doc.units[ref.target_index]
        assert source.text[ref.attributes["start_char"] : ref.attributes["end_char"]] == ref.attributes["label"] == "*"
        assert target.kind == "note" and target.attributes["note_id"].startswith("note-")
    assert len({r.target_index for r in refs}) == 50


def test_todo_es_mio_epub2_ncx_spanish() -> None:
    """Guards against failing EPUB 2 / NCX-only books with duplicate manifest items and odd hrefs."""
    doc = corpus_doc("todo-es-mio_test.epub")
    assert doc.language and doc.language.startswith("es")
    assert (doc.metadata["epub_version"], doc.metadata["toc_source"]) == ("2", "ncx")
    assert unit_with(doc, "José Luís abrió los ojos").section_path == ("Despertar",)


def test_kusamakura_ruby_not_duplicated() -> None:
    """Guards against ruby readings being kept next to their base text."""
    doc = corpus_doc("kusamakura-japanese-vertical-writing.epub")
    text = "\n".join(u.text for u in doc.units)
    assert "山路を登りながら、こう考えた。" in text
    assert "やまみち" not in text and "山路やまみち" not in text


def test_epub30_spec_tables() -> None:
    """Guards against tables being flattened into paragraphs."""
    doc = corpus_doc("epub30-spec.epub")
    cells = [u for u in doc.units if u.kind == "table_cell"]
    assert cells and any(u.attributes["header"] for u in cells)
    assert any(r.kind == "next_in_table_row" for r in doc.relationships)


def test_nestedtoc_section_paths() -> None:
    """Guards against flattening nested TOC entries (linear="no" spine items included)."""
    doc = corpus_doc("nestedtoc.epub")
    assert unit_with(doc, "Page 1.").section_path == ("Something", "Something Nested")


def test_childrens_literature_page_markers() -> None:
    """Guards against page-break spans becoming text instead of page attributes."""
    doc = corpus_doc("childrens-literature.epub")
    assert unit_with(doc, "The difficulties of classification").attributes["page"] == "171"
    assert "169" not in texts(doc)  # the marker's own text, and the hidden page-list in nav.xhtml


def test_edge_mimetype_missing() -> None:
    """Guards against rejecting an otherwise valid EPUB whose mimetype member is missing."""
    path = EDGE / "epub3_04-ocf__ocf-mimetype-file-missing-error.epub"
    if not path.exists():
        pytest.skip("../shared/corpus not present")
    doc = parse_epub(path.read_bytes(), CONFIG)
    assert doc.metadata["mimetype_missing"] is True and doc.units


def test_element_paths_are_lxmls_with_each_parent_counted_once() -> None:
    """A unit's element path is the one ``getelementpath`` gives (namespaces dropped), now with
    each parent's children counted once: lxml counts the preceding siblings on every call, so a
    chapter of 100,000 paragraphs spent 24 s there (quadratic, in-process, no timeout)."""
    from lxml import etree

    body = ("<p>a</p><div><p>b</p><span>s</span><p>c</p></div><!-- c --><p>d</p>"
            + "".join(f"<p>w{i}</p>" for i in range(1500)))
    chapter = xhtml(body)
    doc = parse_epub(build_epub({"c1.xhtml": chapter}), CONFIG)
    root = etree.fromstring(chapter.encode())
    tree = root.getroottree()
    expected = {"".join(el.itertext()): "/html/" + tree.getelementpath(el).replace(
        "{http://www.w3.org/1999/xhtml}", "") for el in root.iter("{*}p")}
    got = {u.text: u.locator["element_path"] for u in doc.units if u.text in expected}
    assert got == expected and len(got) == 1504
    assert got["c"] == "/html/body/div/p[2]" and got["w1499"] == "/html/body/p[1502]"


def test_cap_units() -> None:
    """A book of very many short paragraphs (512 MB may inflate from the zip) fails ``cap-units``
    as soon as it makes more than ``max_units``, as DOCX, PPTX, text and Markdown do."""
    chapters = {f"c{i}.xhtml": xhtml("".join(f"<p>w{i} {j}</p>" for j in range(20))) for i in range(3)}
    book = build_epub(chapters)
    assert reason(book, EpubParserConfig(max_units=50)) == "cap-units"
    assert len(parse_epub(book, EpubParserConfig(max_units=60)).units) == 60


def test_an_attribute_past_libxml2s_limit_in_a_chapter_loses_no_shown_text_and_fails_no_book():
    """guards against (trial 23i; left by 22f, which cut them in HTML pages): an attribute value
    past libxml2's 10,000,000-byte limit in a chapter (an image's ``data:`` URL, a ``data-*`` blob, a
    giant inline ``style``) failed the whole book ``cap-parser-limit``. The HTML parser's rule, one
    definition: a value the walk does not read is emptied, a ``data:`` URL cut to its header, a style
    keeps the declarations that hide text (its hidden paragraph stays unread); a read attribute that
    cutting would change (an ``id`` a link may target) fails by its name."""
    import base64
    import random

    blob = base64.b64encode(random.Random(5).randbytes(7_500_001)).decode()  # incompressible: no zip-bomb cap
    body = ("<p>The harbour master counted the herring boats.</p>"
            f'<div data-state="{blob}"><p>Tide tables were pinned up.</p></div>'
            f'<p><img src="data:image/png;base64,{blob}" alt="chart"/>A chart of the tides.</p>')
    styled = (f'<p style="--pad:&quot;{blob}&quot;; display: none">Hidden words nobody sees.</p>'
              f'<p style="--pad:&quot;{blob}&quot;">Styled words everybody sees.</p>'
              "<p>Gulls argued over the nets.</p>")
    chapters = {"c1.xhtml": xhtml(body), "c2.xhtml": xhtml(styled), "c3.xhtml": xhtml("<p>The second chapter.</p>")}
    doc = parse_epub(build_epub(chapters), CONFIG)
    assert texts(doc) == ["The harbour master counted the herring boats.", "Tide tables were pinned up.",
                          "A chart of the tides.", "Styled words everybody sees.", "Gulls argued over the nets.",
                          "The second chapter."]
    assert not doc.unread
    with pytest.raises(ParseError) as failed:
        parse_epub(build_epub({"c1.xhtml": xhtml(f'<p id="{blob}">Anchored.</p>')}), CONFIG)
    assert failed.value.reason == "cap-parser-limit" and "id=" in failed.value.detail


def test_a_chapter_in_a_legacy_encoding_is_cut_as_a_utf8_one_and_one_that_does_not_decode_fails_alone():
    """guards against (trial 24c; left by 23i): a chapter declared windows-1252 or Shift_JIS (in its
    XML declaration) holding an attribute value past libxml2's 10 MB limit was not cut, as UTF-8
    chapters are: the whole book failed ``cap-parser-limit`` (after 135 s for two such values). Property: the chapter is
    cut in its own encoding, its accented and Japanese text read exactly; one whose bytes do not
    decode as its declared encoding (so cannot be cut) is listed unread by that reason, and the
    rest of the book is read."""
    import base64
    import random

    blob = base64.b64encode(random.Random(6).randbytes(7_500_001)).decode()
    body = f'<p>The harbour master counted the boats.</p><div data-state="{blob}"><p>{{words}}</p></div>'

    def chapter(encoding: str, words: str) -> bytes:
        page = xhtml(body.format(words=words)).replace('encoding="utf-8"', f'encoding="{encoding}"')
        return page.encode(encoding)

    second = xhtml("<p>The second chapter.</p>")
    for encoding, words in (("windows-1252", "Café crème at the quay."), ("shift_jis", "港の潮汐表。")):
        doc = parse_epub(build_epub({"c1.xhtml": chapter(encoding, words), "c2.xhtml": second}), CONFIG)
        assert texts(doc) == ["The harbour master counted the boats.", words, "The second chapter."], encoding
        assert not doc.unread
    broken = chapter("shift_jis", "潮汐表の港").replace("港".encode("shift_jis"), b"\x81")  # half a character, "<" next
    doc = parse_epub(build_epub({"c1.xhtml": broken, "c2.xhtml": second}), CONFIG)
    assert texts(doc) == ["The second chapter."]
    assert [(u.where, u.reason.split(":")[0]) for u in doc.unread] == [("chapter c1.xhtml", "cap-parser-limit")]
    assert "(shift_jis)" in doc.unread[0].reason
