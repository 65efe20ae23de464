# Over 500 lines: the one configuration model; every setting and its default is read in one place (the module docstring).
"""The one validated configuration model of Fabric.

Every setting lives here; unknown keys are rejected. Parts of the configuration
enter the identities they affect (parser config hash, chunker identity, model
identity) through :func:`config_hash`, so changing a setting changes exactly
the IDs it should.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import stat
import unicodedata
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class ConfigError(ValueError):
    """A configuration file that is not valid JSON or not a valid ``FabricConfig``."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# The longest paragraph of ../shared/corpus is 14,071 characters (Pride and Prejudice), so real
# prose stays whole; what is longer is degenerate input (a file on one line) and is cut.
_MAX_UNIT_CHARS = ("Longest unit (Unicode scalars); a longer paragraph becomes several units, cut at "
                   "sentence, then word, then character boundaries.")
# As for DOCX / PPTX: a file of many short paragraphs (one word, then a blank line) is ~100x its
# size in memory as units and rows, so a 9 MB one took 4.5 GB to ingest; past the cap it fails.
_MAX_UNITS = "Units in one document; a document with more fails cap-units."


class TextParserConfig(_Strict):
    """Plain-text parser settings."""

    max_bytes: int = Field(64 * 1024 * 1024, gt=0, description="Refuse larger files (bytes).")
    max_unit_chars: int = Field(16_384, ge=256, description=_MAX_UNIT_CHARS)
    max_units: int = Field(200_000, gt=0, description=_MAX_UNITS)


class IsolationConfig(_Strict):
    """Bounds of a parse run in a child process: a hang or crash in C code (pdfium, libxml2)
    cannot be stopped in-process, so these parsers run in a subprocess by default."""

    mode: Literal["subprocess", "in-process"] = "subprocess"
    timeout_s: float = Field(120.0, gt=0, description="Wall clock per document (seconds).")
    max_memory_bytes: int = Field(2 * 1024**3, gt=0, description="Address-space limit of the child (RLIMIT_AS).")


class MarkdownParserConfig(_Strict):
    """Markdown (markdown-it-py) settings."""

    # Smaller than plain text's cap: markdown-it is pure Python (~0.1-0.5 s per 100 kB of
    # dense lists or tables here, linear) and holds a token list of the whole file.
    max_bytes: int = Field(8 * 1024 * 1024, gt=0, description="Refuse larger files (bytes).")
    max_unit_chars: int = Field(16_384, ge=256, description=_MAX_UNIT_CHARS)
    # markdown-it's CommonMark preset reads 20 levels of nested blocks and drops deeper text, so a
    # file that reaches the cap fails ("cap-depth") instead.
    max_nesting: int = Field(20, gt=2, le=100, description="Nested block levels read (lists, quotes).")
    max_units: int = Field(200_000, gt=0, description=_MAX_UNITS)
    # In-process below the bound (a child costs ~0.3 s); above it, a file of very many short blocks
    # (hostile trial 8: 3 MB of "a\n\n" held 1.3 GB of tokens, ~3.5 GB at max_bytes; 0.9 MB took
    # the ingest process to 570 MB) meets the child's bounds (cap-memory, timeout) instead.
    isolation: IsolationConfig = IsolationConfig(mode="in-process")
    subprocess_above_bytes: int = Field(
        256 * 1024, gt=0, description="A larger file runs in a child process under isolation's timeout_s and "
                                       "max_memory_bytes, even when isolation.mode is in-process (bytes).")


class EpubParserConfig(_Strict):
    """EPUB admission caps; a file over any cap becomes a failed parse run."""

    max_members: int = Field(10_000, gt=0, description="Zip entries.")
    max_decompressed_bytes: int = Field(512 * 1024 * 1024, gt=0, description="Sum over all entries.")
    max_compression_ratio: float = Field(200.0, gt=1, description="Per entry, uncompressed/compressed.")
    max_xml_bytes: int = Field(32 * 1024 * 1024, gt=0, description="One XML/XHTML document.")
    max_depth: int = Field(256, gt=0, description="Element nesting depth.")
    max_bytes: int = Field(512 * 1024 * 1024, gt=0, description="Refuse larger .epub files (bytes).")
    max_unit_chars: int = Field(16_384, ge=256, description=_MAX_UNIT_CHARS)
    max_units: int = Field(200_000, gt=0, description=_MAX_UNITS)
    # In-process below the bound. The caps above let a 1.2 MB book hold a 30 MB chapter of empty
    # paragraphs (hostile trial 9: 33 s and 1 GB in the ingest process; sixteen such chapters fit
    # max_decompressed_bytes, ~9 minutes nothing could stop), so a large book runs in a child.
    isolation: IsolationConfig = IsolationConfig(mode="in-process")
    subprocess_above_bytes: int = Field(
        8 * 1024 * 1024, gt=0, description="A book whose members declare more bytes (uncompressed, summed) runs "
                                           "in a child process under isolation's timeout_s and max_memory_bytes, "
                                           "even when isolation.mode is in-process (bytes).")


class OcrConfig(_Strict):
    """Tesseract OCR of image-only PDF pages. Without the binary such a page is a failed unit
    (reason ``ocr-unavailable``); the engine's version and languages enter the parser identity."""

    enabled: bool = Field(True, description="Run OCR on pages without a text layer.")
    tesseract_cmd: str = Field("tesseract", description="The tesseract binary (a name on PATH or a path).")
    languages: str = Field("eng+jpn+chi_sim+kor", description="Tesseract -l value; missing packs are dropped.")
    dpi: int = Field(200, ge=50, le=600, description="Render resolution of a page for OCR (dots per inch).")
    timeout_s: float = Field(60.0, gt=0, description="Per page.")


