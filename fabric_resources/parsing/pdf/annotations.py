"""What a PDF page's annotations show, read as the page's text, and the files a PDF carries,
listed as not read (pypdfium2)."""

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


#: Attached files listed by name at most: a file may attach thousands (the rest are counted).
MAX_LISTED_ATTACHMENTS = 100


def attachments(pdf: pdfium.PdfDocument) -> tuple[int, list[str]]:
    """How many files ``pdf`` carries in its embedded-files name tree (a PDF portfolio's documents,
    an e-invoice's XML, a contract attached to a cover letter), and the names of the first
    :data:`MAX_LISTED_ATTACHMENTS` (unprintable characters dropped, cut at 200 characters; a
    nameless one is ``#n``). Their contents are not read (no viewer shows them on a page, and a
    nested PDF is another parse): the parse lists them unread, where they were lost in silence
    (hostile trial 21e)."""
    count = max(pdfium_c.FPDFDoc_GetAttachmentCount(pdf.raw), 0)
    names = []
    for i in range(min(count, MAX_LISTED_ATTACHMENTS)):
        try:
            name = pdf.get_attachment(i).get_name()
        except pdfium.PdfiumError:
            name = ""
        names.append("".join(ch for ch in name if ch.isprintable())[:200] or f"#{i + 1}")
    return count, names
