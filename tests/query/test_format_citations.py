"""Citations to the page (PDF) and to the structural path (DOCX, PPTX, HTML), and the
``confidence:`` filter, over real files from ../shared/corpus/formats and an image-only PDF made
here and read by Tesseract.

One ingest per module (a real Dagster run) of a small folder: a three-page two-column PDF, an
image-only PDF and a text file. Citations of the other formats are tested over the whole corpus
in tests/e2e/test_corpus_e2e.py (its one ingest).
"""

from __future__ import annotations

import io
import json
import os
import shutil

import pytest
from conftest import CORPUS, ingest, need_shared
from typer.testing import CliRunner

from fabric_query import Fabric
from fabric_query.errors import CitationError, QuerySyntaxError
from fabric_query.labels import page_label
from fabric_query.locations import location_label, location_of
from fabric_query.querylang import parse_query

FORMATS = CORPUS / "formats"
PAPER = "fs:docs/latex-multicolumn.pdf"
SCAN = "fs:docs/scan.pdf"
NOTES = "fs:docs/notes.txt"


def _image_only_pdf() -> bytes:
    """Two image-only pages (no text layer): what a scanner writes."""
    from PIL import Image, ImageDraw, ImageFilter, ImageFont

    pages = []
    for lines, blur in ((["The lighthouse keeper climbed the stairs", "every evening at dusk to light the lamp."], 0),
                        (["The harbour pilot rowed out through fog", "to meet the steamer beyond the bar."], 1.5)):
        im = Image.new("L", (1240, 1754), 255)
        draw = ImageDraw.Draw(im)
        font = ImageFont.load_default(size=36)
        for i, line in enumerate(lines):
            draw.text((120, 150 + 72 * i), line, font=font, fill=0)
        pages.append(im.filter(ImageFilter.GaussianBlur(blur)) if blur else im)
    buf = io.BytesIO()
    pages[0].save(buf, format="PDF", save_all=True, append_images=pages[1:], resolution=150)
    return buf.getvalue()


@pytest.fixture(scope="module")
def formats_home(tmp_path_factory):
    need_shared(FORMATS)
    from fabric_resources.home import FabricHome

    base = tmp_path_factory.mktemp("formats")
    docs = base / "docs"
    docs.mkdir()
    shutil.copy(FORMATS / "pdf/latex-multicolumn.pdf", docs / "latex-multicolumn.pdf")
    (docs / "scan.pdf").write_bytes(_image_only_pdf())
    (docs / "notes.txt").write_text("The lighthouse keeper wrote in the log book every night.\n", encoding="utf-8")
    home = FabricHome(base / "home")
    old = os.environ.get("FABRIC_HOME")
    os.environ["FABRIC_HOME"] = str(home.root)
    ingest(docs, home)
    yield home
    if old is None:
        os.environ.pop("FABRIC_HOME", None)
    else:
        os.environ["FABRIC_HOME"] = old


def _units(home, source_key: str) -> list[dict]:
    parse_id = home.catalog.current_release().manifest["sources"][source_key]["parse_id"]
    t = home.tables.read("units", parse_ids=[parse_id])
    return sorted(t.to_pylist(), key=lambda r: r["ordinal"])


def _hit(fabric: Fabric, query: str, source: str):
    return next(h for h in fabric.search(query, limit=20).results if h.citation.source_key == source)


# -- locations: pure ----------------------------------------------------------------------------


