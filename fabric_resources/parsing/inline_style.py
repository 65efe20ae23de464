"""What an element's markup says of its rendering: the ``hidden`` attribute, a closed ``dialog`` and the
inline ``style``.

Shared by the HTML parser and the EPUB parser (its chapters are XHTML): an element no reader sees
yields no text, or it would be cited from a page where nobody finds it. Stylesheets and classes
are not read: Fabric has no CSS engine.
"""

from __future__ import annotations

from functools import lru_cache


def hidden_element(el) -> bool:
    """Not rendered: an element with the ``hidden`` attribute (HTML Standard, "The hidden
    attribute": the user agent does not render it), but ``hidden="until-found"``, which
    find-in-page reveals; a ``dialog`` without ``open``; or whose inline ``style`` hides it (:func:`style_hides`). Its text would
    be cited from a page where no reader sees it."""
    value = el.get("hidden")
    if value is not None and value.strip().lower() != "until-found":
        return True
    # A dialog not open (HTML Standard, Rendering, "Hidden elements": dialog:not([open]) { display: none }): a
    # modal's text until a script opens it. The tag may be XHTML's, namespaced (EPUB).
    if isinstance(el.tag, str) and el.tag.rpartition("}")[2].lower() == "dialog" and el.get("open") is None:
        return True
    style = el.get("style")
    if not style:
        return False
    display, visibility = style_hides(style)
    # visibility is inherited and a descendant may set it back (CSS 2.1 §11.2): then the subtree is
    # read, the hidden element's own text included (rare, and text lost is worse than text kept).
    return display or (visibility and not any("visib" in (d.get("style") or "").lower()
                                               for d in el.iterdescendants() if isinstance(d.tag, str)))


@lru_cache(maxsize=4096)
def style_hides(style: str) -> tuple[bool, bool]:
    """``(display: none, visibility: hidden or collapse)`` as an inline ``style`` declares them:
    the last declaration of each property wins unless an earlier one is ``!important`` (CSS
    Cascade 4 §6.4). Read by tinycss2 (comments, escapes, case as CSS Syntax 3 reads them).
    Stylesheets and classes are not read: Fabric has no CSS engine."""
    import tinycss2

    found: dict[str, tuple[str, bool]] = {}
    for decl in tinycss2.parse_blocks_contents(style, skip_comments=True, skip_whitespace=True):
        if decl.type != "declaration" or decl.lower_name not in ("display", "visibility"):
            continue
        if found.get(decl.lower_name, ("", False))[1] and not decl.important:
            continue
        tokens = [t for t in decl.value if t.type not in ("whitespace", "comment")]
        value = tokens[0].lower_value if len(tokens) == 1 and tokens[0].type == "ident" else ""
        found[decl.lower_name] = (value, decl.important)
    return (found.get("display", ("", False))[0] == "none",
            found.get("visibility", ("", False))[0] in ("hidden", "collapse"))
