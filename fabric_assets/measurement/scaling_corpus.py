"""Scaling corpora for benchmarks: distinct documents recombined from real English text.

Owns three things:

* the **English pool**: paragraphs of the Cranfield collection and of the
  English books under ``../shared/corpus`` (``text/`` and ``epub/``), read
  through Fabric's own parsers. A book counts as English when an EPUB declares
  ``en`` *and* its stopword profile is English; a plain-text file has no
  declaration, so the stopword profile alone decides (the share of English
  stopwords, from ``bm25s.stopwords``, must be at least 20% of the words and
  higher than for any other language bm25s lists). Paragraphs whose letters are
  mostly non-Latin (``needs_multilingual``) are dropped.
* **recombination**: each document is a seeded, deterministic selection of
  paragraphs (by default a run of consecutive sentences of each) in which
  neighbours come from different sources, so no two documents are equal
  (checked by SHA-256) and content-hash dedup cannot collapse them;
* **sizing**: documents are packed with the real fine-chunk packer and the
  embedder's tokenizer, so the planned chunk count is the count the pipeline
  will produce for the same text (plain-text units are one per paragraph).

Pure apart from :func:`load_english_pool` (reads ``../shared``) and
:func:`write_documents` (writes files).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fabric_assets.chunking.fine_chunks import ChunkInputUnit, pack_fine_chunks
from fabric_resources.parsing.document import ParseError
from fabric_resources.parsing.registry import detect_media_type, parser_for
from fabric_resources.config import ParserConfig
from fabric_resources.language_routing import needs_multilingual

#: Bumped whenever the recombination or the pool changes meaning (enters cache keys).
CORPUS_FORMAT = "scaling-corpus-v2"
#: Unit kinds that carry running text (headings, table cells and captions are left out).
TEXT_KINDS = frozenset({"paragraph", "blockquote", "list_item", "note"})
#: Smallest share of English stopwords among the words of an English text.
MIN_ENGLISH_STOPWORD_SHARE = 0.2

TokenSpans = Callable[[list[str]], list[list[tuple[int, int]]]]


class SharedCorpusMissing(FileNotFoundError):
    """``../shared`` (the real corpus and evaluation sets) is not on this machine."""


@dataclass(frozen=True)
class Paragraph:
    source: str  # e.g. "cranfield", "epub/wasteland.epub"
    text: str  # one line: whitespace squashed to single spaces


@dataclass
class EnglishPool:
    """The pool and how it was chosen: paragraphs per source, and the files left out with why."""

    paragraphs: list[Paragraph]
    used: dict[str, int] = field(default_factory=dict)  # source → paragraphs taken
    excluded: dict[str, str] = field(default_factory=dict)  # source → reason

    @property
    def digest(self) -> str:
        """SHA-256 (hex, 16) over the paragraphs in order: a cache key for corpora built from it."""
        h = hashlib.sha256()
        for p in self.paragraphs:
            h.update(p.source.encode())
            h.update(b"\x00")
            h.update(p.text.encode())
            h.update(b"\x01")
        return h.hexdigest()[:16]


@dataclass(frozen=True)
class PlannedDocument:
    name: str
    text: str
    chunks: int  # fine chunks the packer makes of it


_WORD = re.compile(r"[^\W\d_]+")


def _stopword_sets() -> dict[str, frozenset[str]]:
    import bm25s.stopwords as sw

    return {
        name.removeprefix("STOPWORDS_"): frozenset(getattr(sw, name))
        for name in dir(sw)
        if name.startswith("STOPWORDS_") and name != "STOPWORDS_EN_PLUS"
    }


def english_stopword_profile(text: str) -> tuple[float, str]:
    """(share of the words that are English stopwords, the language whose stopwords cover most words).

    >>> english_stopword_profile("It was the best of times, it was the worst of times")[1]
    'EN'
    >>> english_stopword_profile("En un lugar de la Mancha, de cuyo nombre no quiero acordarme")[1]
    'SPANISH'
    """
    words = [w.lower() for w in _WORD.findall(text)]
    if not words:
        return 0.0, ""
    shares = {lang: sum(w in stop for w in words) / len(words) for lang, stop in _stopword_sets().items()}
    best = max(sorted(shares), key=lambda lang: shares[lang])
    return shares.get("EN", 0.0), best


def is_english(text: str) -> bool:
    share, best = english_stopword_profile(text)
    return best == "EN" and share >= MIN_ENGLISH_STOPWORD_SHARE


def _squash(text: str) -> str:
    return " ".join(text.split())


def _keep(text: str, min_chars: int) -> bool:
    return len(text) >= min_chars and not needs_multilingual(text)


def load_english_pool(shared: Path, min_chars: int = 80) -> EnglishPool:
    """Paragraphs of English text under ``shared`` (``eval/cranfield`` and ``corpus/{text,epub}``).

    Raises
    ------
    SharedCorpusMissing
        If ``shared/eval/cranfield/corpus.jsonl`` or ``shared/corpus`` is absent.
    """
    cranfield = shared / "eval" / "cranfield" / "corpus.jsonl"
    books = shared / "corpus"
    for needed in (cranfield, books):
        if not needed.exists():
            raise SharedCorpusMissing(
                f"{needed} not found: the scaling corpus is built from ../shared "
                "(provided on project machines and in CI)")
    pool = EnglishPool(paragraphs=[])
    for line in cranfield.read_text(encoding="utf-8").splitlines():
        if line.strip():
            text = _squash(json.loads(line).get("text", ""))
            if _keep(text, min_chars):
                pool.paragraphs.append(Paragraph("cranfield", text))
    pool.used["cranfield"] = len(pool.paragraphs)
    config = ParserConfig()
    files = sorted([*(books / "text").rglob("*.txt"), *(books / "epub").glob("*.epub")])
    for path in files:
        source = path.relative_to(books).as_posix()
        media_type = detect_media_type(path.name, b"")
        spec = parser_for(media_type)
        try:
            doc = spec.run(path.read_bytes(), config, media_type)  # type: ignore[union-attr]
        except ParseError as exc:
            pool.excluded[source] = f"does not parse ({exc.reason})"
            continue
        texts = [_squash(u.text) for u in doc.units if u.kind in TEXT_KINDS]
        declared = (doc.language or "").lower()
        if media_type.endswith("epub+zip") and not (declared == "en" or declared.startswith("en-")):
            pool.excluded[source] = f"declares language {doc.language!r}"
            continue
        sample = " ".join(texts)[:200_000]
        if needs_multilingual(sample):
            pool.excluded[source] = "mostly non-Latin script"
            continue
        share, best = english_stopword_profile(sample)
        if best != "EN" or share < MIN_ENGLISH_STOPWORD_SHARE:
            pool.excluded[source] = f"stopword profile {best or 'none'} (English share {share:.2f})"
            continue
        kept = [Paragraph(source, t) for t in texts if _keep(t, min_chars)]
        if not kept:
            pool.excluded[source] = f"no paragraph of {min_chars}+ Latin-script characters"
            continue
        pool.paragraphs += kept
        pool.used[source] = len(kept)
    return pool


def _document_hash(paragraphs: Sequence[str]) -> str:
    return hashlib.sha256("\n\n".join(paragraphs).encode()).hexdigest()


class _SpanCache:
    """``token_spans`` memoised per paragraph: paragraphs recur across documents."""

    def __init__(self, token_spans: TokenSpans) -> None:
        self._token_spans = token_spans
        self._cache: dict[str, list[tuple[int, int]]] = {}

    def warm(self, texts: Sequence[str], batch: int = 512) -> None:
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        for i in range(0, len(todo), batch):
            part = todo[i:i + batch]
            self._cache.update(zip(part, self._token_spans(part)))

    def __call__(self, texts: list[str]) -> list[list[tuple[int, int]]]:
        self.warm(texts)
        return [self._cache[t] for t in texts]

    def tokens(self, text: str) -> int:
        return max(1, len(self([text])[0]))


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[.!?][\"'”’)])\s+")


def sentences(text: str) -> list[str]:
    """``text`` cut after sentence-final punctuation followed by whitespace.

    >>> sentences("It rained. The keeper wrote “Storm.” Then he slept!")
    ['It rained.', 'The keeper wrote “Storm.”', 'Then he slept!']
    """
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


def _window(rng: random.Random, p: Paragraph) -> Paragraph:
    """A run of consecutive sentences of ``p`` (random start and length; the whole of a one-sentence paragraph)."""
    parts = sentences(p.text)
    if len(parts) < 2:
        return p
    start = rng.randrange(len(parts))
    end = rng.randint(start + 1, len(parts))
    return Paragraph(p.source, " ".join(parts[start:end]))


def _draw(rng: random.Random, paragraphs: Sequence[Paragraph], previous: str | None) -> Paragraph:
    """A paragraph from a source other than ``previous`` (when the pool has another source)."""
    for _ in range(64):
        p = paragraphs[rng.randrange(len(paragraphs))]
        if p.source != previous:
            return p
    return p


def plan_documents(
    paragraphs: Sequence[Paragraph],
    target_chunks: int,
    token_spans: TokenSpans,
    *,
    max_tokens: int = 128,
    chunks_per_document: int = 50,
    seed: int = 0,
    sentence_windows: bool = True,
) -> list[PlannedDocument]:
    """Distinct documents whose fine chunks add up to about ``target_chunks``.

    Each document draws paragraphs (neighbours from different sources) until
    its tokens fill about ``chunks_per_document`` chunks; with
    ``sentence_windows`` each drawn paragraph contributes a random run of its
    consecutive sentences instead of all of it, so that chunk texts, not only
    documents, stay mostly distinct when the corpus is many times larger than
    the pool (whole paragraphs repeat, and a long one is cut into the same
    pieces every time). The document is then packed with
    :func:`~fabric_assets.chunking.fine_chunks.pack_fine_chunks` to count its
    chunks exactly. Documents are added until the total reaches
    ``target_chunks``, so the total overshoots by less than one document.

    Raises
    ------
    ValueError
        If the pool is empty or too small to give distinct documents.
    """
    if not paragraphs:
        raise ValueError("the paragraph pool is empty")
    rng = random.Random(seed)
    spans = _SpanCache(token_spans)
    token_budget = int(chunks_per_document * max_tokens * 0.8)
    seen: set[str] = set()
    docs: list[PlannedDocument] = []
    total = 0
    failures = 0
    while total < target_chunks:
        budget = min(token_budget, max(1, int((target_chunks - total) * max_tokens * 0.8)))
        chosen: list[Paragraph] = []
        tokens = 0
        while tokens < budget:
            p = _draw(rng, paragraphs, chosen[-1].source if chosen else None)
            if sentence_windows:
                p = _window(rng, p)
            chosen.append(p)
            tokens += spans.tokens(p.text)
        texts = [p.text for p in chosen]
        digest = _document_hash(texts)
        if digest in seen:
            failures += 1
            if failures > 100:
                raise ValueError("the paragraph pool is too small to give distinct documents")
            continue
        seen.add(digest)
        units = [ChunkInputUnit(f"u{i}", "paragraph", t, ()) for i, t in enumerate(texts)]
        n = len(pack_fine_chunks(units, spans, max_tokens))
        docs.append(PlannedDocument(f"doc-{len(docs):06d}.txt", "\n\n".join(texts) + "\n", n))
        total += n
    return docs


def tiny_documents(
    paragraphs: Sequence[Paragraph], n_documents: int, *, seed: int = 0, max_chars: int = 400,
    per_document: int = 2,
) -> list[PlannedDocument]:
    """``n_documents`` distinct tiny documents of ``per_document`` short paragraphs each.

    Only paragraphs of at most ``max_chars`` characters are used (each
    document is then about one fine chunk; ``chunks`` is left 0: not counted).

    Raises
    ------
    ValueError
        If there are no short paragraphs or too few to give distinct documents.
    """
    short = [p for p in paragraphs if len(p.text) <= max_chars]
    if not short:
        raise ValueError(f"no paragraph of at most {max_chars} characters in the pool")
    rng = random.Random(seed)
    seen: set[str] = set()
    docs: list[PlannedDocument] = []
    failures = 0
    while len(docs) < n_documents:
        chosen: list[Paragraph] = []
        for _ in range(per_document):
            chosen.append(_draw(rng, short, chosen[-1].source if chosen else None))
        texts = [p.text for p in chosen]
        digest = _document_hash(texts)
        if digest in seen:
            failures += 1
            if failures > 1000:
                raise ValueError("too few short paragraphs to give distinct tiny documents")
            continue
        seen.add(digest)
        docs.append(PlannedDocument(f"note-{len(docs):06d}.txt", "\n\n".join(texts) + "\n", 0))
    return docs


def write_documents(docs: Sequence[PlannedDocument], folder: Path, per_folder: int = 1000) -> Path:
    """Write ``docs`` as UTF-8 files under ``folder`` (sub-folders of ``per_folder`` files)."""
    for i, d in enumerate(docs):
        sub = folder / f"part-{i // per_folder:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / d.name).write_text(d.text, encoding="utf-8")
    return folder
