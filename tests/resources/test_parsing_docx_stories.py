"""DOCX stories beside the body (trial 23d): headers and footers, and review comments the body's
empty paragraphs mark.

Files are built with python-docx and edited in place (:func:`with_member` of test_parsing_robustness).
"""

from __future__ import annotations

import io

from test_parsing_robustness import OOXML

from fabric_resources.parsing.docx.parser import parse_docx

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
A = "http://schemas.openxmlformats.org/drawingml/2006/main"
CHART = "http://schemas.openxmlformats.org/drawingml/2006/chart"


def _fields() -> str:
    """``Page {PAGE} of {NUMPAGES}``: a complex field (result 3) and a simple one (result 9)."""
    return (f'<w:p xmlns:w="{W}"><w:r><w:t xml:space="preserve">Page </w:t></w:r>'
            '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText xml:space="preserve"> PAGE </w:instrText></w:r>'
            '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>3</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/>'
            '</w:r><w:r><w:t xml:space="preserve"> of </w:t></w:r>'
            '<w:fldSimple w:instr=" NUMPAGES "><w:r><w:t>9</w:t></w:r></w:fldSimple></w:p>')


def _chart_run(rel_id: str) -> str:
    wp = "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"
    return (f'<w:r xmlns:w="{W}" xmlns:r="{R}"><w:drawing><wp:inline xmlns:wp="{wp}"><wp:extent cx="1" cy="1"/>'
            f'<wp:docPr id="1" name="Chart 1"/><a:graphic xmlns:a="{A}"><a:graphicData uri="{CHART}">'
            f'<c:chart xmlns:c="{CHART}" r:id="{rel_id}"/></a:graphicData></a:graphic></wp:inline></w:drawing></w:r>')


