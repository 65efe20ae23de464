"""The token budget of one answer: whole passages, best first, until ``max_tokens`` is spent.

A passage is never cut to fit: one that would exceed what is left of the budget is dropped with
every hit it carries (``dropped_for_budget`` counts those hits), and lower-ranked hits whose
passage still fits are kept (greedy by rank, the way Theurian's ``maxTokens`` spends a budget).
Hits keep their rank, so a gap shows where something was dropped. Token counts are those of the
passages (the chunker's tokenizer, :attr:`fabric_query.types.Passage.token_count`). Under a budget
the pipeline grows each passage to the budget at most (``min(passages.max_tokens, max_tokens)``), so
the best hit is dropped only when its own chunk does not fit. Pure.
"""

from __future__ import annotations

from fabric_query.context import plain_integer
from fabric_query.errors import InvalidArgumentError
from fabric_query.types import EvidencePack

#: Largest budget accepted (tokens); far above any passage set a search can return.
MAX_BUDGET_TOKENS = 10_000_000


def checked_budget(max_tokens) -> int | None:
    """``max_tokens`` as given (None: no budget).

    Raises
    ------
    InvalidArgumentError
        Not an integer, or outside ``1..MAX_BUDGET_TOKENS``.
    """
    if max_tokens is None:
        return None
    max_tokens = plain_integer(max_tokens, "max_tokens")
    if not 1 <= max_tokens <= MAX_BUDGET_TOKENS:
        raise InvalidArgumentError(f"max_tokens must be between 1 and {MAX_BUDGET_TOKENS}, got {max_tokens}")
    return max_tokens


def spend_budget(pack: EvidencePack, max_tokens: int | None) -> EvidencePack:
    """``pack`` with ``used_tokens`` set and, under a budget, only the passages that fit whole.

    >>> from fabric_query.types import EvidencePack
    >>> empty = EvidencePack(query="q", release_id=1, results=(), channels_run=(), eligible_sources=0)
    >>> spend_budget(empty, 5).used_tokens, spend_budget(empty, 5).dropped_for_budget
    (0, 0)
    """
    if max_tokens is None:
        return pack.model_copy(update={"used_tokens": sum(p.token_count for p in pack.passages)})
    kept: dict[int, int] = {}  # old passage index → new
    used = dropped = 0
    hits = []
    for hit in pack.results:
        p = hit.passage
        if p is None:  # every hit has a passage today; one without is carried, costing nothing
            hits.append(hit)
            continue
        if p not in kept:
            cost = pack.passages[p].token_count
            if used + cost > max_tokens:
                dropped += 1
                continue
            used += cost
            kept[p] = len(kept)
        hits.append(hit.model_copy(update={"passage": kept[p]}))
    passages = [pack.passages[old] for old in sorted(kept, key=kept.__getitem__)]
    unit_ids = {s.unit_id for p in passages for s in p.citation.spans}
    assembly = {**pack.assembly, "budget": {"max_tokens": max_tokens, "used_tokens": used,
                                           "dropped_for_budget": dropped}}
    return pack.model_copy(update={
        "results": tuple(hits), "passages": tuple(passages),
        "units": tuple(u for u in pack.units if u.unit_id in unit_ids),
        "assembly": assembly, "max_tokens": max_tokens, "used_tokens": used, "dropped_for_budget": dropped,
    })
