"""What an element's markup says of its rendering: the ``hidden`` attribute, a closed ``dialog`` and the
inline ``style``.

Shared by the HTML parser and the EPUB parser (its chapters are XHTML): an element no reader sees
yields no text, or it would be cited from a page where nobody finds it. Stylesheets and classes
are not read: Fabric has no CSS engine.
"""

from __future__ import annotations

import re
from functools import lru_cache

#: Elements whose content is fallback for a reader without media support, which the HTML Standard
#: says user agents should not show ("The video element"; ``audio`` alike): a browser or reading
#: system that plays the media shows none of it ("Your browser does not support the video tag." was
#: read as a paragraph). Shared by the HTML and EPUB parsers.
MEDIA_FALLBACK = frozenset({"video", "audio"})


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


#: font-size values relative to the parent's size: under a zero-size parent they are zero too.
_RELATIVE_UNITS = {"em", "ex", "ch", "cap", "ic", "lh"}
_RELATIVE_KEYWORDS = {"inherit", "larger", "smaller", "unset", "revert", "revert-layer"}


@lru_cache(maxsize=4096)
def font_size_zero(style: str) -> bool | None:
    """What an inline ``style`` says of the text's size: ``True`` when its ``font-size`` is zero
    (``0``, ``0px``, ``0%``, any zero length: the text is drawn but takes no space and shows
    nothing), ``False`` when it sets a size that is not zero nor relative to the parent's (``12px``,
    ``1rem``, ``medium``: text under a zero-size parent shows again), ``None`` when it sets none or
    one relative to the parent (``1em``, ``50%``, ``larger``: zero under a zero-size parent).
    Precedence as :func:`style_hides`; a value tinycss2 cannot read as one token (``calc()``)
    counts as a size that is not zero, since text lost is worse than text kept."""
    import tinycss2

    found: tuple[bool | None, bool] | None = None
    for decl in tinycss2.parse_blocks_contents(style, skip_comments=True, skip_whitespace=True):
        if decl.type != "declaration" or decl.lower_name != "font-size":
            continue
        if found is not None and found[1] and not decl.important:
            continue
        tokens = [t for t in decl.value if t.type not in ("whitespace", "comment")]
        token = tokens[0] if len(tokens) == 1 else None
        if token is not None and token.type in ("number", "dimension", "percentage") and token.value == 0:
            value: bool | None = True
        elif token is not None and ((token.type == "dimension" and token.lower_unit in _RELATIVE_UNITS)
                                    or token.type == "percentage"
                                    or (token.type == "ident" and token.lower_value in _RELATIVE_KEYWORDS)):
            value = None
        else:
            value = False
        found = (value, decl.important)
    return found[0] if found is not None else None


_ZERO_BOX = ("width", "height", "max-width", "max-height")


@lru_cache(maxsize=4096)
def zero_box(style: str) -> bool:
    """Whether an inline ``style`` sizes the element's box to nothing: its ``width``, ``height``,
    ``max-width`` or ``max-height`` is a zero length or percentage (``width:0;height:0``, a
    tracking frame's). Precedence as :func:`style_hides`."""
    import tinycss2

    found: dict[str, tuple[bool, bool]] = {}
    for decl in tinycss2.parse_blocks_contents(style, skip_comments=True, skip_whitespace=True):
        if decl.type != "declaration" or decl.lower_name not in _ZERO_BOX:
            continue
        if found.get(decl.lower_name, (False, False))[1] and not decl.important:
            continue
        tokens = [t for t in decl.value if t.type not in ("whitespace", "comment")]
        zero = (len(tokens) == 1 and tokens[0].type in ("number", "dimension", "percentage")
                and tokens[0].value == 0)
        found[decl.lower_name] = (zero, decl.important)
    return any(zero for zero, _ in found.values())


#: The properties this module reads of an inline style.
_READ_PROPERTIES = {"display", "visibility", "font-size", *_ZERO_BOX}


def rendering_declarations(style: str) -> str:
    """The declarations of an inline ``style`` that this module reads (:data:`_READ_PROPERTIES`), in
    order, ``!important`` kept, so every verdict here is the same for it as for ``style``: the rest
    (a background image, a custom property holding a blob) says nothing of whether text shows.

    >>> rendering_declarations("--blob: 'x'; DISPLAY: none !important; color: red; width:0")
    'DISPLAY: none !important;width:0;'
    """
    import tinycss2

    return "".join(tinycss2.serialize([decl]).strip()
                    for decl in tinycss2.parse_blocks_contents(style, skip_comments=True, skip_whitespace=True)
                    if decl.type == "declaration" and decl.lower_name in _READ_PROPERTIES)


