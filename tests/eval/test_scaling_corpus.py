"""Scaling corpora: distinct recombined documents, sized by the real packer, English-only pool."""

from __future__ import annotations

import hashlib
import re

from conftest import SHARED, need_shared

from fabric_assets.chunking.fine_chunks import ChunkInputUnit, pack_fine_chunks
from fabric_resources.parsing.text.parser import parse_text
from fabric_assets.measurement.scaling_corpus import (
    Paragraph, is_english, load_english_pool, plan_documents, sentences, tiny_documents, write_documents,
)
from fabric_resources.config import TextParserConfig
from fabric_resources.language_routing import needs_multilingual

SENTENCES = [
    "The keeper of the lighthouse wrote the tide tables by hand every evening.",
    "Boundary layer transition was observed on the flat plate at high Mach numbers.",
    "It is a truth universally acknowledged that a single man must be in want of a wife.",
    "The ship came in on the morning tide and the harbour master counted the crates.",
    "Heat transfer in the stagnation region depends on the pressure gradient.",
    "She walked across the marsh to the churchyard where the convict waited.",
]


def _pool(n_per_source: int = 12) -> list[Paragraph]:
    out = []
    for s, source in enumerate(("books/a", "books/b", "cranfield")):
        for i in range(n_per_source):
            words = " ".join(SENTENCES[(s + i + k) % len(SENTENCES)] for k in range(1 + i % 4))
            out.append(Paragraph(source, f"{source} paragraph {i}: {words}"))
    return out


def _spans(texts: list[str]) -> list[list[tuple[int, int]]]:
    """Whitespace tokens as word pieces (a stand-in tokenizer with exact character offsets)."""
    return [[m.span() for m in re.finditer(r"\S+", t)] for t in texts]


def test_planned_documents_are_distinct_and_hit_the_chunk_target():
    """guards against: documents collapsing under content-hash dedup; a corpus far off its chunk target."""
    pool = _pool()
    source_of = {p.text: p.source for p in pool}
    docs = plan_documents(pool, 200, _spans, max_tokens=32, chunks_per_document=10, seed=3)
    hashes = {hashlib.sha256(d.text.encode()).hexdigest() for d in docs}
    assert len(hashes) == len(docs) > 1
    total = sum(d.chunks for d in docs)
    assert 200 <= total < 200 + max(d.chunks for d in docs)
    assert len({d.name for d in docs}) == len(docs)
    for d in docs:  # each paragraph is a run of consecutive sentences of one pool paragraph
        assert all(any(part in p.text for p in pool) for part in d.text.strip().split("\n\n"))
    whole = plan_documents(pool, 200, _spans, max_tokens=32, chunks_per_document=10, seed=3, sentence_windows=False)
    for d in whole:  # neighbours come from different sources
        sources = [source_of[t] for t in d.text.strip().split("\n\n")]
        assert all(a != b for a, b in zip(sources, sources[1:]))
    again = plan_documents(pool, 200, _spans, max_tokens=32, chunks_per_document=10, seed=3)
    assert [d.text for d in again] == [d.text for d in docs]
    other = plan_documents(pool, 200, _spans, max_tokens=32, chunks_per_document=10, seed=4)
    assert [d.text for d in other] != [d.text for d in docs]


def test_planned_chunk_count_is_what_the_text_parser_and_packer_make():
    """guards against: the planned size drifting from what the pipeline produces for the written file."""
    docs = plan_documents(_pool(), 60, _spans, max_tokens=24, chunks_per_document=6, seed=1)
    for d in docs:
        parsed = parse_text(d.text.encode(), TextParserConfig())
        units = [ChunkInputUnit(str(i), u.kind, u.text, u.section_path) for i, u in enumerate(parsed.units)]
        assert len(pack_fine_chunks(units, _spans, 24)) == d.chunks


def test_tiny_documents_are_distinct_and_short(tmp_path):
    docs = tiny_documents(_pool(), 30, seed=0, max_chars=200)
    assert len(docs) == 30
    assert len({d.text for d in docs}) == 30
    assert all(len(d.text) <= 2 * 200 + 3 for d in docs)
    folder = write_documents(docs, tmp_path / "notes", per_folder=7)
    written = sorted(folder.rglob("*.txt"))
    assert len(written) == 30 and len({p.parent for p in written}) == 5


def test_sentences_cut_after_final_punctuation():
    assert sentences("what is lift . how is drag measured ? it varies.") == [
        "what is lift .", "how is drag measured ?", "it varies."]
    assert sentences("One sentence without an end") == ["One sentence without an end"]


def test_stopword_profile_tells_english_from_other_languages():
    assert is_english("It was the best of times, it was the worst of times, it was the age of wisdom")
    assert not is_english("En un lugar de la Mancha, de cuyo nombre no quiero acordarme, no ha mucho tiempo")
    assert not is_english("羅生門の下で雨やみを待っていた")


def test_english_pool_from_shared_leaves_out_other_languages():
    """guards against: Japanese, Chinese, Arabic or Spanish books entering the English scaling corpus."""
    need_shared(SHARED / "eval" / "cranfield")
    pool = load_english_pool(need_shared(SHARED))
    assert pool.used["cranfield"] > 1000
    assert "text/gutenberg/1342-0_pride-and-prejudice.txt" in pool.used
    assert "epub/charles-dickens_great-expectations.epub" in pool.used
    for excluded in ("text/aozora/akutagawa_rashomon.sjis.txt", "text/chinese/sanguoyanyi_ch01-10.utf8.txt",
                     "epub/regime-anticancer-arabic.epub", "epub/todo-es-mio_test.epub",
                     "epub/kusamakura-japanese-vertical-writing.epub"):
        assert excluded in pool.excluded and excluded not in pool.used
    assert not any(needs_multilingual(p.text) for p in pool.paragraphs)
    assert sum(pool.used.values()) == len(pool.paragraphs)
