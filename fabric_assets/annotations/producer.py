# Over 500 lines: one batch's chains, grounding, memo reuse, retries and accounting share its state.
"""The LLM annotation producer: chains per excerpt, grounding, memo reuse, retries, accounting.

:func:`annotate_parse` turns one parse's context windows (schema ``WINDOWS``) into grounded
annotation rows (schema ``ANNOTATIONS``) and an :class:`AnnotationStats` (Data Store seed 003,
section 3.1):

1. excerpts: runs of ``indexing.excerpt_windows`` windows (:func:`~.excerpts.build_excerpts`);
2. per excerpt, the three chains of :mod:`~.prompts` (``entities``, ``relations``, ``summary``),
   ``annotation.concurrency`` excerpts at once, the chains of one excerpt in order; later calls
   of a chain see the excerpt and the chain's prior outputs;
3. grounding: names (entity, relation subject and object: whole words, exactly), statements and
   quotes (also by the bounded alignment) must match the excerpt (:class:`~.grounding.ExcerptGrounding`);
   ungrounded items, and relations with an ungrounded end or no grounded quote, are dropped and
   counted, never stored. Rows keep the unit spans of their matches per fragment (every fragment
   for summaries and cross-fragment matches);
4. reuse: before any call, the chain's :func:`memo_key` is looked up in the memo; a completed
   chain stores its grounded output there (also when it is empty), in fragment-relative offsets;
   the same key in flight elsewhere in the batch is awaited, not sent twice;
5. retries: malformed output restarts the whole chain, at most ``annotation.malformed_retries``
   times, the temperature rising by ``temperature_step`` per restart (capped at 2.0); call
   failures are retried inside the client (``annotation.call_retries``); an exhausted chain
   becomes a :class:`ChainFailure` in the stats — its partial output is discarded and no other
   chain or excerpt is affected.

What one excerpt can cost is bounded, whatever the server replies: per attempt of its chains, one
request each for entities, statements, relations and the summary and at most
:data:`MAX_QUOTED_RELATIONS` / ``QUOTE_BATCH`` (8) for quotes; at most
``annotation.malformed_retries + 1`` attempts per chain; each request sent at most
``annotation.call_retries + 1`` times. With the defaults (2, 3): (4 + 8) × 3 × 4 = 144 requests.

Departures from the seed, on purpose: an empty chain output is memoised too (so a re-run makes
no calls at all); a token-limit stop (``finish_reason="length"``) counts as malformed output,
not as a call failure (the chain restarts at a higher temperature); call failures are retried
per call inside the client rather than by restarting the chain; attribution prefers exact
evidence (:meth:`~.grounding.ExcerptGrounding.ground`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pydantic

from fabric_assets.annotations.excerpts import Excerpt, build_excerpts
from fabric_assets.annotations.grounding import ExcerptGrounding, FragmentMatch, support_spans
from fabric_assets.annotations.prompts import (
    CHAINS,
    ENTITIES,
    NOT_AN_ENTITY,
    QUOTE_BATCH,
    QUOTES,
    RELATIONS,
    STATEMENTS,
    SUMMARY,
    ChainName,
    EntitiesOutput,
    QuotesOutput,
    RelationsOutput,
    Stage,
    StatementsOutput,
    SummaryOutput,
    prompts_fingerprint,
    render_input,
)
from fabric_assets.annotations.stats import AnnotationStats, ChainFailure, DroppedCounts
from fabric_resources.annotator.client import CallCounters, CallFailed, ChatClient, MalformedOutput
from fabric_resources.annotator.memo import AnnotationMemo
from fabric_resources.config import AnnotationConfig, FabricConfig, IndexingConfig
from fabric_resources.identity import derived_id, text_hash
from fabric_resources.schema import ANNOTATIONS

__all__ = [
    "AnnotationCancelled",
    "AnnotationStats",
    "ChainFailure",
    "DroppedCounts",
    "annotate_parse",
    "annotate_parse_async",
    "memo_key",
    "producer_identity",
]

log = logging.getLogger(__name__)

#: Temperatures above this are outside the OpenAI API's range.
MAX_TEMPERATURE = 2.0
#: DP cells of bounded alignment spent on one reply's statements or quotes (~6 s of numpy here; 80
#: near-miss quotes of 200 characters in a 4,000-character excerpt). Without it a reply's 16,000
#: characters of excerpt-long junk took ~50 s to align, and a relations chain asks once per 16.
ALIGNMENT_CELLS_PER_REPLY = 4_000_000_000  # 5 excerpt-long junk statements (14 kB): 37.6 s before, 0.15 s
#: A relation's predicate is the model's own words (no span of the excerpt need hold it) and is shown
#: in a hit's graph provenance: past these bounds it is not the "short verb phrase" the prompt asks
#: for but text the document never said (a hostile or injected reply stored 1,000 characters of
#: instructions as an edge's predicate), and the relation is dropped like an ungrounded item.
MAX_PREDICATE_WORDS = 8
MAX_PREDICATE_CHARS = 64
#: Relations of one excerpt sent for supporting quotations, in reply order (the rest are dropped and
#: counted), so a relations chain makes at most ``MAX_QUOTED_RELATIONS / QUOTE_BATCH`` (8) quote
#: requests per attempt. Without it the count was bounded only by the reply's size and the excerpt's
#: length: a reply of distinct made-up predicates between grounded names asked 12 quote requests at
#: the default ``max_output_tokens`` and 48 at 4,096 for a 3,400-character excerpt, each attempt.
#: An honest ~1,000-token excerpt holds a few dozen relations.
MAX_QUOTED_RELATIONS = 8 * QUOTE_BATCH


def short_predicate(predicate: str) -> bool:
    """Whether a relation's predicate is within :data:`MAX_PREDICATE_WORDS` and :data:`MAX_PREDICATE_CHARS`."""
    return len(predicate) <= MAX_PREDICATE_CHARS and len(predicate.split()) <= MAX_PREDICATE_WORDS


