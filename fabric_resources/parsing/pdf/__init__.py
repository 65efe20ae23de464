"""PDF parser plug-in (pypdfium2): units with page and bounding box, OCR of image-only pages.

Three steps, one module each: :mod:`.layout` (lines -> blocks in reading order), :mod:`.outline`
(headings and section paths), :mod:`.ocr` (Tesseract); :mod:`.parser` runs them. The parse runs in
a bounded child process (:mod:`fabric_resources.parsing.isolation`): PDFium is C code.
"""

from __future__ import annotations

from fabric_resources.parsing.spec import ParserSpec

PARSER_NAME = "pdf"
PARSER_VERSION = "21"  # 21: a Type 3 font's character whose glyph name gives no character or another one than its code (a made-up /g1, /a23; /a at B) counts as unmapped, where every Type 3 font of the page naming that code names it so, but /a<code> at its own code (dvips: TeX bitmap fonts) read as before (trial 22d); 20: text inside a form XObject that a clip the whole form is drawn under keeps wholly out of sight is read as spaces and counted in covered_chars (PDFium gives that clip to the form object alone) (trial 22d); 19: a PDF none of whose pages could be read, some failing (PDFium could not load them, OCR failed), is unreadable-pages, its detail naming the pages and why in one bounded line (was no-text with a Python list of dicts) (trial 22a); 18: a page turned a quarter clockwise (/Rotate 90) whose text stands upright in its own space is read as if unturned, its lines in content order (PDFium listed them bottom up, joining two paragraphs' ends) (trial 21e); 17: text a clipping path keeps wholly out of sight (on the page or inside a form XObject) is read as spaces and counted in covered_chars, and a line is cut at a run of spaces where it jumps to another row (trial 21e); 16: the files a PDF carries (embedded files: a portfolio's documents) are counted and listed unread, embedded-file (trial 21e); 15: a line whose characters are mostly without a Unicode mapping (a CID font without ToUnicode read as glyph numbers; a Type 3 font's characters, never mapped by PDFium, still read) is left out and counted, its page read by OCR when nothing else is on it, else listed unread as unmapped-text (trial 21e); 14: a PDFium line is cut where its text jumps to another row, side by side (the text of consecutive form XObjects, which PDFium runs into one line) (trial 21e); 13: what a page's annotations show (a filled form field's value, a free-text comment, a stamp) is read as the page's text, drawn into it by PDFium's flattening; hidden ones, and NoView ones that do not print, are not (trial 21e); 12: a character drawn fully transparent (fill alpha ca, and CA if stroked, at most 24/255) where the rendered page shows one colour alone is read as a space, as white text is (trial 19b); 11: a character drawn white (or nearly) where the rendered page shows only white is read as a space, as a covered one is (trial 18b), on the first 200 pages that hold a cover or white text (trial 18e); 10: a character an opaque box drawn over it hides (a redaction bar, a white-out) is read as a space (covered.py; trial 17c); 9: a hyphen at a line end is kept where the document writes the compound whole elsewhere (Tokyo-Osaka), and a line PDFium broke at a raised character (an author list, km², O(nᵏ)) is one line again; 8: OCR text joins a word Tesseract read broken at a line end; 7: a compound's hyphen at a line end is kept (state-of-the-art, IEEE-754); 6: two columns drawn line by line across both are read column by column; 5: a scanned page under a short text stamp is read by OCR too; 4: a running head or foot never carries on a sentence across a page break; 3: a character outside the BMP (two PDFium characters, a surrogate pair) is kept
MEDIA_TYPE = "application/pdf"


def _parse(data, config, media_type):
    from fabric_resources.parsing.isolation import run_parser

    return run_parser("fabric_resources.parsing.pdf.parser:parse_pdf", data, config, media_type, config.isolation)


def _environment(config) -> str:
    from fabric_resources.parsing.pdf.ocr import engine_description

    return "ocr: " + engine_description(config.ocr)


SPEC = ParserSpec(
    name=PARSER_NAME,
    version=PARSER_VERSION,
    extensions={".pdf": MEDIA_TYPE},
    config_section="pdf",
    parse=_parse,
    environment=_environment,
)
