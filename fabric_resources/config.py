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
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextParserConfig(_Strict):
    """Plain-text parser settings."""

    max_bytes: int = Field(64 * 1024 * 1024, gt=0, description="Refuse larger files (bytes).")


class EpubParserConfig(_Strict):
    """EPUB admission caps; a file over any cap becomes a failed parse run."""

    max_members: int = Field(10_000, gt=0, description="Zip entries.")
    max_decompressed_bytes: int = Field(512 * 1024 * 1024, gt=0, description="Sum over all entries.")
    max_compression_ratio: float = Field(200.0, gt=1, description="Per entry, uncompressed/compressed.")
    max_xml_bytes: int = Field(32 * 1024 * 1024, gt=0, description="One XML/XHTML document.")
    max_depth: int = Field(256, gt=0, description="Element nesting depth.")


class ParserConfig(_Strict):
    text: TextParserConfig = TextParserConfig()
    epub: EpubParserConfig = EpubParserConfig()


class ChunkingConfig(_Strict):
    """Fine chunks are packed under ``max_tokens`` of the embedder's tokenizer.

    128 word pieces is the sequence length all-MiniLM-L6-v2 was trained on
    (its model card); longer inputs are embedded less well.
    """

    max_tokens: int = Field(128, ge=16, le=512)


class DenseConfig(_Strict):
    """Dense models. With ``multilingual`` on, each chunk is embedded by the model its text
    needs (``fabric_resources.language_routing``): MiniLM for Latin-script text,
    multilingual-e5-small for CJK and other non-Latin text; queries are routed the same way."""

    backend: Literal["local"] = "local"
    model: Literal["all-MiniLM-L6-v2"] = "all-MiniLM-L6-v2"
    batch_size: int = Field(64, gt=0)
    multilingual: bool = True
    multilingual_model: Literal["multilingual-e5-small-q4"] = "multilingual-e5-small-q4"


class QueryConfig(_Strict):
    """Fusion and channel depths.

    ``rrf_k`` = 60 is the constant of Cormack, Clarke & Büttcher (SIGIR 2009).
    """

    rrf_k: int = Field(60, gt=0)
    # Defaults tuned on the dev half of Cranfield's queries only (`fabric eval-tune`,
    # docs/benchmarks.md): feedback 20 terms from 5 chunks at weight 0.5, dense weight 0.75.
    feedback_terms: int = Field(20, ge=0, description="RM3-style expansion terms for the word channel (0 = off).")
    feedback_docs: int = Field(5, gt=0)
    feedback_weight: float = Field(0.5, gt=0)
    channel_weights: dict[str, float] = Field(
        default_factory=lambda: {"dense": 0.75},
        description="Weighted RRF: channel name → weight (default 1.0 each); tuned on dev queries only.",
    )
    channel_depth: int = Field(100, gt=0, description="Candidates each channel hands to fusion.")
    default_limit: int = Field(10, gt=0)
    max_query_chars: int = Field(1000, gt=0)


class SourcesConfig(_Strict):
    """What the source scan admits and how changes are batched into runs."""

    ignore_hidden: bool = True
    partitions_per_run: int = Field(256, gt=0, description="Parse partitions covered by one Dagster run.")
    withheld: tuple[str, ...] = Field(
        (),
        description="Glob patterns (fnmatch, '*' crosses '/') over source keys without 'fs:', e.g. "
        "'notes/drafts/*' or 'private/*' for a whole root. Withheld sources are parsed but never "
        "activated: not searchable and absent from every index and statistic.",
    )

    def is_withheld(self, source_key: str) -> bool:
        path = source_key.split(":", 1)[-1]
        return any(fnmatch.fnmatchcase(path, pattern) for pattern in self.withheld)


class FabricConfig(_Strict):
    """The whole configuration. The embedded default is ``FabricConfig()``."""

    parsers: ParserConfig = ParserConfig()
    chunking: ChunkingConfig = ChunkingConfig()
    dense: DenseConfig = DenseConfig()
    query: QueryConfig = QueryConfig()
    sources: SourcesConfig = SourcesConfig()

    @classmethod
    def load(cls, path: Path) -> "FabricConfig":
        """Read a JSON config file; a missing file means the embedded default.

        Raises
        ------
        pydantic.ValidationError
            On unknown keys or out-of-range values.
        """
        if not path.exists():
            return cls()
        return cls.model_validate_json(path.read_text(encoding="utf-8"))


def config_hash(part: BaseModel | dict) -> str:
    """SHA-256 (hex, first 16 chars) of a canonical JSON rendering of ``part``."""
    data = part.model_dump(mode="json") if isinstance(part, BaseModel) else part
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]
