"""The registered retrieval channels, in the order they run, are fused and are reported.

Adding a channel: a module in ``fabric_query/channels/`` whose channel object satisfies
:class:`~fabric_query.channels.base.Channel`, and its line in :data:`CHANNELS`.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from fabric_query.channels.base import Channel
from fabric_query.channels.dense import DENSE, DENSE_MULTILINGUAL
from fabric_query.channels.graph import GRAPH
from fabric_query.channels.lexical import SUBSTRING, WORD, lexical_serving, needs_substring_channel
from fabric_query.channels.scan import SCAN
from fabric_query.errors import InvalidArgumentError

if TYPE_CHECKING:
    from fabric_query.context import QueryContext

#: Every channel, in order: lexical (the hard-constraint carriers) first, then dense, then graph.
CHANNELS: tuple[Channel, ...] = (WORD, SUBSTRING, SCAN, DENSE, DENSE_MULTILINGUAL, GRAPH)
#: Their names, in the same order.
CHANNEL_NAMES: tuple[str, ...] = tuple(c.name for c in CHANNELS)


def select(names: Collection[str] | None) -> frozenset[str]:
    """The channels a search may run: every registered one (``None``), or ``names`` with the
    fallback of each named channel (``word`` and ``substring`` bring ``scan``: an index that
    cannot serve never gives a silent empty answer).

    Raises
    ------
    InvalidArgumentError
        ``names`` is not a collection of channel names (a ``str`` is refused, not split into
        letters), is empty, or names a channel that is not registered.
    """
    if names is None:
        return frozenset(CHANNEL_NAMES)
    if isinstance(names, (str, bytes)) or not isinstance(names, Collection):
        raise InvalidArgumentError(f"channels must be a set of channel names, got {type(names).__name__}")
    if not names:
        raise InvalidArgumentError(f"channels must name at least one of {', '.join(CHANNEL_NAMES)}")
    unknown = sorted(repr(n) for n in names if not isinstance(n, str) or n not in CHANNEL_NAMES)
    if unknown:
        raise InvalidArgumentError(f"unknown channel {', '.join(unknown)}; channels are {', '.join(CHANNEL_NAMES)}")
    chosen = set(names)
    chosen |= {c.fallback for c in CHANNELS if c.name in chosen and c.fallback is not None}
    return frozenset(chosen)


def not_applied(channel: Channel, ctx: "QueryContext") -> str:
    """Why ``channel`` does not apply (``Channel.applies`` is False) to this query and release, in
    words: said in ``skipped_channels`` when a search names only channels that do not apply, so its
    empty answer is not taken for "nothing matches"."""
    if channel is GRAPH:
        return "annotation is off (annotation.enabled): the home has no entity graph to search"
    if channel in (DENSE, DENSE_MULTILINGUAL):
        if ctx.multilingual_text and channel is DENSE:
            return "the query holds text outside the Latin script: it is routed to dense_multilingual"
        if not ctx.multilingual_text and channel is DENSE_MULTILINGUAL:
            return "the query is Latin-script text: it is routed to dense (cross-lingual retrieval is not served)"
        return "dense.multilingual is off in the configuration"
    unusable = lexical_serving(ctx).unusable
    if channel in (WORD, SUBSTRING) and unusable is not None:
        return f"the index cannot serve ({unusable.reason}); scan answers in its place"
    if channel is SUBSTRING and not needs_substring_channel(ctx.parsed):
        return "the query has no text in a script written without spaces (Chinese, Japanese, Thai...); word serves it"
    if channel is SCAN:
        return "the index serves word and substring; scan answers only in their place, when it cannot"
    return "it does not apply to this query"
