"""How a storage library's error reads to a user.

Lance, Arrow and tantivy are Rust: their messages end with the source location of the Rust code
that raised (``…, /rustc/48a2…/library/core/src/ops/function.rs:250:5`` or a path of the build
machine's checkout). That location names nothing on the user's machine and changes with every
build, so it is cut; the message itself is kept.
"""

from __future__ import annotations

import re

# ", /any/path/file.rs:LINE:COL" (optionally wrapped in brackets or parentheses), wherever it occurs.
_RUST_LOCATION = re.compile(r",?\s*[\[(]?(?:/|[A-Za-z]:\\)[^\s,;\])]*\.rs:\d+:\d+[\])]?")


def storage_error_text(exc: BaseException, limit: int = 300) -> str:
    """``"<type>: <message>"`` of ``exc`` without Rust source locations, at most ``limit``
    characters of message."""
    # Only the head is kept, so only the head is searched (the pattern scans ahead from each "/").
    return f"{type(exc).__name__}: {_RUST_LOCATION.sub('', str(exc)[:4 * limit]).strip()[:limit]}"
