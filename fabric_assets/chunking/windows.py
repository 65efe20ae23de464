"""Context windows and ColBERT windows: runs of whole fine chunks in reading order.

Pure functions, no I/O. The grains above fine chunks (Data Store seed 003,
section 3 "Grains") pack one parse's chunks greedily, in chunk ``ordinal``
order, under a token cap; they never split a chunk and never consult section
boundaries. A window's text is its members' texts joined by
:data:`~fabric_resources.schema.FRAGMENT_SEPARATOR`, its fragments the
concatenation of its members' fragments, its token count the sum of theirs,
so a window's text is still ``SEPARATOR.join`` of its fragments' unit slices.

Token counts are word pieces of the chunking tokenizer, as stored on each
chunk row; nothing here tokenizes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa

from fabric_resources import identity
from fabric_resources.schema import FRAGMENT_SEPARATOR, WINDOWS

#: The two window grains: ``context`` (section-guided dense, annotation excerpts) and ``colbert``.
WindowGrain = Literal["context", "colbert"]

#: Enters every window policy identity; bump it when the packing rule changes.
POLICY_VERSION = "v1"


class WindowPackingError(ValueError):
    """A fine chunk cannot join a window without being split.

    Seed 003: windows never split a chunk, and a chunk that does not fit fails the
    build. Config validation (``chunking.max_tokens <= cap - floor(cap * min_fill_ratio)``)
    makes this unreachable for chunks the fine chunker produced under the same config.
    """

    def __init__(self, chunk_id: str, token_count: int, open_tokens: int, max_tokens: int, min_tokens: int):
        self.chunk_id = chunk_id
        self.token_count = token_count
        self.open_tokens = open_tokens
        self.max_tokens = max_tokens
        self.min_tokens = min_tokens
        super().__init__(
            f"chunk {chunk_id} ({token_count} tokens) does not fit a window capped at {max_tokens} tokens "
            f"whose open run has {open_tokens} < minimum {min_tokens}: it would have to be split"
        )


@dataclass(frozen=True)
class WindowMember:
    """One fine chunk as window input (a row of ``chunks``).

    ``fragments`` are the chunk row's fragment records (``unit_id``, ``start_char``,
    ``end_char``, ``start_utf16``, ``end_utf16``), kept as they are.
    """

    chunk_id: str
    ordinal: int
    text: str
    fragments: tuple[Mapping[str, Any], ...]
    section_path: tuple[str, ...]
    token_count: int


@dataclass(frozen=True)
class Window:
    """A run of consecutive chunks; every other field derives from ``members``."""

    ordinal: int
    members: tuple[WindowMember, ...]

    @property
    def chunk_ids(self) -> tuple[str, ...]:
        return tuple(m.chunk_id for m in self.members)

    @property
    def text(self) -> str:
        return FRAGMENT_SEPARATOR.join(m.text for m in self.members)

    @property
    def fragments(self) -> tuple[Mapping[str, Any], ...]:
        return tuple(f for m in self.members for f in m.fragments)

    @property
    def section_path(self) -> tuple[str, ...]:
        return self.members[0].section_path

    @property
    def token_count(self) -> int:
        return sum(m.token_count for m in self.members)


def min_fill_tokens(max_tokens: int, min_fill_ratio: float) -> int:
    """``floor(max_tokens * min_fill_ratio)``: the smallest token count a window should reach (seed 003)."""
    return math.floor(max_tokens * min_fill_ratio)


def pack_windows(members: Sequence[WindowMember], max_tokens: int, min_fill_ratio: float) -> list[Window]:
    """Pack one parse's chunks, in reading order, into windows of at most ``max_tokens`` tokens.

    Greedy: a chunk joins the open window when the sum still fits, otherwise it opens
    the next one. End-of-document minimum-fill merge (seed 003): a final window below
    ``floor(max_tokens * min_fill_ratio)`` tokens merges into its predecessor when the
    combined run fits.

    Parameters
    ----------
    members : sequence of WindowMember
        One parse's chunks, ordinals strictly increasing (reading order).
    max_tokens : int
        Cap on a window's summed chunk token counts (``indexing.context_max_tokens`` or
        ``indexing.colbert_max_tokens``).
    min_fill_ratio : float
        ``indexing.min_fill_ratio``, in ``[0, 1)``.

    Returns
    -------
    list of Window, ``ordinal`` 0..n-1; their members, concatenated, are ``members``.

    Raises
    ------
    WindowPackingError
        If a chunk alone exceeds ``max_tokens``, or would overflow a window still below the
        minimum fill (only a split could fill it).
    ValueError
        If ordinals are not strictly increasing, a token count is negative, or ``max_tokens < 1``.
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be positive")
    floor_tokens = min_fill_tokens(max_tokens, min_fill_ratio)
    runs: list[list[WindowMember]] = []
    open_run: list[WindowMember] = []
    open_tokens = 0
    for i, m in enumerate(members):
        if i and m.ordinal <= members[i - 1].ordinal:
            raise ValueError(f"chunk ordinals not in reading order at {m.chunk_id} ({m.ordinal})")
        if m.token_count < 0:
            raise ValueError(f"negative token count on chunk {m.chunk_id}")
        if open_tokens + m.token_count > max_tokens:
            if open_tokens < floor_tokens or m.token_count > max_tokens:
                raise WindowPackingError(m.chunk_id, m.token_count, open_tokens, max_tokens, floor_tokens)
            runs.append(open_run)
            open_run, open_tokens = [], 0
        open_run.append(m)
        open_tokens += m.token_count
    if open_run:
        runs.append(open_run)
    # Under pure greedy packing the merge cannot fire (the final run's first chunk already
    # overflowed its predecessor); it is kept because the seed states it for every grain and
    # it must hold if packing ever gains other boundaries.
    if len(runs) >= 2:
        last_tokens = sum(m.token_count for m in runs[-1])
        if last_tokens < floor_tokens and last_tokens + sum(m.token_count for m in runs[-2]) <= max_tokens:
            runs[-2].extend(runs.pop())
    return [Window(i, tuple(run)) for i, run in enumerate(runs)]


