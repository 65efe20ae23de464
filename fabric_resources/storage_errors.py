"""How a storage library's error reads to a user.

Lance, Arrow and tantivy are Rust: their messages end with the source location of the Rust code
that raised (``…, /rustc/48a2…/library/core/src/ops/function.rs:250:5``, a path of the build
machine's checkout or Cargo registry, ``/home/runner/.cargo/registry/src/…/scalar.rs:133:42``, or
one relative to it, ``rust/lance-io/src/utils.rs:172:20``; a panic says ``panicked at <location>:``).
That location names nothing on the user's machine and changes with every build, so it is cut; the
message itself is kept.
"""

from __future__ import annotations

import os
import re
import shutil

# "<joint><path>file.rs:LINE:COL", the joint being ", ", " at " or a bracket (the location wrapped
# in brackets or parentheses) and the path absolute, relative or none. A location starts a word
# (after a space, ",", "[" or "("), so the scan is linear and "fs:code/main.rs:1:2" is left alone;
# a path's folders hold no separator, so no folder can be read two ways (no backtracking).
_RUST_LOCATION = re.compile(r"(?:,\s*|\s+at\s+|\s*(?=[\[(]))?[\[(]?(?<![^\s,\[(])(?:[A-Za-z]:\\|/)?"
                            r"(?:[^\s,;:\[\]()/\\]+[/\\])*[^\s,;:\[\]()/\\]+\.rs:\d+:\d+[\])]?")


def storage_error_text(exc: BaseException, limit: int = 300) -> str:
    """``"<type>: <message>"`` of ``exc`` without Rust source locations, at most ``limit``
    characters of message."""
    # Only the head is kept, so only the head is searched.
    return f"{type(exc).__name__}: {_RUST_LOCATION.sub('', str(exc)[:4 * limit]).strip()[:limit]}"


#: SQLite's primary result codes of a storage that failed, not of a damaged file (SQLite docs,
#: "Result and Error Codes"): SQLITE_IOERR (10, with extended codes such as SQLITE_IOERR_SHMSIZE:
#: the WAL index could not be grown), SQLITE_FULL (13), SQLITE_CANTOPEN (14).
_SQLITE_STORAGE_CODES = frozenset({10, 13, 14})
#: Below this many free bytes the file system counts as full (SQLite grows its WAL index in 32 KiB
#: steps; a page write needs a page).
FULL_BELOW_BYTES = 1 << 20


def sqlite_storage_fault(exc: BaseException, where: str | os.PathLike) -> str | None:
    """What a SQLite error that is the storage's (``exc.sqlite_errorcode``'s primary code an I/O
    error, full, or cannot open) says to a user, with the free bytes of the file system holding
    ``where``; ``None`` for any other error (a malformed file, a file that is no database).

    A full disk made every read command — ``status``, ``search`` — say the catalog was damaged and
    should be restored from a copy (trial 15, stop 48): a reader of a WAL database must create its
    index file (``-shm``), and on a full disk that fails as ``SQLITE_IOERR_SHMSIZE``."""
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(code, int) or code & 0xFF not in _SQLITE_STORAGE_CODES:
        return None
    name = getattr(exc, "sqlite_errorname", None) or f"SQLite error {code}"
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        free = None
    if free is not None and free < FULL_BELOW_BYTES:
        return (f"the disk holding {where} is full ({free} bytes free): SQLite could not open or write its "
                f"database ({name}); nothing is known to be damaged: free space and run the command again")
    room = f" ({free} bytes free)" if free is not None else ""
    return (f"the storage holding {where}{room} failed a SQLite read or write ({name}: {exc}); nothing is known "
            "to be damaged: check the disk and run the command again")
