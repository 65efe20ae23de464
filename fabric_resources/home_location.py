"""Where a Fabric home is: ``explicit``, else ``$FABRIC_HOME``, else ``./.fabric``.

Kept apart from :mod:`fabric_resources.home` (which opens the home's stores and imports Arrow,
Lance and tantivy) so that a command that only needs the path, such as a ``fabric search`` answered
by a running server, starts without them.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_HOME = ".fabric"

#: Each path :func:`home_path` gave, by it, as it was given (absolute) where a link made them
#: differ: :func:`no_home_message` names the path the user typed, not only the link's target.
_AS_GIVEN: dict[Path, Path] = {}


class HomeUnusableError(Exception):
    """The home's path cannot hold a home: it is a file, lies under one, cannot be created, or is
    a symbolic link loop. (Here, beside :func:`home_path`, which raises it before anything heavy is
    imported; :mod:`fabric_resources.home` re-exports it.)"""


def home_path(explicit: str | os.PathLike | None = None) -> Path:
    """The home directory: ``explicit``, else ``$FABRIC_HOME``, else ``./.fabric`` (absolute).

    A leading ``~`` is the user's home folder: a shell expands it only where it starts a word
    unquoted, and systemd's ``Environment=``, Docker's ``--env-file`` or ``--home '~/x'`` pass it
    as it is, so the home was made in a folder named ``~`` under whatever the working folder was.

    Raises :class:`HomeUnusableError` when the path is a symbolic link loop (``a -> b -> a``):
    pathlib's ``RuntimeError`` ("Symlink loop") was a traceback from every command.
    """
    chosen = os.fspath(explicit or os.environ.get("FABRIC_HOME") or DEFAULT_HOME)
    try:
        resolved = Path(os.path.expanduser(chosen)).resolve()
    except (RuntimeError, OSError) as exc:  # the loop: RuntimeError to Python 3.12, OSError (ELOOP) after
        raise HomeUnusableError(f"cannot use {chosen} as a Fabric home: it is a symbolic link loop, or lies under "
                                f"one ({exc}); choose another folder") from None
    given = Path(os.path.abspath(os.path.expanduser(chosen)))
    if given != resolved:
        _AS_GIVEN[resolved] = given
    return resolved


def no_home_message(path: str | os.PathLike) -> str:
    """Why a command that needs a home found none at ``path``: a path that does not exist is
    named as such (a mistyped ``--home``), before the way to make a home there (``fabric ingest``).

    >>> no_home_message("/nonexistent/home")  # doctest: +ELLIPSIS
    'no Fabric home at /nonexistent/home: no such folder (is --home, else $FABRIC_HOME, mistyped?); ...'
    """
    given = _AS_GIVEN.get(Path(path))
    # A link to nothing named its target alone: not the path the user typed (trial 20f).
    where = f"{given} (which leads to {path})" if given is not None else f"{path}"
    if not os.path.exists(path):  # a link to nothing too
        return (f"no Fabric home at {where}: no such folder (is --home, else $FABRIC_HOME, mistyped"
                f"{', or its link broken' if given is not None else ''}?); `fabric ingest PATH` makes a home there")
    return f"no Fabric home at {where}; run `fabric ingest PATH` first"


def read_only_file_system(path: str | os.PathLike) -> bool:
    """Whether ``path`` (a folder, or a file's folder when it is no folder) is on a file system
    mounted read-only (``statvfs``'s ``ST_RDONLY``); False when it cannot be told (no such path)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # missing (reported where it is used), or no statvfs here
        return False
