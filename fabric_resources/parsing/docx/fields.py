"""Complex fields (ECMA-376 §17.16.18) that run from one paragraph into the next.

A complex field is ``w:fldChar`` begin, its code (``w:instrText``, and the results of fields
nested in it), ``separate``, its result, ``end``; Word shows the result. Nothing confines a field
to one paragraph: a table of contents' result spans many, and an ``IF`` field's code may hold a
paragraph mark (``{ IF { MERGEFIELD Gender } = "M" "Dear Sir,¶…" }``). :func:`~.runs.paragraph_text`
reads one paragraph, so a field's state at each paragraph's start is settled here over the whole
story (the body, or one note) in document order: the code of a field begun in an earlier paragraph,
its nested fields' results and any text in it, was read as the document's text (trial 22d).

Only a field that ends closes over a paragraph mark: a ``begin`` nothing ends (a damaged or
hostile file) makes its code run to the end of its own paragraph only, as before, so one stray
field character never hides the rest of a document.
"""

from __future__ import annotations

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
_FLD_CHAR = f"{{{W}}}fldChar"
_P = f"{{{W}}}p"
_FALLBACK = f"{{{MC}}}Fallback"
# What paragraph_text does not read (a tracked deletion or move away, a ruby's reading): a field
# character there opens or closes nothing.
_UNREAD = {f"{{{W}}}del", f"{{{W}}}moveFrom", f"{{{W}}}rt", f"{{{W}}}delText", f"{{{W}}}instrText"}


def read_field_chars(el) -> list:
    """The ``w:fldChar`` elements under ``el`` (``el`` included) that :func:`~.runs.paragraph_text`
    reads, in document order: not under a tracked deletion or move away, a ruby's reading, or an
    ``mc:Fallback`` beside an ``mc:Choice`` (the branch read)."""
    if next(el.iter(*_UNREAD, _FALLBACK), None) is None:  # most stories: nothing to look up per character
        return list(el.iter(_FLD_CHAR))
    found = []
    for fld in el.iter(_FLD_CHAR):
        for a in fld.iterancestors():
            if a.tag in _UNREAD or (a.tag == _FALLBACK and a.getparent() is not None
                                    and a.getparent().find(f"{{{MC}}}Choice") is not None):
                break
            if a is el:
                found.append(fld)
                break
        else:
            found.append(fld)
    return found


def open_fields(story) -> dict:
    """For each ``w:p`` of ``story`` (a ``w:body``, a ``w:footnote``) at whose start a field begun
    before it and ended after it is open: that state, ``tuple[bool, ...]``, outermost first, each
    ``True`` while the field is still in its code (before its ``separate``). Paragraphs at whose
    start no such field is open are absent (most documents: an empty dict, at the cost of one
    search for ``w:fldChar``)."""
    chars = read_field_chars(story)
    if not chars:
        return {}
    ended: set[int] = set()  # id() of each begin an end closes (the chars list keeps them alive)
    stack: list = []
    for fld in chars:
        kind = fld.get(f"{{{W}}}fldCharType")
        if kind == "begin":
            stack.append(fld)
        elif kind == "end" and stack:
            ended.add(id(stack.pop()))
    read = {id(fld) for fld in chars}
    states: dict = {}
    fields: list[list] = []  # [ended, in code] per open field, as paragraph_text keeps them
    for el in story.iter(_P, _FLD_CHAR):
        if el.tag == _P:
            shown = tuple(code for closed, code in fields if closed)
            if shown:
                states[el] = shown
            continue
        if id(el) not in read:
            continue
        kind = el.get(f"{{{W}}}fldCharType")
        if kind == "begin":
            fields.append([id(el) in ended, True])
        elif kind == "separate" and fields:
            fields[-1][1] = False
        elif kind == "end" and fields:
            fields.pop()
    return states
