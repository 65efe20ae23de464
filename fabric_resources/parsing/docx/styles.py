"""What a DOCX's styles part says of hiding text, and reading that part when it is malformed.

Word resolves a run's properties through the styles part (``word/styles.xml``): text a style
hides (``w:vanish``) is shown nowhere, so the parser must know it to leave that text out. A
malformed styles part is left out of the package so python-docx can open the rest
(:func:`~fabric_resources.parsing.ooxml.opened_or_repaired`); its hiding would then be lost and
hidden text indexed. :func:`recovered_styles` reads such a part with lxml's recovering parser
(what libxml2 can make of it: the styles before the damage, usually all of them) and says, in the
part's unread reason, whether its styles were applied.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
from typing import NamedTuple

from lxml import etree

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_RELS = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
_RECOVER = etree.XMLParser(recover=True, resolve_entities=False, no_network=True, huge_tree=False)
APPLIED = "; read by lxml's recovering parser: its styles applied as far as recovered"
NOT_APPLIED = "; nothing recovered: text a style hides may have been read"


def vanish(rpr) -> bool | None:
    """What a ``w:rPr`` says of hiding (``w:vanish``, ECMA-376 §17.3.2.41: ``w:val`` absent or true
    hides), or ``None`` when it says nothing."""
    vanish = rpr.find(f"{{{W}}}vanish") if rpr is not None else None
    if vanish is None:
        return None
    return vanish.get(f"{{{W}}}val", "true").strip().lower() not in ("0", "false", "off")


class Hiding(NamedTuple):
    """What the styles part says of hiding (``w:vanish``), as Word resolves a run's properties:
    document defaults, then the paragraph's style (its own, else the default paragraph style),
    then the run's character style, then the run's own formatting; the last that says wins."""

    says: dict[str, bool]  # style ID -> what its w:basedOn chain says (only the styles that say)
    default_paragraph: str | None = None  # the ID of the style a paragraph without w:pStyle has
    default: bool = False  # w:docDefaults/w:rPrDefault


NOTHING_HIDES = Hiding({})


def hidden_styles(element) -> Hiding:
    """What the styles part ``element`` (``w:styles``) hides, through its ``w:basedOn`` chains (a
    style's own ``w:vanish`` wins over its base's), the default paragraph style and the document
    defaults; :data:`NOTHING_HIDES` when there is no styles part to read."""
    if element is None:
        return NOTHING_HIDES
    styles = {st.get(f"{{{W}}}styleId"): st for st in element.iterchildren(f"{{{W}}}style")}
    defaults = element.find(f"{{{W}}}docDefaults/{{{W}}}rPrDefault/{{{W}}}rPr")

    # Each style's own w:vanish is read once and each chain walked once, its answer kept for every
    # style on it: resolving each style up its whole chain anew was quadratic (20,000 chained styles:
    # 3.3 s with a depth cap of 32, which also left a hiding ancestor deeper than that unapplied).
    said: dict[str | None, bool | None] = {}
    for style_id in styles:
        chain: list[str | None] = []
        on_chain: set[str | None] = set()
        current, value = style_id, None
        while current in styles and current not in on_chain:  # a loop ends the chain, saying nothing
            if current in said:
                value = said[current]
                break
            chain.append(current)
            on_chain.add(current)
            style = styles[current]
            own = vanish(style.find(f"{{{W}}}rPr"))
            if own is not None:  # a style's own w:vanish wins over its base's
                value = own
                break
            based = style.find(f"{{{W}}}basedOn")
            current = based.get(f"{{{W}}}val") if based is not None else None
        said.update(dict.fromkeys(chain, value))

    default_paragraph = next((sid for sid, st in styles.items() if st.get(f"{{{W}}}type") == "paragraph"
                              and (st.get(f"{{{W}}}default") or "").lower() in ("1", "true", "on")), None)
    return Hiding({sid: v for sid, v in said.items() if sid and v is not None}, default_paragraph,
                  bool(vanish(defaults)))


def styles_part_name(data: bytes, main_part: str) -> str | None:
    """The name of the styles part (``word/styles.xml``) the relationships of ``main_part``
    (``word/document.xml``) name in the package ``data``; ``None`` when they name none or
    cannot be read."""
    folder, name = posixpath.split(main_part)
    try:
        rels = etree.fromstring(zipfile.ZipFile(io.BytesIO(data)).read(posixpath.join(folder, "_rels", name + ".rels")),
                                _RELS)
    except (KeyError, zipfile.BadZipFile, etree.LxmlError):
        return None
    for rel in rels:
        if (rel.get("Type") or "").endswith("/styles") and rel.get("TargetMode") != "External" and rel.get("Target"):
            return posixpath.normpath(posixpath.join("/" + folder, rel.get("Target"))).lstrip("/")
    return None


def recovered_styles(data: bytes, main_part: str, lost: list[tuple[str, str]]) -> tuple[object, list[tuple[str, str]]]:
    """The ``w:styles`` element lxml's recovering parser makes of a styles part that ``lost``
    (``(part, reason)``: the parts left out to open the package) names as malformed, or ``None``;
    and ``lost`` with that part's reason saying whether its styles were applied (:data:`APPLIED`,
    :data:`NOT_APPLIED`). ``(None, lost)`` unchanged when the styles part was not lost as malformed
    (a missing styles part hides nothing: Word applies its own defaults)."""
    part = styles_part_name(data, main_part)
    if part is None or not any(where == part and reason != "missing-part" for where, reason in lost):
        return None, lost
    try:
        root = etree.fromstring(zipfile.ZipFile(io.BytesIO(data)).read(part), _RECOVER)
    except (KeyError, zipfile.BadZipFile, etree.LxmlError):
        root = None
    if root is not None and root.tag != f"{{{W}}}styles":
        root = None
    note = APPLIED if root is not None else NOT_APPLIED
    return root, [(where, reason + note if where == part else reason) for where, reason in lost]


def style_names(element) -> dict[str, str]:
    """Style ID -> name (``w:name``) of the styles in ``element`` (``w:styles``)."""
    names = {}
    for style in element.iterchildren(f"{{{W}}}style"):
        name = style.find(f"{{{W}}}name")
        if style.get(f"{{{W}}}styleId") and name is not None and name.get(f"{{{W}}}val"):
            names[style.get(f"{{{W}}}styleId")] = name.get(f"{{{W}}}val")
    return names
