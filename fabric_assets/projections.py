"""The projection registry: every asset Fabric derives from a parse, and what it means downstream.

One :class:`Projection` per asset of the parse graph, in graph order. Everything that used to be a
list of its own is derived from :data:`PROJECTIONS`:

* the assets' upstream deps, group and check specs (``partition_step.asset_args``) and their
  code versions (:func:`code_version`, filled in when the definitions load);
* the gate: :data:`REQUIRED_VERDICTS` (checks of the parse-job stages) and
  :data:`ANNOTATION_VERDICT`; :data:`RECHUNK_VERDICTS` (what a re-chunk recomputes);
* :data:`MODEL_PROJECTIONS` (``reproject_job``) and :data:`RECHUNKED` (``rechunk_job``);
* :data:`POST_ACTIVATION_TABLES`: rewritten for parses that are already active, so a new version
  of one makes activation publish a release;
* :data:`RELEASE_INPUTS`: the ``release`` asset's deps, so the UI lineage shows what it reads;
* the digests a release records: :data:`VECTOR_DIGEST_VERDICTS`, :data:`LEXICAL_VERDICT`;
* what a configuration switches off (:func:`switched_off`; the assets then sit in
  :data:`SWITCHED_OFF_GROUP`, out of every job but ``annotation_job``) and which step says so
  (:func:`switched_off_below`).

The Arrow schema of each table stays in the storage contract (``fabric_resources.schema.TABLES``);
a projection only names its table. Check names are defined here once, as constants. Plain data:
no Dagster import (activation and the gate read it too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from fabric_assets.chunking.fine_chunks import CHUNKER_VERSION

# Check names: each is the name of a Dagster asset check and of the per-parse verdict it records.
SOURCE_BYTES_MATCH_THEIR_HASH = "source_bytes_match_their_hash"
UNIT_IDS_ARE_UNIQUE = "unit_ids_are_unique"
CHUNK_FRAGMENTS_REPRODUCE_TEXT = "chunk_fragments_reproduce_text"
CHUNK_IDS_ARE_UNIQUE = "chunk_ids_are_unique"
ONE_LEXICAL_DOCUMENT_PER_CHUNK = "one_lexical_document_per_chunk"
VECTORS_ARE_FINITE_AND_UNIT_NORM = "vectors_are_finite_and_unit_norm"
MULTILINGUAL_VECTORS_ARE_FINITE_AND_UNIT_NORM = "multilingual_vectors_are_finite_and_unit_norm"
CONTEXT_WINDOWS_COVER_CHUNKS = "context_windows_cover_chunks"
COLBERT_WINDOWS_COVER_CHUNKS = "colbert_windows_cover_chunks"
# Its gate verdict passes with detail "disabled" when late interaction is off, so it never blocks the default.
COLBERT_MATRICES_ARE_FINITE_AND_COMPLETE = "colbert_matrices_are_finite_and_complete"
# It never holds a parse: required only with annotation.enabled and annotation.required_for_activation
# (gate.required_verdicts), and then a failed one counts as missing (the parse waits).
ANNOTATIONS_ARE_COMPLETE = "annotations_are_complete"

#: What each check means when it passes: the description Dagster's UI shows beside it.
CHECK_DESCRIPTIONS: dict[str, str] = {
    SOURCE_BYTES_MATCH_THEIR_HASH: "The artifact store holds the parse's source bytes, and they hash to the "
    "recorded SHA-256.",
    UNIT_IDS_ARE_UNIQUE: "The parse has units, none of them empty, and no unit ID repeats.",
    CHUNK_FRAGMENTS_REPRODUCE_TEXT: "Every chunk's text equals its fragments' slices of unit text joined, so a "
    "citation re-derives it exactly.",
    CHUNK_IDS_ARE_UNIQUE: "No chunk ID repeats within the parse.",
    ONE_LEXICAL_DOCUMENT_PER_CHUNK: "Exactly one word-index document per chunk; records the digest that makes "
    "activation re-index a re-chunked parse.",
    VECTORS_ARE_FINITE_AND_UNIT_NORM: "The MiniLM vectors of the chunks routed to it are finite with unit L2 "
    "norm; records the digest of the rows written, which the release pins.",
    MULTILINGUAL_VECTORS_ARE_FINITE_AND_UNIT_NORM: "The e5 vectors of the chunks routed to it are finite with "
    "unit L2 norm; records the digest of the rows written, which the release pins.",
    CONTEXT_WINDOWS_COVER_CHUNKS: "The context windows list every chunk once, in order, within their token "
    "budget, and reproduce their members' text, fragments and hashes.",
    COLBERT_WINDOWS_COVER_CHUNKS: "The ColBERT windows list every chunk once, in order, within their token "
    "budget, and reproduce their members' text, fragments and hashes.",
    COLBERT_MATRICES_ARE_FINITE_AND_COMPLETE: "One token matrix per ColBERT window, each (t >= 1, 128) with "
    "finite unit-norm rows. Skipped while late interaction is off (the parse's gate verdict then passes as "
    "disabled).",
    ANNOTATIONS_ARE_COMPLETE: "Every annotation chain of every excerpt completed (fresh or from the memo); "
    "records the producer (model, prompts) so a change re-annotates.",
}


class Stage(StrEnum):
    """When a projection is written; also its Dagster group."""

    CANONICAL = "canonical"  #: parse_job: what parsing a source writes
    PROJECTIONS = "projections"  #: parse_job: what is made from chunks
    ANNOTATIONS = "annotations"  #: annotation_job, after activation


class Identity(StrEnum):
    """What a projection's rows depend on besides code and upstream rows: its value under the
    configuration enters the asset's code version, so a change shows the asset stale in the UI."""

    CHUNKER = "chunker"  #: the chunking caps
    DENSE = "dense"  #: the dense (chunk_vectors) model, local or HTTP
    MULTILINGUAL = "multilingual"  #: multilingual-e5
    COLBERT = "colbert"  #: the ColBERT checkpoint ("disabled" when late interaction is off)
    ANNOTATOR = "annotator"  #: the annotation producer: prompts, model, endpoint, excerpt sizing


