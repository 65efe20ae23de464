"""JSON error answers: every 4xx and 5xx is ``{"error": {"type", "message"}}`` (plus fields).

The read side's typed errors map to statuses here (:data:`STATUS_OF`); the ``type`` is the
exception's class name, so a client can tell ``QuerySyntaxError`` from ``InvalidArgumentError``.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from fabric_query.errors import (
    CitationError,
    FabricQueryError,
    HomeNotFoundError,
    InvalidArgumentError,
    NoReleaseError,
    QueryCancelled,
    QuerySyntaxError,
    ReleaseUnreadableError,
)

#: Typed read-side errors → HTTP status (the most specific class first).
STATUS_OF: tuple[tuple[type[Exception], int], ...] = (
    (QuerySyntaxError, 400),
    (InvalidArgumentError, 400),
    (CitationError, 400),
    (NoReleaseError, 409),
    (HomeNotFoundError, 503),
    (ReleaseUnreadableError, 503),
    # nginx's "client closed request": the client that asked is gone, so nobody reads it; the
    # server's own log and the Python API see the type.
    (QueryCancelled, 499),
    (FabricQueryError, 400),
)


def error_response(status: int, kind: str, message: str, headers: dict[str, str] | None = None,
                   **extra: Any) -> JSONResponse:
    """One JSON error answer."""
    return JSONResponse({"error": {"type": kind, "message": message, **extra}}, status_code=status,
                        headers=headers)


def status_of(exc: Exception) -> int:
    return next(code for cls, code in STATUS_OF if isinstance(exc, cls))
