"""``fabric bench lexical-update``: the cost of exact BM25 statistics when documents leave the index.

Per size N: a Lance ``lexical_documents`` table of N chunks cut from real text (3 per parse, as
files of ~1,000 characters give) and its serving generation, built fresh. Then ``rounds`` times
the incremental benchmark's change — one parse edited (removed, and added under a new parse ID),
one deleted, one added — as one activation writes it (``LexicalIndex.write_generation``, reading
the documents of parses that stay from the Lance table at its version), timed against:

* **deletes kept**: the same change written the way activation did before issue 13 (hard links,
  delete by parse-ID term, add): fast, but the deleted documents stay in BM25's N, df and avgdl;
* **fresh build**: the whole index rebuilt from the table.

Every exact generation is checked to hold no deleted document; its segment count is reported
(segments hold at most ``MAX_SEGMENT_DOCUMENTS``, so a removal re-indexes one segment's documents,
not the index's). No Dagster, no embedding.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import tantivy

from fabric_assets.measurement.bench_lexical import cut_chunks
from fabric_resources.lexical_index import (ANALYZER_ID, META_FILE, LexicalIndex, _register, add_to_writer,
                                            deleted_documents)
from fabric_resources.schema import INDEX_FIELD_PARSE_ID, LEXICAL_DOCUMENTS
from fabric_resources.tables import TableStore
from fabric_resources.text_folding import fold

CHUNKS_PER_PARSE = 3


def _parse(rng: random.Random) -> str:
    return f"{rng.getrandbits(128):032x}"


def _rows(pid: str, texts: list[str]) -> pa.Table:
    return pa.table({"parse_id": [pid] * len(texts), "chunk_id": [f"{pid[:24]}{i:08x}" for i in range(len(texts))],
                     "folded_text": [fold(t) for t in texts], "analyzer": [ANALYZER_ID] * len(texts)},
                    schema=LEXICAL_DOCUMENTS)


def _deletes_kept(index: LexicalIndex, previous: str, removed: list[str], docs: pa.Table) -> str:
    """The generation as activation wrote it before: deleted documents stay in their segments."""
    name = f"gen-{int(max(index.generations())[4:]) + 1:08d}"
    tmp = index.root / f".{name}.tmp"
    tmp.mkdir()
    for f in (index.root / previous).iterdir():
        if f.is_file() and f.name not in (META_FILE, ".tantivy-writer.lock", ".tantivy-meta.lock"):
            os.link(f, tmp / f.name)
    ix = tantivy.Index.open(str(tmp))
    _register(ix)
    writer = ix.writer(heap_size=64_000_000, num_threads=1)
    for pid in removed:
        writer.delete_documents_by_term(INDEX_FIELD_PARSE_ID, pid)
    add_to_writer(writer, docs)
    writer.commit()
    writer.wait_merging_threads()
    shutil.copy(index.root / previous / META_FILE, tmp / META_FILE)
    os.replace(tmp, index.root / name)
    return name


def bench_lexical_update(texts: list[str], sizes: tuple[int, ...], rounds: int = 5, seed: int = 13) -> dict:
    """Median seconds per change (exact, deletes kept, fresh build) and documents re-added, per size."""
    out = {"sizes": {}, "rounds": rounds, "chunks_per_parse": CHUNKS_PER_PARSE}
    for n in sizes:
        rng = random.Random(seed)
        pool = cut_chunks(texts, n + 9 * rounds + 9, seed)
        with tempfile.TemporaryDirectory(prefix="fabric-bench-lexupd-") as tmp:
            store = TableStore(Path(tmp) / "tables")
            parses = []
            tables = []
            for i in range(0, n, CHUNKS_PER_PARSE):
                pid = _parse(rng)
                parses.append(pid)
                tables.append(_rows(pid, pool[i:i + CHUNKS_PER_PARSE]))
            store.replace_partitions("lexical_documents", parses, pa.concat_tables(tables))
            index = LexicalIndex(Path(tmp) / "lexical")
            t0 = time.perf_counter()
            gen = index.build_fresh(store.read("lexical_documents"))
            first_build = time.perf_counter() - t0
            kept_gen = gen
            exact, kept, fresh, readded, segments = [], [], [], [], []
            at = n
            for _ in range(rounds):
                edited, deleted = rng.sample(parses, 2)
                new = [_parse(rng), _parse(rng)]  # the edit's new parse, the added file's parse
                rows = pa.concat_tables([_rows(pid, pool[at + 3 * j:at + 3 * j + 3]) for j, pid in enumerate(new)])
                at += 6
                removed = [edited, deleted]
                parses = [p for p in parses if p not in removed] + new
                version = store.replace_partitions("lexical_documents", [*removed, *new], rows)
                counted = []

                def documents_of(ids, version=version):
                    docs = store.read("lexical_documents", parse_ids=ids, version=version)
                    counted.append(docs.num_rows)
                    return docs

                t0 = time.perf_counter()
                gen = index.write_generation(gen, removed, documents_of(new), documents_of)
                exact.append(time.perf_counter() - t0)
                readded.append(sum(counted[1:]))  # documents of parses that shared a segment
                opened = index.open(gen)
                if deleted_documents(opened.searcher):
                    raise RuntimeError("a generation kept a deleted document")
                segments.append(opened.searcher.num_segments)
                t0 = time.perf_counter()
                kept_gen = _deletes_kept(index, kept_gen, removed, documents_of(new))
                kept.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                index.build_fresh(documents_of(parses))
                fresh.append(time.perf_counter() - t0)
                index.remove_generations({gen, kept_gen})
            out["sizes"][n] = {
                "first_build_s": round(first_build, 3),
                "exact_s": round(statistics.median(exact), 3),
                "deletes_kept_s": round(statistics.median(kept), 3),
                "fresh_build_s": round(statistics.median(fresh), 3),
                "documents_readded_median": int(statistics.median(readded)),
                "documents_readded_rounds": readded,
                "segments_exact": segments,
                "exact_rounds_s": [round(x, 3) for x in exact],
                "deleted_documents_left_by_deletes_kept": deleted_documents(index.open(kept_gen).searcher),
            }
    return out
