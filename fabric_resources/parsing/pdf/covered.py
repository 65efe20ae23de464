"""Characters of a PDF page that an opaque filled rectangle drawn after them hides.

A redaction done by drawing a box over the text (a black bar, a white-out) leaves the text in the
content stream: PDFium's text page lists it, and it was indexed and cited where a reader sees a
box. A character is covered when an opaque filled rectangle on the page's top level, later in
the paint order than the character's text object (ISO 32000-1 §8.2: later objects paint over
earlier ones), contains its box's centre and spans at least :data:`MIN_COVER` of its height (a
strike-through rule or an underline does not hide the letters), and the rendered page shows the
box's colour alone over the character (only pages with such a box are rendered): where the same
words are drawn again over the box as outlines, they are seen, and the text kept.

Text drawn white (or nearly: within :data:`_TOLERANCE` of white) is hidden the same way when the
rendered page shows its characters' boxes in its own colour alone: white on the white page, a
white box under it, so no reader sees a glyph there (only pages with such text are rendered;
white on a dark box or an image shows, and is kept). So is text drawn fully transparent (or nearly:
its fill alpha, the ExtGState's ``ca``, and its stroke alpha ``CA`` if it is stroked, at most
:data:`_TOLERANCE` of 255) where the rendered page shows one colour alone in its characters' boxes:
nothing of it is drawn, so a reader sees the page or a box there; over an image (a scan it may be the
text layer of) it is kept. Text in render mode 3 (invisible) is kept: it is how an OCR layer lies over
a scanned page's image, which the reader sees as that text.

Text a clipping path keeps wholly out of sight (drawn after ``0 0 1 1 re W n``: hidden text, or
text a layout tool clipped out of a frame) is hidden too (:func:`clipped_chars`): the box of each
path of its clip (an upper bound of what that path lets through) is compared with the text object's,
in the space both are given in (the page's, or the form XObject's holding them).

A clip a whole form XObject is drawn under counts for the text inside it (PDFium gives it to the
form object alone): its paths are compared with the text object's box carried into their space.

What this does not see, and leaves as text: a form XObject's own ``/BBox`` (PDFium clips by it when
drawing, but gives no object that clip), a box in an annotation (not page content), an image
or a non-rectangular path over the text, a box or text inside a form XObject, text in another
colour drawn on a background of that colour, partial transparency (a soft mask, a blend mode, an
alpha above :data:`_TOLERANCE`).
"""

from __future__ import annotations

import ctypes
from collections import Counter
from dataclasses import dataclass, field

import pypdfium2.raw as pdfium_c

#: The share of a character's height a box must span to hide it.
MIN_COVER = 0.8
_MAX_PIXELS = 4_000_000  # the page render that confirms a cover: at most 2x, at most this many pixels
_TOLERANCE = 24  # a pixel within this of the cover's colour (each channel, 0-255) shows the cover
_STRAY = 0.02  # the share of a box's pixels that may differ (anti-aliased edges of the cover)
_MAX_SEGMENTS = 6  # a rectangle: a move, three or four lines, perhaps a close
_BLOCK = 256  # characters compared at once with the boxes near them


#: Pages of one document the check looks at closely (reads every character's box, renders the page:
#: ~30 ms a page). A 5,000-page file with white text on every page would take ~205 s (300 pages
#: measured), past the PDF child's 120 s timeout, failing a file that parsed before the white-text
#: check (trial 18e); past this many pages the rest are read as they are and counted
#: (``metadata.cover_unchecked_pages``).
MAX_CHECKED_PAGES = 200


@dataclass
class CoverBudget:
    """The pages of one document :func:`covered_chars` may still look at closely, and how many it
    could not (pages that hold a cover or white text past :data:`MAX_CHECKED_PAGES`)."""

    pages_left: int = field(default_factory=lambda: MAX_CHECKED_PAGES)
    unchecked: int = 0


