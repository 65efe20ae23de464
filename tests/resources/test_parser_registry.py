"""The parser slot: plug-ins are discovered from their folders and declare everything the registry needs."""

from __future__ import annotations

import pytest

from fabric_resources.config import EpubParserConfig, ParserConfig, TextParserConfig
from fabric_resources.parsing import registry
from fabric_resources.parsing.spec import ParserSpec


def test_every_plugin_folder_is_discovered_with_a_config_section():
    """guards against: a parser package that the registry silently misses, or one whose settings
    are not a ParserConfig section (its caps would then not enter the parse ID)."""
    names = {spec.name for spec in registry.PARSERS}
    assert {"text", "epub"} <= names
    for spec in registry.PARSERS:
        assert spec.config_section in ParserConfig.model_fields, spec.name
        for ext, media_type in spec.extensions.items():
            assert registry.detect_media_type(f"a/b{ext.upper()}") == media_type
            assert registry.parser_for(media_type) is spec
        assert registry.parser_named(spec.name) is spec


def test_two_plugins_claiming_one_extension_is_an_error():
    def parse(data, config, media_type):  # never called
        raise AssertionError

    a = ParserSpec("a", "1", {".x": "text/x-a"}, "text", parse)
    b = ParserSpec("b", "1", {".x": "text/x-b"}, "text", parse)
    with pytest.raises(RuntimeError, match=r"\.x"):
        registry._index((a, b))
    c = ParserSpec("c", "1", {".y": "text/x-a"}, "text", parse)
    with pytest.raises(RuntimeError, match="text/x-a"):
        registry._index((a, c))


def test_identity_hashes_only_the_parsers_own_section():
    """guards against: an EPUB cap change re-parsing every text file (or not re-parsing EPUBs)."""
    text, epub = registry.parser_named("text"), registry.parser_named("epub")
    base = ParserConfig()
    other_epub = ParserConfig(epub=EpubParserConfig(max_members=7))
    other_text = ParserConfig(text=TextParserConfig(max_bytes=1234))
    assert text.identity(base) == text.identity(other_epub)
    assert text.identity(base) != text.identity(other_text)
    assert epub.identity(base) != epub.identity(other_epub)
    assert epub.identity(base) == epub.identity(other_text)
