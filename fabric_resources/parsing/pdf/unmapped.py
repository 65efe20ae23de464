"""PDF text without a Unicode mapping: PDFium reads the character code as the character.

A line mostly of such characters is junk (a CID font without ToUnicode: ``ABCDE`` read as
``$%&'(``) and is left out by the parser (:func:`unmapped`). PDFium maps no Type 3 font's
characters (it reads each code as the character, whatever the glyph is named), so a Type 3
character is judged by its glyph's name in the font's ``/Encoding`` ``/Differences``, read with
pypdf (PDFium gives no font dictionary): a name the Adobe Glyph List gives the code's own
character (``/A`` at 65, matplotlib's labels) is read as before; a made-up name (``/g1``,
``/a23``, a subsetter's or a bitmap font's) or a name of another character than the code says
(``/a`` at 66, read as ``B``) has no mapping, and counts as unmapped (trial 22d: such text was
indexed as junk).
"""

from __future__ import annotations

import ctypes
import io
import re
import unicodedata

import pypdfium2.raw as pdfium_c

#: What pypdf may raise reading a damaged file's fonts, besides its own errors (PdfReadError and kin,
#: of PyPdfError): the characters are then judged as before.
_READ_ERRORS = (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, OSError)
_MAX_FORMS = 1_000  # form XObjects looked into for fonts, per page
_DEPTH = 8  # form XObjects inside form XObjects


def unmapped(textpage, text: str, start: int, end: int, names: "Type3Names | None" = None, page: int = 0) -> bool:
    """Whether at least half the visible characters of ``text[start:end]`` have no Unicode mapping
    (PDFium's ``FPDFText_HasUnicodeMapError``, where it reads the character code as the character: a
    CID font without ToUnicode, its glyph numbers read as ``$%&'(`` for ``ABCDE``; a subset font's
    codes 1, 2, 3 ...). A stray unmapped bullet in a line of mapped text keeps the line. A Type 3
    font's character (PDFium maps none) is unmapped when ``names`` (the document's, ``page`` its
    0-based page) says its glyph's name gives no character or another one than its code."""
    visible = [i for i in range(start, end) if not text[i].isspace()]
    errors = 0
    for i in visible:
        if pdfium_c.FPDFText_HasUnicodeMapError(textpage.raw, i) != 1:
            continue
        if not _type3(pdfium_c.FPDFTextObj_GetFont(pdfium_c.FPDFText_GetTextObject(textpage.raw, i))):
            errors += 1
        elif names is not None and names.made_up(page, ord(text[i])):
            errors += 1
    return bool(visible) and 2 * errors >= len(visible)


def _type3(font) -> bool:
    """Whether ``font`` (an ``FPDF_FONT``) is a Type 3 font: PDFium calls it embedded, yet it has no
    font program to give."""
    if not font or not pdfium_c.FPDFFont_GetIsEmbedded(font):
        return False
    size = ctypes.c_size_t(0)
    return not pdfium_c.FPDFFont_GetFontData(font, None, 0, ctypes.byref(size)) or size.value == 0


