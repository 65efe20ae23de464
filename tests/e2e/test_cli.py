"""The `fabric` CLI: typed, short errors with exit code 2; never a traceback for bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fabric_assets.cli import app

runner = CliRunner()


@pytest.mark.parametrize("arg,needle", [
    ("[]", "expected a JSON object"),
    ("null", "expected a JSON object"),
    ("{not json", "not JSON"),
    ("/nonexistent/citation.json", "no such file"),
    # pathlib reads "" as the working folder: it said " is a folder" (trial 20a)
    ("", "the citation argument is empty"),
    (" ", "the citation argument is empty"),
    ("{}", "not a valid citation"),
    # An unknown key is named as unknown, not among the missing fields (trial 16c).
    ('{"foo": 1}', "not a valid citation (missing: release_id, source_key, source_hash, parse_id, chunk_id, "
                   "spans, text_hash; unknown: foo)"),
])
def test_resolve_rejects_bad_input_with_exit_2(tmp_path, arg, needle):
    """guards against: a crash (exit 1, same as 'stale') on valid JSON that is not an object."""
    result = runner.invoke(app, ["resolve", arg, "--home", str(tmp_path / "home")])
    assert result.exit_code == 2, result.output
    assert needle in result.output


@pytest.mark.parametrize("command", ["resolve", "audit"])
def test_a_citation_file_that_is_binary_or_a_folder_is_one_line_with_exit_2(tmp_path, command):
    """guards against: a UnicodeDecodeError or RecursionError traceback with exit 1 (the code of
    'stale') for a binary or deeply nested file, and a folder or device reported as 'not JSON … no
    such file' (fresh-user trials, 2026-12-04 and -05)."""
    binary = tmp_path / "rand.json"
    binary.write_bytes(bytes(range(256)) * 4)
    deep = tmp_path / "deep.json"  # 20 KB that the decoder cannot descend: a RecursionError traceback, exit 1
    deep.write_text('{"citation":' + "[" * 5000 + "]" * 5000 + "}")
    for arg, needle in ((str(binary), "is not UTF-8 text"), (str(tmp_path), "is a folder"),
                        (str(deep), "nests arrays or objects too deeply"), ("/dev/zero", "is not a regular file"),
                        ("", "the citation argument is empty")):
        result = runner.invoke(app, [command, arg, "--home", str(tmp_path / "home")])
        assert result.exit_code == 2, result.output
        assert needle in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("command", ["resolve", "audit"])
def test_a_citation_argument_over_the_bound_is_refused_before_it_is_read_whole(tmp_path, monkeypatch, command):
    """guards against (trial 24e): `fabric resolve -` and `fabric resolve FILE` reading their whole
    input into memory however large (300 MB of whitespace piped in took 620 MB and 5 s before the
    JSON error), and stdin that is not UTF-8 raising a decode error of its own. Now at most
    MAX_ARGUMENT_BYTES (64 MiB) are read, then the argument is refused in one line, exit 2; the bound
    is made small here so the test reads little."""
    import fabric_query.cli_input as cli_input

    monkeypatch.setattr(cli_input, "MAX_ARGUMENT_BYTES", 4096)
    home = str(tmp_path / "home")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 4097 + b"{}")
    for arg, stdin in ((str(big), None), ("-", b" " * 4097 + b"{}")):
        result = runner.invoke(app, [command, arg, "--home", home], input=stdin)
        assert result.exit_code == 2, result.output
        assert "holds over" in result.output and "Traceback" not in result.output, result.output
    at_bound = runner.invoke(app, [command, "-", "--home", home], input=b" " * 4094 + b"{}")
    assert "holds over" not in at_bound.output  # 4,096 bytes are read and judged as JSON
    latin = runner.invoke(app, [command, "-", "--home", home], input='{"q": "café"}'.encode("latin-1"))
    assert latin.exit_code == 2 and "stdin is not UTF-8 text" in latin.output, latin.output


def test_audit_reads_a_packs_citations_only_and_names_bad_fields_on_one_line(tmp_path):
    """guards against (hostile trial 8b, 2026-12-05): `fabric audit` of a pack `resolve` reads (each
    hit's text and citation) refused with pydantic's 40-line report, which quoted the hit's text."""
    import json

    citation = {"release_id": 1, "source_key": "fs:a.txt", "source_hash": "0" * 64, "parse_id": "0" * 32,
                "chunk_id": "0" * 32, "spans": [{"unit_id": "0" * 32, "start_char": 0, "end_char": 1,
                                                "start_utf16": 0, "end_utf16": 1, "text_hash": "0" * 64}],
                "text_hash": "0" * 64}
    home = str(tmp_path / "home")
    ok = runner.invoke(app, ["audit", json.dumps({"results": [{"text": "secret words", "citation": citation}]}),
                             "--home", home])
    assert ok.exit_code == 2 and "no Fabric home" in ok.output, ok.output
    bad = runner.invoke(app, ["audit", json.dumps({"results": [{"text": "secret words", "citation": {
        **citation, "release_id": "x"}}]}), "--home", home])
    assert bad.exit_code == 2 and "results.0.citation.release_id" in bad.output, bad.output
    assert "secret words" not in bad.output and len(bad.output.strip().splitlines()) <= 2


def test_search_errors_are_typed_and_short(tmp_path):
    """guards against: tracebacks for a missing home or a filter-only query."""
    home = str(tmp_path / "nohome")
    result = runner.invoke(app, ["search", "lighthouse", "--home", home])
    assert result.exit_code == 2 and "HomeNotFoundError" in result.output
    assert "Traceback" not in result.output


def _home_options(command, path=()):
    """(command path, its --home parameter) for every command of the Click tree under ``command``."""
    for name, sub in getattr(command, "commands", {}).items():  # a group (Typer's own Click)
        yield from _home_options(sub, (*path, name))
    for param in command.params:
        if "--home" in getattr(param, "opts", ()):
            yield path, param


def test_an_empty_home_path_is_a_usage_error_on_every_command(tmp_path, monkeypatch):
    """guards against (trial 20a): ``--home ""`` (an unset shell variable) meaning the working
    folder, since Click's path conversion makes ``""`` into ``.``: ``fabric status --home ""`` said
    "no Fabric home at <cwd>", and an ingest would have made the working folder a home. An empty
    FABRIC_HOME is unset, as an empty XDG_*_HOME is: the default ./.fabric."""
    import typer

    found = list(_home_options(typer.main.get_command(app)))
    assert {("status",), ("search",), ("ingest",), ("mcp",), ("snapshot", "list"), ("bench", "ann")} <= {
        p for p, _ in found}
    monkeypatch.chdir(tmp_path)
    # Click converts the options given before it checks for missing arguments: none is needed here.
    for argv in [[*path, "--home", ""] for path, _ in found] + [["search", "lighthouse", "--home="]]:
        result = runner.invoke(app, argv)
        assert result.exit_code == 2 and "the path is empty" in result.output, (argv, result.output)
        assert "no Fabric home" not in result.output and "Traceback" not in result.output
    unset = runner.invoke(app, ["status"], env={"FABRIC_HOME": ""})
    assert unset.exit_code == 2 and f"no Fabric home at {tmp_path / '.fabric'}" in unset.output, unset.output
    assert list(tmp_path.iterdir()) == []


def test_a_home_path_of_spaces_only_is_a_usage_error_on_every_command(tmp_path, monkeypatch):
    """guards against (trial 20f): ``--home " "`` (or ``FABRIC_HOME`` of spaces) was taken for a
    folder named " " in the working folder: "no Fabric home at <cwd>/ ", and an ingest would have
    made a home there. It is refused as ``--home ""`` is."""
    import typer

    from fabric_query.cli_fast import parse_search

    monkeypatch.chdir(tmp_path)
    for argv in [[*path, "--home", " "] for path, _ in _home_options(typer.main.get_command(app))] + [
            ["search", "lighthouse", "--home=   "], ["ingest", str(tmp_path), "--home", "\t "]]:
        result = runner.invoke(app, argv)
        assert result.exit_code == 2 and "the path is only spaces" in result.output, (argv, result.output)
        assert "no Fabric home" not in result.output and "Traceback" not in result.output
    spaces = runner.invoke(app, ["status"], env={"FABRIC_HOME": "  "})
    assert spaces.exit_code == 2 and "the path is only spaces" in spaces.output, spaces.output
    assert parse_search(["search", "lighthouse", "--home", " "]) is None  # the fast path leaves it to the CLI
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["status"], ["purge", "--before", "2000-01-01"]])
def test_a_home_path_that_is_a_link_to_nothing_is_named_as_typed(tmp_path, argv):
    """guards against (trial 20f): ``--home LINK`` where LINK leads to nothing said "no Fabric home at
    <the link's target>", a path the user never typed; it names LINK (and where it leads)."""
    link, target = tmp_path / "home-link", tmp_path / "gone" / "home"
    link.symlink_to(target)
    said = runner.invoke(app, [*argv, "--home", str(link)])
    assert said.exit_code == 2, said.output
    assert f"no Fabric home at {link} (which leads to {target}): no such folder" in said.output, said.output
    assert "link broken" in said.output and not target.exists()


