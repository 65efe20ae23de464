"""Elements whose text a browser renders although the HTML parser's tag rules would skip them.

Five kinds, each skipped whole before (their text lost from the index, though every reader saw it):

- ``<template shadowrootmode="open|closed">``: a declarative shadow root (HTML Standard, "The
  template element"), which the browser attaches to its parent and renders, with what its
  ``<slot>``s take of the host's children (:func:`hide_unslotted`: the rest is not shown). A plain
  ``<template>`` is inert and stays unread.
- ``<object>`` whose fallback content the browser shows: Fabric never renders an object's data, and
  a browser shows the fallback unless the data is a kind it displays itself (:func:`object_shows_fallback`).
- ``<iframe srcdoc="…">``: the document the frame shows, read into it (:func:`graft_frames`).
- ``<textarea>``: its default text is in the box on the page (libxml2 reads it as text, as browsers do).
- inline ``<svg>``: its ``<text>`` elements (a chart's labels, a diagram's words), not its ``<title>``
  or ``<desc>`` (a tooltip, a description) nor what ``<defs>`` and the like only define.

And the reverse: text an inline ``font-size`` of zero draws in no space is emptied
(:func:`blank_zero_size_text`), but not a whole page's (:func:`unhide_page`). ``opacity: 0`` and
``aria-hidden="true"`` are not read as hiding: scroll-reveal pages start content at ``opacity: 0``
for a script to show it, and ``aria-hidden`` hides from screen readers only (on ``../shared``
neither occurs inline on main text: 2026-12-07).

trafilatura drops all five before it decides the main text (its ``MANUALLY_CLEANED``), so it is
given the page with them rewritten as plain elements (:func:`trafilatura_view`). The walk reads
the page's own tree, where no element of the page moves (hidden ones are marked, invisible text
emptied, a frame's document added inside its iframe), so an element path still names the
element in the saved page."""

from __future__ import annotations

import copy
import mimetypes
import re
from collections import deque

import lxml.html
from lxml import etree

from fabric_resources.parsing.document import ParseError, UnreadPart
from fabric_resources.parsing.element_paths import ElementPaths
from fabric_resources.parsing.html.tree_repairs import absorb_trailing, unvoid_embeds
from fabric_resources.parsing.inline_style import control_text, font_size_zero, hidden_element, style_hides, zero_box
from fabric_resources.parsing.lxml_limits import (raise_on_attribute_flood, raise_on_resource_limit,
    without_long_attributes)

#: ``shadowrootmode`` values that attach a shadow root; any other leaves an inert template.
_SHADOW_MODES = ("open", "closed")
#: Media types a browser displays in an ``<object>`` itself (then the fallback is not shown).
_DISPLAYED = ("image/", "text/", "application/pdf", "application/xhtml+xml", "application/xml")
#: SVG elements whose content is never drawn where it stands (defined for reuse, or metadata).
_SVG_UNDRAWN = {"title", "desc", "metadata", "defs", "symbol", "clippath", "mask", "pattern", "marker",
                "lineargradient", "radialgradient", "filter", "style", "script"}
_SVG_HIDES = re.compile(r"\s*(none|hidden|collapse)\s*", re.I)
_WS = re.compile(r"\s+")


def _local(el) -> str:
    return el.tag.rpartition("}")[2].lower() if isinstance(el.tag, str) else ""


def unhide_page(root) -> None:
    """Drop what hides the whole page (a ``hidden`` attribute or a hiding inline style on ``html`` or
    ``body``: ``display: none``, ``visibility: hidden``, ``font-size: 0``): a page that shows
    nothing until a script reveals it (an anti-flicker or loading pattern), which its reader saw
    revealed. It was read as no text at all, in silence. Hiding inside the page still applies."""
    body = root.find("body")
    for el in (root, body) if body is not None else (root,):
        el.attrib.pop("hidden", None)
        style = el.get("style")
        if style and (any(style_hides(style)) or font_size_zero(style)):
            del el.attrib["style"]