def _headed(*, title_page: bool, even_and_odd: bool) -> bytes:
    """Two sections. The first: a default header (``Contoso Confidential``, a tab, ``DOC-42``, and
    a chart titled ``Audit status``), a first-page and an even-page header, a footer of page
    fields. The second: the first's header and footer types inherited but for an unlinked header
    of the same words (another part) and an unlinked footer ``Appendix footer``. ``title_page``
    sets the first section's ``w:titlePg``, ``even_and_odd`` the settings' ``w:evenAndOddHeaders``."""
    import docx
    from docx.opc.constants import RELATIONSHIP_TYPE as RT
    from docx.opc.packuri import PackURI
    from docx.opc.part import Part
    from docx.oxml import parse_xml

    document = docx.Document()
    document.add_heading("Scope", 1)
    document.add_paragraph("Body words")
    first = document.sections[0]
    first.header.paragraphs[0].text = "Contoso Confidential\tDOC-42"
    chart = Part(PackURI("/word/charts/chart1.xml"), "application/vnd.openxmlformats-officedocument.drawingml.chart+xml",
                 (f'<c:chartSpace xmlns:c="{CHART}" xmlns:a="{A}"><c:chart><c:title><c:tx><c:rich><a:p><a:r>'
                  '<a:t>Audit status</a:t></a:r></a:p></c:rich></c:tx></c:title></c:chart></c:chartSpace>').encode(),
                 document.part.package)
    first.header.paragraphs[0]._p.append(parse_xml(_chart_run(first.header.part.relate_to(chart, RT.CHART))))
    first.first_page_header.paragraphs[0].text = "Cover sheet header"
    first.even_page_header.paragraphs[0].text = "Even page header"
    footer = first.footer.paragraphs[0]._p
    footer.getparent().replace(footer, parse_xml(_fields()))
    first.different_first_page_header_footer = title_page
    document.settings.odd_and_even_pages_header_footer = even_and_odd
    second = document.add_section()
    document.add_heading("Appendix", 1)
    document.add_paragraph("Appendix words")
    second.different_first_page_header_footer = False
    second.header.is_linked_to_previous = False
    second.header.paragraphs[0].text = "Contoso Confidential\tDOC-42"
    second.header.paragraphs[0]._p.append(parse_xml(_chart_run(second.header.part.relate_to(chart, RT.CHART))))
    second.footer.is_linked_to_previous = False
    second.footer.paragraphs[0].text = "Appendix footer"
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_the_headers_and_footers_a_section_shows_are_note_units_each_distinct_part_once():
    """guards against (trial 23d): DOCX headers and footers not read at all: a title, a document
    number or a confidentiality notice that stands on every page, and the charts in them, found by
    no search. Property: each header or footer part a section shows is one ``note`` unit after the
    body (``note_type`` ``header`` / ``footer``, ``note_id`` its number, the part named), read once
    however many sections show it, and once for a second part of the same words; a field's code
    (``PAGE``, ``NUMPAGES``) is no text, its result is, as in the body; a first-page header shows
    only under ``w:titlePg``, an even-page one only under ``w:evenAndOddHeaders`` (else listed
    unshown, not read); the body reads as before."""
    doc = parse_docx(_headed(title_page=False, even_and_odd=False), OOXML)
    body = [(u.kind, u.text) for u in doc.units if u.locator["part"] == "word/document.xml"]
    assert body == [("heading", "Scope"), ("paragraph", "Body words"), ("heading", "Appendix"),
                    ("paragraph", "Appendix words")]
    stories = [(u.kind, u.text, u.locator.get("note_type"), u.locator.get("note_id"), u.section_path)
               for u in doc.units[len(body):]]
    assert stories == [("note", "Contoso Confidential DOC-42", "header", "1", ()),
                       ("paragraph", "Audit status", "header", "1", ()),
                       ("note", "Page 3 of 9", "footer", "1", ()),
                       ("note", "Appendix footer", "footer", "2", ())]
    parts = {u.text: u.locator["part"] for u in doc.units}
    assert parts["Audit status"] == "word/charts/chart1.xml" and parts["Page 3 of 9"].startswith("word/footer")
    assert len(doc.metadata["unshown_headers_footers"]) == 2 and doc.unread == []

    shown = parse_docx(_headed(title_page=True, even_and_odd=True), OOXML)
    notes = [(u.text, u.attributes["note_type"], u.attributes["hdr_ftr_types"]) for u in shown.units if u.kind == "note"]
    assert notes == [("Cover sheet header", "header", ["first"]), ("Even page header", "header", ["even"]),
                     ("Contoso Confidential DOC-42", "header", ["default"]), ("Page 3 of 9", "footer", ["default"]),
                     ("Appendix footer", "footer", ["default"])]
    assert shown.metadata["unshown_headers_footers"] == []

    # A header relationship naming the main part: listed, not the body read again as a header.
    from test_parsing_robustness import BODY, office_document, with_member

    data = with_member(office_document(), BODY, "</w:sectPr>",
                       f'<w:headerReference xmlns:r="{R}" w:type="default" r:id="rIdSelf"/></w:sectPr>')
    data = with_member(data, "word/_rels/document.xml.rels", "</Relationships>",
                       f'<Relationship Id="rIdSelf" Type="{R}/header" Target="document.xml"/></Relationships>')
    doc = parse_docx(data, OOXML)
    assert [u.kind for u in doc.units if u.kind == "note"] == [] and doc.unread[0].where == BODY


