"""Where a cited unit sits in its source: pages of a PDF, slide and shape of a deck, heading path,
table cell or note of a DOCX, element path of a web page, lines of a text file.

Pure functions from a unit row (``kind``, ``locator`` JSON, ``section_path``, ``attributes``
JSON, as :data:`fabric_resources.schema.UNITS` stores them) to a
:class:`CitedLocation`, and from a citation's locations to the short label
the CLI prints (``p. 7``, ``pp. 7–8``, ``slide 2 > notes``). The same function runs at search time
(on the stored units) and in ``resolve`` (on the units re-derived from the current bytes), so a
location that no longer matches the bytes is caught like changed text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Strict

# The label itself is computed in the pydantic-free labels module: ``fabric search`` through a
# running server prints labels without pydantic.
from fabric_query.labels import label_of_locations


class CitedLocation(BaseModel):
    """Where one cited unit sits in its source (:func:`fabric_query.locations.location_of`).

    ``pages``: sorted distinct 1-based PDF pages the unit covers (two for a sentence carried over
    a page break); ``path``: structural path, outermost first (PDF outline headings; DOCX heading
    path then ``table t, row r, col c`` (1-based) or ``footnote n``; PPTX ``slide n`` then the
    shape's name or ``notes``); ``element_path``: the XPath of the unit's element (DOCX, HTML,
    EPUB); ``lines``: first and last 1-based line of a text unit.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Strict: a citation read back from JSON must not turn ``true`` or ``"7"`` into a page or line,
    # nor bytes into text.
    unit_id: Annotated[str, Strict()]
    kind: Annotated[str, Strict()]
    pages: tuple[Annotated[int, Strict()], ...] = ()
    path: tuple[Annotated[str, Strict()], ...] = ()
    element_path: Annotated[str, Strict()] | None = None
    lines: tuple[Annotated[int, Strict()], Annotated[int, Strict()]] | None = None


def location_of(unit_id: str, kind: str, locator: str | dict, section_path: Sequence[str] = (),
                attributes: str | dict | None = None) -> CitedLocation:
    """The location of one unit.

    Parameters
    ----------
    unit_id, kind
        As stored.
    locator, attributes
        The unit's locator and attributes, as JSON text or already decoded. PDF locators give
        ``page`` (1-based), ``page_end`` and ``regions`` (a unit carried across a page break);
        PPTX ``slide``, ``hidden`` (a slide the show skips: shown as ``"slide 2 (hidden)"``),
        ``shape_name``, ``notes``, ``row``/``col``; DOCX ``element_path`` or
        ``note_type``/``note_id``; HTML and EPUB ``element_path``; text ``line_start``/``line_end``.
    section_path
        The unit's heading path (outline, headings, slide title).

    Returns
    -------
    CitedLocation
        ``pages``: sorted distinct 1-based pages the unit covers (``()`` outside PDFs);
        ``path``: the structural path, outermost first; ``element_path``: the XPath of the
        unit's element when the format has one. Malformed JSON gives a location with ``kind``
        only (the text check still decides whether the citation holds).

    >>> location_of("u", "paragraph", '{"page": 7, "page_end": 8, "bbox": [0, 0, 1, 1]}', ("Intro",)).pages
    (7, 8)
    >>> location_of("u", "speaker_note", {"slide": 2, "notes": True}, ("Results",)).path
    ('slide 2', 'notes')
    >>> location_of("u", "paragraph", {"slide": 3, "hidden": True, "shape_name": "Box"}).path
    ('slide 3 (hidden)', 'Box')
    """
    loc = _decoded(locator)
    attrs = _decoded(attributes)
    pages = sorted({p for p in _pages(loc) if isinstance(p, int) and not isinstance(p, bool) and p >= 1})
    if pages and "page_end" in loc and isinstance(loc["page_end"], int):
        pages = sorted(set(pages) | set(range(pages[0], max(pages[-1], loc["page_end"]) + 1)))
    path: list[str] = []
    element_path = loc.get("element_path") if isinstance(loc.get("element_path"), str) else None
    if isinstance(loc.get("slide"), int):
        path.append(f"slide {loc['slide']}" + (" (hidden)" if loc.get("hidden") is True else ""))
        if loc.get("notes"):
            path.append("notes")
        elif isinstance(loc.get("shape_name"), str):
            path.append(loc["shape_name"])
    else:
        path.extend(str(s) for s in section_path)
    # A cell's or a note's place, also where another unit stands in it (a DOCX chart or SmartArt
    # graphic, a paragraph read from its own part: its locator names the cell or the note it stands
    # in, as the cell's or note's own unit does; it was labelled as if in the body, trial 23d).
    cell = {k: (loc.get(k) if k in loc or kind != "table_cell" else attrs.get(k)) for k in ("table", "row", "col")}
    # A DOCX comment marking a cell, a header or a note stands beside it: its place first.
    marked = loc.get("marked_in") if isinstance(loc.get("marked_in"), dict) else {}
    for place in (marked, {**loc, **cell}):
        path.extend(_place(place))
    lines = (loc.get("line_start"), loc.get("line_end", loc.get("line_start")))
    return CitedLocation(
        unit_id=unit_id, kind=kind, pages=tuple(pages), path=tuple(path), element_path=element_path,
        lines=lines if all(isinstance(v, int) for v in lines) else None,  # type: ignore[arg-type]
    )


def _place(loc: dict) -> list[str]:
    """The cell (``table 1, row 2, col 2``) and the note (``footnote 1``) ``loc`` names; a DOCX
    header's or footer's with where it shows (``header 2 (section 2)``, ``footer 1 (first page)``),
    a PPTX layout's or master's with the slides that show it (``master 1 (slides 1-3)``).

    >>> _place({"note_type": "header", "note_id": "2", "sections": [2, 3, 4, 6], "page_types": ["first"]})
    ['header 2 (sections 2-4, 6, first page)']
    """
    out = []
    if all(isinstance(loc.get(k), int) for k in ("table", "row", "col")):
        # Stored 0-based (python-docx / python-pptx indices); shown 1-based as a reader counts.
        out.append(f"table {loc['table'] + 1}, row {loc['row'] + 1}, col {loc['col'] + 1}")
    if loc.get("note_type") is not None:
        sections = [n for n in loc.get("sections") or () if isinstance(n, int) and not isinstance(n, bool)]
        types = [_PAGE_TYPES[t] for t in loc.get("page_types") or () if t in _PAGE_TYPES]
        slides = [n for n in loc.get("slides") or () if isinstance(n, int) and not isinstance(n, bool)]
        where = ([f"section{'s' if len(sections) > 1 else ''} {_ranges(sections)}"] if sections else []) + types
        where += [f"slide{'s' if len(slides) > 1 else ''} {_ranges(slides)}"] if slides else []
        out.append(f"{loc['note_type']} {loc.get('note_id')}" + (f" ({', '.join(where)})" if where else ""))
    return out


#: How a header's or footer's page types read in its label (ECMA-376 §17.10: Word's first page,
#: even page and, where even pages have their own, odd page headers).
_PAGE_TYPES = {"first": "first page", "even": "even pages", "odd": "odd pages"}


def _ranges(numbers: list[int]) -> str:
    """``[2, 3, 4, 6]`` as ``2-4, 6``."""
    runs: list[list[int]] = []
    for n in sorted(set(numbers)):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _decoded(value: Any) -> dict:
    if isinstance(value, dict):
        return value
    if not isinstance(value, str) or not value:
        return {}
    try:
        out = json.loads(value)
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def _pages(loc: dict) -> Iterable[Any]:
    yield loc.get("page")
    regions = loc.get("regions")
    if isinstance(regions, list):
        for r in regions:
            if isinstance(r, dict):
                yield r.get("page")


def location_label(locations: Sequence[CitedLocation]) -> str:
    """The short label of a citation's locations (what ``fabric search`` prints after the file).

    Pages when any location has them (the span of all of them); else every location's lines,
    merged; else the structural path all of them share joined by `` > `` (slide, shape or notes;
    table cell or note), or the first one's element path (:func:`fabric_query.labels.label_of_locations`).
    ``""`` when nothing is known.

    >>> location_label([CitedLocation(unit_id="a", kind="paragraph", pages=(7,)),
    ...                 CitedLocation(unit_id="b", kind="paragraph", pages=(8,))])
    'pp. 7–8'
    """
    return label_of_locations([loc.model_dump() for loc in locations])
