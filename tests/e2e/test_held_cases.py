"""Issue 13's cases that already held on main, each checked the way the hostile trial tried it.

Crash safety: a real ``fabric ingest`` process is killed with SIGKILL at seven points of an ingest,
each made deterministic by a ``-c`` wrapper that replaces one function of the running process
with ``os.kill(os.getpid(), SIGKILL)`` at that point (nothing in the product knows about it);
then the next ingest must finish the work, leave every source active, and answer search and
resolve verified from tables that hold no duplicate row. Two ``fabric ingest`` processes of one
home run at once behind a start barrier. Torn reads: searches run back to back while another
process publishes releases; every answer must come from exactly one release. Hostile files
(XXE, path traversal, nested archives) are built here; offsets are checked end to end over a
file with CRLF, emoji and astral characters.

docs/reliability.md ("Cases that already held") names, for each test, the mutation of the
product it fails on.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unicodedata
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ingest
from test_parsing_epub import CONTAINER, build_epub, ncx_doc, xhtml

from fabric_query import Fabric
from fabric_resources.config import ParserConfig
from fabric_resources.home import FabricHome
from fabric_resources.identity import text_hash
from fabric_resources.lexical_health import lexical_health
from fabric_resources.offsets import utf16_offset
from fabric_resources.parsing.document import ParseError
from fabric_resources.parsing.registry import detect_media_type, parser_for

# -- the shared corpus of the crash tests ------------------------------------------------------

#: Each text has one word no other text has, so a search for it must find exactly that file.
BASE = {
    "a.txt": "The lighthouse keeper logged the tide at dusk.\n\nQuillwort grew between the stones below "
             "the lamp room.\n",
    "b.txt": "The harbour master counted herring boats in the fog.\n\nHis ledger listed every lighthouse "
             "on the coast.\n",
    "c.txt": "Sourdough bread needs flour, water and a patient baker.\n",
}
#: The change the killed ingest was taking in: a.txt edited, c.txt deleted, d.txt added.
CHANGED = {
    "a.txt": "The lighthouse keeper logged the tide at dawn.\n\nMarram grass held the dunes behind "
             "the lamp room.\n",
    "b.txt": BASE["b.txt"],
    "d.txt": "Barnacles crusted the pier where the lighthouse keeper moored his boat.\n",
}
WORD = {"a.txt": "marram", "b.txt": "herring", "d.txt": "barnacles"}
GONE = ["quillwort", "sourdough"]  # a.txt's old text and the deleted c.txt


def _write_tree(folder: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(text.encode("utf-8"))


def _apply_change(src: Path) -> None:
    (src / "c.txt").unlink()
    _write_tree(src, {k: v for k, v in CHANGED.items() if BASE.get(k) != v})


def _env(home: FabricHome) -> dict[str, str]:
    return {**os.environ, "FABRIC_HOME": str(home.root), "DAGSTER_HOME": str(home.layout.dagster_home),
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _fabric_cli(home: FabricHome, args: list[str], prelude: str = "", cwd: Path | None = None,
                timeout: int = 600, wait: bool = True):
    """``fabric ARGS`` in a fresh Python process, after running ``prelude`` in it."""
    code = f"{prelude}\nimport sys\nsys.argv = ['fabric', *{args!r}]\nfrom fabric_assets.cli import main\nmain()\n"
    cmd = [sys.executable, "-c", code]
    if not wait:
        return subprocess.Popen(cmd, env=_env(home), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    return subprocess.run(cmd, env=_env(home), cwd=cwd, capture_output=True, text=True, timeout=timeout)


# -- what a consistent home looks like ----------------------------------------------------------


def _hits_belong_to_their_release(home: FabricHome, pack) -> None:
    manifest = home.catalog.release(pack.release_id).manifest
    for hit in pack.results:
        meta = manifest["sources"][hit.citation.source_key]
        assert (meta["parse_id"], meta["source_hash"]) == (hit.citation.parse_id, hit.citation.source_hash)


def assert_answers_from_a_whole_release(home: FabricHome, query: str = "lighthouse keeper") -> int:
    """The current release serves a query from its own index and tables, leaving out what is
    deleted now (then from an index of its visible sources, ``visible-sources-only``); returns
    its ID."""
    pack = Fabric(home.root).search(query)
    named = home.catalog.release(pack.release_id).manifest["sources"]
    deleted = {s.source_key for s in home.catalog.sources() if s.state == "deleted"} & set(named)
    assert pack.results and pack.skipped_channels == {}
    assert pack.fallback_reason == ("visible-sources-only" if deleted else None)
    assert not {h.citation.source_key for h in pack.results} & deleted
    _hits_belong_to_their_release(home, pack)
    health = lexical_health(home)
    assert health.healthy, health
    return pack.release_id


def assert_consistent(home: FabricHome, roots: dict[str, dict[str, str]], gone: list[str] = GONE) -> None:
    """Every file of ``roots`` (root label → relative path → text) active at its current parse,
    nothing pending, unfinished, held or failed; per active parse, the rows the release pins are
    exactly one per unit, chunk, lexical document and vector; each file's own word finds it and
    its citation resolves verified; the words in ``gone`` find nothing."""
    home = FabricHome(home.root)  # a fresh handle: nothing cached from before the ingest
    fabric = Fabric(home.root)
    release = home.catalog.current_release()
    manifest = release.manifest
    expected = {f"fs:{label}/{rel}" for label, files in roots.items() for rel in files}
    present = {s.source_key: s for s in home.catalog.sources() if s.state == "present"}
    assert set(present) == expected
    assert set(manifest["sources"]) == expected
    for key, source in present.items():
        assert manifest["sources"][key]["parse_id"] == source.parse_id
        assert manifest["sources"][key]["source_hash"] == source.source_hash
    status = fabric.status()
    assert (status.pending, status.unfinished, status.held, status.failed) == (0, (), (), ())
    health = lexical_health(home)
    assert health.healthy, health
    runs = {r.parse_id: r for r in home.catalog.parse_runs(list({s.parse_id for s in present.values()}))}
    tables = manifest["tables"]
    for pid, run in runs.items():
        assert run.status == "ready"
        units = home.tables.read("units", parse_ids=[pid], version=tables["units"]).column("unit_id").to_pylist()
        assert len(units) == len(set(units)) == run.counts["units"]
        chunks = home.tables.read("chunks", parse_ids=[pid], version=tables["chunks"]).column("chunk_id").to_pylist()
        assert chunks and len(chunks) == len(set(chunks))
        for table in ("lexical_documents", "chunk_vectors"):  # English text: every chunk has a MiniLM vector
            ids = home.tables.read(table, parse_ids=[pid], version=tables[table]).column("chunk_id").to_pylist()
            assert sorted(ids) == sorted(chunks), table
    for label, files in roots.items():
        for rel, text in files.items():
            word = WORD.get(rel) or text.split()[0]
            pack = fabric.search(word)
            assert pack.fallback_reason is None and pack.skipped_channels == {}
            top = pack.results[0]
            assert top.citation.source_key == f"fs:{label}/{rel}", (word, top.citation.source_key)
            assert top.text in text
            result = fabric.resolve(top.citation)
            assert result.status == "verified", result.checks
    for word in gone:
        assert all(word not in h.text.lower() for h in fabric.search(word).results), word


# -- crash safety: SIGKILL at seven points of an ingest ----------------------------------------

_DIE = "import os, signal\ndef _die():\n    os.kill(os.getpid(), signal.SIGKILL)\n"

#: point → code run in the ingest process before ``fabric ingest`` starts, replacing one function.
KILL_POINTS = {
    # The second file of the change is hashed and copied into the artifact store, not yet renamed
    # into place nor recorded; the first one is recorded with a pending parse.
    "scan-acquisition": _DIE + (
        "_replace, _seen = os.replace, []\n"
        "def _rename(src, dst, *a, **k):\n"
        "    if '/artifacts/sha256/' in os.fspath(dst):\n"
        "        _seen.append(dst)\n"
        "        if len(_seen) == 2:\n"
        "            _die()\n"
        "    return _replace(src, dst, *a, **k)\n"
        "os.replace = _rename\n"),
    # The parse run has parsed one document in memory and is parsing the second.
    "parsing": _DIE + (
        "import fabric_assets.parse.assets as _m\n"
        "_real, _calls = _m._parse_one, []\n"
        "def _parse_one(*a, **k):\n"
        "    _calls.append(1)\n"
        "    if len(_calls) == 2:\n"
        "        _die()\n"
        "    return _real(*a, **k)\n"
        "_m._parse_one = _parse_one\n"),
    # Units and relationships are stored and the parses marked parsed; the chunks asset starts
    # (its first act is to read the units back).
    "units-written": _DIE + (
        "from fabric_resources.tables import TableStore\n"
        "_real = TableStore.read\n"
        "def _read(self, name, *a, **k):\n"
        "    if name == 'units':\n"
        "        _die()\n"
        "    return _real(self, name, *a, **k)\n"
        "TableStore.read = _read\n"),
    # Chunks and lexical documents are stored; MiniLM has encoded the passages, nothing is written.
    "embedding": _DIE + (
        "from fabric_resources.models.embedder import MiniLMEmbedder\n"
        "_real = MiniLMEmbedder.encode_passages\n"
        "def _encode(self, texts):\n"
        "    _real(self, texts)\n"
        "    _die()\n"
        "MiniLMEmbedder.encode_passages = _encode\n"),
    # The parses are gated ready and the next index generation is written; the release is not
    # published. (For this point and the next, the test parses the change first, in-process: the
    # killed ingest finds it parsed and goes straight to its activation.)
    "activation-before-publish": _DIE + (
        "from fabric_resources.catalog import Catalog\n"
        "def _publish(self, *a, **k):\n"
        "    _die()\n"
        "Catalog.publish_release = _publish\n"),
    # The next index generation is being assembled: its new segments are built in its scratch
    # directory beside the previous generation's hard-linked ones; its meta.json is not written.
    "lexical-assembly": _DIE + (
        "import fabric_resources.lexical_index as _li\n"
        "_real = _li.build_segments\n"
        "def _build(*a, **k):\n"
        "    _real(*a, **k)\n"
        "    _die()\n"
        "_li.build_segments = _build\n"),
    # The release is published (the pointer swapped); old index generations are not pruned yet.
    "published-before-prune": _DIE + (
        "from fabric_resources.catalog import Catalog\n"
        "_real = Catalog.publish_release\n"
        "def _publish(self, *a, **k):\n"
        "    _real(self, *a, **k)\n"
        "    _die()\n"
        "Catalog.publish_release = _publish\n"),
}


#: Points reached only after the parse run: the change is parsed in this process first, so the
#: killed process does not load the models again just to reach its activation.
PARSED_FIRST = ("lexical-assembly", "activation-before-publish", "published-before-prune")


def _parse_without_activating(home: FabricHome) -> None:
    """Scan and run the parse runs of what changed, as ``fabric ingest`` does, but do not activate."""
    from fabric_assets.ingest import dagster_instance, run_pending
    from fabric_assets.sources.scan import scan

    report = scan(home)
    _, failed = run_pending(home, dagster_instance(home), report.parse_ids_to_run)
    assert len(report.parse_ids_to_run) == 2 and failed == []


@dataclass(frozen=True)
class BaseHome:
    src: Path  # the registered root (its absolute path is in the catalog)
    snapshot: Path  # BASE as ingested, mtimes kept
    home: Path
    release_id: int


@pytest.fixture(scope="module")
def base_home(tmp_path_factory) -> BaseHome:
    """BASE ingested once (real Dagster runs); each crash test copies the home and the folder."""
    root = tmp_path_factory.mktemp("held")
    src = root / "src"
    _write_tree(src, BASE)
    home = FabricHome(root / "base-home")
    summary = ingest(src, home)
    assert summary.complete and summary.failed_runs == []
    snapshot = root / "snapshot"
    shutil.copytree(src, snapshot)
    return BaseHome(src, snapshot, home.root, home.catalog.current_release().release_id)


def _copy_of_base(base: BaseHome, tmp_path: Path) -> FabricHome:
    """A copy of the base home, with the registered folder back at BASE (same path, same mtimes)."""
    shutil.rmtree(base.src)
    shutil.copytree(base.snapshot, base.src)
    shutil.copytree(base.home, tmp_path / "home")
    return FabricHome(tmp_path / "home")


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_sigkill_at_each_point_of_an_ingest_loses_nothing(base_home, tmp_path, point):
    """guards against: a kill -9 leaving a half-published release, a source out of every release
    until its file changes, an artifact recorded before its bytes are stored, duplicated rows, or
    a home whose next ingest cannot finish."""
    home = _copy_of_base(base_home, tmp_path)
    _apply_change(base_home.src)
    if point in PARSED_FIRST:
        _parse_without_activating(home)
    killed = _fabric_cli(home, ["ingest", str(base_home.src)], prelude=KILL_POINTS[point], cwd=tmp_path)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr[-3000:])

    # Before anything repairs it, the home answers from one whole release: the old one, or (once
    # the pointer swapped) the new one; the interrupted work shows in `fabric status`.
    published = point == "published-before-prune"
    serving = assert_answers_from_a_whole_release(FabricHome(home.root))
    assert (serving != base_home.release_id) == published
    status = Fabric(home.root).status()
    interrupted = {"scan-acquisition": (1, 0), "parsing": (2, 0), "units-written": (0, 2), "embedding": (0, 2)}
    assert (status.pending, len(status.unfinished)) == interrupted.get(point, (0, 0))
    if published:
        assert_consistent(home, {"src": CHANGED})

    scratch = lambda: sorted(p.name for p in home.lexical.root.iterdir() if p.name.startswith("."))  # noqa: E731
    if point == "lexical-assembly":
        assert scratch(), "the kill did not land inside the generation's assembly"

    summary = ingest(base_home.src, FabricHome(home.root))
    assert summary.complete and summary.failed_runs == [], summary
    assert len(summary.retried) == (2 if point in ("units-written", "embedding") else 0)
    assert_consistent(home, {"src": CHANGED})
    assert scratch() == []  # the next generation's writer cleared what the killed one left


# -- two ingests of one home at once ------------------------------------------------------------

SECOND_ROOT = {
    "kelp.txt": "Kelp forests sway under the lighthouse at high water.\n",
    "gull.txt": "Gulls circled the keeper's cottage before the storm.\n",
}

_BARRIER = (
    "import os, pathlib, time\n"
    "import fabric_assets.ingest, fabric_assets.cli  # imported before the barrier: both start together\n"
    "pathlib.Path({ready!r}).touch()\n"
    "while not os.path.exists({go!r}):\n"
    "    time.sleep(0.005)\n"
)


def test_two_ingests_of_one_home_at_once_both_finish_and_the_home_is_consistent(base_home, tmp_path):
    """guards against: two ingests parsing and writing the same partitions at once (duplicated
    Lance rows: a partition's rows are replaced by a delete then an append), one of them failing
    on the other's catalog writes, or a release that misses either one's files."""
    home = _copy_of_base(base_home, tmp_path)
    _apply_change(base_home.src)
    second = tmp_path / "src2"
    _write_tree(second, SECOND_ROOT)
    go = tmp_path / "go"
    procs = []
    for i, folder in enumerate((base_home.src, second)):
        ready = tmp_path / f"ready-{i}"
        procs.append((ready, _fabric_cli(home, ["ingest", str(folder)], cwd=tmp_path, wait=False,
                                         prelude=_BARRIER.format(ready=str(ready), go=str(go)))))
    deadline = time.monotonic() + 300
    while not all(r.exists() for r, _ in procs):
        assert time.monotonic() < deadline and all(p.poll() is None for _, p in procs), \
            [p.communicate()[1][-2000:] for _, p in procs if p.poll() is not None]
        time.sleep(0.05)
    go.touch()
    outcomes = [p.communicate(timeout=600) for _, p in procs]
    assert [p.returncode for _, p in procs] == [0, 0], [err[-3000:] for _, err in outcomes]
    assert_consistent(home, {"src": CHANGED, "src2": SECOND_ROOT})


# -- torn reads: searches while another process publishes releases -----------------------------

TORN_FILES = ("north.txt", "south.txt", "west.txt")
TORN_ROUNDS = 4


def _torn_text(name: str, round_: int) -> str:
    # Every file changes every round, so no two releases share a parse; the tag names the round.
    return (f"The {name[:-4]} lighthouse keeper wrote the tide tables in ledger{round_:02d}.\n\n"
            f"Round ledger{round_:02d} of the {name[:-4]} light: fog, herring boats and a storm lamp.\n")


_WRITER = """
import pathlib
from fabric_assets.ingest import ingest
from fabric_resources.home import FabricHome
home, src = FabricHome({home!r}), pathlib.Path({src!r})
for texts in {rounds!r}:
    for name, text in texts.items():
        (src / name).write_bytes(text.encode("utf-8"))
    summary = ingest(src, home)
    assert summary.complete and summary.activation.get("published"), summary
    print("published", summary.activation["release_id"], flush=True)
"""


def test_searches_during_activations_never_see_a_mixed_release(tmp_path, fabric_home):
    """guards against: a search reading the pointer twice (a pack naming one release with hits of
    another), a release published before its index is written (an index-missing fallback
    mid-activation), or channels of one query reading different releases."""
    src = tmp_path / "src"
    _write_tree(src, {name: _torn_text(name, 0) for name in TORN_FILES})
    ingest(src, fabric_home)
    round_of = {hashlib.sha256(_torn_text(n, k).encode()).hexdigest(): k
                for n in TORN_FILES for k in range(TORN_ROUNDS + 1)}
    fabric = Fabric(fabric_home.root)
    catalog = fabric_home.catalog
    fabric.search("lighthouse")  # the query encoder is loaded before the writer starts
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER.format(home=str(fabric_home.root), src=str(src), rounds=[
            {name: _torn_text(name, k) for name in TORN_FILES} for k in range(1, TORN_ROUNDS + 1)])],
        env=_env(fabric_home), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    queries = ["lighthouse keeper tide", '"tide tables" herring', "storm lamp fog", "ledger keeper -zzzz"]
    seen = []  # (pointer before, pack, pointer after)
    try:
        deadline = time.monotonic() + 600
        while writer.poll() is None and time.monotonic() < deadline:
            before = catalog.current_release().release_id
            pack = fabric.search(queries[len(seen) % len(queries)])
            seen.append((before, pack, catalog.current_release().release_id))
    finally:
        if writer.poll() is None:
            writer.kill()
        out, err = writer.communicate()
    assert writer.returncode == 0, err[-3000:]
    assert out.count("published") == TORN_ROUNDS

    for before, pack, after in seen:
        assert before <= pack.release_id <= after
        manifest = catalog.release(pack.release_id).manifest
        assert pack.fallback_reason is None and pack.skipped_channels == {}, (pack.fallback_reason,
                                                                             pack.skipped_channels)
        assert pack.eligible_sources == len(manifest["sources"]) == len(TORN_FILES)
        assert pack.results
        _hits_belong_to_their_release(fabric_home, pack)
        rounds = {round_of[m["source_hash"]] for m in manifest["sources"].values()}
        assert len(rounds) == 1
        tags = {t for hit in pack.results for t in re.findall(r"ledger\d\d", hit.text)}
        assert tags <= {f"ledger{rounds.pop():02d}"}, tags
    # The property was tried across activations: several releases answered, and some searches
    # were running while the pointer swapped.
    assert len({pack.release_id for _, pack, _ in seen}) >= 3
    assert sum(1 for before, _, after in seen if before != after) >= 1


# -- hostile files: XXE, path traversal, nested archives ---------------------------------------

_OPENED: list[str] | None = None  # paths opened from Python while a test watches


def _audit(event: str, args: tuple) -> None:
    if _OPENED is not None and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        _OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)


def _parse_watching(name: str, data: bytes, outside: Path):
    """Parse ``data`` as the file ``name`` through the registry (as the parse asset and resolve
    do); returns the document or the ParseError. Fails if anything under ``outside`` was opened."""
    global _OPENED
    spec = parser_for(detect_media_type(name))
    _OPENED = []
    try:
        try:
            result = spec.run(data, ParserConfig(), detect_media_type(name))
        except ParseError as exc:
            result = exc
    finally:
        opened, _OPENED = _OPENED, None
    assert not [p for p in opened if str(outside) in p], opened
    return result


def _secret_files(folder: Path) -> dict[str, str]:
    """Files outside every archive that a hostile document points at; each holds a word of its own."""
    folder.mkdir(parents=True, exist_ok=True)
    words = {"secret.txt": "zyxsecrettext", "evil.dtd": "zyxdtdleak", "param.dtd": "zyxparamleak",
             "secret.xhtml": "zyxtraversedxhtml", "secret.opf": "zyxtraversedopf"}
    (folder / "secret.txt").write_text(f"{words['secret.txt']} from outside the archive\n")
    (folder / "evil.dtd").write_text(f'<!ENTITY leak "{words["evil.dtd"]}">\n'
                                     f'<!ENTITY leakfile SYSTEM "file://{folder}/secret.txt">\n')
    (folder / "param.dtd").write_text(f'<!ENTITY leak2 "{words["param.dtd"]}">\n')
    (folder / "secret.xhtml").write_text(xhtml(f"<p>{words['secret.xhtml']}</p>"))
    (folder / "secret.opf").write_text(
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata '
        f'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{words["secret.opf"]}</dc:title></metadata>'
        f'<manifest><item id="s" href="file://{folder}/secret.xhtml" media-type="application/xhtml+xml"/>'
        '</manifest><spine><itemref idref="s"/></spine></package>')
    return words


def _no_secret(result, words: dict[str, str]) -> None:
    assert not any(w in repr(result) for w in words.values()), repr(result)[:2000]


def _xxe_documents(folder: Path) -> dict[str, str]:
    """XHTML bodies that would pull a file in if entities, DTDs or includes were resolved."""
    f = f"file://{folder}"
    head = '<?xml version="1.0" encoding="utf-8"?>\n'
    html = ('<html xmlns="http://www.w3.org/1999/xhtml" xmlns:xi="http://www.w3.org/2001/XInclude">'
            '<head><title>t</title></head><body>{body}</body></html>')
    return {
        "external-entity": head + f'<!DOCTYPE html [<!ENTITY xxe SYSTEM "{f}/secret.txt">]>'
                           + html.format(body="<p>Before &xxe; after.</p>"),
        "external-dtd": head + f'<!DOCTYPE html SYSTEM "{f}/evil.dtd">'
                        + html.format(body="<p>Before &leak; &leakfile; after.</p>"),
        "public-dtd": head + f'<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" "{f}/evil.dtd">'
                      + html.format(body="<p>Before &leak; after.</p>"),
        "parameter-entity": head + f'<!DOCTYPE html [<!ENTITY % ext SYSTEM "{f}/param.dtd"> %ext;]>'
                            + html.format(body="<p>Before &leak2; after.</p>"),
        "xinclude": head + html.format(body=f'<p>Before <xi:include href="{f}/secret.txt" parse="text"/> after.</p>'),
        # Not well-formed, so the lxml.html fallback reads it: the DOCTYPE and entity are still inert.
        "html-fallback": head + f'<!DOCTYPE html SYSTEM "{f}/evil.dtd">'
                         + html.format(body="<p>Before &leak; after.<p><b>unclosed</p>"),
    }


def _xxe_epubs(folder: Path) -> dict[str, bytes]:
    f = f"file://{folder}"
    books = {f"xhtml-{case}": build_epub({"ch1.xhtml": doc, "ch2.xhtml": xhtml("<p>Plain second chapter.</p>")})
             for case, doc in _xxe_documents(folder).items()}
    doctype = f'<!DOCTYPE package [<!ENTITY xxe SYSTEM "{f}/secret.txt"><!ENTITY % p SYSTEM "{f}/param.dtd"> %p;]>'
    opf = ('<?xml version="1.0" encoding="utf-8"?>' + doctype
           + '<package xmlns="http://www.idpf.org/2007/opf" version="2.0" unique-identifier="uid">'
           '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="uid">x</dc:identifier>'
           '<dc:title>Title &xxe; &leak2;</dc:title><dc:language>en</dc:language></metadata>'
           '<manifest><item id="d0" href="ch1.xhtml" media-type="application/xhtml+xml"/>'
           '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/></manifest>'
           '<spine toc="ncx"><itemref idref="d0"/></spine></package>')
    ncx = ncx_doc('<navPoint id="n1"><navLabel><text>Chapter &xxe; &leak;</text></navLabel>'
                  '<content src="ch1.xhtml"/></navPoint>').replace(
        "<ncx ", f'<!DOCTYPE ncx SYSTEM "{f}/evil.dtd"><ncx ', 1)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        zf.writestr("META-INF/container.xml", CONTAINER.format(path="OEBPS/content.opf"))
        zf.writestr("OEBPS/content.opf", opf)
        zf.writestr("OEBPS/toc.ncx", ncx)
        zf.writestr("OEBPS/ch1.xhtml", xhtml("<h1>One</h1><p>Before the chapter text.</p>"))
    books["opf-and-ncx"] = buf.getvalue()
    return books


def test_xxe_in_epub_xhtml_opf_and_ncx_reads_no_file(tmp_path):
    """guards against: lxml resolving external entities, loading an external DTD or a parameter
    entity, or processing XInclude, in a content document, the package or the NCX (also through
    the lxml.html fallback); the text around each reference must still be read."""
    outside = tmp_path / "outside"
    words = _secret_files(outside)
    for name, data in _xxe_epubs(outside).items():
        doc = _parse_watching("book.epub", data, outside)
        assert not isinstance(doc, ParseError), (name, doc)
        _no_secret(doc, words)
        text = " ".join(u.text for u in doc.units)
        assert "Before" in text, (name, text)
        if name.startswith("xhtml-") and name != "xhtml-html-fallback":
            assert "after." in text and "Plain second chapter." in text, (name, text)


def _ooxml_plain(kind: str) -> bytes:
    """A small real DOCX (python-docx) or PPTX (python-pptx) document."""
    buf = io.BytesIO()
    if kind == "docx":
        import docx

        d = docx.Document()
        d.add_paragraph("Plain docx paragraph.")
        d.save(buf)
    else:
        import pptx

        p = pptx.Presentation()
        slide = p.slides.add_slide(p.slide_layouts[1])
        slide.shapes.title.text = "Plain slide title"
        p.save(buf)
    return buf.getvalue()


def _ooxml_with(kind: str, parts: dict[str, bytes] | None = None, extra: dict[str, bytes] | None = None) -> bytes:
    """:func:`_ooxml_plain` with ``parts`` replaced and ``extra`` members added."""
    parts = parts or {}
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(_ooxml_plain(kind))) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info, parts.get(info.filename) or src.read(info))
        for name, data in (extra or {}).items():
            dst.writestr(name, data)
    return out.getvalue()


def _ooxml_part(kind: str, name: str) -> bytes:
    with zipfile.ZipFile(io.BytesIO(_ooxml_plain(kind))) as z:
        return z.read(name)


def test_xxe_in_docx_pptx_and_html_reads_no_file(tmp_path):
    """guards against: the OOXML readers (python-docx, python-pptx, the notes reader) or the HTML
    walk resolving an external entity or loading an external DTD."""
    outside = tmp_path / "outside"
    words = _secret_files(outside)
    f = f"file://{outside}"
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    for doctype, ref in ((f'<!DOCTYPE w:document [<!ENTITY xxe SYSTEM "{f}/secret.txt">]>', "&xxe;"),
                         (f'<!DOCTYPE w:document SYSTEM "{f}/evil.dtd">', "&leak;")):
        body = (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>{doctype}<w:document {w}><w:body>'
                f'<w:p><w:r><w:t>Before {ref} after.</w:t></w:r></w:p></w:body></w:document>')
        _no_secret(_parse_watching("x.docx", _ooxml_with("docx", {"word/document.xml": body.encode()}), outside),
                   words)
    notes = (f'<?xml version="1.0" encoding="UTF-8"?><!DOCTYPE w:footnotes [<!ENTITY xxe SYSTEM "{f}/secret.txt">]>'
             f'<w:footnotes {w}><w:footnote w:id="1"><w:p><w:r><w:t>Note &xxe;</w:t></w:r></w:p></w:footnote>'
             '</w:footnotes>')
    rels = _ooxml_part("docx", "word/_rels/document.xml.rels").replace(
        b"</Relationships>", b'<Relationship Id="rId990" Target="footnotes.xml" Type="http://schemas.openxmlformats'
        b'.org/officeDocument/2006/relationships/footnotes"/></Relationships>')
    types = _ooxml_part("docx", "[Content_Types].xml").replace(
        b"</Types>", b'<Override PartName="/word/footnotes.xml" ContentType="application/vnd.openxmlformats-'
        b'officedocument.wordprocessingml.footnotes+xml"/></Types>')
    with_notes = _ooxml_with("docx", {"word/_rels/document.xml.rels": rels, "[Content_Types].xml": types},
                             extra={"word/footnotes.xml": notes.encode()})
    _no_secret(_parse_watching("x.docx", with_notes, outside), words)
    slide = _ooxml_part("pptx", "ppt/slides/slide1.xml")
    poisoned = slide.replace(b"Plain slide title", b"Plain slide &xxe;", 1).replace(
        b"?>", f'?><!DOCTYPE p:sld [<!ENTITY xxe SYSTEM "{f}/secret.txt">]>'.encode(), 1)
    _no_secret(_parse_watching("x.pptx", _ooxml_with("pptx", {"ppt/slides/slide1.xml": poisoned}), outside), words)
    page = (f'<!DOCTYPE html SYSTEM "{f}/evil.dtd"><html><head><title>t</title></head><body><article>'
            f'<p>Before &leak; after, a paragraph long enough to be main text for the extractor.</p>'
            f'<iframe src="{f}/secret.txt"></iframe><img src="{f}/secret.txt"/></article></body></html>')
    _no_secret(_parse_watching("page.html", page.encode(), outside), words)


def _rename_member(data: bytes, old: str, new: bytes) -> bytes:
    """Rewrite a member's name (same length) in its local and central headers: zipfile cannot
    write a name with a NUL, drive letter or backslash as it is."""
    assert len(new) == len(old)
    return data.replace(old.encode(), new)


def _traversal_epubs(outside: Path) -> dict[str, bytes]:
    rel_up = "../" * 24 + str(outside).lstrip("/")  # from any base directory, up to / and down again
    hrefs = {
        "relative-up": f"{rel_up}/secret.xhtml",
        "absolute": f"{outside}/secret.xhtml",
        "file-url": f"file://{outside}/secret.xhtml",
        "percent-encoded": ("..%2F" * 24) + str(outside).lstrip("/").replace("/", "%2F") + "%2Fsecret.xhtml",
        "drive-letter": "C:/Windows/secret.xhtml",
        "backslashes": "..\\..\\..\\" + str(outside).lstrip("/").replace("/", "\\") + "\\secret.xhtml",
        "nul": f"ch1.xhtml%00{rel_up}/secret.xhtml",
    }
    books = {}
    for case, href in hrefs.items():
        item = f'<item id="evil" href="{href}" media-type="application/xhtml+xml"/>'
        books[f"href-{case}"] = build_epub({"ch1.xhtml": xhtml("<p>Good chapter text.</p>")},
                                           extra_items=item, spine_extra='<itemref idref="evil"/>')
    # The container's rootfile points outside the zip (at an OPF on disk), with and without a root OPF.
    for case, path in {"rootfile-up": f"{rel_up}/secret.opf", "rootfile-absolute": f"{outside}/secret.opf"}.items():
        data = build_epub({"ch1.xhtml": xhtml("<p>Good chapter text.</p>")})
        books[case] = data.replace(CONTAINER.format(path="OEBPS/content.opf").encode(),
                                   CONTAINER.format(path=path).encode())
    # Member names that would escape a folder if anyone extracted them: they are only zip keys.
    names = {"member-up": b"../../../../etc/evil.xhtml", "member-absolute": b"/tmp/fabric-evil/x.xhtml",
             "member-drive": b"C:\\fabric\\evil\\evilx.xhtml", "member-nul": b"OEBPS/ch9.xhtml\x00/etc/pass"}
    for case, name in names.items():
        placeholder = "Q" * len(name)
        data = build_epub({"ch1.xhtml": xhtml("<p>Good chapter text.</p>")},
                          extra={placeholder: xhtml("<p>Zip member text.</p>")},
                          extra_items=f'<item id="m" href="{name.decode().split(chr(0))[0]}" '
                                      'media-type="application/xhtml+xml"/>',
                          spine_extra='<itemref idref="m"/>')
        books[case] = _rename_member(data, placeholder, name)
    return books


def test_path_traversal_in_epub_hrefs_and_member_names_reads_and_writes_nothing_outside(tmp_path, monkeypatch):
    """guards against: an href, a rootfile path or a member name that leaves the archive (``..``,
    an absolute path, a file: URL, percent-encoding, a drive letter, backslashes, a NUL) being
    read from the file system, or anything being written where a member name points."""
    outside = tmp_path / "outside"
    words = _secret_files(outside)
    work = tmp_path / "cwd" / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)  # relative names resolve here if anything used them as paths
    before = sorted(p for p in tmp_path.rglob("*"))
    for name, data in _traversal_epubs(outside).items():
        result = _parse_watching("book.epub", data, outside)
        _no_secret(result, words)
        if name.startswith("href-"):
            assert [u.text for u in result.units] == ["Good chapter text."], (name, result)
    assert sorted(p for p in tmp_path.rglob("*")) == before


def test_path_traversal_in_ooxml_relationships_reads_nothing_outside(tmp_path):
    """guards against: a DOCX or PPTX relationship target (internal ``..`` path, absolute path, or an
    external file: URL) being loaded from the file system."""
    outside = tmp_path / "outside"
    words = _secret_files(outside)
    rel_up = "../" * 24 + str(outside).lstrip("/")
    rels = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId901" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/footnotes" '
            f'Target="{rel_up}/secret.txt"/>'
            '<Relationship Id="rId902" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/image" '
            f'Target="file://{outside}/secret.txt" TargetMode="External"/>'
            '<Relationship Id="rId903" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink" '
            f'Target="{outside}/secret.txt"/>')
    for kind, rels_part in (("docx", "word/_rels/document.xml.rels"), ("pptx", "ppt/slides/_rels/slide1.xml.rels")):
        original = _ooxml_part(kind, rels_part).decode()
        poisoned = rels + original.split("relationships\">", 1)[1]
        result = _parse_watching(f"x.{kind}", _ooxml_with(kind, {rels_part: poisoned.encode()}), outside)
        _no_secret(result, words)


def _nested_bomb(inner_bytes: int = 200 << 20) -> bytes:
    """A zip holding a zip whose one member inflates to ``inner_bytes`` (stored as is in the outer
    archive, so the outer member's own ratio is about 1)."""
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        with z.open("zeros.xhtml", "w", force_zip64=True) as fh:
            block = b"\0" * (1 << 20)
            for _ in range(inner_bytes >> 20):
                fh.write(block)
    return inner.getvalue()


def _stored(data: bytes, names: set[str]) -> bytes:
    """``data`` with the members ``names`` stored uncompressed (the others as they were)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            copy = zipfile.ZipInfo(info.filename, info.date_time)
            copy.compress_type = zipfile.ZIP_STORED if info.filename in names else info.compress_type
            dst.writestr(copy, src.read(info))
    return out.getvalue()


def test_nested_archives_are_never_opened(tmp_path):
    """guards against: a parser opening an archive found inside the archive (a zip in an EPUB's
    spine or manifest, an embedded package in a DOCX or PPTX) and inflating what it holds."""
    import tracemalloc

    bomb = _nested_bomb()
    cases = {
        "book.epub": _stored(build_epub(
            {"ch1.xhtml": xhtml("<p>Good chapter text.</p>"), "inner.xhtml": bomb}, extra={"OEBPS/inner.zip": bomb},
            extra_items='<item id="z" href="inner.zip" media-type="application/zip"/>',
            spine_extra='<itemref idref="z"/>'), {"OEBPS/inner.xhtml", "OEBPS/inner.zip"}),
        "x.docx": _stored(_ooxml_with("docx", extra={"word/embeddings/inner.zip": bomb,
                                                     "word/embeddings/inner.docx": bomb}),
                          {"word/embeddings/inner.zip", "word/embeddings/inner.docx"}),
        "x.pptx": _stored(_ooxml_with("pptx", extra={"ppt/embeddings/inner.zip": bomb}), {"ppt/embeddings/inner.zip"}),
    }
    outside = tmp_path / "outside"
    outside.mkdir()
    for name, data in cases.items():
        tracemalloc.start()
        started = time.perf_counter()
        result = _parse_watching(name, data, outside)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert time.perf_counter() - started < 20
        assert peak < 64 << 20, (name, peak)  # the inner member alone would inflate to 200 MB
        assert not isinstance(result, ParseError), (name, result)
        assert result.units, name


@pytest.mark.parametrize("kind", ["docx", "pptx"])
def test_ooxml_zip_bombs_are_refused_on_declared_sizes_and_never_read_past_them(kind):
    """guards against: DOCX/PPTX admission skipping the member count or the declared total, or a
    part whose central directory understates its size being inflated past what it declared (the
    EPUB side: tests/test_parsing_epub.py's cap tests)."""
    import tracemalloc

    from test_parsing_epub import patch_central

    from fabric_resources.config import OoxmlParserConfig

    media_type = detect_media_type(f"x.{kind}")
    part = "word/document.xml" if kind == "docx" else "ppt/slides/slide1.xml"

    def outcome(data: bytes, caps: dict | None = None) -> str:
        parsers = ParserConfig(**{kind: OoxmlParserConfig(**(caps or {}))})
        tracemalloc.start()
        try:
            parser_for(media_type).run(data, parsers, media_type)
            return "parsed"
        except ParseError as exc:
            return exc.reason
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert peak < 64 << 20, peak

    many = _ooxml_with(kind, extra={f"fabric-test/item{i}.xml": b"<a/>" for i in range(40)})
    assert outcome(many, {"max_members": 30}) == "cap-members"
    filler = b" ".join(b"tide lamp keeper ledger %d" % i for i in range(200_000))  # ~5 MB, deflates ~10:1
    big = _ooxml_with(kind, {part: _ooxml_part(kind, part).replace(b"Plain", b"Plain " + filler, 1)})
    assert outcome(big, {"max_decompressed_bytes": 1 << 20}) == "cap-decompressed-bytes"
    assert outcome(patch_central(big, part, 24, "<I", 1000)) == f"malformed-{kind}"  # stops at the declared size


def test_hostile_epubs_in_a_real_ingest_leak_nothing(tmp_path, fabric_home):
    """guards against: any other path of an ingest (scan, parse asset, chunking, search, resolve)
    reading what a hostile EPUB points at; the books still end active or failed with a reason."""
    outside = tmp_path / "outside"
    words = _secret_files(outside)
    src = tmp_path / "books"
    src.mkdir()
    books = {**_xxe_epubs(outside), **_traversal_epubs(outside)}
    for name, data in books.items():
        (src / f"{name}.epub").write_bytes(data)
    ingest(src, fabric_home)
    fabric = Fabric(fabric_home.root)
    status = fabric.status()
    active = set(fabric_home.catalog.current_release().manifest["sources"])
    failed = {s for p in status.failed for s in p.sources}
    assert active | failed == {f"fs:books/{n}.epub" for n in books} and all(p.reason for p in status.failed)
    units = fabric_home.tables.read("units").column("text").to_pylist()
    assert units and not any(w in t for t in units for w in words.values())
    for word in words.values():
        # The dense channels rank neighbours for any query, so the check is that the word appears in
        # no part of the answer, and that the channels that match words find nothing.
        assert word not in fabric.search(word).model_dump_json(exclude={"query"})
        assert fabric.search(word, channels={"word", "substring"}).results == ()
    hit = fabric.search("good chapter text").results[0]
    assert fabric.resolve(hit.citation).status == "verified"


# -- offsets with emoji, CRLF and astral characters --------------------------------------------

ASTRAL = (
    "Keeper 😀 logbook: the 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 lamp burned 👨\u200d👩\u200d👧 all night.\r\n"
    "Second line 🏳️\u200d🌈 of the first paragraph, cafe\u0301 and 𝒜𝓈𝓉𝓇𝒶𝓁 letters.\r\n"
    "\r\n"
    "Paragraph two: tidewater 🌊🌊 rose past the 𝕸𝖆𝖗𝖐 by the keeper's door.\r\n"
    "\r\n"
    "# not a heading in plain text 🧭 tidewater again\r\n"
)


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def test_offsets_with_emoji_crlf_and_astral_characters_select_the_cited_text(tmp_path, fabric_home):
    """guards against: offsets counted in UTF-8 bytes or UTF-16 units instead of Unicode scalars,
    CRLF shifting locators, UTF-16 offsets off around surrogate pairs, highlights that do not
    concatenate to the passage, or such a citation not resolving verified."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "astral.txt").write_bytes(ASTRAL.encode("utf-8"))
    ingest(src, fabric_home)
    fabric = Fabric(fabric_home.root)
    decoded = ASTRAL  # the file as the parser decodes it (UTF-8)
    units = fabric_home.tables.read("units").to_pylist()
    for u in units:  # locators are scalar offsets into the decoded file; CRLF becomes "\n" in unit text
        loc = json.loads(u["locator"])
        assert decoded[loc["char_start"]:loc["char_end"]].replace("\r\n", "\n") == u["text"]
    unit_text = {u["unit_id"]: u["text"] for u in units}
    checked = 0
    for query in ("keeper", "tidewater", "lamp", "letters", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢"):
        for hit in fabric.search(query).results:
            assert "".join(s.text for s in hit.highlights) == hit.text
            pieces = []
            for span in hit.citation.spans:
                text = unit_text[span.unit_id]
                piece = text[span.start_char:span.end_char]
                assert (span.start_utf16, span.end_utf16) == (utf16_offset(text, span.start_char),
                                                            utf16_offset(text, span.end_char))
                assert span.end_utf16 - span.start_utf16 == len(piece.encode("utf-16-le")) // 2
                assert span.text_hash == text_hash(piece)
                pieces.append(piece)
            assert "\n\n".join(pieces) == hit.text and hit.citation.text_hash == text_hash(hit.text)
            # Each highlighted segment is the queried word itself (a shifted offset would mark a
            # piece of an emoji or of the word's neighbours).
            folded = _fold(query)
            marked = [_fold(s.text) for s in hit.highlights if s.highlighted]
            assert all(m.startswith(folded[:5]) and m.isalpha() for m in marked), (query, marked)
            assert bool(marked) == (folded in _fold(hit.text)), (query, hit.text)
            result = fabric.resolve(hit.citation)
            assert result.status == "verified" and result.text == hit.text, result.checks
            checked += 1
    assert checked >= 5
