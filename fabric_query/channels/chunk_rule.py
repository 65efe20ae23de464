"""What makes one chunk a word match: the rule the word channel applies to each member of a
matched context window, and the scan fallback applies to every chunk, so that the same query
over the same release matches the same chunks whether the index serves or not.

A chunk matches when it holds at least one evidence token (a query word that is not a function
word, or a token of a quoted phrase: :func:`fabric_query.channels.function_words.content_tokens`),
every quoted phrase (:meth:`ChunkRule.holds_phrase`: alone, or running from it into the chunk
before or after it in its document's reading order, through several chunks if the phrase is
longer than one), no excluded word sequence and no excluded text in a script without spaces
(:meth:`ChunkRule.excludes`). A phrase cut by a seam is held by every chunk it runs through,
whether the seam is inside one context window or between two (the word channel finds the second
kind, and phrases without spaces cut anywhere, by
:func:`fabric_query.channels.window_seams.seam_windows`); a phrase without spaces is held across
a seam as characters (its substring tokens), since the word field's bigrams stop at each chunk's end.

:func:`substring_admits` is the substring channel's rule for one chunk (exact character
sequences, per chunk document), which the scan applies for a query with text in a script without
spaces, as the index runs that channel beside the word channel; the exclusions of
:meth:`ChunkRule.excludes` hold for its hits too.

By design the rule is per chunk and exact: an exclusion drops a chunk that holds it itself (a
seam never excludes), and scores are the channels' own (the scan has no BM25 statistics).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from fabric_query.channels.function_words import content_tokens
from fabric_query.querylang import ParsedQuery
from fabric_resources.text_folding import UNSPACED


#: An empty position of the word field: a word of 255 bytes or more, which its ``remove_long``
#: filter drops while keeping its position (``fabric_query.channels.lexical.sequence_tokens``).
GAP = "\x00"


def contains(tokens: Sequence[str], seq: Sequence[str]) -> bool:
    """``seq`` occurs in ``tokens`` as consecutive tokens (a phrase query over one chunk).

    >>> contains(["a", "b", "c"], ["b", "c"]), contains(["a", "b", "c"], ["a", "c"])
    (True, False)
    """
    n = len(seq)
    if not n:
        return True
    first = seq[0]
    return any(tokens[i] == first and tuple(tokens[i:i + n]) == tuple(seq) for i in range(len(tokens) - n + 1))


def gather(tokens_at: Callable[[int], Sequence[str] | None], need: int, direction: int) -> list[tuple[int, Sequence[str]]]:
    """The chunks at steps ``direction``, ``2 * direction``, … of ``tokens_at`` (``None``: no such
    chunk) until they hold ``need`` tokens or none is left, as (step, tokens) in reading order."""
    out, got, step = [], 0, direction
    while got < need:
        tokens = tokens_at(step)
        if tokens is None:
            break
        out.append((step, tokens))
        got += len(tokens)
        step += direction
    return out if direction > 0 else out[::-1]


def spanning(items: Sequence[tuple[object, Sequence[str]]], seq: Sequence[str], start: int, end: int) -> set[object]:
    """The keys of ``items`` (key, tokens), read as one token sequence in order, touched by an
    occurrence of ``seq`` that overlaps positions ``[start, end)`` of that sequence.

    >>> sorted(spanning([("a", ["x", "keeper"]), ("b", ["lit"]), ("c", ["the", "lamp"])],
    ...                 ["keeper", "lit", "the"], 2, 3))
    ['a', 'b', 'c']
    """
    flat: list[str] = []
    owner: list[object] = []
    for key, tokens in items:
        flat += tokens
        owner += [key] * len(tokens)
    n = len(seq)
    touched: set[object] = set()
    for p in range(max(0, start - n + 1), min(end, len(flat) - n + 1)):
        if flat[p] == seq[0] and tuple(flat[p:p + n]) == tuple(seq):
            touched.update(owner[p:p + n])
    return touched


def held_here(tokens_at: Callable[[int], Sequence[str] | None], seq: Sequence[str]) -> bool:
    """The chunk at step 0 of ``tokens_at`` holds a part of an occurrence of ``seq`` that runs from
    it into the chunk before or after it, or on through several (a phrase longer than a chunk)."""
    here = tokens_at(0)
    if not here or len(seq) < 2:
        return False
    left = gather(tokens_at, len(seq) - 1, -1)
    right = gather(tokens_at, len(seq) - 1, 1)
    if not left and not right:
        return False
    start = sum(len(t) for _, t in left)
    return 0 in spanning([*left, (0, here), *right], seq, start, start + len(here))


class Neighbourhood(Protocol):
    """A chunk's tokens and those of the chunks beside it in its document's reading order, read on
    demand: ``step`` 0 is the chunk, -1 the one before, +1 the one after (``None``: no such chunk)."""

    def words(self, step: int) -> Sequence[str] | None:
        """Word tokens (``fabric_query.channels.lexical.word_tokens``)."""

    def substrings(self, step: int) -> Sequence[str] | None:
        """Substring tokens (``fabric_query.channels.lexical.substring_tokens``)."""


@dataclass(frozen=True)
class ChunkRule:
    """The word channel's per-chunk rule for one query (module docstring).

    ``evidence``: tokens a chunk must hold one of; ``phrases``: each quoted phrase's word tokens
    (phrases without any, ``"..."``, ask for nothing: the index has no query for them);
    ``characters``: per phrase, its substring tokens where it has text in a script without spaces
    (else ``None``): such a phrase cut by a seam is held as characters, since the word field's
    bigrams stop at every chunk's end; ``excluded``: word-token sequences (a chunk holding one is
    dropped; an exclusion in a script without spaces is in ``banned`` instead); ``banned``:
    excluded text in a script without spaces, as its substring tokens joined (a chunk whose joined
    substring tokens hold it is dropped).
    """

    evidence: frozenset[str]
    phrases: tuple[tuple[str, ...], ...]
    characters: tuple[tuple[str, ...] | None, ...]
    excluded: tuple[tuple[str, ...], ...]
    banned: frozenset[str]

    @classmethod
    def of(cls, parsed: ParsedQuery, query_tokens: Sequence[str], function_words: frozenset[str] | None,
           word_tokens: Callable[[str], list[str]], substring_query_tokens: Callable[[str], list[str]]) -> "ChunkRule":
        """The rule of ``parsed`` whose free-text word tokens are ``query_tokens`` (stop words
        already dropped where configured); ``function_words`` ``None``: every query token is evidence.
        ``word_tokens`` gives a phrase's or exclusion's token sequence as the index holds it, an
        empty position as :data:`GAP` (``fabric_query.channels.lexical.phrase_tokens``)."""
        kept = [(p, tuple(word_tokens(p))) for p in parsed.phrases]
        kept = [(p, seq) for p, seq in kept if seq]
        phrases = tuple(seq for _, seq in kept)
        characters = tuple(tuple(substring_query_tokens(p)) if UNSPACED.search(p) else None for p, _ in kept)
        held = [t for p in phrases for t in p if t != GAP]
        evidence = (content_tokens(query_tokens, held, function_words)
                    if function_words is not None else set(query_tokens) | set(held))
        excluded = tuple(seq for seq in (tuple(word_tokens(e)) for e in parsed.excluded if not UNSPACED.search(e))
                         if seq)
        banned = frozenset("".join(substring_query_tokens(e)) for e in parsed.excluded if UNSPACED.search(e)) - {""}
        return cls(frozenset(evidence), phrases, characters, excluded, banned)

    def holds_phrase(self, k: int, chunk: Neighbourhood) -> bool:
        """The chunk holds phrase ``k``: alone, or across its seam with the chunk before or after
        it in reading order, or through several chunks (a phrase longer than one). Every chunk the
        phrase runs through holds it; each holds a part (trial 13c: a phrase cut by a chunk boundary
        found nothing; trial 15b: one cut by a window boundary, one in a script without spaces cut
        anywhere, or one longer than a chunk)."""
        seq = self.phrases[k]
        if contains(chunk.words(0), seq):
            return True
        chars = self.characters[k]
        if chars is not None:  # as characters: the seam cuts the bigram that spans it
            return held_here(chunk.substrings, chars)
        return held_here(chunk.words, seq)

    def excludes(self, tokens: Sequence[str], compact: Callable[[], str]) -> bool:
        """A chunk of word ``tokens`` (and substring tokens joined, ``compact()``) holds an excluded
        word sequence or excluded text without spaces. The substring channel's hits answer to it too,
        so ``守り人 keeper -keepers`` never brings back a chunk holding ``keeper`` through the
        substring channel that the word channel dropped for it (trial 15b)."""
        if any(contains(tokens, e) for e in self.excluded):
            return True
        return bool(self.banned) and any(b in compact() for b in self.banned)

    def admits(self, token_set: frozenset[str] | set[str] | Sequence[str], chunk: Neighbourhood,
               compact: Callable[[], str]) -> bool:
        """Whether a chunk is a word match: ``token_set`` its word tokens (any container), ``chunk``
        its tokens and its neighbours' (asked only when needed), ``compact()`` its substring tokens
        joined. A chunk holding every phrase is evidence enough (a phrase is asked for on purpose;
        a part cut by a seam in a script without spaces may hold none of the phrase's bigrams)."""
        if self.evidence.isdisjoint(token_set) and not any(c is not None for c in self.characters):
            return False
        if not (self.phrases or self.excluded or self.banned):
            return True
        if self.excludes(chunk.words(0), compact):
            return False
        if not self.phrases:
            return True
        return all(self.holds_phrase(k, chunk) for k in range(len(self.phrases)))


def substring_admits(tokens: Sequence[str], terms: Sequence[Sequence[str]], phrases: Sequence[Sequence[str]],
                     excluded: Sequence[Sequence[str]]) -> bool:
    """The substring channel's rule for one chunk document of substring ``tokens``: every phrase's
    sequence (when there is one), else at least one term's, and no excluded sequence, each as
    consecutive tokens of this chunk alone (empty sequences are left out beforehand, as the index
    has no query for them). See ``fabric_query.channels.lexical.build_query``."""
    if phrases:
        if not all(contains(tokens, p) for p in phrases):
            return False
    elif not any(contains(tokens, t) for t in terms):
        return False
    return not any(contains(tokens, e) for e in excluded)


class ReadingOrder(Protocol):
    """Where a chunk stands in its document: the word channel's view of reading order."""

    def beside(self, chunk_id: str, step: int) -> str | None:
        """The chunk ``step`` (-1 or +1) from ``chunk_id`` in its parse's reading order, or None."""

    def window(self, chunk_id: str) -> tuple[str, tuple[str, ...]]:
        """``chunk_id``'s window document: its ID and member chunk IDs in reading order."""
