"""A release view that keeps chunk text on disk (``query.text_in_memory_max_rows`` below its size)
answers exactly as one that holds it: whole EvidencePacks, the scan fallback, filters and resolve.
Real Dagster ingest, Lance, tantivy and MiniLM; each configuration in a query process of its own."""

from __future__ import annotations

import json
import shutil

import pytest
from answers import answers_in_fresh_process
from conftest import ingest

from fabric_resources.home import FabricHome

FILES = {
    "a.txt": "The lighthouse keeper logged the tide.\n\nA storm broke the lamp in March.\n\n"
             "The keeper's daughter mended the lens by candlelight.\n",
    "b.txt": "Lighthouse lenses focus the lamp into a beam.\n\nFresnel rings bend the light outwards.\n",
    "notes/c.md": "# Bread\n\nSourdough needs a lively starter and patience.\n",
    "j.txt": "認証トークンは利用者を示す文字列です。\n\n有効期限が切れたら再発行します。\n",
}
QUERIES = ["lighthouse keeper", "lamp -storm", '"lively starter"', "認証トークン", "starter prefix:corpus/notes/", "beam"]


def _answers(root) -> dict:
    return answers_in_fresh_process(root, QUERIES, debug=True, resolve=True)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("text-on-disk")
    folder = tmp / "corpus"
    for rel, text in FILES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    home = FabricHome(tmp / "home")
    ingest(folder, home)
    return home


def _on_disk(home: FabricHome, on_disk: bool) -> None:
    home.layout.config_file.write_text(json.dumps({"query": {"text_in_memory_max_rows": 0}}) if on_disk else "{}")


def test_text_on_disk_answers_as_text_in_memory(home):
    """guards against: a cited chunk's text, fragments or section read from another row (offsets of
    another version or order), a passage member missing, the word channel re-scoring other texts."""
    _on_disk(home, False)
    held = _answers(home.root)
    assert all(held[q]["results"] for q in QUERIES if q != "lamp -storm")
    _on_disk(home, True)
    try:
        assert _answers(home.root) == held
    finally:
        _on_disk(home, False)


def test_scan_fallback_reads_the_text_it_scans(home, tmp_path):
    """guards against: the scan fallback (no usable word index) finding nothing once the view keeps no text."""
    copy = tmp_path / "home"
    shutil.copytree(home.root, copy)
    other = FabricHome(copy)
    shutil.rmtree(other.lexical.root)
    _on_disk(other, False)
    held = _answers(copy)
    assert held["lighthouse keeper"]["fallback_reason"].startswith("index-missing")
    assert held["lighthouse keeper"]["results"]
    _on_disk(other, True)
    assert _answers(copy) == held


def test_view_reads_text_per_chunk_and_keeps_it_bounded(home):
    from fabric_query.release import pinned_view

    _on_disk(home, True)
    try:
        view = pinned_view(FabricHome(home.root))
        assert not view.text_in_memory and "text" not in view.chunks.column_names
        ids = view.chunks.column("chunk_id").to_pylist()
        rows = view.chunk_rows(list(reversed(ids)))
        assert list(rows) == list(reversed(ids))
        assert [rows[c]["text"] for c in ids] == view.chunk_texts
        assert all(rows[c]["fragments"] for c in ids) and view.chunk(ids[0]) is rows[ids[0]]
    finally:
        _on_disk(home, False)
