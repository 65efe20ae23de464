# Over 500 lines: the one writer of generation directories (build, extend, rebuild in place, remove), whose tantivy and meta.json details stay private to it.
"""The tantivy serving index: a word field (BM25) and a substring field.

Both fields index *folded* chunk text (``fabric_resources.text_folding``), so
case and diacritics fold identically at every term length and in every script.

* ``word``: tantivy's simple tokenizer + English Snowball stemmer; words keep
  their boundaries (``cat`` does not match ``concatenate``). Runs of scripts
  written without spaces are rewritten to their overlapping character bigrams
  first (:func:`word_field_text`), so a Japanese or Chinese question ranks
  passages by BM25 over shared bigrams — the CJK baseline of
  ../shared/eval/README.md; runs of Thai, Lao, Khmer and Myanmar, whose small alphabets put any
  bigram in most passages, to their words (:mod:`fabric_resources.word_segmentation`).
  This is a ranking signal; exact matching is the substring field's job.
* ``substring``: one positional token per character of scripts written without
  spaces (Han, Hiragana, Katakana, Hangul, Thai, Lao, Khmer, Myanmar) and whole
  words elsewhere. A query term of any length becomes an exact phrase query, so
  1- and 2-character CJK terms match exactly, with BM25 statistics, and there is
  no n-gram false positive (STACK_NOTES: ``ngram(2,3)`` puts grams at one position).
  Each punctuation or symbol character holds a position of its own (:data:`SEPARATOR`), so a
  term never matches across one (``京大`` is not in ``東京、大阪``, nor ``た本`` in ``した。本日``);
  whitespace holds none (a line break inside a Japanese word, as PDF text has, is no break), nor
  do the middle dots ``・･·``, which Japanese writes between the words of a name and queries omit
  (``ソニーピクチャーズ`` finds ``ソニー・ピクチャーズ``), nor does the Khmer coeng (U+17D2,
  which writes the next consonant as a subscript), which informal typing leaves out: ``ខមែរ`` finds
  ``ខ្មែរ`` and the other way round, highlighted over the coeng (:data:`UNCOUNTED`).
* ``word_length``: a fast field holding each document's word-field token count, so
  the word channel can re-score BM25 with other parameters than tantivy's fixed
  k1 1.2, b 0.75 (:attr:`OpenIndex.word_avgdl`).

Two kinds of document (the raw ``kind`` field, :func:`index_documents`): one per **chunk**, which
holds the substring field, and one per **context window** (a run of whole chunks, the
``context_windows`` projection), which holds the word field: the members' folded texts joined by
a blank line, its ``chunk_id`` the window ID and its members in the stored ``members`` field. The
word channel's BM25 statistics (N, document frequencies, avgdl) are therefore per window: a
128-token chunk holds part of a document, so no chunk accumulated the document's evidence, and
scoring windows raised the word channel's nDCG@10 by 0.03-0.04 on Cranfield, MED and CACM
(docs/ranking.md). A chunk that no window covers is its own window. tantivy's own BM25 counts
documents of both kinds in N and avgdl, so the word channel re-scores its candidates with the
window statistics (:attr:`OpenIndex.word_documents`, :attr:`OpenIndex.word_avgdl`).

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
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pyarrow as pa
import regex
import tantivy

from fabric_resources.index_documents import (  # noqa: F401 - re-exported: the index's document kinds
    DOCUMENT_COLUMNS,
    INDEX_FIELD_KIND,
    INDEX_FIELD_MEMBERS,
    KIND_CHUNK,
    KIND_WINDOW,
    WINDOW_JOINER,
    index_documents,
)
from fabric_resources import tantivy_meta
from fabric_resources.lexical_segments import (MAX_SEGMENT_DOCUMENTS, SegmentPlan, addresses, build_segments,
                                               load_record, plan_segments, record_path)
from fabric_resources.schema import (
    INDEX_FIELD_CHUNK_ID,
    INDEX_FIELD_PARSE_ID,
    INDEX_FIELD_SUBSTRING,
    INDEX_FIELD_WORD,
    INDEX_FIELD_WORD_LENGTH,
    SCHEMA_VERSION,
)
from fabric_resources.text_folding import FOLDING_VERSION, UNSPACED
from fabric_resources.word_segmentation import SEGMENTED_RUN, WORD_LISTS, segmented_words, word_tokens_line

_UNSPACED_RUN = re.compile(f"(?:{UNSPACED.pattern})+")


def word_field_text(folded: str) -> str:
    """``folded`` with every run of unspaced-script characters replaced by its bigrams, except that
    a run of Thai, Lao, Khmer or Myanmar is replaced by its words
    (:mod:`fabric_resources.word_segmentation`; each :func:`~fabric_resources.word_segmentation.word_token`,
    :func:`~fabric_resources.word_segmentation.word_tokens_line`).

    >>> word_field_text("tokens 認証トークン ok 猫")
    'tokens  認証 証ト トー ーク クン  ok  猫 '
    >>> word_field_text("เมืองเชียงใหม")
    ' เมือง เชียงใหม '
    """

    def bigrams(run: str) -> str:
        if len(run) == 1:
            return f" {run} "
        return " " + " ".join(run[i:i + 2] for i in range(len(run) - 1)) + " "

    def words(m: re.Match) -> str:
        run = m.group()
        if not SEGMENTED_RUN.search(run):
            return bigrams(run)
        out, at = [], 0
        for t in SEGMENTED_RUN.finditer(run):
            out.append(bigrams(run[at:t.start()]) if t.start() > at else "")
            out.append(" " + word_tokens_line(segmented_words(t.group())) + " ")
            at = t.end()
        out.append(bigrams(run[at:]) if at < len(run) else "")
        return "".join(out)

    return _UNSPACED_RUN.sub(words, folded)

UNSPACED_SCRIPTS = (
    r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"
    r"\x{30FC}\x{FF70}\x{3005}"  # prolonged sound marks and 々 are Common script but part of words
)
#: A punctuation or symbol character that holds a substring position (Rust regex class syntax; the
#: Python ``regex`` module reads it with its ``V1`` flag): every one but the middle dots.
SEPARATOR = r"[\p{P}\p{S}&&[^\x{30FB}\x{FF65}\x{B7}]]"
#: A character of those scripts that holds no substring position: the Khmer coeng, which people
#: typing informally leave out (the word field drops it too: ``word_segmentation.word_token``).
UNCOUNTED = r"\x{17D2}"
SUBSTRING_PATTERN = (f"[[{UNSPACED_SCRIPTS}]&&[^{UNCOUNTED}]]|{SEPARATOR}"
                     f"|[^\\s\\p{{P}}\\p{{S}}\\p{{C}}{UNSPACED_SCRIPTS}]+")


def _python_pattern(pattern: str) -> regex.Pattern:
    """A tantivy (Rust) ``regex`` pattern for Python's ``regex`` module: ``\\x{…}`` written as the
    character, read with ``V1`` (class intersection ``&&``, as Rust)."""
    return regex.compile(regex.sub(r"\\x\{([0-9A-Fa-f]+)\}", lambda m: chr(int(m.group(1), 16)), pattern), regex.V1)


#: :data:`SUBSTRING_PATTERN` and :data:`SEPARATOR` for Python code that must read text as the
#: substring tokenizer does (the highlighter, query analysis).
SUBSTRING_TOKEN_RE = _python_pattern(SUBSTRING_PATTERN)
SEPARATOR_RE = _python_pattern(SEPARATOR)
WORD_TOKENIZER = "fabric_word"
SUBSTRING_TOKENIZER = "fabric_substring"
#: Identity of the analyzers; stored with every lexical document and index generation.
ANALYZER_ID = (f"{FOLDING_VERSION}|word:simple+stem-en+cjk-bigram+{WORD_LISTS}"  # Thai words since stop 50, Lao 51, Khmer and Myanmar 52
               "|substring:regex-3")  # 2: separators hold a position; 3: the Khmer coeng holds none
#: Identity of the index's field set; a generation written with another layout is rebuilt, never extended.
INDEX_LAYOUT = "chunk_id,parse_id,word,substring,word_length:u64-fast,kind,members:window-word"
META_FILE = "fabric_index.json"
_GEN = re.compile(r"^gen-(\d{8})$")


class IndexUnusable(Exception):
    """The serving index cannot be used; ``reason`` is a stable fallback reason."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def word_analyzer(stopwords: bool = False) -> tantivy.TextAnalyzer:
    """The word field's analyzer; with ``stopwords`` tantivy's English stop-word filter (Lucene's 33
    words) runs before the stemmer — for query analysis only (:mod:`fabric_query.channels.lexical`):
    the index keeps every word, so phrases with stop words still match."""
    builder = (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(255))
        .filter(tantivy.Filter.lowercase())
    )
    if stopwords:
        builder = builder.filter(tantivy.Filter.stopword("english"))
    return builder.filter(tantivy.Filter.stemmer("english")).build()


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
    sb.add_text_field(INDEX_FIELD_KIND, stored=True, tokenizer_name="raw")
    sb.add_text_field(INDEX_FIELD_MEMBERS, stored=True, tokenizer_name="raw", index_option="basic")
    return sb.build()