@pytest.mark.parametrize("argv", [["status"], ["search", "lighthouse"], ["resolve", "{}"]])
def test_a_home_path_that_does_not_exist_is_named_as_mistyped_not_sent_to_ingest(tmp_path, argv):
    """guards against (trial 20a): a mistyped --home told only to `fabric ingest` there, as if the
    folder held no home yet; an existing folder without a home is still sent to ingest."""
    if argv[0] == "resolve":  # a valid citation, so that the home is what is refused
        argv = ["resolve", '{"release_id": 1, "source_key": "fs:a.txt", "source_hash": "' + "0" * 64 + '", '
                '"parse_id": "' + "0" * 32 + '", "chunk_id": "' + "0" * 32 + '", "spans": [], "text_hash": "'
                + "0" * 64 + '"}']
    missing = runner.invoke(app, [*argv, "--home", str(tmp_path / "typo")])
    assert missing.exit_code == 2, missing.output
    assert f"no Fabric home at {tmp_path / 'typo'}: no such folder" in missing.output and "mistyped" in missing.output
    assert "fabric ingest PATH" in missing.output and not (tmp_path / "typo").exists()
    (tmp_path / "empty").mkdir()
    empty = runner.invoke(app, [*argv, "--home", str(tmp_path / "empty")])
    assert empty.exit_code == 2 and "no such folder" not in empty.output, empty.output
    assert "run `fabric ingest PATH` first" in empty.output


def test_ingest_refuses_a_file(tmp_path):
    f = tmp_path / "file.txt"
    f.write_text("x")
    result = runner.invoke(app, ["ingest", str(f), "--home", str(tmp_path / "home")])
    assert result.exit_code == 2 and "is a file, not a directory" in result.output


def test_ingest_of_a_path_that_does_not_exist_says_so(tmp_path, fabric_home):
    """guards against (fresh-user trial 19c): a mistyped folder answered "is not a directory", which
    sent the user looking for a file of that name; with a home or without, one line: no such folder."""
    missing = tmp_path / "notse"
    result = runner.invoke(app, ["ingest", str(missing), "--home", str(tmp_path / "new-home")])
    assert result.exit_code == 2 and result.output.strip() == f"error: {missing}: no such folder", result.output
    fabric_home.catalog  # a home that exists: the refusal comes from the ingest's own check
    assert fabric_home.root.is_dir()
    result = runner.invoke(app, ["ingest", str(missing), "--home", str(fabric_home.root)])
    assert result.exit_code == 2 and result.output.strip() == f"error: {missing}: no such folder", result.output


def test_ingest_of_a_folder_overlapping_a_registered_root_is_one_line(tmp_path):
    """guards against (fresh-user trial 16c): `fabric ingest docs/notes` after `fabric ingest docs`
    printing the refusal and then the progress bar it had already started (two lines, not one),
    and the server's admin ingest accepting the path (202) to fail the Operation later."""
    from fabric_assets.operations import PipelineAdmin
    from fabric_resources.home import FabricHome

    docs, home = tmp_path / "docs", tmp_path / "home"
    (docs / "notes").mkdir(parents=True)
    fabric_home = FabricHome(home)
    fabric_home.catalog.register_root(docs)
    todo = {docs / "notes": f"ingest {docs}, which holds it",  # inside the registered root; holding it
            tmp_path: f"to make {tmp_path} the root instead, run `fabric purge --root docs` first"}
    for path in (docs / "notes", tmp_path):
        result = runner.invoke(app, ["ingest", str(path), "--home", str(home)], terminal_width=400)
        assert result.exit_code == 2, result.output
        assert "overlaps the registered root" in result.output and todo[path] in result.output, result.output
        assert [ln for ln in result.output.splitlines() if ln.strip()] == [result.output.strip()], result.output
    admin = PipelineAdmin(fabric_home)
    try:
        with pytest.raises(ValueError, match="overlaps the registered root"):
            admin.submit("ingest", {"path": str(docs / "notes")})
        assert fabric_home.catalog.operations("pending") == []
    finally:
        admin.close()
    assert [r.path for r in fabric_home.catalog.roots()] == [str(docs.resolve())]


def test_a_moved_file_is_one_move_in_the_ingest_summary(tmp_path):
    """guards against: a rename printed as a new file, a deleted file and a move (`1 / 0 / 1 / 1`)."""
    src, home = tmp_path / "notes", str(tmp_path / "home")
    src.mkdir()
    (src / "before.txt").write_text("The ferry left at noon.\n")
    (src / "other.txt").write_text("Gulls over the pier.\n")
    assert runner.invoke(app, ["ingest", str(src), "--home", home]).exit_code == 0
    (src / "before.txt").rename(src / "after.txt")
    (src / "other.txt").unlink()
    (src / "new.txt").write_text("A new note about tides.\n")
    result = runner.invoke(app, ["ingest", str(src), "--home", home])
    assert result.exit_code == 0, result.output
    (line,) = [ln for ln in result.output.splitlines() if "new / changed / deleted / moved" in ln]
    # new.txt; nothing changed; other.txt; before.txt → after.txt
    assert re.search(r"(\d+) / (\d+) / (\d+) / (\d+)", line).groups() == ("1", "0", "1", "1"), line


def test_a_file_back_with_the_same_bytes_is_counted_as_come_back_not_new(tmp_path):
    """guards against (trial 22a): a file deleted, ingested, then put back with the same bytes was
    `1 / 0 / 0 / 0` (new) in the summary, beside "parse partitions run 0": its parse is reused."""
    src, home = tmp_path / "notes", str(tmp_path / "home")
    src.mkdir()
    (src / "a.txt").write_text("The ferry left at noon.\n")
    assert runner.invoke(app, ["ingest", str(src), "--home", home]).exit_code == 0
    (src / "a.txt").rename(tmp_path / "a.txt")
    assert runner.invoke(app, ["ingest", str(src), "--home", home]).exit_code == 0
    (tmp_path / "a.txt").rename(src / "a.txt")
    result = runner.invoke(app, ["ingest", str(src), "--home", home], terminal_width=200)
    assert result.exit_code == 0, result.output
    rows = {ln.split("│")[1].strip(): ln.split("│")[2].strip() for ln in result.output.splitlines() if ln.count("│") == 3}
    assert rows["new / changed / deleted / moved"] == "0 / 0 / 0 / 0", result.output
    assert rows["came back unchanged (parse reused)"] == "1", result.output
    assert rows["parse partitions run"] == "0", result.output


