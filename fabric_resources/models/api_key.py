"""API keys for HTTP model endpoints: read once from an owner-only file, never logged."""

from __future__ import annotations

import os
import stat
from pathlib import Path


class ApiKeyFileError(Exception):
    """The key file is missing, empty, not a regular file, or readable by group/others."""


class ApiKey(str):
    """A key string whose ``repr`` hides the value, so it cannot leak through logs or tracebacks."""

    def __repr__(self) -> str:
        return "ApiKey('***')"


def read_api_key(path: str | os.PathLike | None) -> ApiKey | None:
    """The stripped key in ``path``, or ``None`` when no file is configured.

    Raises
    ------
    ApiKeyFileError
        If the file is absent, not a regular file, empty, or its mode grants any permission to
        group or others (it must be 0o600 or stricter, like ssh keys).
    """
    if path is None:
        return None
    p = Path(path)
    try:
        st = p.stat()
    except OSError as exc:
        raise ApiKeyFileError(f"api key file {p}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ApiKeyFileError(f"api key file {p} is not a regular file")
    if st.st_mode & 0o077:
        raise ApiKeyFileError(f"api key file {p} has mode {stat.S_IMODE(st.st_mode):o}; it must be owner-only (chmod 600)")
    key = p.read_text(encoding="utf-8").strip()
    if not key:
        raise ApiKeyFileError(f"api key file {p} is empty")
    return ApiKey(key)
