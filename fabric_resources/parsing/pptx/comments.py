"""A slide's review comments: PowerPoint's comments (ECMA-376 Part 1 §19.4: ``p:cmLst`` in a
comments part, each ``p:cm`` holding plain ``p:text``) and its threaded ("modern") comments
([MS-PPTX] §2.3.24: ``p188:cmLst``, each ``p188:cm`` and each of its ``p188:reply`` holding a
DrawingML ``p188:txBody``). python-pptx reads neither, so a reviewer's words were in no search.
"""

from __future__ import annotations

from lxml import etree

from fabric_resources.parsing.ooxml import element_text
from fabric_resources.parsing.pptx.text import body_text, clean

P = "http://schemas.openxmlformats.org/presentationml/2006/main"
P188 = "http://schemas.microsoft.com/office/powerpoint/2018/8/main"
#: The relationship types from a slide to its comments part, ECMA-376's and PowerPoint 365's.
COMMENT_RELATIONSHIPS = ("http://schemas.openxmlformats.org/officeDocument/2006/relationships/comments",
                         "http://schemas.microsoft.com/office/2018/10/relationships/comments")
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)


def slide_comments(slide_part) -> list[tuple[str, str, str]]:
    """The comments of the python-pptx ``slide_part``, in the order of its relationships and then
    of each part: ``(part name, comment id, text)``, the text of its ``p:text`` or ``p188:txBody``
    (lines cleaned as a shape's; ``""`` when it has none). The id is a threaded comment's or reply's ``id``; for an ECMA-376 comment,
    which has none, ``"<authorId>:<idx>"`` (§19.4.1: ``idx`` is unique among one author's
    comments). A reply follows its comment.

    Raises
    ------
    lxml.etree.XMLSyntaxError
        A comments part that is not XML (the caller lists the slide's comments unread).
    """
    found = []
    for rel in slide_part.rels.values():
        if rel.is_external or rel.reltype not in COMMENT_RELATIONSHIPS:
            continue
        part = rel.target_part
        name = str(part.partname).lstrip("/")
        root = etree.fromstring(part.blob, _PARSER)
        for cm in root.iterchildren(f"{{{P}}}cm"):
            text = cm.find(f"{{{P}}}text")
            if text is not None:
                found.append((name, f"{cm.get('authorId', '')}:{cm.get('idx', '')}", clean(element_text(text))))
        for cm in root.iterchildren(f"{{{P188}}}cm"):
            for item in (cm, *cm.iterfind(f"{{{P188}}}replyLst/{{{P188}}}reply")):
                body = item.find(f"{{{P188}}}txBody")
                if body is not None:
                    found.append((name, item.get("id", ""), clean(body_text(body))))
    return found
