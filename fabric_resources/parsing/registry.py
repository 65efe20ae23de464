"""Which parser handles which file: the plug-in registry and media-type detection.

Every sub-package of :mod:`fabric_resources.parsing` that defines ``SPEC``
(a :class:`~fabric_resources.parsing.spec.ParserSpec`) is a parser plug-in;
the extension map and the media-type map are derived from those specs, so a
new format is one new folder (and its section in ``ParserConfig``). Two
plug-ins claiming one extension or media type is an error at import.

The media type follows from the file name alone (its extension,
case-insensitive), so it is stable across edits of the content. Types that no
parser handles are still reported (from Python's built-in ``mimetypes``
table, else ``application/octet-stream``) so the caller can list the file as
unsupported with its type.
"""

from __future__ import annotations

import importlib
import mimetypes
import pkgutil
from pathlib import PurePosixPath

import fabric_resources.parsing as _parsing_package
from fabric_resources.parsing.spec import ParserSpec

OCTET_STREAM = "application/octet-stream"

# Types Fabric recognises but does not parse (e.g. the loose parts of an EPUB).
_KNOWN_UNPARSED: dict[str, str] = {
    ".xhtml": "application/xhtml+xml",
    ".opf": "application/oebps-package+xml",
    ".ncx": "application/x-dtbncx+xml",
}

# Python's built-in table only: a fresh MimeTypes() does not read the host's
# /etc/mime.types, so every machine reports the same type for a name.
_BUILTIN_TYPES = mimetypes.MimeTypes()


def _discover() -> tuple[ParserSpec, ...]:
    specs = []
    for info in sorted(pkgutil.iter_modules(_parsing_package.__path__), key=lambda m: m.name):
        if info.ispkg:
            spec = getattr(importlib.import_module(f"{_parsing_package.__name__}.{info.name}"), "SPEC", None)
            if isinstance(spec, ParserSpec):
                specs.append(spec)
    return tuple(specs)


def _index(specs: tuple[ParserSpec, ...]) -> tuple[dict[str, str], dict[str, ParserSpec]]:
    extensions: dict[str, str] = {}
    by_type: dict[str, ParserSpec] = {}
    names: set[str] = set()
    for spec in specs:
        if spec.name in names:
            raise RuntimeError(f"two parser plug-ins are named {spec.name!r}")
        names.add(spec.name)
        for ext, media_type in spec.extensions.items():
            if ext != ext.lower() or not ext.startswith("."):
                raise RuntimeError(f"parser {spec.name}: extension {ext!r} must be lower case with a dot")
            if ext in extensions:
                raise RuntimeError(f"extension {ext} claimed by two parsers")
            extensions[ext] = media_type
        for media_type in spec.media_types:
            if media_type in by_type:
                raise RuntimeError(f"media type {media_type} claimed by {by_type[media_type].name} and {spec.name}")
            by_type[media_type] = spec
    return extensions, by_type


#: Every parser plug-in, by package name.
PARSERS: tuple[ParserSpec, ...] = _discover()
_EXTENSIONS, _BY_MEDIA_TYPE = _index(PARSERS)


def detect_media_type(name: str, head: bytes = b"") -> str:
    """The media type of a file, from its name's extension (case-insensitive).

    Parameters
    ----------
    name : str
        File name or ``/``-separated relative path.
    head : bytes
        The file's first bytes. Not read: the type depends on the name only,
        so editing a file never changes its parser.

    Returns
    -------
    str
        The type a parser plug-in declares for the extension (e.g. ``.txt`` ->
        ``text/plain``, ``.epub`` -> ``application/epub+zip``); any other
        extension -> its type in Python's built-in ``mimetypes`` table, else
        ``application/octet-stream`` (also for no extension).
    """
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in _EXTENSIONS:
        return _EXTENSIONS[suffix]
    if suffix in _KNOWN_UNPARSED:
        return _KNOWN_UNPARSED[suffix]
    common_types, strict_types = _BUILTIN_TYPES.types_map  # indexed by strict=False, True
    return strict_types.get(suffix) or common_types.get(suffix) or OCTET_STREAM


def parser_for(media_type: str) -> ParserSpec | None:
    """The parser for ``media_type``, or ``None`` when Fabric does not parse it."""
    return _BY_MEDIA_TYPE.get(media_type)


def parser_named(name: str) -> ParserSpec | None:
    """The parser plug-in called ``name`` (a parse run's recorded ``parser_name``), or ``None``."""
    return next((s for s in PARSERS if s.name == name), None)