def test_the_ingest_summarys_dagster_runs_row_counts_the_re_chunk_runs(tmp_path):
    """guards against (fresh-user trial 16c): after a `chunking` change (or resuming a killed run)
    the summary said `re-chunked … 1` but `Dagster runs  0 parse + 1 activation`, leaving out the
    `rechunk_job` run the ingest had just made (whose failures the `failed` count did include); and
    (trial 17) a progress bar of `0/0` standing while the re-chunk ran (nothing to parse, counted as
    0 steps of 0): a bar shows a count of parses or is not shown."""
    import json

    src, home = tmp_path / "notes", tmp_path / "home"
    src.mkdir()
    (src / "a.txt").write_text("The ferry left at noon.\n")
    first = runner.invoke(app, ["ingest", str(src), "--home", str(home)], terminal_width=200)
    assert first.exit_code == 0 and "ingesting (2 steps per document)" in first.output, first.output
    assert re.search(r" 2/2 ", first.output), first.output
    (home / "config.json").write_text(json.dumps({"chunking": {"max_tokens": 64}}))
    result = runner.invoke(app, ["ingest", str(src), "--home", str(home)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "ingesting" not in result.output and "0/0" not in result.output, result.output
    assert not result.output.startswith("\n"), result.output  # nor the empty line of a bar never shown
    (rechunked,) = [ln for ln in result.output.splitlines() if "re-chunked (chunking changed" in ln]
    assert re.search(r"│\s*1\s*│", rechunked), rechunked
    (runs,) = [ln for ln in result.output.splitlines() if "Dagster runs" in ln]
    assert "0 parse + 1 re-chunk + 1 activation" in runs, runs


def test_the_ingest_summary_names_the_folders_source_keys(tmp_path):
    """guards against (hostile trial 14c): a second folder named like a registered one (`b/notes`
    beside `a/notes`) keyed `fs:notes-<6 hex>/…` with nothing saying so: the summary named the path
    only, and `path:notes/` or `prefix:notes/` then missed it."""
    import hashlib

    home = str(tmp_path / "home")
    for side in ("a", "b"):
        (tmp_path / side / "notes").mkdir(parents=True)
        (tmp_path / side / "notes" / "x.txt").write_text(f"A note kept in folder {side}.\n")
    first = runner.invoke(app, ["ingest", str(tmp_path / "a" / "notes"), "--home", home], terminal_width=200)
    assert first.exit_code == 0 and "fs:notes/…" in first.output, first.output
    second = runner.invoke(app, ["ingest", str(tmp_path / "b" / "notes"), "--home", home], terminal_width=200)
    label = "notes-" + hashlib.sha256(str((tmp_path / "b" / "notes").resolve()).encode()).hexdigest()[:6]
    assert second.exit_code == 0 and f"fs:{label}/…" in second.output, second.output


def test_an_ingest_of_many_unsupported_files_names_a_few_and_counts_the_rest(tmp_path):
    """Property: the ingest summary names at most ``LISTED_AT_MOST`` unsupported files and says how
    many more there are (as `fabric status` below it does), so a folder of thousands of logs or
    photos prints a screenful, not a line or two per file.

    Guards against: the summary's "unsupported" row joining every unsupported file (3,000 .log
    files printed 6,000 lines of table before the status, which listed 20; hostile trial 12a)."""
    from fabric_query.cli import LISTED_AT_MOST

    src, home = tmp_path / "notes", str(tmp_path / "home")
    src.mkdir()
    (src / "note.txt").write_text("A note about the fossa.\n")
    extra = 7
    for i in range(LISTED_AT_MOST + extra):
        (src / f"app_{i:03d}.log").write_text(f"log line {i}\n")
    result = runner.invoke(app, ["ingest", str(src), "--home", home], terminal_width=200)
    assert result.exit_code == 0, result.output
    named = set(re.findall(r"app_\d{3}\.log", result.output))
    mentions = len(re.findall(r"app_\d{3}\.log", result.output))
    assert len(named) <= 2 * LISTED_AT_MOST and mentions <= 2 * LISTED_AT_MOST, result.output
    assert f"and {extra} more" in result.output
    again = runner.invoke(app, ["ingest", str(src), "--home", home], terminal_width=200)
    # The row counts what this scan found new or changed (none now); `fabric status` lists them all.
    assert re.search(r"unsupported \(new or changed\)[\s│|]+none", again.output), again.output


def test_invalid_config_is_a_clean_error_naming_the_file(tmp_path):
    """guards against: a pydantic traceback instead of one line that names the config file."""
    import subprocess
    import sys

    home = tmp_path / "home"
    home.mkdir()
    (home / "catalog.sqlite3").touch()
    (home / "config.json").write_text('{"bogus": 1}')
    out = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", "search", "x",
                          "--home", str(home)], capture_output=True, text=True)
    assert out.returncode == 2
    assert "invalid configuration" in out.stderr and str(home / "config.json") in out.stderr
    assert "bogus" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("setup, expected", [
    (lambda c: c.write_bytes(b"\xff\xfe{}"), "not UTF-8 text (byte 0)"),
    (lambda c: c.mkdir(), "not a regular file"),
    (lambda c: os.mkfifo(c), "not a regular file"),  # was a hang: the read blocked on the FIFO
    (lambda c: c.symlink_to(c), "unreadable configuration"),  # a link loop: was silently the default
    (lambda c: c.symlink_to(c.parent / "gone.json"), "a symbolic link to nothing"),
    (lambda c: c.write_bytes(b'\xef\xbb\xbf{"bogus": 1}'), "bogus"),  # a BOM is not the problem; the key is
])
def test_a_config_file_that_is_not_utf8_json_text_is_one_line(tmp_path, setup, expected):
    """guards against: a UnicodeDecodeError / IsADirectoryError traceback from every command, a
    FIFO that hangs it, a link loop or dangling link read as "no config" (dropping its withheld
    sources), and a byte-order mark reported as invalid JSON at column 1."""
    import subprocess
    import sys

    home = tmp_path / "home"
    home.mkdir()
    setup(home / "config.json")
    for argv in (["search", "x"], ["ingest", str(tmp_path)]):
        out = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", *argv,
                              "--home", str(home)], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "HF_HUB_OFFLINE": "1"})
        assert out.returncode == 2 and expected in out.stderr and "Traceback" not in out.stderr, (argv, out.stderr)


@pytest.mark.parametrize("command", ["ingest", "status", "search"])
@pytest.mark.parametrize("under", [False, True])
def test_a_home_path_that_is_a_file_is_one_line(tmp_path, under, command):
    """guards against: a NotADirectoryError / FileExistsError traceback from `fabric ingest` when
    --home names a file or a path below one; and (trial 11c) a read command saying "unreadable
    configuration …/config.json: NotADirectoryError" where the mistake is the home: the line names
    the file in the way."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("x\n")
    (tmp_path / "file").write_text("x")
    home = tmp_path / "file" / "sub" if under else tmp_path / "file"
    argv = {"ingest": ["ingest", str(tmp_path / "notes")], "status": ["status"], "search": ["search", "x"]}[command]
    out = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", *argv,
                          "--home", str(home)], capture_output=True, text=True,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 2 and str(home) in out.stderr, out.stderr
    assert f"{tmp_path / 'file'} is a file" in out.stderr and "NotADirectoryError" not in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert (tmp_path / "file").read_text() == "x"


@pytest.mark.parametrize("argv", [["snapshot", "list"], ["purge", "--source", "fs:a.txt"], ["status"], ["search", "x"]])
def test_a_home_path_that_is_a_symlink_loop_is_one_line(tmp_path, argv):
    """guards against (trial 19a): --home naming a symbolic link loop (``loop1 -> loop2 -> loop1``),
    or a path under one, ending every command (the lifecycle ones, status, search's fast path) in
    pathlib's ``RuntimeError: Symlink loop`` traceback, exit 1."""
    from fabric_query import Fabric
    from fabric_resources.home import HomeUnusableError

    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    for home in (tmp_path / "loop1", tmp_path / "loop1" / "sub"):
        out = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", *argv,
                              "--home", str(home)], capture_output=True, text=True,
                             env={**os.environ, "HF_HUB_OFFLINE": "1"})
        assert out.returncode == 2 and "symbolic link loop" in out.stderr and "Traceback" not in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1
    with pytest.raises(HomeUnusableError, match="symbolic link loop"):
        Fabric(tmp_path / "loop1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop1", "loop2"]


def test_a_catalog_from_a_newer_fabric_is_one_line_saying_upgrade(tmp_path):
    """guards against: a home whose catalog a newer Fabric migrated opening silently, or a traceback (`[/y]` here: no such source)."""
    import sqlite3
    import subprocess
    import sys

    from fabric_resources.catalog import LATEST_VERSION, SqliteCatalog

    home = tmp_path / "home"
    SqliteCatalog(home / "catalog.sqlite3")
    con = sqlite3.connect(home / "catalog.sqlite3")
    with con:
        con.execute("INSERT INTO catalog_migrations VALUES (?, 'from-a-newer-fabric', 0)", (LATEST_VERSION + 1,))
    con.close()
    for command in (["status"], ["search", "x"]):
        out = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", *command,
                              "--home", str(home)], capture_output=True, text=True)
        assert out.returncode == 2, out.stderr
        assert f"schema version {LATEST_VERSION + 1}" in out.stderr and "upgrade Fabric" in out.stderr
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_a_catalog_from_an_older_fabric_is_not_migrated_by_a_reader(tmp_path):
    """guards against: `fabric status` / `search` (the read side, which opened the SQLite catalog
    as a writer) migrating a catalog an older Fabric wrote, where a read-only open must change
    nothing and say to run `fabric ingest PATH`; that ingest's writer open still migrates it."""
    import sqlite3

    from fabric_query import Fabric
    from fabric_resources.catalog import CatalogMigrationNeededError, SqliteCatalog
    from fabric_resources.schema import CATALOG_DDL

    home = tmp_path / "home"
    home.mkdir()
    con = sqlite3.connect(home / "catalog.sqlite3")  # as a Fabric from before versioning left it
    con.executescript(CATALOG_DDL)
    con.close()

    def tables() -> set[str]:
        with sqlite3.connect(home / "catalog.sqlite3") as c:
            return {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    before = tables()
    for command in (["status"], ["search", "x"]):
        out = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", *command,
                              "--home", str(home)], capture_output=True, text=True)
        assert out.returncode == 2, out.stderr
        assert "schema version 1" in out.stderr and "`fabric ingest PATH" in out.stderr
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    with pytest.raises(CatalogMigrationNeededError):
        Fabric(home)
    assert tables() == before and "catalog_migrations" not in before
    SqliteCatalog(home / "catalog.sqlite3")  # a writer's open (what `fabric ingest` does) migrates
    assert "catalog_migrations" in tables()
    Fabric(home)


def test_quickstart_checks_its_query_before_it_ingests(tmp_path):
    """guards against: `quickstart --query ''` ingesting everything first and only then failing."""
    home = tmp_path / "home"
    result = runner.invoke(app, ["quickstart", "--query", "", "--home", str(home)])
    assert result.exit_code == 2 and "EmptyQueryError" in result.output, result.output
    assert not (tmp_path / "home-sample").exists() and not home.exists(), "nothing written, nothing ingested"


