"""What makes one chunk a word match: the rule the word channel applies to each member of a
matched context window, and the scan fallback applies to every chunk, so that the same query
over the same release matches the same chunks whether the index serves or not.

A chunk matches when it holds at least one evidence token (a query word that is not a function
word, or a token of a quoted phrase: :func:`fabric_query.channels.function_words.content_tokens`),
every quoted phrase (:meth:`ChunkRule.holds_phrase`: alone, or across its seam with the chunk
before or after it in its document's reading order), no excluded word sequence and no excluded
text in a script without spaces. A phrase whose words are cut by a seam is held by both chunks of
the seam, whether the seam is inside one context window or between two (the word channel finds
the second kind by :func:`seam_windows`).

:func:`substring_admits` is the substring channel's rule for one chunk (exact character
sequences, per chunk document), which the scan applies for a query with text in a script without
spaces, as the index runs that channel beside the word channel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from fabric_query.channels.function_words import content_tokens
from fabric_query.querylang import ParsedQuery
from fabric_resources.text_folding import UNSPACED


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


def crosses(before: Sequence[str], after: Sequence[str], seq: Sequence[str]) -> bool:
    """``seq`` runs from the end of ``before`` into the start of ``after`` (at least one token on
    each side).

    >>> crosses(["x", "keeper"], ["lit", "the", "y"], ["keeper", "lit", "the"])
    True
    >>> crosses(["keeper", "x"], ["lit"], ["keeper", "lit"])
    False
    """
    n = len(seq)
    return any(len(before) >= k and len(after) >= n - k and tuple(before[len(before) - k:]) == tuple(seq[:k])
               and tuple(after[:n - k]) == tuple(seq[k:]) for k in range(1, n))


#: Chunk ID → its word tokens (:func:`fabric_query.channels.lexical.word_tokens`), or ``None``
#: where there is no such chunk.
TokensOf = Callable[[str | None], Sequence[str] | None]


@dataclass(frozen=True)
class ChunkRule:
    """The word channel's per-chunk rule for one query (module docstring).

    ``evidence``: tokens a chunk must hold one of; ``phrases``: each quoted phrase's word tokens
    (phrases without any, ``"..."``, ask for nothing: the index has no query for them);
    ``excluded``: word-token sequences (a chunk holding one is dropped; an exclusion in a script
    without spaces is in ``banned`` instead); ``banned``: excluded text in a script without spaces,
    as its substring tokens joined (a chunk whose joined substring tokens hold it is dropped).
    """

    evidence: frozenset[str]
    phrases: tuple[tuple[str, ...], ...]
    excluded: tuple[tuple[str, ...], ...]
    banned: frozenset[str]

    @classmethod
    def of(cls, parsed: ParsedQuery, query_tokens: Sequence[str], function_words: frozenset[str] | None,
           word_tokens: Callable[[str], list[str]], substring_query_tokens: Callable[[str], list[str]]) -> "ChunkRule":
        """The rule of ``parsed`` whose free-text word tokens are ``query_tokens`` (stop words
        already dropped where configured); ``function_words`` ``None``: every query token is evidence."""
        phrases = tuple(seq for seq in (tuple(word_tokens(p)) for p in parsed.phrases) if seq)
        evidence = (content_tokens(query_tokens, [t for p in phrases for t in p], function_words)
                    if function_words is not None else set(query_tokens) | {t for p in phrases for t in p})
        excluded = tuple(seq for seq in (tuple(word_tokens(e)) for e in parsed.excluded if not UNSPACED.search(e))
                         if seq)
        banned = frozenset("".join(substring_query_tokens(e)) for e in parsed.excluded if UNSPACED.search(e)) - {""}
        return cls(frozenset(evidence), phrases, excluded, banned)

    @property
    def needs_sequence(self) -> bool:
        """Whether :meth:`admits` reads the chunk's token sequence (else its token set suffices)."""
        return bool(self.phrases or self.excluded or self.banned)

    def holds_phrase(self, tokens: Sequence[str], seq: Sequence[str], before: Callable[[], Sequence[str] | None],
                     after: Callable[[], Sequence[str] | None]) -> bool:
        """A chunk of ``tokens`` holds phrase ``seq``: alone, or across its seam with the chunk
        ``before()`` or ``after()`` it in reading order (``None``: no such chunk). Both chunks of a
        seam hold it; each holds a part (trial 13c: a phrase cut by a chunk boundary found nothing)."""
        if contains(tokens, seq):
            return True
        if len(seq) < 2:
            return False
        prev = before()
        if prev is not None and crosses(prev, tokens, seq):
            return True
        nxt = after()
        return nxt is not None and crosses(tokens, nxt, seq)

    def admits(self, token_set: frozenset[str] | set[str] | Sequence[str], tokens: Callable[[], Sequence[str]],
               compact: Callable[[], str], before: Callable[[], Sequence[str] | None],
               after: Callable[[], Sequence[str] | None]) -> bool:
        """Whether a chunk is a word match: ``token_set`` its word tokens (any container),
        ``tokens()`` their sequence, ``compact()`` its substring tokens joined, ``before()`` and
        ``after()`` the word tokens of the chunks beside it in reading order (asked only when needed)."""
        if self.evidence.isdisjoint(token_set):
            return False
        if not self.needs_sequence:
            return True
        seq = tokens()
        if any(contains(seq, e) for e in self.excluded):
            return False
        if self.banned:
            text = compact()
            if any(b in text for b in self.banned):
                return False
        return all(self.holds_phrase(seq, p, before, after) for p in self.phrases)


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
