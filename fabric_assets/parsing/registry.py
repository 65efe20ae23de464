"""Which parser handles which file: media-type detection and the parser registry.

The media type follows from the file name alone (its extension,
case-insensitive), so it is stable across edits of the content. Types that no
parser handles are still reported (from Python's built-in ``mimetypes``
table, else ``application/octet-stream``) so the caller can list the file as
unsupported with its type.

The EPUB parser lives in :mod:`fabric_assets.parsing.epub` and is imported
only when an EPUB is parsed.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from fabric_assets.parsing.document import ParsedDocument
from fabric_assets.parsing.text import PARSER_NAME as TEXT_PARSER_NAME
from fabric_assets.parsing.text import PARSER_VERSION as TEXT_PARSER_VERSION
from fabric_assets.parsing.text import parse_text
from fabric_resources.config import ParserConfig

TEXT_PLAIN = "text/plain"
TEXT_MARKDOWN = "text/markdown"
EPUB = "application/epub+zip"
OCTET_STREAM = "application/octet-stream"

ParseCallable = Callable[[bytes, ParserConfig, str], ParsedDocument]

# Extensions (lower case, with the dot) that Fabric parses.
_PARSED_EXTENSIONS: dict[str, str] = {
    ".txt": TEXT_PLAIN,
    ".text": TEXT_PLAIN,
    ".md": TEXT_MARKDOWN,
    ".markdown": TEXT_MARKDOWN,
    ".epub": EPUB,
}

# Types Fabric recognises but does not parse (e.g. the loose parts of an EPUB).
_KNOWN_UNPARSED: dict[str, str] = {
    ".xhtml": "application/xhtml+xml",
    ".opf": "application/oebps-package+xml",
    ".ncx": "application/x-dtbncx+xml",
}

# Python's built-in table only: a fresh MimeTypes() does not read the host's
# /etc/mime.types, so every machine reports the same type for a name.
_BUILTIN_TYPES = mimetypes.MimeTypes()


@dataclass(frozen=True)
class ParserSpec:
    """A parser and the media types it handles.

    Attributes
    ----------
    name, version : str
        The parser identity (with the config hash it makes the parse ID).
    media_types : tuple[str, ...]
    parse : Callable[[bytes, ParserConfig, str], ParsedDocument]
        ``parse(data, parser_config, media_type)``; raises
        :class:`~fabric_assets.parsing.document.ParseError` on bad input.
    """

    name: str
    version: str
    media_types: tuple[str, ...]
    parse: ParseCallable


def _parse_text_file(data: bytes, config: ParserConfig, media_type: str) -> ParsedDocument:
    return parse_text(data, config.text, media_type)


def _parse_epub_file(data: bytes, config: ParserConfig, media_type: str) -> ParsedDocument:
    from fabric_assets.parsing.epub import parse_epub  # lazy: written separately

    return parse_epub(data, config.epub)


# The EPUB parser's name and version are its module's; they are fixed here so
# the registry imports without that module. Keep them in step with it.
TEXT_PARSER = ParserSpec(TEXT_PARSER_NAME, TEXT_PARSER_VERSION, (TEXT_PLAIN, TEXT_MARKDOWN), _parse_text_file)
EPUB_PARSER = ParserSpec("epub", "1", (EPUB,), _parse_epub_file)

_PARSERS: dict[str, ParserSpec] = {
    media_type: spec for spec in (TEXT_PARSER, EPUB_PARSER) for media_type in spec.media_types
}


def detect_media_type(name: str, head: bytes) -> str:
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
        ``.txt``/``.text`` -> ``text/plain``; ``.md``/``.markdown`` ->
        ``text/markdown``; ``.epub`` -> ``application/epub+zip``; any other
        extension -> its type in Python's built-in ``mimetypes`` table, else
        ``application/octet-stream`` (also for no extension). Never ``None``
        under these rules.
    """
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in _PARSED_EXTENSIONS:
        return _PARSED_EXTENSIONS[suffix]
    if suffix in _KNOWN_UNPARSED:
        return _KNOWN_UNPARSED[suffix]
    common_types, strict_types = _BUILTIN_TYPES.types_map  # indexed by strict=False, True
    return strict_types.get(suffix) or common_types.get(suffix) or OCTET_STREAM


def parser_for(media_type: str) -> ParserSpec | None:
    """The parser for ``media_type``, or ``None`` when Fabric does not parse it."""
    return _PARSERS.get(media_type)
