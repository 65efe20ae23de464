"""Tests for the query language (fabric_query.querylang)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_query.errors import EmptyQueryError, FabricQueryError, QuerySyntaxError, QueryTooLongError
from fabric_query.querylang import FILTER_KEYS, Filters, ParsedQuery, parse_query


def ns(y: int, m: int, d: int, *rest: int) -> int:
    return int(dt.datetime(y, m, d, *rest, tzinfo=dt.timezone.utc).timestamp()) * 1_000_000_000


# --------------------------------------------------------------------------
# Terms, phrases, exclusions


def test_plain_terms_in_order():
    """guards against: terms reordered, deduplicated or lower-cased by the parser."""
    p = parse_query("Token  signed   token")
    assert p.terms == ("Token", "signed", "token")
    assert p.phrases == () and p.excluded == ()
    assert p.filters == Filters()
    assert not p.filters.active


def test_phrases_are_kept_whole_and_stripped():
    """guards against: quoted phrase split into terms, or its inner whitespace collapsed/kept at the edges."""
    p = parse_query('alpha "  signed  token " beta')
    assert p.terms == ("alpha", "beta")
    assert p.phrases == ("signed  token",)


def test_excluded_term_and_excluded_phrase():
    """guards against: '-word' kept as a positive term, or '-"a b"' treated as a phrase."""
    p = parse_query('keep -drop -"drop this" "keep this"')
    assert p.terms == ("keep",)
    assert p.phrases == ("keep this",)
    assert p.excluded == ("drop", "drop this")


def test_lone_dash_is_a_term_not_an_exclusion():
    """guards against: a bare '-' (followed by space or at the end) swallowing the next word as excluded."""
    p = parse_query("a - b -")
    assert p.terms == ("a", "-", "b", "-")
    assert p.excluded == ()


def test_word_touching_a_quote_ends_at_the_quote():
    """guards against: a quote inside a word being taken as part of the word (unbalanced parsing)."""
    p = parse_query('a"b c"d')
    assert p.terms == ("a", "d")
    assert p.phrases == ("b c",)


def test_a_hebrew_acronym_typed_with_an_ascii_quote_is_one_word():
    """guards against (hostile trial 13a): ``צה"ל`` (the IDF), ``ארה"ב`` (the USA), ``ד"ר`` (Dr.) — Hebrew
    acronyms, whose gershayim every keyboard types as ``"`` — refused as an unclosed quote, or read
    as a word and a phrase. A quote between two Hebrew letters is part of the word, inside a phrase
    too; a quote beside a space still opens or closes a phrase, in Hebrew as elsewhere."""
    assert parse_query('צה"ל').terms == ('צה"ל',)
    p = parse_query('ארה"ב ד"ר -עו"ד')
    assert p.terms == ('ארה"ב', 'ד"ר') and p.excluded == ('עו"ד',)
    assert parse_query('"צה"ל בעזה" שלום').phrases == ('צה"ל בעזה',)
    assert parse_query('צָה"ל').terms == ('צָה"ל',)  # niqqud before the quote
    p = parse_query('"שלום" עולם')
    assert p.phrases == ("שלום",) and p.terms == ("עולם",)
    assert parse_query('a"b c"d').phrases == ("b c",)


def test_empty_phrase_is_ignored():
    """guards against: an empty '""' phrase producing a MUST clause that matches nothing (or everything)."""
    p = parse_query('x "" "   "')
    assert p.terms == ("x",) and p.phrases == ()


def test_positive_text_joins_terms_and_phrases_not_exclusions():
    """guards against: excluded terms leaking into the dense channel's query text."""
    p = parse_query('a -b "c d"')
    assert p.positive_text == "a c d"


# --------------------------------------------------------------------------
# Filters


def test_all_filters_parsed():
    """guards against: a filter key being ignored or mapped to the wrong field."""
    p = parse_query("x path:docs/ type:text after:2024-01-02 before:2024-03-04 source:a,b")
    f = p.filters
    assert p.terms == ("x",)
    assert f.path == "docs/"
    assert f.media_type == "text"
    assert f.after_ns == ns(2024, 1, 2)
    assert f.before_ns == ns(2024, 3, 4)
    assert f.sources == ("a", "b")
    assert f.active


def test_filter_keys_are_case_insensitive():
    """guards against: 'PATH:' silently becoming a search term."""
    p = parse_query("x PATH:foo Type:text")
    assert p.terms == ("x",)
    assert p.filters.path == "foo" and p.filters.media_type == "text"