def test_quickstart_with_no_folder_ingests_its_sample_and_verifies_a_citation(tmp_path, monkeypatch):
    """guards against: the README's main job broken (the sample was written inside the home, which
    is never a source since 2026-12-04, so `fabric quickstart` refused it and answered nothing)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    home = tmp_path / "home"
    out = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", "quickstart",
                          "--home", str(home)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "resolve first citation → verified" in out.stdout, out.stdout
    assert (tmp_path / "home-sample").is_dir() and not (home / "sample").exists()


def test_resolve_all_checks_every_hit_of_a_pack(tmp_path, fabric_home):
    """guards against: `fabric resolve --all pack.json` passing a pack whose later hit was edited
    (only the first hit was ever checked), or printing verdicts before refusing a malformed hit."""
    import json

    from conftest import ingest

    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper logged the tide.\n")
    (src / "b.txt").write_text("A lighthouse lamp burns oil through the night.\n")
    ingest(src, fabric_home)
    env, h = {"FABRIC_USE_SERVER": "0", "HF_HUB_OFFLINE": "1"}, ["--home", str(fabric_home.root)]
    pack = json.loads(runner.invoke(app, ["search", "lighthouse", "--json", *h], env=env).stdout)
    assert len(pack["results"]) >= 2
    f = tmp_path / "pack.json"
    f.write_text(json.dumps(pack))
    ok = runner.invoke(app, ["resolve", "--all", str(f), *h], env=env)
    n = len(pack["results"])
    assert ok.exit_code == 0 and ok.stdout.count(": verified") == n, ok.output
    assert f"{n} hit(s): {n} verified, 0 stale" in ok.stdout
    pack["results"][1]["text"] = pack["results"][1]["text"].replace("lighthouse", "lightship")
    f.write_text(json.dumps(pack))
    assert runner.invoke(app, ["resolve", str(f), *h], env=env).exit_code == 0  # the first hit alone
    bad = runner.invoke(app, ["resolve", "--all", str(f), *h], env=env)
    assert bad.exit_code == 1 and "hit 2: stale" in bad.stdout and "NO  hit-text" in bad.stdout, bad.output
    # Each verdict names the source its hit cites (trial 22e: a bare "verified" / "stale").
    keys = [r["citation"]["source_key"] for r in pack["results"]]
    assert f"hit 1: verified {keys[0]}\n" in bad.stdout and f"hit 2: stale {keys[1]}\n" in bad.stdout, bad.stdout
    assert f"{n} hit(s): {n - 1} verified, 1 stale" in bad.stdout
    pack["results"].append({"citation": {"source_key": "fs:notes/a.txt"}, "text": "x"})
    f.write_text(json.dumps(pack))
    malformed = runner.invoke(app, ["resolve", "--all", str(f), *h], env=env)
    assert malformed.exit_code == 2 and "verified" not in malformed.stdout and "stale" not in malformed.stdout
    assert f"result {n + 1}" in malformed.output, malformed.output


def test_resolve_of_a_pack_whose_shown_text_was_edited_is_stale(tmp_path, fabric_home):
    """guards against: `fabric resolve pack.json` answering verified for a pack whose hit text was
    edited after the search (the citation alone still verifies: the text a reader sees must too)."""
    import json

    from conftest import ingest

    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper logged the tide.\n")
    ingest(src, fabric_home)
    env, h = {"FABRIC_USE_SERVER": "0", "HF_HUB_OFFLINE": "1"}, ["--home", str(fabric_home.root)]
    pack = json.loads(runner.invoke(app, ["search", "lighthouse", "--json", *h], env=env).stdout)
    genuine, edited = tmp_path / "pack.json", tmp_path / "edited.json"
    genuine.write_text(json.dumps(pack))
    pack["results"][0]["text"] = pack["results"][0]["text"].replace("lighthouse", "lightship")
    edited.write_text(json.dumps(pack))
    ok = runner.invoke(app, ["resolve", str(genuine), *h], env=env)
    assert ok.exit_code == 0 and ok.stdout.startswith("verified") and "ok  hit-text" in ok.stdout
    bad = runner.invoke(app, ["resolve", str(edited), *h], env=env)
    assert bad.exit_code == 1 and bad.stdout.startswith("stale") and "NO  hit-text" in bad.stdout
    for text, code in ((None, 2), (12, 2), ("\ud800", 1)):  # blanked, not text, no UTF-8 form
        hit = {**pack["results"][0], "text": text}
        edited.write_text(json.dumps({**pack, "results": [hit]}))
        out = runner.invoke(app, ["resolve", str(edited), *h], env=env)
        assert out.exit_code == code and (code == 2 or "NO  hit-text" in out.stdout), (text, out.output)
    edited.write_text(json.dumps({**pack, "results": [{k: v for k, v in pack["results"][0].items() if k != "text"}]}))
    assert runner.invoke(app, ["resolve", str(edited), *h], env=env).exit_code == 2  # a pack's hit without text
    # The citation alone carries no shown text: it verifies as before.
    citation = tmp_path / "citation.json"
    citation.write_text(json.dumps(pack["results"][0]["citation"]))
    alone = runner.invoke(app, ["resolve", str(citation), *h], env=env)
    assert alone.exit_code == 0 and "hit-text" not in alone.stdout


def test_a_reader_that_closes_stdout_early_is_exit_141_never_a_verdict(tmp_path, fabric_home):
    """guards against (trial 17): `fabric resolve --all pack.json | head -1` exiting 1, the code of
    'stale', when `head` closed the pipe (rich's and Click's own broken-pipe handling both exit 1,
    also `ingest`'s and `status`'s 'incomplete'). A closed stdout is 128 + SIGPIPE, silently."""
    import json

    from conftest import ingest

    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper logged the tide.\n")
    ingest(src, fabric_home)
    env = {**os.environ, "FABRIC_USE_SERVER": "0", "HF_HUB_OFFLINE": "1"}
    h = ["--home", str(fabric_home.root)]
    pack = json.loads(runner.invoke(app, ["search", "lighthouse", "--json", *h], env=env).stdout)
    f = tmp_path / "pack.json"
    f.write_text(json.dumps(pack))
    for command in (["resolve", str(f)], ["resolve", "--all", str(f)], ["search", "lighthouse"],
                    ["search", "lighthouse", "--json"], ["status"], ["status", "--json"]):
        read, write = os.pipe()
        os.close(read)  # the reader is gone before the first line: every write is a broken pipe
        try:
            out = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", *command, *h],
                                 stdout=write, stderr=subprocess.PIPE, text=True, env=env, timeout=300)
        finally:
            os.close(write)
        assert (out.returncode, out.stderr) == (141, ""), (command, out.returncode, out.stderr[-800:])



def test_help_to_a_reader_that_closed_stdout_is_exit_141_too():
    """guards against (trial 18a): `fabric --help | true` and `fabric search --help | head -1`
    exiting 1: help is printed while Click parses the arguments, before the root group's own
    broken-pipe handling, and rich's console and Click end a broken pipe there with 1."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    for command in ([], ["--help"], ["search", "--help"], ["snapshot", "restore", "--help"], ["--version"]):
        read, write = os.pipe()
        os.close(read)  # the reader is gone before the first line: every write is a broken pipe
        try:
            out = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", *command],
                                 stdout=write, stderr=subprocess.PIPE, text=True, env=env, timeout=120)
        finally:
            os.close(write)
        assert (out.returncode, out.stderr) == (141, ""), (command, out.returncode, out.stderr[-800:])
    shown = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", "search", "--help"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert shown.returncode == 0 and "Usage" in shown.stdout  # a reader that reads: help as before


def test_every_command_summary_in_a_groups_help_is_one_unbroken_paragraph():
    """guards against (trial 19c): `fabric --help` cutting summaries mid-sentence (`… through a running
    `fabric serve` of⏎the home …`): Typer's rich help keeps a docstring's line breaks. On a terminal
    wide enough, each command's summary is one line holding its help's whole first paragraph."""
    import typer.main
    from typer.core import TyperGroup

    from fabric_assets.cli.root import app

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "2000", "TERMINAL_WIDTH": "2000"}
    groups = [([], typer.main.get_command(app))]
    checked = []
    while groups:
        path, group = groups.pop()
        shown = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", *path, "--help"],
                               capture_output=True, text=True, env=env, timeout=120)
        lines = shown.stdout.splitlines()
        for name, command in group.commands.items():
            first = " ".join(command.help.split("\n\n")[0].split()) if command.help else ""
            assert any(name in line and first in line for line in lines), (path, name, first)
            checked.append(name)
            if isinstance(command, TyperGroup):
                groups.append(([*path, name], command))
    assert {"search", "repair", "snapshot", "restore", "bench", "ann"} <= set(checked)

