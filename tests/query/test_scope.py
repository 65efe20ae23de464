"""The structured query request: scope (the filters' typed twin), the token budget, filter-key typos."""

from __future__ import annotations

import datetime as dt
import json
import os
import random

import httpx
import pytest
from conftest import ingest
from live_server import live_server, wait_ready

from fabric_query import Fabric, Scope
from fabric_query.errors import InvalidArgumentError, QuerySyntaxError
from fabric_query.querylang import parse_query
from fabric_query.scope import apply_scope
from fabric_query.server.app import create_app
from fabric_resources.config import ServerConfig
from fabric_resources.home import FabricHome

DAY = 86_400
FILES = {  # path → (text, modification day since the epoch)
    "notes/a.txt": ("The lighthouse keeper logged the tide and the lamp.\n\nThe lamp was lit at dusk.\n", 19000),
    "notes/b.md": ("# Lamp\n\nLighthouse lenses focus the lamp into a beam across the tide.\n", 19100),
    "notes/deep/c.txt": ("A lamp keeper's diary: tide tables, storms, the lighthouse at night.\n", 19200),
    "other/d.txt": ("Lamp oil was carried up the lighthouse stairs each evening.\n\n" * 6, 19300),
    "other/e.txt": ("灯台守は毎晩ランプに火をともした。ランプの油を運んだ。\n", 19400),
}


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    root = tmp_path_factory.mktemp("scope")
    folder = root / "corpus"
    for rel, (text, day) in FILES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
        os.utime(folder / rel, (day * DAY + 3600, day * DAY + 3600))
    home = FabricHome(root / "home")
    ingest(folder, home)
    return Fabric(home.root)


def _day(n: int) -> str:
    return (dt.date(1970, 1, 1) + dt.timedelta(days=n)).isoformat()


TWINS = [  # (query-string filters, the same as a scope)
    ("source:fs:corpus/notes/a.txt,fs:corpus/other/d.txt",
     {"source_keys": ["fs:corpus/notes/a.txt", "fs:corpus/other/d.txt"]}),
    ("prefix:corpus/notes/", {"path_prefixes": ["corpus/notes/"]}),
    ("prefix:fs:corpus/notes/deep/,corpus/other/", {"path_prefixes": ["fs:corpus/notes/deep/", "corpus/other/"]}),
    ("type:text/markdown", {"media_types": ["text/markdown"]}),
    ("type:text", {"media_types": ["text"]}),
    ("lang:ja", {"languages": ["ja"]}),
    ("lang:en", {"languages": ["en"]}),
    (f"after:{_day(19100)}", {"modified_after": _day(19100)}),
    (f"before:{_day(19200)}", {"modified_before": _day(19200)}),
    (f"after:{_day(19100)} before:{_day(19300)} prefix:corpus/notes/",
     {"modified_after": _day(19100), "modified_before": _day(19300), "path_prefixes": ["corpus/notes/"]}),
]


def _same(a, b):
    return a.model_dump(exclude={"timings", "query"}) == b.model_dump(exclude={"timings", "query"})


@pytest.mark.parametrize("filters, scope", TWINS)
@pytest.mark.parametrize("text", ["lamp", "lighthouse tide", "ランプ"])
def test_scope_equals_its_query_string_twin(fabric, filters, scope, text):
    """guards against: the structured request and the query string filtering differently."""
    by_string = fabric.search(f"{text} {filters}", limit=10)
    by_scope = fabric.search(text, scope=scope, limit=10)
    assert _same(by_string, by_scope)
    assert _same(by_scope, fabric.search(text, scope=Scope.model_validate(scope), limit=10))


def test_scopes_actually_filter(fabric):
    everything = fabric.search("lamp", limit=20)
    notes = fabric.search("lamp", scope={"path_prefixes": ["corpus/notes/"]}, limit=20)
    assert {h.citation.source_key for h in notes.results} == {
        "fs:corpus/notes/a.txt", "fs:corpus/notes/b.md", "fs:corpus/notes/deep/c.txt"}
    assert len(everything.results) > len(notes.results) and notes.eligible_sources == 3
    assert fabric.search("lamp", scope={"media_types": ["pdf"]}).results == ()


