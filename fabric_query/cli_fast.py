"""``fabric search`` answered by a running ``fabric serve`` before the full CLI loads.

Loading Typer, Click, rich and pydantic costs a cold process about half a second, ten times the
search itself on a warm server. :func:`run` therefore tries the plainest invocation first, with
the standard library only: ``fabric search QUERY [--limit N | -n N] [--json] [--home PATH]``
(options anywhere, ``--`` ends them). It finds the home's server through
:mod:`fabric_query.remote`, prints the answer with :mod:`fabric_query.cli_text` (the function the
in-process path prints with, so the output is the same), and returns the exit code.

It returns ``None``, and the full CLI runs as if this module did not exist, whenever it is not
sure: another command, ``--help``, an option it does not know or a value out of range, no server
for the home, a server that cannot answer (not ready, gate full, gone). A request the server
refuses prints the same ``error:`` line as the full CLI (:func:`fabric_query.cli_text.error_line`)
and exits 2. So this path can only be faster, never different.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

#: ``fabric search --limit``'s bounds; the full CLI declares its option with these same constants.
LIMIT_MIN, LIMIT_MAX = 1, 1000


class _NotMine(Exception):
    """The arguments are not the plain search this path handles."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print usage and exit; the full CLI answers instead
        raise _NotMine(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fabric search", add_help=False, allow_abbrev=False)
    p.add_argument("query")
    p.add_argument("--limit", "-n", type=int, default=10)
    p.add_argument("--json", action="store_true", dest="as_json")
    p.add_argument("--home", default=None)  # a str: Path("") is ".", and the full CLI refuses ""
    return p


def parse_search(argv: Sequence[str]) -> argparse.Namespace | None:
    """``argv`` (without the program name) as a plain ``fabric search``, or None if it is anything else.

    >>> parse_search(["search", "-n", "3", "heat transfer"]).limit
    3
    >>> parse_search(["search", "x", "--help"]) is None, parse_search(["status"]) is None
    (True, True)
    >>> parse_search(["search", "x", "--limit", "0"]) is None, parse_search(["search", "x", "--home", ""]) is None
    (True, True)
    >>> parse_search(["search", "x", "--home", "  "]) is None  # spaces only: the full CLI refuses it
    True
    """
    if not argv or argv[0] != "search":
        return None
    try:
        args = _parser().parse_args(list(argv[1:]))
    except (_NotMine, ValueError):
        return None
    if not LIMIT_MIN <= args.limit <= LIMIT_MAX or (args.home is not None and not args.home.strip()):
        return None
    if any("\ud800" <= c <= "\udfff" for c in args.query):
        return None  # an undecodable byte (PEP 383): the full CLI names it as the in-process search does
    if args.query.startswith("-") and "--" not in argv:
        # argparse takes "-harbour tea" (a space inside) for the query; Click, the full CLI's
        # parser, for an unknown option. Both paths must answer alike: the full CLI decides.
        return None
    return args


def run(argv: Sequence[str]) -> int | None:
    """Answer ``fabric <argv>`` through the home's running server: the exit code, or None to run the full CLI."""
    args = parse_search(argv)
    if args is None:
        return None
    from fabric_query.cli_text import error_line, pack_json, render_pack, uses_colour
    from fabric_query.remote import RemoteError, call
    from fabric_resources.home_location import HomeUnusableError, home_path

    try:
        home = home_path(args.home)
    except HomeUnusableError:
        return None  # the full CLI says why, as for every other command
    try:
        pack = call(home, "POST", "/v1/search", {"query": args.query, "limit": args.limit})
    except RemoteError as exc:
        sys.stderr.write(error_line(f"{exc.kind}: {exc}", colour=uses_colour(sys.stderr)))
        return 2
    if not isinstance(pack, dict):
        return None

    try:
        if args.as_json:
            out, err = pack_json(pack), ""
        else:
            out, err = render_pack(pack, colour_out=uses_colour(sys.stdout), colour_err=uses_colour(sys.stderr))
    except (KeyError, TypeError, AttributeError):
        return None  # not the pack this version prints; let the full CLI validate it and say why
    sys.stderr.write(err)
    sys.stdout.write(out)
    sys.stdout.flush()
    return 0