#: An entity's type is a label the prompt asks for as "a short upper-case type such as PERSON", never
#: checked against the excerpt: a broken or hostile reply gave kilobytes, control characters or a
#: newline and they were stored as is. See :func:`entity_type_label`.
MAX_ENTITY_TYPE_CHARS = 32


def entity_type_label(entity_type: str) -> str | None:
    """The label ``entity_type`` stands for, or None when it is none.

    Normalised: surrounding whitespace dropped, upper case, each run of spaces, hyphens and
    underscores one ``_`` ("Creative work" is ``CREATIVE_WORK``). A label is then 1 to
    :data:`MAX_ENTITY_TYPE_CHARS` characters, each a letter, mark or digit of any script or ``_``;
    anything else (empty, longer, punctuation, a control character or newline inside) is None.

    >>> entity_type_label(" Creative-work "), entity_type_label("PERSON\\nIGNORE ALL"), entity_type_label("")
    ('CREATIVE_WORK', None, None)
    """
    label = re.sub(r"[ \-_]+", "_", entity_type.strip()).strip("_").upper()
    if not 0 < len(label) <= MAX_ENTITY_TYPE_CHARS:
        return None
    return label if all(c == "_" or unicodedata.category(c)[0] in "LMN" for c in label) else None


class AnnotationCancelled(Exception):
    """:func:`annotate_parse` was cancelled; nothing of the batch is returned (chains completed
    before the cancellation stay in the memo)."""


def producer_identity(annotation: AnnotationConfig, indexing: IndexingConfig) -> str:
    """32-hex producer identity: prompts and schemas in chain order (with
    :data:`~.prompts.PRODUCER_VERSION`), model, base URL, excerpt sizing
    (``indexing.excerpt_windows``, ``indexing.context_max_tokens``) and generation settings
    (``temperature``, ``temperature_step``, ``max_output_tokens``). Retry budgets, concurrency,
    timeouts and the key are not part of it (seed 003 §3.1: they change no output).

    Raises
    ------
    ValueError
        If ``annotation.endpoint`` is not configured.
    """
    endpoint = annotation.endpoint
    if endpoint is None:
        raise ValueError("annotation.endpoint is not configured")
    return derived_id(
        "annotation-producer", prompts_fingerprint(), endpoint.model, endpoint.base_url.rstrip("/"),
        indexing.excerpt_windows, indexing.context_max_tokens,
        repr(float(annotation.temperature)), repr(float(annotation.temperature_step)),
        annotation.max_output_tokens,
    )


