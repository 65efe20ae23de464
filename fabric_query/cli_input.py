"""The input arguments of ``fabric resolve`` and ``fabric audit`` (a citation or pack as JSON,
a file holding it, or ``-`` for stdin), and the ``fabric search`` a mistyped one meant (kept apart
from :mod:`fabric_query.cli`, which is at the line limit of ``tests/test_layering.py``)."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: ``fabric search``'s options: those that take a value, and flags (``--help`` never errs).
_VALUED = ("--limit", "-n", "--home")
_FLAGS = ("--json", "--debug")


@dataclass(frozen=True)
class SearchRewrite:
    """The ``fabric search`` command a refused argument list most likely meant: its options, in
    the order given, then its query words joined into one argument. ``moved``: the options that
    stood after ``--`` (which ends options, so Click read them as query words); ``as_words``: the
    query if those were query words after all (every argument after ``--``, in order)."""

    options: tuple[str, ...]
    moved: tuple[str, ...]
    words: tuple[str, ...]
    as_words: str

    def command(self, *, with_moved: bool = True) -> str:
        """The command line, quoted for a POSIX shell (``--`` before a query that starts with
        ``-``); without ``with_moved``, the options after ``--`` stay in the query, as its words.

        >>> search_rewrite(["--", "-draft", "notes", "-n", "3"]).command()
        "fabric search -n 3 -- '-draft notes'"
        >>> search_rewrite(["--", "-draft", "notes", "-n", "3"]).command(with_moved=False)
        "fabric search -- '-draft notes -n 3'"
        """
        options, query = ((*self.options, *self.moved), " ".join(self.words)) if with_moved else \
            (self.options, self.as_words)
        end = ("--",) if query.startswith("-") else ()
        return shlex.join(("fabric", "search", *options, *end, query))


def _option(args: Sequence[str], i: int) -> int:
    """How many arguments from ``args[i]`` make one ``fabric search`` option (0: none does). A
    ``-n``/``--limit`` takes a whole number only, so ``grep -n flag`` stays query words."""
    a = args[i]
    if a in _FLAGS:
        return 1
    name, eq, value = a.partition("=")
    if eq and name in ("--limit", "--home"):
        return 1 if name == "--home" or value.isdigit() else 0
    if a.startswith("-n") and a[2:].isdigit():
        return 1
    if a in _VALUED and i + 1 < len(args):
        return 2 if a == "--home" or args[i + 1].isdigit() else 0
    return 0


def search_rewrite(given: Sequence[str]) -> SearchRewrite | None:
    """Read ``given`` (``fabric search``'s arguments) as its options and query words, wherever they
    stand; None when it holds no query word.

    Before ``--``, an argument no option takes is a query word (a Click error on it: ``-draft``
    read as options ``-d -r …``, a second word an extra argument); after it, every argument is a
    query word to Click, and those shaped like this command's options (``-n 3``, ``--json``) are
    ``moved`` here: most likely meant as options, though they may be query words
    (:meth:`SearchRewrite.command` gives both readings).

    >>> r = search_rewrite(["-n", "3", "lamp", "keeper"])
    >>> r.options, r.words, r.moved, r.command()
    (('-n', '3'), ('lamp', 'keeper'), (), "fabric search -n 3 'lamp keeper'")
    >>> search_rewrite(["--", "grep", "-n", "flag"]).words  # -n takes a number: "flag" is a word
    ('grep', '-n', 'flag')
    """
    options: list[str] = []
    moved: list[str] = []
    words: list[str] = []
    before: list[str] = []  # the query words before `--`
    args = list(given)
    cut = args.index("--") if "--" in args else len(args)
    i = 0
    while i < len(args):
        if i == cut:
            i += 1
            continue
        n = _option(args, i)
        if n:
            (moved if i > cut else options).extend(args[i:i + n])
            i += n
        else:
            words.append(args[i])
            if i < cut:
                before.append(args[i])
            i += 1
    if not words:
        return None
    return SearchRewrite(tuple(options), tuple(moved), tuple(words), " ".join((*before, *args[cut + 1:])))


_GIVE = "give a citation or pack JSON file, the JSON itself, or - for stdin"


class ArgumentError(ValueError):
    """The argument names no JSON; the message is the one-line reason."""


#: The most bytes a citation or pack argument may hold: 64 MiB. A pack of ``MAX_LIMIT`` hits with
#: their windows is a few MB; the bound keeps 300 MB of whitespace piped in by mistake (trial 24e)
#: from being read whole into memory before it is refused.
MAX_ARGUMENT_BYTES = 64 * 1024 * 1024


def _bounded_utf8(stream, name: str) -> str:
    """At most :data:`MAX_ARGUMENT_BYTES` of ``stream`` as UTF-8 text; raises :class:`ArgumentError`
    when there is more, or when the bytes are not UTF-8."""
    data = stream.read(MAX_ARGUMENT_BYTES + 1)
    if len(data) > MAX_ARGUMENT_BYTES:
        raise ArgumentError(f"{name} holds over {MAX_ARGUMENT_BYTES // (1024 * 1024)} MiB: no citation or "
                            f"pack is that large; {_GIVE}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ArgumentError(f"not JSON: {name} is not UTF-8 text") from None


def read_json_argument(argument: str) -> object:
    """The JSON an argument names: ``-`` (stdin), a file holding it, or the JSON itself.

    Raises :class:`ArgumentError` with a one-line reason when it is a folder or another non-regular
    file (a device, a FIFO), a file that cannot be read, is not UTF-8 text or holds over
    :data:`MAX_ARGUMENT_BYTES`, not JSON (nesting
    too deep for the decoder included), or empty (``''``, which pathlib reads as the working folder)."""
    if not argument.strip():
        raise ArgumentError(f"the citation argument is empty: {_GIVE}")
    if argument == "-":
        raw, where = _bounded_utf8(sys.stdin.buffer, "stdin"), "stdin"
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
                with path.open("rb") as stream:
                    raw = _bounded_utf8(stream, argument)
            except OSError as exc:
                raise ArgumentError(f"cannot read {argument}: {exc.strerror or exc}")
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