#: Elements a shadow root may be attached to (DOM Standard, attachShadow), and custom elements (a
#: name with a hyphen). A declarative shadow root on another element stays an inert template.
_SHADOW_HOSTS = {"article", "aside", "blockquote", "body", "div", "footer", "h1", "h2", "h3", "h4", "h5", "h6",
                 "header", "main", "nav", "p", "section", "span"}


def settle_shadow_roots(root) -> None:
    """Make inert, as a browser leaves it, each ``template`` declaring a shadow root where none
    attaches: on an element that may not host one, or on a host that already has one (a host has
    one shadow root; a later declaration stays a template). Then :func:`shadow_root` needs no look
    at a template's siblings: checked per template, that look made a page of 8,000 templates
    after 8,000 siblings (490 kB) take 140 s."""
    hosts = set()  # holding the hosts keeps their lxml proxies, so getparent() returns the same ones
    for el in root.iter("template"):
        if (el.get("shadowrootmode") or "").strip().lower() not in _SHADOW_MODES:
            continue
        host = el.getparent()
        if host is None or not (_local(host) in _SHADOW_HOSTS or "-" in _local(host)) or host in hosts:
            del el.attrib["shadowrootmode"]
        else:
            hosts.add(host)


def shadow_root(el) -> bool:
    """Whether ``el`` is a ``template`` that declares a shadow root (rendered), not an inert one: a
    known ``shadowrootmode`` (on the host's first such template, on an element that may host one,
    once :func:`settle_shadow_roots` has run)."""
    return _local(el) == "template" and (el.get("shadowrootmode") or "").strip().lower() in _SHADOW_MODES


def hide_unslotted(root) -> bool:
    """Hide what a shadow root keeps off the page (DOM Standard, "Shadow tree" slots): its host's
    other children that no ``<slot>`` of it takes (an element with ``slot="x"`` needs a
    ``<slot name="x">``; text and an element without ``slot``, a slot without a name), and a
    slot's fallback content once something is assigned to it. An element is marked ``hidden``;
    loose text is emptied (:func:`_gap`). Whether any text was emptied. Such text was read, though
    no browser shows it: a page could carry words for search under a shadow root of its own."""
    emptied = False
    owned = _own_slots(root)
    for template in [t for t in root.iter("template") if shadow_root(t)]:
        host = template.getparent()
        slots = owned.get(template, [])
        first: dict[str, object] = {}
        for slot in slots:
            first.setdefault((slot.get("name") or "").strip(), slot)  # a name's first slot takes them
        # A slot the shadow root hides (``<slot hidden>``, one inside a display:none element) shows
        # nothing assigned to it: what it takes is hidden with it, not read as shown.
        names = {name for name, slot in first.items()
                 if not any(hidden_element(a) for a in (slot, *_up_to(slot, template)))}
        assigned: set[str] = set()
        for child in host:
            if child is template or not isinstance(child.tag, str):
                continue
            name = (child.get("slot") or "").strip()
            if name in names:
                assigned.add(name)
            else:
                child.set("hidden", "")
        loose = [host.text, *(c.tail for c in host)]
        if any(t and t.strip() for t in loose):
            if "" in names:
                assigned.add("")
            else:
                emptied = True
                host.text = _gap(host.text)
                for child in host:
                    child.tail = _gap(child.tail)
        for slot in slots:
            if (slot.get("name") or "").strip() in assigned:
                emptied = _hide_content(slot) or emptied
    return emptied


def _own_slots(root) -> dict:
    """Each template in ``root`` -> the ``slot`` elements of its shadow tree, in document order: not
    one inside a template within it (a nested shadow root's slots take its own host's children;
    an inert template's are never rendered). Counted as the outer root's, they showed its host's
    children that no browser shows. One pass over the page's slots."""
    owners: dict = {}
    for slot in root.iter("slot"):
        owners.setdefault(next(slot.iterancestors("template"), None), []).append(slot)
    return owners


def _up_to(el, top):
    """``el``'s ancestors below ``top``."""
    for a in el.iterancestors():
        if a is top:
            return
        yield a


