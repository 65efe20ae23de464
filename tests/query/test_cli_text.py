"""What `fabric search` prints (fabric_query/cli_text.py) and the arguments its fast path takes
(fabric_query/cli_fast.py): one renderer for the in-process pack and the server's JSON, document
text that cannot drive the terminal, and a fast path that hands anything unusual to the full CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer
from conftest import ingest
from typer.testing import CliRunner

from fabric_query.cli_fast import LIMIT_MAX, parse_search
from fabric_query.cli_text import VISIBLE_SOURCES_ONLY, HIT_TEXT_CHARS, error_line, render_pack


def _hit(text_segments, source_key="a.txt", locations=()):
    text = "".join(t for t, _ in text_segments)
    return {"rank": 1, "text": text, "section_path": [], "channels": {"word": {"rank": 1, "score": 2.0}},
            "citation": {"source_key": source_key, "parse_id": "p" * 64, "spans": [{}], "locations": list(locations)},
            "highlights": [{"text": t, "highlighted": h} for t, h in text_segments]}


def _pack(*hits, **extra):
    return {"release_id": 4, "fallback_reason": None, "skipped_channels": {}, "eligible_sources": 2,
            "results": list(hits), **extra}


def test_the_visible_sources_reason_is_the_release_modules():
    from fabric_query.release import VISIBLE_SOURCES_ONLY as defined

    assert VISIBLE_SOURCES_ONLY == defined


def test_search_help_names_every_query_filter():
    """guards against (fresh-user trial 16c): `fabric search --help` listing the filters without
    `prefix:`, which the README and the query parser have."""
    import click

    from fabric_query.cli import read_app
    from fabric_query.querylang import FILTER_KEYS

    command = typer.main.get_command(read_app).get_command(click.Context(click.Group()), "search")
    (query,) = [p for p in command.params if p.name == "query"]
    assert [k for k in FILTER_KEYS if f"{k}:" not in query.help] == [], query.help


def test_the_in_process_pack_and_the_servers_json_print_the_same(tmp_path, fabric_home):
    """guards against: two renderings drifting apart (the fast path prints the server's JSON, the
    in-process path the pack it built)."""
    from fabric_query.api import Fabric

    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper logged the tide.\n\nA storm broke the [bold]lamp[/bold].\n")
    (src / "b.txt").write_text("認証トークンは利用者を示す文字列です。\n")
    ingest(src, fabric_home)
    fabric = Fabric(fabric_home.root)
    for query in ("lighthouse lamp", "認証トークン", "nothing-matches-this"):
        pack = fabric.search(query, limit=5)
        in_process = render_pack(pack.model_dump(mode="json"))
        assert in_process == render_pack(json.loads(pack.model_dump_json()))
        if pack.results:
            assert pack.results[0].citation.source_key in in_process[0]
    out, _ = render_pack(fabric.search("lamp").model_dump(mode="json"))
    assert "[bold]lamp[/bold]" in out  # printed as written: brackets are not markup
    # --debug fills what each stage ranked (the same pack the API's debug=True gives), and only then.
    from fabric_assets.cli import app

    runner, home = CliRunner(), ["--home", str(fabric_home.root)]
    env = {"FABRIC_USE_SERVER": "0", "HF_HUB_OFFLINE": "1"}
    plain = json.loads(runner.invoke(app, ["search", "lighthouse", "--json", *home], env=env).stdout)
    debug = json.loads(runner.invoke(app, ["search", "lighthouse", "--json", "--debug", *home], env=env).stdout)
    expected = fabric.search("lighthouse", debug=True)
    assert plain["channel_rankings"] == {} and plain["stage_candidates"] == {}
    assert debug["channel_rankings"] == {k: list(v) for k, v in expected.channel_rankings.items()}
    assert debug["channel_rankings"]["word"] and debug["stage_candidates"]["fused"]


def test_document_text_cannot_drive_the_terminal():
    out, _ = render_pack(_pack(_hit([("clear\x1b[2J", True), (" bell\x07 csi\x9b", False)], "evil\x1b]0;t\x07.txt")),
                         colour_out=True)
    assert "\x1b[2J" not in out and "\x07" not in out and "\x9b" not in out and "\x1b]0" not in out
    assert "\\x1b[2J" in out and "evil\\x1b]0;t\\x07.txt" in out
    assert "\x1b[1;33m" in out  # our own highlight colour is kept
    plain, _ = render_pack(_pack(_hit([("clear\x1b[2J", True)])))
    assert "\x1b[" not in plain.replace("\\x1b[", "")  # no colour off a terminal


def test_bidirectional_overrides_cannot_reorder_what_is_printed():
    """guards against: a file named ``report\u202etxt.exe`` printed as ``reportexe.txt`` (the
    override reverses the rest of the line: "Trojan Source"), or hit text reordered the same way;
    Hebrew and Arabic with their plain marks (RLM) printed as they are."""
    hit = _hit([("Amount due: \u202e0001$\u202c", True), (" \u2067isolated\u2069 שלום\u200f", False)],
               "report\u202etxt.exe")
    out, _ = render_pack(_pack(hit))
    assert not any(c in out for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    assert "report\\u202etxt.exe" in out and "\\u202e0001$\\u202c" in out and "\\u2067isolated\\u2069" in out
    assert "שלום\u200f" in out


def test_hit_text_is_cut_by_characters_of_text_not_of_markup():
    long = [("w" * 10, True), (" " + "x" * (HIT_TEXT_CHARS + 50), False)]
    out, _ = render_pack(_pack(_hit(long)), colour_out=True)
    line = out.splitlines()[2]
    assert line.endswith("…") and line.count("x") == HIT_TEXT_CHARS - 11
    short, _ = render_pack(_pack(_hit([("x" * HIT_TEXT_CHARS, False)])))
    assert not short.rstrip("\n").endswith("…")


def test_reasons_and_skipped_channels_go_to_stderr():
    out, err = render_pack(_pack(fallback_reason=VISIBLE_SOURCES_ONLY, skipped_channels={"dense": "digest mismatch"}))
    assert out == "no results (release 4, 2 eligible sources)\n"
    assert err.splitlines() == ["release 4 names sources deleted since; answered from its visible sources only",
                                "skipped dense: digest mismatch"]
    assert render_pack(_pack(_hit([("x", False)], locations=[{"pages": [3, 4]}])))[0].startswith("1. a.txt pp. 3–4\n")


def test_a_heading_is_printed_beside_a_lines_label_that_happens_to_contain_it():
    """guards against: the section hidden because its text occurs in the label (`# 1` on `lines 1, 3`)."""
    hit = {**_hit([("x", False)], locations=[{"lines": [1, 1]}, {"lines": [3, 3]}]), "section_path": ["1"]}
    assert render_pack(_pack(hit))[0].splitlines()[0] == "1. a.txt lines 1, 3  1"
    slide = {**_hit([("x", False)], locations=[{"path": ["Slide 3", "Table 1"]}]), "section_path": ["Slide 3"]}
    assert render_pack(_pack(slide))[0].splitlines()[0] == "1. a.txt Slide 3 > Table 1"  # the path names it


def test_filters_that_admit_nothing_are_named_under_no_results():
    notes = {"type": "no source has this media type; the release has: text/plain (2)", "*": "none together\x1b[2J"}
    out, err = render_pack(_pack(eligible_sources=0, unmatched_filters=notes))
    assert out.splitlines() == ["no results (release 4, 0 eligible sources)",
                                "  type: no source has this media type; the release has: text/plain (2)",
                                "  none together\\x1b[2J"] and err == ""


def test_a_pack_with_no_lexical_match_and_hits_below_the_floor_says_so_in_text():
    """guards against: a punctuation-only query's dense neighbours printed as if they matched,
    while only the JSON said `no_lexical_match` and `below_dense_floor` (fresh-user trial)."""
    hit = {**_hit([("a neighbour", False)]), "channels": {"dense": {"rank": 1, "score": 0.3}}, "below_dense_floor": True}
    out, err = render_pack(_pack(hit, no_lexical_match=True))
    assert "dense only, below the similarity floor" in out.splitlines()[1]
    assert err.splitlines() == ["no word or substring matched: every hit is a dense neighbour, not a match of the "
                                "query's words"]
    matched, err = render_pack(_pack(_hit([("lamp", True)]), no_lexical_match=False))
    assert err == "" and "similarity floor" not in matched
    assert render_pack(_pack(no_lexical_match=True))[1] == "", "no hits: nothing to warn about"


def test_json_output_is_strict_json_even_with_a_non_finite_score(tmp_path, fabric_home, monkeypatch):
    """guards against: `fabric search --json` writing `Infinity` (not JSON) for a score, as
    json.dumps of a plain model_dump would; the server's JSON says null there."""
    from fabric_assets.cli import app
    from fabric_query.api import Fabric

    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper logged the tide.\n")
    ingest(src, fabric_home)
    pack = Fabric(fabric_home.root).search("lighthouse")
    hit = pack.results[0].model_copy(update={"fused_score": float("inf")})
    broken = pack.model_copy(update={"results": (hit, *pack.results[1:])})
    monkeypatch.setenv("FABRIC_USE_SERVER", "0")
    monkeypatch.setattr(Fabric, "search", lambda self, *a, **k: broken)
    result = CliRunner().invoke(app, ["search", "lighthouse", "--json", "--home", str(fabric_home.root)])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.output, parse_constant=_reject)
    assert printed["results"][0]["fused_score"] is None
    plain = CliRunner().invoke(app, ["search", "lighthouse", "--home", str(fabric_home.root)])
    assert plain.exit_code == 0 and "a.txt" in plain.output, plain.output