class Type3Names:
    """The glyph names of the Type 3 fonts of one PDF's pages, read with pypdf the first time a page
    holding a Type 3 character asks (most files never do)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._reader = None
        self._pages: dict[int, dict[int, set[str]]] = {}

    def made_up(self, page: int, code: int) -> bool:
        """Whether every Type 3 font page ``page`` uses (its resources, its form XObjects' and its
        annotations' appearances) that names ``code`` names it by a glyph name the Adobe Glyph List
        does not give ``chr(code)``. PDFium does not say which of a page's Type 3 fonts drew a
        character, so one font naming the code well keeps it (as before); so does a code no font
        names, or a file pypdf cannot read. ``/a<code>`` at its own code says nothing against the
        code: dvips names the glyphs of TeX's bitmap (PK) fonts so (``/a65`` at 65), and PDFium's
        reading of such old papers is mostly right, where calling them unmapped sent every page to
        OCR, or left it unread without Tesseract."""
        if page not in self._pages:
            self._pages[page] = self._names(page)
        names = self._pages[page].get(code)
        if not names:
            return False
        from pypdf._codecs import adobe_glyphs

        return all(_glyph_char(name, adobe_glyphs) != chr(code) and name != f"/a{code}" for name in names)

    def _names(self, page: int) -> dict[int, set[str]]:
        # Imported here: pypdf costs ~0.5 s to import, and the PDF child imports this module for every file.
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError

        try:
            if self._reader is None:
                self._reader = PdfReader(io.BytesIO(self.data))
            p = self._reader.pages[page]
            out: dict[int, set[str]] = {}
            resources = [(p.get("/Resources"), 0)]
            for annot in p.get("/Annots") or []:
                appearance = (annot.get_object().get("/AP") or {}).get("/N")
                if appearance is not None and hasattr(appearance.get_object(), "get"):
                    resources.append((appearance.get_object().get("/Resources"), 1))
            forms = 0
            while resources and forms < _MAX_FORMS:
                res, depth = resources.pop()
                res = res.get_object() if res is not None else None
                if not hasattr(res, "get"):
                    continue
                for font in (res.get("/Font") or {}).values():
                    _add_names(font.get_object(), out)
                if depth < _DEPTH:
                    for xobject in (res.get("/XObject") or {}).values():
                        xobject = xobject.get_object()
                        if xobject.get("/Subtype") == "/Form":
                            forms += 1
                            resources.append((xobject.get("/Resources"), depth + 1))
            return out
        except (PyPdfError, *_READ_ERRORS):
            return {}


def _add_names(font, out: dict[int, set[str]]) -> None:
    """Add a Type 3 font's code -> glyph name pairs (its ``/Encoding`` ``/Differences``) to ``out``."""
    if not hasattr(font, "get") or font.get("/Subtype") != "/Type3":
        return
    encoding = font.get("/Encoding")
    encoding = encoding.get_object() if encoding is not None else None
    if not hasattr(encoding, "get"):
        return
    code = None
    for item in encoding.get("/Differences") or []:
        item = item.get_object() if hasattr(item, "get_object") else item
        if isinstance(item, int):
            code = item
        elif code is not None and isinstance(item, str) and 0 <= code <= 255:
            out.setdefault(code, set()).add(str(item))
            code += 1


def _glyph_char(name: str, glyphs: dict[str, str]) -> str | None:
    """The character a glyph name stands for (the Adobe Glyph List, ``uniXXXX``, ``uXXXX[XX]``, a
    ``.suffix`` ignored), else ``None``; a control character is none. pypdf's table also reads
    ``/a1`` ... ``/a255`` as their number's character, a guess for TeX's bitmap fonts that the
    glyph list does not make (its ``a1`` ... ``a191`` are ZapfDingbats'): such a name is made up.

    >>> from pypdf._codecs import adobe_glyphs
    >>> [_glyph_char(n, adobe_glyphs) for n in ("/A", "/uni0041", "/u1F600", "/A.sc", "/space", "/fi")]
    ['A', 'A', '😀', 'A', ' ', 'ﬁ']
    >>> [_glyph_char(n, adobe_glyphs) for n in ("/g1", "/a23", "/a65", "/uni0007", "/c65")]
    [None, None, None, None, None]
    """
    base = name.split(".", 1)[0] if not name.startswith("/.") else name
    if _NUMBERED.fullmatch(base):
        return None
    char = glyphs.get(base) or _unicode_name(base)
    return char if char and unicodedata.category(char[0]) != "Cc" else None


_NUMBERED = re.compile(r"/a\d+")


def _unicode_name(base: str) -> str | None:
    """The character of a ``uniXXXX`` or ``uXXXX[XX]`` glyph name, else ``None``."""
    bare = base.lstrip("/")
    for prefix, digits in (("uni", (4,)), ("u", (4, 5, 6))):
        hex_part = bare[len(prefix):]
        if bare.startswith(prefix) and len(hex_part) in digits:
            try:
                code = int(hex_part, 16)
                return chr(code) if code < 0xD800 or 0xE000 <= code <= 0x10FFFF else None
            except ValueError:
                return None
    return None