def _compose(template, slots: list) -> None:
    """Move the elements of a shadow root's host that its named slots take into those slots, in
    place of their fallback (the page as a browser lays it out); their tails stay in the host."""
    host = template.getparent()
    assigned: dict[str, list] = {}
    for child in host:
        if child is not template and isinstance(child.tag, str) and (child.get("slot") or "").strip():
            assigned.setdefault(child.get("slot").strip(), []).append(child)
    for slot in slots:
        taken = assigned.pop((slot.get("name") or "").strip(), None)  # a name's first slot takes them
        if not taken:
            continue
        slot.text = None
        for child in list(slot):
            slot.remove(child)  # fallback, shown only while nothing is assigned; its tail, fallback too, goes with it
        for child in taken:
            tail, child.tail = child.tail, None
            before = child.getprevious()
            if before is not None:
                before.tail = (before.tail or "") + (tail or "")
            else:
                host.text = (host.text or "") + (tail or "")
            slot.append(child)


def _hide_content(el) -> bool:
    emptied = bool(el.text and el.text.strip()) or any(c.tail and c.tail.strip() for c in el)
    el.text = _gap(el.text)
    for child in el:
        if isinstance(child.tag, str):
            child.set("hidden", "")
        child.tail = _gap(child.tail)
    return emptied


def object_shows_fallback(el) -> bool:
    """Whether a browser shows ``el``'s (an ``object``'s) fallback content: it names no data, or data
    whose type (``type``, else guessed from the ``data`` URL's extension) is not one a browser
    displays itself (an image, a page, text, a PDF). A plug-in's data (Flash, a Java applet) and a
    type that cannot be told are taken as not displayed: the fallback is the only text there is."""
    data = (el.get("data") or "").strip()
    if not data:
        return True
    kind = (el.get("type") or "").strip().lower() or (mimetypes.guess_type(data.split("?")[0])[0] or "")
    return not kind or not kind.startswith(_DISPLAYED)


def transparent(el) -> bool:
    """A skipped tag whose content is rendered as if it were a plain container (a shadow root, an
    object's shown fallback, a frame's document :func:`graft_frames` read into it)."""
    tag = _local(el)
    if tag == "iframe":
        return el.get(_FRAME) is not None
    return shadow_root(el) if tag == "template" else tag == "object" and object_shows_fallback(el)


#: Marks an iframe whose ``srcdoc`` document :func:`graft_frames` read into it (an attribute no
#: page uses: the tree is the parse's own).
_FRAME = "data-fabric-srcdoc"
#: Frames read per page; past it the rest stay unread (a page of frames in frames is built to cost).
MAX_FRAMES = 200
#: The depth libxml2 reads without ``huge_tree``: a frame read deeper would be lost to trafilatura.
_LIBXML2_DEPTH = 255


def graft_frames(root, documents: dict[str, str]) -> list[UnreadPart]:
    """Read the document each ``<iframe srcdoc="…">`` shows (a page saved with its frames inlined,
    as SingleFile saves them) into the iframe, as its children: its body's text and elements, so
    the walk and trafilatura read them where the frame stands (element paths run through the
    iframe: ``/html/body/iframe/p[2]``). What the iframe held before is never rendered and goes.
    Not read: a frame hidden by ``hidden`` or an inline style, or sized zero (:func:`zero_sized`:
    a tracking frame nobody sees), or inside what is not rendered (an inert ``template``, a
    ``noscript``, an ``object`` showing its data, a shadow host's child no slot takes: marked by
    :func:`hide_unslotted`, run on the page first and here on each frame's document); nor frames
    past :data:`MAX_FRAMES`: returned, each as ``cap-frames`` at its element path, for the parse
    to list unread. Frames never shown take none of the cap. A frame whose document cannot be read
    (:func:`_frame_body`) is returned with its reason and the rest of the page read: one hostile
    frame keeps no page out of the index. ``documents``: srcdoc values past libxml2's limit, by
    the token in their place (:mod:`~fabric_resources.parsing.lxml_limits`)."""
    pending = deque(el for el in root.iter("iframe") if el.get("srcdoc"))  # popped from the left: a list was n²
    read = 0
    unshown: dict = {}  # element -> whether it or an ancestor is not rendered (_in_unshown)
    failed: list[tuple[object, ParseError]] = []
    while pending and read < MAX_FRAMES:
        frame = pending.popleft()
        if hidden_element(frame) or zero_sized(frame) or _in_unshown(frame, unshown):
            continue
        try:
            body = _frame_body(frame, documents)
        except ParseError as exc:
            read += 1  # a frame tried costs its parse: failing ones count toward the cap too
            failed.append((frame, exc))
            continue
        if body is None:
            continue  # no document (blank): the frame shows nothing
        for child in list(frame):
            frame.remove(child)
        frame.text = body.text
        for child in list(body):
            frame.append(child)
        frame.set(_FRAME, "")
        del frame.attrib["srcdoc"]
        read += 1
        pending.extend(el for el in frame.iter("iframe") if el.get("srcdoc"))
    # The paths the walk writes: later changes add no element before these. ElementPaths, as the
    # walk's: getpath per frame counts its siblings each time (40,000 frames past the cap: 6 s).
    path = ElementPaths(root.getroottree())
    return ([UnreadPart(path(frame), f"{exc.reason}: {exc.detail} (iframe srcdoc)") for frame, exc in failed]
            + [UnreadPart(path(frame), f"cap-frames: more than {MAX_FRAMES} frames (iframe srcdoc)")
               for frame in pending])