#: Encoders whose rows carry a ``model`` column; a change of one re-projects from stored rows.
ENCODERS = frozenset({Identity.DENSE, Identity.MULTILINGUAL, Identity.COLBERT})


class Digest(StrEnum):
    """A digest a verdict carries (``verdict["digest"]``) and the release records."""

    VECTORS = "vectors"  #: parse digest of vector rows (fabric_resources.vector_digest)
    LEXICAL = "lexical"  #: digest of a parse's lexical document IDs (activation re-indexes on change)


@dataclass(frozen=True)
class Check:
    """A per-parse check an asset records (catalog verdict + Dagster asset check)."""

    name: str
    digest: Digest | None = None

    @property
    def description(self) -> str:
        """What passing means (:data:`CHECK_DESCRIPTIONS`); ``KeyError`` for a check without one."""
        return CHECK_DESCRIPTIONS[self.name]


@dataclass(frozen=True)
class Projection:
    """One asset of the parse graph.

    Attributes
    ----------
    key
        Dagster asset key; also the name of the Lance table it writes, when ``writes_table``.
    stage
        When it is written (and its Dagster group).
    upstream
        Keys of the projections its rows are made from (its Dagster deps).
    checks
        The checks it records per parse.
    code_version
        The version of its code; ``None`` for assets whose code version Dagster leaves unset.
    identity
        What else its rows depend on (see :class:`Identity`); enters the code version.
    writes_table
        Whether it writes a table of ``schema.TABLES`` named ``key`` (``source_bytes`` writes none).
    read_by_release
        Whether activation reads it: a release gates on its verdicts and pins its table version.
    enabled_by
        The configuration switch that turns the stage on (a dotted path to a bool of
        ``FabricConfig``, e.g. ``late_interaction.enabled``); ``None``: always on. While it is
        off the asset is *skipped* in Dagster (no materialization; see ``PartitionStep.skip``),
        sits in the :data:`SWITCHED_OFF_GROUP` and is left out of the jobs (``definitions``).
    cleared_when_off
        While off, a skip removes the rows an earlier, enabled run left for the skipped
        partitions (ColBERT matrices: the windows they were made from may have been re-cut since).
    """

    key: str
    stage: Stage
    upstream: tuple[str, ...] = ()
    checks: tuple[Check, ...] = ()
    code_version: str | None = None
    identity: Identity | None = None
    writes_table: bool = True
    read_by_release: bool = True
    enabled_by: str | None = None
    cleared_when_off: bool = False

    @property
    def table(self) -> str | None:
        return self.key if self.writes_table else None

    @property
    def model_projection(self) -> bool:
        """Computed by an encoder from stored rows: a model change recomputes it (``reproject_job``)."""
        return self.identity in ENCODERS

    @property
    def rewritten_after_activation(self) -> bool:
        """Rewritten for parses that are already active: annotations (written after activation) and
        model projections (after a model change)."""
        return self.model_projection or self.stage is Stage.ANNOTATIONS

    @property
    def check_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.checks)

    def enabled(self, config) -> bool:
        """Whether the stage runs under ``config`` (a ``FabricConfig``): its :attr:`enabled_by`
        switch is true, or it has none."""
        if self.enabled_by is None:
            return True
        value = config
        for part in self.enabled_by.split("."):
            value = getattr(value, part)
        return bool(value)


