"""Markdown parser plug-in: CommonMark block structure through markdown-it-py.

The parser itself is :mod:`fabric_resources.parsing.markdown.parser`. It runs in-process, except a
file over ``parsers.markdown.subprocess_above_bytes``: markdown-it holds a token list of the whole
file before any cap is checked, so a large file runs in a bounded child process
(:mod:`fabric_resources.parsing.isolation`: ``isolation``'s ``timeout_s`` and ``max_memory_bytes``).
"""

from __future__ import annotations

from fabric_resources.parsing.markdown.identity import PARSER_NAME, PARSER_VERSION, TEXT_MARKDOWN
from fabric_resources.parsing.spec import ParserSpec


def _parse(data, config, media_type):
    from fabric_resources.parsing.isolation import isolation_for, run_parser

    return run_parser("fabric_resources.parsing.markdown.parser:parse_markdown", data, config, media_type,
                      isolation_for(len(data), config))


SPEC = ParserSpec(
    name=PARSER_NAME,
    version=PARSER_VERSION,
    extensions={".md": TEXT_MARKDOWN, ".markdown": TEXT_MARKDOWN},
    config_section="markdown",
    parse=_parse,
)
