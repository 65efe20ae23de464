"""HTML parser plug-in: lxml.html for the element walk, trafilatura for the main-text decision.

The parser is :mod:`.parser`; it runs in a bounded child process
(:mod:`fabric_resources.parsing.isolation`) because libxml2 is C code.
"""

from __future__ import annotations

from fabric_resources.parsing.spec import ParserSpec

PARSER_NAME = "html"
PARSER_VERSION = "8"
MEDIA_TYPE = "text/html"


def _parse(data, config, media_type):
    from fabric_resources.parsing.isolation import run_parser

    return run_parser("fabric_resources.parsing.html.parser:parse_html", data, config, media_type, config.isolation)


SPEC = ParserSpec(
    name=PARSER_NAME,
    version=PARSER_VERSION,
    extensions={".html": MEDIA_TYPE, ".htm": MEDIA_TYPE},
    config_section="html",
    parse=_parse,
)