def test_quoted_filter_value():
    """guards against: a quoted filter value with spaces being split into value + terms."""
    p = parse_query('x path:"my docs/a b" source:" k1 , k2 ,"')
    assert p.terms == ("x",)
    assert p.filters.path == "my docs/a b"
    assert p.filters.sources == ("k1", "k2")


def test_source_list_trims_and_drops_empties():
    """guards against: empty items or surrounding spaces kept in the source scope."""
    p = parse_query("x source:a,,b,")
    assert p.filters.sources == ("a", "b")


@pytest.mark.parametrize("text", ["x -path:secret", "x -PATH:secret", 'x -path:"a b"', "x -ｐａｔｈ：secret"])
def test_a_negated_filter_is_a_syntax_error(text):
    """guards against: '-path:x' applied as a (positive) filter, or (hostile trial 8b, 2026-12-05)
    silently searched as the excluded words ``path secret``, which no text holds, so the source the
    user meant to leave out was served with nothing said."""
    with pytest.raises(QuerySyntaxError, match="cannot be negated"):
        parse_query(text)


@pytest.mark.parametrize("text, shown, quoted", [
    ("x -path:secret", "-path:secret", '-"path:secret"'),
    ('x -path:"a b" y', '-path:"a b"', '-"path:a b"'),
    ('x -lang:\u200b"en"', '-lang:\u200b"en"', '-"lang:en"'),
])
def test_a_negated_filter_names_itself_and_the_quoted_exclusion_that_would_work(text, shown, quoted):
    """guards against (trial 12c): a negated filter with a quoted value (``-path:"a b"``) named as
    ``(-path:)`` and answered with the suggestion ``-"path:"``, which excludes another text."""
    with pytest.raises(QuerySyntaxError) as err:
        parse_query(text)
    assert f"({shown})" in str(err.value) and str(err.value).endswith(f"quote it: {quoted}"), str(err.value)


def test_a_quoted_negated_filter_is_an_excluded_literal():
    p = parse_query('x -"path:secret"')
    assert p.filters.path is None and p.excluded == ("path:secret",)


@pytest.mark.parametrize("text", ["x ｐａｔｈ:notes", "x path：notes", "x ＰＡＴＨ﹕notes", "x path\u200b：notes"])
def test_a_filter_key_in_full_width_forms_is_the_filter(text):
    """guards against (hostile trial 8b, 2026-12-05): a filter typed in an IME's full-width forms
    searched as the words ``path notes`` and silently not applied."""
    p = parse_query(text)
    assert p.filters.path == "notes" and p.terms == ("x",)


def test_unknown_key_value_is_a_literal_term():
    """guards against: unknown 'key:value' raising, being dropped, or being interpreted as a filter."""
    p = parse_query("a:b http://x.org/y title:foo")
    assert p.terms == ("a:b", "http://x.org/y", "title:foo")
    assert not p.filters.active


@pytest.mark.parametrize(
    "text",
    ["x OR 1=1", "*", "\\", ":", "%", "'", "x' OR '1'='1", "%_%", "a\\b", "::", "';DROP TABLE sources;--"],
)
def test_injection_looking_text_stays_literal(text):
    """guards against: user text being interpreted (operators, wildcards, escapes) instead of bound as terms."""
    p = parse_query(text)
    assert p.terms == tuple(text.split())
    assert p.phrases == () and p.excluded == ()
    assert not p.filters.active


def test_sql_comment_dashes_stay_literal_values():
    """guards against: '--' being interpreted (comment/operator) rather than bound as a literal value."""
    p = parse_query("x OR 1=1 --")
    assert p.terms == ("x", "OR", "1=1")
    # '-' followed by a non-space excludes the rest of the word: '--' excludes the literal '-'.
    assert p.excluded == ("-",)
    assert not p.filters.active


def test_colon_prefix_word_is_literal():
    """guards against: a word starting with ':' being read as a filter with an empty key."""
    assert parse_query(":path").terms == (":path",)


# --------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize("text", ['"unclosed', 'a "b', 'x -"oops', 'x path:"open'])
def test_unclosed_quote(text):
    """guards against: an unclosed quote silently taking the rest of the line."""
    with pytest.raises(QuerySyntaxError) as ei:
        parse_query(text)
    assert type(ei.value) is QuerySyntaxError
    assert "unclosed" in str(ei.value)