class PdfParserConfig(_Strict):
    """PDF (pypdfium2) caps; a file over a cap is a failed parse with the cap's name."""

    max_bytes: int = Field(512 * 1024 * 1024, gt=0, description="Refuse larger files (bytes).")
    max_pages: int = Field(5000, gt=0, description="Pages.")
    max_objects: int = Field(2_000_000, gt=0, description="Indirect objects declared in the file.")
    max_page_objects: int = Field(200_000, gt=0, description="Graphic objects on one page.")
    max_chars_per_page: int = Field(200_000, gt=0, description="Characters of one page's text layer.")
    max_image_pixels: int = Field(100_000_000, gt=0, description="One image (embedded or rendered for OCR).")
    isolation: IsolationConfig = IsolationConfig()
    ocr: OcrConfig = OcrConfig()


class OoxmlParserConfig(_Strict):
    """DOCX / PPTX (zip) admission caps, as for EPUB."""

    max_members: int = Field(10_000, gt=0, description="Zip entries.")
    max_decompressed_bytes: int = Field(512 * 1024 * 1024, gt=0, description="Sum over all entries.")
    max_compression_ratio: float = Field(200.0, gt=1, description="Per entry, uncompressed/compressed.")
    max_units: int = Field(200_000, gt=0, description="Units in one document.")
    # In-process by default: the child costs 0.3-0.5 s per file here, 40x the parse itself
    # (docs/benchmarks.md, "Formats"). The zip caps do not bound lxml's tree: python-docx holds the
    # whole document part, ~80 bytes of memory per byte of dense XML (hostile trial 9: a 1.3 MB
    # DOCX of 8 million empty paragraphs, 52 MB of XML, took the ingest process to 4.1 GB and 78 s;
    # max_decompressed_bytes allows ten times that), so a large package runs in a child.
    isolation: IsolationConfig = IsolationConfig(mode="in-process")
    subprocess_above_bytes: int = Field(
        8 * 1024 * 1024, gt=0, description="A package whose members declare more bytes (uncompressed, summed) "
                                           "runs in a child process under isolation's timeout_s and "
                                           "max_memory_bytes, even when isolation.mode is in-process (bytes).")


class HtmlParserConfig(_Strict):
    """HTML: size cap and the main-text decision (trafilatura)."""

    max_bytes: int = Field(64 * 1024 * 1024, gt=0, description="Refuse larger files (bytes).")
    # libxml2 reads 256 levels and no more: a deeper page fails cap-depth there whatever this says
    # (fabric_resources.parsing.lxml_limits); left at 512 so the parse identity stays the same.
    max_depth: int = Field(512, gt=0, description="Element nesting depth.")
    main_text: Literal["trafilatura", "all"] = Field(
        "trafilatura", description="'trafilatura' keeps the elements trafilatura finds as main text; 'all' keeps every text element.")
    # In-process by default: trafilatura's import alone makes the child ~0.8 s per page (10x the parse).
    isolation: IsolationConfig = IsolationConfig(mode="in-process")
    # trafilatura's time grows faster than a page's element count (hostile trial 8: 400,000
    # paragraphs, 5.5 MB, took 210 s in-process, unstoppable); 1 MiB pages parse in ~1 s.
    subprocess_above_bytes: int = Field(
        1024 * 1024, gt=0, description="A larger page runs in a child process under isolation's timeout_s and "
                                       "max_memory_bytes, even when isolation.mode is in-process (bytes).")


class ParserConfig(_Strict):
    text: TextParserConfig = TextParserConfig()
    markdown: MarkdownParserConfig = MarkdownParserConfig()
    epub: EpubParserConfig = EpubParserConfig()
    pdf: PdfParserConfig = PdfParserConfig()
    docx: OoxmlParserConfig = OoxmlParserConfig()
    pptx: OoxmlParserConfig = OoxmlParserConfig()
    html: HtmlParserConfig = HtmlParserConfig()


class ChunkingConfig(_Strict):
    """Fine chunks are packed under ``max_tokens`` of the embedder's tokenizer.

    128 word pieces is the sequence length all-MiniLM-L6-v2 was trained on
    (its model card); longer inputs are embedded less well.
    """

    max_tokens: int = Field(128, ge=16, le=512)
    # Documents routed to multilingual-e5-small (mostly CJK or other non-Latin text) pack larger
    # chunks: e5 was trained on inputs up to 512 of its own tokens, and MiniLM's tokenizer counts
    # one word piece per CJK character, so 128 would cut a Japanese paragraph into shards that
    # neither BM25 nor the embedder sees whole (measured on JSQuAD dev, docs/benchmarks.md).
    multilingual_max_tokens: int = Field(192, ge=16, le=512)


class HttpEndpointConfig(_Strict):
    """An HTTP model endpoint. ``api_key_file`` must be readable by its owner only (mode 0o600
    or stricter) or it is refused; the key is never logged."""

    base_url: str = Field(..., description="e.g. http://127.0.0.1:8080/v1")
    model: str
    api_key_file: str | None = None
    timeout_s: float = Field(30.0, gt=0)
    max_retries: int = Field(3, ge=0, description="Retries of HTTP 429 only; every other failure is raised.")
    initial_backoff_s: float = Field(0.5, ge=0)
    max_backoff_s: float = Field(8.0, ge=0)