def _reject(name):
    raise AssertionError(f"not JSON: {name}")


def test_error_lines_are_written_as_they_are():
    assert error_line("no such file: [red]x[/red]") == "error: no such file: [red]x[/red]\n"
    assert error_line("x", colour=True) == "\x1b[31merror:\x1b[0m x\n"


@pytest.mark.parametrize("argv, limit, query", [
    (["search", "heat"], 10, "heat"),
    (["search", "--limit=5", "heat"], 5, "heat"),
    (["search", "-n5", "heat", "--json"], 5, "heat"),
    (["search", "--", "-excluded word"], 10, "-excluded word"),
    (["search", "-n", str(LIMIT_MAX), "a b", "--home", "/tmp/h"], LIMIT_MAX, "a b"),
])
def test_the_fast_path_takes_the_plain_search(argv, limit, query):
    args = parse_search(argv)
    assert args is not None and (args.limit, args.query) == (limit, query)


@pytest.mark.parametrize("argv", [
    ["search"], ["search", "a", "b"], ["search", "x", "--help"], ["search", "--lim", "5", "x"],
    ["search", "-excluded"], ["search", "-harbour tea"], ["search", "caf\udce9"],
    ["search", "x", "-n", str(LIMIT_MAX + 1)], ["search", "x", "-n", "0"],
    ["search", "x", "-n", "five"], ["search", "x", "--verbose"], ["search", "x", "--debug", "--json"], ["status"], ["--version"], [],
])
def test_anything_else_goes_to_the_full_cli(argv):
    assert parse_search(argv) is None


