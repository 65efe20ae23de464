"""Opening a path longer than the system's PATH_MAX (4,096 bytes on Linux): a file deep in a source
folder (nested folders of long names; a copied backup, a build tree) whose full path the kernel
refuses in one call, ``ENAMETOOLONG``, though every folder on the way opens.

:func:`open_path` opens it the way the kernel would read the path, in pieces: each piece a
relative path under PATH_MAX opened from the folder the previous one opened (``openat``), so what
is reached, and which symbolic links are followed (those before the last name, as in any path),
is what one call would reach without the limit.
"""

from __future__ import annotations

import errno
import os

#: The longest piece opened in one call, in bytes: under Linux's PATH_MAX (4,096 with its NUL) and
#: any other system's (macOS: 1,024).
_PIECE_BYTES = 1000
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)


def open_path(path: str | os.PathLike, flags: int, mode: int = 0o777) -> int:
    """``os.open(path, flags, mode)``, also where ``path`` is longer than PATH_MAX: then opened in
    pieces (module docstring). A name longer than NAME_MAX (255 bytes) still fails
    ``ENAMETOOLONG``, as do other errors from the piece they occur in."""
    try:
        return os.open(path, flags, mode)
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        raw = os.fsencode(path)
        if any(len(name) > 255 for name in raw.split(b"/")):
            raise
    pieces, piece = [], b""
    for name in raw.split(b"/")[1:] if raw.startswith(b"/") else raw.split(b"/"):
        if piece and len(piece) + 1 + len(name) > _PIECE_BYTES:
            pieces.append(piece)
            piece = name
        else:
            piece = piece + b"/" + name if piece else name
    pieces.append(piece)
    fd = os.open(b"/" if raw.startswith(b"/") else b".", _FOLDER_FLAGS)
    try:
        for folder in pieces[:-1]:
            fd, previous = os.open(folder, _FOLDER_FLAGS, dir_fd=fd), fd
            os.close(previous)
        return os.open(pieces[-1], flags, mode, dir_fd=fd)
    finally:
        os.close(fd)


__all__ = ["open_path"]