def test_prefix_is_a_prefix_not_a_substring(fabric):
    assert fabric.search("lamp", scope={"path_prefixes": ["notes/"]}).eligible_sources == 0
    assert fabric.search("lamp prefix:deep/").eligible_sources == 0


@pytest.mark.parametrize("query, scope, expected", [
    ("lamp type:exe", None, {"type": "no source has this media type; the release has: text/plain (4), text/markdown (1)"}),
    ("lamp", {"media_types": ["exe", "pdf"]}, {"type": "no source has this media type; the release has: "
                                                       "text/plain (4), text/markdown (1)"}),
    ("lamp lang:xx", None, {"lang": "no source is in this language; the release has: en (4), ja (1)"}),
    (f"lamp after:{_day(20000)}", None, {"after": f"no source was modified on or after that day; the newest on {_day(19400)}"}),
    (f"lamp before:{_day(18000)}", None, {"before": f"no source was modified before that day; the oldest on {_day(19000)}"}),
    ("lamp path:nowhere type:exe", None, {"path": "no source key contains that text; the release's keys start "
                                                  "with: corpus/ (5)",
                                          "type": "no source has this media type; the release has: text/plain (4), "
                                                  "text/markdown (1)"}),
    ("lamp prefix:notes/", None, {"prefix": "no source key starts with that prefix; the release's keys start "
                                            "with: corpus/ (5)"}),
    ("lamp source:fs:corpus/none.txt", None, {"source": "no visible source has that key"}),
    # Each admits some source, together none: the note says so instead of blaming one.
    ("lamp lang:ja type:markdown", None, {"*": "each filter admits some source of this release; none admits a "
                                               "source that all the others admit too"}),
])
def test_a_filter_that_admits_nothing_says_what_the_release_has(fabric, query, scope, expected):
    """guards against: `type:exe` or `lang:xx` answering "0 eligible sources" with no word on which
    filter emptied the result or what values exist (a typo in a value looked like an empty corpus)."""
    pack = fabric.search(query, scope=scope)
    assert pack.results == () and pack.eligible_sources == 0
    assert pack.unmatched_filters == expected


def test_filter_notes_on_edge_cases_of_the_release():
    """guards against: a modification time just before midnight rounded into the next day (a note
    contradicting the filter), a language-less source offered as a value `lang:` could select, a
    release with no visible source blamed on each filter."""
    from types import SimpleNamespace

    from fabric_query.context import unmatched_filters

    last_ns = 1_735_689_600 * 10**9 - 100  # 2024-12-31T23:59:59.9999999Z
    view = SimpleNamespace(sources={"fs:a": {"media_type": "text/plain", "mtime_ns": last_ns, "language": None}})
    assert unmatched_filters(view, parse_query("x after:2025-01-01").filters) == {
        "after": "no source was modified on or after that day; the newest on 2024-12-31"}
    assert unmatched_filters(view, parse_query("x lang:en").filters) == {
        "lang": "no source is in this language; the release has: none identified (1)"}
    empty = SimpleNamespace(sources={})
    assert unmatched_filters(empty, parse_query("x type:exe lang:en after:2020-01-01").filters) == {
        "*": "this release has no visible source"}
    assert unmatched_filters(empty, parse_query("x").filters) == {}  # no filter: nothing to explain