def test_file_names_print_as_they_are_on_one_line(tmp_path, fabric_home):
    """guards against: a file named with a newline printing as a hit of its own (`x⏎2. fs:…/trusted.md`)
    and brackets in a name read as rich markup, so `fabric status` named `[dim]bad.pdf` as
    `bad.pdf` and `a[red]b.bin` as `ab.bin` (hostile trial, 2026-12-05); a name that is not UTF-8
    (skipped) named as `fs:src/'b\\udcff.txt'`, quotes inside the key and Python's stand-in for the
    byte, where `fabric` prints a byte it cannot show as `\\xff` (trial 17)."""
    from conftest import ingest

    src = tmp_path / "src"
    src.mkdir()
    (src / "x\n2. fs:src-trusted.md.txt").write_text("quokka\n")
    (src / "[dim]bad.pdf").write_text("not a pdf")
    (src / "a[red]b.bin").write_text("quokka\n")
    (src / os.fsdecode(b"b\xff.txt")).write_text("quokka\n")
    ingest(src, fabric_home)
    env, h = {"FABRIC_USE_SERVER": "0", "HF_HUB_OFFLINE": "1"}, ["--home", str(fabric_home.root)]
    found = runner.invoke(app, ["search", "quokka", *h], env=env)
    assert found.exit_code == 0, found.output
    heads = [line for line in found.stdout.splitlines() if line[:1].isdigit()]
    assert heads == ["1. fs:src/x\\x0a2. fs:src-trusted.md.txt line 1"], found.stdout
    status = runner.invoke(app, ["status", *h], env=env)
    assert "fs:src/[dim]bad.pdf: malformed-pdf" in status.stdout and "fs:src/a[red]b.bin (" in status.stdout, status.stdout
    assert "skipped fs:src/b\\xff.txt: name-not-utf-8" in status.stdout, status.stdout


def test_a_name_with_a_space_at_its_edge_or_a_zero_width_character_is_quoted_where_a_line_names_it(
        tmp_path, fabric_home):
    """guards against (trial 22a): `fabric status` printed `unsupported fs:names/trail.txt  (…)`,
    `skipped fs:names/fifo : not-a-regular-file`, `failed fs:names/ bad.pdf: …`: a name's trailing
    space invisible, a leading one read as a gap, so the file could not be told from `trail.txt` or
    found. Such keys are quoted in every line that names a file (status, search, `status --source`);
    other names print as before; `--json` keeps the key itself."""
    from conftest import ingest

    src = tmp_path / "names"
    src.mkdir()
    (src / " lead.txt").write_text("quokka on the left\n")
    (src / "trail.txt ").write_text("not parsed: no known extension\n")
    (src / "plain name.txt").write_text("quokka in the middle\n")
    (src / "zero\u200bwidth.txt").write_text("quokka unseen\n")
    os.mkfifo(src / "fifo ")
    (src / "bad.pdf ").write_bytes(b"%PDF-1.4 junk")
    ingest(src, fabric_home)
    env, h = {"FABRIC_USE_SERVER": "0", "HF_HUB_OFFLINE": "1"}, ["--home", str(fabric_home.root)]
    status = runner.invoke(app, ["status", *h], env=env, terminal_width=300)
    lines = [ln.strip() for ln in status.stdout.splitlines()]
    assert 'skipped "fs:names/fifo ": not-a-regular-file: fifo' in lines, status.stdout
    assert 'unsupported "fs:names/trail.txt " (application/octet-stream)' in lines, status.stdout
    assert 'unsupported "fs:names/bad.pdf " (application/octet-stream)' in lines, status.stdout
    found = runner.invoke(app, ["search", "quokka", *h], env=env)
    heads = sorted(ln.split(" ", 1)[1] for ln in found.stdout.splitlines() if ln[:1].isdigit())
    assert heads == ['"fs:names/ lead.txt" line 1', '"fs:names/zero\\u200bwidth.txt" line 1',
                     "fs:names/plain name.txt line 1"], found.stdout
    one = runner.invoke(app, ["status", "--source", "trail.txt ", *h], env=env)
    assert one.stdout.splitlines()[0] == '"fs:names/trail.txt "  (present)', one.stdout
    as_json = json.loads(runner.invoke(app, ["status", "--json", *h], env=env).stdout)
    assert "fs:names/trail.txt " in json.dumps(as_json) and '\\"fs:names' not in json.dumps(as_json)


def test_a_damaged_catalog_is_one_line_on_every_command(tmp_path, fabric_home):
    """guards against: a `sqlite3.DatabaseError: database disk image is malformed` traceback with
    exit 1 (the code of 'stale' and of failed files) from search, status and lexical-health when the
    catalog is truncated (hostile trial, 2026-12-05)."""
    from conftest import ingest

    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper logged the tide.\n")
    ingest(src, fabric_home)
    catalog = fabric_home.root / "catalog.sqlite3"
    os.truncate(catalog, catalog.stat().st_size // 2)
    env = {**os.environ, "FABRIC_USE_SERVER": "0", "HF_HUB_OFFLINE": "1"}
    for command in (["search", "lighthouse"], ["status"], ["lexical-health"]):
        out = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", *command,
                              "--home", str(fabric_home.root)], capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 2, (command, out.stderr[-500:])
        assert "catalog cannot be read" in out.stderr and "Traceback" not in out.stderr, (command, out.stderr[-500:])


def test_a_damaged_dagster_database_is_one_line(tmp_path, fabric_home):
    """guards against: a SQLAlchemy `DatabaseError: file is not a database` traceback (exit 1) from
    ingest, cleanup and audit when Dagster's run database under the home is overwritten (hostile
    trial 8)."""
    from conftest import ingest

    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper logged the tide.\n")
    ingest(src, fabric_home)
    (fabric_home.layout.dagster_home / "history" / "runs.db").write_bytes(b"\x8f not a database " * 300)
    env = {**os.environ, "FABRIC_USE_SERVER": "0", "HF_HUB_OFFLINE": "1"}
    for command in (["cleanup"], ["ingest", str(src)]):
        out = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", *command,
                              "--home", str(fabric_home.root)], capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 2, (command, out.stderr[-500:])
        assert "Dagster's storage" in out.stderr and "Traceback" not in out.stderr, (command, out.stderr[-500:])


def test_an_altered_release_row_is_a_typed_error_on_every_command_and_the_python_api(tmp_path, fabric_home):
    """guards against: a release manifest rewritten as non-JSON, or without its `tables`, being a
    `JSONDecodeError` / `KeyError` / `AttributeError` traceback from search, status, resolve, audit,
    lexical-health, snapshot create and ingest; the current pointer naming a release the catalog
    lacks reported as "no activated release: run `fabric ingest` first", and cleanup running on it
    (hostile trials, 2026-12-05). Also (trial 24e): a source entry edited into a list, its parse ID
    set to null, its date to a string or its language to a list, or the lexical generation edited
    into a list, passed the manifest check (it looked at ``sources`` and ``tables`` only): search and
    status ended in a ``TypeError`` or ``AttributeError`` traceback."""
    import sqlite3

    from conftest import ingest

    from fabric_query import Fabric
    from fabric_resources.catalog import CatalogDamagedError

    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper logged the tide.\n")
    ingest(src, fabric_home)
    current = fabric_home.catalog.current_release_id()
    env = {**os.environ, "FABRIC_USE_SERVER": "0", "HF_HUB_OFFLINE": "1"}
    every = ("search", "status", "lexical-health")
    for alter, named, commands in (
            (f"UPDATE releases SET manifest = '{{garbage' WHERE release_id = {current}", "manifest", every),
            (f"UPDATE releases SET manifest = '{{\"sources\": {{}}}}' WHERE release_id = {current}",
             "with its sources and tables", every),
            (f"UPDATE releases SET manifest = json_set(manifest, '$.tables', 'x') WHERE release_id = {current}",
             "with its sources and tables", every),
            ("UPDATE pointer SET release_id = 999", "names release 999", (*every, "cleanup")),
            *((f"UPDATE releases SET manifest = {entry} WHERE release_id = {current}",
               "each source an object of typed fields", ("search", "status"))
              for entry in ("json_set(manifest, '$.sources.\"fs:notes/a.txt\".parse_id', NULL)",
                            "json_set(manifest, '$.sources.\"fs:notes/a.txt\"', json('[1, 2]'))",
                            "json_set(manifest, '$.sources.\"fs:notes/a.txt\".mtime_ns', 'x')",
                            "json_set(manifest, '$.sources.\"fs:notes/a.txt\".language', json('[1]'))",
                            "json_set(manifest, '$.lexical_generation', json('[\"x\"]'))"))):
        con = sqlite3.connect(fabric_home.root / "catalog.sqlite3")
        saved = con.execute("SELECT manifest FROM releases WHERE release_id = ?", (current,)).fetchone()[0]
        with con:
            con.execute(alter)
        con.close()
        for command in ([c, "lighthouse"] if c == "search" else [c] for c in commands):
            out = subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", *command,
                                  "--home", str(fabric_home.root)], capture_output=True, text=True, env=env, timeout=300)
            assert out.returncode == 2, (alter, command, out.stderr[-500:])
            assert named in out.stderr and "restore the home" in out.stderr and "Traceback" not in out.stderr, \
                (alter, command, out.stderr[-500:])
        with pytest.raises(CatalogDamagedError, match=named):
            Fabric(fabric_home.root).search("lighthouse")
        con = sqlite3.connect(fabric_home.root / "catalog.sqlite3")
        with con:
            con.execute("UPDATE releases SET manifest = ? WHERE release_id = ?", (saved, current))
            con.execute("UPDATE pointer SET release_id = ?", (current,))
        con.close()
    assert Fabric(fabric_home.root).search("lighthouse").results


