"""The annotation producer against a scripted OpenAI-compatible server on 127.0.0.1: outcomes,
retries, grounding, memo reuse, the API key, Fabric's overhead per call and concurrency."""

from __future__ import annotations

import json
import logging
import os
import statistics
import threading
import time

import pytest

from fabric_assets.annotations.grounding import normalise
from fabric_assets.annotations.producer import AnnotationCancelled, annotate_parse, producer_identity
from fabric_assets.annotations.prompts import NOT_AN_ENTITY
from fabric_resources.annotator import AnnotationMemo, ChatClient
from fabric_resources.config import FabricConfig
from fabric_resources.identity import text_hash
from fabric_resources.models.api_key import ApiKeyFileError
from fabric_resources.offsets import utf16_offset
from fabric_resources.schema import ANNOTATIONS
from fake_openai_server import (
    INJECTED_PREDICATE,
    LOOKALIKE_NAME,
    SPLICED_NAME,
    UNGROUNDED_NAME,
    UNGROUNDED_QUOTE,
    UNGROUNDED_STATEMENT,
    FakeChatServer,
    FakeChatServerProcess,
    build_windows,
    entities_of,
    statements_of,
    whole_unit_windows,
)

TEXTS = [
    "Alice met Bob in Paris on a wet Monday. The Lighthouse keeper Carol watched the harbour.",
    "Dinner was late because the tide rose. Edgar sold the boat to Fiona in Dover.",
    "東京で会った😀 Gregor later wrote to Helen about the storm over Lisbon.",
]


def make_config(srv, *, endpoint=None, indexing=None, **annotation) -> FabricConfig:
    endpoint = {"base_url": srv.base_url, "model": "fake-model", "timeout_s": 5.0,
                "initial_backoff_s": 0.01, "max_backoff_s": 2.0, **(endpoint or {})}
    return FabricConfig.model_validate({
        "indexing": {"excerpt_windows": 1, **(indexing or {})},
        "annotation": {"enabled": True, "concurrency": 2, "malformed_retries": 2, "call_retries": 2,
                       **annotation, "endpoint": endpoint},
    })


def run(windows, config, memo, **kwargs):
    return annotate_parse(windows, config, memo, ChatClient.from_config(config.annotation), **kwargs)


@pytest.fixture
def memo(tmp_path):
    with AnnotationMemo(tmp_path / "memo" / "annotations.sqlite3") as m:
        yield m


def assert_spans_round_trip(table, units):
    for row in table.to_pylist():
        assert row["support"], row
        for span in row["support"]:
            unit = units[span["unit_id"]]
            assert span["text_hash"] == text_hash(unit[span["start_char"]:span["end_char"]])
            assert span["start_utf16"] == utf16_offset(unit, span["start_char"])
            assert span["end_utf16"] == utf16_offset(unit, span["end_char"])


# -- valid output ---------------------------------------------------------------------------------


def test_valid_output_is_stored_grounded_and_accounted(memo):
    windows, units = whole_unit_windows("parse-a", TEXTS, section_path=("Log", "Week 1"))
    with FakeChatServer() as srv:
        config = make_config(srv, max_output_tokens=333, temperature=0.1)
        table, stats = run(windows, config, memo)
        calls = srv.calls()

    assert table.schema == ANNOTATIONS
    rows = table.to_pylist()
    expected_entities = sum(len(entities_of(t)) for t in TEXTS)
    expected_relations = sum(len(statements_of(t)) for t in TEXTS)
    kinds = [r["kind"] for r in rows]
    assert kinds.count("entity") == expected_entities
    assert kinds.count("relation") == expected_relations
    assert kinds.count("summary") == len(TEXTS)
    assert len({r["annotation_id"] for r in rows}) == len(rows)
    assert_spans_round_trip(table, units)
    for r in rows:
        assert r["producer"] == producer_identity(config.annotation, config.indexing)
        if r["kind"] == "entity":  # a name's span is the name, in its unit
            (span,) = r["support"]
            assert normalise(units[span["unit_id"]][span["start_char"]:span["end_char"]]) == normalise(r["text"])
        if r["kind"] == "relation":
            assert r["quotes"] and r["text"] == f"{r['subject']} {r['predicate']} {r['object']}"
    # requests: strict schema per stage, generation settings, the excerpt as the only source text
    per_excerpt = 1 + 3 + 1  # entities; statements → relations → quotes; summary
    assert len(calls) == stats.calls == per_excerpt * len(TEXTS)
    for call, request in zip(calls, srv.requests):
        body = request.body
        assert body["model"] == "fake-model" and body["max_tokens"] == 333 and body["temperature"] == 0.1
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["strict"] is True
        assert body["response_format"]["json_schema"]["name"] == call.stage
        assert call.payload["excerpt"] in TEXTS and call.payload["section_path"] == "Log / Week 1"
    relations = [c for c in calls if c.stage == "fabric_relations"]
    quotes = [c for c in calls if c.stage == "fabric_quotes"]
    assert all(c.payload["statements"] for c in relations)                    # prior outputs
    assert all(c.payload["statements"] and c.payload["relations"] for c in quotes)
    # accounting
    assert stats.prompt_tokens == sum(c.prompt_tokens for c in calls)
    assert stats.completion_tokens == sum(c.completion_tokens for c in calls)
    assert (stats.memo_hits, stats.malformed_retries, stats.call_retries) == (0, 0, 0)
    assert stats.dropped_ungrounded.total == 0 and stats.failures == ()
    assert stats.chains == stats.chains_completed == 3 * len(TEXTS)
    assert stats.annotations == len(rows) and stats.wall_s > 0
    json.dumps(stats.to_dict())