#: ``<input>`` types whose ``value`` the page shows as text: in a text box (a missing or unknown type
#: is a text box) or as a button's label. Not ``hidden``, ``password`` (dots), a check box's or a
#: file's, nor a date or a colour (drawn by the browser in a format of its own).
_VALUE_SHOWN_TYPES = {"text", "search", "email", "url", "tel", "number", "submit", "button", "reset"}
_INPUT_TYPES = _VALUE_SHOWN_TYPES | {"hidden", "password", "checkbox", "radio", "file", "image", "color", "range",
                                    "date", "datetime-local", "month", "week", "time"}


#: ``<input>`` types that show their ``placeholder`` while their value is empty (HTML Standard §4.10.5.3.10):
#: a password box too, its hint in plain text before anything is typed.
_PLACEHOLDER_TYPES = {"text", "search", "email", "url", "tel", "number", "password"}
_SPACE = re.compile(r"[ \t\n\f\r]+")  # ASCII whitespace, as the HTML Standard strips and collapses it


def shown_value(el) -> str:
    """The text an ``<input>`` ``el`` shows of its ``value`` (:data:`_VALUE_SHOWN_TYPES`), else
    ``""``; an empty box its ``placeholder`` (:data:`_PLACEHOLDER_TYPES`), the hint a browser
    shows there until something is typed. A submit or reset button without one shows the
    browser's own label, no text of the page.

    >>> from lxml.html import fragment_fromstring as f
    >>> [shown_value(f(x)) for x in ('<input value="Tide">', '<input placeholder="Search tides">',
    ...  '<input type="password" placeholder="PIN" value="x">', '<input type="submit" placeholder="x">')]
    ['Tide', 'Search tides', '', '']
    """
    kind = (el.get("type") or "text").strip().lower()
    known = kind in _INPUT_TYPES
    value = el.get("value") or "" if kind in _VALUE_SHOWN_TYPES or not known else ""
    if not (el.get("value") or "") and (kind in _PLACEHOLDER_TYPES or not known):
        return el.get("placeholder") or ""
    return value


def control_text(el) -> str:
    """The text a form control ``el`` shows in the page: an ``<input>``'s (:func:`shown_value`), a
    ``<select>``'s (:func:`select_text`), a ``<textarea>``'s default text, else its ``placeholder``."""
    tag = el.tag.lower() if isinstance(el.tag, str) else ""
    if tag == "input":
        return shown_value(el)
    if tag == "select":
        return select_text(el)
    return el.text or el.get("placeholder") or "" if tag == "textarea" else ""


def select_text(el) -> str:
    """The text a ``<select>`` shows (HTML Standard §4.10.7): a drop-down (no ``multiple``, a display
    size of 1) its selected option's label (the last option marked ``selected``, else the first
    not disabled), a list box each option's (and option group's) label, a line each, but hidden
    ones. An option's label is its ``label`` attribute, else its text, white space collapsed.

    >>> from lxml.html import fragment_fromstring as f
    >>> select_text(f('<select><option disabled>Pick</option><option>Neap</option><option>Spring</option></select>'))
    'Neap'
    >>> select_text(f('<select><option>Neap</option><option selected label="Spring tide">sp</option></select>'))
    'Spring tide'
    >>> select_text(f('<select multiple><optgroup label="Tides"><option>Neap</option></optgroup></select>'))
    'Tides\\nNeap'
    """
    multiple = el.get("multiple") is not None
    rows = non_negative_integer(el.get("size") or "") or (4 if multiple else 1)
    items = [x for x in el.iter("option", "optgroup") if x is not el]

    def label(x) -> str:
        given = x.get("label")
        return _SPACE.sub(" ", given if given else "" if x.tag == "optgroup" else x.text_content()).strip(" ")

    if multiple or rows > 1:
        return "\n".join(text for x in items if not hidden_element(x) and (text := label(x)))
    options = [x for x in items if x.tag == "option"]
    chosen = [x for x in options if x.get("selected") is not None]
    if not chosen:
        chosen = [x for x in options if x.get("disabled") is None
                  and (x.getparent().tag != "optgroup" or x.getparent().get("disabled") is None)][:1]
    return label(chosen[-1]) if chosen else ""


_LEADING_INTEGER = re.compile(r"[ \t\n\f\r]*\+?([0-9]+)")


def non_negative_integer(value: str) -> int | None:
    """``value`` read by the HTML Standard's rules for parsing non-negative integers (§2.3.4.1), as
    browsers read a ``<select size>``: white space and a ``+`` skipped, the leading digits read,
    what follows them ignored; ``None`` where no digit leads. A number past 2^31 - 1 reads as that,
    so thousands of digits cost no big-integer conversion (Python refuses past 4,300).

    >>> [non_negative_integer(v) for v in ("3", " +3", "3px", "0003", "0", "-3", "x3", "", "9" * 5000)]
    [3, 3, 3, 3, 0, None, None, None, 2147483647]
    """
    match = _LEADING_INTEGER.match(value)
    if match is None:
        return None
    digits = match.group(1).lstrip("0") or "0"
    return int(digits) if len(digits) <= 10 and int(digits) < 1 << 31 else (1 << 31) - 1