def test_damaged_parse_run_and_state_rows_are_one_line_or_healed(tmp_path, fabric_home):
    """guards against (hostile trial 2, 2026-12-05): a `parse_runs.verdicts` / `counts` or `state`
    value that is not JSON being a `JSONDecodeError` traceback from status, `parse
    accept|discard|reparse|retry` and the Python API, or SQLite's "malformed JSON" after ~90 lines of
    Dagster's STEP_FAILURE output from ingest; and a damaged memo (what only saves work) stopping
    ingest instead of being redone."""
    import sqlite3

    from conftest import ingest

    from fabric_query import Fabric
    from fabric_resources.catalog import CatalogDamagedError

    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper logged the tide.\n")
    ingest(src, fabric_home)
    parse_id = fabric_home.catalog.parse_runs()[0].parse_id
    env = {**os.environ, "FABRIC_USE_SERVER": "0", "HF_HUB_OFFLINE": "1"}

    def fabric(*command: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", "from fabric_assets.cli import main; main()", *command,
                               "--home", str(fabric_home.root)], capture_output=True, text=True, env=env, timeout=300)

    def alter(sql: str, *args: str) -> None:
        con = sqlite3.connect(fabric_home.root / "catalog.sqlite3")
        with con:
            con.execute(sql, args)
        con.close()

    saved = sqlite3.connect(fabric_home.root / "catalog.sqlite3").execute(
        "SELECT verdicts, counts FROM parse_runs WHERE parse_id = ?", (parse_id,)).fetchone()
    alter("UPDATE parse_runs SET verdicts = '{garbage'")
    named = f"parse run {parse_id}'s verdicts in the catalog is not a JSON object"
    for command in (["status"], ["parse", "accept", parse_id], ["parse", "discard", parse_id],
                    ["parse", "reparse", "fs:notes/a.txt"], ["parse", "retry"], ["ingest", str(src)]):
        out = fabric(*command)
        assert out.returncode == 2, (command, out.stderr[-800:])
        assert named in out.stderr and "restore the home" in out.stderr, (command, out.stderr[-800:])
        assert "Traceback" not in out.stderr and "STEP_FAILURE" not in out.stderr, (command, out.stderr[-800:])
    alter("UPDATE parse_runs SET verdicts = ?, counts = '[]'", saved[0])  # JSON, but not an object
    with pytest.raises(CatalogDamagedError, match="counts in the catalog is not a JSON object"):
        Fabric(fabric_home.root).status()
    con = sqlite3.connect(fabric_home.root / "catalog.sqlite3")
    with con:
        con.execute("UPDATE parse_runs SET verdicts = ?, counts = ?", saved)
    con.close()

    # A report each scan rewrites: status says so, and the next ingest heals it.
    alter("UPDATE state SET value = '{x' WHERE name = 'last_scan'")
    out = fabric("status")
    assert out.returncode == 2 and "state row 'last_scan'" in out.stderr and "fabric ingest` rewrites it" in out.stderr
    with pytest.raises(CatalogDamagedError, match="last_scan"):
        Fabric(fabric_home.root).status()
    # Memos (what only saves work) read as absent: the ingest redoes the work and writes them again.
    alter("UPDATE state SET value = '{x' WHERE name IN ('activation_marks', 'chunker_settings', "
          "'projection_models', 'scan_parser_identities')")
    out = fabric("ingest", str(src))
    assert out.returncode == 0, out.stderr[-800:]
    assert Fabric(fabric_home.root).status().last_scan_at is not None
    assert Fabric(fabric_home.root).search("lighthouse").results

    # JSON of the right outer type with members of the wrong type (hostile trial 3): one line, or
    # healed where the row only saves work; a report the scan rewrites is rewritten even when the
    # scan skipped nothing (a damaged `scan_skipped` outlived every ingest).
    alter("UPDATE state SET value = '{\"at\": \"x\"}' WHERE name = 'last_scan'")
    out = fabric("status")
    assert out.returncode == 2 and "last_scan' in the catalog is not a JSON object of the expected shape" in out.stderr
    alter("UPDATE state SET value = '{\"at\": -1e300}' WHERE name = 'last_scan'")  # no time a clock gave
    assert fabric("status").returncode == 2
    alter("UPDATE releases SET created_at = 'x'")  # hostile trial 4: a pydantic traceback from status
    out = fabric("status")
    assert out.returncode == 2 and "created_at in the catalog is not a JSON number" in out.stderr, out.stderr[-800:]
    alter("UPDATE releases SET created_at = 1796000000")
    alter("INSERT OR REPLACE INTO state(name, value) VALUES ('scan_skipped', '[]')")
    alter("UPDATE state SET value = '{\"fragments\": 5}' WHERE name = 'retention_orphan_scan'")
    assert fabric("ingest", str(src)).returncode == 0 and fabric("status").returncode == 0
    assert fabric("cleanup").returncode == 0
    alter("INSERT OR REPLACE INTO state(name, value) VALUES ('release_id_floor', '99999999999999999999999')")
    (src / "b.txt").write_text("A second note about the harbour.\n")
    out = fabric("ingest", str(src))
    assert out.returncode == 2 and "release_id_floor' in the catalog is not a JSON integer" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.splitlines()) <= 3, out.stderr[-800:]


def test_resolve_prints_a_deleted_files_name_on_one_line_without_markup_or_overrides(tmp_path, fabric_home):
    """guards against (hostile trial 13a): `fabric resolve` of a citation whose file was deleted
    printing its source key raw in the `NO` line: a folder named `a[` holding `x].txt` (key
    `…a[/x].txt`) was read as rich markup, a `MarkupError` traceback (exit 1, the code of 'stale');
    a name holding a newline printed a line of its own (`  ok  source-bytes: …` under the verdict);
    a bidirectional override reversed the rest of the line. `status --source '[/x]'` was the same
    traceback (`[/y]` here: no such source)."""
    import json

    from conftest import ingest

    src = tmp_path / "notes"
    (src / "a[").mkdir(parents=True)
    names = ["a[/x].txt", "r\u202egpj.txt", "n\n  ok  source-bytes: current bytes match.txt"]
    for i, name in enumerate(names):
        (src / name).write_text(f"The lighthouse keeper number {i} logged the tide.\n")
    ingest(src, fabric_home)
    env, h = {"FABRIC_USE_SERVER": "0", "HF_HUB_OFFLINE": "1"}, ["--home", str(fabric_home.root)]
    pack = json.loads(runner.invoke(app, ["search", "lighthouse keeper", "--json", *h], env=env).stdout)
    assert {r["citation"]["source_key"] for r in pack["results"]} == {f"fs:notes/{n}" for n in names}
    for name in names:
        (src / name).unlink()
    f = tmp_path / "pack.json"
    f.write_text(json.dumps(pack))
    out = runner.invoke(app, ["resolve", "--all", str(f), *h], env=env)
    assert out.exit_code == 1 and isinstance(out.exception, (SystemExit, type(None))), out.exception
    assert "3 hit(s): 0 verified, 3 stale" in out.stdout, out.output
    assert "a[/x].txt" in out.stdout and "r\\u202egpj.txt" in out.stdout and "n\\x0a  ok  source-bytes" in out.stdout
    assert "\u202e" not in out.stdout
    assert not any(line.startswith("  ok  source-bytes: current bytes match.txt") for line in out.stdout.splitlines())
    status = runner.invoke(app, ["status", "--source", "[/y]", *h], env=env)
    assert isinstance(status.exception, (SystemExit, type(None))), status.exception
    assert status.exit_code == 1 and "no source matches '[/y]'" in status.stdout, status.output


def test_status_line_before_the_first_release_is_words_not_python_reprs(monkeypatch):
    """guards against (fresh-user trial 19c): after an ingest interrupted before its first release,
    `fabric status` began "release None: …, sources by state {'present': 6}"."""
    import io

    from rich.console import Console

    import fabric_query.cli as cli
    from fabric_query.types import Status

    for release_id, head in ((None, "no release yet:"), (3, "release 3:")):
        st = Status(home="/h", roots=("/r",), sources_by_state={"present": 6, "deleted": 1}, release_id=release_id,
                    active_sources=0, active_parses=0, failed=(), held=(), pending=0, unsupported=(), withheld=())
        out = io.StringIO()
        monkeypatch.setattr(cli, "console", Console(file=out, width=300))
        cli.print_status("/h", st)
        first = out.getvalue().splitlines()[0]
        assert first.startswith(head) and "None" not in first and "{" not in first, first
        assert "sources: 1 deleted, 6 present" in first, first