def test_a_source_filter_without_its_fs_prefix_names_the_key_it_means():
    """guards against (hostile trial 14c): `budget source:library/notes/meeting-2024-03.md` (the key
    without `fs:`) answered "no visible source has that key" and nothing of the key it meant."""
    from types import SimpleNamespace

    from fabric_query.context import unmatched_filters

    view = SimpleNamespace(sources={"fs:notes/a.md": {"media_type": "text/markdown", "mtime_ns": 0, "language": "en"}})
    assert unmatched_filters(view, parse_query("x source:notes/a.md,notes/b.md").filters) == {
        "source": "no visible source has that key (did you mean fs:notes/a.md? source keys start with fs:)"}
    assert unmatched_filters(view, parse_query("x source:fs:notes/b.md").filters) == {
        "source": "no visible source has that key"}


def test_a_filter_that_admits_something_has_no_note(fabric):
    for query in ("lamp type:markdown", "lamp lang:ja", "nonexistentword type:text"):
        pack = fabric.search(query)
        assert pack.eligible_sources > 0 and pack.unmatched_filters == {}, query


@pytest.mark.parametrize("query, scope", [
    ("lamp type:text", {"media_types": ["text"]}),
    ("lamp source:fs:corpus/notes/a.txt", {"source_keys": ["fs:corpus/notes/a.txt"]}),
    (f"lamp after:{_day(1)}", {"modified_after": _day(2)}),
    ("lamp prefix:corpus/", {"path_prefixes": ["corpus/"]}),
    ("lamp lang:en", {"languages": ["ja"]}),
])
def test_a_dimension_given_twice_is_refused(fabric, query, scope):
    with pytest.raises(InvalidArgumentError):
        fabric.search(query, scope=scope)


@pytest.mark.parametrize("scope", [{"paths": ["a"]}, {"media_types": "text"}, {"modified_after": "soon"},
                                   {"source_keys": [""]}, 7, ["a"]])
def test_bad_scopes_are_typed_errors(fabric, scope):
    with pytest.raises(InvalidArgumentError):
        fabric.search("lamp", scope=scope)



@pytest.mark.parametrize(("fields", "message"), [
    ({"media_types": "text"}, "Scope: media_types: Input should be a valid tuple"),
    ({"paths": ["a"]}, "Scope: paths: unknown field"),
    ({"source_keys": ["a", 5]}, "Scope: source_keys.1: Input should be a valid string"),
    ({"modified_after": "2024-13-01"}, "Scope: modified_after: month must be in 1..12"),
    ({"modified_before": 0}, "Scope: modified_before: expects a calendar day YYYY-MM-DD (UTC), got 0"),
])
def test_a_scope_built_directly_with_bad_fields_is_an_invalid_argument(fields, message):
    """guards against (trial 18a): ``Scope(media_types="text")`` raising pydantic's
    ``ValidationError`` (a multi-line dump with a URL) where the Python API raises only its typed
    errors. Validated as part of a request body it stays pydantic's, with the field's location,
    as the HTTP API's 422 and MCP's argument errors name it."""
    from pydantic import ValidationError

    from fabric_query.server.wire import SearchRequest

    with pytest.raises(InvalidArgumentError) as caught:
        Scope(**fields)
    assert str(caught.value) == message and isinstance(caught.value, ValueError)
    with pytest.raises(ValidationError) as nested:
        SearchRequest.model_validate({"query": "lamp", "scope": fields})
    assert nested.value.errors()[0]["loc"][0] == "scope" and len(nested.value.errors()[0]["loc"]) > 1
    assert Scope(media_types=["text"]) == Scope.model_validate({"media_types": ("text",)})


@pytest.mark.parametrize("positional", [("notes/",), (("fs:a.txt",),), ({"media_types": ("text",)},), ("a", "b")])
def test_a_scope_given_values_without_field_names_says_how_to_call_it(positional):
    """guards against (trial 19a): ``Scope("notes/")`` raising Python's bare ``TypeError`` ("takes 1
    positional argument but 2 were given"), which names neither the fields nor how to give them,
    where the Python API raises only its typed errors. Its signature still shows the fields by name only."""
    import inspect

    with pytest.raises(InvalidArgumentError, match=r"Scope takes its fields by name.*path_prefixes=") as caught:
        Scope(*positional)
    assert "source_keys, path_prefixes, media_types" in str(caught.value)
    assert all(p.kind is p.KEYWORD_ONLY for p in inspect.signature(Scope).parameters.values())
    assert Scope(path_prefixes=("notes/",)).path_prefixes == ("notes/",)


