"""What a PDF page's annotations show, read as the page's text (pypdfium2)."""

from __future__ import annotations

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c


def flatten_annotations(page: pdfium.PdfPage) -> bool:
    """Draw the page's annotations a viewer shows (a filled form field's value, a free-text
    comment, a stamp: their appearance streams) into its content, so their text is read as the
    page's; whether the page changed. PDFium's text layer holds page content only, so a filled
    form's answers were lost in silence (hostile trial 21e). ``FLAT_NORMALDISPLAY`` leaves out a
    Hidden annotation and a popup; an annotation without an appearance stream (a link, a comment's
    note) draws nothing. PDFium flattens a NoView annotation too, which a viewer does not show but
    may print: one that does not print either is shown nowhere, so it is marked Hidden first.

    The page's loaded handles (its text page, objects) are stale after a ``True``: load it again."""
    count = pdfium_c.FPDFPage_GetAnnotCount(page.raw)
    if count <= 0:
        return False
    for i in range(count):
        annot = pdfium_c.FPDFPage_GetAnnot(page.raw, i)
        if not annot:
            continue
        try:
            flags = pdfium_c.FPDFAnnot_GetFlags(annot)
            if flags & pdfium_c.FPDF_ANNOT_FLAG_NOVIEW and not flags & pdfium_c.FPDF_ANNOT_FLAG_PRINT:
                pdfium_c.FPDFAnnot_SetFlags(annot, flags | pdfium_c.FPDF_ANNOT_FLAG_HIDDEN)
        finally:
            pdfium_c.FPDFPage_CloseAnnot(annot)
    return pdfium_c.FPDFPage_Flatten(page.raw, pdfium_c.FLAT_NORMALDISPLAY) == pdfium_c.FLATTEN_SUCCESS
