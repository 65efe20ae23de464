"""The rescoring-stage protocol: a stage re-orders the fused candidates of one query."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from fabric_query.context import QueryContext


@dataclass(frozen=True)
class Rescored:
    """What one stage made of the candidates.

    Attributes
    ----------
    ranked
        Every candidate exactly once, in the stage's order (the input order when skipped).
    scores
        Chunk ID → the stage's score, for the candidates it scored (``Hit.stage_scores``).
    candidates
        ``(chunk_id, score)`` of the scored candidates in the stage's order (``stage_candidates``).
    skipped
        Why the stage could not run on the pinned release (``EvidencePack.skipped_channels``).
    """

    ranked: list[str]
    scores: dict[str, float] = field(default_factory=dict)
    candidates: list[tuple[str, float]] = field(default_factory=list)
    skipped: str | None = None


@runtime_checkable
class RescoringStage(Protocol):
    """A stage after fusion.

    ``name``: its timing stage, ``Hit.stage_scores`` key and ``skipped_channels`` key;
    ``candidates_key``: its ``EvidencePack.stage_candidates`` key (with ``debug``).
    """

    name: str
    candidates_key: str

    def applies(self, ctx: "QueryContext") -> bool:
        """True when the stage is configured for this query."""
        ...

    def run(self, ctx: "QueryContext", ranked: list[str]) -> Rescored:
        """Re-order ``ranked`` (chunk IDs, best first, non-empty)."""
        ...
