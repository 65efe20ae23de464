"""Only the documented typed errors (``fabric_query.errors``) escape the public API, for every input
(issue 13, item 10); the e5 query encode is bounded (item 11).

The fuzz test is seeded (``derandomize=True``) and bounded: a few thousand cases over
``Fabric.search`` (arbitrary text — lone surrogates, control characters, CJK, query syntax —,
limits, release IDs, flags) and ``Fabric.resolve`` (arbitrary dicts, mutated real citations),
about a minute on the 2-core project machine.
"""

from __future__ import annotations

import math

import pytest
from conftest import ingest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from fabric_query import Fabric
from fabric_assets.cli import app
from fabric_query.errors import CitationError, FabricQueryError, InvalidArgumentError, QuerySyntaxError
from fabric_resources.home import FabricHome

FILES = {
    "a.txt": "The lighthouse keeper logged the tide.\n\nA storm broke the lamp in March.\n",
    "b.txt": "Lighthouse lenses focus the lamp into a beam. Ünïcödé façade, 😀 emoji.\n",
    "j.txt": "認証トークンは利用者を示す文字列です。\n\n有効期限が切れたら再発行します。\n",
}
FUZZ = settings(derandomize=True, deadline=None, max_examples=1500, database=None,
                suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    folder = tmp / "corpus"
    folder.mkdir()
    for rel, text in FILES.items():
        (folder / rel).write_text(text, encoding="utf-8")
    home = FabricHome(tmp / "home")
    ingest(folder, home)
    return Fabric(home.root)


#: Text that exercises the query language and the analyzers: syntax characters, filters, scripts
#: without spaces, astral characters, controls and lone surrogates.
_ALPHABET = st.one_of(
    st.sampled_from(list('"-: \t\n\x00\\*?()[]{}^~+!&|/\'')),
    st.sampled_from(["path:", "type:", "lang:", "after:", "before:", "source:", "2024-01-01", "fs:corpus/a.txt",
                     "OR", "AND", "NOT", "lighthouse", "keeper", "認証", "トークン", "😀", "\u200b", "\ufeff"]),
    st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF),
)
QUERY_TEXT = st.lists(_ALPHABET, max_size=40).map("".join) | st.text(max_size=60)
LIMITS = st.one_of(st.none(), st.integers(-5, 1100), st.sampled_from([0, 1, 10, 1000, 1001, 2**63, -(2**63)]),
                   st.booleans(), st.floats(allow_nan=True), st.text(max_size=3))
RELEASES = st.one_of(st.none(), st.integers(-3, 5), st.sampled_from([2**63, 2**64, -(2**70)]), st.booleans(),
                     st.text(max_size=3), st.floats())


def _search(fabric, query, **kwargs):
    try:
        pack = fabric.search(query, **kwargs)
    except FabricQueryError:
        return None
    assert all("".join(s.text for s in h.highlights) == h.text for h in pack.results)
    pack.model_dump_json()  # the pack serialises (no lone surrogate inside)
    return pack


@FUZZ
@given(query=st.one_of(QUERY_TEXT, st.none(), st.integers(), st.binary(max_size=8)),
       limit=st.one_of(st.none(), st.integers(1, 30)), release_id=st.sampled_from([None, 1]))
def test_search_text_raises_only_typed_errors(fabric, query, limit, release_id):
    """guards against: UnicodeEncodeError for lone surrogates, or any untyped exception (tantivy,
    Arrow, pydantic) escaping ``Fabric.search`` for some query text."""
    pack = _search(fabric, query, limit=limit, release_id=release_id)
    if pack is not None:
        assert len(pack.results) <= (limit or 10)


@settings(FUZZ, max_examples=500)
@given(limit=LIMITS, release_id=RELEASES, debug=st.one_of(st.booleans(), st.none(), st.integers(0, 2)))
def test_search_arguments_raise_only_typed_errors(fabric, limit, release_id, debug):
    """guards against: ``limit=-1`` answering 99 results, ``limit=0`` the default, SQLite's
    OverflowError for a huge release ID."""
    pack = _search(fabric, "lighthouse 認証", limit=limit, release_id=release_id, debug=debug)
    if pack is not None:
        assert (limit is None or (isinstance(limit, int) and not isinstance(limit, bool) and 1 <= limit <= 1000))
        assert len(pack.results) <= (limit or 10)