def covered_chars(page, textpage, count: int, budget: CoverBudget | None = None) -> set[int]:
    """Indices (PDFium's character indices) of the characters of ``page`` a box drawn later hides,
    or that are drawn white where the page shows only white, or transparent where it shows one colour
    alone. A page that holds such a box or text
    spends one page of ``budget``; with none left it is not looked at (empty set, counted in
    ``budget.unchecked``)."""
    raw = page.raw
    order: dict[int, int] = {}  # text object address -> paint order
    # paint order of a text object drawn white -> its colour; drawn clear (transparent) -> None
    pale: dict[int, tuple[int, int, int] | None] = {}
    boxes: list[tuple[int, float, float, float, float, tuple[int, int, int]]] = []
    for z in range(pdfium_c.FPDFPage_CountObjects(raw)):
        obj = pdfium_c.FPDFPage_GetObject(raw, z)
        kind = pdfium_c.FPDFPageObj_GetType(obj)
        if kind == pdfium_c.FPDF_PAGEOBJ_TEXT:
            order[ctypes.cast(obj, ctypes.c_void_p).value] = z
            if (colour := _white_text(obj)) is not None or _clear_text(obj):
                pale[z] = colour
        elif kind == pdfium_c.FPDF_PAGEOBJ_PATH and order and (box := _opaque_rectangle(obj)) is not None:
            boxes.append((z, *box))
    if not (boxes or pale) or page.get_rotation() % 360:  # a rotated page: its pixels are not mapped here
        return set()
    if budget is not None:
        if budget.pages_left <= 0:
            budget.unchecked += 1
            return set()
        budget.pages_left -= 1
    chars: list[tuple[int, int, float, float, float, float]] = []  # index, paint order, left, bottom, right, top
    left, bottom, right, top = ctypes.c_double(), ctypes.c_double(), ctypes.c_double(), ctypes.c_double()
    for i in range(count):
        obj = pdfium_c.FPDFText_GetTextObject(textpage.raw, i)
        z = order.get(ctypes.cast(obj, ctypes.c_void_p).value) if obj else None
        if z is None or not pdfium_c.FPDFText_GetCharBox(textpage.raw, i, left, right, bottom, top):
            continue
        if right.value > left.value and top.value > bottom.value:
            chars.append((i, z, left.value, bottom.value, right.value, top.value))
    candidates = {chars[c][0]: (chars[c][2:], boxes[b][5]) for c, b in first_covers(chars, boxes)}
    for i, z, *box in chars:  # white (clear) text: hidden where its boxes show its own colour (one colour) alone
        if z in pale and i not in candidates:
            candidates[i] = (tuple(box), pale[z])
    return _unseen(page, candidates) if candidates else set()


def first_covers(chars, boxes) -> list[tuple[int, int]]:
    """(character position in ``chars``, box position in ``boxes``) for each character that a box
    painted after it covers (its centre inside, :data:`MIN_COVER` of its height spanned), the
    first such box in paint order. ``chars``: ``(index, paint order, left, bottom, right, top)``;
    ``boxes``: ``(paint order, x0, y0, x1, y1, colour)`` in paint order.

    One NumPy comparison per block of characters against the boxes near it: a generated report paints a
    cell's background after the text of the cells before it, so a table page holds thousands of
    candidate boxes, and a Python loop over (character, box) pairs cost 1.9 s on a page of 1,400
    cells (0.2 s before the check existed).

    >>> first_covers([(0, 1, 0, 0, 10, 10), (1, 3, 0, 0, 10, 10), (2, 1, 50, 0, 60, 10)],
    ...              [(2, -1, -1, 11, 11, (0, 0, 0)), (4, -1, 5, 11, 11, (0, 0, 0))])
    [(0, 0)]
    """
    if not chars or not boxes:
        return []
    import numpy as np  # here: the PDF parse child imports this module for every file, few have boxes

    boxes_at = np.array([b[:5] for b in boxes], dtype=np.float64)
    c = np.array([ch[1:] for ch in chars], dtype=np.float64)
    out: list[tuple[int, int]] = []
    for at in range(0, len(c), _BLOCK):
        z, left, bottom, right, top = (c[at:at + _BLOCK, k, None] for k in range(5))
        # Characters come in reading order, so a block spans part of the page: only boxes meeting
        # its bounds can hold one of its centres.
        near = np.flatnonzero((boxes_at[:, 3] >= left.min()) & (boxes_at[:, 1] <= right.max())
                              & (boxes_at[:, 4] >= bottom.min()) & (boxes_at[:, 2] <= top.max()))
        if not len(near):
            continue
        bz, x0, y0, x1, y1 = (boxes_at[near, k] for k in range(5))
        cx, cy = (left + right) / 2, (bottom + top) / 2
        covers = ((bz > z) & (x0 <= cx) & (cx <= x1) & (y0 <= cy) & (cy <= y1)
                  & (np.minimum(y1, top) - np.maximum(y0, bottom) >= MIN_COVER * (top - bottom)))
        hit = covers.any(axis=1)
        out += [(at + int(r), int(near[b])) for r, b in zip(np.flatnonzero(hit), covers[hit].argmax(axis=1))]
    return out


def _unseen(page, candidates) -> set[int]:
    """The candidates whose box the rendered page shows as their cover's colour alone: where a
    glyph shows there (the same words drawn again as outlines over the box, a letter's descender
    below a cell's fill), the character is seen, and kept. A candidate whose colour is ``None``
    (clear text) takes its box's most common pixel as that colour: whatever lies under it, alone."""
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
        if pixels and colour is None:
            colour = Counter(pixels).most_common(1)[0][0]
        if pixels and sum(max(abs(a - b) for a, b in zip(px, colour)) > _TOLERANCE for px in pixels) \
                <= _STRAY * len(pixels):
            hidden.add(i)
    return hidden


