"""The registered retrieval channels, in the order they run, are fused and are reported.

Adding a channel: a module in ``fabric_query/channels/`` whose channel object satisfies
:class:`~fabric_query.channels.base.Channel`, and its line in :data:`CHANNELS`.
"""

from __future__ import annotations

from collections.abc import Collection

from fabric_query.channels.base import Channel
from fabric_query.channels.dense import DENSE, DENSE_MULTILINGUAL
from fabric_query.channels.graph import GRAPH
from fabric_query.channels.lexical import SUBSTRING, WORD
from fabric_query.channels.scan import SCAN
from fabric_query.errors import InvalidArgumentError

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
