"""Deterministic, content-derived identifiers and hashes (DESIGN.md, "Identity")."""

from __future__ import annotations

import hashlib


def text_hash(text: str) -> str:
    """SHA-256 hex of the UTF-8 bytes of ``text``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def derived_id(*parts: object) -> str:
    """128-bit hex ID from the ``\\x1f``-joined string forms of ``parts``."""
    blob = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:32]


def unit_id(parse_id: str, ordinal: int) -> str:
    return derived_id("unit", parse_id, ordinal)


def relationship_id(parse_id: str, ordinal: int) -> str:
    return derived_id("rel", parse_id, ordinal)


def chunk_id(parse_id: str, chunker: str, ordinal: int) -> str:
    return derived_id("chunk", parse_id, chunker, ordinal)