_C, _P, _A = Stage.CANONICAL, Stage.PROJECTIONS, Stage.ANNOTATIONS
# The switches of the stages that are off by default (README, "Models and query stages").
_LATE, _ANNOTATE = "late_interaction.enabled", "annotation.enabled"

#: Every projection, in graph order (upstream before downstream).
PROJECTIONS: tuple[Projection, ...] = (
    Projection("source_bytes", _C, (), (Check(SOURCE_BYTES_MATCH_THEIR_HASH),), writes_table=False),
    Projection("units", _C, ("source_bytes",), (Check(UNIT_IDS_ARE_UNIQUE),)),
    Projection("relationships", _C, ("source_bytes",)),
    Projection("chunks", _P, ("units",),
               (Check(CHUNK_FRAGMENTS_REPRODUCE_TEXT), Check(CHUNK_IDS_ARE_UNIQUE)),
               CHUNKER_VERSION, Identity.CHUNKER),
    Projection("lexical_documents", _P, ("chunks",), (Check(ONE_LEXICAL_DOCUMENT_PER_CHUNK, Digest.LEXICAL),),
               "lexical-v1"),
    Projection("chunk_vectors", _P, ("chunks",), (Check(VECTORS_ARE_FINITE_AND_UNIT_NORM, Digest.VECTORS),),
               "dense-v1", Identity.DENSE),
    Projection("chunk_vectors_multilingual", _P, ("chunks",),
               (Check(MULTILINGUAL_VECTORS_ARE_FINITE_AND_UNIT_NORM, Digest.VECTORS),), "dense-v1",
               Identity.MULTILINGUAL),
    Projection("context_windows", _P, ("chunks",), (Check(CONTEXT_WINDOWS_COVER_CHUNKS),), "context-windows-v1"),
    Projection("colbert_windows", _P, ("chunks",), (Check(COLBERT_WINDOWS_COVER_CHUNKS),), "colbert-windows-v1"),
    Projection("colbert_matrices", _P, ("colbert_windows",), (Check(COLBERT_MATRICES_ARE_FINITE_AND_COMPLETE),),
               "colbert-v1", Identity.COLBERT, enabled_by=_LATE, cleared_when_off=True),
    Projection("annotations", _A, ("context_windows",), (Check(ANNOTATIONS_ARE_COMPLETE),), "annotations-v1",
               Identity.ANNOTATOR, enabled_by=_ANNOTATE),
    Projection("graph_mentions", _A, ("annotations",), code_version="graph-v1", enabled_by=_ANNOTATE),
    Projection("graph_edges", _A, ("annotations",), code_version="graph-v1", enabled_by=_ANNOTATE),
    Projection("annotation_vectors", _A, ("annotations",), code_version="annotation-vectors-v1",
               identity=Identity.DENSE, enabled_by=_ANNOTATE),
)

_BY_KEY: dict[str, Projection] = {p.key: p for p in PROJECTIONS}

#: Catalog state: the chunker settings (``chunker_identity.chunker_settings``) the last ingest found
#: every gated parse's chunks cut under; ``None`` (or other settings) makes the next ingest check them
#: all. A chunks step that cuts a gated parse under another chunker sets it to ``None``.
CHUNKER_SETTINGS = "chunker_settings"


def projection(key: str) -> Projection:
    """The projection of asset ``key``. Raises ``KeyError`` for an unknown key."""
    return _BY_KEY[key]


def downstream_of(key: str) -> tuple[Projection, ...]:
    """``key`` and every projection made from it, transitively, in graph order."""
    reached = {key}
    for p in PROJECTIONS:  # graph order: every upstream of p is seen before p
        if set(p.upstream) & reached:
            reached.add(p.key)
    return tuple(p for p in PROJECTIONS if p.key in reached)