# -- malformed output -----------------------------------------------------------------------------


def test_malformed_output_restarts_the_chain_at_a_higher_temperature(memo):
    windows, _ = whole_unit_windows("p", TEXTS[:1])
    with FakeChatServer(script={"fabric_entities": ["malformed_json", "finish_length"]}) as srv:
        table, stats = run(windows, make_config(srv, temperature=0.1, temperature_step=0.25), memo)
        temperatures = [c.temperature for c in srv.calls("fabric_entities")]
    assert temperatures == pytest.approx([0.1, 0.35, 0.6])
    assert stats.malformed_retries == 2 and stats.failures == ()
    assert [r["text"] for r in table.to_pylist() if r["kind"] == "entity"] == entities_of(TEXTS[0])


def test_malformed_output_mid_chain_restarts_the_whole_chain(memo):
    windows, _ = whole_unit_windows("p", TEXTS[:1])
    with FakeChatServer(script={"fabric_quotes": ["wrong_schema"]}) as srv:
        table, stats = run(windows, make_config(srv, temperature_step=0.5), memo)
        stages = [(c.stage, c.temperature) for c in srv.calls() if c.stage != "fabric_entities"
                  and c.stage != "fabric_summary"]
    assert stages == [("fabric_statements", 0.0), ("fabric_relations", 0.0), ("fabric_quotes", 0.0),
                      ("fabric_statements", 0.5), ("fabric_relations", 0.5), ("fabric_quotes", 0.5)]
    relations = [r for r in table.to_pylist() if r["kind"] == "relation"]
    assert len(relations) == len(statements_of(TEXTS[0]))  # no partial output of the failed attempt
    assert stats.malformed_retries == 1


@pytest.mark.parametrize(("stage", "behaviour"), [
    ("fabric_entities", "two_choices"), ("fabric_entities", "empty_content"),
    ("fabric_entities", "not_an_entity"), ("fabric_relations", "bad_index"),
    ("fabric_quotes", "bad_index"), ("fabric_summary", "empty"),
])
def test_exhausted_malformed_retries_are_a_visible_failure(memo, stage, behaviour):
    windows, _ = whole_unit_windows("p", TEXTS[:2])
    chain = {"fabric_entities": "entities", "fabric_summary": "summary"}.get(stage, "relations")
    with FakeChatServer(always={stage: behaviour}) as srv:
        config = make_config(srv, malformed_retries=1)
        table, stats = run(windows, config, memo)
        assert [(f.chain, f.reason, f.attempts) for f in stats.failures] == [(chain, "malformed-output", 2)] * 2
        kind = {"entities": "entity", "relations": "relation", "summary": "summary"}[chain]
        kinds = {r["kind"] for r in table.to_pylist()}
        assert kind not in kinds and len(kinds) == 2  # the other chains are stored
        assert stats.chains_completed == stats.chains - 2 and stats.malformed_retries == 2
        if behaviour == "not_an_entity":
            assert NOT_AN_ENTITY in stats.failures[0].detail

        # nothing of the failed chain was memoised; the completed chains were
        srv.always.clear()
        before = len(srv.calls())
        table, stats = run(windows, config, memo)
        assert {c.stage for c in srv.calls()[before:]} == {stage} | (
            {"fabric_statements", "fabric_relations", "fabric_quotes"} if chain == "relations" else set())
    assert stats.memo_hits == 4 and stats.failures == ()


# -- call failures --------------------------------------------------------------------------------


@pytest.mark.parametrize(("behaviour", "reason", "requests"), [
    ("choice_not_object", "malformed-output", 3),   # malformed: the chain restarts (2 retries)
    ("choices_not_list", "malformed-output", 3),
    ("body_not_json", "call-failed", 1),            # a body the client cannot read: not retried
])
def test_a_reply_body_of_the_wrong_shape_fails_its_chain_not_the_batch(memo, behaviour, reason, requests):
    """guards against: the SDK's unvalidated reply objects read as if valid — an AttributeError,
    KeyError or JSONDecodeError escaped the chain and ended every excerpt's annotation."""
    windows, units = whole_unit_windows("p", TEXTS[:2])
    with FakeChatServer(script={"fabric_entities": [behaviour] * requests}) as srv:
        table, stats = run(windows, make_config(srv, concurrency=1), memo)
        assert len(srv.calls("fabric_entities")) == requests + 1
    (failure,) = stats.failures
    assert (failure.excerpt_ordinal, failure.chain, failure.reason) == (0, "entities", reason)
    entities = [r["text"] for r in table.to_pylist() if r["kind"] == "entity"]
    assert entities == entities_of(TEXTS[1]) and stats.chains_completed == 5
    assert_spans_round_trip(table, units)


