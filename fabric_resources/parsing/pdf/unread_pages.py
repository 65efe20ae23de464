"""What the PDF parser says of the pages it could not read, in one bounded line.

A parse whose pages all failed is ``unreadable-pages``: its detail names which pages and why,
grouped (``pages 1-2: unreadable-page (Failed to load page.)``), not the failure records as
Python writes a list of dicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fabric_resources.parsing.document import ParseError

#: Reasons a failed page has that say it was read and held no words (OCR found none): such a PDF
#: has no text, it is not unreadable.
NO_WORDS = frozenset({"ocr-no-text"})
#: Groups of pages (one reason and detail each) a line names; the rest are counted.
MAX_GROUPS = 4
#: Characters of one group's detail kept (a library message can be long).
MAX_DETAIL_CHARS = 80
#: Page ranges one group names; past them the group's page count is given.
MAX_RANGES = 8


def page_ranges(pages: Sequence[int]) -> str:
    """``pages`` (1-based, ascending) as ranges: ``1-3, 5``.

    >>> page_ranges([1, 2, 3, 5, 7, 8])
    '1-3, 5, 7-8'
    >>> page_ranges(range(1, 40, 2))
    '1, 3, 5, 7, 9, 11, 13, 15, … (20 pages)'
    """
    spans: list[list[int]] = []
    for p in pages:
        if spans and p == spans[-1][1] + 1:
            spans[-1][1] = p
        else:
            spans.append([p, p])
    shown = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans[:MAX_RANGES])
    return shown if len(spans) <= MAX_RANGES else f"{shown}, … ({len(pages)} pages)"


def describe_failed_pages(failed: Sequence[dict[str, Any]]) -> str:
    """The failed pages (``{"page", "reason", "detail"?}``, in page order) grouped by reason and
    detail, first failure first, at most :data:`MAX_GROUPS` groups (the rest counted).

    >>> describe_failed_pages([{"page": 1, "reason": "unreadable-page", "detail": "Failed to load page."},
    ...                        {"page": 2, "reason": "unreadable-page", "detail": "Failed to load page."},
    ...                        {"page": 4, "reason": "ocr-failed"}])
    'pages 1-2: unreadable-page (Failed to load page.); page 4: ocr-failed'
    """
    groups: dict[tuple[str, str], list[int]] = {}
    for f in failed:
        detail = " ".join(str(f.get("detail") or "").split())
        if len(detail) > MAX_DETAIL_CHARS:
            detail = detail[:MAX_DETAIL_CHARS - 1] + "…"
        groups.setdefault((str(f.get("reason")), detail), []).append(int(f.get("page", 0)))
    parts = []
    for (reason, detail), pages in list(groups.items())[:MAX_GROUPS]:
        pages = sorted(set(pages))
        parts.append(f"{'pages' if len(pages) > 1 else 'page'} {page_ranges(pages)}: {reason}"
                     + (f" ({detail})" if detail else ""))
    if len(groups) > MAX_GROUPS:
        rest = sum(len(p) for p in list(groups.values())[MAX_GROUPS:])
        parts.append(f"{rest} more page failure(s) of {len(groups) - MAX_GROUPS} other kind(s)")
    return "; ".join(parts)


def nothing_read(pages: int, blank: int, ocr_pages: int, unmapped_lines: int, attached: int,
                 failed: Sequence[dict[str, Any]], ocr) -> ParseError:
    """Why a PDF gave no unit: ``ocr-unavailable`` (pages need OCR and there is no engine; ``ocr``:
    the parser's OCR settings), ``unreadable-pages`` (some page failed to read: PDFium could not
    load it, OCR failed on it), else ``no-text`` (blank pages, scans OCR found no words on)."""
    if any(f["reason"] == "ocr-unavailable" for f in failed):
        return ParseError("ocr-unavailable", f"{ocr_pages} of {pages} pages have no text layer and no OCR engine "
                                             f"({ocr.tesseract_cmd!r} with {ocr.languages}) is available")
    note = f", {unmapped_lines} lines without Unicode mapping left out" if unmapped_lines else ""
    note += f", {attached} attached files not read" if attached else ""
    note += f"; {describe_failed_pages(failed)}" if failed else ""
    if any(f["reason"] not in NO_WORDS for f in failed):
        return ParseError("unreadable-pages", f"no page could be read: {pages} pages, {blank} blank{note}")
    return ParseError("no-text", f"{pages} pages, {blank} blank{note}")
