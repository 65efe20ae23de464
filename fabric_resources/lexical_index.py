"""The tantivy serving index: a word field (BM25) and a substring field.

Both fields index *folded* chunk text (``fabric_resources.text_folding``), so
case and diacritics fold identically at every term length and in every script.

* ``word``: tantivy's simple tokenizer + English Snowball stemmer; words keep
  their boundaries (``cat`` does not match ``concatenate``). Runs of scripts
  written without spaces are rewritten to their overlapping character bigrams
  first (:func:`word_field_text`), so a Japanese or Chinese question ranks
  passages by BM25 over shared bigrams — the CJK baseline of
  ../shared/eval/README.md. This is a ranking signal; exact matching is the
  substring field's job.
* ``substring``: one positional token per character of scripts written without
  spaces (Han, Hiragana, Katakana, Hangul, Thai, Lao, Khmer, Myanmar) and whole
  words elsewhere. A query term of any length becomes an exact phrase query, so
  1- and 2-character CJK terms match exactly, with BM25 statistics, and there is
  no n-gram false positive (STACK_NOTES: ``ngram(2,3)`` puts grams at one position).
* ``word_length``: a fast field holding each document's word-field token count, so
  the word channel can re-score BM25 with other parameters than tantivy's fixed
  k1 1.2, b 0.75 (:attr:`OpenIndex.word_avgdl`).

Generations: each activation writes a new generation directory. Its segments are
those of the previous generation that lost no document (hard links to immutable
files) plus new segments built from the change; Fabric writes tantivy's
``meta.json`` listing them itself (:mod:`fabric_resources.tantivy_meta`), so no
tantivy writer ever opens a serving generation and nothing merges or deletes in
it. A segment that would lose a document is left out and its other documents are
indexed again, so no deleted document counts in BM25's N, document frequencies or
average field length. Segments hold at most ``max_segment_documents`` documents,
which bounds that rewrite: an activation costs the size of its change, not of the
index (:meth:`LexicalIndex.write_generation`). Older generations stay untouched,
so a query that pinned a release keeps reading exactly the index that release
names.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import tantivy

from fabric_resources import tantivy_meta

from fabric_resources.schema import (
    INDEX_FIELD_CHUNK_ID,
    INDEX_FIELD_PARSE_ID,
    INDEX_FIELD_SUBSTRING,
    INDEX_FIELD_WORD,
    INDEX_FIELD_WORD_LENGTH,
    SCHEMA_VERSION,
)
from fabric_resources.text_folding import FOLDING_VERSION, UNSPACED

_UNSPACED_RUN = re.compile(f"(?:{UNSPACED.pattern})+")


def word_field_text(folded: str) -> str:
    """``folded`` with every run of unspaced-script characters replaced by its bigrams.

    >>> word_field_text("tokens 認証トークン ok 猫")
    'tokens  認証 証ト トー ーク クン  ok  猫 '
    """

    def bigrams(m: re.Match) -> str:
        run = m.group()
        if len(run) == 1:
            return f" {run} "
        return " " + " ".join(run[i:i + 2] for i in range(len(run) - 1)) + " "

    return _UNSPACED_RUN.sub(bigrams, folded)

UNSPACED_SCRIPTS = (
    r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"
    r"\x{30FC}\x{FF70}\x{3005}"  # prolonged sound marks and 々 are Common script but part of words
)
SUBSTRING_PATTERN = f"[{UNSPACED_SCRIPTS}]|[^\\s\\p{{P}}\\p{{S}}\\p{{C}}{UNSPACED_SCRIPTS}]+"
WORD_TOKENIZER = "fabric_word"
SUBSTRING_TOKENIZER = "fabric_substring"
#: Identity of the analyzers; stored with every lexical document and index generation.
ANALYZER_ID = f"{FOLDING_VERSION}|word:simple+stem-en+cjk-bigram|substring:regex-1"
#: Identity of the index's field set; a generation written with another layout is rebuilt, never extended.
INDEX_LAYOUT = "chunk_id,parse_id,word,substring,word_length:u64-fast"
META_FILE = "fabric_index.json"
_GEN = re.compile(r"^gen-(\d{8})$")


class IndexUnusable(Exception):
    """The serving index cannot be used; ``reason`` is a stable fallback reason."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def word_analyzer() -> tantivy.TextAnalyzer:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(255))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def substring_analyzer() -> tantivy.TextAnalyzer:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(SUBSTRING_PATTERN))
        .filter(tantivy.Filter.lowercase())
        .build()
    )