def _frame_body(frame, documents: dict[str, str]):
    """The body of the document ``frame``'s ``srcdoc`` holds, ready to stand in the frame; None for
    a blank one. Raises ParseError ``cap-parser-limit`` or ``cap-depth``, as the page's own parse
    (libxml2 stopped reading it, or it would nest deeper than libxml2 reads where the frame stands)."""
    source = documents.get(frame.get("srcdoc") or "", frame.get("srcdoc") or "")
    raise_on_attribute_flood(source)
    source, inner = without_long_attributes(source)
    documents.update(inner)  # a frame's frames
    parser = lxml.html.HTMLParser()
    try:
        document = lxml.html.document_fromstring(source, parser=parser)
    except (etree.ParserError, ValueError):
        return None
    raise_on_resource_limit(parser)
    absorb_trailing(document)  # content after the frame document's </html>, as the page's own
    unvoid_embeds(document)
    settle_shadow_roots(document)  # its body may host a shadow root; the iframe, once it holds the body, may not
    hide_unslotted(document)  # so that a frame in it no slot takes is not read
    body = document.find("body")
    body = body if body is not None else document
    if _depth(frame) + _depth_below(body) > _LIBXML2_DEPTH:
        raise ParseError("cap-depth", "a frame's document read where the frame stands nests deeper than the "
                                      f"{_LIBXML2_DEPTH} levels libxml2 reads")
    return body


def _in_unshown(el, known: dict) -> bool:
    """Whether an ancestor of ``el`` is not rendered: hidden, or an element whose content is not
    drawn (:data:`_HTML_UNDRAWN`, not :func:`transparent`). ``known`` holds the verdicts found, so
    that each ancestor is looked at once: per frame, 80,000 frames 200 levels under an inert
    template took 17 s."""
    chain = []
    verdict = False
    node = el.getparent()
    while node is not None:
        if node in known:
            verdict = known[node]
            break
        chain.append(node)
        if hidden_element(node) or (_local(node) in _HTML_UNDRAWN and not transparent(node)):
            verdict = True
            break
        node = node.getparent()
    for node in chain:
        known[node] = verdict
    return verdict


#: How HTML reads a ``width``/``height`` attribute (its "rules for parsing dimension values"): the
#: leading number, whatever follows (``0px``, ``0.0``, ``00``, ``0%`` are all zero).
_DIMENSION = re.compile(r"\s*(\d+(?:\.\d*)?)")


def zero_sized(el) -> bool:
    """Whether ``el`` (an ``iframe`` or ``svg``) is sized to nothing, so nothing in it shows: a
    ``width`` or ``height`` attribute that reads as zero (:data:`_DIMENSION`) or an inline style
    (:func:`~fabric_resources.parsing.inline_style.zero_box`). A frame's and an SVG's content is
    clipped to their box."""
    for name in ("width", "height"):
        number = _DIMENSION.match(el.get(name) or "")
        if number and float(number.group(1)) == 0:
            return True
    style = el.get("style")
    return bool(style) and zero_box(style)


