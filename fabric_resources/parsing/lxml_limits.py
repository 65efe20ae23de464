"""libxml2's resource limits, made loud.

In recover mode (every HTML parse, and XML parsed with ``recover=True``) libxml2 does not fail at
its limits — elements nested 256 deep, a text node past its buffer limit: it logs
``ERR_RESOURCE_LIMIT`` and stops building the tree there, so everything after that point (later
sibling paragraphs included) is silently missing from a parse that otherwise looks whole. A parse
that lost text that way must fail with a named reason instead (README, "Formats").
"""

from __future__ import annotations

from typing import Any

from fabric_resources.parsing.document import ParseError


def raise_on_resource_limit(parser: Any) -> None:
    """Raise when the lxml ``parser`` (an ``etree.XMLParser`` or ``lxml.html.HTMLParser``, just
    used) stopped at a libxml2 resource limit.

    Raises
    ------
    ParseError
        ``cap-depth`` (elements nested deeper than libxml2 reads: 256 without ``huge_tree``) or
        ``cap-parser-limit`` (another limit, e.g. a text node past libxml2's buffer size).
    """
    for entry in parser.error_log:
        if entry.type_name == "ERR_RESOURCE_LIMIT":
            message = entry.message.strip()
            reason = "cap-depth" if "depth" in message.lower() else "cap-parser-limit"
            raise ParseError(reason, f"libxml2 stopped reading here, the rest would be lost: {message}")


def syntax_error_reason(exc: BaseException, default: str) -> str:
    """``cap-depth`` for libxml2's "Excessive depth in document" (elements nested deeper than the
    256 it reads without ``huge_tree``: a limit, as HTML and EPUB name it), else ``default``."""
    return "cap-depth" if "excessive depth" in str(exc).lower() else default