class DenseHttpConfig(HttpEndpointConfig):
    """OpenAI-compatible ``POST {base_url}/embeddings``."""

    dimensions: int = Field(384, gt=0, description="Expected vector width; every returned vector is checked.")
    batch_size: int = Field(64, gt=0)


class DenseConfig(_Strict):
    """Dense models. With ``multilingual`` on, each chunk is embedded by the model its text
    needs (``fabric_resources.language_routing``): MiniLM for Latin-script text,
    multilingual-e5-small for CJK and other non-Latin text; queries are routed the same way.

    ``backend`` selects the model for the ``chunk_vectors`` role: ``local`` (MiniLM in process)
    or ``http`` (``http`` section). The two are exclusive; there is no fallback between them.
    """

    backend: Literal["local", "http"] = "local"
    http: DenseHttpConfig | None = None
    model: Literal["all-MiniLM-L6-v2"] = "all-MiniLM-L6-v2"
    batch_size: int = Field(64, gt=0)
    multilingual: bool = True
    multilingual_model: Literal["multilingual-e5-small-q4"] = "multilingual-e5-small-q4"


#: Tokens ColBERT adds to every document: [CLS], the [D] marker and [SEP] (Khattab & Zaharia 2020, §3.2).
COLBERT_FORMAT_TOKENS = 3


def colbert_window_cap(config: "FabricConfig") -> int:
    """The token cap ColBERT windows pack under: the document length less the format tokens."""
    return config.indexing.colbert_max_tokens - COLBERT_FORMAT_TOKENS


class IndexingConfig(_Strict):
    """Caps of the grains above fine chunks, in word pieces of the chunking tokenizer.

    Context windows and ColBERT windows are runs of whole fine chunks in reading order
    (Data Store seed 003, section 3 "Grains"); a window's token count is the sum of its
    chunks' counts. ``min_fill_ratio`` drives the end-of-document merge: a final window below
    ``floor(cap * min_fill_ratio)`` tokens merges into its predecessor when the two fit.
    """

    context_max_tokens: int = Field(512, ge=32)
    # The ColBERT document length (pylate's document_length); windows pack under it less
    # COLBERT_FORMAT_TOKENS, so a window never exceeds what the model reads.
    colbert_max_tokens: int = Field(260, ge=32)
    min_fill_ratio: float = Field(0.25, ge=0, lt=1)
    # 1,024 keeps an activation's index rewrite at the size of its change (issue 19); at a million
    # chunks that is 1,224 segments, and the word channel spent ~240 ms a query walking them where
    # segments of 65,536 documents (19 segments) took ~23 ms (fabric bench ann, docs/benchmarks.md).
    # Larger segments make an activation that removes a document re-index up to this many others.
    lexical_segment_documents: int = Field(
        1024, ge=64, description="Most documents per segment of a new word-index generation (existing segments "
        "stay until rewritten; `fabric lexical-repair` rebuilds every one).")
    excerpt_windows: int = Field(2, gt=0, description="Context windows per annotation excerpt.")


class LateInteractionConfig(_Strict):
    """ColBERT MaxSim as a scoring stage over the fused pool. Off by default: no trained ColBERT
    checkpoint ships on PyPI (STACK_NOTES.md); set ``checkpoint`` to a pylate/ColBERT folder."""

    enabled: bool = False
    checkpoint: str | None = None
    query_max_tokens: int = Field(32, gt=0)
    candidate_pool: int = Field(50, gt=0, description="Fused candidates rescored by MaxSim.")


class RerankerConfig(_Strict):
    """Cross-encoder stage over passages: ``local`` (a sentence-transformers CrossEncoder
    folder at ``checkpoint``) or ``http`` (a Cohere-compatible ``POST {base_url}/rerank``).
    Off by default: no trained cross-encoder ships on PyPI."""

    backend: Literal["none", "local", "http"] = "none"
    checkpoint: str | None = None
    http: HttpEndpointConfig | None = None
    candidate_pool: int = Field(20, gt=0, description="Passages scored by the reranker.")


class PassageConfig(_Strict):
    """Passages: runs of a context window's fragments around a hit, in reading order."""

    max_tokens: int = Field(256, gt=0, description="Cap per passage (word pieces); clipped passages say truncated.")
    max_units: int = Field(16, gt=0)


class Bm25Config(_Strict):
    """BM25 saturation ``k1`` and length normalisation ``b`` (see ``fabric_query.channels.lexical.Bm25``)."""

    k1: float = Field(gt=0)
    b: float = Field(ge=0, le=1)


class FusionMethod(StrEnum):
    """How the read side fuses channel rankings (implemented in ``fabric_query.fusion``).

    ``rrf``: weighted reciprocal rank fusion, rank-only (``query.rrf_k``, ``query.channel_weights``);
    ``convex``: a min-max normalised convex combination of channel scores (``query.convex_weights``).
    """

    RRF = "rrf"
    CONVEX = "convex"