def _depth(el) -> int:
    return sum(1 for _ in el.iterancestors())


def _depth_below(el) -> int:
    depth = deepest = 0
    for event, _ in etree.iterwalk(el, events=("start", "end")):
        depth += 1 if event == "start" else -1
        deepest = max(deepest, depth)
    return deepest


def svg_text(svg) -> str:
    """The words an inline ``svg`` draws: its ``text`` elements' text and the text of the HTML its
    ``foreignObject``s hold, in document order, each apart from the next by a space; not what
    :data:`_SVG_UNDRAWN` holds, nor an element a ``display``/``visibility``/``font-size``
    attribute or inline style hides, nor what an ``svg`` sized to nothing clips (:func:`zero_sized`:
    ``<svg width="0" height="0">``, which a sprite sheet uses for its symbols and spam for words)."""
    if zero_sized(svg) or _svg_hidden(svg):  # the svg's own display/visibility attributes too
        return ""
    parts: list[str] = []

    def add(node, in_text: bool) -> None:
        for child in node:
            tag = _local(child)
            if (not tag or tag in _SVG_UNDRAWN or hidden_element(child) or _svg_hidden(child)
                    or (tag == "svg" and zero_sized(child))):
                continue
            if tag == "foreignobject":  # HTML drawn in the picture (a Mermaid or draw.io diagram's labels)
                parts.extend((" ", _html_text(child), " "))
                continue
            inner = in_text or tag == "text"
            if inner:
                parts.append(child.text or "")
            add(child, inner)
            if tag == "text":
                parts.append(" ")
            elif in_text:
                parts.append(child.tail or "")

    add(svg, False)
    return _WS.sub(" ", "".join(parts)).strip()


#: HTML elements whose content is not drawn (the walk's tag rule, less what is read apart below):
#: in a ``foreignObject`` too, a ``noscript``'s or an image ``object``'s fallback, a ``select``'s
#: options, ruby readings and MathML annotations were read as the diagram's words.
_HTML_UNDRAWN = {"script", "style", "noscript", "template", "head", "title", "meta", "link", "iframe", "object",
                 "embed", "canvas", "select", "option", "map", "noembed", "noframes", "datalist", "video",
                 "audio", "rt", "rp", "rtc", "annotation", "annotation-xml"}


def _html_text(el) -> str:
    """The text of the HTML in an SVG ``foreignObject``, its elements a space apart (a diagram's
    labels are boxes of their own), not what :data:`_HTML_UNDRAWN` or hiding holds; a shadow root,
    a shown fallback or a frame's document (:func:`transparent`), a textarea's text, a button's
    label, what an input or a select shows and a nested ``svg``'s words (:func:`svg_text`) are read."""
    parts: list[str] = []
    for child in el:
        tag = _local(child)
        if tag and not hidden_element(child):
            if tag == "svg":
                parts.extend((" ", svg_text(child), " "))
            elif tag in ("textarea", "input", "select"):  # the text in the box, a button's label, the option shown
                parts.extend((" ", control_text(child), " "))
            elif tag not in _HTML_UNDRAWN or transparent(child):
                parts.extend((child.text or "", " ", _html_text(child), " "))
        parts.append(child.tail or "")
    return "".join(parts)


def _svg_hidden(el) -> bool:
    """Hidden by an SVG presentation attribute: ``display``, ``visibility``, a zero ``font-size``."""
    size = el.get("font-size")
    return (any(_SVG_HIDES.fullmatch(el.get(a) or "x") for a in ("display", "visibility"))
            or (size is not None and bool(font_size_zero(f"font-size:{size}"))))