def _register(index: tantivy.Index) -> None:
    # Custom tokenizers must be registered again after every Index.open (STACK_NOTES).
    index.register_tokenizer(WORD_TOKENIZER, word_analyzer())
    index.register_tokenizer(SUBSTRING_TOKENIZER, substring_analyzer())


def _empty_index(path: Path) -> tantivy.Index:
    index = tantivy.Index(index_schema(), path=str(path))
    _register(index)
    return index


@dataclass
class OpenIndex:
    """A searchable generation: the tantivy index, its schema and one searcher snapshot."""

    generation: str
    index: tantivy.Index
    schema: tantivy.Schema
    searcher: tantivy.Searcher

    def _count(self, kind: str) -> int:
        query = tantivy.Query.term_query(self.schema, INDEX_FIELD_KIND, kind)
        return self.searcher.search(query, limit=1, count=True).count

    @cached_property
    def _word_doc_freqs(self) -> dict[str, int]:
        return {}

    @cached_property
    def memo(self) -> dict:
        """A reader's memo for what it derives from this generation (name → its own dict): a
        generation never changes, so what it derives stays true while the generation is open."""
        return {}

    def word_doc_freq(self, term: str) -> int:
        """Window documents holding ``term`` in the word field (BM25's n_t), kept per generation:
        a generation never changes, and feedback asks for hundreds of terms per query."""
        cache = self._word_doc_freqs
        df = cache.get(term)
        if df is None:
            if len(cache) >= 1 << 18:  # bound a long-lived server's memory: start again
                cache.clear()
            df = cache[term] = self.searcher.doc_freq(INDEX_FIELD_WORD, term)
        return df

    @cached_property
    def word_documents(self) -> int:
        """Live window documents: BM25's N for the word field."""
        return self._count(KIND_WINDOW)

    @cached_property
    def chunk_documents(self) -> int:
        """Live chunk documents (one per chunk the generation indexes)."""
        return self._count(KIND_CHUNK)

    @cached_property
    def word_tokens_total(self) -> int:
        """Σ of the ``word_length`` fast field over live documents (chunk documents hold 0)."""
        if not self.searcher.num_docs:
            return 0
        agg = self.searcher.aggregate(tantivy.Query.all_query(), {"total": {"sum": {"field": INDEX_FIELD_WORD_LENGTH}}})
        return int(agg["total"]["value"] or 0)

    @cached_property
    def word_avgdl(self) -> float:
        """Mean word-field tokens per live window document (BM25's avgdl); 0.0 for an empty index.

        Summed over the ``word_length`` fast field of live documents, so deleted
        documents do not count (tantivy's own avgdl counts them until a merge, and
        counts chunk documents, which hold no word field).
        """
        n = self.word_documents
        return self.word_tokens_total / n if n else 0.0

    @cached_property
    def chunk_word_avgdl(self) -> float:
        """Mean word-field tokens per live chunk: every chunk is a member of exactly one window
        and a window's tokens are its members' tokens, so this is the window total over chunks."""
        n = self.chunk_documents
        return self.word_tokens_total / n if n else 0.0


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
        ``FAN_IN / 2`` segments' worth, amortised a few documents per added one: :func:`fabric_resources.lexical_segments.plan_segments`);
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
        # Plain lexical documents become index documents here (each chunk its own window); rows of
        # index_documents (chunk and window documents) pass unchanged. The plan sizes segments in
        # index documents, so it counts these.
        pending = index_documents(add_documents).select(DOCUMENT_COLUMNS)
        plan = self._plan(previous, set(remove_parse_ids), pending.num_rows)
        if plan.reindex and documents_of is None:
            raise ValueError("documents of parses that stay must be added again; pass documents_of")
        if plan.reindex:
            pending = pa.concat_tables([index_documents(documents_of(sorted(plan.reindex))).select(DOCUMENT_COLUMNS),
                                        pending])
        try:
            tmp.mkdir()
            # An empty index of this schema: tantivy writes the meta.json (schema, settings) the new one extends.
            tantivy.Index(index_schema(), path=str(tmp))
            template = tantivy_meta.load_meta(tmp)
            listed: list[tantivy_meta.SegmentMeta] = []
            names = ([e.name for e in os.scandir(self.root / previous) if e.is_file(follow_symlinks=False)]
                     if plan.kept else [])
            for segment in plan.kept:
                record = record_path(self.root / previous, segment)
                # Segment files are immutable and no writer ever opens a generation. A segment whose
                # record went missing is kept without one: a later change that touches it rebuilds.
                files = tantivy_meta.segment_files(self.root / previous, segment, names)
                for f in [*files, record] if record.exists() else files:
                    os.link(f, tmp / f.name)
                listed.append(segment)
            built, opstamp = build_segments(pending, build, tmp, self.max_segment_documents, _empty_index, add_to_writer)
            listed += built
            tantivy_meta.write_meta(tmp, template, listed, max(opstamp, template["opstamp"]) + 1)
            _check_assembled(tmp, listed)
            (tmp / META_FILE).write_text(
                json.dumps({"schema_version": SCHEMA_VERSION, "analyzer": ANALYZER_ID, "layout": INDEX_LAYOUT,
                            "generation": name, "max_segment_documents": self.max_segment_documents})
            )
            os.replace(tmp, target)
        finally:
            remove_tree(build)
            remove_tree(tmp)
        self.last_write = plan.summary(pending.num_rows)
        return name

    def build_fresh(self, documents: pa.Table) -> str:
        """A new generation built from ``documents`` only (repair, first build)."""
        return self.write_generation(None, (), documents)

    def rebuild_generation(self, name: str, documents: pa.Table) -> str:
        """Rebuild generation ``name`` in place from ``documents`` alone (a snapshot restore whose
        index files were damaged: the release names the generation, so it keeps its name). Written
        beside it and swapped in by rename; returns ``name``.

        Raises
        ------
        ValueError
            If ``name`` is not a generation name (``gen-NNNNNNNN``).
        """
        if not _GEN.match(name):
            raise ValueError(f"not a generation name: {name!r}")
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{name}.rebuild.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        index = tantivy.Index(index_schema(), path=str(tmp))
        _register(index)
        writer = index.writer(heap_size=64_000_000, num_threads=1)
        add_to_writer(writer, documents)
        writer.commit()
        writer.wait_merging_threads()
        (tmp / META_FILE).write_text(
            json.dumps({"schema_version": SCHEMA_VERSION, "analyzer": ANALYZER_ID, "layout": INDEX_LAYOUT,
                        "generation": name})
        )
        old = self.root / f".{name}.old"
        shutil.rmtree(old, ignore_errors=True)
        if (self.root / name).exists():
            os.replace(self.root / name, old)
        os.replace(tmp, self.root / name)
        shutil.rmtree(old, ignore_errors=True)
        return name

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
        generation instead, :func:`~fabric_resources.lexical_segments.plan_segments`), but it costs that rebuild; reads every document.
        """
        directory = self.root / generation
        listed = tantivy_meta.segments(tantivy_meta.load_meta(directory))
        index = tantivy.Index.open(str(directory))
        _register(index)
        searcher = index.searcher()
        actual: list[dict[str, int]] = [{} for _ in listed]
        for addr in addresses(searcher, tantivy.Query.all_query()):
            held = actual[addr.segment_ord]
            pid = searcher.doc(addr)[INDEX_FIELD_PARSE_ID][0]
            held[pid] = held.get(pid, 0) + 1
        problems = []
        for seg, held in zip(listed, actual):
            record = load_record(directory, seg)
            if record is None:
                problems.append(f"{seg.segment_id}: no segment record")
            elif record.parses != held:
                problems.append(f"{seg.segment_id}: record lists {len(record.parses)} parses, the segment holds "
                                f"{len(held)} ({len(set(record.parses) ^ set(held))} differ)")
        return problems

    def _plan(self, previous: str | None, removed: set[str], n_added: int) -> SegmentPlan:
        if previous is None:
            return SegmentPlan(kept=[], reindex=set(), left_out=0, rebuilt=False)
        directory = self.root / previous
        index = tantivy.Index.open(str(directory))
        _register(index)
        # Generations written before segments were bounded have no segment records to trust.
        bounded = "max_segment_documents" in json.loads((directory / META_FILE).read_text())
        return plan_segments(directory, index.searcher(), index_schema(), bounded, removed, n_added,
                             self.max_segment_documents)

def remove_tree(path: Path, attempts: int = 5) -> None:
    """Remove ``path`` and all below it, again while something writes into it as it goes (a
    failed generation's scratch: seen left behind once under load, a file created mid-removal)."""
    for attempt in range(attempts):
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            return
        time.sleep(0.05 * (attempt + 1))


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
    segments, docs, deleted = searcher.num_segments, searcher.num_docs, deleted_documents(searcher)
    # Closed before raising: the traceback would keep the index open (its reader's threads
    # touching the directory) while the caller removes it.
    del searcher, index
    if segments != len(listed) or docs != want or deleted:
        raise tantivy_meta.IndexFormatChanged(
            f"assembled {directory.name}: tantivy sees {segments} segments, "
            f"{docs} documents; meta.json lists {len(listed)}, {want}")


def deleted_documents(searcher: tantivy.Searcher) -> int:
    """Documents deleted but still held by a segment, so still counted in BM25's N, document
    frequencies and average field length (tantivy counts them until their segment is merged).

    Every document has exactly one parse-ID term, and the term dictionary's counts include
    deleted documents, so their sum is tantivy's N; ``num_docs`` counts live documents only.
    """
    terms = searcher.terms_with_prefix(INDEX_FIELD_PARSE_ID, "")
    return sum(int(n) for _, n in terms) - searcher.num_docs


def _is_current(meta: dict) -> bool:
    return (meta.get("schema_version"), meta.get("analyzer"), meta.get("layout")) == (
        SCHEMA_VERSION, ANALYZER_ID, INDEX_LAYOUT)


def add_to_writer(writer: tantivy.IndexWriter, documents: pa.Table) -> None:
    """Add :func:`index_documents` of ``documents`` (plain lexical documents: each chunk its own window)."""
    cols = index_documents(documents).to_pydict()
    analyzer = word_analyzer()
    for chunk_id, parse_id, text, kind, members in zip(cols["chunk_id"], cols["parse_id"], cols["folded_text"],
                                                       cols["kind"], cols["members"]):
        doc = tantivy.Document(**{INDEX_FIELD_CHUNK_ID: chunk_id, INDEX_FIELD_PARSE_ID: parse_id,
                                  INDEX_FIELD_KIND: kind})
        length = 0
        if kind == KIND_WINDOW:
            word = word_field_text(text)
            doc.add_text(INDEX_FIELD_WORD, word)
            for m in members:
                doc.add_text(INDEX_FIELD_MEMBERS, m)
            length = len(analyzer.analyze(word))
        else:
            doc.add_text(INDEX_FIELD_SUBSTRING, text)
        # add_unsigned: a Python int passed as a keyword becomes i64, which a u64 column rejects.
        doc.add_unsigned(INDEX_FIELD_WORD_LENGTH, length)
        writer.add_document(doc)
