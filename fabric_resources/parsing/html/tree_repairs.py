"""Where libxml2's HTML tree differs from the one a browser builds, repaired before the page is read.

libxml2 follows an older HTML grammar than the HTML Standard's: content after ``</html>`` goes to a
second root nobody walks (:func:`absorb_trailing`), and ``embed``, void in HTML, holds what
follows it (:func:`unvoid_embeds`). Text a browser shows was lost in each. Used on the page and on
each frame's ``srcdoc`` document (:func:`~fabric_resources.parsing.html.rendered.graft_frames`).
"""

from __future__ import annotations


def absorb_trailing(root) -> bool:
    """Move what libxml2 put after the document's ``html`` element (content after ``</html>``, which
    it parses into a second root that the walk never saw) to the end of the body, where a browser
    puts it (HTML's "after after body" insertion mode); whether there was any. It was lost unsaid."""
    body = root.find("body")
    body = body if body is not None else root
    moved = False
    extra = root.getnext()
    while extra is not None:  # siblings of the document element: emptied, left in place (nothing walks them)
        if isinstance(extra.tag, str):
            holder = extra.find("body")
            for child in list(holder if holder is not None else extra):
                if not (isinstance(child.tag, str) and child.tag.lower() == "head"):
                    body.append(child)
                    moved = True
        extra = extra.getnext()
    return moved


def unvoid_embeds(root) -> bool:
    """Move what libxml2 put inside an ``embed`` out after it, where a browser has it; whether
    anything moved. ``embed`` is a void element (it never has content), but libxml2 reads it as
    a container of whatever follows up to its parent's end: the walk skips an embed, so the text
    after one (``<p>Watch <embed src="clip.swf"> the clip above.</p>``, an object's fallback
    ``<object><embed …>Get Flash to see it</object>``) was lost."""
    moved = False
    for embed in list(root.iter("embed")):
        children = list(embed)
        if not (children or embed.text):
            continue
        parent = embed.getparent()
        at = parent.index(embed)
        text, tail = embed.text, embed.tail
        embed.text, embed.tail = None, text
        for offset, child in enumerate(children, start=1):
            parent.insert(at + offset, child)
        last = children[-1] if children else embed
        last.tail = ((last.tail or "") + (tail or "")) or None
        moved = True
    return moved
