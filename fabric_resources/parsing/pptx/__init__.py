"""PPTX parser plug-in (python-pptx): slide titles, shapes, tables, speaker notes.

The parser is :mod:`.parser`; it runs in a bounded child process
(:mod:`fabric_resources.parsing.isolation`) because libxml2 is C code.
"""

from __future__ import annotations

from fabric_resources.parsing.spec import ParserSpec

PARSER_NAME = "pptx"
PARSER_VERSION = "3"
MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.presentationml.presentation"


def _parse(data, config, media_type):
    from fabric_resources.parsing.isolation import run_parser

    return run_parser("fabric_resources.parsing.pptx.parser:parse_pptx", data, config, media_type, config.isolation)


SPEC = ParserSpec(
    name=PARSER_NAME,
    version=PARSER_VERSION,
    extensions={".pptx": MEDIA_TYPE},
    config_section="pptx",
    parse=_parse,
)
