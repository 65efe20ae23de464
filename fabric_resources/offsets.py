"""Coordinate systems of offsets. Fabric's offsets are Unicode scalar offsets (Python ``str``
indices); JavaScript clients index strings in UTF-16 code units."""


def utf16_offset(text: str, index: int) -> int:
    """UTF-16 code-unit offset of Unicode scalar offset ``index`` in ``text``.

    >>> utf16_offset("a😀b", 2)
    3
    """
    return index + sum(1 for ch in text[:index] if ord(ch) > 0xFFFF)
