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

A phrase in a script without spaces (``"灯して潮"``) cut by any seam, inside a window or
between two, is the same problem at another grain: the word field's bigrams stop at every
chunk's end (the window joins its members with a blank line), so the bigram spanning the seam
exists nowhere. Such a phrase is looked for through the substring field's chunk documents
(one position per character), by its rarest character, and held as characters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import tantivy

from fabric_query.channels.chunk_rule import GAP, ChunkRule, ReadingOrder, spanning
from fabric_query.release import ProjectionUnavailable
from fabric_resources.lexical_index import OpenIndex
from fabric_resources.schema import INDEX_FIELD_CHUNK_ID, INDEX_FIELD_PARSE_ID, INDEX_FIELD_SUBSTRING, INDEX_FIELD_WORD

#: Windows read per phrase when looking for it across window seams (each costs a stored-document
#: read, memoized per generation, and the word tokens of its two end chunks).
SEAM_WINDOWS_CHECKED = 1000


@dataclass(frozen=True)
class SeamWindows:
    """Windows holding a phrase across their seam with the window beside them: window ID → member
    chunk IDs (reading order); ``unchecked``: the phrases (word tokens joined by a space) whose
    rarest token is in more windows than were checked."""

    windows: dict[str, tuple[str, ...]]
    unchecked: tuple[str, ...] = ()


def _eligible(index: OpenIndex, query: tantivy.Query, eligible: set[str] | None) -> tantivy.Query:
    if eligible is None:
        return query
    return tantivy.Query.boolean_query([
        (tantivy.Occur.Must, query),
        (tantivy.Occur.Must, tantivy.Query.term_set_query(index.schema, INDEX_FIELD_PARSE_ID, sorted(eligible)))])


def seam_windows(index: OpenIndex, rule: ChunkRule, eligible: set[str] | None, reading: ReadingOrder,
                 members_at: Callable[[tantivy.DocAddress], tuple[str, tuple[str, ...]]],
                 tokens_of: Callable[[str], Sequence[str]], substrings_of: Callable[[str], Sequence[str]],
                 cap: int | None = None,
                 prefetch: Callable[[list[str]], object] | None = None) -> SeamWindows:
    """The windows of eligible parses where a phrase of ``rule`` may be held only across a seam
    that no window document's phrase query sees: both windows of a window seam (word tokens), and
    the windows of both chunks of any seam where a phrase in a script without spaces is cut (its
    characters: the word field's bigram across the seam does not exist).

    ``members_at``: a window document's (ID, members) by its address; ``tokens_of`` and
    ``substrings_of``: a chunk's word and substring tokens; ``prefetch`` (chunk IDs) is called with
    the chunks of every seam before they are read (a view keeping text on disk reads them at once).
    Documents are read in tantivy's order of the rarest token's BM25 (a stable order)."""
    cap = SEAM_WINDOWS_CHECKED if cap is None else cap
    searcher = index.searcher
    found: dict[str, tuple[str, ...]] = {}
    unchecked: list[str] = []

    def add(*chunk_ids: str) -> None:
        for c in chunk_ids:
            w, m = reading.window(c)
            found[w] = m

    for seq, chars in zip(rule.phrases, rule.characters):
        if chars is not None:  # chunk documents holding the rarest character, each seam of theirs checked
            if len(chars) < 2:
                continue
            rarest = min(sorted(set(chars)), key=lambda t: searcher.doc_freq(INDEX_FIELD_SUBSTRING, t))
            query = tantivy.Query.term_query(index.schema, INDEX_FIELD_SUBSTRING, rarest)
            hits = searcher.search(_eligible(index, query, eligible), limit=cap + 1).hits
            if len(hits) > cap:
                unchecked.append("".join(chars))
            seams = []
            for _, addr in hits[:cap]:
                c = searcher.doc(addr)[INDEX_FIELD_CHUNK_ID][0]
                prev, nxt = reading.beside(c, -1), reading.beside(c, 1)
                seams += [(prev, c)] if prev is not None else []
                seams += [(c, nxt)] if nxt is not None else []
            if prefetch is not None:
                prefetch(list(dict.fromkeys(c for pair in seams for c in pair)))
            for left, right in seams:
                add(*_across(left, right, chars, substrings_of, reading))
            continue
        if len(seq) < 2:
            continue
        rarest = min(sorted(set(seq) - {GAP}), key=index.word_doc_freq)
        query = tantivy.Query.term_query(index.schema, INDEX_FIELD_WORD, rarest)
        hits = searcher.search(_eligible(index, query, eligible), limit=cap + 1).hits
        if len(hits) > cap:
            unchecked.append(" ".join(seq))
        seams = []  # (left chunk, right chunk) at each end of each window found
        for _, addr in hits[:cap]:
            _, members = members_at(addr)
            prev, nxt = reading.beside(members[0], -1), reading.beside(members[-1], 1)
            seams += [(prev, members[0])] if prev is not None else []
            seams += [(members[-1], nxt)] if nxt is not None else []
        if prefetch is not None:  # one read of every chunk checked, not one per chunk
            prefetch(list(dict.fromkeys(c for pair in seams for c in pair)))
        for left, right in seams:
            add(*_across(left, right, seq, tokens_of, reading))
    return SeamWindows(found, tuple(unchecked))


def _across(left: str, right: str, seq: Sequence[str], tokens_of: Callable[[str], Sequence[str]],
            reading: ReadingOrder) -> set[str]:
    """The chunks an occurrence of ``seq`` runs through where it spans the seam between chunk
    ``left`` and chunk ``right`` (reading ``seq``'s length less one tokens on each side, through as
    many chunks as that takes: a phrase longer than a chunk)."""
    def side(start: str, direction: int) -> list[tuple[str, Sequence[str]]]:
        out, got, c = [], 0, start
        while c is not None and got < len(seq) - 1:
            tokens = tokens_of(c)
            out.append((c, tokens))
            got += len(tokens)
            c = reading.beside(c, direction)
        return out

    before = side(left, -1)[::-1]
    boundary = sum(len(t) for _, t in before)
    return spanning([*before, *side(right, 1)], seq, boundary, boundary)


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
