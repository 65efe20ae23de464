"""Characters of a PDF page that an opaque filled rectangle drawn after them hides.

A redaction done by drawing a box over the text (a black bar, a white-out) leaves the text in the
content stream: PDFium's text page lists it, and it was indexed and cited where a reader sees a
box. A character is covered when an opaque filled rectangle on the page's top level, later in
the paint order than the character's text object (ISO 32000-1 §8.2: later objects paint over
earlier ones), contains its box's centre and spans at least :data:`MIN_COVER` of its height (a
strike-through rule or an underline does not hide the letters), and the rendered page shows the
box's colour alone over the character (only pages with such a box are rendered): where the same
words are drawn again over the box as outlines, they are seen, and the text kept.

What this does not see, and leaves as text: a box in an annotation (not page content), an image
or a non-rectangular path over the text, a box or text inside a form XObject, text in the
background colour (white on white: the background is not known without rendering), transparency.
"""

from __future__ import annotations

import ctypes

import pypdfium2.raw as pdfium_c

#: The share of a character's height a box must span to hide it.
MIN_COVER = 0.8
_MAX_PIXELS = 4_000_000  # the page render that confirms a cover: at most 2x, at most this many pixels
_TOLERANCE = 24  # a pixel within this of the cover's colour (each channel, 0-255) shows the cover
_STRAY = 0.02  # the share of a box's pixels that may differ (anti-aliased edges of the cover)
_MAX_SEGMENTS = 6  # a rectangle: a move, three or four lines, perhaps a close


def covered_chars(page, textpage, count: int) -> set[int]:
    """Indices (PDFium's character indices) of the characters of ``page`` a box drawn later hides."""
    raw = page.raw
    order: dict[int, int] = {}  # text object address -> paint order
    boxes: list[tuple[int, float, float, float, float, tuple[int, int, int]]] = []
    for z in range(pdfium_c.FPDFPage_CountObjects(raw)):
        obj = pdfium_c.FPDFPage_GetObject(raw, z)
        kind = pdfium_c.FPDFPageObj_GetType(obj)
        if kind == pdfium_c.FPDF_PAGEOBJ_TEXT:
            order[ctypes.cast(obj, ctypes.c_void_p).value] = z
        elif kind == pdfium_c.FPDF_PAGEOBJ_PATH and order and (box := _opaque_rectangle(obj)) is not None:
            boxes.append((z, *box))
    if not boxes or page.get_rotation() % 360:  # a rotated page: its pixels are not mapped here
        return set()
    candidates: dict[int, tuple[tuple[float, float, float, float], tuple[int, int, int]]] = {}
    left, bottom, right, top = ctypes.c_double(), ctypes.c_double(), ctypes.c_double(), ctypes.c_double()
    for i in range(count):
        obj = pdfium_c.FPDFText_GetTextObject(textpage.raw, i)
        z = order.get(ctypes.cast(obj, ctypes.c_void_p).value) if obj else None
        if z is None or not pdfium_c.FPDFText_GetCharBox(textpage.raw, i, left, right, bottom, top):
            continue
        cx, cy, height = (left.value + right.value) / 2, (bottom.value + top.value) / 2, top.value - bottom.value
        cover = next((colour for bz, x0, y0, x1, y1, colour in boxes if bz > z and x0 <= cx <= x1 and y0 <= cy <= y1
                      and min(y1, top.value) - max(y0, bottom.value) >= MIN_COVER * height), None)
        if cover is not None and right.value > left.value and height > 0:
            candidates[i] = ((left.value, bottom.value, right.value, top.value), cover)
    return _unseen(page, candidates) if candidates else set()


def _unseen(page, candidates) -> set[int]:
    """The candidates whose box the rendered page shows as their cover's colour alone: where a
    glyph shows there (the same words drawn again as outlines over the box, a letter's descender
    below a cell's fill), the character is seen, and kept."""
    cx0, cy0, cx1, cy1 = page.get_cropbox()
    scale = min(2.0, (_MAX_PIXELS / max((cx1 - cx0) * (cy1 - cy0), 1.0)) ** 0.5)
    bitmap = page.render(scale=scale, rotation=0)
    try:
        image = bitmap.to_pil().convert("RGB")
    finally:
        bitmap.close()
    hidden = set()
    for i, ((x0, y0, x1, y1), colour) in candidates.items():
        box = (int((x0 - cx0) * scale), int((cy1 - y1) * scale), int((x1 - cx0) * scale) + 1,
               int((cy1 - y0) * scale) + 1)
        pixels = list(image.crop(box).getdata())
        if pixels and sum(max(abs(a - b) for a, b in zip(px, colour)) > _TOLERANCE for px in pixels) \
                <= _STRAY * len(pixels):
            hidden.add(i)
    return hidden


def _opaque_rectangle(obj) -> tuple[float, float, float, float, tuple[int, int, int]] | None:
    """The bounds and fill colour of a path object that is an axis-aligned rectangle filled
    opaque, else None."""
    fill, stroke = ctypes.c_int(), ctypes.c_int()
    if not pdfium_c.FPDFPath_GetDrawMode(obj, fill, stroke) or fill.value == pdfium_c.FPDF_FILLMODE_NONE:
        return None
    r, g, b, a = (ctypes.c_uint() for _ in range(4))
    if (not pdfium_c.FPDFPageObj_GetFillColor(obj, r, g, b, a) or a.value != 255
            or pdfium_c.FPDFPageObj_HasTransparency(obj)):
        return None
    segments = pdfium_c.FPDFPath_CountSegments(obj)
    if not 4 <= segments <= _MAX_SEGMENTS:
        return None
    matrix = pdfium_c.FS_MATRIX()
    if not pdfium_c.FPDFPageObj_GetMatrix(obj, matrix) or matrix.b or matrix.c:  # rotated or skewed
        return None
    x, y = ctypes.c_float(), ctypes.c_float()
    points = []
    for k in range(segments):
        segment = pdfium_c.FPDFPath_GetPathSegment(obj, k)
        if pdfium_c.FPDFPathSegment_GetType(segment) == pdfium_c.FPDF_SEGMENT_BEZIERTO:
            return None
        if pdfium_c.FPDFPathSegment_GetPoint(segment, x, y):
            points.append((round(x.value, 3), round(y.value, 3)))
    xs, ys = {p[0] for p in points}, {p[1] for p in points}
    if len(xs) != 2 or len(ys) != 2:  # not an axis-aligned rectangle
        return None
    x0, y0, x1, y1 = ctypes.c_float(), ctypes.c_float(), ctypes.c_float(), ctypes.c_float()
    if not pdfium_c.FPDFPageObj_GetBounds(obj, x0, y0, x1, y1):
        return None
    return x0.value, y0.value, x1.value, y1.value, (r.value, g.value, b.value)
