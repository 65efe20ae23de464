"""The input arguments of ``fabric resolve`` and ``fabric audit``: a citation or pack as JSON,
a file holding it, or ``-`` for stdin (kept apart from :mod:`fabric_query.cli`, which is at the
line limit of ``tests/test_layering.py``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


_GIVE = "give a citation or pack JSON file, the JSON itself, or - for stdin"


class ArgumentError(ValueError):
    """The argument names no JSON; the message is the one-line reason."""


def read_json_argument(argument: str) -> object:
    """The JSON an argument names: ``-`` (stdin), a file holding it, or the JSON itself.

    Raises :class:`ArgumentError` with a one-line reason when it is a folder or another non-regular
    file (a device, a FIFO), a file that cannot be read or is not UTF-8 text, not JSON (nesting
    too deep for the decoder included), or empty (``''``, which pathlib reads as the working folder)."""
    if not argument.strip():
        raise ArgumentError(f"the citation argument is empty: {_GIVE}")
    if argument == "-":
        raw, where = sys.stdin.read(), "stdin"
    else:
        path = Path(argument)
        try:  # JSON given inline is no file name (and may be too long to be one: ENAMETOOLONG)
            is_dir, is_file, exists = path.is_dir(), path.is_file(), path.exists()
        except OSError:
            is_dir = is_file = exists = False
        if is_dir:
            raise ArgumentError(f"{argument} is a folder: {_GIVE}")
        if exists and not is_file:  # a device, FIFO or socket: never read (/dev/zero has no end)
            raise ArgumentError(f"{argument} is not a regular file: {_GIVE}")
        if is_file:
            try:
                raw = path.read_bytes().decode("utf-8")
            except OSError as exc:
                raise ArgumentError(f"cannot read {argument}: {exc.strerror or exc}")
            except UnicodeDecodeError:
                raise ArgumentError(f"not JSON: {argument} is not UTF-8 text")
            where = "the file"
        else:
            raw, where = argument, "the argument" if argument.lstrip()[:1] in ("{", "[") else None
    try:
        return json.loads(raw)
    except ValueError as exc:  # no JSON look and no such file: a mistyped file name, not a JSON error
        raise ArgumentError(f"not JSON: {where}: {exc}" if where
                            else f"{argument}: no such file (nor citation or pack JSON)") from None
    except RecursionError:  # nesting deeper than the decoder's stack: no citation is shaped so
        raise ArgumentError(f"not JSON: {where} nests arrays or objects too deeply")