class DenseSearchConfig(_Strict):
    """How the dense channels find their candidates: the exact product over every vector of the
    release, or an approximate (ANN) first pass over a LanceDB/Lance vector index with every
    candidate re-scored exactly (:mod:`fabric_resources.dense_index`).

    ``mode``: ``exact`` never uses an index; ``ann`` uses the release's index for every vector
    table (activation builds one per release); ``auto`` does so for a table whose release rows
    number at least ``auto_min_rows``, else the exact product. A release whose index is missing,
    damaged or not its own answers exactly, saying why (``EvidencePack.dense_fallback_reason``).
    The build settings enter the index's record in the release manifest: a change rebuilds it at
    the next activation (or ``fabric dense-index-repair``); the search settings apply at once.
    Defaults were measured on MiniLM vectors grown from 100k to 1M rows (``fabric bench ann``,
    docs/benchmarks.md, "Dense search at a million chunks").
    """

    mode: Literal["exact", "ann", "auto"] = "auto"
    # The exact product is ~13 ms of a 43-48 ms p50 at 100k chunks (docs/benchmarks.md) and grows
    # linearly (~70-115 ms for the direct route alone at 1M); below this the default stays the
    # exact product, as fast as it was.
    auto_min_rows: int = Field(
        250_000, gt=0, description="With mode auto: rows of a vector table from which its release gets an ANN index.")
    # Measured at 1M rows (fabric bench ann): IVF_RQ at 1 bit built in 50 s and held recall@10 1.0 at a
    # quarter of the partitions probed; IVF_PQ and IVF_HNSW_SQ took minutes to build, IVF_HNSW_SQ's
    # codes hold 8 bits per dimension in memory.
    index_type: Literal["IVF_PQ", "IVF_RQ", "IVF_HNSW_SQ", "IVF_FLAT"] = Field(
        "IVF_RQ", description="Lance vector index type (cosine metric): IVF partitions searched by product "
        "quantization, RaBitQ, HNSW over 8-bit scalar quantization, or full vectors.")
    partition_rows: int = Field(
        4096, gt=0, description="Target rows per IVF partition: partitions = rows / partition_rows (at least 1).")
    pq_sub_vectors: int = Field(
        48, gt=0, description="IVF_PQ sub-vectors per 384-d vector (must divide 384; 8 bits each).")
    rq_bits: int = Field(1, ge=1, le=8, description="IVF_RQ: bits per dimension of the RaBitQ codes.")
    nprobes: int = Field(
        0, ge=0, description="IVF partitions searched per query (Lance's minimum_nprobes); 0 = a quarter of the "
        "index's partitions (recall@10 1.0 at 1M rows; fewer lost the neighbours of some questions).")
    refine_factor: int = Field(
        4, ge=1, description="Lance re-ranks refine_factor × candidates by their stored vectors before returning them.")
    candidates: int = Field(
        0, ge=0, description="Candidates the ANN pass returns for exact re-scoring, at least the channel depth + 32 "
        "(the exact path's margin for ties at the cut); 0 = exactly that.")
    hnsw_ef: int = Field(150, gt=0, description="IVF_HNSW_SQ: candidate list size per probed partition (ef).")


