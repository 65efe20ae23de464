"""The header and footer parts a DOCX shows, and the sections that show them (ECMA-376 §17.10).

Each section (a ``w:sectPr``: one ends at each paragraph holding one, the last is the body's own)
names its headers and footers by relationship (``w:headerReference``, ``w:footerReference``), one
per type: ``default``, ``first`` (shown only where the section sets ``w:titlePg``) and ``even``
(shown only where the settings set ``w:evenAndOddHeaders``). A type a section does not name is the
previous section's (§17.10.5). A part no shown type of any section names is no text Word shows;
a part several sections or types name is one part, read once.
"""

from __future__ import annotations

from dataclasses import dataclass

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_REFERENCES = {f"{{{W}}}headerReference": "header", f"{{{W}}}footerReference": "footer"}
#: The root element of a header part and of a footer part (ECMA-376 §17.10.4 w:hdr, §17.10.3 w:ftr).
STORY_ROOTS = {"header": f"{{{W}}}hdr", "footer": f"{{{W}}}ftr"}
# In page order: a section's first page, then its even and odd (default) pages.
_TYPES = ("first", "even", "default")


@dataclass(frozen=True)
class ShownStory:
    """A header or footer part shown by a section: ``kind`` ``"header"`` or ``"footer"``;
    ``rel_id``: the main part's relationship naming it; ``types``: each type (``first``,
    ``even``, ``default``) any section shows it as, in the order first seen; ``sections``: the
    sections (1-based, ascending) that show it."""

    kind: str
    rel_id: str
    types: tuple[str, ...]
    sections: tuple[int, ...] = ()


def _on(el) -> bool:
    """An ``ST_OnOff`` element (ECMA-376 §17.17.4): absent off, present on unless its ``w:val`` says off."""
    return el is not None and el.get(f"{{{W}}}val", "true").strip().lower() not in ("0", "false", "off")


def section_properties(body) -> list:
    """The ``w:sectPr`` of each section of ``body``, in document order (a tracked change's former
    properties, ``w:sectPrChange``, are none)."""
    return [s for s in body.iter(f"{{{W}}}sectPr")
            if next(s.iterancestors(f"{{{W}}}sectPrChange"), None) is None]


def shown_stories(sections: list, even_and_odd: bool) -> list[ShownStory]:
    """The header and footer parts ``sections`` (:func:`section_properties`) show, each once, in
    order of first showing (by section, headers before footers, types in page order).

    ``even_and_odd``: the settings' ``w:evenAndOddHeaders``."""
    effective: dict[tuple[str, str], str] = {}  # (kind, type) -> relationship id, carried to later sections
    found: dict[str, tuple[str, list[str], list[int]]] = {}
    for number, sect in enumerate(sections, 1):
        for ref in sect.iterchildren(*_REFERENCES):
            rel_id = ref.get(f"{{{_R}}}id")
            if rel_id:
                effective[(_REFERENCES[ref.tag], ref.get(f"{{{W}}}type") or "default")] = rel_id
        shown = [t for t in _TYPES if t == "default" or (t == "first" and _on(sect.find(f"{{{W}}}titlePg")))
                 or (t == "even" and even_and_odd)]
        for kind in ("header", "footer"):
            for t in shown:
                rel_id = effective.get((kind, t))
                if rel_id is None:
                    continue
                entry = found.setdefault(rel_id, (kind, [], []))  # one part named twice: read once
                if t not in entry[1]:
                    entry[1].append(t)
                if not entry[2] or entry[2][-1] != number:  # sections come in order: no scan of the list
                    entry[2].append(number)
    return [ShownStory(kind, rel_id, tuple(types), tuple(numbers)) for rel_id, (kind, types, numbers) in found.items()]


def shown_where(types, sections, section_count: int, even_and_odd: bool) -> dict:
    """Where a header or footer shows, for its locator: ``sections`` (1-based) when the document
    has more than one (a multi-section document may show another header in each), ``page_types``
    when it stands on some pages of them only (``first``, ``even``, ``odd``: the default type
    where even pages have their own); ``{}`` for one on every page of a one-section document.

    >>> shown_where(("default",), (2,), 3, False)
    {'sections': [2]}
    >>> shown_where(("first", "default"), (1,), 1, True)
    {'page_types': ['first', 'odd']}
    >>> shown_where(("first", "default"), (1,), 1, False)
    {}
    """
    where: dict = {}
    if section_count > 1:
        where["sections"] = sorted(set(sections))
    if even_and_odd or "default" not in types:
        where["page_types"] = ["odd" if t == "default" else t for t in types]
    return where



def even_and_odd_pages(document) -> bool:
    """Whether python-docx ``document``'s settings show even pages their own headers and footers
    (``w:evenAndOddHeaders``); not when its settings part cannot be read."""
    try:
        return bool(document.settings.odd_and_even_pages_header_footer)
    except (KeyError, ValueError, AttributeError, TypeError):
        return False


def unshown_parts(rels, stories: list[ShownStory]) -> list[str]:
    """The names of the header and footer parts the main part's relationships ``rels`` (python-docx's)
    name but none of ``stories`` shows (a first-page header of a section without ``w:titlePg``),
    sorted: no text Word shows, so not read."""
    shown = {story.rel_id for story in stories}
    names = []
    for rel_id, rel in rels.items():
        if rel.reltype.rsplit("/", 1)[-1] in ("header", "footer") and not rel.is_external and rel_id not in shown:
            try:
                names.append(str(rel.target_part.partname).lstrip("/"))
            except (KeyError, AttributeError):  # a part the package lacks: listed missing-part when opened
                continue
    return sorted(names)