def test_a_numpy_integer_limit_is_taken_as_the_integer_and_bools_floats_and_text_are_not(fabric):
    """guards against (trial 18a): ``limit=numpy.int64(2)`` (a count from an array) refused as "not
    an integer"; any integer type but bool is one."""
    import numpy as np

    as_int = [hit.citation for hit in fabric.search("lighthouse 認証", limit=2).results]
    for limit in (np.int64(2), np.uint8(2), np.int32(2)):
        assert [hit.citation for hit in fabric.search("lighthouse 認証", limit=limit).results] == as_int
    for bad in (True, np.bool_(True), 2.0, np.float64(2), "2"):
        with pytest.raises(InvalidArgumentError, match="limit must be an integer"):
            fabric.search("lighthouse", limit=bad)
    with pytest.raises(InvalidArgumentError, match="between 1 and"):
        fabric.search("lighthouse", limit=np.int64(0))
    # release_id and max_tokens the same way (trial 18a left them refusing numpy integers)
    release = fabric.search("lighthouse").release_id
    assert fabric.search("lighthouse", release_id=np.int64(release)).release_id == release
    assert fabric.search("lighthouse", max_tokens=np.int32(500)).used_tokens <= 500
    for name in ("release_id", "max_tokens"):
        with pytest.raises(InvalidArgumentError, match=f"{name} must be an integer"):
            fabric.search("lighthouse", **{name: np.float64(2)})


def _mutations():
    scalar = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
                       st.text(max_size=70), st.sampled_from(["0" * 64, "f" * 32, "x\udcff", "\x00"]))
    return st.recursive(scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(max_size=12), inner, max_size=3), max_leaves=6)


@pytest.fixture(scope="module")
def real_citation(fabric):
    return fabric.search("lighthouse keeper").results[0].citation.model_dump()


@FUZZ
@given(data=st.data())
def test_resolve_raises_only_citation_error(fabric, real_citation, data):
    """guards against: pydantic ``ValidationError`` / ``ValueError`` / ``UnicodeEncodeError`` /
    ``OverflowError`` from ``Fabric.resolve`` instead of the documented ``CitationError``."""
    real = real_citation
    kind = data.draw(st.sampled_from(["arbitrary", "field", "span"]))
    if kind == "arbitrary":
        citation = data.draw(st.one_of(_mutations(), st.dictionaries(st.sampled_from(sorted(real)), _mutations())))
    elif kind == "field":
        citation = dict(real)
        key = data.draw(st.sampled_from(sorted(real)))
        citation[key] = data.draw(_mutations())
    else:
        citation = dict(real)
        span = dict(real["spans"][0])
        span[data.draw(st.sampled_from(sorted(span)))] = data.draw(_mutations())
        citation["spans"] = [span]
    try:
        result = fabric.resolve(citation)
    except CitationError:
        return
    assert result.status in ("verified", "stale")
    if result.status == "verified":
        assert result.text is not None


@pytest.mark.parametrize("where, value", [
    ("release_id", True), ("release_id", "1"), ("release_id", 1.0),
    ("span.start_char", False), ("span.end_char", "3"), ("location.pages", [True]),
])
def test_a_citation_integer_is_never_coerced(fabric, real_citation, where, value):
    """guards against: ``release_id: true`` or ``"1"`` read as release 1 (a second spelling of one
    citation that verifies); each field the real citation verifies with."""
    assert fabric.resolve(real_citation).status == "verified"
    citation = {**real_citation, "spans": [dict(s) for s in real_citation["spans"]],
                "locations": [dict(loc) for loc in real_citation["locations"]]}
    if where.startswith("span."):
        citation["spans"][0][where.split(".")[1]] = value
    elif where.startswith("location."):
        assert citation["locations"], "the fixture's citation carries a location"
        citation["locations"][0][where.split(".")[1]] = value
    else:
        citation[where] = value
    with pytest.raises(CitationError, match="not a valid citation"):
        fabric.resolve(citation)


@pytest.mark.parametrize("where", ["source_key", "parse_id", "text_hash", "also_cited_by", "span.unit_id",
                                   "span.text_hash", "location.kind", "location.path"])
def test_a_citation_string_given_as_bytes_is_refused(fabric, real_citation, where):
    """guards against (trial 17d): ``source_key: b"fs:corpus/a.txt"`` decoded by pydantic's lax mode
    into the key, a second spelling of one citation that verified."""
    citation = {**real_citation, "spans": [dict(s) for s in real_citation["spans"]],
                "locations": [dict(loc) for loc in real_citation["locations"]]}
    if where == "also_cited_by":
        citation[where] = [real_citation["source_key"].encode()]
    elif where == "location.path":
        citation["locations"][0]["path"] = [b"x"]
    elif "." in where:
        part, field = where.split(".")
        target = citation["spans" if part == "span" else "locations"][0]
        target[field] = target[field].encode()
    else:
        citation[where] = citation[where].encode()
    with pytest.raises(CitationError, match="not a valid citation"):
        fabric.resolve(citation)


