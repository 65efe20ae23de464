"""The parser slot's contract: what a parser plug-in declares about itself.

A plug-in is a sub-package of :mod:`fabric_resources.parsing` whose
``__init__`` defines ``SPEC``, a :class:`ParserSpec`. The registry
(:mod:`fabric_resources.parsing.registry`) discovers every such package and
derives the extension and media-type maps from the specs, so adding a format
touches one folder and its config section.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from fabric_resources.config import ParserConfig, config_hash
from fabric_resources.parsing.document import ParsedDocument

#: ``parse(data, section_config, media_type)``; raises
#: :class:`~fabric_resources.parsing.document.ParseError` on bad input.
ParseCallable = Callable[[bytes, Any, str], ParsedDocument]


@dataclass(frozen=True)
class ParserIdentity:
    """``(name, version, config_hash)``: with the source hash it makes the parse ID."""

    name: str
    version: str
    config_hash: str


@dataclass(frozen=True)
class ParserSpec:
    """A parser plug-in and what it handles.

    Attributes
    ----------
    name, version : str
        The parser identity; bump ``version`` whenever the units it produces for the same bytes
        change, so those bytes get a new parse ID (and a re-parse).
    extensions : Mapping[str, str]
        File-name extensions (lower case, with the dot) -> the media type each means.
    config_section : str
        The field of :class:`~fabric_resources.config.ParserConfig` holding this parser's
        settings; its hash enters the parse ID.
    parse : ParseCallable
        ``parse(data, section_config, media_type) -> ParsedDocument``. Pure: reads nothing but
        ``data``. Raises ``ParseError`` with a named reason on bad input.
    """

    name: str
    version: str
    extensions: Mapping[str, str]
    config_section: str
    parse: ParseCallable

    @property
    def media_types(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.extensions.values()))

    def section(self, parsers: ParserConfig) -> BaseModel:
        """This parser's settings in ``parsers``."""
        return getattr(parsers, self.config_section)

    def identity(self, parsers: ParserConfig) -> ParserIdentity:
        """The identity under ``parsers`` (the config hash covers this parser's section only)."""
        return ParserIdentity(self.name, self.version, config_hash(self.section(parsers)))

    def run(self, data: bytes, parsers: ParserConfig, media_type: str) -> ParsedDocument:
        """Parse ``data`` with this parser's section of ``parsers``."""
        return self.parse(data, self.section(parsers), media_type)