def test_location_of_each_format():
    """guards against: a page range, slide, table cell or note lost between the locator and the label."""
    pdf = location_of("u", "paragraph", json.dumps({"page": 4, "page_end": 5, "bbox": [0, 0, 1, 1],
                                                    "regions": [{"page": 4}, {"page": 5}]}), ("3 Overview",))
    assert pdf.pages == (4, 5) and location_label([pdf]) == "pp. 4\u20135"
    assert location_label([location_of("u", "heading", {"page": 7}, ())]) == "p. 7"
    cell = location_of("u", "table_cell", {"element_path": "/w:document/w:body/w:tbl[2]/w:tr[3]/w:tc[1]",
                                           "table": 1, "row": 2, "col": 0}, ("Tables",))
    assert cell.path == ("Tables", "table 2, row 3, col 1")
    note = location_of("u", "note", {"part": "word/footnotes.xml", "note_type": "footnote", "note_id": "1"}, ())
    assert location_label([note]) == "footnote 1"
    slide = location_of("u", "table_cell", {"slide": 3, "shape_id": 4, "shape_name": "Table 1", "table": 0,
                                            "row": 1, "col": 1}, ("Slide 3",))
    assert location_label([slide]) == "slide 3 > Table 1 > table 1, row 2, col 2"
    html = location_of("u", "paragraph", {"element_path": "/html/body/div/p[2]"}, ())
    assert location_label([html]) == "/html/body/div/p[2]"
    assert location_of("u", "paragraph", "not json", ()).pages == ()


def test_the_label_of_several_shapes_or_slides_says_only_what_all_of_them_share():
    """guards against (hostile trial 13c): a hit of a subtitle and the speaker notes labelled
    "slide 1 > Subtitle 2" (the first unit's path), and one of slides 1 and 2 labelled "slide 1":
    the label named a shape or slide that did not hold the cited phrase."""
    subtitle = location_of("a", "paragraph", {"slide": 1, "shape_id": 3, "shape_name": "Subtitle 2"})
    notes = location_of("b", "speaker_note", {"slide": 1, "notes": True})
    other = location_of("c", "paragraph", {"slide": 2, "shape_id": 3, "shape_name": "Box"})
    assert location_label([subtitle]) == "slide 1 > Subtitle 2"
    assert location_label([subtitle, notes]) == "slide 1"
    assert location_label([subtitle, notes, other]) == "slide 1, slide 2"
    cells = [location_of(u, "table_cell", {"slide": 3, "shape_name": "Table 2", "table": 0, "row": r, "col": 0})
             for u, r in (("d", 1), ("e", 2))]
    assert location_label(cells) == "slide 3 > Table 2"


def test_a_hit_that_starts_at_a_top_level_heading_is_labelled_by_what_follows_it():
    """guards against (hostile trial 14c): a DOCX hit of a document's title heading and the three
    tables under it, searched for "Steroids" (table 1, row 3), labelled `/w:document/w:body/w:p[1]`:
    the title's own element path, which holds none of the tables. A top-level heading has no
    section path of its own, so the label fell through to the first location's element path."""
    title = location_of("h", "heading", {"element_path": "/w:document/w:body/w:p[1]"}, ())
    cells = [location_of(u, "table_cell", {"element_path": f"/w:document/w:body/w:tbl[{t + 1}]/w:tr[1]/w:tc[1]",
                                           "table": t, "row": 0, "col": 0}, ("Tables",))
             for u, t in (("a", 0), ("b", 1))]
    assert location_label([title, *cells]) == "Tables"
    assert location_label([title, cells[0]]) == "Tables > table 1, row 1, col 1"
    # An HTML page's h1 and its first paragraph, both under no heading: their element paths.
    h1 = location_of("h", "heading", {"element_path": "/html/body/h1"}, ())
    para = location_of("p", "paragraph", {"element_path": "/html/body/p[1]"}, ())
    assert location_label([h1, para]) == "/html/body/h1, p[1]"
    assert location_label([title]) == "/w:document/w:body/w:p[1]"