def test_a_watermark_a_header_draws_is_read_in_the_header():
    """guards against (trial 23d): a watermark ("DRAFT ONLY", "CONFIDENTIAL" drawn across each page:
    a VML WordArt shape in the header, its words in ``v:textpath``'s ``string`` attribute) read as
    nothing. Property: its words are the header's text, apart from the words beside them; a
    watermark in a hidden run is not read."""
    import docx
    from docx.oxml import parse_xml

    def watermark(words: str, hidden: bool = False) -> str:
        return (f'<w:r xmlns:w="{W}" xmlns:v="urn:schemas-microsoft-com:vml">'
                + ("<w:rPr><w:vanish/></w:rPr>" if hidden else "")
                + '<w:pict><v:shape id="PowerPlusWaterMarkObject1" type="#_x0000_t136" style="rotation:315">'
                f'<v:textpath style="font-family:Calibri" string="{words}"/></v:shape></w:pict></w:r>')

    document = docx.Document()
    document.add_paragraph("Body words")
    header = document.sections[0].header.paragraphs[0]
    header.text = "Tide report"
    header._p.append(parse_xml(watermark("DRAFT ONLY")))
    header._p.append(parse_xml(watermark("Hidden mark", hidden=True)))
    out = io.BytesIO()
    document.save(out)
    doc = parse_docx(out.getvalue(), OOXML)
    assert [(u.kind, u.text, u.locator.get("note_type")) for u in doc.units] == [
        ("paragraph", "Body words", None), ("note", "Tide report DRAFT ONLY", "header")]


def test_a_graphic_in_a_table_cell_a_note_or_a_header_is_labelled_as_the_text_beside_it():
    """guards against (trial 23d; left open by 22d): a chart or SmartArt graphic in a table cell or
    a footnote, read since DOCX v19 with the cell or note in its locator, labelled as body text
    (``/w:document/w:body/w:tbl/w:tr[2]/w:tc[2]/w:p``, no ``table 1, row 2, col 2``; a footnote's
    under its reference's heading, no ``footnote 1``): only the cell's and the note's own units
    were labelled with their place. Property: a graphic's cited path is the one the text unit of
    its cell, note or header gets."""
    from test_parsing_docx_text import BODY, CHART, DGM, FIRST, _graphic, _with_graphics, _with_notes, with_member

    from fabric_query.locations import location_label, location_of

    def label(unit) -> tuple[str, ...]:
        return location_of("u", unit.kind, unit.locator, unit.section_path, unit.attributes).path

    smartart = _graphic(DGM, f'<dgm:relIds xmlns:dgm="{DGM}" r:dm="rIdDgm" r:lo="" r:qs="" r:cs=""/>')
    data = with_member(_with_graphics(""), BODY, "<w:t>cell 11</w:t></w:r></w:p>",
                       f"<w:t>cell 11</w:t></w:r>{smartart}</w:p>")
    units = {u.text: u for u in parse_docx(data, OOXML).units}
    assert label(units["Plan\nBuild\nShip"]) == label(units["cell 11"]) == ("Chapter", "table 1, row 2, col 2")

    chart = _graphic(CHART, f'<c:chart xmlns:c="{CHART}" r:id="rIdNoteChart"/>')
    refs = '<w:p><w:r><w:t>Noted</w:t></w:r><w:r><w:footnoteReference w:id="1"/></w:r></w:p>'
    rels = (f'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship '
            f'Id="rIdNoteChart" Type="{R}/chart" Target="charts/chart1.xml"/></Relationships>').encode()
    data = _with_notes(refs, f"<w:p><w:r><w:t>See the chart</w:t></w:r></w:p><w:p>{chart}</w:p>", "<w:p/>",
                       _with_graphics(""))
    data = with_member(data, BODY, FIRST, FIRST, {"word/_rels/footnotes.xml.rels": rels})
    units = {u.text: u for u in parse_docx(data, OOXML).units}
    assert label(units["Quarterly revenue\nWidgets"]) == label(units["See the chart"]) == ("Chapter", "footnote 1")

    units = {u.text: u for u in parse_docx(_headed(title_page=False, even_and_odd=False), OOXML).units}
    graphic = units["Audit status"]
    assert location_label([location_of("u", graphic.kind, graphic.locator, graphic.section_path)]) == \
        "header 1 (sections 1-2)"
    assert label(graphic) == label(units["Contoso Confidential DOC-42"])


