"""Markdown parser plug-in: CommonMark block structure through markdown-it-py.

The parser itself is :mod:`fabric_resources.parsing.markdown.parser`.
"""

from __future__ import annotations

from fabric_resources.parsing.markdown.identity import PARSER_NAME, PARSER_VERSION, TEXT_MARKDOWN
from fabric_resources.parsing.spec import ParserSpec


def _parse(data, config, media_type):
    from fabric_resources.parsing.markdown.parser import parse_markdown

    return parse_markdown(data, config, media_type)


SPEC = ParserSpec(
    name=PARSER_NAME,
    version=PARSER_VERSION,
    extensions={".md": TEXT_MARKDOWN, ".markdown": TEXT_MARKDOWN},
    config_section="markdown",
    parse=_parse,
)
