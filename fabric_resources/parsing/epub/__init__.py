"""EPUB 2 / EPUB 3 parser plug-in: in-process, pure, bounded by admission caps.

Four steps, one module each: :mod:`.archive` (zip admission and caps),
:mod:`.package` (container, OPF, encryption), :mod:`.navigation` (nav / NCX),
:mod:`.content` (the walk over spine documents); :mod:`.parser` runs them.
Imported lazily: the registry loads lxml only when an EPUB is parsed.
"""

from __future__ import annotations

from fabric_resources.parsing.epub.identity import PARSER_NAME, PARSER_VERSION, MEDIA_TYPE
from fabric_resources.parsing.spec import ParserSpec


def _parse(data, config, media_type):
    from fabric_resources.parsing.epub.parser import parse_epub

    return parse_epub(data, config)


SPEC = ParserSpec(
    name=PARSER_NAME,
    version=PARSER_VERSION,
    extensions={".epub": MEDIA_TYPE},
    config_section="epub",
    parse=_parse,
)