def test_resolve_and_audit_of_a_mistyped_pack_file_say_no_such_file(tmp_path, fabric_home):
    """guards against (fresh-user trial 19c): `fabric resolve pakc.json` answered "not JSON: the
    argument (and there is no such file): Expecting value: line 1 column 1 (char 0)", a JSON
    decoder's position for what is a file name that does not exist; inline JSON that is broken
    still gets the decoder's reason."""
    missing = tmp_path / "pakc.json"
    for command in ("resolve", "audit"):
        said = runner.invoke(app, [command, str(missing), "--home", str(fabric_home.root)])
        assert said.exit_code == 2, said.output
        assert said.output.strip() == f"error: {missing}: no such file (nor citation or pack JSON)", said.output
        broken = runner.invoke(app, [command, '{"results": [', "--home", str(fabric_home.root)])
        assert broken.exit_code == 2 and broken.output.startswith("error: not JSON: the argument: "), broken.output


def test_an_interrupted_ingest_ends_with_its_error_line_not_the_progress_bar(tmp_path, monkeypatch):
    """guards against (fresh-user trial 19c): Ctrl-C during `fabric ingest` printed "error:
    interrupted …" and then the progress bar once more ("ingesting … 6/12"), as its last line,
    which read as an ingest still running and stuck. The bar is drawn first; the error is last."""
    import fabric_assets.ingest as ingest_module

    def interrupted(path, home, progress=None, **kwargs):
        progress(1, 4)
        raise KeyboardInterrupt

    monkeypatch.setattr(ingest_module, "ingest", interrupted)
    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("tide tables\n")
    result = runner.invoke(app, ["ingest", str(src), "--home", str(tmp_path / "home")])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 130, result.output
    assert "1/4" in result.output and lines[-1].startswith("error: interrupted before a release was published"), \
        result.output


def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


def test_an_interrupted_ingest_says_whether_its_release_was_published(tmp_path, fabric_home, monkeypatch):
    """guards against (trial 20f): a Ctrl-C of `fabric ingest` after its release was published said
    "An interrupted parse run activates nothing" (the release was active), and one in the summary
    (after the ingest) ended with exit 130 and no word. Each moment gets one line that is true of it."""
    import fabric_assets.cli.pipeline as pipeline
    import fabric_assets.ingest as ingest_module
    from fabric_resources.home import FabricHome

    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("tide tables for the harbour\n")

    def said(patched: tuple) -> tuple[int | None, str]:
        with monkeypatch.context() as m:
            m.setattr(*patched)
            result = runner.invoke(app, ["ingest", str(src)])
        assert result.exit_code == 130, result.output
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert lines[-1].startswith("error: interrupted") and "Traceback" not in result.output, result.output
        return FabricHome(fabric_home.root).catalog.current_release_id(), lines[-1]

    # After the activation published release 1 (failed sources are read after it).
    assert said((ingest_module, "failed_sources", _interrupt)) == (1, "error: interrupted after release 1 was "
                                                                   "published: it is active and searches serve it; "
                                                                   "the next `fabric ingest` finishes any work left.")
    (src / "b.txt").write_text("the lighthouse keeper's log\n")
    current, line = said((ingest_module, "run_activation", _interrupt))  # parsed, not activated
    assert current == 1 and line.startswith("error: interrupted before a release was published"), line
    assert "serve release 1 as before" in line
    # The summary, after the ingest (it activated release 2): was exit 130 and not a word.
    assert said((pipeline, "_release_row", _interrupt)) == (2, "error: interrupted after the ingest finished (release "
                                                               "2 is current); its summary was cut short: `fabric "
                                                               "status` shows the home.")


def test_an_interrupted_purge_says_whether_it_removed_nothing_stopped_part_way_or_ended(tmp_path, fabric_home,
                                                                                      monkeypatch):
    """guards against (trial 20f): a Ctrl-C of `fabric purge` ended with exit 130 and no word, whether
    nothing was removed yet, the purge stopped part-way (what it removes partly still there) or its
    report was being printed."""
    from conftest import ingest

    import fabric_assets.cli.lifecycle as lifecycle
    import fabric_assets.lifecycle.purge as purge_module
    from fabric_resources.home import FabricHome
    from fabric_resources.tombstones import tombstones

    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("tide tables for the harbour\n")
    (src / "gone.txt").write_text("a note to purge\n")
    ingest(src, fabric_home)
    (src / "gone.txt").unlink()
    ingest(src, FabricHome(fabric_home.root))
    argv = ["purge", "--source", f"fs:{src.name}/gone.txt"]

    def said(patched: tuple) -> tuple[list, str]:
        with monkeypatch.context() as m:
            m.setattr(*patched)
            result = runner.invoke(app, argv)
        assert result.exit_code == 130, result.output
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in result.output, result.output
        return [(t.tombstone_id, t.completed_at is not None) for t in tombstones(FabricHome(fabric_home.root).catalog)], \
            lines[0]

    assert said((purge_module, "plan_purge", _interrupt)) == (
        [], "error: interrupted before the purge removed anything: nothing was removed.")
    assert said((purge_module, "_remove", _interrupt)) == (
        [(1, False)], "error: interrupted: purge 1 stopped part-way, so some of what it removes may still be in the "
                      "home; run the same `fabric purge` again (any purge finishes it).")
    assert said((lifecycle, "_report", _interrupt)) == (
        [(1, True), (2, True)], "error: interrupted after the purge had ended (purge 2: what it removed is gone); "
                                "its report was cut short: `fabric status` shows the home.")


def test_a_ctrl_c_before_a_command_begins_or_as_fabric_exits_is_one_line_and_exit_130(tmp_path, monkeypatch):
    """guards against (trial 20f): a Ctrl-C while `fabric` imports (before Typer runs) was a
    KeyboardInterrupt traceback; one while Typer parses the arguments (it imports pydantic there)
    was exit 130 and no word; one while Python exits (its atexit callbacks) an "Exception ignored"
    traceback and exit 0. Each is one line now, and exit 130."""
    import fabric_assets.cli.root as root

    monkeypatch.setattr(root._Commands, "resolve_command", _interrupt)  # Typer's part, before the command
    parsing = runner.invoke(app, ["status", "--home", str(tmp_path)])
    assert (parsing.exit_code, parsing.output) == (130, "error: interrupted before the command changed anything.\n")
    monkeypatch.undo()
    prelude = {
        "importing": "import fabric_query.cli_fast as fast\n"
                     "def run(argv):\n    raise KeyboardInterrupt\n"
                     "fast.run = run\n",
        "exiting": "import atexit, os, signal\n"
                   "atexit.register(lambda: os.kill(os.getpid(), signal.SIGINT))\n",
    }
    said = {}
    for moment, code in prelude.items():
        out = subprocess.run([sys.executable, "-c", code + "import sys\nfrom fabric_assets.cli import main\nmain()",
                              "status", "--home", str(tmp_path / "none")], capture_output=True, text=True,
                             env={**os.environ, "HF_HUB_OFFLINE": "1"})
        said[moment] = (out.returncode, out.stderr.strip().splitlines()[-1:], "Traceback" in out.stderr)
    assert said == {
        "importing": (130, ["error: interrupted before the command changed anything."], False),
        "exiting": (130, ["error: interrupted as fabric exited, after the command had ended: what it printed stands."],
                    False)}, said


#: Run `fabric` with a real SIGINT sent to itself where ``sys.argv[1]`` (module:attribute) is
#: called: a deterministic moment, as Ctrl-C in the terminal would deliver it.
_SIGINT_AT = """
import importlib, os, signal, sys, time

module, _, name = sys.argv.pop(1).partition(":")
owner = importlib.import_module(module)
*path, name = name.split(".")
for part in path:
    owner = getattr(owner, part)

def interrupted(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(60)  # the handler raises KeyboardInterrupt here

setattr(owner, name, interrupted)
from fabric_assets.cli import main
main()
"""