@pytest.mark.parametrize("text", ["x path:a path:b", "x type:a TYPE:b", "x source:a source:b", "x after:2024-01-01 after:2024-01-02"])
def test_repeated_filter_key(text):
    """guards against: a repeated filter key where the last (or first) silently wins."""
    with pytest.raises(QuerySyntaxError, match="more than once"):
        parse_query(text)


@pytest.mark.parametrize("text", ["x path:", "x type: y", 'x path:""', 'x source:"  "', "x after:"])
def test_empty_filter_value(text):
    """guards against: an empty filter value being treated as 'no filter' or matching everything."""
    with pytest.raises(QuerySyntaxError, match="no value"):
        parse_query(text)


@pytest.mark.parametrize("value", ["2024-13-01", "2024-02-30", "yesterday", "2024/01/01", "0000-01-01", "1-1-1"])
@pytest.mark.parametrize("key", ["after", "before"])
def test_bad_date(key, value):
    """guards against: a malformed date raising a bare ValueError or being ignored."""
    with pytest.raises(QuerySyntaxError) as ei:
        parse_query(f"x {key}:{value}")
    assert not isinstance(ei.value, EmptyQueryError)


@pytest.mark.parametrize("value", ["20240101", "2024-W01-1"])
def test_date_must_be_yyyy_mm_dd(value):
    """guards against: the date filter accepting formats other than the documented YYYY-MM-DD."""
    with pytest.raises(QuerySyntaxError):
        parse_query(f"x after:{value}")


@pytest.mark.parametrize("text", ["", "   \t\n", "path:x", "type:text source:a", "-a -b", '-"a b"', '"" ""'])
def test_empty_query(text):
    """guards against: a query with no positive term running (matching everything or nothing)."""
    with pytest.raises(EmptyQueryError):
        parse_query(text)


def test_a_query_of_excluded_terms_only_is_told_so():
    """guards against (hostile trial 14c): `fabric search -- -budget` answered "filters alone are
    not a query", though the query held no filter: an excluded term only narrows what a search term
    finds."""
    with pytest.raises(EmptyQueryError, match=r"an excluded term \(-budget\) only narrows"):
        parse_query("-budget")
    with pytest.raises(EmptyQueryError, match="filters alone") as ei:
        parse_query("path:x")
    assert "excluded" not in str(ei.value)


@pytest.mark.parametrize("text", ['""', '"  "', "   ", "\u200b", '"\u200b"'])
def test_a_query_with_neither_term_nor_filter_is_not_told_about_filters(text):
    """guards against (hostile trial 20d): a query of quotes only (``""``) answered "filters alone are
    not a query", though it held no filter."""
    with pytest.raises(EmptyQueryError, match="only spaces, quotes or invisible characters") as ei:
        parse_query(text)
    assert "filter" not in str(ei.value)


def test_empty_query_error_is_a_syntax_error():
    """guards against: the error hierarchy being flattened (callers catch QuerySyntaxError)."""
    assert issubclass(EmptyQueryError, QuerySyntaxError)
    assert issubclass(QueryTooLongError, QuerySyntaxError)
    assert issubclass(QuerySyntaxError, FabricQueryError)


def test_query_too_long_cap_is_exact():
    """guards against: off-by-one in the length cap, or the cap counting bytes/UTF-16 units instead of scalars."""
    assert parse_query("a" * 20, max_chars=20).terms == ("a" * 20,)
    with pytest.raises(QueryTooLongError):
        parse_query("a" * 21, max_chars=20)
    # 20 astral scalars are 40 UTF-16 units and 80 UTF-8 bytes, still within a 20-scalar cap.
    assert parse_query("\U0001F600" * 20, max_chars=20).terms == ("\U0001F600" * 20,)


def test_too_long_checked_before_syntax():
    """guards against: an over-long query being parsed (cost) before the cap is enforced."""
    with pytest.raises(QueryTooLongError):
        parse_query('"' * 1001)


def test_filter_only_query_with_error_prefers_syntax_error():
    """guards against: a bad filter being hidden by the empty-query error (order of checks)."""
    with pytest.raises(QuerySyntaxError) as ei:
        parse_query("path:a path:b")
    assert not isinstance(ei.value, EmptyQueryError)


def test_source_with_only_commas_is_empty_value():
    """guards against: a source scope with no keys silently widening to every source."""
    with pytest.raises(QuerySyntaxError):
        parse_query("x source:,")


# --------------------------------------------------------------------------
# Filters.admits / active


