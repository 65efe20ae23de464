"""The block structure of WordprocessingML stories: what holds a body's, a row's or a cell's
content (content controls, custom XML, alternate content), a note's or a header's paragraphs, and
how a story's paragraphs join into one unit's lines.

Moved out of :mod:`.parser` (trial 23d) to keep that module under 500 lines.
"""

from __future__ import annotations

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
M = "http://schemas.openxmlformats.org/officeDocument/2006/math"  # OMML: Word's equations
_NS = {"w": W}
# An equation where a paragraph may stand (ECMA-376 §22.1.2.77/78: m:oMathPara, m:oMath in w:body).
BODY_MATH = {f"{{{M}}}oMathPara", f"{{{M}}}oMath"}
# What holds body, row or cell content in place of the element itself: a content control (w:sdt, its
# w:sdtContent: a form's repeating section of rows, a cell-level or in-cell control), custom XML
# markup (w:customXml, ECMA-376 §17.5.1) and alternate content (one branch: ECMA-376 Part 3 §10.2).
WRAPPERS = {f"{{{W}}}sdt", f"{{{W}}}customXml", f"{{{MC}}}AlternateContent"}


def joined_lines(pieces: list[str], refs: list, text: str, text_refs: list) -> None:
    """Add a paragraph's ``text`` (:func:`~.runs.paragraph_text`) as the next line of ``pieces`` and its
    reference marks to ``refs`` at their place in the joined lines; a paragraph without text adds
    its marks at the end of the lines so far."""
    offset = sum(len(x) + 1 for x in pieces)
    if text:
        pieces.append(text)
    else:
        offset = max(offset - 1, 0)
    refs.extend((offset + pos, kind, nid) for pos, kind, nid in text_refs)


def wrapped(el):
    """The element holding a wrapper's content (:data:`WRAPPERS`), or ``None`` when it holds none."""
    if el.tag == f"{{{W}}}sdt":
        return el.find("w:sdtContent", _NS)
    if el.tag == f"{{{MC}}}AlternateContent":
        branch = el.find(f"{{{MC}}}Choice")
        return branch if branch is not None else el.find(f"{{{MC}}}Fallback")
    return el


def children(el, name: str, also: frozenset[str] | set[str] = frozenset()) -> list:
    """``el``'s ``w:<name>`` children (and those whose tag is in ``also``) in order, those inside
    wrappers (:data:`WRAPPERS`) included: a table row in a repeating-section content control, a
    cell in a cell-level one, a paragraph in a content control inside a cell (``findall("w:tr")``
    and the like lost them, with their text)."""
    tags = {f"{{{W}}}{name}"} | set(also)
    found = []
    for child in el.iterchildren():
        if child.tag in tags:
            found.append(child)
        elif child.tag in WRAPPERS:
            content = wrapped(child)
            if content is not None:
                found.extend(children(content, name, also))
    return found


def story_blocks(note) -> list:
    """A note's paragraphs and equations (``m:oMathPara``, ``m:oMath`` where a paragraph may stand:
    they were not read) at any depth (in its tables too), in order; not one inside another, which
    :func:`~.runs.paragraph_text` reads with it (a text box's paragraph was read twice)."""
    tags = (f"{{{W}}}p", *BODY_MATH)
    return [el for el in note.iter(*tags) if next(el.iterancestors(*tags), None) is None]