@pytest.mark.parametrize("cancel", [True, 1, "stop", object()])
def test_a_cancel_that_is_not_an_event_is_an_invalid_argument(fabric, cancel):
    """guards against (trial 17d): ``cancel=True`` an ``AttributeError`` ('bool' object has no
    attribute 'is_set') from inside the search."""
    from fabric_query.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="cancel"):
        fabric.search("lighthouse", cancel=cancel)


def test_resolve_with_shown_text_keeps_where_the_cited_bytes_are_active(fabric, real_citation):
    """guards against (trial 17d): ``resolve(citation, shown_text=...)`` dropping ``active_at`` (the
    visible sources serving the cited parse) that ``resolve(citation)`` gives for a moved file."""
    moved = {**real_citation, "source_key": "fs:corpus/renamed.txt"}
    plain = fabric.resolve(moved)
    assert plain.status == "stale" and plain.active_at == (real_citation["source_key"],)
    shown = fabric.resolve(moved, shown_text="whatever the hit showed")
    assert shown.status == "stale" and shown.active_at == plain.active_at


def test_limits_and_surrogates_are_typed(fabric):
    """guards against: ``limit=-1`` or ``0`` silently answering with the default; surrogates crashing."""
    from fabric_query.errors import InvalidArgumentError

    for limit in (-1, 0, 1001, True, 2.5):
        with pytest.raises(InvalidArgumentError):
            fabric.search("lighthouse", limit=limit)
    with pytest.raises(QuerySyntaxError, match="surrogate"):
        fabric.search("x\udcff")
    with pytest.raises(CitationError):
        fabric.resolve({"a": 1})
    assert len(fabric.search("lighthouse", limit=1).results) == 1


def test_cli_search_with_an_undecodable_byte_is_a_short_error(fabric):
    """guards against: a traceback for `fabric search $'x\\xff'` (argv decodes 0xff to U+DCFF)."""
    result = CliRunner().invoke(app, ["search", "x\udcff", "--home", str(fabric.home.root)])
    assert result.exit_code == 2, result.output
    assert "QuerySyntaxError" in result.output and "Traceback" not in result.output


def test_e5_query_encoding_is_bounded(fabric):
    """guards against: a 1,000-character Japanese query feeding every token to e5 (5-15 s here).
    The bound is on work (tokens), not a timed assertion."""
    from fabric_resources.models.multilingual import MAX_QUERY_TOKENS, shared_multilingual_embedder

    e5 = shared_multilingual_embedder()
    long_query = ("認証トークンは利用者を示す文字列です。有効期限が切れたら再発行します。" * 40)[:1000]
    cut = e5.truncate_query(long_query)
    assert long_query.startswith(cut) and len(cut) < len(long_query)
    assert e5.model.token_count(cut, True) <= MAX_QUERY_TOKENS < e5.model.token_count(long_query[:len(cut) + 1], True)
    assert e5.truncate_query("認証トークン") == "認証トークン"
    full, truncated = e5.encode_queries([long_query, cut])
    assert math.isclose(float(full @ truncated), 1.0, abs_tol=1e-6)
    assert fabric.search(long_query).results


def test_a_pack_equals_itself_after_a_json_round_trip(fabric):
    """guards against (trial 17d): ``EvidencePack.model_validate_json(pack.model_dump_json()) != pack``
    (a hit's dense provenance held tuples, which JSON reads back as lists)."""
    from fabric_query.types import EvidencePack

    for query in ("lighthouse keeper", "認証トークン", '"the lamp"'):
        pack = fabric.search(query, debug=True, max_tokens=300)
        assert pack.results and any(h.provenance for h in pack.results)
        assert EvidencePack.model_validate_json(pack.model_dump_json()) == pack


def test_a_refused_citation_says_what_to_send():
    """guards against (trial 23h): "not a valid citation (malformed: spans.0)" over HTTP and MCP,
    which named the field but never what a client should send instead."""
    from fabric_query.resolve import validated_citation

    span = {"unit_id": "a" * 32, "start_char": 0, "end_char": 10**12, "start_utf16": 0, "end_utf16": 5,
            "text_hash": "b" * 64}
    citation = {"release_id": 1, "source_key": "fs:c/a.txt", "source_hash": "c" * 64, "parse_id": "d" * 32,
                "chunk_id": "e" * 32, "spans": [span], "text_hash": "f" * 64}
    validated_citation({**citation, "spans": [{**span, "end_char": 5}]})  # the same, in range: valid
    for bad in ({**citation, "spans": [span]}, {**citation, "evil": 1}, {**citation, "release_id": "1"}):
        with pytest.raises(CitationError, match=r"^not a valid citation \(.+\): send the citation object "
                                                r"exactly as a search returned it$"):
            validated_citation(bad)
