"""Grounding of model-returned text in an excerpt, and attribution to unit spans (pure).

Owns the source matcher of Data Store seed 003, section 3.1 ("Attribution" and the
``source_text_matches`` paragraphs):

* both texts are normalised: Unicode lower-casing (Python ``str.lower``, full case mapping like
  Rust's ``char::to_lowercase``), then only alphanumeric characters kept (``str.isalnum``:
  Unicode categories L* and N*; the seed's Rust ``char::is_alphanumeric`` also keeps the few
  combining marks with the ``Other_Alphabetic`` property, which Python drops on both sides).
  Word boundaries are ignored because extracted text may join or split words;
* an empty normalised selection fails; an exact normalised substring succeeds at once;
* otherwise the returned characters are aligned, in order, within one source interval under two
  independent budgets (:func:`edit_budgets`), by a dynamic programme keeping the minimum number
  of omitted source characters for each repair count and source end (:func:`align`).

Matching never changes either text: a match is reported as a range of the *original* source
text. Attribution (:class:`ExcerptGrounding`, :func:`support_spans`) runs the matcher over each
excerpt fragment's text alone, so a quote spanning two fragments matches neither; an item that
matches no fragment keeps every fragment (the excerpt is still its true input). An item is
grounded when it matches a fragment or, failing that, the whole excerpt text.

All offsets are Unicode scalar offsets (Python ``str`` indices), end-exclusive.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fabric_resources.identity import text_hash
from fabric_resources.offsets import utf16_offset
from fabric_resources.text_folding import UNSPACED

__all__ = [
    "EditBudgets",
    "ExcerptFragment",
    "FragmentMatch",
    "SourceMatch",
    "SupportSpan",
    "ExcerptGrounding",
    "NormalisedText",
    "align",
    "edit_budgets",
    "normalise",
    "name_matches",
    "normalise_with_origin",
    "source_text_matches",
    "support_spans",
]

_UNREACHED = np.int32(1 << 30)  # a DP state over budget; far above any omission count


def normalise(text: str) -> str:
    """Lower-cased alphanumeric characters of ``text``, in order.

    >>> normalise("The Lighthouse-Keeper, 1892!")
    'thelighthousekeeper1892'
    >>> normalise("東京タワー　(Tokyo)")
    '東京タワーtokyo'
    """
    return "".join(c for c in text.lower() if c.isalnum())


def normalise_with_origin(text: str) -> tuple[str, list[int]]:
    """:func:`normalise` plus, per normalised character, the index of the source character it
    came from (lower-casing may expand one character into several, e.g. ``"İ"`` → ``"i̇"``).

    >>> normalise_with_origin("A-b")
    ('ab', [0, 2])
    """
    lowered = text.lower()
    if len(lowered) == len(text):  # the common case: one lower-case character per character
        origin = [i for i, c in enumerate(lowered) if c.isalnum()]
        return "".join(lowered[i] for i in origin), origin
    chars: list[str] = []
    origin = []
    for i, ch in enumerate(text):
        for c in ch.lower():
            if c.isalnum():
                chars.append(c)
                origin.append(i)
    return "".join(chars), origin


@dataclass(frozen=True)
class NormalisedText:
    """A source text prepared once for many :func:`source_text_matches` calls.

    ``normalised`` is :func:`normalise` of ``text``; ``origin[k]`` the index in ``text`` of the
    character that produced ``normalised[k]``.
    """

    text: str
    normalised: str
    origin: tuple[int, ...]

    @classmethod
    def of(cls, text: str) -> "NormalisedText":
        normalised, origin = normalise_with_origin(text)
        return cls(text, normalised, tuple(origin))


@dataclass(frozen=True)
class EditBudgets:
    """Allowances of one fuzzy alignment (seed 003 §3.1, integer division):

    ``repairs`` inserted or substituted returned characters: ``min(n // 4, max(4, 3 * n // 20))``;
    ``omissions`` omitted source characters inside the interval: ``max(32, n)``.
    """

    repairs: int
    omissions: int


def edit_budgets(n: int) -> EditBudgets:
    """Budgets for a normalised returned text of ``n`` characters.

    >>> [edit_budgets(n).repairs for n in (3, 8, 20, 40, 100)]
    [0, 2, 4, 6, 15]
    >>> edit_budgets(10).omissions, edit_budgets(100).omissions
    (32, 100)
    """
    return EditBudgets(repairs=min(n // 4, max(4, 3 * n // 20)), omissions=max(32, n))


@dataclass(frozen=True)
class SourceMatch:
    """Where a selection matched: ``source[start:end]`` (original, un-normalised offsets).

    ``exact`` when the normalised selection is a substring of the normalised source;
    ``repairs`` / ``omissions`` are the edits the alignment spent (0 for exact matches).
    """

    start: int
    end: int
    exact: bool
    repairs: int = 0
    omissions: int = 0


def _layers(src: np.ndarray, sel: np.ndarray, repairs_max: int, omissions_max: int,
            anchored: bool) -> np.ndarray | None:
    """Final DP layer: ``cost[r, i]`` = fewest omissions aligning all of ``sel`` with ``r``
    repairs in an interval of ``src`` ending at ``i`` (``_UNREACHED`` where over budget).

    ``anchored`` fixes the interval start at 0 (used on reversed text to find the start);
    otherwise it starts anywhere for free. ``None`` when every state exceeds a budget early.
    """
    m = len(src)
    rows = repairs_max + 1
    idx = np.arange(m + 1, dtype=np.int32)
    cost = np.full((rows, m + 1), _UNREACHED, dtype=np.int32)
    if anchored:
        cost[0, 0] = 0
    else:
        cost[0, :] = 0
    new = np.empty_like(cost)
    over = np.empty(cost.shape, dtype=bool)
    for j in range(len(sel)):
        eq = src == sel[j]
        # match: sel[j] == src[i-1], same repair count
        new[:, 0] = _UNREACHED
        new[:, 1:] = _UNREACHED
        np.copyto(new[:, 1:], cost[:, :-1], where=eq)
        # substitution: consume src[i-1] for one repair (of an equal character: dominated)
        np.minimum(new[1:, 1:], cost[:-1, :-1], out=new[1:, 1:])
        # insertion: sel[j] is not in the source; one repair, source position unchanged
        np.minimum(new[1:], cost[:-1], out=new[1:])
        # omission sweep inside the interval: new[r, i] = min over k <= i of new[r, k] + (i - k)
        np.subtract(new, idx, out=new)
        np.minimum.accumulate(new, axis=1, out=new)
        np.add(new, idx, out=new)
        np.greater(new, omissions_max, out=over)
        new[over] = _UNREACHED
        cost, new = new, cost
        if over.all():
            return None
    return cost


def align(source: str, selection: str) -> tuple[int, int, int, int] | None:
    """Bounded-edit alignment of two *normalised* texts.

    The characters of ``selection`` (length ``n``) are aligned in order against one interval of
    ``source`` (length ``m``): a match costs nothing, a substituted or inserted returned
    character costs one repair, an omitted source character inside the interval costs one
    omission; source text outside the interval is free; there is no consecutive-edit limit. It
    passes when some alignment stays within both :func:`edit_budgets` of ``n``.

    Returns
    -------
    (start, end, repairs, omissions) or None
        The interval ``source[start:end]`` (normalised offsets) of a passing alignment with the
        fewest edits (repairs + omissions), then fewest repairs, then leftmost end, then
        latest start; ``None`` when none passes, when ``selection`` is empty, or when it needs
        more matching source characters (``n`` minus the repair budget) than ``source`` has
        (checked before any DP allocation).

    Notes
    -----
    The seed's dynamic programme: per returned character, two ``(repairs + 1, m + 1)`` int32
    layers hold the minimum omissions for each repair count and source end; the omission step
    is a running minimum, so time is ``O(n * repairs * m)`` in vectorised numpy. The start of the
    chosen interval is found by the same programme run backwards from its end, anchored there,
    over at most ``n + omissions`` characters (the longest interval the budgets allow).

    >>> align("thelighthousekeeper", "lighthuosekeeper")  # "uo": one insertion, one omission
    (3, 19, 1, 1)
    >>> align("thelighthousekeeper", "lightxousekeeper")  # one substitution
    (3, 19, 1, 0)
    >>> align("abcd" + "x" * 33 + "efgh", "abcdefgh") is None  # 33 omissions > 32
    True
    >>> align("abcd" + "x" * 32 + "efgh", "abcdefgh")
    (0, 40, 0, 32)
    """
    n, m = len(selection), len(source)
    if n == 0:
        return None
    budgets = edit_budgets(n)
    repairs_max, omissions_max = budgets.repairs, budgets.omissions
    if n - repairs_max > m:
        return None
    src = np.frombuffer(source.encode("utf-32-le"), dtype=np.uint32)
    sel = np.frombuffer(selection.encode("utf-32-le"), dtype=np.uint32)
    cost = _layers(src, sel, repairs_max, omissions_max, anchored=False)
    if cost is None:
        return None
    best: tuple[int, int, int, int] | None = None  # (edits, repairs, end, omissions)
    for r in range(repairs_max + 1):
        row = cost[r]
        end = int(np.argmin(row))  # fewest omissions, then leftmost end
        if row[end] <= omissions_max:
            key = (r + int(row[end]), r, end, int(row[end]))
            best = key if best is None or key < best else best
    if best is None:
        return None
    _, repairs, end, omissions = best
    lo = max(0, end - (n + omissions_max))
    back = _layers(src[lo:end][::-1].copy(), sel[::-1].copy(), repairs_max, omissions_max, anchored=True)
    assert back is not None  # the forward alignment, reversed, is one of its paths
    length = int(np.flatnonzero(back[repairs] == omissions)[0])  # shortest interval, latest start
    return end - length, end, repairs, omissions


def source_text_matches(source: str | NormalisedText, selection: str, *, fuzzy: bool = True) -> SourceMatch | None:
    """Whether ``selection`` (model-returned text) is grounded in ``source`` (seed 003 §3.1).

    ``source`` may be pre-normalised (:class:`NormalisedText`) when many selections are matched
    against one text. ``fuzzy=False`` skips the alignment (exact normalised matches only).

    Returns
    -------
    SourceMatch or None
        The matched range of the original source text (first exact occurrence, else the best
        bounded alignment of :func:`align`); ``None`` when ``selection`` normalises to nothing or
        does not match.

    >>> m = source_text_matches("At dusk the Lighthouse keeper climbed.", "lighthouse-keeper")
    >>> "At dusk the Lighthouse keeper climbed."[m.start:m.end], m.exact
    ('Lighthouse keeper', True)
    >>> source_text_matches("anything", "?!") is None
    True
    """
    sel = normalise(selection)
    if not sel:
        return None
    prepared = source if isinstance(source, NormalisedText) else NormalisedText.of(source)
    src, origin = prepared.normalised, prepared.origin
    at = src.find(sel)
    if at >= 0:
        return SourceMatch(origin[at], origin[at + len(sel) - 1] + 1, exact=True)
    if not fuzzy:
        return None
    found = align(src, sel)
    if found is None:
        return None
    s, e, repairs, omissions = found
    if e <= s:  # every returned character inserted; impossible while the repair budget is < n
        return None
    return SourceMatch(origin[s], origin[e - 1] + 1, exact=False, repairs=repairs, omissions=omissions)


def _joined(a: str, b: str) -> bool:
    """Whether adjacent characters ``a``, ``b`` belong to one word of a script written with spaces."""
    return a.isalnum() and b.isalnum() and not (UNSPACED.match(a) or UNSPACED.match(b))


def name_matches(source: str | NormalisedText, name: str) -> SourceMatch | None:
    """The first exact normalised occurrence of ``name`` in ``source`` that neither begins nor ends
    inside a word (a script written without spaces has no word boundary to keep), or ``None``.

    Names are held to more than :func:`source_text_matches`: a made-up short name is found inside
    other words far too often once spaces are ignored ("Ann" in "plan next").

    >>> name_matches("Plan next week with Ann.", "Ann")
    SourceMatch(start=20, end=23, exact=True, repairs=0, omissions=0)
    >>> name_matches("Plan next week.", "Ann") is None, name_matches("東京タワーへ", "タワー") is not None
    (True, True)
    """
    sel = normalise(name)
    if not sel:
        return None
    prepared = source if isinstance(source, NormalisedText) else NormalisedText.of(source)
    text, origin = prepared.text, prepared.origin
    at = prepared.normalised.find(sel)
    while at >= 0:
        start, end = origin[at], origin[at + len(sel) - 1] + 1
        if not ((start > 0 and _joined(text[start - 1], text[start]))
                or (end < len(text) and _joined(text[end - 1], text[end]))):
            return SourceMatch(start, end, exact=True)
        at = prepared.normalised.find(sel, at + 1)
    return None


@dataclass(frozen=True)
class ExcerptFragment:
    """One fragment of an excerpt: ``text == unit_text[unit_id][start_char:end_char]``.

    ``excerpt_start`` is where ``text`` begins in the excerpt's canonical text; UTF-16 offsets
    are those of the unit text (copied from the window row).
    """

    unit_id: str
    start_char: int
    end_char: int
    start_utf16: int
    end_utf16: int
    text: str
    excerpt_start: int


@dataclass(frozen=True)
class FragmentMatch:
    """A matched range ``fragments[fragment].text[start:end]`` (fragment-relative offsets)."""

    fragment: int
    start: int
    end: int


@dataclass(frozen=True)
class SupportSpan:
    """A range of one unit's canonical text supporting an annotation (schema ``SUPPORT``).

    ``text_hash`` is SHA-256 hex of ``unit_text[start_char:end_char]``.
    """

    unit_id: str
    start_char: int
    end_char: int
    start_utf16: int
    end_utf16: int
    text_hash: str

    def as_row(self) -> dict[str, object]:
        return {
            "unit_id": self.unit_id, "start_char": self.start_char, "end_char": self.end_char,
            "start_utf16": self.start_utf16, "end_utf16": self.end_utf16, "text_hash": self.text_hash,
        }


class ExcerptGrounding:
    """Grounding and attribution of model-returned text against one excerpt.

    Built once per excerpt (normalising its text and each fragment's text); then
    :meth:`ground` answers per selection. Thread-safe (read-only after construction).

    Parameters
    ----------
    text : str
        The excerpt's canonical text (fragment texts joined by the fragment separator).
    fragments : sequence of ExcerptFragment
    """

    def __init__(self, text: str, fragments: Sequence[ExcerptFragment]) -> None:
        self.fragments = tuple(fragments)
        self._excerpt = NormalisedText.of(text)
        self._fragments = tuple(NormalisedText.of(f.text) for f in self.fragments)

    def alignment_cells(self, selection: str) -> int:
        """An upper bound of the DP cells :meth:`ground`'s alignment steps (3)–(4) fill for
        ``selection``: its normalised length × (repair budget + 1) × the normalised characters of
        every fragment and of the excerpt (:func:`align`'s ``O(n * repairs * m)``)."""
        n = len(normalise(selection))
        m = len(self._excerpt.normalised) + sum(len(f.normalised) for f in self._fragments)
        return n * (edit_budgets(n).repairs + 1) * m

    def ground(self, selection: str, *, fuzzy: bool = True) -> tuple[FragmentMatch, ...] | None:
        """Where ``selection`` matches, or ``None`` when it is not grounded in the excerpt.

        Exact evidence first: (1) the fragments whose text contains the normalised selection
        exactly; else (2) an exact match of the excerpt text across a fragment boundary; else,
        with ``fuzzy``, (3) the fragments whose text passes the bounded alignment; else (4) a
        bounded alignment over the excerpt text. The seed attributes every fragment that passes
        ``source_text_matches``; stopping at exact matches when there are some keeps the
        attribution to the literal evidence and spares an alignment per fragment (up to about a
        second each for long quotes).

        Parameters
        ----------
        selection : str
            Model-returned text (entity name, statement or quote).
        fuzzy : bool
            ``False`` stops after steps (1)–(2): ``None`` then means "no exact match", not
            "ungrounded" (callers run the fuzzy steps in a worker thread).

        Returns
        -------
        tuple of FragmentMatch or None
            One match per matching fragment (its first match), in fragment order; an empty
            tuple when the selection matches the excerpt only across a fragment boundary (the
            caller then keeps every fragment, seed 003 §3.1); ``None`` when not grounded.
        """
        for allow_fuzzy in (False, True) if fuzzy else (False,):
            matches = []
            for k, prepared in enumerate(self._fragments):
                found = source_text_matches(prepared, selection, fuzzy=allow_fuzzy)
                if found is not None:
                    matches.append(FragmentMatch(k, found.start, found.end))
            if matches:
                return tuple(matches)
            if source_text_matches(self._excerpt, selection, fuzzy=allow_fuzzy) is not None:
                return ()
        return None

    def ground_name(self, name: str) -> tuple[FragmentMatch, ...] | None:
        """:meth:`ground`'s exact steps (1)–(2) with :func:`name_matches` in place of the
        normalised substring: where a name stands as a whole word, or ``None``."""
        matches = []
        for k, prepared in enumerate(self._fragments):
            found = name_matches(prepared, name)
            if found is not None:
                matches.append(FragmentMatch(k, found.start, found.end))
        if matches:
            return tuple(matches)
        return () if name_matches(self._excerpt, name) is not None else None


def support_spans(
    fragments: Sequence[ExcerptFragment], matches: Sequence[FragmentMatch] | None
) -> list[SupportSpan]:
    """Unit spans of ``matches`` (or of every whole fragment when ``matches`` is ``None`` or
    empty), mapped through the fragments' unit offsets.

    A match ``(k, s, e)`` becomes ``unit_id = fragments[k].unit_id``, ``start_char =
    fragments[k].start_char + s`` (likewise ``end_char``), UTF-16 offsets shifted the same way
    through :func:`~fabric_resources.offsets.utf16_offset`, and the hash of the matched text.

    Raises
    ------
    IndexError
        If a match names a fragment that ``fragments`` does not have.
    """
    if not matches:
        matches = [FragmentMatch(k, 0, len(f.text)) for k, f in enumerate(fragments)]
    spans: list[SupportSpan] = []
    for match in matches:
        if match.fragment < 0:
            raise IndexError(f"fragment {match.fragment} out of range")
        f = fragments[match.fragment]
        if not 0 <= match.start <= match.end <= len(f.text):
            raise IndexError(f"range {match.start}:{match.end} outside fragment {match.fragment}")
        spans.append(SupportSpan(
            unit_id=f.unit_id,
            start_char=f.start_char + match.start,
            end_char=f.start_char + match.end,
            start_utf16=f.start_utf16 + utf16_offset(f.text, match.start),
            end_utf16=f.start_utf16 + utf16_offset(f.text, match.end),
            text_hash=text_hash(f.text[match.start:match.end]),
        ))
    return spans
