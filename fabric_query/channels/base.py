"""The channel protocol: what a retrieval channel declares, and what one run of it returns.

A channel ranks chunk IDs of the pinned release for one query, choosing only among the eligible
parses (filters apply before ranking), best first with ties broken by chunk ID. The pipeline runs
the registered channels (:mod:`fabric_query.channels.registry`) that are selected and
:meth:`~Channel.applies`, in registry order, and fuses what they return.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from fabric_query.context import QueryContext
    from fabric_resources.config import FusionMethod, QueryConfig

ChannelResult = list[tuple[str, float]]


def ranked(pairs: list[tuple[str, float]], depth: int) -> ChannelResult:
    """Sort by score descending, then chunk ID ascending (a total order), and cut to ``depth``."""
    return sorted(pairs, key=lambda p: (-p[1], p[0]))[:depth]


@dataclass(frozen=True)
class ChannelRun:
    """One channel's answer to one query.

    Attributes
    ----------
    ranking
        ``(chunk_id, score)`` best first, ties by chunk ID, at most ``ctx.depth``; the score is
        the channel's own (BM25, cosine, RRF over routes), never comparable across channels.
    provenance
        Chunk ID → how the channel found it (JSON-ready), for chunks of ``ranking`` (may be empty).
    skipped
        Why the channel could not serve the pinned release (``"<reason>: <table>: <detail>"``);
        a skipped channel ranks nothing and is reported in ``EvidencePack.skipped_channels``.
    fallback_reason
        ``EvidencePack.fallback_reason`` as this channel's answer implies it (the lexical
        channels: the scan fallback's reason, or ``visible-sources-only``).
    dense_fallback_reason
        ``EvidencePack.dense_fallback_reason``: why a dense channel answered with the exact
        product where the configuration wants the release's ANN index (``None``: nothing substituted).
    dense_search
        How a dense channel found its candidates: ``"exact"`` or ``"ann"`` (``None``: not a dense channel).
    dense_left_out
        Visible parses a dense channel left out because their vector rows do not give the digest
        the release recorded for them (never ranked; their chunks stay findable lexically).
    dense_index_left_out
        Those of ``dense_left_out`` whose damage is the ANN index's own rows
        (:attr:`fabric_query.dense_search.DenseSource.index_left_out`).
    """

    ranking: ChannelResult = field(default_factory=list)
    provenance: Mapping[str, Any] = field(default_factory=dict)
    skipped: str | None = None
    fallback_reason: str | None = None
    dense_fallback_reason: str | None = None
    dense_search: str | None = None
    dense_left_out: frozenset[str] = frozenset()
    dense_index_left_out: frozenset[str] = frozenset()

    @classmethod
    def skip(cls, reason: str) -> "ChannelRun":
        return cls(skipped=reason)


@runtime_checkable
class Channel(Protocol):
    """A retrieval channel.

    Attributes
    ----------
    name
        Stable name: the key in ``EvidencePack.channels_run``, ``Hit.channels``,
        ``query.channel_weights`` / ``convex_weights`` and ``search(..., channels=...)``.
    stage
        The timing stage it is measured under (``EvidencePack.timings``); consecutive channels
        of one stage share one lap.
    hard_constraint_carrier
        True when every chunk it ranks satisfies the query's required phrases and excluded terms
        (the lexical channels). When the query has such constraints, the rankings of the other
        channels keep only chunks some carrier ranked.
    fallback
        Name of the channel that answers in its place when it cannot (``None``: none); naming this
        channel in ``search(..., channels=...)`` selects its fallback too.
    """

    name: str
    stage: str
    hard_constraint_carrier: bool
    fallback: str | None

    def applies(self, ctx: "QueryContext") -> bool:
        """True when the channel has something to rank for this query and release."""
        ...

    def runs_beside(self, ctx: "QueryContext") -> bool:
        """True when the channel applies and the pipeline should start :meth:`run` on a worker
        thread as the query opens, beside the channels before it
        (:meth:`QueryContext.in_background`). Asked before any channel runs, so it must not do
        another channel's work (a lexical channel's :meth:`applies` searches the index). Only for a
        run that reads nothing another channel computes for the query, and whose work leaves the
        GIL and a core free; otherwise running beside costs more than it saves."""
        ...

    def run(self, ctx: "QueryContext") -> ChannelRun:
        """Rank; a projection that cannot serve gives :meth:`ChannelRun.skip`, never an exception."""
        ...

    def fusion(self, config: "QueryConfig") -> "FusionMethod | None":
        """The fusion method to use when this channel ran (its weights were tuned for that mix),
        or ``None`` for no preference (the pipeline then fuses by RRF)."""
        ...


class RunsInTurn:
    """:meth:`Channel.runs_beside` for the channels that always run in their turn (the lexical
    ones: other channels' ``applies`` may need their search; the graph: its work holds the GIL)."""

    def runs_beside(self, ctx: "QueryContext") -> bool:
        return False
