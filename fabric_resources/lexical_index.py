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

Generations: each activation writes a new generation directory made of
hard links to the previous generation's immutable segment files, then deletes
and adds documents there. Older generations stay untouched, so a query that
pinned a release keeps reading exactly the index that release names. A segment
that loses a document is rewritten whole, so no deleted document is left to
count in BM25 statistics (:meth:`LexicalIndex.write_generation`).
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
import tantivy

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

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

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
        frequencies, field lengths) until that segment is merged, and Python cannot ask for a
        merge. So every segment that holds a removed document is rewritten whole: all its
        documents are deleted, which makes tantivy drop the segment at commit, and those of the
        parses that stay are added again from ``documents_of``. A ``previous`` that already holds
        deleted documents is rebuilt from ``documents_of``. Either way the new generation ranks
        exactly like an index of its live documents alone (:func:`deleted_documents` is 0). The
        cost follows the documents of the rewritten segments: the whole index when it is one
        segment.

        Raises
        ------
        ValueError
            If ``previous`` has another schema or layout, or documents must be added again and
            ``documents_of`` is None.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        # Number above every gen-* directory, complete or not: a killed writer may leave one behind.
        taken = [int(m.group(1)) for p in self.root.iterdir() if (m := _GEN.match(p.name))]
        number = max(taken, default=0) + 1
        name = f"gen-{number:08d}"
        target = self.root / name
        tmp = self.root / f".{name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        if previous is not None and not self.is_current(previous):
            raise ValueError(f"generation {previous} has another schema or layout; build a fresh one instead")
        removed = set(remove_parse_ids)
        carried: set[str] = set()
        reuse = previous is not None
        if reuse:
            for f in (self.root / previous).iterdir():
                if f.is_file() and f.name not in (META_FILE, ".tantivy-writer.lock", ".tantivy-meta.lock"):
                    os.link(f, tmp / f.name)  # segment files are immutable; tantivy replaces meta by rename
            index = tantivy.Index.open(str(tmp))
            _register(index)
            searcher = index.searcher()
            if deleted_documents(searcher):
                live = _live_parse_ids(searcher)
                reuse = False  # statistics already off: start from nothing
                shutil.rmtree(tmp)
                tmp.mkdir()
                carried = live - removed
            elif removed:
                carried = _segment_mates(searcher, removed)
        if carried and documents_of is None:
            raise ValueError("documents of parses that stay must be added again; pass documents_of")
        if not reuse:
            index = tantivy.Index(index_schema(), path=str(tmp))
            _register(index)
        writer = index.writer(heap_size=64_000_000, num_threads=1)
        if reuse:
            for pid in sorted(removed | carried):
                writer.delete_documents_by_term(INDEX_FIELD_PARSE_ID, pid)
        if carried:
            add_to_writer(writer, documents_of(sorted(carried)))
        add_to_writer(writer, add_documents)
        writer.commit()
        writer.wait_merging_threads()
        (tmp / META_FILE).write_text(
            json.dumps({"schema_version": SCHEMA_VERSION, "analyzer": ANALYZER_ID, "layout": INDEX_LAYOUT,
                        "generation": name})
        )
        os.replace(tmp, target)
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


def _segment_mates(searcher: tantivy.Searcher, removed: set[str]) -> set[str]:
    """Parses (other than ``removed``) with a document in a segment that holds a removed one.

    Deleting them as well empties those segments; a parse split over two segments (the
    writer flushed in the middle of it) pulls the other segment in, until nothing changes.
    """
    segments: set[int] = set()
    parses = set(removed)
    while True:
        found = {a.segment_ord for a in _addresses(
            searcher, tantivy.Query.term_set_query(index_schema(), INDEX_FIELD_PARSE_ID, sorted(parses)))}
        if found <= segments:
            return parses - removed
        new_segments = found - segments
        segments |= found
        for addr in _addresses(searcher, tantivy.Query.all_query()):
            if addr.segment_ord in new_segments:
                parses.add(searcher.doc(addr)[INDEX_FIELD_PARSE_ID][0])


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