def test_a_hit_of_several_elements_under_no_heading_names_every_one():
    """guards against (hostile trial 14c): a DOCX hit of three paragraphs under no heading
    (w:p[19], w:p[23], w:p[25] of a handbook) labelled `/w:document/w:body/w:p[19]`, the first one's
    element path alone: the label named a paragraph that did not hold the rest of the cited text."""
    paras = [location_of(u, "paragraph", {"element_path": f"/w:document/w:body/w:p[{i}]"}, ())
             for u, i in (("a", 19), ("b", 23), ("c", 25))]
    assert location_label(paras) == "/w:document/w:body/w:p[19], w:p[23], w:p[25]"
    assert location_label(paras[:1]) == "/w:document/w:body/w:p[19]"
    spread = [location_of("p", "paragraph", {"element_path": "/html/body/div[2]/p[1]"}, ()),
              location_of("q", "list_item", {"element_path": "/html/body/div[2]/ul/li[2]"}, ())]
    assert location_label(spread) == "/html/body/div[2] (2 elements)"


def test_a_hit_of_a_body_paragraph_and_a_header_or_note_names_both():
    """guards against (trial 23d): a DOCX hit of the last body paragraph (under no heading) and the
    header and footer read after it ("… the following: US Trustee Handbook Copyright") labelled
    `/w:document/w:body/w:p[33]`: the header's and footer's units, parts of their own with a path
    and no element path, were left out of the label, which named only where the body text sits."""
    para = location_of("a", "paragraph", {"part": "word/document.xml", "element_path": "/w:document/w:body/w:p[33]"}, ())
    header = location_of("b", "note", {"part": "word/header1.xml", "note_type": "header", "note_id": "1"}, ())
    footnote = location_of("c", "note", {"part": "word/footnotes.xml", "note_type": "footnote", "note_id": "2"}, ())
    assert location_label([para, header]) == "/w:document/w:body/w:p[33], header 1"
    assert location_label([para, footnote]) == "/w:document/w:body/w:p[33], footnote 2"
    assert location_label([para]) == "/w:document/w:body/w:p[33]"


# -- PDF: the page --------------------------------------------------------------------------------


def test_a_unit_carried_over_a_page_break_cites_both_pages(formats_home):
    """guards against: a sentence carried from page 1 to page 2 cited to page 1 only."""
    fabric = Fabric(formats_home.root)
    unit = next(u for u in _units(formats_home, PAPER) if json.loads(u["locator"]).get("page_end"))
    loc = json.loads(unit["locator"])
    hit = _hit(fabric, '"' + " ".join(unit["text"].split()[1:6]) + '"', PAPER)
    assert hit.citation.locations[0].pages == tuple(range(loc["page"], loc["page_end"] + 1))
    assert hit.citation.label == f"pp. {loc['page']}\u2013{loc['page_end']}"
    assert fabric.resolve(hit.citation).status == "verified"


def test_a_citation_with_another_page_is_stale(formats_home):
    """guards against: resolve verifying the text but not the page it claims."""
    fabric = Fabric(formats_home.root)
    hit = _hit(fabric, "lorem", PAPER)
    loc = hit.citation.locations[0]
    moved = hit.citation.model_copy(update={"locations": (
        loc.model_copy(update={"pages": (loc.pages[0] + 1,)}), *hit.citation.locations[1:])})
    result = fabric.resolve(moved)
    assert result.status == "stale" and result.text is None
    assert {c.check: c.ok for c in result.checks}["location"] is False
    stranger = loc.model_copy(update={"unit_id": "0" * 32})
    with pytest.raises(CitationError):
        fabric.resolve(hit.citation.model_copy(update={"locations": (stranger,)}))


def test_cli_search_prints_the_file_and_page(formats_home):
    """guards against: the CLI printing a PDF hit without its page."""
    from fabric_query.cli import read_app

    fabric = Fabric(formats_home.root)
    hit = _hit(fabric, "lorem", PAPER)
    out = CliRunner().invoke(read_app, ["search", "lorem", "--limit", "20", "--home", str(formats_home.root)],
                             terminal_width=400)
    assert out.exit_code == 0, out.output
    assert f"{PAPER} {hit.citation.label}" in out.output and hit.citation.label.startswith("p")


# -- DOCX, PPTX, HTML: the structural path ----------------------------------------------------


# -- confidence: ------------------------------------------------------------------------------