#: The Dagster group of every asset whose stage the configuration switches off (instead of its
#: stage's group), set when the definitions load (``definitions``). Dagster's backfill daemon counts
#: a planned partition that was not materialized as failed, so a backfill of a group that kept a
#: switched-off asset (the UI's "Materialize all" of ``projections``) ended "completed with failures"
#: although every run succeeded; the jobs leave this group out for the same reason.
SWITCHED_OFF_GROUP = "switched_off"

#: Asset tag of a switched-off asset: the switch that is off (the asset's page shows it; the UI's
#: asset selection ``tag:fabric/off`` finds them all).
SWITCH_TAG = "fabric/off"


def switched_off(config) -> tuple[str, ...]:
    """The projections ``config`` (a ``FabricConfig``) switches off, in graph order."""
    return tuple(p.key for p in PROJECTIONS if not p.enabled(config))


def switched_off_below(keys: Iterable[str], config) -> tuple[str, ...]:
    """The switched-off projections made from ``keys`` (directly, or through other switched-off
    ones), in graph order: what is not made, because a switch is off, once ``keys`` are written."""
    reached, below = set(keys), []
    for p in PROJECTIONS:  # graph order: every upstream of p is seen before p
        if not p.enabled(config) and set(p.upstream) & reached:
            reached.add(p.key)
            below.append(p.key)
    return tuple(below)


def _checks(projections: Iterable[Projection]) -> tuple[str, ...]:
    return tuple(c.name for p in projections for c in p.checks)


#: Every verdict a parse needs before activation: the checks of the parse-job stages.
REQUIRED_VERDICTS: tuple[str, ...] = _checks(p for p in PROJECTIONS if p.stage is not Stage.ANNOTATIONS)

#: Verdicts recorded by the assets that parse, not chunk: a re-chunk keeps them.
CANONICAL_VERDICTS: tuple[str, ...] = _checks(p for p in PROJECTIONS if p.stage is Stage.CANONICAL)

#: The annotation stage's projections (``annotation_job``).
ANNOTATION_PROJECTIONS: tuple[str, ...] = tuple(p.key for p in PROJECTIONS if p.stage is Stage.ANNOTATIONS)

#: The annotation stage's verdict (``annotations``): it gates only when annotation is required.
(ANNOTATION_VERDICT,) = _checks(p for p in PROJECTIONS if p.stage is Stage.ANNOTATIONS)

#: What ``rechunk_job`` recomputes: chunks and every parse-job projection made from them.
RECHUNKED: tuple[str, ...] = tuple(p.key for p in downstream_of("chunks") if p.stage is Stage.PROJECTIONS)

#: Verdicts a re-chunk recomputes (``rechunk_job``'s assets, and annotation of the new windows).
RECHUNK_VERDICTS: tuple[str, ...] = _checks(downstream_of("chunks"))

#: Projections computed by an encoder from stored chunks/windows: a model change recomputes exactly these.
MODEL_PROJECTIONS: tuple[str, ...] = tuple(p.key for p in PROJECTIONS if p.model_projection)

#: Tables rewritten for parses that are already active: a new version of one publishes a release even
#: when the active set is unchanged.
POST_ACTIVATION_TABLES: tuple[str, ...] = tuple(p.table for p in PROJECTIONS
                                                if p.rewritten_after_activation and p.table)

#: What the release reads (its verdicts gate, its table versions are pinned): the ``release`` deps.
RELEASE_INPUTS: tuple[str, ...] = tuple(p.key for p in PROJECTIONS if p.read_by_release)

#: Vector table → the verdict carrying each parse's vector digest (the release records their table digest).
VECTOR_DIGEST_VERDICTS: dict[str, str] = {p.key: c.name for p in PROJECTIONS for c in p.checks
                                          if c.digest is Digest.VECTORS}

#: The verdict whose ``digest`` fingerprints a parse's lexical documents.
(LEXICAL_VERDICT,) = (c.name for p in PROJECTIONS for c in p.checks if c.digest is Digest.LEXICAL)


def code_version(key: str, identities: Mapping[Identity, str]) -> str | None:
    """The code version of asset ``key``: its code's version, then ``:`` and the value of its
    :class:`Identity` under the configuration (``identities``, see ``model_identity.identities``)."""
    p = _BY_KEY.get(key)
    if p is None or p.identity is None:
        return p.code_version if p else None
    return f"{p.code_version}:{identities[p.identity]}"