def test_the_full_cli_accepts_what_the_fast_path_takes(tmp_path):
    """guards against: the two parsers disagreeing on a plain search (its options or their bounds)."""
    from fabric_assets.cli import app

    home = tmp_path / "none"  # no home: both paths must get as far as opening it
    for argv in (["search", "--limit=5", "heat"], ["search", "-n", str(LIMIT_MAX), "x", "--json"]):
        assert parse_search([*argv, "--home", str(home)]) is not None
        result = CliRunner().invoke(app, [*argv, "--home", str(home)])
        assert "No such option" not in result.output and "Invalid value" not in result.output, result.output
    bad = CliRunner().invoke(app, ["search", "x", "-n", str(LIMIT_MAX + 1), "--home", str(home)])
    assert bad.exit_code == 2 and parse_search(["search", "x", "-n", str(LIMIT_MAX + 1)]) is None


def test_without_a_server_the_fast_path_declines_and_loads_nothing(tmp_path):
    code = ("import sys; from fabric_query.cli_fast import run; c = run(sys.argv[1:]); "
            "print(c, sorted(m for m in ('typer', 'rich', 'pydantic', 'pyarrow') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code, "search", "x", "--home", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == "None []", p.stderr


def test_status_does_not_promise_a_rerun_of_a_parse_that_only_waits_for_activation(capsys):
    # An ingest stopped (Ctrl-C) between parse runs leaves the finished runs' parses `parsed` with
    # every verdict (the next ingest activates them, re-running none): status said "run still going
    # or killed; the next `fabric ingest` re-runs it" for 512 such parses (hostile trial 11b).
    from fabric_query.cli import print_status
    from fabric_query.types import ParseProblem, Status

    st = Status(home="h", roots=(), sources_by_state={"present": 1}, release_id=1, active_sources=0,
                active_parses=0, failed=(), held=(), pending=0, unsupported=(), withheld=(),
                unfinished=(ParseProblem(parse_id="p" * 32, status="parsed", reason=None, detail=None,
                                         sources=("fs:a.txt",)),))
    print_status("h", st)
    out = " ".join(capsys.readouterr().out.split())
    assert "1 parse(s) unfinished" in out and "re-runs" not in out
    assert "unfinished fs:a.txt: run still going or interrupted, or done and not yet activated" in out


def test_status_lists_twenty_of_a_kind_and_counts_the_rest(capsys):
    """guards against (trial 11b): a killed ingest of thousands of files printing one status line per
    unfinished parse (1,028 lines), burying everything else; and a count that loses one."""
    from fabric_query.cli import LISTED_AT_MOST, print_status
    from fabric_query.types import ParseProblem, Status

    unfinished = tuple(ParseProblem(parse_id=f"{i:032x}", status="parsed", reason=None, detail=None,
                                    sources=(f"fs:n{i:04d}.txt",)) for i in range(LISTED_AT_MOST + 7))
    failed = (ParseProblem(parse_id="f" * 32, status="failed", reason="encrypted", detail="", sources=("fs:x.pdf",)),)
    st = Status(home="h", roots=(), sources_by_state={"present": 28}, release_id=1, active_sources=0,
                active_parses=0, failed=failed, held=(), pending=0, unsupported=(), withheld=(), unfinished=unfinished)
    print_status("h", st)
    out = capsys.readouterr().out
    assert sum("unfinished fs:n" in line for line in out.splitlines()) == LISTED_AT_MOST
    assert "… and 7 more like these" in out and "failed fs:x.pdf: encrypted" in out


def test_status_names_each_withheld_source(capsys):
    """guards against (trial 22e): ``withheld by policy: 1 sources``, a count where the README says
    `fabric status` lists the withheld sources, leaving the operator to guess what a pattern caught;
    past twenty they are counted like every other kind."""
    from fabric_query.cli import LISTED_AT_MOST, print_status
    from fabric_query.types import Status

    withheld = ("fs:notes/drafts/secret.txt",) + tuple(f"fs:private/p{i:02d}.txt" for i in range(LISTED_AT_MOST + 2))
    st = Status(home="h", roots=(), sources_by_state={"present": 30}, release_id=1, active_sources=0,
                active_parses=0, failed=(), held=(), pending=0, unsupported=(), withheld=withheld, unfinished=())
    print_status("h", st)
    lines = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
    assert "withheld fs:notes/drafts/secret.txt (sources.withheld)" in lines
    assert sum(line.startswith("withheld fs:") for line in lines) == LISTED_AT_MOST
    assert "… and 3 more like these (`fabric status --json` lists every one)" in lines


def test_a_failed_parse_line_sets_its_reason_apart_from_the_detail(capsys):
    """guards against (trial 20g): ``failed fs:x.pdf: encrypted a password is needed to open it``, the
    reason's name and its words run together as one phrase; a failure with no detail ends at its
    reason (no dangling separator)."""
    from fabric_query.cli import print_status
    from fabric_query.types import ParseProblem, Status

    failed = (ParseProblem(parse_id="f" * 32, status="failed", reason="encrypted",
                           detail="a password is needed to open it", sources=("fs:x.pdf",)),
              ParseProblem(parse_id="e" * 32, status="failed", reason="timeout", detail=None, sources=("fs:y.pdf",)))
    st = Status(home="h", roots=(), sources_by_state={"present": 2}, release_id=1, active_sources=0,
                active_parses=0, failed=failed, held=(), pending=0, unsupported=(), withheld=(), unfinished=())
    print_status("h", st)
    lines = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
    assert "failed fs:x.pdf: encrypted: a password is needed to open it" in " ".join(lines)
    assert "failed fs:y.pdf: timeout" in lines


def test_a_hit_holding_ocr_text_says_so():
    """guards against (hostile trial 13c): text Tesseract read from a page image printed exactly as
    text from a text layer, though it may hold misread words (the JSON's locations say
    ``ocr_text``; the printed hit said nothing)."""
    scanned = _hit([("Scanned minutes", True)], "scan.pdf",
                   [{"unit_id": "u", "kind": "ocr_text", "pages": [2], "path": [], "element_path": None, "lines": None}])
    typed = _hit([("Typed minutes", True)], "typed.pdf",
                 [{"unit_id": "v", "kind": "paragraph", "pages": [1], "path": [], "element_path": None, "lines": None}])
    out, _ = render_pack(_pack(scanned))
    assert "scan.pdf p. 2" in out and "(OCR: read from a page image)" in out
    assert "OCR" not in render_pack(_pack(typed))[0]


def test_a_hit_whose_bytes_other_files_hold_too_names_them():
    """guards against (hostile trial 14c): a report kept in reports/ and a copy in archive/copies/
    searched: every hit printed the copy only (the first key), so the reader took the report for
    not indexed; the other files holding the same bytes were in the JSON's ``also_cited_by`` only."""
    hit = _hit([("native code", True)], "fs:lib/archive/copies/paper copy.pdf")
    hit["citation"]["also_cited_by"] = ["fs:lib/reports/paper.pdf", "fs:lib/x\n2. fs:lib/evil.pdf"]
    out, _ = render_pack(_pack(hit))
    assert "   also in: fs:lib/reports/paper.pdf, fs:lib/x\\x0a2. fs:lib/evil.pdf (the same bytes)\n" in out
    assert "also in" not in render_pack(_pack(_hit([("native code", True)])))[0]
    hit["citation"]["also_cited_by"] = [f"fs:lib/copy{i}.pdf" for i in range(50)]
    out, _ = render_pack(_pack(hit))
    assert "   also in: fs:lib/copy0.pdf, fs:lib/copy1.pdf, fs:lib/copy2.pdf and 47 more (the same bytes)\n" in out


def test_a_query_that_starts_with_a_dash_is_told_to_follow_a_double_dash(tmp_path):
    """guards against (hostile trial 14c): `fabric search '-draft notes'` answered only "No such
    option: -d" (the query read as options); the README's `--` was nowhere in the error."""
    from fabric_assets.cli import app

    home = ["--home", str(tmp_path / "none")]
    result = CliRunner().invoke(app, ["search", "-draft notes", *home])
    assert result.exit_code == 2 and "No such option: -d" in result.output
    # Compared without white space: rich's box wraps a long tmp path anywhere.
    assert "".join(f"fabric search --home {home[1]} -- '-draft notes'".split()) in "".join(
        result.output.replace("│", "").split()), result.output
    typo = CliRunner().invoke(app, ["search", "x", "--jsn", *home])
    assert typo.exit_code == 2 and "No such option: --jsn" in typo.output and "needs '--'" not in typo.output
    # The options after that `--` are arguments too: told where they go (trial 22e).
    late = CliRunner().invoke(app, ["search", *home, "--", "-draft notes", "-n", "3"])
    said = " ".join(late.output.replace("│", " ").split())
    assert late.exit_code == 2 and "options go before '--'" in said, said
    # Compared without white space: rich's box wraps a long tmp path anywhere (`…/non e -n 3`).
    assert "".join(f"fabric search --home {home[1]} -n 3 -- '-draft notes'".split()) in "".join(said.split()), said
    words = CliRunner().invoke(app, ["search", *home, "--", "-draft", "notes"])  # unquoted words: no such hint
    assert words.exit_code == 2 and "options go before" not in words.output, words.output


def test_a_query_split_into_words_is_told_to_be_quoted_and_options_after_a_double_dash_both_readings(tmp_path):
    """guards against (stop 55 left it open): `fabric search -- -draft notes -n 3` (the query not
    quoted) answered "Got unexpected extra argument(s) (notes -n 3)" with a wrong command (`fabric
    search notes -n 3 -- -draft`, which fails again), and `-- -draft notes` or `lamp keeper` with no
    hint. Each is told the command meant; `-n 3` after `--` may be query words, so both readings are
    given; a query holding `-n` as a word, quoted or after `--`, is still searched, not refused."""
    from fabric_assets.cli import app

    home = ["--home", str(tmp_path / "none")]

    def said(*args: str) -> tuple[int, str]:
        out = CliRunner().invoke(app, ["search", *home, *args])
        return out.exit_code, "".join(out.output.replace("│", "").split())  # rich wraps anywhere

    def command(line: str) -> str:
        return "".join(line.replace("HOME", home[1]).split())

    code, text = said("--", "-draft", "notes", "-n", "3")
    assert code == 2 and command("the query is one argument: quote it") in text, text
    assert command("fabric search --home HOME -n 3 -- '-draft notes'; or, if -n 3 belongs to the query: "
                   "fabric search --home HOME -- '-draft notes -n 3'") in text, text
    code, text = said("--", "-draft", "notes")
    assert code == 2 and command("quote it: fabric search --home HOME -- '-draft notes')") in text, text
    code, text = said("lamp", "keeper")
    assert code == 2 and command("quote it: fabric search --home HOME 'lamp keeper')") in text, text
    code, text = said("-draft", "notes", "-n", "3")
    assert code == 2 and command("needs '--' before it: fabric search --home HOME -n 3 -- '-draft notes')") in text
    for query in (["--", "-n"], ["--", "grep -n flag"], ["grep -n 3"]):  # legitimate: to the search, not refused
        code, text = said(*query)
        assert "unexpectedextraargument" not in text and "Nosuchoption" not in text and "quoteit" not in text, text


_HOLD_INGEST = """
import sys, time
from fabric_resources.home import FabricHome
with FabricHome(sys.argv[1]).catalog.exclusive("ingest"):
    print("held", flush=True)
    time.sleep(600)
"""


def test_status_tells_a_running_ingest_from_an_interrupted_one(fabric_home, capsys):
    """guards against (trial 18c): status saying "run still going or interrupted" of a parse a live
    ``fabric ingest`` was working on, although its ingest lock told which. A child process holds
    the home's ingest lock as an ingest does; then it is killed, as an interrupted ingest is."""
    import signal
    import subprocess

    from fabric_query.api import Fabric
    from fabric_query.cli import print_status
    from fabric_query.types import ParseProblem

    unfinished = (ParseProblem(parse_id="p" * 32, status="parsed", reason=None, detail=None, sources=("fs:a.txt",)),)

    def printed() -> str:
        st = Fabric(fabric_home.root).status()
        print_status("h", st.model_copy(update={"unfinished": unfinished}))
        return " ".join(capsys.readouterr().out.split())

    proc = subprocess.Popen([sys.executable, "-c", _HOLD_INGEST, str(fabric_home.root)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        assert Fabric(fabric_home.root).status().ingest_running is True
        assert "unfinished fs:a.txt: a `fabric ingest` is running now" in printed()
        proc.send_signal(signal.SIGKILL)
        proc.wait(20)
        assert Fabric(fabric_home.root).status().ingest_running is False
        out = printed()
        assert "unfinished fs:a.txt: no `fabric ingest` is running" in out and "interrupted" in out
        assert "running now" not in out
    finally:
        proc.kill()
        proc.wait()
