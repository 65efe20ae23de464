"""One PDFium text line cut into the pieces the parser reads as lines: at jumps to another row
(:func:`rows`) and at column gutters (:func:`gutter_pieces`); and the text page those lines come
from (:func:`unrotated_textpage`). Moved out of :mod:`.parser` (trial 21e) to keep that module
under 500 lines.
"""

from __future__ import annotations

import math
import re

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

# Spaces between two other characters of a line: PDFium's one between text objects, or the run a
# hidden text object left (its characters read as spaces, :mod:`.covered`).
_SPACES = re.compile(r"(?<=\S) +(?=\S)")

#: A space PDFium put between two characters further apart than this many font sizes, on one text
#: line, is a column gutter: the two columns of a page drawn line by line across both.
GUTTER_SIZES = 1.5


def rows(textpage: pdfium.PdfTextPage, text: str, start: int, end: int) -> list[tuple[int, int]]:
    """``text[start:end]`` (one PDFium line) cut at each run of spaces where the text jumps to
    another row: the characters either side of it (their loose boxes) are further apart up or down
    than half a font size, and side by side (no x in common). PDFium runs the text of consecutive form XObjects
    (a letterhead, a stamp, each annotation flattened into the page) into one line wherever they
    stand, so blocks far apart were one unit, cited by a box over all of them (hostile trial 21e).
    The words of a line printed rotated 90° lie one above the other, a space apart (0.6 of a font
    size in a monospaced font), in one column of x; a superscript overlaps its line."""
    cuts = []  # (first space, first character after the spaces)
    for run in _SPACES.finditer(text, start, end):
        a, b = run.start() - 1, run.end()
        before, after = textpage.get_charbox(a, loose=True), textpage.get_charbox(b, loose=True)
        size = float(pdfium_c.FPDFText_GetFontSize(textpage.raw, a)) or (before[3] - before[1])
        apart_y = max(before[1] - after[3], after[1] - before[3])
        if size > 0 and apart_y > 0.5 * size and (after[2] <= before[0] or after[0] >= before[2]):
            cuts.append((run.start(), b))
    return list(zip([start] + [b for _, b in cuts], [a for a, _ in cuts] + [end]))


def gutter_pieces(textpage: pdfium.PdfTextPage, text: str, start: int, end: int) -> list[tuple[int, int, float]]:
    """``text[start:end]`` (one PDFium line) cut at its column gutters: ``(start, end, x)`` per
    piece, ``x`` the left edge of the piece's first character (that of the line for the first).

    PDFium joins the characters of one baseline into one line in content order, so a page that
    draws a left-column line, then the right-column line beside it, reads "lantern Right column …
    festival": both columns mixed, every sentence cut at every line (hostile trial 13c).
    """
    cuts = []
    for i in range(start + 1, end - 1):
        if text[i] != " " or text[i - 1].isspace() or text[i + 1].isspace():
            continue
        before, after = textpage.get_charbox(i - 1), textpage.get_charbox(i + 1)
        size = float(pdfium_c.FPDFText_GetFontSize(textpage.raw, i - 1)) or (before[3] - before[1])
        if size > 0 and after[0] - before[2] > GUTTER_SIZES * size:
            cuts.append((i, after[0]))
    if not cuts:
        return [(start, end, 0.0)]
    pieces, a, x = [], start, 0.0
    for i, next_x in cuts:
        pieces.append((a, i, x))
        a, x = i + 1, next_x
    pieces.append((a, end, x))
    return pieces


def unrotated_textpage(page: pdfium.PdfPage) -> pdfium.PdfTextPage:
    """``page``'s text page; on a page turned a quarter clockwise (``/Rotate 90``) whose text stands
    upright in the page's own space, made as if the page were not turned (its turn then restored).
    PDFium orders the lines of such a page from the bottom of its content up (an OCR layer over a
    scan turned that way, a portrait page printed sideways): three paragraphs came last first, and
    the block builder joined the ends of two into one unit (hostile trial 21e). Text drawn turned
    against the page's turn (a landscape page shown upright) is read in order as it is, and so are
    pages turned 180 or 270. Character boxes are in the page's own space either way."""
    textpage = page.get_textpage()
    rotation = page.get_rotation()
    if rotation != 90:
        return textpage
    count = min(textpage.count_chars(), _SAMPLE)
    angles = [pdfium_c.FPDFText_GetCharAngle(textpage.raw, i) for i in range(count)
              if not chr(pdfium_c.FPDFText_GetUnicode(textpage.raw, i) or 32).isspace()]
    upright = sum(1 for angle in angles if min(abs(angle), abs(angle - 2 * math.pi)) < 0.1)
    if 2 * upright <= len(angles):
        return textpage
    textpage.close()
    page.set_rotation(0)
    try:
        return page.get_textpage()
    finally:
        page.set_rotation(rotation)


#: Characters whose angle decides how a turned page's text stands (the first of the page).
_SAMPLE = 2000