def test_a_reply_body_past_the_byte_bound_is_cut_off_while_read_and_not_retried(memo, monkeypatch):
    """guards against: the SDK reading a whole reply body before Fabric sees it, so a server
    streaming without end held the ingest's memory until ``timeout_s``; and such a reply retried."""
    import fabric_resources.annotator.client as client_module

    monkeypatch.setattr(client_module, "MAX_REPLY_BYTES", 256 * 1024)
    windows, units = whole_unit_windows("p", TEXTS[:2])
    with FakeChatServer(script={"fabric_entities": ["huge_body"]}) as srv:
        table, stats = run(windows, make_config(srv, concurrency=1), memo)
        assert len(srv.calls("fabric_entities")) == 2  # the huge one, not retried; the next excerpt's
    (failure,) = stats.failures
    assert (failure.excerpt_ordinal, failure.chain, failure.reason) == (0, "entities", "call-failed")
    assert "past 262144 bytes" in failure.detail
    assert [r["text"] for r in table.to_pylist() if r["kind"] == "entity"] == entities_of(TEXTS[1])


def test_a_reply_past_max_tokens_is_malformed_and_never_aligned(memo):
    """guards against: a server that ignores max_tokens sending statements or quotes without end,
    each aligned against the excerpt (40 junk statements of 2,700 letters kept one excerpt's
    grounding busy for 320 s)."""
    windows, _ = whole_unit_windows("p", TEXTS[:1])
    with FakeChatServer(always={"fabric_statements": "over_long"}) as srv:
        table, stats = run(windows, make_config(srv, max_output_tokens=1024), memo)
        assert not srv.calls("fabric_relations")
    (failure,) = stats.failures
    assert (failure.chain, failure.reason) == ("relations", "malformed-output")
    assert "did not keep to max_tokens" in failure.detail and stats.dropped_ungrounded.statements == 0
    assert not [r for r in table.to_pylist() if r["kind"] == "relation"]


def test_alignment_past_a_replys_budget_leaves_the_rest_ungrounded(memo, monkeypatch):
    """guards against: a server filling every reply (within max_tokens) with excerpt-long text that
    matches nothing, each selection aligned for ~15 s, one quote batch per 16 relations."""
    import fabric_assets.annotations.producer as producer

    monkeypatch.setattr(producer, "ALIGNMENT_CELLS_PER_REPLY", 1)  # exact matches only
    windows, _ = whole_unit_windows("p", TEXTS[:1])
    with FakeChatServer(always={"fabric_quotes": "near_miss"}) as srv:
        table, stats = run(windows, make_config(srv), memo)
    relations = len(statements_of(TEXTS[0]))
    assert (stats.dropped_ungrounded.quotes, stats.dropped_ungrounded.relations) == (relations, relations)
    assert not [r for r in table.to_pylist() if r["kind"] == "relation"] and stats.failures == ()


def test_a_usage_of_the_wrong_shape_counts_as_no_usage(memo):
    windows, _ = whole_unit_windows("p", TEXTS[:1])
    with FakeChatServer(script={"fabric_summary": ["usage_not_counts"]}) as srv:
        table, stats = run(windows, make_config(srv), memo)
    assert stats.failures == () and stats.replies_without_usage == 1
    assert [r["kind"] for r in table.to_pylist()].count("summary") == 1


def test_rate_limit_waits_for_retry_after(memo):
    windows, _ = whole_unit_windows("p", TEXTS[:1])
    with FakeChatServer(script={"fabric_entities": ["rate_limited"]}, retry_after="0.4") as srv:
        table, stats = run(windows, make_config(srv), memo)
        first, second = srv.calls("fabric_entities")
    assert first.status == 429 and second.status == 200
    assert second.received_s - first.replied_s >= 0.4  # backoff alone would be 0.01 s
    assert stats.call_retries == 1 and stats.failures == () and stats.calls == 6


def test_server_errors_are_retried_within_the_budget(memo):
    windows, _ = whole_unit_windows("p", TEXTS[:1])
    with FakeChatServer(script={"fabric_summary": ["server_error", "server_error"]}) as srv:
        table, stats = run(windows, make_config(srv, call_retries=2), memo)
    assert stats.call_retries == 2 and stats.calls == 7 and stats.failures == ()
    assert stats.malformed_retries == 0
    assert "summary" in {r["kind"] for r in table.to_pylist()}


