"""Cost accounting of one annotation batch: chains that failed, items dropped as ungrounded, calls,
tokens, memo hits and wall time (:func:`~fabric_assets.annotations.producer.annotate_parse`
returns an :class:`AnnotationStats`; the ``annotations`` asset reports it as metadata)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # prompts imports the openai package; accounting needs only the name
    from fabric_assets.annotations.prompts import ChainName

FailureReason = Literal["malformed-output", "call-failed"]


@dataclass(frozen=True)
class ChainFailure:
    """A chain of one excerpt that exhausted a retry budget (nothing of it is stored).

    ``reason``: ``malformed-output`` (``1 + malformed_retries`` attempts were malformed) or
    ``call-failed`` (a call failed after its ``call_retries``, or with a non-retryable status);
    ``detail`` is the last error (never the API key); ``attempts`` counts chain attempts.
    """

    excerpt_id: str
    excerpt_ordinal: int
    chain: ChainName
    reason: FailureReason
    detail: str
    attempts: int


@dataclass(frozen=True)
class DroppedCounts:
    """Model-returned items dropped because they did not match the excerpt (calls of this batch
    only; memo hits add nothing). ``relations`` counts relations with an ungrounded subject or
    object or left without a grounded quote."""

    entities: int = 0
    statements: int = 0
    quotes: int = 0
    relations: int = 0

    @property
    def total(self) -> int:
        return self.entities + self.statements + self.quotes + self.relations


@dataclass(frozen=True)
class AnnotationStats:
    """Cost accounting of one :func:`annotate_parse` batch.

    Attributes
    ----------
    excerpts : int
        Excerpts of the parse.
    chains : int
        Excerpt × chain pairs (3 per excerpt).
    chains_completed : int
        Pairs with stored output, fresh or from the memo (``chains - len(failures)``).
    memo_hits : int
        Pairs answered by the memo (including keys completed earlier in the same batch).
    calls : int
        HTTP requests sent (every attempt, retries included).
    prompt_tokens, completion_tokens : int
        Sums of the replies' ``usage`` (malformed replies included).
    replies_without_usage : int
        Replies that carried no ``usage``.
    malformed_retries : int
        Chain restarts after malformed output.
    call_retries : int
        Retried requests (429, 5xx, timeouts, connection failures).
    dropped_ungrounded : DroppedCounts
    annotations : int
        Rows returned.
    failures : tuple of ChainFailure
        Exhausted chains, in excerpt then chain order.
    wall_s : float
        Wall time of the batch, seconds.
    call_time_s : float
        Wall time inside requests and retry waits, summed over concurrent calls, seconds.
    """

    excerpts: int
    chains: int
    chains_completed: int
    memo_hits: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    replies_without_usage: int
    malformed_retries: int
    call_retries: int
    dropped_ungrounded: DroppedCounts
    annotations: int
    failures: tuple[ChainFailure, ...]
    wall_s: float
    call_time_s: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (e.g. for Dagster materialisation metadata)."""
        out = asdict(self)
        out["failures"] = [asdict(f) for f in self.failures]
        out["dropped_ungrounded"] = {**asdict(self.dropped_ungrounded), "total": self.dropped_ungrounded.total}
        return out