def test_a_scope_with_many_bad_items_is_named_in_one_bounded_line():
    with pytest.raises(InvalidArgumentError) as caught:
        Scope(source_keys=[5] * 1000)
    assert str(caught.value).endswith("source_keys.4: Input should be a valid string; and 995 more")

@pytest.mark.parametrize("field", ["source_keys", "path_prefixes", "media_types", "languages"])
def test_a_scope_item_given_as_bytes_is_refused(field):
    """guards against (trial 17d): ``{"path_prefixes": [b"notes/"]}`` decoded by pydantic's lax mode
    into a prefix, the one scope input of the wrong type that was read (a number is refused)."""
    with pytest.raises(InvalidArgumentError, match=field):
        apply_scope(parse_query("lamp"), {field: [b"text"]})
    assert apply_scope(parse_query("lamp"), {field: ["text"]}) is not None


@pytest.mark.parametrize("day", [0, 1704067200, 1704067200000, 1704067200.0, "1704067200", "2024-01-01T00:00:00",
                                 "2024-01-01T00:00:00+09:00", dt.datetime(2024, 1, 1), "2024-1-1", "２０２４-01-01"])
def test_a_scope_date_is_a_calendar_day_not_a_time_or_a_number(day):
    """guards against (hostile trial 10a): pydantic's ``date`` reading a time, a number of seconds or
    milliseconds, or such a number as a string, as a day: ``"2024-01-01T00:00:00+09:00"`` (Tokyo's
    midnight, 15:00 UTC on Dec 31) filtered from the UTC day 2024-01-01, nine hours off, and ``0``
    meant 1970-01-01; the query string's ``after:`` refuses all of them. Over HTTP and MCP too (the
    body's and the tool's scope are this model)."""
    with pytest.raises(InvalidArgumentError, match="modified_after"):
        apply_scope(parse_query("lamp"), {"modified_after": day})
    with pytest.raises(ValueError, match="calendar day YYYY-MM-DD"):
        Scope.model_validate_json(json.dumps({"modified_before": day}, default=str))
    assert Scope.model_validate_json('{"modified_after": "2024-02-29"}').modified_after == dt.date(2024, 2, 29)
    assert Scope.model_validate({"modified_after": dt.date(2024, 1, 1)}).modified_after == dt.date(2024, 1, 1)


@pytest.mark.parametrize("typo, meant", [("paht", "path"), ("typ", "type"), ("lnag", "lang"), ("sorce", "source"),
                                         ("afetr", "after"), ("befor", "before"), ("PAHT", "path"), ("prefx", "prefix")])
def test_a_misspelt_filter_key_is_reported_not_searched(typo, meant):
    """guards against: `paht:notes/` silently searched as the word "paht:notes/" (no filter)."""
    with pytest.raises(QuerySyntaxError, match=f"did you mean {meant}:"):
        parse_query(f"lamp {typo}:notes/")


@pytest.mark.parametrize("text", ["lamp title:foo", "lamp http://x.org", "lamp a:b", "lamp pa:x",
                                  'lamp "paht:x"', "lamp -paht:x", "lamp paht:"])
def test_words_that_are_no_typo_stay_words(text):
    parse_query(text)


