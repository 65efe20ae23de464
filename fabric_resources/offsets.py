"""Coordinate systems of offsets. Fabric's offsets are Unicode scalar offsets (Python ``str``
indices); JavaScript clients index strings in UTF-16 code units."""

from __future__ import annotations

import re
from bisect import bisect_left

#: Scalars outside the Basic Multilingual Plane take two UTF-16 code units (a surrogate pair).
_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")


def utf16_offset(text: str, index: int) -> int:
    """UTF-16 code-unit offset of Unicode scalar offset ``index`` in ``text`` (O(index), in C).

    >>> utf16_offset("a😀b", 2)
    3
    """
    return index + len(_ASTRAL.findall(text, 0, index))


class Utf16Offsets:
    """Many conversions over one text: O(n) once, then O(log n) per offset.

    >>> Utf16Offsets("a😀b😀").at(4)
    6
    """

    def __init__(self, text: str) -> None:
        self._astral = [m.start() for m in _ASTRAL.finditer(text)]

    def at(self, index: int) -> int:
        return index + bisect_left(self._astral, index)
