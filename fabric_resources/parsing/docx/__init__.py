"""DOCX parser plug-in (python-docx, plus the footnote and endnote parts it has no API for).

The parser is :mod:`.parser`; it runs in a bounded child process
(:mod:`fabric_resources.parsing.isolation`) because libxml2 is C code.
"""

from __future__ import annotations

from fabric_resources.parsing.spec import ParserSpec

PARSER_NAME = "docx"
PARSER_VERSION = "3"
MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def _parse(data, config, media_type):
    from fabric_resources.parsing.isolation import run_parser

    return run_parser("fabric_resources.parsing.docx.parser:parse_docx", data, config, media_type, config.isolation)


SPEC = ParserSpec(
    name=PARSER_NAME,
    version=PARSER_VERSION,
    extensions={".docx": MEDIA_TYPE},
    config_section="docx",
    parse=_parse,
)
