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

from typing import TYPE_CHECKING

from fabric_resources.parsing.document import ParsedDocument, bad_input_net

if TYPE_CHECKING:  # the config (pydantic) is imported where it is used: a parser child process needs none of it
    from pydantic import BaseModel

    from fabric_resources.config import ParserConfig

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
    environment : Callable[[section_config], str] or None
        For a parser whose units also depend on an external program (the PDF parser's OCR engine):
        a stable description of it (e.g. ``"tesseract 5.3.0 eng+jpn"`` or ``"tesseract absent"``),
        hashed into the identity with the section, so installing or upgrading the engine re-parses.
    """

    name: str
    version: str
    extensions: Mapping[str, str]
    config_section: str
    parse: ParseCallable
    environment: Callable[[Any], str] | None = None

    @property
    def media_types(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.extensions.values()))

    def section(self, parsers: "ParserConfig") -> "BaseModel":
        """This parser's settings in ``parsers``."""
        return getattr(parsers, self.config_section)

    def identity(self, parsers: "ParserConfig") -> ParserIdentity:
        """The identity under ``parsers`` (the config hash covers this parser's section only, and
        the environment description where the spec declares one)."""
        from fabric_resources.config import config_hash

        section = self.section(parsers)
        if self.environment is None:
            return ParserIdentity(self.name, self.version, config_hash(section))
        blob = {"section": section.model_dump(mode="json"), "environment": self.environment(section)}
        return ParserIdentity(self.name, self.version, config_hash(blob))

    def max_bytes(self, parsers: "ParserConfig") -> int | None:
        """The largest file this parser admits under ``parsers`` (its section's ``max_bytes``), or
        ``None`` when it declares no such cap. The source scan checks it before reading a file."""
        return getattr(self.section(parsers), "max_bytes", None)

    def run(self, data: bytes, parsers: "ParserConfig", media_type: str) -> ParsedDocument:
        """Parse ``data`` with this parser's section of ``parsers``.

        Raises
        ------
        ParseError
            With the parser's named reason on bad input; any other exception the plug-in lets out
            (but ``MemoryError``) becomes ``parser-error`` here
            (:func:`~fabric_resources.parsing.document.bad_input_net`), so a plug-in without a
            net of its own still fails only the document it parses.
        """
        return bad_input_net(self.parse)(data, self.section(parsers), media_type)