def test_typo_is_a_400_over_http(fabric):
    with live_server(lambda port: create_app(fabric, ServerConfig(), port=port)) as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            wait_ready(client)
            r = client.post("/v1/search", json={"query": "lamp paht:notes/"})
            assert r.status_code == 400 and r.json()["error"]["type"] == "QuerySyntaxError"
            assert "did you mean path:" in r.json()["error"]["message"]
            for filters, scope in TWINS[:4] + TWINS[-1:]:
                by_string = client.post("/v1/search", json={"query": f"lamp {filters}", "limit": 10}).json()
                by_scope = client.post("/v1/search", json={"query": "lamp", "scope": scope, "limit": 10}).json()
                for pack in (by_string, by_scope):
                    pack.pop("timings"), pack.pop("query")
                assert by_string == by_scope
            budget = client.post("/v1/search", json={"query": "lamp", "max_tokens": 40}).json()
            assert budget["used_tokens"] <= 40 and budget["max_tokens"] == 40


# --- the token budget ---------------------------------------------------------------------------

def test_no_budget_reports_what_the_answer_costs(fabric):
    pack = fabric.search("lamp lighthouse", limit=10)
    assert pack.max_tokens is None and pack.dropped_for_budget == 0
    assert pack.used_tokens == sum(p.token_count for p in pack.passages) > 0


def test_a_budget_never_truncates_and_spends_greedily_by_rank(fabric):
    """guards against: a passage cut to fit the budget, a budget overrun, hits dropped silently,
    or a passage kept without its hits."""
    full = fabric.search("lamp lighthouse tide", limit=10)
    costs = sorted({p.token_count for p in full.passages})
    rng = random.Random(16)
    budgets = [1, *costs, *(c + 1 for c in costs), full.used_tokens, full.used_tokens - 1, 10_000,
               *(rng.randint(1, full.used_tokens + 5) for _ in range(10))]
    for budget in budgets:
        if budget < 1:
            continue
        pack = fabric.search("lamp lighthouse tide", limit=10, max_tokens=budget)
        assert pack.max_tokens == budget and pack.used_tokens <= budget
        assert pack.used_tokens == sum(p.token_count for p in pack.passages)
        assert len(pack.results) + pack.dropped_for_budget == len(full.results)
        assert [h.chunk_id for h in pack.results] == [h.chunk_id for h in full.results
                                                      if h.chunk_id in {k.chunk_id for k in pack.results}]
        for p in pack.passages:  # whole chunks, re-verified against the source as cited
            result = fabric.resolve(p.citation)
            assert result.status == "verified" and result.text == p.text
        if budget < max(costs):
            continue  # passages grow to the budget at most: smaller than the unbudgeted ones
        # A budget every unbudgeted passage fits leaves them as they were: whole, unchanged ...
        whole = {p.model_dump_json() for p in full.passages}
        assert all(p.model_dump_json() in whole for p in pack.passages)
        # The greedy rule, recomputed from the unbudgeted answer.
        used, kept, expect = 0, set(), []
        for hit in full.results:
            if hit.passage not in kept:
                cost = full.passages[hit.passage].token_count
                if used + cost > budget:
                    continue
                used += cost
                kept.add(hit.passage)
            expect.append(hit.chunk_id)
        assert [h.chunk_id for h in pack.results] == expect, budget
        for hit in pack.results:
            assert hit.chunk_id in pack.passages[hit.passage].chunk_ids
        cited = {s.unit_id for p in pack.passages for s in p.citation.spans}
        assert {u.unit_id for u in pack.units} == cited
        assert pack.assembly["budget"] == {"max_tokens": budget, "used_tokens": pack.used_tokens,
                                           "dropped_for_budget": pack.dropped_for_budget}
    tiny = fabric.search("lamp lighthouse tide", limit=10, max_tokens=1)
    assert tiny.results == () and tiny.dropped_for_budget == len(full.results)


@pytest.mark.parametrize("bad", [0, -1, 10**8, "5", 2.5, True])
def test_bad_budgets_are_typed_errors(fabric, bad):
    with pytest.raises(InvalidArgumentError):
        fabric.search("lamp", max_tokens=bad)


def test_scope_documents_twins_in_json(fabric):
    """The scope's JSON form is what the HTTP API takes."""
    scope = Scope(path_prefixes=("corpus/notes/",), modified_after=dt.date(2022, 1, 1))
    assert json.loads(scope.model_dump_json())["modified_after"] == "2022-01-01"


