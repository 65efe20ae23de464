"""Issue 13, ingest side: nothing lost, nothing leaked, nothing wrong said — over real runs.

One folder holds good documents next to every kind of bad input the hostile trial
used: an EPUB whose package is a corrupt LZMA member, a parser that raises an
exception of an unexpected type, a FIFO, a socket, a device node, a file the scan
cannot open, a file over the size cap, a megabyte on one line, Latin-1 text, a PPTX
and a DOCX each with one part that cannot be read. It
is ingested three times through the real CLI / in-process ingest (real Dagster
runs, Lance tables, tantivy, MiniLM), and each test checks one promise of
docs/reliability.md on what those ingests left.
"""

from __future__ import annotations

import io
import json
import os
import socket
import stat
import zipfile

import pytest
from conftest import ingest
from test_parsing_epub import build_epub, xhtml
from test_parsing_robustness import SLIDE, office_deck, office_document, with_member
from typer.testing import CliRunner

from fabric_assets.chunking.fine_chunks import MAX_TOKEN_CHARS
from fabric_assets.sources.scan import scan
from fabric_query import Fabric
from fabric_assets.cli import app
from fabric_resources.home import FabricHome
from fabric_resources.parsing.spec import ParserSpec

GOOD_TEXT = "The lighthouse keeper climbed the spiral stairs every evening to light the lamp.\n"
FRENCH = "Le gardien du phare montait l'escalier chaque soir. Café crème, très chaud, à volonté.\n"
JAPANESE = "灯台守は毎晩、百十二段の階段を上って灯りを点した。潮が満ちると海は静かになった。\n"
BOOM = "This file makes the monkeypatched parser raise an exception of an odd type.\n"
#: Unrelated to every query below: a megabyte on one line, half a word too long for WordPiece.
ONE_LINE = ("x" * 200_000 + " " + "tide table ledger herring " * 6_000).encode()
TOO_LARGE_BYTES = 3_000_000  # over text.max_bytes (2,500,000 in this home's config)


class OddParserFailure(ArithmeticError):
    """An exception type no parser step anticipates."""


def corrupt_lzma_epub() -> bytes:
    """A valid EPUB rewritten with its package (OPF) LZMA-compressed, then that member corrupted."""
    src = build_epub({"ch1.xhtml": xhtml("<p>The lamp room of the lighthouse.</p>" * 20)})
    zin = zipfile.ZipFile(io.BytesIO(src))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zout:
        for info in zin.infolist():
            method = zipfile.ZIP_LZMA if info.filename.endswith(".opf") else zipfile.ZIP_DEFLATED
            zout.writestr(info.filename, zin.read(info), compress_type=method)
    raw = bytearray(buf.getvalue())
    info = next(i for i in zipfile.ZipFile(io.BytesIO(bytes(raw))).infolist() if i.filename.endswith(".opf"))
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    for i in range(start + 12, start + 40):
        raw[i] ^= 0x5A
    data = bytes(raw)
    with pytest.raises(Exception) as lzma_error:  # what escaped the parser before issue 13
        zipfile.ZipFile(io.BytesIO(data)).read(info.filename)
    assert type(lzma_error.value).__name__ == "LZMAError"
    return data


