"""A ``w:p``'s text as Word shows it: runs, tabs, breaks, symbols (``w:sym``), note reference marks
and an equation's text (OMML ``m:t``), without deleted text, field codes or hidden runs.

Moved out of :mod:`.parser` (trial 19b) to keep that module under 500 lines.
"""

from __future__ import annotations

import re
import unicodedata

from fabric_resources.parsing.docx.fields import read_field_chars
from fabric_resources.parsing.docx.styles import NOTHING_HIDES, Hiding, vanish
from fabric_resources.parsing.ooxml import element_text

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
M = "http://schemas.openxmlformats.org/officeDocument/2006/math"  # OMML: Word's equations
# VML WordArt's text (v:textpath, its words in the string attribute): what a watermark ("CONFIDENTIAL",
# "DRAFT" across each page, a shape in the header) shows.
_TEXTPATH = "{urn:schemas-microsoft-com:vml}textpath"
# Tracked changes read as accepted: deleted text and text moved away (w:moveFrom, ECMA-376 §17.13.5.22: its
# runs hold w:t, and the same text is at its w:moveTo) are not the document's text; nor is a ruby's
# reading (w:rt, §17.3.3.25: the phonetic guide above w:rubyBase), as in the EPUB and HTML parsers.
_SKIP_IN_TEXT = {f"{{{W}}}delText", f"{{{W}}}instrText", f"{{{W}}}del", f"{{{W}}}moveFrom", f"{{{W}}}rt"}
# What a run shows (text, tabs, breaks, hyphens, symbols, note references, an equation's text): none of
# it is shown in a field's code.
_SHOWN = {f"{{{W}}}{name}" for name in ("t", "tab", "ptab", "br", "cr", "noBreakHyphen", "sym", "footnoteReference",
                                         "endnoteReference", "commentReference")} | {f"{{{M}}}t", _TEXTPATH}
_REFERENCES = {f"{{{W}}}footnoteReference": "footnote", f"{{{W}}}endnoteReference": "endnote",
               f"{{{W}}}commentReference": "comment"}
_SPACES = re.compile(r"[ \t\u00a0]+")


def symbol_char(sym) -> str | None:
    """The character a ``w:sym`` shows (ECMA-376 §17.3.3.30: ``w:char``, a hex code in ``w:font``), or
    ``None`` when it has none to read.

    A code in U+F000-U+F0FF is a symbol font's own code (Word writes Symbol's alpha as F061,
    Wingdings' arrows as F0E0): no library here maps a symbol font to Unicode (Wingdings has no
    mapping at all), and the private-use character itself is no text, so it is not read (the
    parse counts it, ``unmapped_symbols``); nor is a code that is no hex, a surrogate, a control
    or an unassigned character.

    >>> from lxml import etree
    >>> [symbol_char(etree.fromstring(f'<sym xmlns="{W}" xmlns:w="{W}" w:char="{c}"/>'))
    ...  for c in ("00B0", "2192", "F061", "zz", "D800", "0007")]
    ['°', '→', None, None, None, None]
    """
    try:
        code = int((sym.get(f"{{{W}}}char") or "").strip(), 16)
        char = chr(code)
    except (ValueError, OverflowError):
        return None
    if 0xF000 <= code <= 0xF0FF or unicodedata.category(char) in ("Cc", "Cs", "Co", "Cn"):
        return None
    return char


def _hidden_run(r, hiding: Hiding, paragraph_hidden: bool) -> bool:
    """A run Word neither shows nor prints: its own ``w:vanish`` decides; else its character
    style's (``w:rStyle``), else its paragraph's (``paragraph_hidden``: its style's, else the
    document defaults'). Its text would be cited where no reader sees it."""
    rpr = r.find(f"{{{W}}}rPr")
    own = vanish(rpr)
    if own is not None:
        return own
    rstyle = rpr.find(f"{{{W}}}rStyle") if rpr is not None else None
    said = hiding.says.get(rstyle.get(f"{{{W}}}val")) if rstyle is not None else None
    return paragraph_hidden if said is None else said


def hidden_run(r, p, hidden: Hiding = NOTHING_HIDES) -> bool:
    """Whether run ``r`` of paragraph ``p`` is hidden (``w:vanish``: its own, its character
    style's, else its paragraph's style's or the document defaults'), as :func:`paragraph_text`
    decides it."""
    return _hidden_run(r, hidden, _paragraph_hidden(p, hidden))


def _paragraph_hidden(p, hidden: Hiding) -> bool:
    pstyle = p.find(f"{{{W}}}pPr/{{{W}}}pStyle")
    said = hidden.says.get(pstyle.get(f"{{{W}}}val") if pstyle is not None else hidden.default_paragraph)
    return hidden.default if said is None else said