@pytest.fixture(scope="module")
def long_note(tmp_path_factory):
    """A long note whose one paragraph about a sextant sits among seven about other things (one
    context window of several chunks), and a short note that names the sextant in passing."""
    root = tmp_path_factory.mktemp("budget")
    folder = root / "corpus"
    folder.mkdir()
    filler = ("The harbour master counted the fishing boats, wrote the weather in the log book, mended "
              "the nets with twine from the chandlery and sent the boys to fetch bread and salted fish. ")
    paragraphs = [filler * 2] * 3 + [
        "The navigator took the brass sextant from its case at noon and measured the sun's altitude "
        "above the horizon to fix the ship's latitude, then checked the reading against the almanac."
    ] + [filler * 2] * 4
    (folder / "logbook.txt").write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
    (folder / "inventory.txt").write_text("Stores: rope, lamp oil, a sextant, canvas, nails.\n", encoding="utf-8")
    home = FabricHome(root / "home")
    ingest(folder, home)
    return Fabric(home.root)


def test_a_budget_the_best_hit_fits_keeps_it(long_note):
    """guards against (trial 14c): passages grown to the configured cap before the budget was spent,
    so the best hit's passage (its chunk and the chunks around it) outgrew a budget its own chunk
    fits, and the pack kept only a lower, one-line hit. Under a budget a passage grows to the budget
    at most; the greedy spend is unchanged."""
    query = "the navigator measured the sun's altitude to fix the ship's latitude"
    full = long_note.search(query, limit=5)
    best = full.results[0]
    passage = full.passages[best.passage]
    assert best.citation.source_key.endswith("logbook.txt") and len(passage.chunk_ids) > 1  # the case exists
    others = [h for h in full.results if h.citation.source_key.endswith("inventory.txt")]
    assert others and full.passages[others[0].passage].token_count < passage.token_count
    budget = passage.token_count - 1
    pack = long_note.search(query, limit=5, max_tokens=budget)
    assert pack.results and pack.results[0].chunk_id == best.chunk_id
    kept = pack.passages[pack.results[0].passage]
    assert best.chunk_id in kept.chunk_ids and kept.token_count <= budget and kept.truncated
    assert long_note.resolve(kept.citation).status == "verified"


@pytest.mark.parametrize(("update", "message"), [
    ({"source_keys": "fs:corpus/notes/a.txt"}, "scope: source_keys: Input should be a valid tuple"),
    ({"path_prefixes": ("",)}, "scope: path_prefixes.0: String should have at least 1 character"),
    ({"modified_after": "2024-01-01"}, None),  # the form the field takes: read as that day
    ({"modified_after": "soon"}, "scope: modified_after: expects a calendar day YYYY-MM-DD (UTC), got 'soon'"),
    ({"languages": None}, "scope: languages: Input should be a valid tuple"),
])
def test_a_scope_changed_without_validation_is_validated_by_the_search(fabric, update, message):
    """guards against (hostile trial 20d): a Scope changed by ``model_copy(update=...)`` (or built
    by ``model_construct``), which pydantic does not validate, searched as it was: a source key
    given as a string instead of a tuple filtered by its characters (no results and no error), a
    date given as text raised Python's ``TypeError``. A scope is validated again, as a citation is."""
    changed = Scope(media_types=("text",)).model_copy(update=update)
    if message is None:
        assert _same(fabric.search("lamp", scope=changed), fabric.search("lamp", scope=Scope(media_types=("text",), **update)))
        return
    with pytest.raises(InvalidArgumentError) as caught:
        fabric.search("lamp", scope=changed)
    assert str(caught.value) == message
    with pytest.raises(InvalidArgumentError):
        fabric.search("lamp", scope=Scope.model_construct(**{**dict(Scope()), **update}))