def index_schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field(INDEX_FIELD_CHUNK_ID, stored=True, tokenizer_name="raw")
    sb.add_text_field(INDEX_FIELD_PARSE_ID, stored=True, tokenizer_name="raw")
    sb.add_text_field(INDEX_FIELD_WORD, stored=False, tokenizer_name=WORD_TOKENIZER, index_option="position")
    sb.add_text_field(
        INDEX_FIELD_SUBSTRING, stored=False, tokenizer_name=SUBSTRING_TOKENIZER, index_option="position"
    )
    sb.add_unsigned_field(INDEX_FIELD_WORD_LENGTH, fast=True)
    return sb.build()


def _register(index: tantivy.Index) -> None:
    # Custom tokenizers must be registered again after every Index.open (STACK_NOTES).
    index.register_tokenizer(WORD_TOKENIZER, word_analyzer())
    index.register_tokenizer(SUBSTRING_TOKENIZER, substring_analyzer())


@dataclass
class OpenIndex:
    """A searchable generation: the tantivy index, its schema and one searcher snapshot."""

    generation: str
    index: tantivy.Index
    schema: tantivy.Schema
    searcher: tantivy.Searcher

    @cached_property
    def word_avgdl(self) -> float:
        """Mean word-field tokens per live document (BM25's avgdl); 0.0 for an empty index.

        Summed over the ``word_length`` fast field of live documents, so deleted
        documents do not count (tantivy's own avgdl counts them until a merge).
        """
        n = self.searcher.num_docs
        if not n:
            return 0.0
        agg = self.searcher.aggregate(tantivy.Query.all_query(), {"total": {"sum": {"field": INDEX_FIELD_WORD_LENGTH}}})
        return float(agg["total"]["value"] or 0.0) / n


