"""DOCX text the parser dropped or could not hide (trial 18b): equations (OMML), ``w:sym``
symbols, imported ``w:altChunk`` parts, and a malformed styles part whose hiding was lost.

Files are python-docx's default document edited in place (:func:`office_document`,
:func:`with_member` of test_parsing_robustness).
"""

from __future__ import annotations

import io

from test_parsing_robustness import BODY, OOXML, _replaced, office_document, with_member

from fabric_resources.parsing.document import UnreadPart
from fabric_resources.parsing.docx.parser import parse_docx

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
M = "http://schemas.openxmlformats.org/officeDocument/2006/math"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
FIRST = "<w:p><w:r><w:t>first para"


def _texts(data: bytes) -> list[str]:
    return [u.text for u in parse_docx(data, OOXML).units]


def test_an_equation_reads_its_text_in_place():
    """guards against (trial 18b): a Word equation (``m:oMath`` in a paragraph, ``m:oMathPara`` as a
    display equation, its text in ``m:t``) dropped: "The area is  for radius r." was indexed; an
    equation's hidden run (``w:vanish`` in ``m:r``) is not read, as a hidden ``w:r`` is not."""
    inline = (f'<w:p xmlns:m="{M}"><w:r><w:t xml:space="preserve">The area is </w:t></w:r>'
              '<m:oMath><m:r><m:t>A=π</m:t></m:r><m:sSup><m:e><m:r><m:t>r</m:t></m:r></m:e>'
              '<m:sup><m:r><m:t>2</m:t></m:r></m:sup></m:sSup>'
              '<m:r><w:rPr><w:vanish/></w:rPr><m:t>hiddenterm</m:t></m:r></m:oMath>'
              '<w:r><w:t xml:space="preserve"> for radius r.</w:t></w:r></w:p>')
    display = (f'<w:p xmlns:m="{M}"><m:oMathPara><m:oMath><m:r><m:t>E=m</m:t></m:r>'
               '<m:sSup><m:e><m:r><m:t>c</m:t></m:r></m:e><m:sup><m:r><m:t>2</m:t></m:r></m:sup></m:sSup></m:oMath>'
               '<m:oMath><m:r><m:t>F=ma</m:t></m:r></m:oMath></m:oMathPara></w:p>')
    body_level = f'<m:oMathPara xmlns:m="{M}"><m:oMath><m:r><m:t>x+y=z</m:t></m:r></m:oMath></m:oMathPara>'
    data = with_member(office_document(), BODY, FIRST, inline + display + body_level + FIRST)
    doc = parse_docx(data, OOXML)
    texts = [u.text for u in doc.units]
    assert texts[1:5] == ["The area is A=πr2 for radius r.", "E=mc2\nF=ma", "x+y=z", "first para"]
    assert doc.unread == []


def test_a_symbol_reads_as_its_character_and_a_symbol_font_code_is_counted_not_guessed():
    """guards against (trial 18b): ``w:sym`` (Insert > Symbol) dropped: "Temperature 20 C" for
    "20 °C". A code in U+F000-U+F0FF (a symbol font's own code: Symbol, Wingdings) has no Unicode
    character no library here maps (Wingdings has none at all), so it is left out and counted in
    ``unmapped_symbols``, never read as a private-use character; a bad code costs nothing else."""
    syms = ('<w:p><w:r><w:t xml:space="preserve">Temperature 20 </w:t></w:r>'
            '<w:r><w:sym w:font="Times New Roman" w:char="00B0"/><w:t>C</w:t></w:r>'
            '<w:r><w:t xml:space="preserve"> </w:t><w:sym w:font="Symbol" w:char="F061"/>'
            '<w:sym w:font="Wingdings" w:char="F0E0"/><w:sym w:font="Arial" w:char="zz"/>'
            '<w:sym w:font="Arial" w:char="D800"/><w:sym w:font="Arial" w:char="2192"/><w:t>done</w:t></w:r></w:p>')
    doc = parse_docx(with_member(office_document(), BODY, FIRST, syms + FIRST), OOXML)
    assert [u.text for u in doc.units][1] == "Temperature 20 °C →done"
    assert doc.metadata["unmapped_symbols"] == 4


def _with_chunk(target: str, content_type: str, blob: bytes, *, in_cell: bool = False) -> bytes:
    chunk = f'<w:altChunk xmlns:r="{R}" r:id="rIdChunk"/>'
    if in_cell:
        data = with_member(office_document(), BODY, "<w:t>cell 11</w:t></w:r></w:p>",
                           "<w:t>cell 11</w:t></w:r></w:p>" + chunk)
    else:
        data = with_member(office_document(), BODY, FIRST, chunk + FIRST)
    data = with_member(data, "word/_rels/document.xml.rels", "</Relationships>",
                       f'<Relationship Id="rIdChunk" Type="{R}/aFChunk" Target="{target}"/></Relationships>',
                       extra={f"word/{target}": blob})
    return with_member(data, "[Content_Types].xml", "</Types>",
                       f'<Override PartName="/word/{target}" ContentType="{content_type}"/></Types>')