class QueryConfig(_Strict):
    """Fusion and channel depths.

    ``rrf_k``: the constant of reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009, used
    60), ``fabric eval-tune``'s choice with every channel at weight 1 (docs/ranking.md, "Choosing
    within the noise").
    """

    rrf_k: int = Field(60, gt=0)
    # The query-time defaults below are what `fabric eval-tune` chooses on the dev halves of the five
    # collections in ../shared/eval at once: the best mean margin over the best baseline or channel
    # among the points whose margin on every collection is at least the best worst-case margin minus
    # one paired standard error there (docs/ranking.md, "Choosing within the noise"): feedback 20 terms from 5 windows at weight 0.5 (idf method), no
    # query term frequency, no stop words, section-guided dense on, dense vector feedback at 0.5 from 3
    # documents, RRF k 60 with every channel at weight 1, the e5 route's convex combination at 0.5 / 0.5.
    feedback_terms: int = Field(20, ge=0, description="RM3-style expansion terms for the word channel (0 = off).")
    feedback_docs: int = Field(5, gt=0)
    feedback_weight: float = Field(0.5, gt=0)
    # Off for queries routed to the multilingual model: on JSQuAD's dev half, feedback over
    # character bigrams cost 0.066 nDCG@10 of the word channel (docs/benchmarks.md).
    feedback_multilingual: bool = Field(False, description="Apply feedback to CJK / non-Latin queries too.")
    feedback_method: Literal["idf", "rm3"] = Field(
        "idf",
        description="idf: terms of the top windows by sum of tf/|d| times idf, query terms kept at weight 1; rm3: "
        "RM3 (Abdul-Jaleel et al. 2004), the relevance model of the top windows weighted by their first-pass "
        "scores, interpolated with the query (query share 1 - feedback_weight).",
    )
    query_term_frequency: bool = Field(
        False, description="Word channel: a query word written twice weighs twice (BM25's query term frequency, "
        "as Lucene sums repeated clauses); false counts each distinct query word once.")
    stopwords: Literal["none", "english"] = Field(
        "none", description="Word channel: english drops tantivy's English stop words (Lucene's 33) from the query's "
        "free-text words (never from phrases; all kept when nothing else is left). The index keeps them.")
    # Off since stop 47: a chunk matching only `what`/`to`/`do`/`about` of a question was lexical
    # evidence on a small home. Measured on the four English collections (docs/ranking.md, "Function
    # words are no evidence"): fused nDCG@10 within 0.005 on every half, the worst dev margin (NPL) up,
    # the word channel's Recall@100 up on seven halves, unchanged on NPL test.
    function_word_matches: bool = Field(
        False, strict=True,
        description="Word channel: a chunk whose only query words are English function words (NLTK's 179, as "
        "bm25s ships them: what, to, do, about, ...) is a word match; false asks it to hold another query word "
        "(or a quoted phrase's) when the query has one. Scores are the same either way.")
    # Several versions of one document (report.docx, report-v2.docx, report-final.docx) hold the
    # same paragraphs: each copy took a result slot, and ten results could be one paragraph ten times.
    collapse_same_text: bool = Field(
        True, strict=True,
        description="A result whose text (whitespace aside) is that of a result above it takes no place in the "
        "results: it is listed under that result (Hit.same_text, each copy with its own citation); texts under 24 "
        "tokens (a title several documents share) are never collapsed. false gives every copy its own place.")
    # Queries with text in scripts written without spaces are matched on character bigrams, where
    # tantivy's fixed k1 1.2, b 0.75 saturate too late; the word channel re-scores its candidates
    # with these (chosen on JSQuAD's dev half; the complete `fabric eval-tune` grid finds the region flat,
    # docs/benchmarks.md).
    word_bm25: Bm25Config | None = Field(
        None, description="BM25 parameters the word channel re-scores queries without CJK text with; null keeps "
        "tantivy's k1 1.2, b 0.75.")
    bigram_bm25: Bm25Config | None = Field(
        default_factory=lambda: Bm25Config(k1=0.5, b=0.3),
        description="BM25 parameters for queries with text the word field reads as character bigrams (CJK and the "
        "other scripts without spaces, not Thai, which it reads as words); null keeps tantivy's k1 1.2, b 0.75.",
    )
    channel_weights: dict[str, float] = Field(
        default_factory=dict,
        description="Weighted RRF: channel name → weight (1.0 for a channel not named; eval-tune's choice: every "
        "channel 1).",
    )
    channel_depth: int = Field(100, gt=0, description="Candidates each channel hands to fusion.")
    section_guided: bool = Field(True, description="Merge the section-guided dense route (windows shortlisted by the "
                                 "query vector nominate their best chunks) into the MiniLM dense channel.")
    # Off for the e5 route: on JSQuAD's dev half the section route scored 0.823 nDCG@10 against
    # 0.880 for the direct e5 ranking (documents there are single paragraphs; the windows add nothing).
    section_guided_multilingual: bool = False
    dense_window_weight: float = Field(
        0.0, ge=0.0, le=1.0, strict=True, allow_inf_nan=False,
        description="MiniLM dense channel: a chunk scores (1 - w) * its cosine + w * the cosine of its context "
        "window's mean vector (Callan 1994's passage + document evidence; 0 = the chunk's cosine alone).")
    # 0 for the e5 route: JSQuAD's documents are single paragraphs, so it cannot measure the mix, and
    # eval-tune does not try it there.
    dense_window_weight_multilingual: float = Field(
        0.0, ge=0.0, le=1.0, strict=True, allow_inf_nan=False, description="The same mix for the multilingual-e5 dense channel.")
    # MiniLM route only: on JSQuAD's dev half the same feedback lowered the e5 route (docs/ranking.md).
    dense_feedback_weight: float = Field(
        0.5, ge=0.0, le=4.0, strict=True, allow_inf_nan=False,
        description="MiniLM dense channel, second pass: the query vector q becomes q + w * the mean of the context-"
        "window vectors of the first pass's best documents, re-normalised (Rocchio 1971's feedback on the dense "
        "vector; 0 = off). Applies when a lexical channel matched something.")
    dense_feedback_documents: int = Field(
        3, gt=0, le=50, strict=True,
        description="Documents (parses) whose best chunk's context window feeds the dense feedback: the first "
        "ones of the plain RRF (k 60) of the first pass's channel rankings.")
    # Queries routed to e5 fuse by a min-max normalised convex combination, which beat RRF on JSQuAD
    # (docs/benchmarks.md); queries on the MiniLM route (and any the e5 channel does not serve) fuse by
    # RRF: rank-only.
    multilingual_fusion: FusionMethod = FusionMethod.CONVEX
    convex_weights: dict[str, float] = Field(
        default_factory=lambda: {"word": 0.5, "substring": 0.5, "scan": 0.5, "dense_multilingual": 0.5,
                                 "graph": 0.5},
        description="Channel weights of the convex combination (eval-tune's choice: lexical 0.5, e5 0.5).",
    )
    # Calibrated on the dev halves of the labelled collections (docs/ranking.md): the highest
    # cosine that keeps >= 95% of true matches in the top 10 on every collection. A floor only
    # marks dense-only hits (Hit.below_dense_floor); same-domain unrelated queries clear it.
    dense_floors: dict[str, float] = Field(
        default_factory=lambda: {"dense": 0.44, "dense_multilingual": 0.84},
        description="Dense channel → cosine floor below which a hit no lexical channel matched is marked "
        "below_dense_floor (MiniLM 0.44, multilingual-e5 0.84; recalibrate for another model).",
    )
    # A neighbour the floor calls unrelated must not outrank evidence: under RRF a dense-only rank
    # beats any worse word-only rank, and a dense weight above 1 widens that (with k 20 and the dense
    # weight 1.5, dense ranks 1-11 each beat a word-only rank 1; docs/ranking.md, "Floor demotion").
    floor_demotion: bool = Field(
        True, strict=True,
        description="Fused hits marked below_dense_floor (no lexical match, every dense cosine under its floor) "
        "rank after every other hit, each group in fused order.")
    dense_search: DenseSearchConfig = DenseSearchConfig()
    section_candidate_limit: int = Field(20, gt=0, description="Context windows shortlisted by the query vector.")
    section_passages_per_window: int = Field(2, gt=0, description="Chunks each shortlisted window nominates.")
    default_limit: int = Field(10, gt=0)
    max_query_chars: int = Field(1000, gt=0)
    gc_freeze: bool = Field(
        True,
        description="After a release view loads its rows, collect once and gc.freeze() what Python's cyclic GC tracks, "
        "so later full collections skip it (English p99 at 100k chunks ~95 -> ~63-69 ms; docs/benchmarks.md).",
    )
    text_in_memory_max_rows: int = Field(
        250_000, ge=0,
        description="A release view whose chunks table holds at most this many rows keeps the chunks' text and "
        "fragments in memory; a larger one reads them per cited chunk from the pinned table (at a million chunks "
        "the text alone is ~600 MB of Arrow data; docs/benchmarks.md, 'Dense search at a million chunks').")
    malloc_arena_max: int = Field(
        2, ge=0,
        description="glibc heap arenas of a process that opens this home for reading (0 = glibc's default); "
        "fewer arenas keep freed Lance read buffers from staying resident (docs/benchmarks.md, 'Query memory').",
    )


