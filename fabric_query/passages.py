"""Passage assembly: ranked hit chunks → passages cut from their context windows.

A passage is a run of consecutive fine chunks of one context window, in reading
order, grown around a hit chunk under two caps — ``max_tokens`` word pieces
(chunk token counts summed) and ``max_units`` distinct canonical units — and
flagged ``truncated`` when its window holds chunks it left out. Policy
``passages-v1`` (after Data Store seed 003, section 6 "Passages" and
"Final results and assembly"):

1. hits are taken in rank order;
2. a hit whose chunk already lies in a passage joins that passage (no second copy);
3. otherwise a passage grows from the hit chunk, alternately taking the next and
   the previous chunk of the window while both caps hold, never taking a chunk that
   another passage already holds (so passages never overlap).

The seed's "merge overlapping passages when they fit" needs no step of its own here:
a passage only stops growing towards a neighbour when the next chunk breaks a cap, so
two adjacent passages of one window never fit together (a test checks this), and a
hit that falls inside an earlier passage joins it instead of forming a second copy.

Every decision is written to the assembly trace. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

POLICY = "passages-v1"


@dataclass(frozen=True)
class MemberChunk:
    """One fine chunk of a window. ``fragments``: dicts with unit_id/start_char/end_char/..."""

    chunk_id: str
    text: str
    fragments: tuple[dict, ...]
    token_count: int


@dataclass(frozen=True)
class HitWindow:
    """A ranked hit and the window around it (``members`` in reading order; the hit is one of them)."""

    rank: int
    chunk_id: str
    window_id: str | None
    members: tuple[MemberChunk, ...]


@dataclass
class AssembledPassage:
    window_id: str | None
    members: list[MemberChunk]  # consecutive, reading order
    first: int  # index of members[0] in the window
    window_size: int
    hit_ranks: list[int] = field(default_factory=list)
    hit_chunk_ids: list[str] = field(default_factory=list)

    @property
    def last(self) -> int:
        return self.first + len(self.members) - 1

    @property
    def token_count(self) -> int:
        return sum(m.token_count for m in self.members)

    @property
    def truncated(self) -> bool:
        return len(self.members) < self.window_size

    @property
    def chunk_ids(self) -> list[str]:
        return [m.chunk_id for m in self.members]


def _units(members: list[MemberChunk]) -> set[str]:
    return {f["unit_id"] for m in members for f in m.fragments}


def _fits(members: list[MemberChunk], max_tokens: int, max_units: int) -> bool:
    return sum(m.token_count for m in members) <= max_tokens and len(_units(members)) <= max_units


def assemble(hits: list[HitWindow], max_tokens: int, max_units: int) -> tuple[list[AssembledPassage], dict]:
    """Build passages for ``hits`` (best first); return them in order of their best hit and the trace.

    A hit chunk that alone exceeds a cap still forms a one-chunk passage (the evidence is never
    dropped); the trace records it as ``over-cap``.

    Returns
    -------
    (passages, trace)
        ``trace``: ``{"policy", "max_tokens", "max_units", "passages", "tokens", "events": [...]}``;
        each event is ``{"rank", "chunk_id", "action", "passage"}`` with action one of
        ``new``, ``covered``, ``over-cap``.
    """
    passages: list[AssembledPassage] = []
    taken: dict[tuple[str | None, str], int] = {}  # (window, chunk) → passage index
    events: list[dict] = []
    for hit in hits:
        key = (hit.window_id, hit.chunk_id)
        if key in taken:
            p = passages[taken[key]]
            p.hit_ranks.append(hit.rank)
            p.hit_chunk_ids.append(hit.chunk_id)
            events.append({"rank": hit.rank, "chunk_id": hit.chunk_id, "action": "covered", "passage": taken[key]})
            continue
        members = list(hit.members)
        i = next(j for j, m in enumerate(members) if m.chunk_id == hit.chunk_id)
        lo = hi = i
        free = [(hit.window_id, m.chunk_id) not in taken for m in members]
        grow = True
        while grow:
            grow = False
            for cand in (hi + 1, lo - 1):  # next first: reading continues forward
                if 0 <= cand < len(members) and free[cand]:
                    new_lo, new_hi = min(lo, cand), max(hi, cand)
                    if _fits(members[new_lo:new_hi + 1], max_tokens, max_units):
                        lo, hi, grow = new_lo, new_hi, True
        action = "new" if _fits(members[lo:hi + 1], max_tokens, max_units) else "over-cap"
        passage = AssembledPassage(hit.window_id, members[lo:hi + 1], lo, len(members), [hit.rank], [hit.chunk_id])
        passages.append(passage)
        target = len(passages) - 1
        for m in passages[target].members:
            taken[(hit.window_id, m.chunk_id)] = target
        events.append({"rank": hit.rank, "chunk_id": hit.chunk_id, "action": action, "passage": target})
    trace = {
        "policy": POLICY, "max_tokens": max_tokens, "max_units": max_units, "passages": len(passages),
        "tokens": sum(p.token_count for p in passages), "events": events,
    }
    return passages, trace