def test_an_imported_html_or_text_chunk_is_read_in_place():
    """guards against (trial 18b): an HTML or plain-text ``w:altChunk`` (what HTML-to-DOCX
    converters write the whole document as) only listed unread, its text not indexed. It is read by
    the HTML parser (every text element: the author's content, no main-text choice) or the text
    parser, in place, its locators naming the part; another kind (RTF) stays listed unread."""
    html = b"<html><body><h2>Imported</h2><p>Tamarin text.</p><!-- a note --><p hidden>secret</p></body></html>"
    doc = parse_docx(_with_chunk("afchunk.htm", "text/html", html), OOXML)
    units = [(u.kind, u.text, u.section_path) for u in doc.units]
    assert units[:5] == [("heading", "Chapter", ()), ("heading", "Imported", ("Chapter",)),
                         ("paragraph", "Tamarin text.", ("Chapter", "Imported")),
                         ("paragraph", "first para", ("Chapter",)), ("list_item", "item one", ("Chapter",))]
    assert doc.units[2].locator == {"part": "word/afchunk.htm", "element_path": "/html/body/p[1]"}
    assert doc.unread == [] and "secret" not in str(units)

    doc = parse_docx(_with_chunk("chunk.txt", "text/plain", b"Plain imported line.\r\n\r\nSecond one.\r\n",
                                 in_cell=True), OOXML)
    texts = [u.text for u in doc.units]
    assert texts[texts.index("cell 11") + 1:][:2] == ["Plain imported line.", "Second one."]
    assert doc.units[texts.index("Second one.")].locator["part"] == "word/chunk.txt"

    doc = parse_docx(_with_chunk("chunk.rtf", "application/rtf", rb"{\rtf1 Rich}"), OOXML)
    assert _texts(office_document()) == [u.text for u in doc.units]
    assert doc.unread == [UnreadPart("word/chunk.rtf", "alt-chunk: imported content (application/rtf) not read")]

    doc = parse_docx(_with_chunk("empty.htm", "text/html", b"  "), OOXML)
    assert doc.unread == [UnreadPart("word/empty.htm", "alt-chunk: imported content (text/html) not read: "
                                                       "empty-file (no content)")]


def test_a_malformed_styles_part_still_hides_what_its_styles_hide_or_says_it_could_not():
    """guards against (trial 18b): a malformed ``word/styles.xml`` left out whole (listed unread),
    so text its styles hide (``w:vanish``) was indexed and cited where Word shows nothing. lxml's
    recovering parser reads what it can of the part: the hiding and heading styles it recovers are
    applied, and the unread entry says so; when nothing can be recovered, the entry says that text
    hidden by a style may have been read."""
    import docx
    from docx.enum.style import WD_STYLE_TYPE

    document = docx.Document()
    hidden = document.styles.add_style("HiddenPara", WD_STYLE_TYPE.PARAGRAPH)
    hidden.font.hidden = True
    document.add_heading("Chapter", 1)
    document.add_paragraph("parastylevanish paragraph", style="HiddenPara")
    document.add_paragraph("shown paragraph")
    out = io.BytesIO()
    document.save(out)
    good = out.getvalue()
    import zipfile

    styles = zipfile.ZipFile(io.BytesIO(good)).read("word/styles.xml")
    broken = _replaced(good, "word/styles.xml", styles.replace(b"</w:styles>", b"<w:unclosed></w:styles>"))
    doc = parse_docx(broken, OOXML)
    assert [(u.kind, u.text) for u in doc.units] == [("heading", "Chapter"), ("paragraph", "shown paragraph")]
    (part,) = doc.unread
    assert part.where == "word/styles.xml" and part.reason.startswith("XMLSyntaxError: ")
    assert part.reason.endswith("; read by lxml's recovering parser: its styles applied as far as recovered")

    doc = parse_docx(_replaced(good, "word/styles.xml", b"\x00\x01 not xml"), OOXML)
    assert "parastylevanish paragraph" in [u.text for u in doc.units]
    (part,) = doc.unread
    assert part.reason.endswith("; nothing recovered: text a style hides may have been read")


def test_an_imported_part_named_by_many_alt_chunks_is_parsed_once(monkeypatch):
    """guards against (hostile trial 18e): each ``w:altChunk`` parsed its part again, in the ingest
    process (a small package runs in-process, no timeout): a 250 kB package naming one megabyte of
    empty ``div`` (no unit, so the units cap never stops it) 100 times took 21 s, a few thousand
    times hours. The part is parsed once; its units still stand at every place that names it."""
    from fabric_resources.parsing.docx import imported

    calls = []
    html_reader = imported._READERS["text/html"]
    monkeypatch.setitem(imported._READERS, "text/html", lambda blob: calls.append(1) or html_reader(blob))
    data = _with_chunk("afchunk.htm", "text/html", b"<p>Tamarin text.</p>")
    chunk = f'<w:altChunk xmlns:r="{R}" r:id="rIdChunk"/>'
    data = with_member(data, BODY, FIRST, chunk * 49 + FIRST)
    texts = _texts(data)
    assert texts.count("Tamarin text.") == 50 and len(calls) == 1

    calls.clear()
    bad = with_member(_with_chunk("empty.htm", "text/html", b"  "), BODY, FIRST, chunk * 9 + FIRST)
    doc = parse_docx(bad, OOXML)
    assert len(calls) == 1 and len(doc.unread) == 10
    assert {u.reason for u in doc.unread} == {"alt-chunk: imported content (text/html) not read: empty-file (no content)"}