class SourcesConfig(_Strict):
    """What the source scan admits and how changes are batched into runs."""

    ignore_hidden: bool = True
    max_file_bytes: int = Field(
        1024 * 1024 * 1024, gt=0,
        description="Files larger than this (bytes) are skipped as too-large before they are read, "
        "whatever their type; a parser's own max_bytes applies to the files it parses.")
    partitions_per_run: int = Field(256, gt=0, description="Parse partitions covered by one Dagster run.")
    # Every step of a run holds the rows of all its partitions at once: a run of a few large files
    # grew past the machine's memory while the partition count alone kept it at 256 (trial 11b:
    # about 0.45 GB of peak memory per 20 MB text file, three in one run peaked at 2.5 GB).
    bytes_per_run: int = Field(
        64 * 1024 * 1024, gt=0, description="Source bytes covered by one Dagster run of parses (a larger file "
        "runs alone): what bounds a run's memory when files are large.")
    unattended: bool = Field(
        True, description="While the Dagster daemon runs (`fabric ui`, `dagster dev`): the source sensor, the "
        "activation and annotation sensors and the health schedule run (they start running by default); "
        "false: every tick skips, saying so.")
    unattended_steps: Literal["multiprocess", "in_process"] = Field(
        "multiprocess", description="How the runs the sensors start execute their steps: `multiprocess` (Dagster's "
        "default: each step a process of its own, each embedding step loading its model) or `in_process` (every "
        "step in the run's process, each model loaded once per run: less CPU on a small machine).")
    withheld: tuple[str, ...] = Field(
        (),
        description="Glob patterns (fnmatch, '*' crosses '/') over source keys, with or without 'fs:', e.g. "
        "'notes/drafts/*' or 'private/*' for a whole root; a pattern that matches a folder ('notes/drafts', "
        "'notes/drafts/') withholds everything in it. Withheld sources are stored but not parsed "
        "(one parsed before keeps its parse) and never activated: not searchable and absent from every index "
        "and statistic.",
    )

    def is_withheld(self, source_key: str) -> bool:
        if not self.withheld:  # asked of every source by each scan and activation
            return False
        # Key and patterns in NFC: a folder named on macOS (NFD) is withheld by its name as typed (NFC).
        # A pattern copied from a key as Fabric prints it (`fs:private/*`) withholds what it names: it
        # matched nothing, and the files the user meant to hide stayed searchable.
        path = unicodedata.normalize("NFC", source_key.split(":", 1)[-1])
        # A pattern naming a folder (`private/`, `corp/private`, as .gitignore reads them) withholds
        # what is inside it: it matched only a file of that name, and the folder stayed searchable.
        parts = path.split("/")
        names = [path, *("/".join(parts[:i]) for i in range(1, len(parts)))]
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self._patterns() for name in names)

    def _patterns(self) -> list[str]:
        return [p for p in (unicodedata.normalize("NFC", pattern.removeprefix("fs:")).rstrip("/")
                            for pattern in self.withheld) if p]


class EntityMatchConfig(_Strict):
    """Optional entity-name match classes beyond exact normalised equality."""

    acronyms: bool = False
    token_prefix: bool = False
    min_prefix_chars: int = Field(4, gt=0)


class AnnotationConfig(_Strict):
    """LLM annotations (entities, relations with quotes, summaries) over excerpts of
    ``indexing.excerpt_windows`` context windows, via an OpenAI-compatible chat endpoint.
    Off by default; when on, annotation never blocks search unless ``required_for_activation``."""

    enabled: bool = False
    endpoint: HttpEndpointConfig | None = None
    required_for_activation: bool = False
    concurrency: int = Field(4, gt=0, description="Excerpts annotated at once.")
    malformed_retries: int = Field(2, ge=0, description="Extra attempts when output is malformed.")
    call_retries: int = Field(3, ge=0, description="Extra attempts on HTTP 429 / 5xx / timeouts.")
    temperature: float = Field(0.0, ge=0, le=2)
    temperature_step: float = Field(0.2, ge=0, description="Added per malformed retry only.")
    max_output_tokens: int = Field(1024, gt=0)
    entity_match: EntityMatchConfig = EntityMatchConfig()


_PG_URL = r"^postgres(ql)?(\+psycopg2)?://"
_SCHEMA_NAME = r"^[a-z_][a-z0-9_]{0,62}$"


class CatalogStorageConfig(_Strict):
    """Where the catalog lives: ``sqlite`` (``<home>/catalog.sqlite3``, the default: one host) or
    ``postgres`` (a libpq URL, ``postgresql://user@host:port/db``, and a schema in it: shared by
    every host that points at it). Put no password in the URL: libpq reads ``~/.pgpass``
    (``PGPASSFILE``) or ``PGPASSWORD``."""

    backend: Literal["sqlite", "postgres"] = "sqlite"
    url: str | None = Field(None, pattern=_PG_URL)
    schema_name: str = Field("fabric", pattern=_SCHEMA_NAME, description="Postgres schema of the catalog tables.")