class LexicalIndex:
    """Generations of the serving index under ``root``."""

    def __init__(self, root: Path, max_segment_documents: int | None = None) -> None:
        self.root = Path(root)
        self.max_segment_documents = max_segment_documents or MAX_SEGMENT_DOCUMENTS
        #: What the last :meth:`write_generation` did (segments kept and left out, documents indexed).
        self.last_write: dict | None = None

    def generations(self) -> list[str]:
        if not self.root.exists():
            return []
        return sorted(p.name for p in self.root.iterdir() if _GEN.match(p.name) and (p / META_FILE).exists())

    def is_current(self, generation: str) -> bool:
        """True when ``generation`` exists and was written with this schema, analyzers and field layout."""
        try:
            return _is_current(json.loads((self.root / generation / META_FILE).read_text()))
        except (OSError, ValueError):
            return False

    def open(self, generation: str) -> OpenIndex:
        """Open a generation for reading.

        Raises
        ------
        IndexUnusable
            ``index-missing`` (no such directory), ``index-schema-mismatch``
            (written by another schema or analyzer version) or
            ``index-unreadable`` (tantivy cannot open it).
        """
        path = self.root / generation
        meta_path = path / META_FILE
        if not path.is_dir() or not meta_path.exists():
            raise IndexUnusable("index-missing", str(path))
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError) as exc:
            raise IndexUnusable("index-unreadable", f"{meta_path}: {exc}") from exc
        if not _is_current(meta):
            raise IndexUnusable(
                "index-schema-mismatch",
                f"index has schema {meta.get('schema_version')}/{meta.get('analyzer')}/{meta.get('layout')}, "
                f"reader expects {SCHEMA_VERSION}/{ANALYZER_ID}/{INDEX_LAYOUT}; run `fabric lexical-repair`",
            )
        try:
            index = tantivy.Index.open(str(path))
            _register(index)
            schema = index_schema()
            return OpenIndex(generation, index, schema, index.searcher())
        except BaseException as exc:  # corrupt segments make tantivy panic (PanicException is a BaseException)
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            raise IndexUnusable("index-unreadable", f"{path}: {exc}") from exc

    def write_generation(
        self,
        previous: str | None,
        remove_parse_ids: Iterable[str],
        add_documents: pa.Table,
        documents_of: Callable[[list[str]], pa.Table] | None = None,
    ) -> str:
        """Make a new generation = ``previous`` − ``remove_parse_ids`` + ``add_documents``.

        ``add_documents`` and what ``documents_of(parse_ids)`` returns have the columns of
        ``schema.LEXICAL_DOCUMENTS``; ``documents_of`` gives the documents of parses that stay.
        Returns the new generation's name. ``previous`` is never modified.

        tantivy keeps a deleted document in its segment's BM25 statistics (N, document
        frequencies, field lengths) until that segment is merged, Python cannot ask for a merge,
        and a merge would not be exact either (it re-sums field lengths from tantivy's lossy
        one-byte field norms). So nothing is ever deleted in a generation: the new one lists the
        previous generation's segments that hold no removed parse (hard links, unchanged) and
        new segments holding ``add_documents`` plus the other documents of the segments left out
        (read again through ``documents_of``). It ranks exactly like an index of its live
        documents alone (:func:`deleted_documents` is 0; scores are equal because tantivy's BM25
        sums N, df and token counts over segments and encodes each document's length alone).

        Cost: the added documents, plus at most ``max_segment_documents`` per segment that holds
        a removed parse, plus small segments consolidated by size tier (at most about
        ``FAN_IN / 2`` segments' worth, amortised a few documents per added one: :meth:`_plan`);
        metadata is read for the touched segments only. It does
        not grow with the index. A ``previous`` that already holds deleted documents, or was
        written before segments were bounded (no segment records), is rebuilt from
        ``documents_of`` once.

        Raises
        ------
        ValueError
            If ``previous`` has another schema or layout, or documents must be added again and
            ``documents_of`` is None.
        IndexFormatChanged
            If tantivy's ``meta.json`` has another shape than :mod:`fabric_resources.tantivy_meta`
            writes.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        if previous is not None and not self.is_current(previous):
            raise ValueError(f"generation {previous} has another schema or layout; build a fresh one instead")
        # Number above every gen-* directory, complete or not: a killed writer may leave one behind.
        taken = [int(m.group(1)) for p in self.root.iterdir() if (m := _GEN.match(p.name))]
        name = f"gen-{max(taken, default=0) + 1:08d}"
        target, tmp, build = self.root / name, self.root / f".{name}.tmp", self.root / f".{name}.build"
        for scratch in (tmp, build):
            shutil.rmtree(scratch, ignore_errors=True)
        plan = self._plan(previous, set(remove_parse_ids), add_documents.num_rows)
        if plan.reindex and documents_of is None:
            raise ValueError("documents of parses that stay must be added again; pass documents_of")
        pending = add_documents.select(_DOC_COLUMNS)
        if plan.reindex:
            pending = pa.concat_tables([documents_of(sorted(plan.reindex)).select(_DOC_COLUMNS), pending])
        try:
            tmp.mkdir()
            # An empty index of this schema: tantivy writes the meta.json (schema, settings) the new one extends.
            tantivy.Index(index_schema(), path=str(tmp))
            template = tantivy_meta.load_meta(tmp)
            listed: list[tantivy_meta.SegmentMeta] = []
            for segment in plan.kept:
                record = _record_path(self.root / previous, segment)
                # Segment files are immutable and no writer ever opens a generation. A segment whose
                # record went missing is kept without one: a later change that touches it rebuilds.
                files = tantivy_meta.segment_files(self.root / previous, segment)
                for f in [*files, record] if record.exists() else files:
                    os.link(f, tmp / f.name)
                listed.append(segment)
            built, opstamp = self._build_segments(pending, build, tmp)
            listed += built
            tantivy_meta.write_meta(tmp, template, listed, max(opstamp, template["opstamp"]) + 1)
            _check_assembled(tmp, listed)
            (tmp / META_FILE).write_text(
                json.dumps({"schema_version": SCHEMA_VERSION, "analyzer": ANALYZER_ID, "layout": INDEX_LAYOUT,
                            "generation": name, "max_segment_documents": self.max_segment_documents})
            )
            os.replace(tmp, target)
        finally:
            shutil.rmtree(build, ignore_errors=True)
            shutil.rmtree(tmp, ignore_errors=True)
        self.last_write = plan.summary(pending.num_rows)
        return name

    def build_fresh(self, documents: pa.Table) -> str:
        """A new generation built from ``documents`` only (repair, first build)."""
        return self.write_generation(None, (), documents)

    def remove_generations(self, keep: Iterable[str]) -> list[str]:
        """Delete generations not in ``keep``; return what was removed."""
        keep = set(keep)
        removed = [g for g in self.generations() if g not in keep]
        for g in removed:
            shutil.rmtree(self.root / g, ignore_errors=True)
        return removed

    def segment_record_problems(self, generation: str) -> list[str]:
        """Segments of ``generation`` whose record (parse ID → documents) is missing or disagrees
        with the documents tantivy holds there; empty when every record is right.

        A wrong record never changes a ranking (a change that would use it rebuilds the
        generation instead, :meth:`_plan`), but it costs that rebuild; reads every document.
        """
        directory = self.root / generation
        listed = tantivy_meta.segments(tantivy_meta.load_meta(directory))
        index = tantivy.Index.open(str(directory))
        _register(index)
        searcher = index.searcher()
        actual: list[dict[str, int]] = [{} for _ in listed]
        for addr in _addresses(searcher, tantivy.Query.all_query()):
            held = actual[addr.segment_ord]
            pid = searcher.doc(addr)[INDEX_FIELD_PARSE_ID][0]
            held[pid] = held.get(pid, 0) + 1
        problems = []
        for seg, held in zip(listed, actual):
            record = _load_record(directory, seg)
            if record is None:
                problems.append(f"{seg.segment_id}: no segment record")
            elif record.parses != held:
                problems.append(f"{seg.segment_id}: record lists {len(record.parses)} parses, the segment holds "
                                f"{len(held)} ({len(set(record.parses) ^ set(held))} differ)")
        return problems

    def _plan(self, previous: str | None, removed: set[str], n_added: int) -> _Plan:
        """Which of ``previous``'s segments the next generation keeps, and which parses it indexes again.

        Left out: every segment that holds a removed parse; then the small segments (fewer than
        ``max_segment_documents // 2`` documents) of the new documents' size tier when that tier
        would hold ``FAN_IN`` of them, repeatedly (:func:`_tier`); then every segment that holds
        another part of a parse already left out (a parse larger than a segment spans several),
        until none does. The parses of left-out segments that are not removed are
        indexed again. The index confirms every segment record used (:func:`_locate`); where one
        disagrees, or ``previous`` predates segment records or holds deleted documents, every
        live parse is indexed again (``rebuilt``).
        """
        if previous is None:
            return _Plan(kept=[], reindex=set(), left_out=0, rebuilt=False)
        directory = self.root / previous
        listed = tantivy_meta.segments(tantivy_meta.load_meta(directory))
        index = tantivy.Index.open(str(directory))
        _register(index)
        searcher = index.searcher()
        loaded: dict[int, SegmentRecord | None] = {}

        def record(i: int) -> SegmentRecord | None:  # read only for the segments a change concerns
            if i not in loaded:
                loaded[i] = _load_record(directory, listed[i])
            return loaded[i]

        def rebuild() -> _Plan:
            return _Plan(kept=[], reindex=_live_parse_ids(searcher) - removed, left_out=len(listed), rebuilt=True)

        fabric_meta = json.loads((directory / META_FILE).read_text())
        if "max_segment_documents" not in fabric_meta or any(s.deletes for s in listed):
            # Written before segments were bounded (no segment records), or by a writer that
            # deleted in place (an older Fabric): its statistics may count deleted documents.
            return rebuild()
        cap = self.max_segment_documents
        left: set[int] = set()
        if removed:
            located = _locate(searcher, record, len(listed), removed)
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
            same = [i for i, n in small.items() if _tier(n) == _tier(pending)]
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
            located = _locate(searcher, record, len(listed), parts | removed)
            if located is None:
                return rebuild()
            holding = {i for i, _ in located}
            if holding <= left:
                accounted = sum(n for (i, _), n in located.items() if i in left)
                if accounted != sum(listed[i].max_doc for i in left):
                    return rebuild()
                break
            left |= holding
        return _Plan(kept=[seg for i, seg in enumerate(listed) if i not in left],
                     reindex=parts, left_out=len(left), rebuilt=False)

    def _build_segments(
        self, documents: pa.Table, build: Path, target: Path
    ) -> tuple[list[tantivy_meta.SegmentMeta], int]:
        """Index ``documents`` as segments of at most ``max_segment_documents`` into ``target``.

        Each batch is its own one-commit scratch index under ``build`` (one writer thread: one
        segment per commit, and no merge policy has anything to merge); its segment files move
        into ``target`` with a segment record. Documents are grouped by parse and a parse is cut
        only when it alone exceeds a segment. Returns the segments and the highest opstamp.
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
            index = tantivy.Index(index_schema(), path=str(scratch))
            _register(index)
            writer = index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
            add_to_writer(writer, batch)
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
            _record_path(target, made[0]).write_text(json.dumps({"documents": made[0].max_doc, "parses": parses}))
            out.append(made[0])
            opstamp = max(opstamp, meta["opstamp"])
            shutil.rmtree(scratch)

        for lo, hi in _batches(documents.column("parse_id").to_pylist(), self.max_segment_documents):
            index_batch(documents.slice(lo, hi - lo))
        return out, opstamp


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
_DOC_COLUMNS = ["parse_id", "chunk_id", "folded_text"]


@dataclass(frozen=True)
class SegmentRecord:
    """What Fabric knows of a segment: tantivy's entry and the parses it holds (parse ID → documents)."""

    segment: tantivy_meta.SegmentMeta
    parses: dict[str, int]

    @property
    def documents(self) -> int:
        return self.segment.max_doc


@dataclass(frozen=True)
class _Plan:
    kept: list[tantivy_meta.SegmentMeta]
    reindex: set[str]
    left_out: int
    rebuilt: bool

    def summary(self, indexed: int) -> dict:
        return {"segments_kept": len(self.kept), "segments_left_out": self.left_out,
                "documents_indexed": indexed, "rebuilt": self.rebuilt}


def _record_path(directory: Path, segment: tantivy_meta.SegmentMeta) -> Path:
    return directory / f"{RECORD_PREFIX}{segment.file_prefix}json"


def _load_record(directory: Path, segment: tantivy_meta.SegmentMeta) -> SegmentRecord | None:
    """The segment's record, or None when it has none or one that does not add up to its documents."""
    try:
        data = json.loads(_record_path(directory, segment).read_text())
        parses = {str(p): int(n) for p, n in data["parses"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if data.get("documents") != segment.max_doc or sum(parses.values()) != segment.max_doc:
        return None
    return SegmentRecord(segment, parses)


def _tier(n_documents: int) -> int:
    """⌊log_FAN_IN(n)⌋ for n ≥ 1.

    >>> [_tier(n) for n in (1, 3, 4, 15, 16, 511)]
    [0, 0, 1, 1, 2, 4]
    """
    tier = 0
    while n_documents >= FAN_IN:
        n_documents //= FAN_IN
        tier += 1
    return tier


def _locate(
    searcher: tantivy.Searcher, record: Callable[[int], SegmentRecord | None], n_segments: int, parse_ids: set[str]
) -> dict[tuple[int, str], int] | None:
    """Documents of ``parse_ids`` per (segment position in ``meta.json``, parse ID).

    Found through the index (a parse-ID term query: work in the documents of those parses only),
    not by reading every segment's record. Each hit's ``segment_ord`` is its segment's position
    in ``meta.json`` (tantivy opens segments in that order), which the segments' records must
    confirm document for document: None if any disagrees.
    """
    if not parse_ids:
        return {}
    query = tantivy.Query.term_set_query(index_schema(), INDEX_FIELD_PARSE_ID, sorted(parse_ids))
    found: dict[tuple[int, str], int] = {}
    for addr in _addresses(searcher, query):
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


def _check_assembled(directory: Path, listed: list[tantivy_meta.SegmentMeta]) -> None:
    """tantivy opens the assembled generation and counts what its ``meta.json`` lists.

    Raises
    ------
    IndexFormatChanged
        If it does not (tantivy reads the hand-written ``meta.json`` otherwise than written).
    """
    index = tantivy.Index.open(str(directory))
    _register(index)
    searcher = index.searcher()
    want = sum(s.max_doc for s in listed)
    if searcher.num_segments != len(listed) or searcher.num_docs != want or deleted_documents(searcher):
        raise IndexFormatChanged(f"assembled {directory.name}: tantivy sees {searcher.num_segments} segments, "
                                 f"{searcher.num_docs} documents; meta.json lists {len(listed)}, {want}")


def deleted_documents(searcher: tantivy.Searcher) -> int:
    """Documents deleted but still held by a segment, so still counted in BM25's N, document
    frequencies and average field length (tantivy counts them until their segment is merged).

    Every document has exactly one parse-ID term, and the term dictionary's counts include
    deleted documents, so their sum is tantivy's N; ``num_docs`` counts live documents only.
    """
    terms = searcher.terms_with_prefix(INDEX_FIELD_PARSE_ID, "")
    return sum(int(n) for _, n in terms) - searcher.num_docs


def _live_parse_ids(searcher: tantivy.Searcher) -> set[str]:
    terms = searcher.terms_with_prefix(INDEX_FIELD_PARSE_ID, "", filter_query=tantivy.Query.all_query())
    return {t for t, n in terms if n > 0}


def _addresses(searcher: tantivy.Searcher, query: tantivy.Query) -> list[tantivy.DocAddress]:
    n = searcher.search(query, limit=1, count=True).count
    return [addr for _, addr in searcher.search(query, limit=n, count=False).hits] if n else []


def _is_current(meta: dict) -> bool:
    return (meta.get("schema_version"), meta.get("analyzer"), meta.get("layout")) == (
        SCHEMA_VERSION, ANALYZER_ID, INDEX_LAYOUT)


def add_to_writer(writer: tantivy.IndexWriter, documents: pa.Table) -> None:
    cols = documents.select(["chunk_id", "parse_id", "folded_text"]).to_pydict()
    analyzer = word_analyzer()
    for chunk_id, parse_id, text in zip(cols["chunk_id"], cols["parse_id"], cols["folded_text"]):
        word = word_field_text(text)
        doc = tantivy.Document(
            **{
                INDEX_FIELD_CHUNK_ID: chunk_id,
                INDEX_FIELD_PARSE_ID: parse_id,
                INDEX_FIELD_WORD: word,
                INDEX_FIELD_SUBSTRING: text,
            }
        )
        # add_unsigned: a Python int passed as a keyword becomes i64, which a u64 column rejects.
        doc.add_unsigned(INDEX_FIELD_WORD_LENGTH, len(analyzer.analyze(word)))
        writer.add_document(doc)