def trafilatura_view(root) -> str | None:
    """The page as trafilatura should read it: a copy of ``root`` where a shadow root and an
    object's shown fallback are plain containers (``div``, or ``span`` around inline content), the
    host's children a shadow root's slots take moved into them (a title slotted into the shadow
    root's heading is a heading there), a textarea is a ``span`` of its text and an inline ``svg``
    a ``span`` of :func:`svg_text`; ``None`` when the page holds none of them (trafilatura reads the
    page's own text)."""
    if next((el for el in root.iter("template", "object", "textarea", "svg", "iframe")
             if el.tag not in ("template", "iframe") or transparent(el)), None) is None:
        return None
    view = copy.deepcopy(root)
    shown = [el for el in view.iter("template", "object", "iframe") if transparent(el)]  # before any is renamed
    owned = _own_slots(view)
    for el in shown:
        if el.tag == "template":
            _compose(el, owned.get(el, []))
    for el in shown:
        el.tag = "div" if any(isinstance(d.tag, str) and d.tag in _BLOCK_HINTS for d in el.iterdescendants()) else "span"
        for name in list(el.attrib):
            del el.attrib[name]
    for el in list(view.iter("textarea", "svg")):
        span = lxml.html.Element("span")
        span.text = el.text if el.tag == "textarea" else svg_text(el)
        span.tail = el.tail
        if el.get("style") is not None:
            span.set("style", el.get("style"))
        el.getparent().replace(el, span)
    return lxml.html.tostring(view, encoding="unicode")


#: Block elements: descendants that make a shadow root or a fallback a ``div`` in
#: :func:`trafilatura_view` (a ``span`` around a paragraph would be split by libxml2 when
#: trafilatura parses the view); under a zero font size, elements a stylesheet may size by tag.
_BLOCK_HINTS = {"p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "ul", "ol", "li",
                "dl", "dt", "dd", "table", "pre", "blockquote", "figure", "form", "fieldset", "details",
                "h1", "h2", "h3", "h4", "h5", "h6", "address", "hr", "table", "tbody", "thead", "tfoot", "tr",
                "td", "th", "caption", "figcaption", "summary"}


def blank_zero_size_text(root) -> bool:
    """Empty the text an inline ``font-size`` of zero makes invisible (:func:`~fabric_resources.
    parsing.inline_style.font_size_zero`: ``<span style="font-size:0">keywords</span>``, drawn in
    no space, a search hit on words nobody saw); whether any text was emptied. The element's own
    text and that of inline descendants inheriting the size are emptied; a descendant that sets a
    size of its own, has a ``class`` or ``id`` a stylesheet may size it by, or is a block a
    stylesheet may size by its tag (Fabric reads no stylesheet: text lost is worse than text
    kept), keeps its text: a row of items under ``font-size:0`` (the gap-removal idiom, HTML
    e-mail's ``<td style="font-size:0">``) is read. The tree's elements stay, so element paths do."""
    emptied = False
    for el in root.iter():
        style = el.get("style") if isinstance(el.tag, str) else None
        if style and "font-size" in style.lower() and font_size_zero(style):
            emptied = _blank(el) or emptied
    return emptied


def _blank(el) -> bool:
    emptied = bool(el.text and el.text.strip())
    el.text = _gap(el.text)
    for child in el:
        if isinstance(child.tag, str) and not _sized_again(child):
            emptied = _blank(child) or emptied
        emptied = emptied or bool(child.tail and child.tail.strip())
        child.tail = _gap(child.tail)
    return emptied


def _gap(text: str | None) -> str | None:
    """A space for emptied text that held one: two inline blocks the zero-size gap stood between
    stay two words ("Tides" "Winds", not "TidesWinds")."""
    return " " if text and any(ch.isspace() for ch in text) else None


def _sized_again(el) -> bool:
    """Whether ``el`` may show text under a zero-size parent: its inline style sets a size that is
    not zero nor relative, or a stylesheet may: by a ``class`` or ``id``, or by its tag when it is a
    block (``ul { font-size: 0 } li { font-size: 1rem }``: the gap idiom sizes its items so)."""
    style = el.get("style")
    return ((style is not None and font_size_zero(style) is False) or bool(el.get("class") or el.get("id"))
            or (isinstance(el.tag, str) and el.tag.lower() in _BLOCK_HINTS))
