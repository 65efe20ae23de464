"""EPUB 2 / EPUB 3 parser plug-in: pure, bounded by admission caps; in-process
(``parsers.epub.isolation``), except a book whose members declare more than
``parsers.epub.subprocess_above_bytes`` (uncompressed): that one runs in a bounded child
(:mod:`fabric_resources.parsing.isolation`), where lxml's time and memory can be stopped.

Four steps, one module each: :mod:`.archive` (zip admission and caps),
:mod:`.package` (container, OPF, encryption), :mod:`.navigation` (nav / NCX),
:mod:`.content` (the walk over spine documents); :mod:`.parser` runs them.
Imported lazily: the registry loads lxml only when an EPUB is parsed.
"""

from __future__ import annotations

from fabric_resources.parsing.epub.identity import PARSER_NAME, PARSER_VERSION, MEDIA_TYPE
from fabric_resources.parsing.spec import ParserSpec


def _parse(data, config, media_type):
    from fabric_resources.parsing.isolation import isolation_for, run_parser
    from fabric_resources.parsing.ooxml import declared_bytes

    return run_parser("fabric_resources.parsing.epub.parser:parse_epub_file", data, config, media_type,
                      isolation_for(declared_bytes(data), config))


SPEC = ParserSpec(
    name=PARSER_NAME,
    version=PARSER_VERSION,
    extensions={".epub": MEDIA_TYPE},
    config_section="epub",
    parse=_parse,
)
