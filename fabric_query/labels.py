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

    Pages when any location has them (the span of all of them); else the lines of every location
    that has them, merged (Markdown and plain text: the heading path is the hit's section, printed
    beside it; a single table cell or note adds its place from its path); else the structural path
    every location shares joined by `` > `` (slide, shape or notes; table cell or note;
    :func:`path_label`; a leading top-level heading, which has none, left out), or the element
    paths (:func:`element_path_label`). ``""`` when nothing is known.

    >>> label_of_locations([{"pages": [7]}, {"pages": [8]}])
    'pp. 7–8'
    >>> label_of_locations([{"pages": [], "path": ["slide 2", "notes"]}])
    'slide 2 > notes'
    >>> label_of_locations([{"lines": [3, 5]}]), label_of_locations([])
    ('lines 3–5', '')
    >>> label_of_locations([{"path": ["Notes"], "lines": [1, 2]}, {"path": ["Notes", "Tide"], "lines": [4, 4]}])
    'lines 1–2, 4'
    >>> label_of_locations([{"kind": "table_cell", "path": ["Tides", "table 1, row 1, col 2"], "lines": [14, 14]}])
    'line 14 (table 1, row 1, col 2)'
    >>> label_of_locations([{"element_path": "/w:document/w:body/w:p[33]"}, {"path": ["header 1"]}, {"path": ["footer 1"]}])
    '/w:document/w:body/w:p[33], header 1, footer 1'
    """
    pages = page_label(p for loc in locations for p in (loc.get("pages") or ()))
    if pages or not locations:
        return pages
    first = locations[0]
    lines = lines_label([tuple(loc["lines"]) for loc in locations if loc.get("lines")])
    if lines:
        # What the section path cannot say: which cell of a table, which note (one cited unit only:
        # the lines of several cells already say where they sit, and one cell's name would not).
        one = len(locations) == 1 and first.get("kind") in ("table_cell", "note") and first.get("path")
        cell = first["path"][-1] if one else ""
        return f"{lines} ({cell})" if cell else lines
    # A top-level heading has no section path (it is the section the rest sit in): when it leads
    # and every other location has a path, those paths say where the hit is; its element path
    # alone would name the heading and none of what follows it (hostile trial 14c).
    pathed = locations[1:] if first.get("kind") == "heading" and not first.get("path") else locations
    if pathed and all(loc.get("path") for loc in pathed):
        return path_label([loc["path"] for loc in pathed])
    if first.get("path"):
        return path_label([loc.get("path") or () for loc in locations])
    if first.get("element_path"):
        label = element_path_label([loc["element_path"] for loc in locations if loc.get("element_path")])
        # A unit of a part of its own beside them (a DOCX header, footer or note: a path, no element
        # path) is named too; the label named the body's paragraph alone (trial 23d).
        apart = [loc["path"] for loc in locations if not loc.get("element_path") and loc.get("path")]
        return f"{label}, {path_label(apart)}" if apart else label
    return ""


def element_path_label(paths: Sequence[str]) -> str:
    """What element paths say together: one path as it is; siblings as their parent's path and each
    last step (``/w:document/w:body/w:p[19], w:p[23]``, as ``lines 7, 9`` names every cited line);
    elements under different parents as the path they share and how many (``/html/body/div[2]
    (3 elements)``). A chunk of several paragraphs was labelled by the first one's path alone, naming
    an element that did not hold the rest of the cited text (hostile trial 14c).

    >>> element_path_label(["/html/body/p[3]"]), element_path_label(["/b/p[19]", "/b/p[23]", "/b/p[19]"])
    ('/html/body/p[3]', '/b/p[19], p[23]')
    >>> element_path_label(["/html/body/div[2]/p[1]", "/html/body/div[2]/ul/li[1]", "/html/body/div[2]/ul/li[2]"])
    '/html/body/div[2] (3 elements)'
    """
    distinct = list(dict.fromkeys(paths))
    if len(distinct) <= 1:
        return distinct[0] if distinct else ""
    split = [p.rsplit("/", 1) for p in distinct]
    if all(len(s) == 2 and s[0] == split[0][0] for s in split):
        return f"{distinct[0]}, " + ", ".join(s[1] for s in split[1:])
    common: list[str] = []
    for steps in zip(*(p.split("/") for p in distinct)):
        if any(step != steps[0] for step in steps):
            break
        common.append(steps[0])
    return f"{'/'.join(common) or '/'} ({len(distinct)} elements)"


def path_label(paths: Sequence[Sequence[str]]) -> str:
    """What every one of ``paths`` says: their common prefix joined by `` > ``; when they share
    none, the distinct first steps in order (``slide 2, slide 3``). A chunk of several shapes or
    slides was labelled by its first unit's path alone, naming a shape or slide that did not hold
    the rest of the cited text (hostile trial 13c).

    >>> path_label([["slide 2", "Title 1"]]), path_label([["slide 2", "Box"], ["slide 2", "notes"]])
    ('slide 2 > Title 1', 'slide 2')
    >>> path_label([["slide 1", "Box"], ["slide 2", "notes"], ["slide 2", "Box"]])
    'slide 1, slide 2'
    """
    common: list[str] = []
    for steps in zip(*paths):
        if any(step != steps[0] for step in steps):
            break
        common.append(steps[0])
    if common:
        return " > ".join(common)
    return ", ".join(dict.fromkeys(str(path[0]) for path in paths if path))


def lines_label(ranges: Sequence[tuple[int, int]]) -> str:
    """``lines 1–2, 4`` for line ranges (first and last line, inclusive): sorted, overlapping or
    adjacent ranges merged, so every line named is cited and no cited line is left out; ``line 4``
    for one line, ``""`` for none.

    >>> lines_label([(4, 4), (1, 2), (2, 3)]), lines_label([(9, 9)]), lines_label([])
    ('lines 1–4', 'line 9', '')
    """
    merged: list[list[int]] = []
    for a, b in sorted((min(r), max(r)) for r in ranges):
        if merged and a <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    if not merged:
        return ""
    parts = [str(a) if a == b else f"{a}{RANGE_DASH}{b}" for a, b in merged]
    return f"line {parts[0]}" if len(parts) == 1 and merged[0][0] == merged[0][1] else f"lines {', '.join(parts)}"
