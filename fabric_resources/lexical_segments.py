"""Bounded segments of the serving index: which to keep, which to index again, and building them.

A generation of the lexical index (:class:`fabric_resources.lexical_index.LexicalIndex`) is a
list of immutable tantivy segments of at most ``cap`` documents each (``MAX_SEGMENT_DOCUMENTS``
by default), each with a *segment record* beside it (parse ID → documents it holds). A change
that removes parses leaves out the segments holding them and indexes their other documents
again; small segments are consolidated by size tier as a log-structured merge does (tantivy's
own ``LogMergePolicy`` tiers segments by the logarithm of their document count the same way)
(:func:`plan_segments`). New documents become one-commit segments (:func:`build_segments`).
This module knows how generations are assembled, not what a document holds: the index passes
in its schema, how to make an empty index and how to add documents.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import tantivy

from fabric_resources import tantivy_meta
from fabric_resources.schema import INDEX_FIELD_PARSE_ID

#: Documents per segment. Removing a parse indexes its segment's other documents again, so this
#: bounds an activation's cost (~0.5 ms per document here); the word and substring channels pay a
#: little per segment (docs/benchmarks.md, "Exact BM25 statistics after deletes").
MAX_SEGMENT_DOCUMENTS = 1024
#: Small segments (under half of ``max_segment_documents``) of one size tier that are consolidated
#: into one: tier t holds segments of FAN_IN**t to FAN_IN**(t+1) - 1 documents.
FAN_IN = 4
WRITER_HEAP_BYTES = 64_000_000
#: A segment record's file: ``<this><segment UUID hex>.json`` (not tantivy's ``<UUID hex>.`` prefix).
RECORD_PREFIX = "fabric-parses-"


@dataclass(frozen=True)
class SegmentRecord:
    """What Fabric knows of a segment: tantivy's entry and the parses it holds (parse ID → documents)."""

    segment: tantivy_meta.SegmentMeta
    parses: dict[str, int]

    @property
    def documents(self) -> int:
        return self.segment.max_doc


@dataclass(frozen=True)
class SegmentPlan:
    """Which segments of the previous generation the next one keeps; which parses it indexes again."""

    kept: list[tantivy_meta.SegmentMeta]
    reindex: set[str]
    left_out: int
    rebuilt: bool

    def summary(self, indexed: int) -> dict:
        return {"segments_kept": len(self.kept), "segments_left_out": self.left_out,
                "documents_indexed": indexed, "rebuilt": self.rebuilt}


def record_path(directory: Path, segment: tantivy_meta.SegmentMeta) -> Path:
    return directory / f"{RECORD_PREFIX}{segment.file_prefix}json"