def _sigint_at(where: str, *argv: str) -> tuple[int, list[str]]:
    out = subprocess.run([sys.executable, "-c", _SIGINT_AT, where, *argv], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert "Traceback" not in out.stderr, out.stderr
    return out.returncode, [line for line in out.stderr.splitlines() if line.strip()]


def test_a_ctrl_c_of_any_command_is_one_line_saying_what_it_left_and_exit_130(tmp_path, fabric_home):
    """guards against (trial 21b): a Ctrl-C of every command but `fabric ingest` and `purge` (status,
    snapshot create and restore, eval, cleanup, …) ended with exit 130 and no word: whether the
    snapshot was made, or a restore into a folder left half a home there, was not said. Each
    moment gets one line true of it."""
    from conftest import ingest

    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("tide tables for the harbour\n")
    ingest(src, fabric_home)
    home = ["--home", str(fabric_home.root)]
    snapshots = "fabric_assets.lifecycle.snapshots"
    assert _sigint_at("fabric_query.cli:print_status", "status", *home) == (
        130, ["error: `fabric status` interrupted: nothing was changed (it only reads)."])
    assert _sigint_at(f"{snapshots}:_copy_database", "snapshot", "create", *home) == (
        130, ["error: `fabric snapshot create` interrupted: the snapshot was not made (the part made is listed as "
              "INCOMPLETE until the next `fabric snapshot create` or `delete` removes it); the home itself is "
              "unchanged."])
    # After the snapshot was made, while its line is printed.
    assert _sigint_at("fabric_assets.cli.lifecycle:console.print", "snapshot", "create", *home) == (
        130, ["error: `fabric snapshot create` interrupted: snapshot 1 had been made: it is complete (`fabric "
              "snapshot list`)."])
    into = tmp_path / "restored"
    assert _sigint_at(f"{snapshots}:_restore", "snapshot", "restore", "1", "--into", str(into), *home) == (
        130, [f"error: `fabric snapshot restore` interrupted: nothing was restored into {into} (a restore into a "
              "folder is all or nothing); the home is unchanged."])
    assert not into.exists() and not list(tmp_path.glob(".restored*"))
    # After it was renamed into place, while its line is printed (trial 21f: "nothing was restored").
    assert _sigint_at("fabric_assets.cli.lifecycle:console.print", "snapshot", "restore", "1", "--into", str(into),
                      *home) == (130, [f"error: `fabric snapshot restore` interrupted: snapshot 1 had been restored "
                                       f"into {into}: it is complete; the home is unchanged."])
    assert (into / "catalog.sqlite3").is_file()
    # A delete interrupted before it began leaves the snapshot; one that had ended says so (trial
    # 21f: "run the same delete again", which answered "no snapshot 1").
    assert _sigint_at("fabric_assets.lifecycle.snapshots:_drop_half_made", "snapshot", "delete", "1", *home) == (
        130, ["error: `fabric snapshot delete` interrupted: the snapshot may be partly deleted: run the same "
              "`fabric snapshot delete` again (the home's own files are not touched)."])
    assert _sigint_at("fabric_assets.cli.lifecycle:console.print", "snapshot", "delete", "1", *home) == (
        130, ["error: `fabric snapshot delete` interrupted: snapshot 1 had been deleted: it is gone."])


#: `fabric` with a first Ctrl-C in the command (``sys.argv[1]``, raised there as Python raises a
#: SIGINT's) and a real second one where ``sys.argv[2]`` is called ("-": none).
_SIGINT_TWICE = """
import importlib, os, signal, sys, time

def patch(where, replacement):
    module, _, name = where.partition(":")
    owner = importlib.import_module(module)
    *path, name = name.split(".")
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    setattr(owner, name, lambda *a, **k: replacement(original, *a, **k))

def first(original, *args, **kwargs):
    raise KeyboardInterrupt

def second(original, *args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(60)  # the handler raises KeyboardInterrupt here

first_at, second_at = sys.argv.pop(1), sys.argv.pop(1)
if first_at != "-":
    patch(first_at, first)
patch(second_at, second)
from fabric_assets.cli import main
main()
"""


def test_a_second_or_late_ctrl_c_is_one_line_saying_what_is_known(tmp_path, fabric_home):
    """guards against (stop 55 left it open): a second Ctrl-C while the first one's line was being
    made (a command's line may read the home: the snapshot made or not, the release published or
    not), or one as Click closed a command that had ended, ended with exit 130 and no line: Typer
    caught it after the command's own code. Each is one line now: the command's declared text
    when it is fixed, else `fabric status` as where to look; after the end, that what it printed
    stands. A Ctrl-C after the line was said adds nothing."""
    from conftest import ingest

    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("tide tables for the harbour\n")
    ingest(src, fabric_home)  # a release: a snapshot can be made
    home = ["--home", str(fabric_home.root)]

    def run(first: str, second: str, *argv: str) -> tuple[int, list[str]]:
        out = subprocess.run([sys.executable, "-c", _SIGINT_TWICE, first, second, *argv], capture_output=True,
                             text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        assert "Traceback" not in out.stderr, out.stderr
        return out.returncode, [line for line in out.stderr.splitlines() if line.strip()]

    again = "fabric_assets.cli.root:interrupted_line"  # the first's line being made
    assert run("fabric_query.cli:print_status", again, "status", *home) == (
        130, ["error: `fabric status` interrupted again before it said what it left: nothing was changed (it only "
              "reads)."])
    assert run("fabric_assets.lifecycle.snapshots:_copy_database", again, "snapshot", "create", *home) == (
        130, ["error: `fabric snapshot create` interrupted again before it said what it left: `fabric status` "
              "shows what it left."])
    # The command ended (its lines printed); Click closes its context.
    code, lines = run("-", "typer._click.core:Context.close", "status", *home)
    assert code == 130 and lines[-1:] == [
        "error: interrupted as fabric exited, after the command had ended: what it printed stands."], lines
    # The first's line said, a second Ctrl-C as Click closes the context: the first's line alone.
    code, lines = run("fabric_query.cli:print_status", "typer._click.core:Context.close", "status", *home)
    assert (code, lines) == (130, ["error: `fabric status` interrupted: nothing was changed (it only reads)."])


def test_every_command_declares_what_a_ctrl_c_of_it_leaves():
    """guards against: a command added without a line of its own for Ctrl-C getting the generic one
    (or Typer's silent exit 130). `ingest` and `purge` say theirs inside the command."""
    import typer
    from typer.core import TyperGroup

    from fabric_query.cli_interrupt import ATTRIBUTE

    def leaves(group: TyperGroup, prefix: str):
        for name, command in group.commands.items():
            if isinstance(command, TyperGroup):
                yield from leaves(command, f"{prefix}{name} ")
            else:
                yield f"{prefix}{name}", getattr(command.callback.args[1], ATTRIBUTE, None)

    declared = dict(leaves(typer.main.get_command(app), ""))
    assert len(declared) > 30 and "snapshot restore" in declared and "bench serve" in declared
    assert sorted(name for name, said in declared.items() if said is None) == ["ingest", "purge"]


def _run_with_stderr_blocked(argv: list[str], signals: int, prelude: str = "") -> tuple[int, list[str], str]:
    """Run `fabric argv` with its standard error a pipe already full (a pager paused: `fabric … 2>&1 |
    less`), so its first write to it blocks; send SIGINT each time it is blocked there (``signals``
    times), then read the pipe to its end. Returns the exit code, the lines it wrote and its stderr."""
    import fcntl
    import signal
    import time

    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETFL, os.O_NONBLOCK)
    filled = 0
    for size in (4096, 1):
        try:
            while True:
                filled += os.write(write_end, b"x" * size)
        except BlockingIOError:
            pass
    fcntl.fcntl(write_end, fcntl.F_SETFL, 0)
    proc = subprocess.Popen([sys.executable, "-c", prelude + "from fabric_assets.cli import main\nmain()", *argv],
                            stderr=write_end, stdout=subprocess.DEVNULL, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    os.close(write_end)
    try:
        for _ in range(signals):
            deadline = time.monotonic() + 120
            while "pipe_write" not in Path(f"/proc/{proc.pid}/wchan").read_text():
                assert proc.poll() is None and time.monotonic() < deadline, "fabric never blocked writing to stderr"
                time.sleep(0.01)
            proc.send_signal(signal.SIGINT)
            time.sleep(0.2)  # the handler runs; a line it writes blocks in turn
        while filled:
            filled -= len(os.read(read_end, min(filled, 65536)))
        chunks = []
        while chunk := os.read(read_end, 65536):
            chunks.append(chunk)
        code = proc.wait(timeout=120)
    finally:
        proc.kill()
        os.close(read_end)
    text = b"".join(chunks).decode(errors="replace")
    return code, [line for line in text.splitlines() if line.strip()], text


@pytest.mark.skipif(not Path("/proc/self/wchan").exists(), reason="tells a blocked write by /proc/<pid>/wchan")
def test_a_ctrl_c_while_an_error_line_is_written_says_the_command_had_ended(tmp_path):
    """guards against (trial 24d): a Ctrl-C while `fabric` wrote a command's one-line error (its
    stderr a paused pager, so the write blocked) lost the error with the write it cut and said
    "interrupted before the command changed anything", though the command had run to that error
    (and may have changed the home before it); a second Ctrl-C while that line was written was a
    KeyboardInterrupt traceback. Now the error is said whole, marked as interrupted after the
    command had ended, exit 130; a second Ctrl-C ends the process at once, exit 130, no traceback."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"retention": {"releases": "many"}}))
    code, lines, text = _run_with_stderr_blocked(["status", "--home", str(home)], signals=1)
    assert "Traceback" not in text and code == 130, text
    # The error's own write was cut (nothing of it written): it is said again, whole, in the one line.
    assert lines[-1].startswith("error: invalid configuration ") and lines[-1].endswith(
        "retention.releases: Input should be a valid integer, unable to parse string as an integer (interrupted "
        "as this was said; the command had ended with it)") and len(lines) in (1, 2), lines
    # A Ctrl-C before the command began, whose line blocks in turn; a second Ctrl-C then.
    first = "import fabric_query.cli_fast as fast\ndef run(argv):\n    raise KeyboardInterrupt\nfast.run = run\n"
    code, lines, text = _run_with_stderr_blocked(["status", "--home", str(home)], signals=0, prelude=first)
    assert (code, lines) == (130, ["error: interrupted before the command changed anything."]), text
    code, lines, text = _run_with_stderr_blocked(["status", "--home", str(home)], signals=1, prelude=first)
    assert (code, lines) == (130, []), text  # at once: its line was never written
