"""Quoted phrases cut by the boundary of two context windows.

The word field holds one document per context window (a run of whole chunks), so a phrase query
matches a phrase inside a window, across the seam of two of its chunks included, but never one
that runs from a window's last chunk into the next window's first: neither window document holds
it (trial 15b: nothing found, no reason given). :func:`seam_windows` finds such windows at query
time, without another index layout: every occurrence of a phrase across a window seam holds the
phrase's rarest token (fewest window documents) in one of the seam's two chunks, so the windows
holding that token are searched, and the seams at their two ends checked token by token.

The search reads at most ``cap`` windows per phrase; a phrase whose rarest token is in more
(every token of it common: ``"to be or not to be"``) is reported unchecked, with the windows
it did check.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import tantivy

from fabric_query.channels.chunk_rule import ReadingOrder, crosses
from fabric_query.release import ProjectionUnavailable
from fabric_resources.lexical_index import OpenIndex
from fabric_resources.schema import INDEX_FIELD_PARSE_ID, INDEX_FIELD_WORD

#: Windows read per phrase when looking for it across window seams (each costs a stored-document
#: read, memoized per generation, and the word tokens of its two end chunks).
SEAM_WINDOWS_CHECKED = 2000


@dataclass(frozen=True)
class SeamWindows:
    """Windows holding a phrase across their seam with the window beside them: window ID → member
    chunk IDs (reading order); ``unchecked``: the phrases (word tokens joined by a space) whose
    rarest token is in more windows than were checked."""

    windows: dict[str, tuple[str, ...]]
    unchecked: tuple[str, ...] = ()


def seam_windows(index: OpenIndex, phrases: Sequence[Sequence[str]], eligible: set[str] | None,
                 reading: ReadingOrder, members_at: Callable[[tantivy.DocAddress], tuple[str, tuple[str, ...]]],
                 tokens_of: Callable[[str], Sequence[str]], cap: int = SEAM_WINDOWS_CHECKED) -> SeamWindows:
    """The windows of eligible parses that hold a phrase of ``phrases`` (word-token sequences, two
    tokens or more) only across a window seam, both windows of each such seam.

    ``members_at``: a window document's (ID, members) by its address; ``tokens_of``: a chunk's word
    tokens. Windows are checked in tantivy's order of the rarest token's BM25 (a stable order)."""
    searcher = index.searcher
    found: dict[str, tuple[str, ...]] = {}
    unchecked: list[str] = []
    for seq in phrases:
        if len(seq) < 2:
            continue
        rarest = min(sorted(set(seq)), key=index.word_doc_freq)
        query = tantivy.Query.term_query(index.schema, INDEX_FIELD_WORD, rarest)
        if eligible is not None:
            query = tantivy.Query.boolean_query([
                (tantivy.Occur.Must, query),
                (tantivy.Occur.Must, tantivy.Query.term_set_query(index.schema, INDEX_FIELD_PARSE_ID, sorted(eligible)))])
        hits = searcher.search(query, limit=cap + 1).hits
        if len(hits) > cap:
            unchecked.append(" ".join(seq))
            hits = hits[:cap]
        for _, addr in hits:
            wid, members = members_at(addr)
            first, last = members[0], members[-1]
            prev = reading.beside(first, -1)
            if prev is not None and crosses(tokens_of(prev), tokens_of(first), seq):
                pw, pm = reading.window(prev)
                found[pw] = pm
                found[wid] = members
            nxt = reading.beside(last, 1)
            if nxt is not None and crosses(tokens_of(last), tokens_of(nxt), seq):
                nw, nm = reading.window(nxt)
                found[wid] = members
                found[nw] = nm
    return SeamWindows(found, tuple(unchecked))


class ViewReading:
    """:class:`ReadingOrder` over a release view: its chunks sorted by (parse, ordinal) and its
    context windows (a chunk no window covers is a window of its own, as the index builds it)."""

    def __init__(self, view) -> None:
        self._view = view

    def beside(self, chunk_id: str, step: int) -> str | None:
        view = self._view
        row = view.chunk_index.get(chunk_id)
        if row is None:
            return None
        other = row + step
        if not 0 <= other < view.chunks.num_rows:
            return None
        pids = view.chunk_parse_ids
        if pids[other] != pids[row]:
            return None
        return view.chunks.column("chunk_id")[other].as_py()

    def window(self, chunk_id: str) -> tuple[str, tuple[str, ...]]:
        try:
            return self._view.context_window_of[chunk_id]
        except (KeyError, ProjectionUnavailable):  # no window projection: each chunk its own window
            return chunk_id, (chunk_id,)
