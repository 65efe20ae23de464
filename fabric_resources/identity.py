"""Deterministic, content-derived identifiers and hashes (DESIGN.md, "Identity")."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

#: What a parse ID looks like (:func:`parse_id` makes 32 lowercase hex digits; IDs of 16 to 64 are
#: accepted, as the table filters accept them). Anything else is never a parse ID, whatever a
#: partition key says.
_PARSE_ID_SHAPE = re.compile(r"[0-9a-f]{16,64}")
#: The longest source key (Unicode scalars) a citation, a scope or a request may carry: a bound on
#: input from the network. A file whose key would be longer (a path deeper than PATH_MAX below its
#: root) is skipped by the scan with the reason ``key-too-long``, not taken in uncitable.
MAX_SOURCE_KEY_CHARS = 4096


def text_hash(text: str) -> str:
    """SHA-256 hex of the UTF-8 bytes of ``text``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def derived_id(*parts: object) -> str:
    """128-bit hex ID from the ``\\x1f``-joined string forms of ``parts``."""
    blob = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:32]


def parse_id(source_hash: str, parser_name: str, parser_version: str, parser_config_hash: str) -> str:
    """Deterministic parse ID from the content hash and the parser identity: the same bytes through
    the same parser always get the same partition (no re-parse, no re-embedding on return)."""
    return derived_id(source_hash, parser_name, parser_version, parser_config_hash)


def is_parse_id(text: str) -> bool:
    """Whether ``text`` has the shape of a parse ID (lowercase hex, 16 to 64 digits).

    >>> is_parse_id(parse_id("ab" * 32, "text", "3", "c0ffee"))
    True
    >>> [is_parse_id(t) for t in ("", "junk", "x' OR '1'='1", "../../etc", "A" * 32)]
    [False, False, False, False, False]
    """
    return _PARSE_ID_SHAPE.fullmatch(text) is not None


def unit_id(parse_id: str, ordinal: int) -> str:
    return derived_id("unit", parse_id, ordinal)


def relationship_id(parse_id: str, ordinal: int) -> str:
    return derived_id("rel", parse_id, ordinal)


def chunk_id(parse_id: str, chunker: str, ordinal: int) -> str:
    return derived_id("chunk", parse_id, chunker, ordinal)


def weights_fingerprint(path: Path) -> str:
    """12 hex of SHA-256 over a weights file's first MiB and its size: cheap, and it changes
    whenever the weights do (model identity on every projection row)."""
    path = Path(path)
    h = hashlib.sha256()
    with path.open("rb") as fh:
        h.update(fh.read(1 << 20))
    h.update(str(path.stat().st_size).encode())
    return h.hexdigest()[:12]