_FILLED = {pdfium_c.FPDF_TEXTRENDERMODE_FILL, pdfium_c.FPDF_TEXTRENDERMODE_FILL_CLIP}
_FILLED_STROKED = {pdfium_c.FPDF_TEXTRENDERMODE_FILL_STROKE, pdfium_c.FPDF_TEXTRENDERMODE_FILL_STROKE_CLIP}
_STROKED = {pdfium_c.FPDF_TEXTRENDERMODE_STROKE, pdfium_c.FPDF_TEXTRENDERMODE_STROKE_CLIP}


def _white_text(obj) -> tuple[int, int, int] | None:
    """The colour of a text object drawn white or nearly (filled, and stroked too if it is stroked,
    every channel within :data:`_TOLERANCE` of 255), else None."""
    mode = pdfium_c.FPDFTextObj_GetTextRenderMode(obj)
    if mode not in _FILLED and mode not in _FILLED_STROKED:
        return None
    r, g, b, a = (ctypes.c_uint() for _ in range(4))
    if not pdfium_c.FPDFPageObj_GetFillColor(obj, r, g, b, a) or min(r.value, g.value, b.value) < 255 - _TOLERANCE:
        return None
    colour = (r.value, g.value, b.value)
    if mode in _FILLED_STROKED and (not pdfium_c.FPDFPageObj_GetStrokeColor(obj, r, g, b, a)
                                    or min(r.value, g.value, b.value) < 255 - _TOLERANCE):
        return None
    return colour


def _clear_text(obj) -> bool:
    """Whether a text object is drawn fully transparent or nearly: every alpha it paints with (fill,
    stroke: ``ca``, ``CA`` of its graphics state, PDFium's colour alpha) at most :data:`_TOLERANCE`.
    Render mode 3 (invisible: an OCR layer) and 7 (clipping alone) are not this: they paint nothing at all."""
    mode = pdfium_c.FPDFTextObj_GetTextRenderMode(obj)
    fills = mode in _FILLED or mode in _FILLED_STROKED
    strokes = mode in _FILLED_STROKED or mode in _STROKED
    if not (fills or strokes):
        return False
    r, g, b, a = (ctypes.c_uint() for _ in range(4))
    if fills and (not pdfium_c.FPDFPageObj_GetFillColor(obj, r, g, b, a) or a.value > _TOLERANCE):
        return False
    return not strokes or bool(pdfium_c.FPDFPageObj_GetStrokeColor(obj, r, g, b, a)) and a.value <= _TOLERANCE


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


def clipped_chars(textpage, count: int, page=None) -> set[int]:
    """Indices (PDFium's character indices) of the characters whose text object lies wholly outside
    one of the paths of its clipping path (ISO 32000-1 §8.5.4: what is drawn shows only inside every
    path of the clip), so that nothing of it is drawn: such text was indexed and cited where a
    reader sees nothing (hostile trial 21e). A path's box is that of its points, control points
    included (a Bézier curve lies within them), so the test only ever errs towards keeping text; a
    text object partly inside is kept whole.

    With ``page``, the clip a form XObject is drawn under (``q … W n … /X1 Do Q``) counts for the
    text inside it too (:func:`form_clips`): PDFium gives it to the form object alone, not to its
    text objects, so a letterhead clipped out of sight whole was indexed (trial 22d)."""
    hidden: set[int] = set()
    verdict: dict[int, bool] = {}  # text object address -> wholly clipped
    outer = form_clips(page) if page is not None else {}
    for i in range(count):
        obj = pdfium_c.FPDFText_GetTextObject(textpage.raw, i)
        if not obj:
            continue
        key = ctypes.cast(obj, ctypes.c_void_p).value
        if key not in verdict:
            verdict[key] = _clipped_away(obj) or _outside_form_clips(obj, outer.get(key, ()))
        if verdict[key]:
            hidden.add(i)
    return hidden


#: Objects inside form XObjects :func:`form_clips` looks at on one page, at most: a form of many
#: objects drawn many times is as many PDFium objects; past this the rest keep their text.
MAX_FORM_OBJECTS = 200_000

_Matrix = tuple[float, float, float, float, float, float]  # (a, b, c, d, e, f), ISO 32000-1 §8.3.4