def test_exhausted_call_retries_fail_the_chain_not_the_batch(memo):
    windows, _ = whole_unit_windows("p", TEXTS[:2])
    with FakeChatServer(script={"fabric_entities": ["server_error"] * 2}) as srv:
        table, stats = run(windows, make_config(srv, call_retries=1, concurrency=1), memo)
    (failure,) = stats.failures
    assert (failure.chain, failure.reason, failure.excerpt_ordinal) == ("entities", "call-failed", 0)
    assert "HTTP 500" in failure.detail and "2 attempt" in failure.detail
    entity_excerpts = {r["excerpt_id"] for r in table.to_pylist() if r["kind"] == "entity"}
    assert failure.excerpt_id not in entity_excerpts and len(entity_excerpts) == 1


def test_other_client_errors_are_not_retried(memo):
    windows, _ = whole_unit_windows("p", TEXTS[:1])
    with FakeChatServer(script={"fabric_entities": ["bad_request"]}) as srv:
        _, stats = run(windows, make_config(srv, call_retries=3), memo)
        assert len(srv.calls("fabric_entities")) == 1
    (failure,) = stats.failures
    assert failure.reason == "call-failed" and "HTTP 400" in failure.detail and stats.call_retries == 0


def test_a_slow_reply_times_out_and_is_retried(memo):
    windows, _ = whole_unit_windows("p", TEXTS[:1])
    # The timeout leaves a loaded CI machine ample time for the fast replies (a 0.3 s timeout once
    # timed out a fast reply too); the slow reply takes far longer than the timeout and the retry.
    with FakeChatServer(script={"fabric_entities": ["slow"]}, slow_s=6.0) as srv:
        started = time.perf_counter()
        _, stats = run(windows, make_config(srv, endpoint={"timeout_s": 1.5}, call_retries=1), memo)
        elapsed = time.perf_counter() - started
        entity_calls = len(srv.calls("fabric_entities"))
    assert entity_calls == 2 and stats.call_retries >= 1 and stats.failures == ()
    assert elapsed < 5.0  # did not wait for the slow reply


def test_timeouts_exhaust_the_call_budget(memo):
    windows, _ = whole_unit_windows("p", TEXTS[:1])
    with FakeChatServer(always={"fabric_summary": "slow"}, slow_s=1.0) as srv:
        _, stats = run(windows, make_config(srv, endpoint={"timeout_s": 0.2}, call_retries=1), memo)
    (failure,) = stats.failures
    assert (failure.chain, failure.reason) == ("summary", "call-failed") and "timeout" in failure.detail



def test_an_endpoint_that_never_answers_is_given_up_after_a_few_calls_not_per_chain(memo):
    """guards against: an endpoint that accepts connections and never answers (or refuses them)
    costing every chain of every excerpt its (1 + call_retries) timeouts — a run of 1,000 small
    documents held ``fabric ingest`` for days; and the give-up surviving into the next run."""
    from fabric_resources.annotator.client import UNREACHABLE_AFTER_CALLS

    texts = [f"Alice met Bob number {i} in Paris. Carol watched the harbour." for i in range(8)]
    windows, _ = whole_unit_windows("p", texts)
    hang = {s: "slow" for s in ("fabric_entities", "fabric_statements", "fabric_summary")}
    with FakeChatServer(always=hang, slow_s=1.0) as srv:
        config = make_config(srv, endpoint={"timeout_s": 0.2}, call_retries=1, concurrency=1)
        client = ChatClient.from_config(config.annotation)
        started = time.perf_counter()
        rows, stats = annotate_parse(windows, config, memo, client)
        elapsed = time.perf_counter() - started
        sent = len(srv.calls())
    assert sent == UNREACHABLE_AFTER_CALLS * 2  # each call and its one retry, then nothing
    assert elapsed < 5.0  # 24 chains × 2 timeouts would take 9.6 s
    assert rows.num_rows == 0 and len(stats.failures) == len(texts) * 3
    assert all("timeout" in f.detail for f in stats.failures[:UNREACHABLE_AFTER_CALLS])
    assert all("endpoint unreachable" in f.detail for f in stats.failures[UNREACHABLE_AFTER_CALLS:])

    # A reply in between resets the count: a flaky endpoint is not given up on.
    with FakeChatServer(script={"fabric_entities": ["slow", "slow"] * 4}, slow_s=1.0) as srv:
        config = make_config(srv, endpoint={"timeout_s": 0.2}, call_retries=0, concurrency=1)
        _, stats = run(windows, config, memo)
    assert not any("unreachable" in f.detail for f in stats.failures)

    # The next run (a new client) calls the recovered endpoint and completes.
    with FakeChatServer() as srv:
        rows, stats = run(windows, make_config(srv), memo)
    assert stats.failures == () and rows.num_rows > 0 and srv.calls()


# -- grounding ------------------------------------------------------------------------------------