def test_a_comment_on_an_empty_paragraph_is_read_and_one_id_is_one_note():
    """guards against (trial 23d; left open by 22g): a review comment whose mark stands in a
    paragraph, cell or footnote paragraph with no text of its own listed in
    ``unreferenced_notes``, not read (its mark was dropped with the empty text); a mark alone on a
    line before a break dropped the same way, so the next mark took its place and the last
    comment was lost; and two ``w:comment`` of one ``w:id`` read as two units of one locator.
    Property: every comment a shown mark names is read; each mark is linked where it stands;
    comments of one id are one unit (the mark names both), its locator unique."""
    import docx
    from test_parsing_docx_text import BODY, _with_notes
    from test_parsing_robustness import with_member

    document = docx.Document()
    document.add_paragraph("first para")
    marked = document.add_paragraph("Tides rise at noon.")
    document.add_comment(marked.runs, text="Check the tide tables", author="Ana")
    document.add_table(rows=1, cols=2).cell(0, 0).text = "cell text"
    out = io.BytesIO()
    document.save(out)

    def mark(n: int) -> str:
        return f'<w:r><w:commentReference w:id="{n}"/></w:r>'

    data = with_member(out.getvalue(), BODY, "<w:p><w:r><w:t>first para", f"<w:p>{mark(3)}</w:p>"
                       f"<w:p>{mark(4)}<w:r><w:br/><w:t>After a break</w:t></w:r>{mark(5)}</w:p>"
                       "<w:p><w:r><w:t>first para")
    data = with_member(data, BODY, "</w:tc></w:tr>", f"</w:tc></w:tr><w:tr><w:tc><w:p>{mark(6)}</w:p></w:tc></w:tr>")
    refs = '<w:p><w:r><w:t>Noted</w:t></w:r><w:r><w:footnoteReference w:id="1"/></w:r></w:p>'
    data = _with_notes(refs, f"<w:p><w:r><w:t>Footnote words</w:t></w:r></w:p><w:p>{mark(7)}</w:p>", "<w:p/>", data)
    comments = "".join(f'<w:comment w:id="{n}" w:author="Di"><w:p><w:r><w:t>{words}</w:t></w:r></w:p></w:comment>'
                       for n, words in ((3, "On an empty paragraph"), (4, "Before the break"), (5, "After it"),
                                        (6, "In an empty cell"), (7, "Under the footnote"), (5, "Same id again")))
    data = with_member(data, "word/comments.xml", "</w:comments>", comments + "</w:comments>")
    doc = parse_docx(data, OOXML)
    notes = {u.locator["note_id"]: u.text for u in doc.units if u.locator.get("note_type") == "comment"}
    assert notes == {"0": "Check the tide tables", "3": "On an empty paragraph", "4": "Before the break",
                     "5": "After it\nSame id again", "6": "In an empty cell", "7": "Under the footnote"}
    assert [n for n in doc.metadata["unreferenced_notes"] if n.startswith("comment")] == []
    links = {(doc.units[r.source_index].text, doc.units[r.target_index].text, r.attributes["start_char"])
             for r in doc.relationships if r.kind == "note_ref"}
    assert {("After a break", "Before the break", 0), ("After a break", "After it\nSame id again", 13),
            ("Footnote words", "Under the footnote", 14)} <= links
    located = [(u.locator["part"], u.locator.get("note_type"), u.locator.get("note_id")) for u in doc.units
               if u.kind == "note"]
    assert len(located) == len(set(located))


