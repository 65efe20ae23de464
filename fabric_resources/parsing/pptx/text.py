"""The text of a DrawingML text body, as the PPTX parser reads a shape's, a cell's, a notes
page's or a threaded comment's (moved out of :mod:`.parser` to keep it under 500 lines)."""

from __future__ import annotations

import re

from lxml import etree

from fabric_resources.parsing.ooxml import element_text

_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
_ALTERNATE = f"{{{_MC}}}AlternateContent"
_SPACES = re.compile(r"[ \t\u00a0\u000b]+")
_BRANCH_TEXT = etree.XPath(".//a:t/text() | .//m:t/text()", namespaces={  # in document order
    "a": _A, "m": "http://schemas.openxmlformats.org/officeDocument/2006/math"})


def body_text(body) -> str:
    """The text of a DrawingML text body (``p:txBody``, ``a:txBody``, a threaded comment's
    ``p188:txBody``) as python-pptx's ``TextFrame.text`` gives it (paragraphs joined by ``"\\n"``, a
    line break ``"\\v"``, runs' and fields' text), and the text of one branch of each
    ``mc:AlternateContent`` in a paragraph (ECMA-376 Part 3 §10.2: the ``mc:Choice``, else the
    ``mc:Fallback``): PowerPoint writes an equation typed in a text so, the ``mc:Choice`` holding
    it as OMML (``a14:m``, its text in ``m:t``), the fallback a picture. python-pptx reads only
    ``a:r``, ``a:br`` and ``a:fld``, so "Area is A=πr² here" read "Area is here"."""
    paragraphs = []
    for p in body.iterchildren(f"{{{_A}}}p"):
        pieces = []
        for child in p.iterchildren():
            if child.tag in (f"{{{_A}}}r", f"{{{_A}}}fld"):
                t = child.find(f"{{{_A}}}t")
                pieces.append(element_text(t) if t is not None else "")
            elif child.tag == f"{{{_A}}}br":
                pieces.append("\v")
            elif child.tag == _ALTERNATE:
                branch = child.find(f"{{{_MC}}}Choice")
                branch = branch if branch is not None else child.find(f"{{{_MC}}}Fallback")
                pieces.extend(_BRANCH_TEXT(branch) if branch is not None else ())
        paragraphs.append("".join(pieces))
    return "\n".join(paragraphs)


def clean(text: str) -> str:
    """``text``'s lines with runs of spaces, tabs, no-break spaces and vertical tabs (a line break)
    as one space, ends stripped, empty lines dropped."""
    lines = [_SPACES.sub(" ", line).strip() for line in text.replace("\r", "\n").split("\n")]
    return "\n".join(line for line in lines if line)
