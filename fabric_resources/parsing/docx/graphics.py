"""The words of the SmartArt graphics and charts a DOCX paragraph holds, read from their own parts.

A SmartArt graphic (ECMA-376 Part 1 §21.4) or a chart (§21.2) stands in a paragraph as a
``w:drawing`` naming a part by relationship: none of its text is in the paragraph, so an org
chart's names or a process diagram's steps were lost in silence (hostile trial 21e). The PPTX
parser reads the same parts (``pptx.parser._diagram_text``, ``_chart_text``).
"""

from __future__ import annotations

from lxml import etree

from fabric_resources.parsing.docx.runs import hidden_run
from fabric_resources.parsing.docx.styles import NOTHING_HIDES, Hiding
from fabric_resources.parsing.ooxml import element_text

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
DGM = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
CHART = "http://schemas.openxmlformats.org/drawingml/2006/chart"
_NS = {"a": "http://schemas.openxmlformats.org/drawingml/2006/main", "c": CHART, "dgm": DGM,
       "r": "http://schemas.openxmlformats.org/officeDocument/2006/relationships"}
_GRAPHICS = etree.XPath(f".//a:graphicData[@uri='{DGM}']/dgm:relIds/@r:dm"
                        f" | .//a:graphicData[@uri='{CHART}']/c:chart/@r:id", namespaces=_NS)
_POINTS = etree.XPath("./dgm:ptLst/dgm:pt[not(@type) or @type='node' or @type='asst']/dgm:t/a:p", namespaces=_NS)
_CHART_TEXTS = etree.XPath("./c:chart/c:title/c:tx | ./c:chart/c:plotArea/*/c:title/c:tx"
                           " | ./c:chart/c:plotArea/*/c:ser/c:tx", namespaces=_NS)
_RICH = etree.XPath("./c:rich/a:p", namespaces=_NS)
# The c:v elements, not their text() nodes: a comment inside one splits it into two nodes, read as two lines.
_CACHED = etree.XPath("./c:strRef/c:strCache/c:pt/c:v | ./c:v", namespaces=_NS)
_RUNS = etree.XPath("./a:r/a:t/text() | ./a:fld/a:t/text()", namespaces=_NS)
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)


def graphic_parts(p, document_part, hiding: Hiding = NOTHING_HIDES) -> list[tuple[object, str]]:
    """The parts of the SmartArt graphics and charts shown in paragraph ``p``, in order, each with
    its kind (``"diagram"``, ``"chart"``): python-docx parts. One under a tracked deletion or move,
    in an ``mc:Fallback`` beside an ``mc:Choice`` (the branch read), or in a run formatted hidden
    (``hiding``: what the styles hide) is not shown; an external or missing target has nothing to
    read."""
    parts = []
    for rid in _GRAPHICS(p):
        holder = rid.getparent()
        run = next(holder.iterancestors(f"{{{W}}}r"), None)
        if _unshown(holder) or (run is not None and hidden_run(run, p, hiding)):
            continue
        rel = document_part.rels.get(str(rid))
        if rel is None or rel.is_external:
            continue
        parts.append((rel.target_part, "diagram" if holder.tag == f"{{{DGM}}}relIds" else "chart"))
    return parts


def _unshown(el) -> bool:
    for a in el.iterancestors():
        if a.tag in (f"{{{W}}}del", f"{{{W}}}moveFrom"):
            return True
        if a.tag == f"{{{MC}}}Fallback" and a.getparent() is not None \
                and a.getparent().find(f"{{{MC}}}Choice") is not None:
            return True
    return False


def graphic_text(blob: bytes, kind: str) -> str:
    """The words of a SmartArt data part (``dgm:dataModel``: its content points, ``node`` and
    ``asst``, in order) or a chart part (its title, axis titles and series names, rich text or a
    cell's cached value, repeats once), one per line; ``kind`` is ``"diagram"`` or ``"chart"``.

    Raises ``lxml.etree.XMLSyntaxError`` on a malformed part."""
    root = etree.fromstring(blob, _PARSER)
    if kind == "diagram":
        texts = ["".join(_RUNS(p)) for p in _POINTS(root)]
    else:
        texts = []
        for tx in _CHART_TEXTS(root):
            rich = _RICH(tx)
            texts.extend(["".join(_RUNS(p)) for p in rich] if rich else [element_text(v) for v in _CACHED(tx)])
    return "\n".join(dict.fromkeys(" ".join(t.split()) for t in texts if t.strip()))