def _styles(*styles: tuple[str, str | None, str | None]):
    """A ``w:styles`` element of ``(style ID, w:basedOn, w:vanish w:val or None)`` paragraph styles."""
    from lxml import etree

    xml = "".join(f'<w:style w:type="paragraph" w:styleId="{sid}">'
                  + (f'<w:basedOn w:val="{base}"/>' if base else "")
                  + (f'<w:rPr><w:vanish w:val="{hide}"/></w:rPr>' if hide else "") + "</w:style>"
                  for sid, base, hide in styles)
    return etree.fromstring(f'<w:styles xmlns:w="{W}">{xml}</w:styles>')


def test_a_long_based_on_chain_resolves_each_style_once_and_a_loop_ends(monkeypatch):
    """guards against (trial 19b): each style resolved up its whole ``w:basedOn`` chain anew, capped
    at 32 steps: 20,000 chained styles cost 3.3 s (660,000 ``w:rPr`` reads) in the ingest process,
    and a hiding ancestor more than 32 steps up hid nothing below it. Each style's own ``w:vanish``
    is now read once; the nearest that says wins (a shown style inside the chain shows what is based
    on it); a loop ends a chain saying nothing, unless a style on it says."""
    from fabric_resources.parsing.docx import styles

    n = 20_000
    chain = [("s0", None, "1")] + [(f"s{i}", f"s{i - 1}", "0" if i == n // 2 else None) for i in range(1, n)]
    reads = []
    vanish = styles.vanish
    monkeypatch.setattr(styles, "vanish", lambda rpr: reads.append(1) or vanish(rpr))
    hiding = styles.hidden_styles(_styles(*reversed(chain)))  # each style before its base: the worst order
    assert len(reads) <= n + 1  # its styles' w:rPr and the document defaults', once each
    assert all(hiding.says[f"s{i}"] is (i < n // 2) for i in range(n))

    looped = styles.hidden_styles(_styles(("a", "b", None), ("b", "c", None), ("c", "a", None), ("d", "a", None),
                                          ("x", "y", None), ("y", "x", "true"), ("self", "self", None)))
    assert looped.says == {"x": True, "y": True}


def test_an_external_alt_chunk_is_listed_with_its_target_not_a_library_error():
    """guards against (trial 19b): an ``w:altChunk`` whose relationship is external
    (``TargetMode="External"``: Word fetches it, nothing here does) listed unread as python-docx's
    ``ValueError: target_part property on _Relationship is undefined…``. It is listed by its element
    with a reason of the parser's own naming the target; the rest of the document is read."""
    chunk = f'<w:altChunk xmlns:r="{R}" r:id="rIdChunk"/>'
    data = with_member(office_document(), BODY, FIRST, chunk + FIRST)
    data = with_member(data, "word/_rels/document.xml.rels", "</Relationships>",
                       f'<Relationship Id="rIdChunk" Type="{R}/aFChunk" Target="http://example.invalid/a.htm" '
                       'TargetMode="External"/></Relationships>')
    doc = parse_docx(data, OOXML)
    assert [u.text for u in doc.units] == _texts(office_document())
    assert doc.unread == [UnreadPart("/w:document/w:body/w:altChunk",
                                     "alt-chunk: external target not read: http://example.invalid/a.htm")]


def _with_notes(body: str, footnote: str, endnote: str, base: bytes | None = None) -> bytes:
    """The office document (or ``base``) with ``body`` before its first paragraph, footnote 1 and
    endnote 1 holding ``footnote`` and ``endnote`` (block-level XML)."""
    ns = f'xmlns:w="{W}" xmlns:m="{M}" xmlns:v="urn:schemas-microsoft-com:vml" xmlns:r="{R}"'
    data = with_member(base or office_document(), BODY, FIRST, body + FIRST)
    rels = "".join(f'<Relationship Id="rId9{i}" Type="{R}/{kind}s" Target="{kind}s.xml"/>'
                   for i, kind in enumerate(("footnote", "endnote")))
    return with_member(data, "word/_rels/document.xml.rels", "</Relationships>", rels + "</Relationships>",
                       extra={f"word/{kind}s.xml": f'<w:{kind}s {ns}><w:{kind} w:id="1">{xml}</w:{kind}></w:{kind}s>'
                              .encode() for kind, xml in (("footnote", footnote), ("endnote", endnote))})


def test_an_equation_in_a_table_cell_or_a_note_is_read_and_a_text_box_in_a_note_once():
    """guards against (trial 19b): an equation standing where a paragraph may (``m:oMathPara`` or
    ``m:oMath`` as a child of ``w:tc``, ``w:footnote``, ``w:endnote``, as trial 18b read it in the
    body) dropped: the cell read "cell 11" without "a+b=c", a note without its formula. A note's
    paragraph inside a text box (a ``w:p`` in a ``w:p``) was also read twice: once with its
    paragraph, once alone."""
    cell = f'<m:oMathPara xmlns:m="{M}"><m:oMath><m:r><m:t>a+b=c</m:t></m:r></m:oMath></m:oMathPara>'
    data = with_member(office_document(), BODY, "<w:t>cell 11</w:t></w:r></w:p>",
                       "<w:t>cell 11</w:t></w:r></w:p>" + cell + cell.replace("a+b=c", "d=e"))
    assert "cell 11\na+b=c\nd=e" in _texts(data)

    refs = '<w:p><w:r><w:t>Noted</w:t></w:r><w:r><w:footnoteReference w:id="1"/><w:endnoteReference w:id="1"/></w:r></w:p>'
    footnote = ('<w:p><w:r><w:t>Footnote words</w:t></w:r></w:p>'
                '<m:oMathPara><m:oMath><m:r><m:t>x=1</m:t></m:r></m:oMath></m:oMathPara>'
                '<w:p><w:r><w:t>Box holder</w:t></w:r><w:r><w:pict><v:shape><v:textbox><w:txbxContent>'
                '<w:p><w:r><w:t>boxed</w:t></w:r></w:p></w:txbxContent></v:textbox></v:shape></w:pict></w:r></w:p>')
    endnote = '<m:oMath><m:r><m:t>y=2</m:t></m:r></m:oMath>'
    doc = parse_docx(_with_notes(refs, footnote, endnote), OOXML)
    notes = {u.attributes["note_type"]: u.text for u in doc.units if u.kind == "note"}
    assert notes == {"footnote": "Footnote words\nx=1\nBox holder\nboxed", "endnote": "y=2"}
    assert doc.unread == []


MHT = (b'MIME-Version: 1.0\r\nContent-Type: multipart/related; boundary="=_b"; type="text/html"; start="<root@x>"\r\n'
       b"\r\n--=_b\r\nContent-Type: text/css\r\nContent-ID: <css@x>\r\n\r\np { color: red }\r\n"
       b"--=_b\r\nContent-Type: text/html\r\nContent-ID: <other@x>\r\n\r\n<p>Not the root page.</p>\r\n"
       b'--=_b\r\nContent-Type: text/html; charset="windows-1251"\r\nContent-ID: <root@x>\r\n'
       b"Content-Transfer-Encoding: quoted-printable\r\n\r\n<html><body><h2>Saved page</h2><p>=CF=F0=E8=E2=E5=F2 =\r\n"
       b"tamarin.</p></body></html>\r\n--=_b\r\nContent-Type: image/png\r\nContent-Transfer-Encoding: base64\r\n\r\n"
       b"iVBORw0KGgo=\r\n--=_b--\r\n")


def test_an_imported_mhtml_chunk_is_read_from_its_root_html_part():
    """guards against (trial 19b): an MHTML ``w:altChunk`` (Word's ``.mht`` chunk: a web page saved as
    one MIME message, ``message/rfc822``) listed unread, its text not indexed. The root HTML part
    (RFC 2557: the one ``start`` names, else the first) is read by the HTML parser, decoded from its
    transfer encoding (quoted-printable: a soft line break is no break) in its MIME charset
    (windows-1251 here, with no ``<meta>``: no detection would guess it); its stylesheet, image and
    other pages are no text. One with no HTML part is listed unread with a reason of the parser's own."""
    doc = parse_docx(_with_chunk("afchunk.mht", "message/rfc822", MHT), OOXML)
    units = [(u.kind, u.text) for u in doc.units]
    assert units[1:4] == [("heading", "Saved page"), ("paragraph", "Привет tamarin."), ("paragraph", "first para")]
    assert doc.units[2].locator == {"part": "word/afchunk.mht", "element_path": "/html/body/p"}
    assert doc.unread == [] and "Not the root" not in str(units) and "color" not in str(units)

    no_html = b'Content-Type: multipart/related; boundary="b"\r\n\r\n--b\r\nContent-Type: image/png\r\n\r\nxx\r\n--b--\r\n'
    doc = parse_docx(_with_chunk("afchunk.mht", "message/rfc822", no_html), OOXML)
    assert [u.text for u in doc.units] == _texts(office_document())
    assert doc.unread == [UnreadPart("word/afchunk.mht", "alt-chunk: imported content (message/rfc822) not read: "
                                                          "malformed-mhtml (no text/html part)")]


def test_a_body_units_locator_names_the_main_part_by_its_own_name():
    """guards against (hostile trial 21e): a package whose main part is not ``word/document.xml``
    (any name its relationships give, ECMA-376 Part 2; python-docx finds it by them) read whole,
    but every body unit's locator named ``word/document.xml``, a part the package lacks."""
    import zipfile

    src = zipfile.ZipFile(io.BytesIO(office_document()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            body = src.read(info.filename)
            name = {BODY: "word/main.xml", "word/_rels/document.xml.rels": "word/_rels/main.xml.rels"}.get(
                info.filename, info.filename)
            if info.filename in ("[Content_Types].xml", "_rels/.rels"):
                body = body.replace(b"word/document.xml", b"word/main.xml")
            dst.writestr(name, body)
    doc = parse_docx(out.getvalue(), OOXML)
    assert "first para" in [u.text for u in doc.units] and doc.unread == []
    assert {u.locator["part"] for u in doc.units} == {"word/main.xml"}
    assert {u.locator["part"] for u in parse_docx(office_document(), OOXML).units} == {BODY}


A = "http://schemas.openxmlformats.org/drawingml/2006/main"
DGM = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
CHART = "http://schemas.openxmlformats.org/drawingml/2006/chart"


def _graphic(uri: str, inner: str) -> str:
    wp = "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"
    return (f'<w:r><w:drawing><wp:inline xmlns:wp="{wp}">'
            f'<wp:extent cx="5486400" cy="3200400"/><wp:docPr id="1" name="Graphic 1"/>'
            f'<a:graphic xmlns:a="{A}"><a:graphicData uri="{uri}">{inner}</a:graphicData></a:graphic>'
            f'</wp:inline></w:drawing></w:r>')


def _with_graphics(paragraphs: str) -> bytes:
    """python-docx's default document with ``paragraphs`` before its first paragraph, a SmartArt
    data part (``rIdDgm``: steps Plan, Build, Ship) and a chart part (``rIdChart``: title Quarterly
    revenue, series Widgets as a cached cell value)."""
    import zipfile

    data = (f'<dgm:dataModel xmlns:dgm="{DGM}" xmlns:a="{A}"><dgm:ptLst>'
            '<dgm:pt modelId="0" type="doc"><dgm:t><a:p><a:r><a:t>DocPoint</a:t></a:r></a:p></dgm:t></dgm:pt>'
            + "".join(f'<dgm:pt modelId="{i}"><dgm:t><a:p><a:r><a:t>{step}</a:t></a:r></a:p></dgm:t></dgm:pt>'
                      for i, step in enumerate(("Plan", "Build", "Ship"), start=1))
            + '<dgm:pt modelId="9" type="parTrans"><dgm:t><a:p><a:r><a:t>Transition</a:t></a:r></a:p></dgm:t></dgm:pt>'
            '</dgm:ptLst></dgm:dataModel>').encode()
    chart = (f'<c:chartSpace xmlns:c="{CHART}" xmlns:a="{A}"><c:chart><c:title><c:tx><c:rich><a:p><a:r>'
             '<a:t>Quarterly revenue</a:t></a:r></a:p></c:rich></c:tx></c:title><c:plotArea><c:barChart><c:ser>'
             '<c:tx><c:strRef><c:f>Sheet1!$B$1</c:f><c:strCache><c:pt idx="0"><c:v>Widgets</c:v></c:pt></c:strCache>'
             '</c:strRef></c:tx></c:ser></c:barChart></c:plotArea></c:chart></c:chartSpace>').encode()
    rels = ('<Relationship Id="rIdDgm" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
            'diagramData" Target="diagrams/data1.xml"/><Relationship Id="rIdChart" '
            'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/chart" '
            'Target="charts/chart1.xml"/></Relationships>')
    types = ('<Override PartName="/word/diagrams/data1.xml" ContentType="application/vnd.openxmlformats-officedocument.'
             'drawingml.diagramData+xml"/><Override PartName="/word/charts/chart1.xml" ContentType="application/'
             'vnd.openxmlformats-officedocument.drawingml.chart+xml"/></Types>')
    package = with_member(office_document(), BODY, FIRST, paragraphs + FIRST,
                          {"word/diagrams/data1.xml": data, "word/charts/chart1.xml": chart})
    src = zipfile.ZipFile(io.BytesIO(package))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            body = src.read(info.filename)
            if info.filename == "word/_rels/document.xml.rels":
                body = body.replace(b"</Relationships>", rels.encode())
            elif info.filename == "[Content_Types].xml":
                body = body.replace(b"</Types>", types.encode())
            dst.writestr(info, body)
    return out.getvalue()


def test_the_words_of_a_smartart_graphic_or_a_chart_in_a_docx_are_read():
    """guards against (hostile trial 21e): a SmartArt graphic's steps (an org chart's names) and a
    chart's title and series names, which stand in a paragraph as a drawing naming their own part,
    lost in silence (the PPTX parser reads them). Property: each shown graphic is a unit after its
    paragraph's text, its locator naming its part; its content points are read, not the document
    or transition points; a graphic a tracked change deleted, or in a hidden run, is not read."""
    smartart = _graphic(DGM, f'<dgm:relIds xmlns:dgm="{DGM}" r:dm="rIdDgm" r:lo="" r:qs="" r:cs=""/>')
    chart = _graphic(CHART, f'<c:chart xmlns:c="{CHART}" r:id="rIdChart"/>')
    doc = parse_docx(_with_graphics(f'<w:p><w:r><w:t>Our process:</w:t></w:r>{smartart}</w:p><w:p>{chart}</w:p>'),
                     OOXML)
    units = [(u.text, u.locator["part"]) for u in doc.units[1:5]]
    assert units == [("Our process:", BODY), ("Plan\nBuild\nShip", "word/diagrams/data1.xml"),
                     ("Quarterly revenue\nWidgets", "word/charts/chart1.xml"), ("first para", BODY)]
    assert doc.units[2].locator["element_path"] == doc.units[1].locator["element_path"]
    deleted = f'<w:p><w:del w:id="1" w:author="a">{smartart}</w:del><w:r><w:t>Kept words</w:t></w:r></w:p>'
    assert _texts(_with_graphics(deleted))[1:3] == ["Kept words", "first para"]
    hidden = smartart.replace("<w:r><w:drawing>", "<w:r><w:rPr><w:vanish/></w:rPr><w:drawing>")
    assert _texts(_with_graphics(f"<w:p><w:r><w:t>Kept words</w:t></w:r>{hidden}</w:p>"))[1:3] == [
        "Kept words", "first para"]


def _field(code: str, result: str) -> str:
    """A complex field of one paragraph: begin, ``code`` as instruction text, separate, ``result``, end."""
    return (f'<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText xml:space="preserve">{code}</w:instrText>'
            f'</w:r><w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>{result}</w:t></w:r>'
            '<w:r><w:fldChar w:fldCharType="end"/></w:r>')


def test_a_fields_code_that_runs_into_the_next_paragraph_is_not_read():
    """guards against (trial 22d): a field whose code holds a paragraph mark (an ``IF`` field's text
    argument, ``{ IF { MERGEFIELD Gender } = "M" "Dear Sir,¶…" }``) read from its second paragraph
    on as the document's text: the nested fields' results and any text of the code (``Doctor``,
    ``CODEWORDS``) were indexed, where Word shows only the field's result. Property: what a field's
    code holds is never text, in the body, a table cell or a note; a result that spans paragraphs
    (a table of contents) is read whole; a field nothing ends hides no more than the rest of its
    own paragraph, so the document's later text is still read."""
    begin, sep, end = (f'<w:r><w:fldChar w:fldCharType="{k}"/></w:r>' for k in ("begin", "separate", "end"))
    code = (f'<w:p><w:r><w:t xml:space="preserve">Dear </w:t></w:r>{begin}<w:r><w:instrText>IF </w:instrText></w:r>'
            f'{_field("MERGEFIELD Gender", "M")}<w:r><w:instrText> = "M" "Sir</w:instrText></w:r></w:p>'
            f'<w:p>{_field("MERGEFIELD Title", "Doctor")}<w:r><w:instrText>" "Madam"</w:instrText></w:r>'
            f'<w:r><w:t>CODEWORDS</w:t></w:r>{sep}<w:r><w:t>Sir</w:t></w:r>{end}'
            '<w:r><w:t xml:space="preserve"> and friends</w:t></w:r></w:p>')
    toc = (f'<w:p>{begin}<w:r><w:instrText>TOC \\o "1-3"</w:instrText></w:r>{sep}<w:r><w:t>Contents entry one</w:t>'
           f'</w:r></w:p><w:p><w:r><w:t>Contents entry two</w:t></w:r>{end}</w:p>')
    unended = (f'<w:p><w:r><w:t xml:space="preserve">Stray </w:t></w:r>{begin}<w:r><w:t>in a code</w:t></w:r></w:p>'
               '<w:p><w:r><w:t>Later words</w:t></w:r></w:p>')
    texts = _texts(with_member(office_document(), BODY, FIRST, code + toc + unended + FIRST))
    assert texts[1:8] == ["Dear", "Sir and friends", "Contents entry one", "Contents entry two", "Stray",
                          "Later words", "first para"]

    in_cell = code.replace("<w:p>", '<w:p><w:pPr><w:pStyle w:val="Normal"/></w:pPr>')
    cells = _texts(with_member(office_document(), BODY, "<w:t>cell 11</w:t></w:r></w:p>",
                               "<w:t>cell 11</w:t></w:r></w:p>" + in_cell))
    assert "cell 11\nDear\nSir and friends" in cells and not any("Doctor" in t or "CODE" in t for t in cells)

    refs = '<w:p><w:r><w:t>Noted</w:t></w:r><w:r><w:footnoteReference w:id="1"/><w:endnoteReference w:id="1"/></w:r></w:p>'
    doc = parse_docx(_with_notes(refs, code, "<w:p><w:r><w:t>End words</w:t></w:r></w:p>"), OOXML)
    notes = {u.attributes["note_type"]: u.text for u in doc.units if u.kind == "note"}
    assert notes == {"footnote": "Dear\nSir and friends", "endnote": "End words"}


def test_a_graphic_in_a_table_cell_or_a_note_is_read_where_its_text_is():
    """guards against (trial 22d): a SmartArt graphic or a chart in a table cell or a footnote lost
    in silence (since DOCX v15 only a body paragraph's were read). Property: each is a unit after
    its cell's or note's text, its locator naming its part, its paragraph's element path and the
    cell (``table``, ``row``, ``col``) or the note (``note_type``, ``note_id``); a note's graphic is
    named by the notes part's own relationships; a graphic in a cell a merge continues is not read."""
    smartart = _graphic(DGM, f'<dgm:relIds xmlns:dgm="{DGM}" r:dm="rIdDgm" r:lo="" r:qs="" r:cs=""/>')
    chart = _graphic(CHART, f'<c:chart xmlns:c="{CHART}" r:id="rIdNoteChart"/>')
    cell = "<w:t>cell 11</w:t></w:r></w:p>"
    data = with_member(_with_graphics(""), BODY, cell, f"<w:t>cell 11</w:t></w:r>{smartart}</w:p>")
    doc = parse_docx(data, OOXML)
    (at,) = [i for i, u in enumerate(doc.units) if u.text == "cell 11"]
    graphic = doc.units[at + 1]
    assert (graphic.kind, graphic.text) == ("paragraph", "Plan\nBuild\nShip")
    assert graphic.locator == {"part": "word/diagrams/data1.xml", "table": 0, "row": 1, "col": 1,
                               "element_path": doc.units[at].locator["element_path"] + "/w:p"}

    refs = '<w:p><w:r><w:t>Noted</w:t></w:r><w:r><w:footnoteReference w:id="1"/><w:endnoteReference w:id="1"/></w:r></w:p>'
    rels = (f'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship '
            f'Id="rIdNoteChart" Type="{R}/chart" Target="charts/chart1.xml"/></Relationships>').encode()
    data = _with_notes(refs, f"<w:p><w:r><w:t>See the chart</w:t></w:r></w:p><w:p>{chart}</w:p>",
                       f"<w:p>{chart}</w:p>", _with_graphics(""))
    data = with_member(data, BODY, FIRST, FIRST, {"word/_rels/footnotes.xml.rels": rels,
                                                   "word/_rels/endnotes.xml.rels": rels})
    doc = parse_docx(data, OOXML)
    tail = [(u.kind, u.text, u.locator) for u in doc.units if u.locator["part"] != BODY]
    assert tail == [
        ("note", "See the chart", {"part": "word/footnotes.xml", "note_type": "footnote", "note_id": "1"}),
        ("paragraph", "Quarterly revenue\nWidgets", {"part": "word/charts/chart1.xml", "note_type": "footnote",
                                                     "note_id": "1", "element_path": "/w:footnotes/w:footnote/w:p[2]"}),
        ("paragraph", "Quarterly revenue\nWidgets", {"part": "word/charts/chart1.xml", "note_type": "endnote",
                                                     "note_id": "1", "element_path": "/w:endnotes/w:endnote/w:p"})]
    assert doc.unread == []

    merged = with_member(data, BODY, cell, f"<w:t>cell 11</w:t></w:r></w:p></w:tc><w:tc><w:tcPr><w:hMerge/>"
                                           f"</w:tcPr><w:p>{smartart}</w:p>")
    assert "Plan\nBuild\nShip" not in [u.text for u in parse_docx(merged, OOXML).units]


def test_a_comment_inside_a_docx_runs_text_cuts_none_of_it():
    """guards against (trial 22g): an XML comment or processing instruction inside a ``w:t`` or an
    equation's ``m:t`` (which Word skips) cut the text there, as it did in PPTX before trial 22c:
    ``first <!-- x --> para`` read "first", in a body paragraph, a table cell, a footnote, a text box
    in it and an equation alike, and nothing said the rest was lost; a chart's cached series name
    so split was read as two lines. Property: the text read is the text without the comments."""
    refs = '<w:p><w:r><w:t>Noted</w:t></w:r><w:r><w:footnoteReference w:id="1"/></w:r></w:p>'
    footnote = ('<w:p><w:r><w:t>Footnote words</w:t></w:r></w:p>'
                '<m:oMathPara><m:oMath><m:r><m:t>x=1</m:t></m:r></m:oMath></m:oMathPara>'
                '<w:p><w:r><w:t>Box holder</w:t></w:r><w:r><w:pict><v:shape><v:textbox><w:txbxContent>'
                '<w:p><w:r><w:t>boxed words</w:t></w:r></w:p></w:txbxContent></v:textbox></v:shape></w:pict></w:r></w:p>')
    chart = _graphic(CHART, f'<c:chart xmlns:c="{CHART}" r:id="rIdChart"/>')
    plain = _with_notes(refs + f"<w:p>{chart}</w:p>", footnote, "<w:p><w:r><w:t>End words</w:t></w:r></w:p>",
                        _with_graphics(""))
    commented = _with_notes(refs + f"<w:p>{chart}</w:p>",
                            footnote.replace("Footnote words", "Footnote <!-- c --> words")
                            .replace("x=1", "x=<!-- c -->1").replace("boxed words", "boxed<?pi c?> words"),
                            "<w:p><w:r><w:t>End words</w:t></w:r></w:p>",
                            _with_graphics(""))
    commented = with_member(commented, BODY, "first para", "first <!-- reviewer --> para")
    commented = with_member(commented, BODY, "cell 11", "cell<?pi x?> 11")
    commented = with_member(commented, "word/charts/chart1.xml", "Widgets", "Wid<!-- c -->gets")
    whole = _texts(plain)
    assert "first para" in whole and "cell 11" in whole and "Quarterly revenue\nWidgets" in whole
    assert "Footnote words\nx=1\nBox holder\nboxed words" in whole
    doc = parse_docx(commented, OOXML)
    assert [u.text for u in doc.units] == whole and doc.unread == []


def test_a_review_comment_is_a_note_unit_apart_from_the_text_it_marks():
    """guards against (trial 22g): review comments (``word/comments.xml``, a reviewer's words beside
    the text) not read at all, so no search found them. Property: each comment whose reference mark
    is shown (in a body paragraph, a table cell or a footnote) is a ``note`` unit after the body
    and the notes, its locator naming the comments part, ``note_type`` ``comment`` and its
    ``w:id``, linked by ``note_ref`` from the unit holding the mark at the mark's place; the marked
    text reads as it does without comments; a comment whose mark a tracked change deleted is not
    read (as accepted, it is gone) but counted in ``unreferenced_notes``."""
    import docx

    def build(with_comments: bool) -> bytes:
        document = docx.Document()
        document.add_paragraph("first para")  # where _with_notes puts the footnote's reference
        marked = document.add_paragraph("Tides rise at noon.")
        document.add_paragraph("Second para")
        cell = document.add_table(rows=1, cols=1).cell(0, 0)
        cell.text = "cell text"
        dropped = document.add_paragraph("Struck words")
        if with_comments:
            document.add_comment(marked.runs, text="Check the tide tables", author="Ana", initials="A")
            document.add_comment(cell.paragraphs[0].runs, text="Cell remark", author="Bo")
            document.add_comment(dropped.runs, text="Gone with its mark", author="Cy")
        out = io.BytesIO()
        document.save(out)
        return out.getvalue()

    data = with_member(build(True), BODY, '<w:r><w:rPr><w:rStyle w:val="CommentReference"/></w:rPr>'
                       '<w:commentReference w:id="2"/></w:r>',
                       '<w:del w:id="90" w:author="Cy"><w:r><w:rPr><w:rStyle w:val="CommentReference"/></w:rPr>'
                       '<w:commentReference w:id="2"/></w:r></w:del>')
    refs = ('<w:p><w:r><w:t>Noted</w:t></w:r><w:r><w:footnoteReference w:id="1"/></w:r></w:p>')
    data = _with_notes(refs, '<w:p><w:r><w:t>Footnote words</w:t></w:r><w:r><w:commentReference w:id="7"/></w:r></w:p>',
                       "<w:p/>", data)
    data = with_member(data, "word/comments.xml", "</w:comments>",
                       '<w:comment w:id="7" w:author="Di"><w:p><w:r><w:t>On the footnote</w:t></w:r></w:p>'
                       "</w:comment></w:comments>")
    doc = parse_docx(data, OOXML)
    plain = parse_docx(_with_notes(refs, "<w:p><w:r><w:t>Footnote words</w:t></w:r></w:p>", "<w:p/>", build(False)),
                       OOXML)
    comments = [u for u in doc.units if u.locator.get("note_type") == "comment"]
    assert [u for u in doc.units if u not in comments] == list(plain.units)
    assert [(u.kind, u.text, u.locator) for u in comments] == [
        ("note", "Check the tide tables", {"part": "word/comments.xml", "note_type": "comment", "note_id": "0"}),
        ("note", "Cell remark", {"part": "word/comments.xml", "note_type": "comment", "note_id": "1",
                                 "marked_in": {"table": 0, "row": 0, "col": 0}}),  # beside what it marks (trial 24c)
        ("note", "On the footnote", {"part": "word/comments.xml", "note_type": "comment", "note_id": "7",
                                     "marked_in": {"note_type": "footnote", "note_id": "1"}})]
    links = {(doc.units[r.source_index].text, doc.units[r.target_index].text, r.attributes["start_char"])
             for r in doc.relationships if r.kind == "note_ref"}
    assert {("Tides rise at noon.", "Check the tide tables", 19), ("cell text", "Cell remark", 9),
            ("Footnote words", "On the footnote", 14)} <= links
    assert [n for n in doc.metadata["unreferenced_notes"] if n.startswith("comment")] == ["comment:2"]
    assert doc.unread == []