def test_admits_path_is_substring():
    """guards against: path filter implemented as prefix/equality/glob."""
    f = Filters(path="docs/")
    assert f.admits("root1:/a/docs/x.txt", "text/plain", 1)
    assert not f.admits("root1:/a/doc/x.txt", "text/plain", 1)
    assert not Filters(path="%").admits("abc", "text/plain", 1)
    assert Filters(path="%").admits("a%c", "text/plain", 1)


@pytest.mark.parametrize(
    "filt, media, ok",
    [
        ("text/plain", "text/plain", True),
        ("text/plain", "text/markdown", False),
        ("text", "text/plain", True),
        ("text", "text/markdown", True),
        ("text", "application/xhtml+xml", False),
        ("application", "application/epub+zip", True),
        ("plain", "text/plain", True),
        ("markdown", "text/markdown", True),
        ("zip", "application/epub+zip", True),
        ("xml", "application/xhtml+xml", True),
        ("tex", "text/plain", False),
        ("lain", "text/plain", False),
        ("text/pla", "text/plain", False),
        ("text/", "text/plain", False),
        # a file extension, through the type the scan gives a file so named
        ("docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", True),
        ("PPTX", "application/vnd.openxmlformats-officedocument.presentationml.presentation", True),
        ("md", "text/markdown", True),
        ("htm", "text/html", True),
        ("docx", "application/pdf", False),
        ("md", "text/plain", False),
        ("exe", "text/plain", False),
    ],
)
def test_admits_media_type(filt, media, ok):
    """guards against: type filter matching arbitrary substrings, or not matching the major type/suffix,
    or `type:docx` (a user's natural word for Word files) selecting nothing (fresh-user trial)."""
    assert Filters(media_type=filt).admits("k", media, 1) is ok


def test_admits_type_epub():
    """guards against: 'type:epub' failing to select EPUB sources (application/epub+zip)."""
    assert Filters(media_type="epub").admits("k", "application/epub+zip", 1)


def test_admits_dates_after_inclusive_before_exclusive():
    """guards against: off-by-one at the date boundaries (after must be inclusive, before exclusive)."""
    p = parse_query("x after:2024-01-02 before:2024-01-03")
    f = p.filters
    start, end = ns(2024, 1, 2), ns(2024, 1, 3)
    assert not f.admits("k", "text/plain", start - 1)
    assert f.admits("k", "text/plain", start)
    assert f.admits("k", "text/plain", end - 1)
    assert not f.admits("k", "text/plain", end)


def test_dates_are_utc_midnight():
    """guards against: dates interpreted in local time."""
    assert parse_query("x after:1970-01-02").filters.after_ns == 86_400 * 1_000_000_000


def test_admits_unknown_mtime_excluded_by_date_filters():
    """guards against: a source without mtime passing a date filter."""
    assert not Filters(after_ns=5).admits("k", "text/plain", None)
    assert not Filters(before_ns=5).admits("k", "text/plain", None)
    assert Filters().admits("k", "text/plain", None)


def test_admits_sources_scope_is_exact_membership():
    """guards against: source scope matched by substring/prefix."""
    f = Filters(sources=("a", "b"))
    assert f.admits("a", "text/plain", 1)
    assert f.admits("b", "text/plain", 1)
    assert not f.admits("ab", "text/plain", 1)
    assert not f.admits("c", "text/plain", 1)


def test_admits_filters_combine_with_and():
    """guards against: filters OR-ed instead of AND-ed."""
    f = Filters(path="x", media_type="text", sources=("x1",))
    assert f.admits("x1", "text/plain", 1)
    assert not f.admits("x2", "text/plain", 1)
    assert not f.admits("x1", "application/pdf", 1)


def test_active_flags():
    """guards against: an active filter being reported inactive (eligibility would then be skipped)."""
    assert not Filters().active
    for f in (Filters(path="p"), Filters(media_type="t"), Filters(after_ns=1), Filters(before_ns=1), Filters(sources=("s",))):
        assert f.active


@pytest.mark.parametrize("text", ["x before:1970-01-01", "x after:1970-01-01"])
def test_epoch_date_filter_is_active(text):
    """guards against: a date filter at the epoch (0 ns) being dropped by pipeline.eligible_parses."""
    f = parse_query(text).filters
    # admits() does restrict (a file from 2024 is outside before:1970-01-01) ...
    assert not f.admits("k", "text/plain", None)
    # ... so the filter must be reported active, else eligibility ignores it.
    assert f.active


# --------------------------------------------------------------------------
# Properties

_QUERY_ALPHABET = st.sampled_from(list('ab "-:,\\\'%*\t\n') + ["path:", "type:", "after:", "before:", "source:", "2024-01-01", "é", "\U0001F600", "トークン"])