def memo_key(producer: str, chain: ChainName, excerpt: Excerpt) -> str:
    """32-hex memo key: producer identity × chain × the excerpt's source content (its section
    path, which the model sees, and the SHA-256 of each fragment text in order). Unit IDs,
    offsets and the parse are not part of it."""
    return derived_id("annotation-memo", producer, chain, json.dumps(list(excerpt.section_path)),
                      *(text_hash(f.text) for f in excerpt.fragments))


# --------------------------------------------------------------------------------------------
# chains


@dataclass
class _BatchState:
    counters: CallCounters = field(default_factory=CallCounters)
    memo_hits: int = 0
    malformed_retries: int = 0
    dropped: Counter = field(default_factory=Counter)


def _parse(stage: Stage, content: str) -> Any:
    try:
        return stage.output.model_validate_json(content)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise MalformedOutput(f"{stage.name}: not the stage schema ({first.get('type', '?')} at "
                              f"{where or 'root'}; {exc.error_count()} error(s))") from None


def _bounded(stage: Stage, what: str, count: int, excerpt: Excerpt) -> None:
    """Seed 003 §3.1: intermediate candidate arrays are bounded by the excerpt's length."""
    if count > max(1, len(excerpt.text)):
        raise MalformedOutput(f"{stage.name}: {count} {what} for a {len(excerpt.text)}-character excerpt")


def _required(stage: Stage, what: str, value: str) -> str:
    value = value.strip()
    if not value:
        raise MalformedOutput(f"{stage.name}: empty {what}")
    return value


async def _ground_all(grounding: ExcerptGrounding, selections: Sequence[str], *,
                      names: bool = False) -> list[tuple[FragmentMatch, ...] | None]:
    """:meth:`ExcerptGrounding.ground` of each selection: exact matches inline, the bounded alignment
    of the rest in a worker thread (it can stall the event loop); ``names``: ``ground_name``."""
    found = [grounding.ground_name(s) if names else grounding.ground(s, fuzzy=False) for s in selections]
    rest = [] if names else [i for i, m in enumerate(found) if m is None]
    budget = ALIGNMENT_CELLS_PER_REPLY  # past it, the rest stay ungrounded (dropped and counted)
    for k, i in enumerate(rest):
        budget -= grounding.alignment_cells(selections[i])
        if budget < 0:
            rest = rest[:k]
            break
    if rest:
        fuzzy = await asyncio.to_thread(lambda: [grounding.ground(selections[i]) for i in rest])
        for i, m in zip(rest, fuzzy):
            found[i] = m
    return found


def _matches_json(matches: Sequence[FragmentMatch]) -> list[list[int]]:
    return [[m.fragment, m.start, m.end] for m in matches]