@pytest.mark.parametrize("value, expected", [("0.8", 0.8), (".5", 0.5), ("1", 1.0), ("0", 0.0), ('"0.25"', 0.25)])
def test_confidence_filter_parses(value, expected):
    """guards against: confidence: read as a plain word, or a valid threshold refused."""
    parsed = parse_query(f"lamp confidence:{value}")
    assert parsed.filters.min_confidence == expected and parsed.terms == ("lamp",)


@pytest.mark.parametrize("value", ["1.5", "-0.1", "abc", "nan", "inf", ".", "0.8.1", "80%", "1e-1"])
def test_a_bad_confidence_is_a_syntax_error(value):
    """guards against: a bad threshold silently ignored, or a crash instead of a typed error."""
    with pytest.raises(QuerySyntaxError, match="confidence"):
        parse_query(f"lamp confidence:{value}")


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="Tesseract is not installed (OCR is off)")
def test_confidence_admits_only_ocr_text_that_clears_it(formats_home):
    """guards against: OCR text below the threshold returned, text-layer text refused, or the filter
    applied after ranking (a limit of 1 would then come back empty)."""
    fabric = Fabric(formats_home.root)
    ocr = {u["unit_id"]: json.loads(u["attributes"])["confidence"] for u in _units(formats_home, SCAN)
           if u["kind"] == "ocr_text"}
    assert ocr, "Tesseract read nothing from the image-only pages"
    hit = _hit(fabric, "lighthouse", SCAN)
    least = min(ocr[u] for u in hit.citation.unit_ids if u in ocr)
    pages = {json.loads(u["locator"])["page"] for u in _units(formats_home, SCAN)
             if u["unit_id"] in hit.citation.unit_ids}
    assert 1 in pages and hit.citation.label == page_label(pages)
    # By chunk: each scanned page is a chunk of its own (chunker fine-v3), and the other page's,
    # found by the dense channel, may clear the threshold.
    at = {(h.citation.source_key, h.chunk_id) for h in fabric.search(f"lighthouse confidence:{least}",
                                                                       limit=20).results}
    above = {(h.citation.source_key, h.chunk_id) for h in fabric.search(
        f"lighthouse confidence:{least + 0.0001:.4f}", limit=20).results}
    assert (SCAN, hit.chunk_id) in at and NOTES in {s for s, _ in at}
    # text read from a file is exact: it always passes
    assert (SCAN, hit.chunk_id) not in above and NOTES in {s for s, _ in above}
    for threshold in ("0", "0.5", "0.9", f"{least:.4f}", "1"):
        for h in fabric.search(f"lighthouse lamp pilot confidence:{threshold}", limit=20).results:
            assert all(ocr[u] >= float(threshold) for u in h.citation.unit_ids if u in ocr)
    # Before ranking: the best admitted hit is still returned at limit 1.
    top = fabric.search("lighthouse keeper confidence:1", limit=1).results
    assert [h.citation.source_key for h in top] == [NOTES]


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="Tesseract is not installed (OCR is off)")
def test_an_ocr_citation_after_the_engine_is_gone_is_stale_and_says_so(formats_home, monkeypatch):
    """guards against (hostile trial 13c): OCR text whose engine was removed since (or upgraded)
    answered only "config 714434b2… ; this Fabric's is … (config adb5d518…)", nothing saying the
    OCR engine is what changed. Never verified: the text cannot be read again."""
    fabric = Fabric(formats_home.root)
    hit = _hit(fabric, "lighthouse", SCAN)
    assert "ocr_text" in {loc.kind for loc in hit.citation.locations}
    assert fabric.resolve(hit.citation).status == "verified"
    monkeypatch.setattr("fabric_resources.parsing.pdf.ocr._probe", lambda cmd, languages: None)
    result = Fabric(formats_home.root).resolve(hit.citation)
    check = {c.check: c for c in result.checks}["parse"]
    assert result.status == "stale" and result.text is None and not check.ok
    assert "parser-changed" in check.detail and "ocr: absent" in check.detail