class DagsterStorageConfig(_Strict):
    """The Dagster instance of the home (``<home>/dagster/dagster.yaml``, written by Fabric):
    ``sqlite`` files under ``<home>/dagster`` (the default) or ``postgres`` (run, event-log and
    schedule storage in the database at ``url``; the catalog's URL when unset).
    ``max_concurrent_runs`` turns on Dagster's queued run coordinator with that limit, so runs
    that sensors, backfills or the UI launch go several at once (Dagster's default when unset)."""

    backend: Literal["sqlite", "postgres"] = "sqlite"
    url: str | None = Field(None, pattern=_PG_URL)
    max_concurrent_runs: int | None = Field(None, gt=0)


class StorageConfig(_Strict):
    """Where the shared state lives (``docs/scale.md``). The default keeps everything in the home
    directory with no service: a SQLite catalog, local Lance tables, a SQLite Dagster instance.

    ``tables_uri`` is a directory or an object-store URI (``s3://bucket/prefix``) of the Lance
    tables; ``tables_storage_options`` are Lance's object-store options (``endpoint``,
    ``region``, ``allow_http``, ...), and ``tables_storage_options_file`` an owner-only JSON file
    of more of them (credentials), merged over those. Where data lives is not part of any
    identity: this section never enters a config hash."""

    catalog: CatalogStorageConfig = CatalogStorageConfig()
    dagster: DagsterStorageConfig = DagsterStorageConfig()
    tables_uri: str | None = Field(None, min_length=1)
    tables_storage_options: dict[str, str] = Field(default_factory=dict)
    tables_storage_options_file: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "StorageConfig":
        if self.catalog.backend == "postgres" and not self.catalog.url:
            raise ValueError("storage.catalog.backend = 'postgres' needs storage.catalog.url")
        if self.dagster.backend == "postgres" and not self.dagster_url:
            raise ValueError("storage.dagster.backend = 'postgres' needs storage.dagster.url "
                             "(or a postgres storage.catalog.url)")
        uri = self.tables_uri or ""
        # Lance opens other object stores too (gs://, az://); only S3 is proven here (docs/scale.md).
        if "://" in uri and not uri.startswith(("s3://", "file://")):
            raise ValueError(f"storage.tables_uri: unsupported scheme in {uri!r} (s3://, file:// or a path)")
        if uri.startswith("s3://") and not uri.split("://", 1)[1].strip("/"):
            raise ValueError(f"storage.tables_uri {uri!r} names no bucket")
        return self

    @property
    def dagster_url(self) -> str | None:
        """The Dagster instance's Postgres URL: its own, else the catalog's (when on Postgres)."""
        if self.dagster.url:
            return self.dagster.url
        return self.catalog.url if self.catalog.backend == "postgres" else None


class RetentionConfig(_Strict):
    """How long what no release needs is kept (``fabric cleanup``, ``cleanup_job``, and after each
    activation when ``after_activation``). Nothing a retained release or a snapshot pins is ever
    removed; a parse's age counts from the first cleanup that found it pinned by none."""

    releases: int = Field(3, ge=1, description="Most recent releases kept (their table versions and "
                                               "index generations with them).")
    release_days: float = Field(7.0, ge=0, description="Releases published less than this long ago are kept "
                                                       "too, however many there are (a release a reader pinned "
                                                       "by its ID keeps answering).")
    superseded_days: float = Field(7.0, ge=0, description="Parses no retained release or source needs.")
    failed_days: float = Field(30.0, ge=0, description="Failed parses that are no source's current version.")
    deleted_days: float = Field(30.0, ge=0, description="Parses of sources deleted from their folder.")
    runs_days: float = Field(7.0, ge=0, description="Finished Dagster runs no retained release needs (the run "
                                                    "that wrote each pinned partition and each retained release's "
                                                    "activation run are kept for ever).")
    after_activation: bool = Field(True, description="Run the cleanup after every activation that published.")


class ServerConfig(_Strict):
    """``fabric serve``: where it listens and how much query work it admits at once.

    The admin token is never part of the configuration (it lives in ``<home>/admin-token``), so
    it can enter no config hash.
    """

    host: str = Field("127.0.0.1", description="Interface `fabric serve` binds by default (loopback).")
    port: int = Field(7433, ge=1, le=65535)
    max_concurrent_queries: int = Field(
        4, gt=0, le=256,
        description="Query requests running at once (each in the bounded thread pool); one more is answered "
        "503 with Retry-After at once, never queued.")
    retry_after_s: int = Field(1, gt=0, le=3600, description="Retry-After (seconds) of a 503 from the full gate.")
    max_body_bytes: int = Field(65536, gt=0, le=16 * 1024 * 1024, description="Largest request body accepted.")
    request_read_timeout_s: float = Field(
        30.0, ge=0.5, le=3600, description="Seconds a client has to send one whole request (line, headers, body) "
                                           "from its connection or its first byte; past it the connection is closed. "
                                           "Also how long the server's write buffer may stay full (a client not "
                                           "taking its answer) before the connection is cut off.")
    max_waiting_connections: int = Field(
        128, ge=1, le=4096, description="Connections that owe a request (silent since connecting, still sending "
                                         "one, or kept alive after an answer) held at once; past it the oldest is "
                                         "closed, so held connections cannot use up the file descriptors a new "
                                         "client needs. One being answered is not counted.")
    allowed_hosts: tuple[str, ...] = Field(
        (), description="Host names accepted besides loopback ones (127.0.0.1, localhost, ::1) and the bound host.")
    allowed_origins: tuple[str, ...] = Field(
        (), description="Origins (scheme://host[:port]) accepted besides loopback ones; any other Origin is 403.")
    admin_workers: int = Field(1, gt=0, le=8, description="Admin operations run at once (pipeline work).")


