"""What the read commands print: an EvidencePack's text and the ``error:`` line, one definition
for both paths of ``fabric search``.

The pack arrives as a JSON object, ``EvidencePack.model_dump(mode="json")`` in-process or the
body of ``POST /v1/search`` from a running ``fabric serve``, and :func:`render_pack` turns it into
the text of stdout and of stderr. Both paths call it, so their output is the same by
construction. It imports only the standard library: the fast path
(:mod:`fabric_query.cli_fast`) answers without loading pydantic or rich. Nothing here is rich
markup: text is printed as it is, brackets included.

Colour (ANSI SGR codes, ECMA-48) is used only where the stream is a terminal and ``NO_COLOR`` is
unset (https://no-color.org). Lines are not wrapped: the terminal wraps them, and a pipe gets
whole lines. Text taken from documents has its control characters shown as ``\\xNN`` escapes, so
a document cannot move the cursor or rewrite the screen of whoever reads the results.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import signal
import sys
from collections.abc import Collection, Mapping
from typing import Any, NoReturn, TextIO

from fabric_query.labels import label_of_locations

#: ``EvidencePack.fallback_reason`` when the release names sources no longer visible
#: (:data:`fabric_query.release.VISIBLE_SOURCES_ONLY`; tests/query/test_cli_text.py checks they agree).
VISIBLE_SOURCES_ONLY = "visible-sources-only"
#: What became of a changed file's new version (``Hit.source_changed``), as a hit says it.
_NEWER = {"failed": "failed to parse (see `fabric status`)", "held": "is held by a failed check (see `fabric status`)",
          "pending": "is not parsed yet", "parsed": "is not searchable yet",
          "unparsed": "is not parsed (a type Fabric does not parse, or over a size cap)"}
#: Characters of a hit's text printed before ``…``.
HIT_TEXT_CHARS = 600
#: Other files holding a hit's bytes named under it (``also in:``); the rest are counted (``--json`` lists all).
ALSO_IN_SHOWN = 3

_BOLD, _DIM, _RED, _YELLOW, _BOLD_YELLOW, _RESET = "\x1b[1m", "\x1b[2m", "\x1b[31m", "\x1b[33m", "\x1b[1;33m", "\x1b[0m"
# C0 controls but tab and newline, DEL, C1 controls (ESC and CSI among them), and the bidirectional
# embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), which reorder what follows on
# the line: `report\u202etxt.exe` shows as `reportexe.txt` ("Trojan Source", CVE-2021-42574).
# The marks (U+200E, U+200F, U+061C) reorder nothing on their own and stay.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def uses_colour(stream: TextIO) -> bool:
    """Whether to colour ``stream``: a terminal, ``NO_COLOR`` unset and ``TERM`` not ``dumb``."""
    if "NO_COLOR" in os.environ or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def shown(text: str) -> str:
    r"""``text`` with its control characters (but tab and newline) as ``\xNN`` escapes, and its
    bidirectional embeddings, overrides and isolates as ``\uNNNN``.

    >>> shown("a\x1b[2Jb\tc")
    'a\\x1b[2Jb\tc'
    >>> shown("report\u202etxt.exe")
    'report\\u202etxt.exe'
    """
    return _CONTROL.sub(_escaped, text)


def _escaped(m: re.Match) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def one_line(text: str) -> str:
    r"""``text`` for a field that must stay on its line (a source key, a label, a note): as
    :func:`shown`, and newline and tab escaped too, so a file named ``x\n2. fs:a/trusted.md`` cannot
    print as a hit of its own.

    >>> one_line("x\n2. fs:a/b.md\tc")
    'x\\x0a2. fs:a/b.md\\x09c'
    """
    return shown(text).replace("\n", "\\x0a").replace("\t", "\\x09")


# Characters that show nothing on a terminal: zero-width space, word joiner, BOM (ZWJ and ZWNJ join
# or part letters, in emoji sequences and Persian names, and stay).
_INVISIBLE = re.compile("[\u200b\u2060\ufeff]")


def shown_key(key: str) -> str:
    r"""A source key or path as every line that names a file prints it: :func:`one_line` (control
    characters escaped), and in double quotes when a name in it begins or ends with white space
    (``"fs:notes/draft.txt "``: the space was invisible at a line's end or before ``: reason``)
    or holds a zero-width character (escaped as ``\uNNNN``). Other names print as they are; a
    shell reads the quoted form back as the key (``fabric status --source "fs:notes/draft.txt "``).
    ``--json`` values are the keys themselves.

    >>> shown_key("fs:notes/a b.txt"), shown_key("fs:notes/draft.txt "), shown_key("fs:notes/ a/x.txt")
    ('fs:notes/a b.txt', '"fs:notes/draft.txt "', '"fs:notes/ a/x.txt"')
    >>> shown_key("fs:notes/x\u200b.txt"), shown_key("fs:notes/\u00a0.txt"), shown_key("fs:n/\x01.txt")
    ('"fs:notes/x\\u200b.txt"', '"fs:notes/\xa0.txt"', 'fs:n/\\x01.txt')
    """
    line = one_line(key)
    text = _INVISIBLE.sub(_escaped, line)
    if text != line or any(n and (n[0].isspace() or n[-1].isspace()) for n in key.split("/")):
        return f'"{text}"'
    return text


def _style(text: str, code: str, colour: bool) -> str:
    return f"{code}{text}{_RESET}" if colour and text else text


def _hit_text(hit: Mapping[str, Any], colour: bool) -> str:
    budget, parts = HIT_TEXT_CHARS, []
    for seg in hit.get("highlights") or ():
        piece = seg["text"][:budget]
        budget -= len(piece)
        parts.append(_style(shown(piece), _BOLD_YELLOW, colour) if seg["highlighted"] else shown(piece))
        if budget <= 0:
            break
    return "".join(parts) + ("…" if len(hit["text"]) > HIT_TEXT_CHARS else "")


def left_out_until(entry: str, in_index: Collection[str]) -> str:
    """What ``fabric status`` says of a source a dense channel leaves out (``entry``, as
    ``Status.dense_sources_left_out`` names it), naming the command that mends its damage: the
    ANN index's rows of it (``in_index``: ``dense_index_sources_left_out``) are rebuilt from the
    stored vectors; stored vectors are re-embedded (``fabric repair`` reads the tables only)."""
    if entry in in_index:
        return ("found by words only until `fabric dense-index-repair` rebuilds the ANN index (the index's rows "
                "of this source differ from the stored vectors it was built from)")
    return "found by words only until `fabric repair`"


def render_pack(pack: Mapping[str, Any], *, colour_out: bool = False, colour_err: bool = False) -> tuple[str, str]:
    """The text ``fabric search`` prints for ``pack``: ``(stdout, stderr)``, each ending in a newline or empty.

    stderr: why the release answered from its visible sources only, or why the word index was
    unusable, then one line per skipped channel, then a line when no lexical channel matched
    anything (``no_lexical_match``), then a line naming how many chunks were left out because their
    stored text was altered (``altered_chunks``), then one naming the sources whose vectors the
    dense ranking left out (``dense_sources_left_out``; those whose ANN index rows alone are damaged,
    ``dense_index_sources_left_out``, on a line of their own naming the command that mends them), then one per quoted phrase not looked for across
    every context-window boundary (``unchecked_phrase_seams``). stdout: "no results (…)" followed by one indented line per
    ``unmatched_filters`` entry, or per hit a line with
    its rank, source key, location label and section path, a line with its channels, parse and
    unit count (and "dense only, below the similarity floor" for ``below_dense_floor``), a line
    naming the other files that hold the same bytes (``also_cited_by``), a line naming where the
    same text is too (``same_text``: other versions, copies), a line
    saying the hit quotes an older version when ``source_changed``, and its text with the matched words highlighted (the first
    :data:`HIT_TEXT_CHARS` characters, then ``…``).

    Raises
    ------
    KeyError
        ``pack`` lacks a field an EvidencePack always has.
    """
    err: list[str] = []
    reason = pack.get("fallback_reason")
    if reason == VISIBLE_SOURCES_ONLY:
        err.append(_style(f"release {pack['release_id']} names sources deleted since; answered from its visible "
                          "sources only", _YELLOW, colour_err))
    elif reason:
        err.append(_style(f"lexical index unusable ({shown(reason)}); answered by scanning chunks",
                          _YELLOW, colour_err))
    dense_reason = pack.get("dense_fallback_reason")
    if dense_reason:
        err.append(_style(f"dense index unusable ({shown(dense_reason)}); answered by the exact product",
                          _YELLOW, colour_err))
    for channel, why in (pack.get("skipped_channels") or {}).items():
        err.append(_style(f"skipped {one_line(channel)}: {one_line(why)}", _YELLOW, colour_err))
    if pack["results"] and pack.get("no_lexical_match"):
        err.append(_style("no word or substring matched: every hit is a dense neighbour, not a match of the "
                          "query's words", _YELLOW, colour_err))
    altered = pack.get("altered_chunks") or ()
    if altered:
        err.append(_style(f"{len(altered)} chunk(s) left out: their stored text differs from the hash recorded "
                          "when they were cut (restore the home from a snapshot, or re-ingest)", _YELLOW, colour_err))
    in_index = pack.get("dense_index_sources_left_out") or ()
    vectors = [k for k in pack.get("dense_sources_left_out") or () if k not in in_index]
    for left_out, what in ((vectors, "stored vectors differ from the digest recorded when they were written "
                                     "(`fabric repair` re-embeds them)"),
                           (in_index, "their rows in the ANN index differ from the stored vectors it was built "
                                      "from (`fabric dense-index-repair` rebuilds it)")):
        if left_out:
            more = f" and {len(left_out) - 5} more" if len(left_out) > 5 else ""
            err.append(_style(f"dense ranking left out {', '.join(one_line(k) for k in left_out[:5])}{more}: "
                              f"{what}; found by their words only", _YELLOW, colour_err))
    for phrase in pack.get("unchecked_phrase_seams") or ():
        err.append(_style(f'phrase "{one_line(phrase)}" not looked for across context-window boundaries: its '
                          "rarest word is in too many windows (an occurrence cut by one may be missing)",
                          _YELLOW, colour_err))
    out: list[str] = []
    if not pack["results"]:
        out.append(f"no results (release {pack['release_id']}, {pack['eligible_sources']} eligible sources)")
        for key, why in (pack.get("unmatched_filters") or {}).items():
            out.append(f"  {one_line(why)}" if key == "*" else f"  {one_line(key)}: {one_line(why)}")
    for hit in pack["results"]:
        c = hit["citation"]
        # PDFs are cited to the page (``p. 7``, ``pp. 7–8``); other formats by their structural path.
        where, section = label_of_locations(c.get("locations") or ()), " > ".join(hit["section_path"])
        # A structural path that already names the section (a slide's, a table cell's) leaves it out;
        # a lines label never does (a heading "1" is not the "1" of "lines 1, 3").
        section = "" if section and (where == section or where.startswith(section + " > ")) else section
        head = f"{_style(str(hit['rank']) + '.', _BOLD, colour_out)} {shown_key(c['source_key'])}"
        head += f" {one_line(where)}" if where else ""
        out.append(head + ("  " + _style(one_line(section), _DIM, colour_out) if section else ""))
        channels = ", ".join(f"{one_line(name)}#{ch['rank']}" for name, ch in hit["channels"].items())
        floor = "  (dense only, below the similarity floor)" if hit.get("below_dense_floor") else ""
        # Text recognised from a page image may hold misread words: say so where the text is shown.
        ocr = "  (OCR: read from a page image)" if any(
            loc.get("kind") == "ocr_text" for loc in c.get("locations") or ()) else ""
        out.append(f"   channels: {channels}  parse {c['parse_id'][:12]}  units {len(c['spans'])}{floor}{ocr}")
        # Other files holding the same bytes: the hit cites one of them (the first by key), and a
        # reader looking for another would take it for not indexed.
        also = c.get("also_cited_by") or ()
        if also:
            more = f" and {len(also) - ALSO_IN_SHOWN} more" if len(also) > ALSO_IN_SHOWN else ""
            out.append(f"   also in: {', '.join(shown_key(k) for k in also[:ALSO_IN_SHOWN])}{more} (the same bytes)")
        # Copies of this text ranked below it (another version of the file, a copy elsewhere) take no
        # place of their own: where they are is said here, each citable from the JSON.
        copies = hit.get("same_text") or ()
        if copies:
            shown_copies = [shown_key(s["source_key"]) + (f" {one_line(w)}" if (w := label_of_locations(
                s.get("locations") or ())) else "") for s in copies[:ALSO_IN_SHOWN]]
            more = len(copies) - len(shown_copies) + int(hit.get("same_text_omitted") or 0)
            out.append(f"   same text in: {', '.join(shown_copies)}{f' and {more} more' if more else ''}")
        changed = hit.get("source_changed")
        if changed:
            out.append("   " + _style(f"an older version: the file changed since, and its new version "
                                      f"{_NEWER.get(changed, one_line(changed))}", _YELLOW, colour_out))
        out.append("   " + _hit_text(hit, colour_out))
    return "".join(line + "\n" for line in out), "".join(line + "\n" for line in err)


def error_line(message: str, *, colour: bool = False) -> str:
    """``error: message`` and a newline (``error:`` in red on a terminal), as every ``fabric`` command fails."""
    return f"{_style('error:', _RED, colour)} {shown(message)}\n"


#: The exit status of a command whose reader closed stdout before it had printed everything
#: (``fabric resolve --all pack.json | head -1``): 128 + SIGPIPE, 141, what a shell reports for a
#: command the signal ends (``cat`` in the same pipe). Click's and rich's own handling exited 1,
#: which ``resolve`` says for "stale" and ``ingest`` and ``status`` for "incomplete".
BROKEN_PIPE_EXIT = 128 + signal.SIGPIPE


def stdout_closed() -> NoReturn:
    """End the command quietly because its reader closed stdout (``BrokenPipeError``): exit
    :data:`BROKEN_PIPE_EXIT`, no traceback and no message (nobody reads stdout; stderr is the
    shell's). stdout is pointed at ``/dev/null`` first, so the interpreter's final flush of what is
    still buffered cannot fail again (Python's "Exception ignored ... BrokenPipeError", exit 120).
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no file descriptor behind it (a test's capture)
        pass
    raise SystemExit(BROKEN_PIPE_EXIT)


def typed(text: str) -> str:
    r"""``text`` from the command line as the terminal wrote it.

    ``fabric`` runs in Python's UTF-8 mode (:func:`fabric_assets.cli.main`), so an argument
    typed on a terminal of another encoding (``café`` in Latin-1) arrives with its bytes as lone
    surrogates (PEP 383); decoded in the locale's own encoding it is the text typed. Text valid in
    neither is left as it is (a search names it as text that is not valid Unicode).
    """
    if not any("\udc80" <= c <= "\udcff" for c in text):
        return text
    import locale

    try:
        return os.fsencode(text).decode(locale.getencoding())
    except UnicodeError:
        return text


#: The encoding error handler :func:`escape_what_streams_cannot_encode` installs.
ESCAPE_ERRORS = "fabric-json-escape"


def _json_escape(exc: UnicodeError) -> tuple[str, int]:
    # ``\uXXXX`` (a UTF-16 surrogate pair past U+FFFF) is what JSON itself writes for a character
    # (RFC 8259 §7), so ``--json`` stays valid JSON of the same strings; ``backslashreplace``
    # writes ``\xe9`` and ``\U0001f600``, which JSON does not read.
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    # Only characters the codec lacks are here: never ASCII, so never a quote or backslash to escape.
    return json.dumps(exc.object[exc.start:exc.end])[1:-1], exc.end


codecs.register_error(ESCAPE_ERRORS, _json_escape)


def escape_what_streams_cannot_encode(*streams: TextIO) -> None:
    """Have ``streams`` (stdout, stderr) write a character their encoding lacks as ``\\uXXXX``.

    A terminal or pipe whose locale is not UTF-8 (``PYTHONIOENCODING=ascii``, a Latin-1 locale,
    a Windows code page) cannot encode a Japanese hit or file name: Python's default ``strict``
    handler raised ``UnicodeEncodeError`` in the middle of the output, a traceback after half a
    result. Escaped, every line is printed and ``--json`` stays valid JSON of the same text. Also
    covers a lone surrogate (an undecodable byte of a name, PEP 383) on a UTF-8 stream. A stream
    that is no ``TextIOWrapper`` (a test's capture) is left as it is.
    """
    for stream in streams:
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors=ESCAPE_ERRORS)


def pack_json(pack: Mapping[str, Any]) -> str:
    """``fabric search --json``: the whole pack, indented by 2, non-ASCII kept, ending in a newline."""
    return json.dumps(pack, indent=2, ensure_ascii=False) + "\n"


def unfinished_reason(ingest_running: bool | None) -> str:
    """What ``fabric status`` says of a parse that is parsed but not yet gated, told by whether a
    live process holds the home's ingest lock (``Status.ingest_running``; ``None``: not known)."""
    if ingest_running:
        return "a `fabric ingest` is running now (it holds the home's ingest lock) and finishes it"
    then = ("the next `fabric ingest` (or, while the Dagster daemon runs, the source sensor) finishes it")
    if ingest_running is None:
        return f"run still going or interrupted, or done and not yet activated; {then}"
    return (f"no `fabric ingest` is running (none holds the home's ingest lock): interrupted, or done and not "
            f"yet activated, or a Dagster daemon run still going; {then}")


def age(seconds: float) -> str:
    """``seconds`` as the largest whole unit: ``42 s``, ``7 min``, ``3 h``, ``2 d``."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{int(max(seconds, 0))} s"


#: How far in the future a recorded time may lie and still be read as now (clock grain, NTP slew).
FUTURE_SLACK_S = 60


def ago(seconds: float) -> str:
    """``7 min ago``; a time more than :data:`FUTURE_SLACK_S` ahead of the clock says so: it was
    recorded while the clock was ahead and set back since (it printed as ``0 s ago``)."""
    if seconds < -FUTURE_SLACK_S:
        return f"{age(-seconds)} in the future (the clock was set back since)"
    return f"{age(seconds)} ago"