def test_ungrounded_items_are_dropped_and_counted(memo):
    windows, units = whole_unit_windows("p", TEXTS[:1])
    ungrounded = {s: "ungrounded" for s in ("fabric_entities", "fabric_statements", "fabric_quotes")}
    with FakeChatServer(always=ungrounded) as srv:
        table, stats = run(windows, make_config(srv), memo)
    relations = len(statements_of(TEXTS[0]))  # the ungrounded statement never reaches the relation stage
    d = stats.dropped_ungrounded
    assert (d.entities, d.statements, d.quotes, d.relations) == (1, 1, relations, 1)
    rows = table.to_pylist()
    assert sum(r["kind"] == "relation" for r in rows) == relations - 1
    stored = json.dumps(rows)
    for text in (UNGROUNDED_NAME, UNGROUNDED_STATEMENT, UNGROUNDED_QUOTE):
        assert text not in stored
    assert_spans_round_trip(table, units)


def test_a_predicate_that_is_no_short_phrase_drops_its_relation(memo):
    """guards against: a relation whose ends and quote are grounded carrying any text the reply
    chose as its predicate (never checked against the excerpt) into the graph edges and a hit's
    graph provenance — 1,000 characters of injected instructions were stored as one."""
    from fabric_assets.annotations.producer import MAX_PREDICATE_CHARS, MAX_PREDICATE_WORDS
    from fabric_assets.graph.build import graph_rows

    assert len(INJECTED_PREDICATE) > MAX_PREDICATE_CHARS and len(INJECTED_PREDICATE.split()) > MAX_PREDICATE_WORDS
    windows, _ = whole_unit_windows("p", TEXTS[:1])
    with FakeChatServer(always={"fabric_relations": "injected_predicate"}) as srv:
        table, stats = run(windows, make_config(srv), memo)
    relations = [r for r in table.to_pylist() if r["kind"] == "relation"]
    assert stats.failures == () and stats.dropped_ungrounded.relations == 1
    assert len(relations) == len(statements_of(TEXTS[0])) - 1  # the others are kept
    assert "OVERRIDE" not in json.dumps(table.to_pylist())
    edges = graph_rows(table)[1].to_pylist()
    assert edges and {e["predicate"] for e in edges} == {"relates to"}


def test_a_reply_flooding_relations_gets_a_bounded_number_of_quote_requests(memo):
    """guards against (trial 20c): the relations sent for quotes were bounded only by the reply's
    size and the excerpt's length, so a reply of made-up predicates between grounded names made a
    quote request per 16 of them (12 at the default max_tokens, 48 at 4,096). Past
    MAX_QUOTED_RELATIONS the rest are dropped and counted; the first ones are kept."""
    from collections import Counter

    from fabric_assets.annotations.producer import MAX_QUOTED_RELATIONS
    from fabric_assets.annotations.prompts import QUOTE_BATCH
    from fake_openai_server import FLOOD_RELATIONS

    text = " ".join(TEXTS[:2] * 2)  # longer than the relations a reply may give (seed 003's bound)
    windows, _ = whole_unit_windows("p", [text])
    honest = len(set(statements_of(text)))  # one relation each
    assert honest + FLOOD_RELATIONS > MAX_QUOTED_RELATIONS and len(text) > honest + FLOOD_RELATIONS
    with FakeChatServer(always={"fabric_relations": "flood"}) as srv:
        table, stats = run(windows, make_config(srv), memo)
    assert stats.failures == ()
    assert Counter(c.stage for c in srv.calls())["fabric_quotes"] == MAX_QUOTED_RELATIONS // QUOTE_BATCH
    relations = [r for r in table.to_pylist() if r["kind"] == "relation"]
    assert len(relations) == MAX_QUOTED_RELATIONS
    assert stats.dropped_ungrounded.relations == honest + FLOOD_RELATIONS - MAX_QUOTED_RELATIONS
    assert {r["predicate"] for r in relations} >= {"relates to", "p0"}  # the first of the reply are kept


def test_a_memoised_relation_whose_predicate_is_no_short_phrase_is_dropped_as_it_is_read(memo, monkeypatch):
    """guards against: the predicate bound applied only to fresh replies, so a memo entry made before
    it (or the bound raised the producer version instead, re-annotating every home with real LLM
    calls) kept serving the injected predicate."""
    from fabric_assets.annotations import producer

    windows, _ = whole_unit_windows("p", TEXTS[:1])
    with FakeChatServer(always={"fabric_relations": "injected_predicate"}) as srv:
        monkeypatch.setattr(producer, "short_predicate", lambda predicate: True)  # the rule before stop 51
        before, _ = run(windows, make_config(srv), memo)
        monkeypatch.undo()
        calls = len(srv.calls())
        after, stats = run(windows, make_config(srv), memo)
        assert len(srv.calls()) == calls and stats.memo_hits > 0  # read from the memo, no new call
    assert "OVERRIDE" in json.dumps(before.to_pylist()) and "OVERRIDE" not in json.dumps(after.to_pylist())
    kinds = [r["kind"] for r in after.to_pylist()]
    assert kinds.count("relation") == [r["kind"] for r in before.to_pylist()].count("relation") - 1