def load_record(directory: Path, segment: tantivy_meta.SegmentMeta) -> SegmentRecord | None:
    """The segment's record, or None when it has none or one that does not add up to its documents."""
    try:
        data = json.loads(record_path(directory, segment).read_text())
        parses = {str(p): int(n) for p, n in data["parses"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if data.get("documents") != segment.max_doc or sum(parses.values()) != segment.max_doc:
        return None
    return SegmentRecord(segment, parses)


def tier(n_documents: int) -> int:
    """⌊log_FAN_IN(n)⌋ for n ≥ 1.

    >>> [tier(n) for n in (1, 3, 4, 15, 16, 511)]
    [0, 0, 1, 1, 2, 4]
    """
    t = 0
    while n_documents >= FAN_IN:
        n_documents //= FAN_IN
        t += 1
    return t


def locate(
    searcher: tantivy.Searcher, schema: tantivy.Schema, record: Callable[[int], SegmentRecord | None],
    n_segments: int, parse_ids: set[str],
) -> dict[tuple[int, str], int] | None:
    """Documents of ``parse_ids`` per (segment position in ``meta.json``, parse ID).

    Found through the index (a parse-ID term query: work in the documents of those parses only),
    not by reading every segment's record. Each hit's ``segment_ord`` is its segment's position
    in ``meta.json`` (tantivy opens segments in that order), which the segments' records must
    confirm document for document: None if any disagrees.
    """
    if not parse_ids:
        return {}
    query = tantivy.Query.term_set_query(schema, INDEX_FIELD_PARSE_ID, sorted(parse_ids))
    found: dict[tuple[int, str], int] = {}
    for addr in addresses(searcher, query):
        key = (addr.segment_ord, searcher.doc(addr)[INDEX_FIELD_PARSE_ID][0])
        found[key] = found.get(key, 0) + 1
    for (ordinal, pid), n in found.items():
        rec = record(ordinal) if ordinal < n_segments else None
        if rec is None or rec.parses.get(pid) != n:
            return None
    return found


def _batches(parse_ids: list[str], cap: int) -> list[tuple[int, int]]:
    """Row ranges ``[lo, hi)`` over ``parse_ids`` (grouped by parse) of at most ``cap`` rows each,
    about equal in size, cut between parses unless a parse alone exceeds ``cap``.

    >>> _batches(["a", "a", "b", "c", "c", "c"], 4)
    [(0, 3), (3, 6)]
    >>> _batches(["a"] * 5 + ["b"], 2)
    [(0, 1), (1, 3), (3, 5), (5, 6)]
    """
    n = len(parse_ids)
    if n == 0:
        return []
    target = -(-n // -(-n // cap))  # ceil(n / ceil(n / cap)): equal shares of the fewest batches
    runs, start = [], 0
    for i in range(1, n + 1):
        if i == n or parse_ids[i] != parse_ids[start]:
            runs.append((start, i))
            start = i
    out, lo = [], 0
    for s, e in runs:
        if e - s > cap:  # a parse larger than a segment: its own segments, cut evenly
            if s > lo:
                out.append((lo, s))
            pieces = -(-(e - s) // cap)
            bounds = [s + (e - s) * j // pieces for j in range(pieces + 1)]
            out += list(zip(bounds, bounds[1:]))
            lo = e
        elif s > lo and (s - lo >= target or e - lo > cap):
            out.append((lo, s))
            lo = s
    if n > lo:
        out.append((lo, n))
    return out


def plan_segments(
    directory: Path, searcher: tantivy.Searcher, schema: tantivy.Schema, bounded: bool, removed: set[str],
    n_added: int, cap: int,
) -> SegmentPlan:
    """Which segments of the generation in ``directory`` the next generation keeps, and which parses it indexes again.

    Left out: every segment that holds a removed parse; then the small segments (fewer than
    ``cap // 2`` documents) of the new documents' size tier when that tier
    would hold ``FAN_IN`` of them, repeatedly (:func:`tier`); then every segment that holds
    another part of a parse already left out (a parse larger than a segment spans several),
    until none does. The parses of left-out segments that are not removed are
    indexed again. The index confirms every segment record used (:func:`locate`); where one
    disagrees, or the generation predates segment records (not ``bounded``) or holds deleted documents, every
    live parse is indexed again (``rebuilt``).
    """
    listed = tantivy_meta.segments(tantivy_meta.load_meta(directory))
    loaded: dict[int, SegmentRecord | None] = {}

    def record(i: int) -> SegmentRecord | None:  # read only for the segments a change concerns
        if i not in loaded:
            loaded[i] = load_record(directory, listed[i])
        return loaded[i]

    def rebuild() -> SegmentPlan:
        return SegmentPlan(kept=[], reindex=live_parse_ids(searcher) - removed, left_out=len(listed), rebuilt=True)

    if not bounded or any(s.deletes for s in listed):
        # Written before segments were bounded (no segment records), or by a writer that
        # deleted in place (an older Fabric): its statistics may count deleted documents.
        return rebuild()
    left: set[int] = set()
    if removed:
        located = locate(searcher, schema, record, len(listed), removed)
        if located is None:  # records and index disagree (or tantivy's segment order changed): never guess
            return rebuild()
        left = {i for i, _ in located}
    pending = n_added + sum(listed[i].max_doc - sum(n for p, n in record(i).parses.items() if p in removed)
                            for i in left)
    # Small segments (from activations that add little) are consolidated by size tier, as a
    # log-structured merge does: a tier holding FAN_IN of them (counting the new one) becomes
    # one segment of the next tier, so a document is indexed again about log_FAN_IN(cap) times
    # in all, and at most FAN_IN - 1 small segments stay per tier.
    small = {i: seg.max_doc for i, seg in enumerate(listed) if i not in left and seg.max_doc < cap // 2}
    while 0 < pending < cap // 2:
        same = [i for i, n in small.items() if tier(n) == tier(pending)]
        if len(same) + 1 < FAN_IN:
            break
        for i in same:
            if record(i) is None:
                return rebuild()
            left.add(i)
            pending += small.pop(i)
    # Every document of a left-out segment must be a removed one or one indexed again, and a
    # parse is indexed again whole: the index itself must confirm the records, and segments
    # holding another part of such a parse (one larger than a segment) are left out as well.
    parts: set[str] = set()
    while left:
        parts = {p for i in left for p in record(i).parses} - removed
        located = locate(searcher, schema, record, len(listed), parts | removed)
        if located is None:
            return rebuild()
        holding = {i for i, _ in located}
        if holding <= left:
            accounted = sum(n for (i, _), n in located.items() if i in left)
            if accounted != sum(listed[i].max_doc for i in left):
                return rebuild()
            break
        left |= holding
    return SegmentPlan(kept=[seg for i, seg in enumerate(listed) if i not in left],
                       reindex=parts, left_out=len(left), rebuilt=False)


def build_segments(
    documents: pa.Table, build: Path, target: Path, cap: int, new_index: Callable[[Path], tantivy.Index],
    add: Callable[[tantivy.IndexWriter, pa.Table], None],
) -> tuple[list[tantivy_meta.SegmentMeta], int]:
    """Index ``documents`` as segments of at most ``cap`` into ``target``.

    Each batch is its own one-commit scratch index under ``build`` (one writer thread: one
    segment per commit, and no merge policy has anything to merge); its segment files move
    into ``target`` with a segment record. Documents are grouped by parse and a parse is cut
    only when it alone exceeds a segment. ``new_index(path)`` makes an empty
    index of the serving schema at ``path``, ``add(writer, batch)`` adds a batch's documents
    (:mod:`fabric_resources.lexical_index` owns what a document holds). Returns the segments and the highest opstamp.
    """
    out: list[tantivy_meta.SegmentMeta] = []
    opstamp = 0
    if documents.num_rows == 0:
        return out, opstamp
    build.mkdir()
    documents = documents.take(pc.sort_indices(documents, sort_keys=[("parse_id", "ascending")]))  # stable
    scratches = iter(range(1 << 62))

    def index_batch(batch: pa.Table) -> None:
        nonlocal opstamp
        scratch = build / f"{next(scratches):06d}"
        scratch.mkdir()
        index = new_index(scratch)
        writer = index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
        add(writer, batch)
        writer.commit()
        writer.wait_merging_threads()
        meta = tantivy_meta.load_meta(scratch)
        made = tantivy_meta.segments(meta)
        if len(made) != 1 or made[0].max_doc != batch.num_rows or made[0].deletes:
            # The writer flushed early (the batch outgrew its heap: very long documents): halve it.
            if batch.num_rows < 2:
                raise tantivy_meta.IndexFormatChanged(f"one document made segments {made}")
            shutil.rmtree(scratch)
            half = batch.num_rows // 2
            index_batch(batch.slice(0, half))
            index_batch(batch.slice(half))
            return
        for f in tantivy_meta.segment_files(scratch, made[0]):
            os.replace(f, target / f.name)
        parses: dict[str, int] = {}
        for pid in batch.column("parse_id").to_pylist():
            parses[pid] = parses.get(pid, 0) + 1
        record_path(target, made[0]).write_text(json.dumps({"documents": made[0].max_doc, "parses": parses}))
        out.append(made[0])
        opstamp = max(opstamp, meta["opstamp"])
        shutil.rmtree(scratch)

    for lo, hi in _batches(documents.column("parse_id").to_pylist(), cap):
        index_batch(documents.slice(lo, hi - lo))
    return out, opstamp


def live_parse_ids(searcher: tantivy.Searcher) -> set[str]:
    """Parse IDs with at least one live document in ``searcher``."""
    terms = searcher.terms_with_prefix(INDEX_FIELD_PARSE_ID, "", filter_query=tantivy.Query.all_query())
    return {t for t, n in terms if n > 0}


def addresses(searcher: tantivy.Searcher, query: tantivy.Query) -> list[tantivy.DocAddress]:
    """Addresses of every document ``query`` matches (tantivy's search needs a limit: count first)."""
    n = searcher.search(query, limit=1, count=True).count
    return [addr for _, addr in searcher.search(query, limit=n, count=False).hits] if n else []