@settings(max_examples=250, deadline=None)
@given(st.one_of(st.text(max_size=60), st.lists(_QUERY_ALPHABET, max_size=20).map("".join)))
def test_parse_query_only_raises_fabric_errors(text):
    """guards against: arbitrary user text crashing the parser with IndexError/ValueError/etc."""
    try:
        p = parse_query(text)
    except FabricQueryError:
        return
    assert isinstance(p, ParsedQuery)
    assert p.terms or p.phrases
    assert all(t and not any(c.isspace() for c in t) for t in p.terms)
    assert all(ph and ph == ph.strip() for ph in (*p.phrases,))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Z", "C"), blacklist_characters='"-'), min_size=1, max_size=8), min_size=1, max_size=6))
def test_terms_roundtrip(words):
    """guards against: plain words (no quotes/dashes/filter keys) being altered or dropped."""
    words = [w for w in words if w.partition(":")[0].lower() not in FILTER_KEYS or ":" not in w]
    if not words:
        return
    assert parse_query(" ".join(words)).terms == tuple(words)


def test_lang_filter_matches_primary_subtag():
    """guards against: lang:en missing en-US documents, or admitting documents of unknown language."""
    f = parse_query("x lang:en").filters
    assert f.active and f.language == "en"
    assert f.admits("fs:a", "text/plain", 1, "en-US")
    assert f.admits("fs:a", "text/plain", 1, "EN")
    assert not f.admits("fs:a", "text/plain", 1, "es")
    assert not f.admits("fs:a", "text/plain", 1, None)
    assert Filters().admits("fs:a", "text/plain", 1, None)


@pytest.mark.parametrize(("text", "terms", "excluded", "path", "media_type"), [
    ("lighthouse -\u200b", ("lighthouse",), (), None, None),
    ("\u200bpath:zzz lighthouse", ("lighthouse",), (), "zzz", None),
    ("pa\u00adth:zzz lighthouse", ("lighthouse",), (), "zzz", None),
    ("type\u2060:pdf keeper", ("keeper",), (), None, "pdf"),
    ('"\u200b" keeper -"\u00ad"', ("keeper",), (), None, None),
    ("Bundes\u00adgericht", ("Bundes\u00adgericht",), (), None, None),  # a term keeps them (folded in analysis)
    ('lighthouse -\u200b"storms"', ("lighthouse",), ("storms",), None, None),  # an exclusion, not a phrase
    ('lighthouse path:\u200b"en"', ("lighthouse",), (), "en", None),  # the quoted value, not a phrase
    ("keeper type:te\u00adxt", ("keeper",), (), None, "text"),
])
def test_invisible_format_characters_are_no_query_syntax(text, terms, excluded, path, media_type):
    """guards against (hostile trial 3, 2026-12-05): a zero-width space or soft hyphen making a
    term, an exclusion or a phrase of nothing (that dropped dense hits), or hiding a filter key so
    the filter was searched as text and silently ignored."""
    parsed = parse_query(text)
    assert (parsed.terms, parsed.excluded, parsed.phrases) == (terms, excluded, ())
    assert (parsed.filters.path, parsed.filters.media_type) == (path, media_type)
    assert parse_query("x lang:\u200ben after:\u200b2020-01-01").filters == parse_query("x lang:en after:2020-01-01").filters


@pytest.mark.parametrize("text", ["\u200b", "\u00ad \ufeff", "-lighthouse \u200b", '"\u200b"'])
def test_a_query_of_invisible_characters_only_is_empty(text):
    with pytest.raises(EmptyQueryError):
        parse_query(text)


@pytest.mark.parametrize("form", ["NFC", "NFD"])
def test_source_key_filters_compare_in_nfc(form):
    """guards against (hostile trial 8b, 2026-12-05): a file named on macOS (NFD `café`) that no
    `path:café`, `prefix:` or `source:` typed on a keyboard (NFC) admitted ("no source key contains
    that text", beside a result list printing the same name), and the reverse."""
    import unicodedata

    key = "fs:notes/" + unicodedata.normalize(form, "café.txt")
    other = unicodedata.normalize("NFD" if form == "NFC" else "NFC", "café")
    for text in [f"x path:{other}", f"x prefix:notes/{other}", f"x source:fs:notes/{other}.txt"]:
        assert parse_query(text).filters.admits(key, "text/plain", 0), text
    assert not parse_query(f"x path:{other}s").filters.admits(key, "text/plain", 0)