@pytest.mark.parametrize("behaviour", ["type_long", "type_control", "type_newline", "type_punctuation"])
def test_an_entity_type_that_is_no_short_label_is_malformed_output_and_never_stored(memo, behaviour):
    """guards against (trial 20c): the entity type was stored as the reply gave it (hundreds of
    characters, NUL and terminal escapes, a newline carrying instructions); it is a label, so
    anything but 1-32 letters, digits or '_' is malformed output (the chain restarts, then fails
    with that reason), the other chains are kept, and none of it reaches a row or the memo."""
    from fabric_assets.annotations.producer import MAX_ENTITY_TYPE_CHARS
    from fake_openai_server import HOSTILE_TYPES

    windows, _ = whole_unit_windows("p", TEXTS[:1])
    with FakeChatServer(always={"fabric_entities": behaviour}) as srv:
        table, stats = run(windows, make_config(srv, malformed_retries=1), memo)
    assert [(f.chain, f.reason, f.attempts) for f in stats.failures] == [("entities", "malformed-output", 2)]
    assert f"is not a short label (1-{MAX_ENTITY_TYPE_CHARS}" in stats.failures[0].detail
    assert HOSTILE_TYPES[behaviour] not in stats.failures[0].detail  # the reply's text is not repeated
    kinds = {r["kind"] for r in table.to_pylist()}
    assert "entity" not in kinds and kinds == {"relation", "summary"}
    assert "PERSON" not in json.dumps(table.to_pylist())


def test_an_entity_type_is_stored_as_its_label_fresh_or_from_an_older_memo_entry(memo, tmp_path, monkeypatch):
    """guards against (trial 20c): "Creative-work" and "CREATIVE_WORK" stored as two types, and a
    memo entry made before the bound serving a type no label is."""
    from fabric_assets.annotations import producer

    windows, _ = whole_unit_windows("p", TEXTS[:1])
    with FakeChatServer(always={"fabric_entities": "type_spaced"}) as srv:
        table, stats = run(windows, make_config(srv), memo)
    types = {r["entity_type"] for r in table.to_pylist() if r["kind"] == "entity"}
    assert stats.failures == () and types == {"CREATIVE_WORK"}

    with AnnotationMemo(tmp_path / "older" / "annotations.sqlite3") as older, \
            FakeChatServer(always={"fabric_entities": "type_newline"}) as srv:
        monkeypatch.setattr(producer, "entity_type_label", lambda t: t)  # the rule before trial 20c
        before, _ = run(windows, make_config(srv), older)
        monkeypatch.undo()
        calls = len(srv.calls())
        after, stats = run(windows, make_config(srv), older)
        assert len(srv.calls()) == calls and stats.memo_hits > 0  # read from the memo, no new call
    assert "SYSTEM" in json.dumps(before.to_pylist()) and "SYSTEM" not in json.dumps(after.to_pylist())
    assert "entity" not in {r["kind"] for r in after.to_pylist()} and stats.failures == ()


def test_names_are_grounded_exactly_as_words_so_no_made_up_name_is_stored(memo):
    """guards against: a relation's subject and object stored unchecked, and a made-up name
    grounded by the alignment's free omissions ("Amazon" in "Alice met Bob in Paris on") or across
    words ("Sona" in "Paris on a") — graph edges and mentions on names the document never holds
    link it to every document that does."""
    from fabric_assets.annotations.grounding import normalise, source_text_matches

    assert source_text_matches(TEXTS[0], LOOKALIKE_NAME) is not None  # the alignment alone accepts it
    assert normalise(SPLICED_NAME) in normalise(TEXTS[0])               # so does a bare substring
    windows, units = whole_unit_windows("p", TEXTS[:1])
    with FakeChatServer(always={"fabric_entities": "lookalike", "fabric_relations": "lookalike"}) as srv:
        table, stats = run(windows, make_config(srv), memo)
    rows = table.to_pylist()
    assert LOOKALIKE_NAME not in json.dumps(rows) and SPLICED_NAME not in json.dumps(rows)
    assert {r["text"] for r in rows if r["kind"] == "entity"} == set(entities_of(TEXTS[0]))
    assert not [r for r in rows if r["kind"] == "relation"]
    d = stats.dropped_ungrounded
    assert (d.entities, d.relations) == (2, 2 * len(statements_of(TEXTS[0]))) and stats.failures == ()


def test_a_near_miss_quote_is_grounded_by_the_bounded_alignment(memo):
    windows, units = whole_unit_windows("p", TEXTS[:1])
    with FakeChatServer(always={"fabric_quotes": "near_miss"}) as srv:
        table, stats = run(windows, make_config(srv), memo)
    relations = [r for r in table.to_pylist() if r["kind"] == "relation"]
    assert len(relations) == len(statements_of(TEXTS[0])) and stats.dropped_ungrounded.total == 0
    for r in relations:
        (quote,) = r["quotes"]
        assert quote not in TEXTS[0]  # the model's text is kept, not repaired
        (span,) = r["support"]
        supported = units[span["unit_id"]][span["start_char"]:span["end_char"]]
        got, want = normalise(supported), normalise(quote)  # spans hold alphanumerics at both ends
        assert len(got) == len(want) and sum(a != b for a, b in zip(got, want)) == 1


