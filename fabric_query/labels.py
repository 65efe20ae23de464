"""The short label of a citation's locations (``p. 7``, ``pp. 7–8``, ``slide 2 > notes``).

Pure functions over plain mappings (a :class:`~fabric_query.locations.CitedLocation` dumped, or
the same object as JSON from ``fabric serve``), importing nothing but the standard library, so
``fabric search`` through a running server prints the label without loading pydantic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: U+2013 EN DASH between the ends of a page range (the Chicago Manual of Style's page ranges).
RANGE_DASH = "\u2013"


def page_label(pages: Iterable[int]) -> str:
    """``p. 7`` for one page, ``pp. 7–8`` for a span (first–last), ``""`` for none.

    >>> page_label([8, 7]), page_label([3]), page_label([])
    ('pp. 7–8', 'p. 3', '')
    """
    ps = sorted(set(pages))
    if not ps:
        return ""
    return f"p. {ps[0]}" if len(ps) == 1 else f"pp. {ps[0]}{RANGE_DASH}{ps[-1]}"


def label_of_locations(locations: Sequence[Mapping[str, Any]]) -> str:
    """The label of locations given as mappings with keys ``pages``, ``path``, ``element_path``, ``lines``.

    Pages when any location has them (the span of all of them); else the first location's
    structural path joined by `` > `` (slide, shape or notes; headings and table cell or note), or
    its element path; else its lines. ``""`` when nothing is known.

    >>> label_of_locations([{"pages": [7]}, {"pages": [8]}])
    'pp. 7–8'
    >>> label_of_locations([{"pages": [], "path": ["slide 2", "notes"]}])
    'slide 2 > notes'
    >>> label_of_locations([{"lines": [3, 5]}]), label_of_locations([])
    ('lines 3–5', '')
    """
    pages = page_label(p for loc in locations for p in (loc.get("pages") or ()))
    if pages or not locations:
        return pages
    first = locations[0]
    if first.get("path"):
        return " > ".join(first["path"])
    if first.get("element_path"):
        return first["element_path"]
    if first.get("lines"):
        a, b = first["lines"]
        return f"line {a}" if a == b else f"lines {a}{RANGE_DASH}{b}"
    return ""