class FabricConfig(_Strict):
    """The whole configuration. The embedded default is ``FabricConfig()``."""

    parsers: ParserConfig = ParserConfig()
    chunking: ChunkingConfig = ChunkingConfig()
    dense: DenseConfig = DenseConfig()
    indexing: IndexingConfig = IndexingConfig()
    late_interaction: LateInteractionConfig = LateInteractionConfig()
    reranker: RerankerConfig = RerankerConfig()
    passages: PassageConfig = PassageConfig()
    annotation: AnnotationConfig = AnnotationConfig()
    query: QueryConfig = QueryConfig()
    sources: SourcesConfig = SourcesConfig()
    # Excluded from dumps, so from every config hash: a default config hashes as before, and
    # moving the same data to another store changes no identity (the release manifest hashes this model).
    storage: StorageConfig = Field(StorageConfig(), exclude=True)
    retention: RetentionConfig = RetentionConfig()
    server: ServerConfig = ServerConfig()

    @model_validator(mode="after")
    def _consistent(self) -> "FabricConfig":
        fine = max(self.chunking.max_tokens, self.chunking.multilingual_max_tokens)
        for name in ("context_max_tokens", "colbert_max_tokens"):
            cap = getattr(self.indexing, name) - (COLBERT_FORMAT_TOKENS if name == "colbert_max_tokens" else 0)
            # Seed 003: windows never split a chunk, so a chunk must fit in any under-filled window.
            if fine > cap - int(cap * self.indexing.min_fill_ratio):
                raise ValueError(f"chunking caps (max {fine}) must be <= indexing.{name} - "
                                 f"floor(indexing.{name} * min_fill_ratio)")
        if self.dense.backend == "http" and self.dense.http is None:
            raise ValueError("dense.backend = 'http' needs a dense.http section")
        if self.late_interaction.enabled and not self.late_interaction.checkpoint:
            raise ValueError("late_interaction.enabled needs late_interaction.checkpoint")
        if self.reranker.backend == "local" and not self.reranker.checkpoint:
            raise ValueError("reranker.backend = 'local' needs reranker.checkpoint")
        if self.reranker.backend == "http" and self.reranker.http is None:
            raise ValueError("reranker.backend = 'http' needs a reranker.http section")
        if self.annotation.enabled and self.annotation.endpoint is None:
            raise ValueError("annotation.enabled needs an annotation.endpoint section")
        return self

    @classmethod
    def load(cls, path: Path) -> "FabricConfig":
        """Read a JSON config file; a missing file means the embedded default.

        Raises
        ------
        ConfigError
            On invalid JSON, unknown keys or out-of-range values, a file that is not UTF-8 text, not
            a regular file (a folder, a FIFO) or cannot be read (no permission, a link loop or a
            dangling link); the message names the file. Only a missing file means the default.
        """
        try:
            st = os.stat(path)
        except FileNotFoundError:
            if os.path.islink(path):  # a dangling link: the user meant a file; defaults would drop withheld
                raise ConfigError(f"unreadable configuration {path}: a symbolic link to nothing") from None
            return cls()
        except NotADirectoryError:  # the home given is (inside) a file: say so, not what opening inside it did
            blocker = next((p for p in (path.parent, *path.parent.parents) if p.is_file()), path.parent)
            raise ConfigError(f"{blocker} is a file, so {path.parent} cannot be a Fabric home folder (--home and "
                              "FABRIC_HOME name the folder that holds config.json)") from None
        except OSError as exc:  # a link loop, no permission
            raise ConfigError(f"unreadable configuration {path}: {type(exc).__name__}: {exc.strerror or exc}") from None
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read; a folder cannot be read
            raise ConfigError(f"unreadable configuration {path}: not a regular file")
        try:
            # utf-8-sig: a byte-order mark (Windows editors write one) is not part of the JSON.
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"invalid configuration {path}: not UTF-8 text (byte {exc.start})") from None
        except OSError as exc:
            raise ConfigError(f"unreadable configuration {path}: {type(exc).__name__}: {exc.strerror or exc}") from None
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(file)'}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"invalid configuration {path}: {problems}") from None


def config_hash(part: BaseModel | dict) -> str:
    """SHA-256 (hex, first 16 chars) of a canonical JSON rendering of ``part``."""
    data = part.model_dump(mode="json") if isinstance(part, BaseModel) else part
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


#: Settings that cannot change what an activation derives or a release holds: what `fabric serve`
#: binds and admits, how long retention keeps what no release needs, and how the sensors and
#: ingest batch and run parse work (not what a parse gives). Left out of :func:`derivation_hash`:
#: in it, changing one (`server.max_waiting_connections`) sent the next activation through every
#: source, as a withheld pattern must, and the release recorded another hash for the same derivation.
NOT_DERIVED = {"server": True, "retention": True,
               "sources": {"partitions_per_run", "bytes_per_run", "unattended", "unattended_steps"}}


def derivation_hash(config: FabricConfig) -> str:
    """:func:`config_hash` of ``config`` less :data:`NOT_DERIVED` (and ``storage``, in no dump): the
    hash a release records and the next activation builds on when it is unchanged."""
    return config_hash(config.model_dump(mode="json", exclude=NOT_DERIVED))