# -- memo -----------------------------------------------------------------------------------------


def test_a_second_run_over_the_same_text_makes_no_calls(memo):
    windows, _ = whole_unit_windows("p", TEXTS)
    with FakeChatServer() as srv:
        config = make_config(srv)
        first, _ = run(windows, config, memo)
        n = len(srv.requests)
        second, stats = run(windows, config, memo)
        assert len(srv.requests) == n
    assert stats.calls == 0 and stats.memo_hits == 3 * len(TEXTS)
    assert second.equals(first)


def test_the_same_text_under_other_units_reuses_the_memo_with_its_own_spans(memo):
    windows, units = whole_unit_windows("parse-old", TEXTS)
    prefix = "Moved down by an edit. "
    moved = {f"new-{k}": prefix + t for k, t in enumerate(TEXTS)}  # same text, other units, other offsets
    reparsed = build_windows("parse-new", moved, [[(u, len(prefix), len(t))] for u, t in moved.items()])
    with FakeChatServer() as srv:
        config = make_config(srv)
        old, _ = run(windows, config, memo)
        n = len(srv.requests)
        new, stats = run(reparsed, config, memo)
        assert len(srv.requests) == n
    assert stats.calls == 0 and stats.memo_hits == 3 * len(TEXTS)
    assert new.num_rows == old.num_rows
    assert {s["unit_id"] for r in new.to_pylist() for s in r["support"]} == set(moved)
    assert_spans_round_trip(new, moved)
    assert new.column("memo_key").equals(old.column("memo_key"))
    assert not set(new.column("annotation_id").to_pylist()) & set(old.column("annotation_id").to_pylist())
    for a, b in zip(old.to_pylist(), new.to_pylist()):
        assert [s["start_char"] + len(prefix) for s in a["support"]] == [s["start_char"] for s in b["support"]]


def test_duplicate_text_within_a_batch_is_sent_once(memo):
    windows, _ = whole_unit_windows("p", [TEXTS[0], TEXTS[0]])
    with FakeChatServer(delay_s=0.05) as srv:
        table, stats = run(windows, make_config(srv, concurrency=2), memo)
    assert stats.calls == 5 and stats.memo_hits == 3
    rows = table.to_pylist()
    assert len({r["excerpt_id"] for r in rows}) == 2
    assert len({r["annotation_id"] for r in rows}) == len(rows)  # unique within the parse


@pytest.mark.parametrize("change", [
    {"endpoint": {"model": "other-model"}},
    {"indexing": {"excerpt_windows": 2}},
    {"indexing": {"context_max_tokens": 256}},
    {"temperature": 0.3},
    {"max_output_tokens": 99},
])
def test_a_producer_identity_change_misses_the_memo(memo, change):
    windows, _ = whole_unit_windows("p", TEXTS[:2])
    with FakeChatServer() as srv:
        base = make_config(srv)
        run(windows, base, memo)
        changed = make_config(srv, **change)
        assert producer_identity(changed.annotation, changed.indexing) != producer_identity(
            base.annotation, base.indexing)
        n = len(srv.requests)
        _, stats = run(windows, changed, memo)
        assert len(srv.requests) > n and stats.memo_hits == 0


def test_retry_budgets_and_concurrency_are_not_producer_identity():
    with FakeChatServer() as srv:
        a = make_config(srv)
        b = make_config(srv, call_retries=7, malformed_retries=0, concurrency=9, endpoint={"timeout_s": 1.0})
    assert producer_identity(a.annotation, a.indexing) == producer_identity(b.annotation, b.indexing)


# -- the API key ----------------------------------------------------------------------------------


def test_a_group_readable_key_file_is_refused(tmp_path):
    key = tmp_path / "key"
    key.write_text("sk-secret")
    key.chmod(0o640)
    with FakeChatServer() as srv:
        config = make_config(srv, endpoint={"api_key_file": str(key)})
    with pytest.raises(ApiKeyFileError, match="owner-only"):
        ChatClient.from_config(config.annotation)


def test_the_key_is_sent_but_never_logged_or_raised(memo, tmp_path, caplog):
    secret = "sk-test-7f3e9a1b2c4d5e6f"
    key = tmp_path / "key"
    key.write_text(secret + "\n")
    key.chmod(0o600)
    caplog.set_level(logging.DEBUG)
    windows, _ = whole_unit_windows("p", TEXTS[:1])
    with FakeChatServer(script={"fabric_entities": ["server_error", "bad_request"]}) as srv:
        config = make_config(srv, endpoint={"api_key_file": str(key)})
        client = ChatClient.from_config(config.annotation)
        _, stats = annotate_parse(windows, config, memo, client)
        assert {c.authorization for c in srv.calls()} == {f"Bearer {secret}"}
    (failure,) = stats.failures
    assert "HTTP 400" in failure.detail and "***" in failure.detail  # the server echoed the key back
    for text in (caplog.text, failure.detail, json.dumps(stats.to_dict()), repr(client)):
        assert secret not in text