class _Producer:
    def __init__(self, config: FabricConfig, memo: AnnotationMemo, client: ChatClient,
                 producer: str) -> None:
        self.annotation = config.annotation
        self.memo = memo
        self.client = client
        self.producer = producer
        self.state = _BatchState()
        self._inflight: dict[str, asyncio.Future[None]] = {}

    async def _ask(self, stage: Stage, excerpt: Excerpt, temperature: float, **prior: Any) -> Any:
        messages = [
            {"role": "system", "content": stage.system_prompt},
            {"role": "user", "content": render_input(excerpt.section_path, excerpt.text, **prior)},
        ]
        reply = await self.client.complete(
            messages, response_format=stage.response_format, temperature=temperature,
            max_tokens=self.annotation.max_output_tokens, counters=self.state.counters,
        )
        return _parse(stage, reply.content)

    async def _entities(self, excerpt: Excerpt, grounding: ExcerptGrounding, temperature: float,
                        dropped: Counter) -> list[dict[str, Any]]:
        out: EntitiesOutput = await self._ask(ENTITIES, excerpt, temperature)
        _bounded(ENTITIES, "entities", len(out.entities), excerpt)
        unique: dict[tuple[str, str], None] = {}
        for e in out.entities:
            name = _required(ENTITIES, "entity name", e.name)
            entity_type = entity_type_label(_required(ENTITIES, "entity type", e.entity_type))
            if entity_type is None:  # the reply's own text is not repeated: it may be kilobytes or escapes
                raise MalformedOutput(f"{ENTITIES.name}: entity type for {name[:80]!r} is not a short label "
                                      f"(1-{MAX_ENTITY_TYPE_CHARS} letters, digits or '_'; {len(e.entity_type)} "
                                      "characters given)")
            if entity_type == NOT_AN_ENTITY:
                raise MalformedOutput(f"{ENTITIES.name}: entity type {NOT_AN_ENTITY} for {name!r}")
            unique[(name, entity_type)] = None
        found = await _ground_all(grounding, [name for name, _ in unique], names=True)
        items = []
        for (name, entity_type), matches in zip(unique, found):
            if matches is None:
                dropped["entities"] += 1
                continue
            items.append({"kind": "entity", "name": name, "entity_type": entity_type,
                          "matches": _matches_json(matches)})
        return items

    async def _relations(self, excerpt: Excerpt, grounding: ExcerptGrounding, temperature: float,
                         dropped: Counter) -> list[dict[str, Any]]:
        out_s: StatementsOutput = await self._ask(STATEMENTS, excerpt, temperature)
        _bounded(STATEMENTS, "statements", len(out_s.statements), excerpt)
        candidates = list(dict.fromkeys(_required(STATEMENTS, "statement", s) for s in out_s.statements))
        grounded = await _ground_all(grounding, candidates)
        statements = [s for s, m in zip(candidates, grounded) if m is not None]
        dropped["statements"] += len(candidates) - len(statements)
        if not statements:
            return []
        numbered = [{"index": i, "text": s} for i, s in enumerate(statements)]
        out_r: RelationsOutput = await self._ask(RELATIONS, excerpt, temperature, statements=numbered)
        _bounded(RELATIONS, "relations", len(out_r.relations), excerpt)
        relations: dict[tuple[str, str, str], int] = {}
        for r in out_r.relations:
            if not 0 <= r.statement_index < len(statements):
                raise MalformedOutput(f"{RELATIONS.name}: statement_index {r.statement_index} not in "
                                      f"0..{len(statements) - 1}")
            triple = (_required(RELATIONS, "subject", r.subject), _required(RELATIONS, "predicate", r.predicate),
                      _required(RELATIONS, "object", r.object))
            relations.setdefault(triple, r.statement_index)
        short = {t: si for t, si in relations.items() if short_predicate(t[1])}
        dropped["relations"] += len(relations) - len(short)
        relations = short
        # Subject and object are names: an edge on a made-up one would join documents on it.
        names = list(dict.fromkeys(n for s, _, o in relations for n in (s, o)))
        named = dict(zip(names, await _ground_all(grounding, names, names=True)))
        grounded_ends = {t: si for t, si in relations.items() if named[t[0]] is not None and named[t[2]] is not None}
        dropped["relations"] += len(relations) - len(grounded_ends)
        relations = dict(list(grounded_ends.items())[:MAX_QUOTED_RELATIONS])
        dropped["relations"] += len(grounded_ends) - len(relations)
        if not relations:
            return []
        listed = [{"index": i, "statement_index": si, "subject": s, "predicate": p, "object": o}
                  for i, ((s, p, o), si) in enumerate(relations.items())]
        quotes: dict[int, list[str]] = {i: [] for i in range(len(listed))}
        for first in range(0, len(listed), QUOTE_BATCH):
            batch = listed[first:first + QUOTE_BATCH]
            out_q: QuotesOutput = await self._ask(QUOTES, excerpt, temperature, statements=numbered,
                                                  relations=batch)
            _bounded(QUOTES, "quotes", sum(len(q.quotes) for q in out_q.supports), excerpt)
            for support in out_q.supports:
                if not first <= support.relation_index < first + len(batch):
                    raise MalformedOutput(f"{QUOTES.name}: relation_index {support.relation_index} not in "
                                          f"{first}..{first + len(batch) - 1}")
                for q in support.quotes:
                    q = _required(QUOTES, "quote", q)
                    if q not in quotes[support.relation_index]:
                        quotes[support.relation_index].append(q)
        every = [q for i in quotes for q in quotes[i]]
        found = dict(zip(every, await _ground_all(grounding, every)))
        items = []
        for i, ((subject, predicate, obj), _) in enumerate(relations.items()):
            kept = [q for q in quotes[i] if found[q] is not None]
            dropped["quotes"] += len(quotes[i]) - len(kept)
            if not kept:
                dropped["relations"] += 1
                continue
            matches = sorted({m for q in kept for m in found[q]}, key=lambda m: (m.fragment, m.start, m.end))
            items.append({"kind": "relation", "subject": subject, "predicate": predicate, "object": obj,
                          "quotes": kept, "matches": _matches_json(matches)})
        return items

    async def _summary(self, excerpt: Excerpt, grounding: ExcerptGrounding, temperature: float,
                       dropped: Counter) -> list[dict[str, Any]]:
        out: SummaryOutput = await self._ask(SUMMARY, excerpt, temperature)
        return [{"kind": "summary", "text": _required(SUMMARY, "summary", out.summary), "matches": []}]

    async def _run_chain(self, chain: ChainName, excerpt: Excerpt,
                         grounding: ExcerptGrounding) -> list[dict[str, Any]] | ChainFailure:
        run = {"entities": self._entities, "relations": self._relations, "summary": self._summary}[chain]
        retries = self.annotation.malformed_retries
        detail = ""
        for attempt in range(retries + 1):
            temperature = min(MAX_TEMPERATURE,
                              self.annotation.temperature + attempt * self.annotation.temperature_step)
            dropped: Counter = Counter()
            try:
                items = await run(excerpt, grounding, temperature, dropped)
            except MalformedOutput as exc:
                detail = exc.detail
                log.info("annotation_chain.malformed excerpt=%s chain=%s attempt=%d/%d temperature=%.2f: %s",
                         excerpt.excerpt_id, chain, attempt + 1, retries + 1, temperature, detail)
                if attempt < retries:
                    self.state.malformed_retries += 1
                continue
            except CallFailed as exc:
                log.warning("annotation_chain.failed excerpt=%s chain=%s reason=call-failed: %s",
                            excerpt.excerpt_id, chain, exc)
                return ChainFailure(excerpt.excerpt_id, excerpt.ordinal, chain, "call-failed", str(exc),
                                    attempt + 1)
            self.state.dropped.update(dropped)
            return items
        log.warning("annotation_chain.failed excerpt=%s chain=%s reason=malformed-output attempts=%d: %s",
                    excerpt.excerpt_id, chain, retries + 1, detail)
        return ChainFailure(excerpt.excerpt_id, excerpt.ordinal, chain, "malformed-output", detail, retries + 1)

    async def chain(self, chain: ChainName, excerpt: Excerpt, key: str,
                    grounding: ExcerptGrounding) -> list[dict[str, Any]] | ChainFailure:
        """The chain's grounded items, from the memo or fresh (then memoised)."""
        while True:
            entry = self.memo.get(key, parse_id=excerpt.parse_id)
            if entry is not None:
                self.state.memo_hits += 1
                # Entries memoised before the predicate and entity-type bounds are filtered as they are
                # read, so the bounds did not have to change the producer identity (which re-annotates
                # every home).
                return _within_bounds(entry.payload["items"])
            pending = self._inflight.get(key)
            if pending is None:
                break
            await asyncio.shield(pending)  # the same source content is in flight: reuse it
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._inflight[key] = done
        try:
            result = await self._run_chain(chain, excerpt, grounding)
            if not isinstance(result, ChainFailure):
                self.memo.put(key, {"items": result}, producer=self.producer, chain=chain,
                              parse_id=excerpt.parse_id)
            return result
        finally:
            del self._inflight[key]
            done.set_result(None)