def form_clips(page) -> dict[int, list[tuple[list[tuple[float, float, float, float]], _Matrix]]]:
    """For each text object inside a form XObject that is drawn under a clipping path, the clips of
    its enclosing form objects: ``address -> [(the boxes of a clip's paths, the matrix from the text
    object's space to the clip's)]``. A form object's clip is in the space of what holds it (the
    page's, or the outer form's); its matrix maps its own space there. Text objects of forms under
    no clip are absent."""
    out: dict[int, list] = {}
    seen = 0
    raw = page.raw
    todo = [(pdfium_c.FPDFPage_GetObject(raw, z), []) for z in range(pdfium_c.FPDFPage_CountObjects(raw))]
    todo = [(obj, clips) for obj, clips in todo if pdfium_c.FPDFPageObj_GetType(obj) == pdfium_c.FPDF_PAGEOBJ_FORM]
    while todo and seen < MAX_FORM_OBJECTS:
        form, clips = todo.pop()
        matrix = pdfium_c.FS_MATRIX()
        if not pdfium_c.FPDFPageObj_GetMatrix(form, matrix):
            continue
        m = (matrix.a, matrix.b, matrix.c, matrix.d, matrix.e, matrix.f)
        inner = [(boxes, _compose(to_clip, m)) for boxes, to_clip in clips]
        if boxes := _clip_boxes(pdfium_c.FPDFPageObj_GetClipPath(form)):
            inner.append((boxes, m))
        for k in range(pdfium_c.FPDFFormObj_CountObjects(form)):
            seen += 1
            child = pdfium_c.FPDFFormObj_GetObject(form, k)
            kind = pdfium_c.FPDFPageObj_GetType(child)
            if kind == pdfium_c.FPDF_PAGEOBJ_FORM:
                todo.append((child, inner))
            elif kind == pdfium_c.FPDF_PAGEOBJ_TEXT and inner:
                out[ctypes.cast(child, ctypes.c_void_p).value] = inner
    return out


def _compose(outer: _Matrix, inner: _Matrix) -> _Matrix:
    """The matrix applying ``inner``, then ``outer`` (ISO 32000-1 §8.3.4: ``inner × outer``).

    >>> _compose((2, 0, 0, 2, 0, 0), (1, 0, 0, 1, 10, 5))  # move, then scale: the move doubles
    (2, 0, 0, 2, 20, 10)
    >>> _compose((1, 0, 0, 1, 72, 400), (0, 1, -1, 0, 0, 0))  # turn a quarter, then move
    (0, 1, -1, 0, 72, 400)
    """
    a, b, c, d, e, f = inner
    A, B, C, D, E, F = outer
    return (a * A + b * C, a * B + b * D, c * A + d * C, c * B + d * D, e * A + f * C + E, e * B + f * D + F)


def _outside_form_clips(obj, clips) -> bool:
    """Whether text object ``obj``'s box, carried into each enclosing form's clip space (the box of
    its four corners: an upper bound, so the test errs towards keeping text), lies wholly outside
    one path's box of that clip."""
    if not clips:
        return False
    bounds = [ctypes.c_float() for _ in range(4)]
    if not pdfium_c.FPDFPageObj_GetBounds(obj, *(ctypes.byref(b) for b in bounds)):
        return False
    x0, y0, x1, y1 = (b.value for b in bounds)
    for boxes, (a, b, c, d, e, f) in clips:
        xs = [a * x + c * y + e for x in (x0, x1) for y in (y0, y1)]
        ys = [b * x + d * y + f for x in (x0, x1) for y in (y0, y1)]
        if any(_apart((min(xs), min(ys), max(xs), max(ys)), box) for box in boxes):
            return True
    return False


def _apart(box, path) -> bool:
    left, bottom, right, top = box
    px0, py0, px1, py1 = path
    return px1 <= left or px0 >= right or py1 <= bottom or py0 >= top


def _clip_boxes(clip) -> list[tuple[float, float, float, float]]:
    """The box of each path of ``clip`` (an ``FPDF_CLIPPATH``, or null): that of its points,
    control points included."""
    if not clip:
        return []
    x, y = ctypes.c_float(), ctypes.c_float()
    boxes = []
    for k in range(pdfium_c.FPDFClipPath_CountPaths(clip)):
        xs, ys = [], []
        for j in range(pdfium_c.FPDFClipPath_CountPathSegments(clip, k)):
            segment = pdfium_c.FPDFClipPath_GetPathSegment(clip, k, j)
            if segment and pdfium_c.FPDFPathSegment_GetPoint(segment, ctypes.byref(x), ctypes.byref(y)):
                xs.append(x.value)
                ys.append(y.value)
        if xs:
            boxes.append((min(xs), min(ys), max(xs), max(ys)))
    return boxes


def _clipped_away(obj) -> bool:
    clip = pdfium_c.FPDFPageObj_GetClipPath(obj)
    if not clip:
        return False
    bounds = [ctypes.c_float() for _ in range(4)]
    if not pdfium_c.FPDFPageObj_GetBounds(obj, *(ctypes.byref(b) for b in bounds)):
        return False
    box = tuple(b.value for b in bounds)
    return any(_apart(box, path) for path in _clip_boxes(clip))