def test_a_header_or_footer_is_labelled_with_where_it_shows_and_a_comment_on_it_beside_it():
    """guards against (trial 24c): a multi-section document's headers and footers labelled
    ``header 1``, ``header 2`` with nothing saying which section or pages show them (a first-page
    header cited as if on every page), and a review comment anchored in a header or footer cited
    as ``comment 9`` alone, as if on nothing. Property: a header's or footer's label says the
    sections that show it (where the document has several; a part of the same words another
    section shows counts there too) and the pages, where not all (``first page``, ``even pages``,
    ``odd pages``); a comment on a header, a footer or a table cell is labelled beside it
    (``header 2 (section 2) > comment 9``), as one on body text is under its heading; a
    one-section document's header is ``header 1``, as before."""
    import docx
    from docx.oxml import parse_xml
    from test_parsing_robustness import with_member

    from fabric_query.locations import location_label, location_of

    def labels(doc) -> dict[str, str]:
        return {u.text: location_label([location_of("u", u.kind, u.locator, u.section_path, u.attributes)])
                for u in doc.units}

    shown = labels(parse_docx(_headed(title_page=True, even_and_odd=True), OOXML))
    assert {k: shown[k] for k in ("Cover sheet header", "Even page header", "Contoso Confidential DOC-42",
                                  "Audit status", "Page 3 of 9", "Appendix footer")} == {
        "Cover sheet header": "header 1 (section 1, first page)",
        "Even page header": "header 2 (sections 1-2, even pages)",
        "Contoso Confidential DOC-42": "header 3 (sections 1-2, odd pages)",
        "Audit status": "header 3 (sections 1-2, odd pages)",
        "Page 3 of 9": "footer 1 (section 1, odd pages)",
        "Appendix footer": "footer 2 (section 2, odd pages)"}

    def mark(n: int) -> str:
        return f'<w:r xmlns:w="{W}"><w:commentReference w:id="{n}"/></w:r>'

    document = docx.Document()
    document.add_heading("Scope", 1)
    body = document.add_paragraph("Body words")
    document.add_comment(body.runs, text="On the body", author="Ana")
    document.sections[0].header.paragraphs[0].text = "Tide tables"
    document.add_table(rows=1, cols=2).cell(0, 1).paragraphs[0]._p.append(parse_xml(mark(11)))
    document.tables[0].cell(0, 1).paragraphs[0].add_run("Cell words")
    second = document.add_section()
    second.header.is_linked_to_previous = False
    second.header.paragraphs[0].text = "Appendix header"
    second.header.paragraphs[0]._p.append(parse_xml(mark(9)))
    second.footer.paragraphs[0].text = "Harbour office"
    second.footer.paragraphs[0]._p.append(parse_xml(mark(10)))
    out = io.BytesIO()
    document.save(out)
    data = with_member(out.getvalue(), "word/comments.xml", "</w:comments>", "".join(
        f'<w:comment w:id="{n}" w:author="Di"><w:p><w:r><w:t>{words}</w:t></w:r></w:p></w:comment>'
        for n, words in ((9, "Check the appendix"), (10, "Old address"), (11, "Which cell"))) + "</w:comments>")
    doc = parse_docx(data, OOXML)
    assert labels(doc) == {
        "Scope": "/w:document/w:body/w:p[1]", "Body words": "Scope", "Cell words": "Scope > table 1, row 1, col 2",
        "Tide tables": "header 1 (section 1)", "Appendix header": "header 2 (section 2)",
        "Harbour office": "footer 1 (sections 1-2)", "On the body": "Scope > comment 0",
        "Check the appendix": "header 2 (section 2) > comment 9", "Old address": "footer 1 (sections 1-2) > comment 10",
        "Which cell": "Scope > table 1, row 1, col 2 > comment 11"}
    links = {(doc.units[r.source_index].text, doc.units[r.target_index].text) for r in doc.relationships}
    assert {("Appendix header", "Check the appendix"), ("Harbour office", "Old address")} <= links

    one = docx.Document()
    one.add_paragraph("Body words")
    one.sections[0].header.paragraphs[0].text = "Tide tables"
    out = io.BytesIO()
    one.save(out)
    assert labels(parse_docx(out.getvalue(), OOXML))["Tide tables"] == "header 1"