def test_without_a_key_file_no_authorization_header_is_sent(memo):
    windows, _ = whole_unit_windows("p", TEXTS[:1])
    with FakeChatServer() as srv:
        run(windows, make_config(srv), memo)
        assert {c.authorization for c in srv.calls()} == {None}


# -- API contract ---------------------------------------------------------------------------------


def test_a_client_for_another_endpoint_is_refused(memo):
    windows, _ = whole_unit_windows("p", TEXTS[:1])
    with FakeChatServer() as srv:
        config = make_config(srv)
        other = make_config(srv, endpoint={"model": "other"})
        with pytest.raises(ValueError, match="producer identity"):
            annotate_parse(windows, config, memo, ChatClient.from_config(other.annotation))


def test_an_empty_parse_makes_no_calls(memo):
    windows, _ = whole_unit_windows("p", [])
    with FakeChatServer() as srv:
        table, stats = run(windows, make_config(srv), memo)
        assert srv.requests == []
    assert table.num_rows == 0 and stats.excerpts == 0


# -- cancellation, concurrency, overhead ----------------------------------------------------------


def test_cancellation_stops_the_batch(memo):
    windows, _ = whole_unit_windows("p", TEXTS * 3)
    cancel = threading.Event()
    with FakeChatServer(delay_s=0.4) as srv:
        threading.Timer(0.2, cancel.set).start()
        started = time.perf_counter()
        with pytest.raises(AnnotationCancelled):
            run(windows, make_config(srv, concurrency=1), memo, cancel=cancel)
        elapsed = time.perf_counter() - started
        requests = len(srv.requests)
        time.sleep(0.5)
        assert len(srv.requests) == requests  # nothing is sent after the cancellation
    # The whole batch takes ~10 s (27 calls × 0.4 s); the bound leaves a loaded host slack.
    assert elapsed < 2.5 and len(memo) == 0


def test_concurrency_bounds_excerpts_in_flight(memo):
    delay, n_excerpts, concurrency = 0.25, 6, 3
    windows, _ = whole_unit_windows("p", [f"{t} Copy {k}." for k, t in enumerate(TEXTS * 2)])
    with FakeChatServer(delay_s=delay, always={"fabric_statements": "empty"}) as srv:
        started = time.perf_counter()
        _, stats = run(windows, make_config(srv, concurrency=concurrency), memo)
        elapsed = time.perf_counter() - started
        assert srv.max_in_flight == concurrency
    assert stats.calls == 3 * n_excerpts  # entities, statements (empty: the chain stops), summary
    expected = stats.calls / concurrency * delay  # N / C × delay = 1.5 s
    # Load only slows a run down, so the upper bound is the serial time (N × delay = 4.5 s): below
    # it the calls overlapped; max_in_flight above is the exact bound.
    assert expected * 0.95 <= elapsed < stats.calls * delay


def test_fabric_overhead_per_call_is_at_most_10_ms(memo):
    """Zero-delay server in its own process; concurrency 1, so between two requests the server is
    idle and only Fabric works (reply parsing, validation, grounding, memo, the next request).

    Measured: (a) the median gap between the server finishing one reply and receiving the next
    request (wall clock; it also holds the loopback transport and the server's own HTTP parsing),
    (b) CPU time of this process per call. (a) is asserted when the machine is not
    oversubscribed (1-minute load ≤ CPU count): on a shared 2-core box under load, the scheduler
    — not Fabric — sets the wall clock. (b) is asserted always.
    """
    with FakeChatServerProcess() as srv:
        config = make_config(srv, concurrency=1)
        client = ChatClient.from_config(config.annotation)
        results = []
        for attempt in range(3):  # first run warms imports and connections; best of the rest
            texts = [f"Run {attempt}, part {k}: {TEXTS[k % 2]}" for k in range(12)]
            windows, _ = whole_unit_windows(f"p{attempt}", texts)
            before = len(srv.timings())
            cpu0 = time.process_time()
            _, stats = annotate_parse(windows, config, memo, client)
            cpu_ms = (time.process_time() - cpu0) * 1000 / stats.calls
            timings = srv.timings()[before:]
            gaps = [(b[1] - a[2]) * 1000 for a, b in zip(timings, timings[1:])]
            assert len(timings) == stats.calls == 12 * 5
            results.append((statistics.median(gaps), cpu_ms))
    gap_ms = min(r[0] for r in results[1:])
    cpu_ms = min(r[1] for r in results[1:])
    print(f"\nFabric overhead per call: median wall gap {gap_ms:.2f} ms, CPU {cpu_ms:.2f} ms "
          f"(load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    assert cpu_ms <= 10.0
    if os.getloadavg()[0] <= (os.cpu_count() or 1):
        assert gap_ms <= 10.0