def window_policy(grain: WindowGrain, max_tokens: int, min_fill_ratio: float, chunker: str) -> str:
    """Window policy identity, e.g. ``"context-v1:max512:fill0.25:" + chunker``.

    Everything that decides window boundaries enters it: the grain, the packing rule's
    version, the cap, the fill ratio (``repr``, exact) and the chunker identity (which
    already names the tokenizer and the fine cap).
    """
    return f"{grain}-{POLICY_VERSION}:max{max_tokens}:fill{min_fill_ratio!r}:{chunker}"


def window_id(parse_id: str, grain: WindowGrain, ordinal: int, policy: str, text_hash: str) -> str:
    """128-bit hex window ID, derived like chunk IDs (:func:`fabric_resources.identity.derived_id`)."""
    return identity.derived_id(f"{grain}_window", parse_id, ordinal, policy, text_hash)


def window_members(chunks: pa.Table) -> tuple[list[WindowMember], str | None]:
    """One parse's chunk rows as packer input, sorted by ``ordinal``, and their chunker identity.

    ``chunks`` needs the columns ``chunk_id``, ``ordinal``, ``text``, ``fragments``,
    ``section_path``, ``token_count`` and ``chunker``. The chunker is ``None`` when there are no rows.

    Raises
    ------
    ValueError
        If the rows carry more than one chunker identity (two chunkings of one parse).
    """
    d = chunks.sort_by("ordinal").to_pydict()
    chunkers = set(d["chunker"])
    if len(chunkers) > 1:
        raise ValueError(f"chunk rows of one parse from {len(chunkers)} chunkers: {sorted(chunkers)[:2]}")
    members = [
        WindowMember(cid, o, t, tuple(f), tuple(sp or ()), n)
        for cid, o, t, f, sp, n in zip(
            d["chunk_id"], d["ordinal"], d["text"], d["fragments"], d["section_path"], d["token_count"]
        )
    ]
    return members, (next(iter(chunkers)) if chunkers else None)


def window_rows(parse_id: str, windows: Sequence[Window], grain: WindowGrain, policy: str) -> pa.Table:
    """Rows of a ``WINDOWS`` table (``context_windows`` or ``colbert_windows``) for one parse."""
    rows = []
    for w in windows:
        text = w.text
        h = identity.text_hash(text)
        rows.append(
            {
                "parse_id": parse_id,
                "window_id": window_id(parse_id, grain, w.ordinal, policy, h),
                "ordinal": w.ordinal,
                "chunk_ids": list(w.chunk_ids),
                "text": text,
                "text_hash": h,
                "fragments": [dict(f) for f in w.fragments],
                "section_path": list(w.section_path),
                "token_count": w.token_count,
                "policy": policy,
            }
        )
    return pa.Table.from_pylist(rows, schema=WINDOWS)


def build_windows(
    parse_id: str, chunks: pa.Table, grain: WindowGrain, max_tokens: int, min_fill_ratio: float
) -> pa.Table:
    """One parse's chunk rows → its ``WINDOWS`` rows (:func:`window_members`, :func:`pack_windows`,
    :func:`window_rows`). No chunks, no windows.

    Raises
    ------
    WindowPackingError, ValueError
        As :func:`pack_windows` and :func:`window_members`.
    """
    members, chunker = window_members(chunks)
    if chunker is None:
        return WINDOWS.empty_table()
    policy = window_policy(grain, max_tokens, min_fill_ratio, chunker)
    return window_rows(parse_id, pack_windows(members, max_tokens, min_fill_ratio), grain, policy)