def paragraph_text(p, hidden: Hiding = NOTHING_HIDES,
                   open_fields: tuple[bool, ...] = ()) -> tuple[str, list[tuple[int, str, str]]]:
    """A ``w:p``'s text and its note references ``(position, note type, note id)`` (note type
    ``footnote``, ``endnote`` or ``comment``), without runs
    formatted hidden (``hidden``: what the styles hide, :func:`hidden_styles`) or a field's code
    (``open_fields``: the fields open at its start, :func:`~.fields.open_fields`).

    Positions are Unicode scalar offsets into the returned (cleaned) text; a paragraph with no
    text returns its marks all the same (at 0).
    """
    pieces: list[str] = []
    refs: list[tuple[int, str, str]] = []
    paragraph_hidden = _paragraph_hidden(p, hidden)

    # A complex field (ECMA-376 §17.16.18): w:fldChar begin, its code, separate, its result, end. Word
    # shows the result; the code holds w:instrText, and the result of a field nested in the code (the
    # MERGEFIELD of { IF { MERGEFIELD Gender } = "M" "Mr." "Ms." }) as w:t, which is no shown text.
    fields: list[bool] = list(open_fields)  # per open field: still in its code

    def field_char(fld) -> None:
        kind = fld.get(f"{{{W}}}fldCharType")
        if kind == "begin":
            fields.append(True)
        elif kind == "separate" and fields:
            fields[-1] = False
        elif kind == "end" and fields:
            fields.pop()

    def walk(el) -> None:
        for child in el:
            tag = child.tag
            if not isinstance(tag, str) or tag in _SKIP_IN_TEXT:
                continue
            if tag == f"{{{W}}}fldChar":
                field_char(child)
            elif True in fields and tag in _SHOWN:
                continue
            elif tag in (f"{{{W}}}t", f"{{{M}}}t"):  # m:t: an equation's text, read in its order
                pieces.append(element_text(child))  # a comment inside it cuts none of it
            elif tag == _TEXTPATH:  # a shape's words of their own, apart from the text beside them
                pieces.append(f" {child.get('string') or ''} ")
            elif tag == f"{{{W}}}sym":
                pieces.append(symbol_char(child) or "")
            elif tag == f"{{{M}}}oMathPara":  # a display equation's equations, one per line as Word shows them
                for number, equation in enumerate(child.iterchildren(f"{{{M}}}oMath")):
                    pieces.append("\n" if number else "")
                    walk(equation)
            elif tag in (f"{{{W}}}tab", f"{{{W}}}ptab"):
                # ptab: an absolute position tab (ECMA-376 §17.3.3.23), what a header's left / centre /
                # right text is set apart by; read as nothing, "Contoso Ltd" + "Page 2" were one word.
                pieces.append("\t")
            elif tag in (f"{{{W}}}br", f"{{{W}}}cr"):
                pieces.append("\n")
            elif tag == f"{{{W}}}noBreakHyphen":  # ECMA-376 §17.3.3.18: a hyphen Word shows ("COVID‑19")
                pieces.append("\u2011")
            elif tag in _REFERENCES:  # a footnote's, an endnote's or a review comment's mark (ECMA-376 §17.13.4.5)
                pieces.append("\x00")  # placeholder: its position survives the cleanup below
                refs.append((-1, _REFERENCES[tag], child.get(f"{{{W}}}id", "")))
            elif tag == f"{{{W}}}p" and el is not p:
                pieces.append("\n")
                walk(child)
            elif tag in (f"{{{W}}}r", f"{{{M}}}r") and _hidden_run(child, hidden, paragraph_hidden):
                for fld in read_field_chars(child):  # a hidden field character still opens or closes
                    field_char(fld)
            elif tag == f"{{{MC}}}AlternateContent":
                # One branch is the content (ECMA-376 Part 3 §10.2): Word writes each text box twice,
                # as a DrawingML shape and its VML fallback, so reading both doubled its text.
                branch = child.find(f"{{{MC}}}Choice")
                branch = branch if branch is not None else child.find(f"{{{MC}}}Fallback")
                if branch is not None:
                    walk(branch)
            else:
                walk(child)

    walk(p)
    raw = "".join(pieces)
    # A line of nothing but marks (a comment's mark alone after a break) is no line, but its marks
    # stay: at the end of the line before, else the start of the next (they were dropped with the
    # line, so each later mark took an earlier one's place and the last note lost its reference).
    kept: list[str] = []
    marks = ""
    for line in (_SPACES.sub(" ", line).strip(" ") for line in raw.split("\n")):
        if not line.replace("\x00", "").strip():
            marks += "\x00" * line.count("\x00")
        elif kept:
            kept[-1] += marks
            kept.append(line)
            marks = ""
        else:
            kept.append(marks + line)
            marks = ""
    text = "\n".join(kept) + marks
    positions = []
    out = []
    for ch in text:
        if ch == "\x00":
            positions.append(len(out))
        else:
            out.append(ch)
    joined = "".join(out)
    cleaned = joined.strip()
    lead = len(joined) - len(joined.lstrip())
    # A paragraph with no text but a mark (a comment on an empty paragraph) has no text and its marks
    # (at 0): the caller reads the note all the same.
    return cleaned, [(min(max(pos - lead, 0), len(cleaned)), kind, nid) for pos, (_, kind, nid) in zip(positions, refs)]