def _within_bounds(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Memoised ``items`` as a fresh reply would give them: a relation whose predicate is no
    :func:`short_predicate` and an entity whose type has no :func:`entity_type_label` are left out,
    an entity's type is its label."""
    kept = []
    for item in items:
        if item.get("kind") == "relation" and not short_predicate(item["predicate"]):
            continue
        if item.get("kind") == "entity":
            label = entity_type_label(item.get("entity_type") or "")
            if label is None or label == NOT_AN_ENTITY:
                continue
            item = {**item, "entity_type": label}
        kept.append(item)
    return kept


def _rows(excerpt: Excerpt, key: str, producer: str, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for item in items:
        content = {k: v for k, v in item.items() if k != "matches"}
        matches = [FragmentMatch(*m) for m in item["matches"]]
        spans = support_spans(excerpt.fragments, matches or None)
        kind = item["kind"]
        if kind == "entity":
            text = item["name"]
        elif kind == "relation":
            text = f"{item['subject']} {item['predicate']} {item['object']}"
        else:
            text = item["text"]
        rows.append({
            "parse_id": excerpt.parse_id,
            "annotation_id": derived_id("annotation", excerpt.parse_id, excerpt.excerpt_id, key,
                                        json.dumps(content, sort_keys=True, ensure_ascii=False)),
            "excerpt_id": excerpt.excerpt_id,
            "kind": kind,
            "text": text,
            "entity_type": item.get("entity_type"),
            "subject": item.get("subject"),
            "predicate": item.get("predicate"),
            "object": item.get("object"),
            "quotes": list(item.get("quotes", [])),
            "support": [s.as_row() for s in spans],
            "window_ids": list(excerpt.window_ids),
            "producer": producer,
            "memo_key": key,
        })
    return rows


async def annotate_parse_async(
    windows: pa.Table, config: FabricConfig, memo: AnnotationMemo, client: ChatClient
) -> tuple[pa.Table, AnnotationStats]:
    """Annotate one parse; see :func:`annotate_parse`. Cancel the awaiting task to stop: calls
    in flight are cancelled and nothing of the batch is returned."""
    started = time.perf_counter()
    annotation = config.annotation
    producer = producer_identity(annotation, config.indexing)
    endpoint = annotation.endpoint
    assert endpoint is not None  # producer_identity checked it
    if (client.base_url, client.model) != (endpoint.base_url.rstrip("/"), endpoint.model):
        raise ValueError(f"{client!r} is not annotation.endpoint "
                         f"({endpoint.base_url!r}, {endpoint.model!r}); the producer identity would lie")
    excerpts = build_excerpts(windows, config.indexing.excerpt_windows)
    worker = _Producer(config, memo, client, producer)
    semaphore = asyncio.Semaphore(annotation.concurrency)
    results: dict[int, list[tuple[ChainName, str, list[dict[str, Any]] | ChainFailure]]] = {}

    async def one(excerpt: Excerpt) -> None:
        async with semaphore:
            grounding = ExcerptGrounding(excerpt.text, excerpt.fragments)
            out = []
            for chain in CHAINS:
                key = memo_key(producer, chain, excerpt)
                out.append((chain, key, await worker.chain(chain, excerpt, key, grounding)))
            results[excerpt.ordinal] = out

    async with client.session():
        async with asyncio.TaskGroup() as group:
            for excerpt in excerpts:
                group.create_task(one(excerpt))

    rows: list[dict[str, Any]] = []
    failures: list[ChainFailure] = []
    for excerpt in excerpts:
        for _chain, key, result in results[excerpt.ordinal]:
            if isinstance(result, ChainFailure):
                failures.append(result)
            else:
                rows.extend(_rows(excerpt, key, producer, result))
    state = worker.state
    counters = state.counters
    stats = AnnotationStats(
        excerpts=len(excerpts),
        chains=len(excerpts) * len(CHAINS),
        chains_completed=len(excerpts) * len(CHAINS) - len(failures),
        memo_hits=state.memo_hits,
        calls=counters.calls,
        prompt_tokens=counters.prompt_tokens,
        completion_tokens=counters.completion_tokens,
        replies_without_usage=counters.replies_without_usage,
        malformed_retries=state.malformed_retries,
        call_retries=counters.call_retries,
        dropped_ungrounded=DroppedCounts(**{k: state.dropped.get(k, 0) for k in
                                            ("entities", "statements", "quotes", "relations")}),
        annotations=len(rows),
        failures=tuple(failures),
        wall_s=time.perf_counter() - started,
        call_time_s=counters.call_time_s,
    )
    log.info("annotation_batch.done parse=%s excerpts=%d annotations=%d calls=%d memo_hits=%d failures=%d "
             "wall_s=%.3f", excerpts[0].parse_id if excerpts else "-", stats.excerpts, stats.annotations,
             stats.calls, stats.memo_hits, len(failures), stats.wall_s)
    return pa.Table.from_pylist(rows, schema=ANNOTATIONS), stats


def annotate_parse(
    windows: pa.Table,
    config: FabricConfig,
    memo: AnnotationMemo,
    client: ChatClient,
    *,
    cancel: threading.Event | None = None,
) -> tuple[pa.Table, AnnotationStats]:
    """Grounded LLM annotations of one parse.

    Parameters
    ----------
    windows : pa.Table
        The parse's context-window rows (schema ``WINDOWS``; at least ``parse_id, window_id,
        ordinal, text, fragments, section_path``), one parse only, any row order.
    config : FabricConfig
        Uses ``annotation`` (endpoint, concurrency, malformed_retries, temperature,
        temperature_step, max_output_tokens) and ``indexing`` (excerpt_windows,
        context_max_tokens). ``annotation.enabled`` is the caller's business.
    memo : AnnotationMemo
    client : ChatClient
        For ``config.annotation.endpoint`` (same base URL and model); its ``call_retries``
        governs call retries.
    cancel : threading.Event, optional
        Set it (from another thread) to stop: no new call starts, calls in flight are cancelled.

    Returns
    -------
    annotations : pa.Table
        Schema ``ANNOTATIONS``; rows ordered by excerpt, then chain (entities, relations,
        summary), then the model's order. ``annotation_id`` = derived ID of parse, excerpt, memo
        key and item content; ``producer`` = :func:`producer_identity`; ``memo_key`` =
        :func:`memo_key`; ``support`` spans are ranges of unit text (Unicode scalars, with UTF-16
        offsets and the SHA-256 of the span text).
    stats : AnnotationStats
        ``stats.to_dict()`` for metadata. Exhausted chains are listed in ``stats.failures``.

    Raises
    ------
    AnnotationCancelled
        When ``cancel`` was set before the batch finished.
    ValueError
        If ``annotation.endpoint`` is missing or ``client`` is for another endpoint.
    ExcerptError
        If the window rows break the storage contract (several parses, bad fragments).
    RuntimeError
        If called from a running event loop (await :func:`annotate_parse_async` there).
    """
    async def main() -> tuple[pa.Table, AnnotationStats]:
        task = asyncio.ensure_future(annotate_parse_async(windows, config, memo, client))
        if cancel is not None:
            while not task.done():
                await asyncio.wait({task}, timeout=0.05)
                if cancel.is_set() and not task.done():
                    task.cancel()
                    break
        try:
            return await task
        except asyncio.CancelledError:
            raise AnnotationCancelled("annotation batch cancelled") from None

    return asyncio.run(main())
