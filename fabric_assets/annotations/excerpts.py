"""Annotation excerpts: runs of consecutive context windows of one parse (pure, no I/O).

Data Store seed 003, section 3.1 ("Excerpts and stages"): the windows of a parse are read in
``ordinal`` order and grouped into runs of ``indexing.excerpt_windows`` (the final run may be
shorter); each run is one excerpt. An excerpt's canonical text is its windows' texts joined by
:data:`~fabric_resources.schema.FRAGMENT_SEPARATOR`, which (a window's text being its fragments'
unit slices joined by the same separator) equals its fragments' texts joined by it. Excerpts
exist only in provenance: nothing stores them; annotations record their ``window_ids``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from fabric_assets.annotations.grounding import ExcerptFragment
from fabric_resources.identity import derived_id
from fabric_resources.schema import FRAGMENT_SEPARATOR

__all__ = ["Excerpt", "ExcerptError", "build_excerpts", "excerpt_id"]


class ExcerptError(ValueError):
    """Window rows that break the storage contract (several parses, duplicate ordinals, or
    fragments whose lengths do not reproduce the window text) — a Fabric fault, not bad input."""


@dataclass(frozen=True)
class Excerpt:
    """One annotation excerpt.

    Attributes
    ----------
    excerpt_id : str
        :func:`excerpt_id` of the parse and its window IDs.
    parse_id : str
    ordinal : int
        0-based position among the parse's excerpts, in reading order.
    text : str
        Canonical text: ``FRAGMENT_SEPARATOR.join(f.text for f in fragments)``.
    fragments : tuple of ExcerptFragment
        In reading order; ``fragments[k].excerpt_start`` is where its text begins in ``text``.
    section_path : tuple of str
        That of the first window (a separate prompt field, never part of ``text``).
    window_ids : tuple of str
        The context windows of the run, in ordinal order.
    """

    excerpt_id: str
    parse_id: str
    ordinal: int
    text: str
    fragments: tuple[ExcerptFragment, ...]
    section_path: tuple[str, ...]
    window_ids: tuple[str, ...]


def excerpt_id(parse_id: str, window_ids: Sequence[str]) -> str:
    """Deterministic 32-hex ID of the excerpt made of ``window_ids`` of ``parse_id``."""
    return derived_id("excerpt", parse_id, *window_ids)


def _window_fragments(row: dict, offset: int) -> list[ExcerptFragment]:
    """Fragments of one window row with their texts cut from the window text; ``offset`` is
    where the window text begins in the excerpt text."""
    text: str = row["text"]
    fragments: list[ExcerptFragment] = []
    at = 0
    for k, f in enumerate(row["fragments"]):
        length = f["end_char"] - f["start_char"]
        if k:
            if text[at:at + len(FRAGMENT_SEPARATOR)] != FRAGMENT_SEPARATOR:
                raise ExcerptError(f"window {row['window_id']}: no separator before fragment {k}")
            at += len(FRAGMENT_SEPARATOR)
        if length < 0 or at + length > len(text):
            raise ExcerptError(f"window {row['window_id']}: fragment {k} overruns the window text")
        fragments.append(ExcerptFragment(
            unit_id=f["unit_id"], start_char=f["start_char"], end_char=f["end_char"],
            start_utf16=f["start_utf16"], end_utf16=f["end_utf16"],
            text=text[at:at + length], excerpt_start=offset + at,
        ))
        at += length
    if at != len(text):
        raise ExcerptError(f"window {row['window_id']}: fragments cover {at} of {len(text)} characters")
    return fragments


def build_excerpts(windows: pa.Table, excerpt_windows: int) -> list[Excerpt]:
    """Excerpts of one parse from its context-window rows (schema ``WINDOWS``), reading order.

    Parameters
    ----------
    windows : pa.Table
        Context-window rows of a single parse, in any row order (sorted here by ``ordinal``).
        Needs the columns ``parse_id, window_id, ordinal, text, fragments, section_path``.
    excerpt_windows : int
        Windows per excerpt (``indexing.excerpt_windows``, > 0).

    Returns
    -------
    list of Excerpt
        ``ceil(len(windows) / excerpt_windows)`` excerpts; empty for an empty table.

    Raises
    ------
    ValueError
        If ``excerpt_windows < 1``.
    ExcerptError
        If the rows belong to several parses, repeat an ordinal, or their fragments do not
        reproduce their text.
    """
    if excerpt_windows < 1:
        raise ValueError(f"excerpt_windows must be >= 1, got {excerpt_windows}")
    columns = ["parse_id", "window_id", "ordinal", "text", "fragments", "section_path"]
    rows = sorted(windows.select(columns).to_pylist(), key=lambda r: r["ordinal"])
    if not rows:
        return []
    parse_ids = {r["parse_id"] for r in rows}
    if len(parse_ids) != 1:
        raise ExcerptError(f"windows of {len(parse_ids)} parses given; annotate one parse at a time")
    ordinals = [r["ordinal"] for r in rows]
    if len(set(ordinals)) != len(ordinals):
        raise ExcerptError("repeated window ordinal")
    (parse_id,) = parse_ids
    excerpts: list[Excerpt] = []
    for ordinal, first in enumerate(range(0, len(rows), excerpt_windows)):
        run = rows[first:first + excerpt_windows]
        fragments: list[ExcerptFragment] = []
        offset = 0
        for w, row in enumerate(run):
            if w:
                offset += len(FRAGMENT_SEPARATOR)
            fragments.extend(_window_fragments(row, offset))
            offset += len(row["text"])
        text = FRAGMENT_SEPARATOR.join(r["text"] for r in run)
        window_ids = tuple(r["window_id"] for r in run)
        excerpts.append(Excerpt(
            excerpt_id=excerpt_id(parse_id, window_ids), parse_id=parse_id, ordinal=ordinal,
            text=text, fragments=tuple(fragments), section_path=tuple(run[0]["section_path"]),
            window_ids=window_ids,
        ))
    return excerpts