def partly_read_docx() -> bytes:
    """A readable body whose footnotes part is not well-formed XML."""
    data = with_member(office_document(), "word/_rels/document.xml.rels", "</Relationships>",
                       '<Relationship Id="rId990" Target="footnotes.xml" Type="http://schemas.openxmlformats.org'
                       '/officeDocument/2006/relationships/footnotes"/></Relationships>',
                       extra={"word/footnotes.xml": b"<w:footnotes><unclosed>"})
    return with_member(data, "[Content_Types].xml", "</Types>",
                       '<Override PartName="/word/footnotes.xml" ContentType="application/vnd.openxmlformats-'
                       'officedocument.wordprocessingml.footnotes+xml"/></Types>')


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The folder, the home, and what three ingests did to them (see the module docstring)."""
    base = tmp_path_factory.mktemp("robust")
    src, home_dir = base / "docs", base / "home"
    (src / "sub").mkdir(parents=True)
    home_dir.mkdir()
    (home_dir / "config.json").write_text(json.dumps({"parsers": {"text": {"max_bytes": 2_500_000}}}))
    (src / "keeper.txt").write_text(GOOD_TEXT)
    (src / "gardien.txt").write_bytes(FRENCH.encode("cp1252"))
    (src / "tomoru.txt").write_bytes(JAPANESE.encode("cp932"))
    (src / "boom.txt").write_text(BOOM)
    (src / "oneline.txt").write_bytes(ONE_LINE)
    (src / "huge.txt").write_bytes(b"y " * (TOO_LARGE_BYTES // 2))
    (src / "unreadable.txt").write_text("Locked away from the scan.\n")
    (src / "sub" / "deep.txt").write_text("The harbour master counted the herring boats at dawn.\n")
    (src / "good.epub").write_bytes(build_epub({"ch1.xhtml": xhtml("<p>The keeper wrote the tide tables.</p>")}))
    (src / "bad.epub").write_bytes(corrupt_lzma_epub())
    # Partly read: a table frame without its table; a footnotes part that is not XML.
    (src / "partly.pptx").write_bytes(with_member(with_member(office_deck(), SLIDE, "<a:tbl>", "<a:tblGone>"),
                                                  SLIDE, "</a:tbl>", "</a:tblGone>"))
    (src / "partly.docx").write_bytes(partly_read_docx())
    os.mkfifo(src / "pipe.txt")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(src / "sock.txt"))
    specials = {"fs:docs/pipe.txt": "fifo", "fs:docs/sock.txt": "socket"}
    try:
        os.mknod(src / "null.txt", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        specials["fs:docs/null.txt"] = "character device"
    except OSError:  # no CAP_MKNOD here: the FIFO and the socket still cover the walk
        pass

    real_open, real_io_open, opened = os.open, io.open, []
    locked = str(src / "unreadable.txt")

    def os_open(path, flags, *args, **kwargs):  # root reads any file, so the OS's "no" is simulated here
        opened.append(os.fsdecode(path))
        if os.fsdecode(path) == locked:
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return real_open(path, flags, *args, **kwargs)

    def io_open(file, *args, **kwargs):  # what Path.read_bytes opens with
        if isinstance(file, (str, bytes, os.PathLike)):
            opened.append(os.fsdecode(file))
        return real_io_open(file, *args, **kwargs)

    real_parse = ParserSpec.run

    def odd_run(self, data, parsers, media_type):
        if b"monkeypatched parser" in data:
            raise OddParserFailure("odd arithmetic in a plug-in")
        return real_parse(self, data, parsers, media_type)

    runner = CliRunner()
    out = {"specials": specials, "src": src, "home": FabricHome(home_dir), "opened": opened}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FABRIC_HOME", str(home_dir))
        mp.setenv("DAGSTER_HOME", str(home_dir / "dagster"))
        mp.setattr(os, "open", os_open)
        mp.setattr(io, "open", io_open)
        # The plug-in itself raises (below its own safety net), as a third-party parser might.
        mp.setattr(ParserSpec, "run", odd_run)
        first = runner.invoke(app, ["ingest", str(src), "--home", str(home_dir)])
        out["first_cli"] = first
        out["status_1"] = Fabric(home_dir).status()
        out["second"] = ingest(src, out["home"])  # nothing changed
        # Now: the bad EPUB is deleted; a new file is scanned (its parse pending) and deleted before
        # any run; the sub/ folder cannot be listed.
        (src / "bad.epub").unlink()
        (src / "brief.txt").write_text("A brief note that is deleted before it is ever parsed.\n")
        scan(out["home"])
        out["brief_parse"] = out["home"].catalog.source("fs:docs/brief.txt").parse_id
        (src / "brief.txt").unlink()

        opening = os.open  # os_open above: the unreadable file stays unreadable

        def os_open_listing(path, flags, *args, **kwargs):  # the walk opens each folder to list it
            if flags & os.O_DIRECTORY and os.fsdecode(path) == str(src / "sub"):
                raise PermissionError(13, "Permission denied", os.fsdecode(path))
            return opening(path, flags, *args, **kwargs)

        mp.setattr(os, "open", os_open_listing)
        out["third"] = ingest(src, out["home"])
        out["status_3"] = Fabric(home_dir).status()
    sock.close()
    return out


def _failed(status) -> dict[str, tuple[str, str]]:
    return {s: (p.reason, p.detail or "") for p in status.failed for s in p.sources}


def test_a_corrupt_lzma_epub_fails_alone_with_a_named_reason_and_ingest_says_so(world):
    """guards against: _lzma.LZMAError escaping the parser and failing the whole run (every file of
    it pending forever), a made-up reason, and `fabric ingest` exiting 0 without naming it."""
    first = world["first_cli"]
    assert first.exit_code == 1, first.output
    assert "fs:docs/bad.epub" in first.output and "malformed-package" in first.output
    assert "LZMAError" in first.output
    status = world["status_1"]
    reason, detail = _failed(status)["fs:docs/bad.epub"]
    assert reason == "malformed-package" and "LZMAError" in detail
    assert status.pending == 0 and status.unfinished == ()
    release = world["home"].catalog.current_release()
    assert {"fs:docs/keeper.txt", "fs:docs/good.epub", "fs:docs/gardien.txt", "fs:docs/tomoru.txt",
            "fs:docs/oneline.txt", "fs:docs/sub/deep.txt"} <= set(release.manifest["sources"])
    assert "fs:docs/bad.epub" not in release.manifest["sources"]


def test_a_partly_read_deck_or_document_is_searchable_and_ingest_and_status_name_what_was_lost(world):
    """guards against: a PPTX shape or a DOCX part skipped in silence — ingest's summary and
    `fabric status` named only the unread pages of PDFs (their metadata key), so a deck missing a
    table looked whole."""
    partial = {s: (p.reason, p.detail) for p in world["status_1"].partial for s in p.sources}
    reason, detail = partial["fs:docs/partly.pptx"]
    assert reason == "failed-units" and detail.startswith("slide 1: Table 4: AttributeError: ")
    reason, detail = partial["fs:docs/partly.docx"]
    assert reason == "failed-units" and detail.startswith("word/footnotes.xml: XMLSyntaxError: ")
    output = " ".join(world["first_cli"].output.split())  # the console wraps long lines
    assert "partly read fs:docs/partly.pptx: slide 1: Table 4" in output
    assert "partly read fs:docs/partly.docx: word/footnotes.xml" in output
    active = world["home"].catalog.release(1).manifest["sources"]
    assert {"fs:docs/partly.pptx", "fs:docs/partly.docx"} <= set(active)
    assert Fabric(world["home"].root).search("High water at noon").results[0].citation.source_key == \
        "fs:docs/partly.pptx"


def test_any_exception_type_from_a_parser_fails_only_that_document(world):
    """guards against: an exception type the asset does not catch (only ParseError was) failing
    the step for every partition of the run."""
    reason, detail = _failed(world["status_1"])["fs:docs/boom.txt"]
    assert reason == "parser-error" and "OddParserFailure" in detail and "odd arithmetic" in detail
    assert Fabric(world["home"].root).search("lighthouse keeper").results[0].citation.source_key == \
        "fs:docs/keeper.txt"


def test_a_failed_parse_is_not_retried_and_is_still_reported(world):
    """guards against: the bad parse being run again by every ingest, or vanishing from the summary."""
    second = world["second"]
    assert second.scan.parse_ids_to_run == [] and second.run_ids == [] and second.retried == []
    failed = {f.source_key: f for f in second.failed}
    assert failed["fs:docs/bad.epub"].reason == "malformed-package" and not failed["fs:docs/bad.epub"].new
    assert not second.complete


def test_deleting_the_bad_file_drops_its_parse(world):
    """guards against: a deleted source's failed parse listed forever, and a pending parse whose
    source is gone being run (or counted as pending) on every ingest."""
    third, status = world["third"], world["status_3"]
    assert "fs:docs/bad.epub" not in _failed(status)
    assert world["home"].catalog.source("fs:docs/bad.epub").state == "deleted"
    assert not any(f.source_key == "fs:docs/bad.epub" for f in third.failed)
    assert world["brief_parse"] not in third.scan.parse_ids_to_run and third.run_ids == []
    assert world["home"].catalog.parse_run(world["brief_parse"]).status == "pending"  # kept, never run
    assert status.pending == 0


def test_every_path_found_ends_active_failed_or_skipped_with_a_reason(world):
    """guards against: FIFOs, sockets, devices and unreadable files silently absent from the summary
    and from `fabric status` (and a FIFO hanging the scan)."""
    skipped = dict(world["status_1"].skipped)
    for key, kind in world["specials"].items():
        assert skipped[key] == f"not-a-regular-file: {kind}"
    assert skipped["fs:docs/unreadable.txt"].startswith("unreadable: PermissionError")
    assert skipped["fs:docs/huge.txt"].startswith("too-large:")
    assert "skipped" in world["first_cli"].output and "fs:docs/pipe.txt" in world["first_cli"].output
    files = {f"fs:docs/{p.relative_to(world['src']).as_posix()}" for p in world["src"].rglob("*")
             if not p.is_dir()} | {"fs:docs/bad.epub"}
    status = world["status_1"]
    active = set(world["home"].catalog.release(1).manifest["sources"]) if status.release_id else set()
    accounted = active | set(_failed(status)) | set(skipped)
    assert files - {"fs:docs/brief.txt"} <= accounted


def test_a_file_over_the_cap_is_never_read_nor_stored(world):
    """guards against: reading a whole file into memory before checking the cap, and storing the
    bytes of a file that is then refused."""
    import hashlib

    huge = world["src"] / "huge.txt"
    assert str(huge) not in world["opened"]
    digest = hashlib.sha256(huge.read_bytes()).hexdigest()
    assert not world["home"].artifacts.has(digest)
    assert world["home"].catalog.source("fs:docs/huge.txt") is None


def test_an_unlistable_folder_loses_access_instead_of_deleting(world):
    """guards against: every file under a folder the scan cannot list being marked deleted and
    leaving the release (data that is still there, lost from search)."""
    third, status = world["third"], world["status_3"]
    assert "fs:docs/sub/deep.txt" not in third.scan.deleted
    assert world["home"].catalog.source("fs:docs/sub/deep.txt").state == "access_lost"
    assert dict(status.skipped)["fs:docs/sub"].startswith("unreadable-folder: PermissionError")
    top = Fabric(world["home"].root).search("harbour master herring").results[0]
    assert top.citation.source_key == "fs:docs/sub/deep.txt"


def test_lang_filter_means_the_identified_language_for_plain_text(world):
    """guards against: plain-text files having no language, so `lang:en` excluded every English
    .txt; Latin-1 text failing as undecodable."""
    fabric = Fabric(world["home"].root)
    assert {r.citation.source_key for r in fabric.search("lang:en lighthouse keeper").results} >= {
        "fs:docs/keeper.txt", "fs:docs/good.epub"}
    french = fabric.search("lang:fr gardien phare").results
    assert [r.citation.source_key for r in french][:1] == ["fs:docs/gardien.txt"]
    assert "Café crème" in french[0].text
    assert all(r.citation.source_key == "fs:docs/tomoru.txt" for r in fabric.search("lang:ja 灯台").results)
    assert fabric.search("lang:ja 灯台").results


def test_a_megabyte_on_one_line_gives_bounded_units_chunks_and_answers(world):
    """guards against: one 1,000,000-character chunk (the 20 MB line of issue 13) that matches
    unrelated queries and makes one `search --json` print tens of megabytes."""
    home = world["home"]
    key = "fs:docs/oneline.txt"
    parse_id = home.catalog.source(key).parse_id
    units = home.tables.read("units", parse_ids=[parse_id]).to_pydict()
    assert max(len(t) for t in units["text"]) <= home.config.parsers.text.max_unit_chars
    assert "".join(units["text"]).replace(" ", "") == ONE_LINE.decode().replace(" ", "")
    chunks = home.tables.read("chunks", parse_ids=[parse_id]).to_pydict()
    cap = home.config.chunking.max_tokens
    assert max(chunks["token_count"]) <= cap
    assert max(len(t) for t in chunks["text"]) < 2 * MAX_TOKEN_CHARS * cap
    pack = Fabric(home.root).search("lighthouse keeper", limit=10)
    assert len(pack.model_dump_json()) < 200_000


def test_a_fault_of_fabric_fails_the_run_loudly_and_is_retried_not_blamed_on_the_document(tmp_path, fabric_home):
    """guards against: the per-document catch-all swallowing Fabric's own faults (a full disk while
    writing the units table) as a failed parse that is never retried, and `fabric ingest`
    exiting 0 after a failed run."""
    from fabric_resources.tables import TableStore

    src = tmp_path / "src"
    src.mkdir()
    (src / "keeper.txt").write_text(GOOD_TEXT)
    real = TableStore.replace_partitions

    def disk_full(self, table, parse_ids, rows):
        if table == "units":
            raise OSError(28, "No space left on device")
        return real(self, table, parse_ids, rows)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(TableStore, "replace_partitions", disk_full)
        result = CliRunner().invoke(app, ["ingest", str(src), "--home", str(fabric_home.root)])
    assert result.exit_code == 3, result.output
    assert "Dagster run(s) failed" in result.output
    parse_id = fabric_home.catalog.source("fs:src/keeper.txt").parse_id
    assert fabric_home.catalog.parse_run(parse_id).status == "pending"  # not blamed on the document
    again = ingest(src, fabric_home)
    assert parse_id in again.scan.parse_ids_to_run and again.failed_runs == [] and again.complete
    assert Fabric(fabric_home.root).search("lighthouse keeper").results[0].citation.source_key == "fs:src/keeper.txt"


def test_a_full_disk_while_the_activation_writes_the_index_is_one_line_and_status_names_the_unpublished(
        tmp_path, fabric_home):
    """guards against (trial 15, stop 48, a real 60 MB tmpfs home): tantivy's commit on a full disk
    raising ``ValueError("An IO error occurred: 'No space left on device (os error 28)'")`` (the
    io::Error's Display text, not the ``Os { code: 28, … }`` the fault check read) — `fabric ingest`
    ended with a 125-line traceback and exit 1 — and `fabric status` then saying nothing of the
    parsed, checked files the release does not serve ("pending 0; 0 parse(s) unfinished")."""
    import fabric_resources.lexical_index

    src = tmp_path / "src"
    src.mkdir()
    (src / "keeper.txt").write_text(GOOD_TEXT)
    ingest(src, fabric_home)
    (src / "reef.txt").write_text("The coral reef beyond the harbour wall shelters parrotfish at low tide.\n")

    def disk_full(*args, **kwargs):
        raise ValueError("An IO error occurred: 'No space left on device (os error 28)'")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fabric_resources.lexical_index, "build_segments", disk_full)
        result = CliRunner().invoke(app, ["ingest", str(src), "--home", str(fabric_home.root)])
    assert result.exit_code == 3, result.output
    assert "No space left on device (errno 28)" in result.output and "Traceback" not in result.output
    status = Fabric(fabric_home.root).status()
    assert status.unpublished == ("fs:src/reef.txt",) and status.release_id == 1
    shown = CliRunner().invoke(app, ["status", "--home", str(fabric_home.root)]).output
    assert "not published" in shown and "fs:src/reef.txt" in shown
    pack = Fabric(fabric_home.root).search("parrotfish")
    assert all(h.citation.source_key != "fs:src/reef.txt" for h in pack.results)
    again = ingest(src, fabric_home)
    assert again.complete and Fabric(fabric_home.root).status().unpublished == ()
    assert Fabric(fabric_home.root).search("parrotfish").results[0].citation.source_key == "fs:src/reef.txt"

def test_a_full_disk_is_fabrics_fault_in_the_scan_and_in_the_parse_never_the_documents(tmp_path, fabric_home):
    """guards against: a full home (or ``ulimit -f``) while the scan stored a file's bytes reported as
    the file being `unreadable` (and a known source marked access_lost), and a full ``/tmp`` while
    py3langid unpacked its model failing every document of the run as `parser-error` for good."""
    from fabric_resources.artifact_store import ArtifactStore
    from fabric_resources.parsing import language

    src = tmp_path / "src"
    src.mkdir()
    (src / "keeper.txt").write_text(GOOD_TEXT)

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ArtifactStore, "put_file", disk_full)
        result = CliRunner().invoke(app, ["ingest", str(src), "--home", str(fabric_home.root)])
    assert result.exit_code == 3, result.output
    assert "No space left on device" in result.output and "unreadable" not in result.output
    assert fabric_home.catalog.source("fs:src/keeper.txt") is None  # nothing recorded about the file
    language._identifier.cache_clear()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("py3langid.langid.LanguageIdentifier.from_model_file", disk_full)
        result = CliRunner().invoke(app, ["ingest", str(src), "--home", str(fabric_home.root)])
    language._identifier.cache_clear()
    assert result.exit_code == 3, result.output
    parse_id = fabric_home.catalog.source("fs:src/keeper.txt").parse_id
    assert fabric_home.catalog.parse_run(parse_id).status == "pending"  # not blamed on the document
    again = ingest(src, fabric_home)
    assert parse_id in again.scan.parse_ids_to_run and again.failed_runs == [] and again.complete


def test_a_full_database_during_the_ingest_is_one_line_and_exit_3(tmp_path, fabric_home):
    """guards against: Dagster's SQLite event log (or the catalog) on a full disk ending `fabric
    ingest` with SQLAlchemy's traceback and exit 1, the code of an ingest some documents failed."""
    import sqlite3

    import sqlalchemy.exc

    import fabric_assets.ingest

    src = tmp_path / "src"
    src.mkdir()
    (src / "keeper.txt").write_text(GOOD_TEXT)

    def full(*args, **kwargs):
        try:
            error = sqlite3.OperationalError("database or disk is full")
            error.sqlite_errorcode = sqlite3.SQLITE_FULL
            raise error
        except sqlite3.OperationalError as exc:
            raise sqlalchemy.exc.OperationalError("INSERT INTO event_logs", {}, exc) from exc

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fabric_assets.ingest, "ingest", full)
        result = CliRunner().invoke(app, ["ingest", str(src), "--home", str(fabric_home.root)])
    assert result.exit_code == 3, result.output
    assert "database or disk is full" in result.output and "Traceback" not in result.output
    with pytest.MonkeyPatch.context() as mp:  # any other error is not hidden behind that line
        mp.setattr(fabric_assets.ingest, "ingest", lambda *a, **k: {}["boom"])
        result = CliRunner().invoke(app, ["ingest", str(src), "--home", str(fabric_home.root)])
    assert isinstance(result.exception, KeyError)


def test_a_file_dated_past_2262_is_ingested_and_then_unchanged(tmp_path, fabric_home):
    """guards against: a modification time beyond a 64-bit count of nanoseconds (a file dated after
    2262-04-11; ext4 keeps dates to 2446) crashing the whole scan with an OverflowError in the
    catalog; once clamped, the prescreen reporting it changed on every scan, or trusting the equal
    (clamped) date and missing a same-size edit dated past 2262 too."""
    src = tmp_path / "far"
    src.mkdir()
    (src / "future.txt").write_text("A note from the far future about the harbour lamp.\n")
    (src / "today.txt").write_text("A note from today about the tide.\n")
    far = 15_000_000_000  # seconds: the year 2445
    os.utime(src / "future.txt", (far, far))
    if os.stat(src / "future.txt").st_mtime_ns < 2**63:
        pytest.skip("this filesystem cannot hold a date past 2262")
    first = ingest(src, fabric_home)
    assert sorted(first.scan.new) == ["fs:far/future.txt", "fs:far/today.txt"]
    assert fabric_home.catalog.source("fs:far/future.txt").mtime_ns == 2**63 - 1
    fabric = Fabric(fabric_home.root)
    for after in ("2262-01-01", "2300-01-01"):  # a day past the recorded bound still admits it
        top = fabric.search(f"harbour lamp after:{after}").results
        assert [h.citation.source_key for h in top] == ["fs:far/future.txt"], after
    assert fabric.search("harbour lamp before:2262-01-01").results[0].citation.source_key == "fs:far/today.txt"
    second = ingest(src, fabric_home)
    assert (second.scan.new, second.scan.changed, second.scan.touched) == ([], [], [])
    # Same size, another date past 2262: the recorded date is the same bound, the bytes are not.
    (src / "future.txt").write_text("A note from the far future about the harbour bell.\n")
    os.utime(src / "future.txt", (far + 86_400, far + 86_400))
    third = ingest(src, fabric_home)
    assert third.scan.changed == ["fs:far/future.txt"]
    top = Fabric(fabric_home.root).search("harbour bell").results[0]
    assert top.citation.source_key == "fs:far/future.txt" and "bell" in top.text


def test_a_hit_from_a_version_the_file_no_longer_holds_says_so(tmp_path, fabric_home):
    """guards against: a file overwritten with bytes that fail to parse (or a type Fabric does not
    parse) still answering with its old text as if it were the file's content, nothing in the pack
    or the printed hit saying otherwise (the last good version is kept on purpose; unflagged, a user
    who overwrote a file to remove its text believed it gone)."""
    src = tmp_path / "notes"
    src.mkdir()
    (src / "d.txt").write_text("Delta text with deltaunique words.\n")
    (src / "e.txt").write_text("Echo text with echounique words.\n")
    ingest(src, fabric_home)
    (src / "d.txt").write_bytes(b"\x00\x01binary now\x00" * 50)  # undecodable: its parse fails
    summary = ingest(src, FabricHome(fabric_home.root))
    assert [f.source_key for f in summary.failed] == ["fs:notes/d.txt"]
    fabric = Fabric(fabric_home.root)
    (hit,) = [h for h in fabric.search("deltaunique").results if h.citation.source_key == "fs:notes/d.txt"]
    assert hit.source_changed == "failed" and "deltaunique" in hit.text
    assert fabric.resolve(hit.citation).status == "stale"  # the bytes on disk are the new ones
    (echo,) = [h for h in fabric.search("echounique").results if h.citation.source_key == "fs:notes/e.txt"]
    assert echo.source_changed is None  # an unchanged file's hit says nothing
    printed = CliRunner().invoke(app, ["search", "deltaunique", "--home", str(fabric_home.root)])
    assert "an older version: the file changed since, and its new version failed to parse" in printed.output

    # Its folder unreachable: the source is access_lost, keeps its last good version, and its
    # hits still say the file changed (hostile trial 7: the flag was dropped).
    src.rename(tmp_path / "away")
    other = tmp_path / "other"
    other.mkdir()
    (other / "o.txt").write_text("Another root so that an ingest runs.\n")
    ingest(other, FabricHome(fabric_home.root))
    assert FabricHome(fabric_home.root).catalog.source("fs:notes/d.txt").state == "access_lost"
    (hit,) = [h for h in Fabric(fabric_home.root).search("deltaunique").results
              if h.citation.source_key == "fs:notes/d.txt"]
    assert hit.source_changed == "failed"
    (tmp_path / "away").rename(src)
    (src / "d.txt").write_text("Delta rewritten with deltafresh words.\n")  # a good version again
    ingest(src, FabricHome(fabric_home.root))
    fabric = Fabric(fabric_home.root)
    assert all(h.citation.source_key != "fs:notes/d.txt" for h in fabric.search("deltaunique").results
               if "deltaunique" in h.text)
    (fresh,) = [h for h in fabric.search("deltafresh").results if h.citation.source_key == "fs:notes/d.txt"]
    assert fresh.source_changed is None and fabric.resolve(fresh.citation).status == "verified"


def test_of_two_files_with_one_text_a_hit_cites_the_one_that_still_holds_it(tmp_path, fabric_home):
    """guards against: two files with the same text, one overwritten with bytes that fail to parse,
    the hit citing the overwritten one (stale on resolve, `source_changed`) while the other still
    holds the text and would verify."""
    src = tmp_path / "notes"
    src.mkdir()
    for name in ("a.txt", "b.txt"):  # "a" sorts first: it was the one cited
        (src / name).write_text("Foxtrot text with foxtrotunique words.\n")
    ingest(src, fabric_home)
    (src / "a.txt").write_bytes(b"\x00\x01binary now\x00" * 50)
    ingest(src, FabricHome(fabric_home.root))
    fabric = Fabric(fabric_home.root)
    (hit,) = [h for h in fabric.search("foxtrotunique").results if "foxtrotunique" in h.text]
    assert hit.citation.source_key == "fs:notes/b.txt" and hit.citation.also_cited_by == ("fs:notes/a.txt",)
    assert hit.source_changed is None and fabric.resolve(hit.citation).status == "verified"


def test_a_file_grown_past_the_size_cap_says_its_hits_are_an_older_version(tmp_path, fabric_home):
    """guards against (hostile trial 7, 2026-12-05): a file rewritten past `sources.max_file_bytes`
    (never read: skipped as too-large) serving its last text unflagged."""
    (fabric_home.root / "config.json").write_text(json.dumps({"sources": {"max_file_bytes": 1000}}))
    src = tmp_path / "notes"
    src.mkdir()
    (src / "w.txt").write_text("Text about the pangolin scales.\n")
    ingest(src, FabricHome(fabric_home.root))
    (src / "w.txt").write_text("x" * 5000)
    summary = ingest(src, FabricHome(fabric_home.root))
    assert [k for k, why in summary.scan.skipped if why.startswith("too-large")] == ["fs:notes/w.txt"]
    (hit,) = [h for h in Fabric(fabric_home.root).search("pangolin").results if "pangolin" in h.text]
    assert hit.source_changed == "unparsed"
    (src / "w.txt").write_text("Text about the pangolin claws.\n")  # back under the cap
    ingest(src, FabricHome(fabric_home.root))
    (hit,) = [h for h in Fabric(fabric_home.root).search("pangolin claws").results if "claws" in h.text]
    assert hit.source_changed is None and Fabric(fabric_home.root).resolve(hit.citation).status == "verified"
