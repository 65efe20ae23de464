"""Plain-text parser plug-in (strict encoding detection, paragraph units).

The parser itself is :mod:`fabric_resources.parsing.text.parser`.
"""

from __future__ import annotations

from fabric_resources.parsing.text.identity import PARSER_NAME, PARSER_VERSION, TEXT_PLAIN
from fabric_resources.parsing.spec import ParserSpec


def _parse(data, config, media_type):
    from fabric_resources.parsing.text.parser import parse_text

    return parse_text(data, config, media_type)


SPEC = ParserSpec(
    name=PARSER_NAME,
    version=PARSER_VERSION,
    extensions={".txt": TEXT_PLAIN, ".text": TEXT_PLAIN},
    config_section="text",
    parse=_parse,
)
