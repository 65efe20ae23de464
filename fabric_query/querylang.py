"""Query language: free text, ``"exact phrases"``, ``-excluded`` terms and filters.

Filters: ``path:`` (substring of the source key), ``type:`` (media type, or
its prefix before ``/``), ``lang:`` (document language, BCP 47 primary subtag:
declared by the document, e.g. an EPUB's ``dc:language``, else guessed from
its script for ja/zh/ko/th), ``after:`` / ``before:`` (source modification time,
``YYYY-MM-DD``, after is inclusive, before exclusive), ``source:`` (one or
more source keys, comma-separated — the scope), ``confidence:`` (a number in [0, 1]: text
recognised by OCR is admitted only where its unit's confidence is at least that; text read from
a text layer or a file is exact and always passes). A filter value may be quoted.
Each filter key may appear at most once. A word with a colon whose key is not
a filter (``OR 1=1 --``, ``a:b``, ``http://x``) is plain text: user text is
only ever bound as values, never spliced into a query string.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

from fabric_query.errors import EmptyQueryError, QuerySyntaxError, QueryTooLongError

FILTER_KEYS = ("path", "type", "lang", "after", "before", "source", "confidence")


@dataclass(frozen=True)
class Filters:
    path: str | None = None
    media_type: str | None = None
    after_ns: int | None = None
    before_ns: int | None = None
    sources: tuple[str, ...] = ()
    language: str | None = None
    #: ``confidence:``: the least OCR confidence (0-1) a unit needs; it filters chunks, not sources
    #: (``fabric_query.context.low_confidence_chunks``), so it is not part of :attr:`active`.
    min_confidence: float | None = None

    @property
    def active(self) -> bool:
        return (self.path is not None or self.media_type is not None or self.after_ns is not None
                or self.before_ns is not None or bool(self.sources) or self.language is not None)

    def admits(self, source_key: str, media_type: str, mtime_ns: int | None, language: str | None = None) -> bool:
        """True if a source with these attributes is eligible.

        ``lang:`` compares BCP 47 primary subtags case-insensitively (``lang:en`` admits
        ``en-US``); a source whose language is unknown is not admitted by a ``lang:`` filter.
        """
        if self.sources and source_key not in self.sources:
            return False
        if self.language is not None:
            wanted = self.language.lower()
            have = (language or "").lower()
            if not (have == wanted or have.split("-")[0] == wanted.split("-")[0]):
                return False
        if self.path is not None and self.path not in source_key:
            return False
        if self.media_type is not None:
            if not media_type_matches(media_type, self.media_type):
                return False
        if self.after_ns is not None and (mtime_ns is None or mtime_ns < self.after_ns):
            return False
        if self.before_ns is not None and (mtime_ns is None or mtime_ns >= self.before_ns):
            return False
        return True


def media_type_matches(media_type: str, wanted: str) -> bool:
    """``type:`` semantics: the full type (``text/plain``), its major type (``text``), or a
    subtype part (``epub`` and ``zip`` both match ``application/epub+zip``); case-insensitive."""
    media_type, wanted = media_type.lower(), wanted.lower()
    if "/" in wanted:
        return media_type == wanted
    major, _, sub = media_type.partition("/")
    return wanted == major or wanted in sub.split("+")


@dataclass(frozen=True)
class ParsedQuery:
    terms: tuple[str, ...]
    phrases: tuple[str, ...]
    excluded: tuple[str, ...]
    filters: Filters = field(default_factory=Filters)

    @property
    def positive_text(self) -> str:
        """Terms and phrases as one string (input for the dense channel)."""
        return " ".join([*self.terms, *self.phrases])


def _read_quoted(text: str, i: int) -> tuple[str, int]:
    """``text[i] == '"'``; return the content up to the closing quote and the index after it."""
    end = text.find('"', i + 1)
    if end < 0:
        raise QuerySyntaxError(f'unclosed quote starting at character {i}')
    return text[i + 1:end], end + 1


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _date_ns(key: str, value: str) -> int:
    if not _DATE.fullmatch(value):
        raise QuerySyntaxError(f"{key}: expects a date YYYY-MM-DD, got {value!r}")
    try:
        d = dt.date.fromisoformat(value)
    except ValueError as exc:
        raise QuerySyntaxError(f"{key}: expects a date YYYY-MM-DD, got {value!r}") from exc
    return int(dt.datetime(d.year, d.month, d.day, tzinfo=dt.timezone.utc).timestamp() * 1_000_000_000)


_NUMBER = re.compile(r"(?:0|1)?(?:\.\d+)?|[01]")


def _confidence(value: str) -> float:
    """``confidence:`` value: a decimal number in [0, 1] (``0.8``, ``.8``, ``1``)."""
    if not value or not _NUMBER.fullmatch(value) or value == ".":
        raise QuerySyntaxError(f"confidence: expects a number between 0 and 1, got {value!r}")
    number = float(value)
    if not 0.0 <= number <= 1.0:
        raise QuerySyntaxError(f"confidence: expects a number between 0 and 1, got {value!r}")
    return number


def parse_query(text: str, max_chars: int = 1000) -> ParsedQuery:
    """Parse ``text`` strictly.

    Raises
    ------
    QueryTooLongError
        ``len(text) > max_chars`` (Unicode scalars).
    QuerySyntaxError
        Unclosed quote, repeated filter key, empty filter value, bad date, a ``confidence:`` that is
        not a number in [0, 1]; ``text`` not a ``str``,
        or not valid Unicode (a lone surrogate, e.g. an undecodable byte of a command-line
        argument, which Python carries as ``\\udcXX``: it has no UTF-8 form to search for).
    EmptyQueryError
        No text term remains (empty query, filters only, exclusions only).
    """
    if not isinstance(text, str):
        raise QuerySyntaxError(f"the query must be a string, got {type(text).__name__}")
    if len(text) > max_chars:
        raise QueryTooLongError(f"query has {len(text)} characters; the limit is {max_chars}")
    bad = _SURROGATE.search(text)
    if bad is not None:
        raise QuerySyntaxError(f"the query is not valid Unicode: lone surrogate U+{ord(bad.group()):04X} at "
                               f"character {bad.start()} (an undecodable byte?)")
    terms: list[str] = []
    phrases: list[str] = []
    excluded: list[str] = []
    values: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        negate = text[i] == "-" and i + 1 < n and not text[i + 1].isspace()
        start = i + 1 if negate else i
        if text[start] == '"':
            content, i = _read_quoted(text, start)
            content = content.strip()
            if content:
                (excluded if negate else phrases).append(content)
            continue
        j = start
        while j < n and not text[j].isspace() and text[j] != '"':
            j += 1
        word = text[start:j]
        key, sep, rest = word.partition(":")
        if not negate and sep and key.lower() in FILTER_KEYS:
            key = key.lower()
            if key in values:
                raise QuerySyntaxError(f"filter {key}: given more than once")
            if not rest and j < n and text[j] == '"':
                rest, j = _read_quoted(text, j)
            if not rest.strip():
                raise QuerySyntaxError(f"filter {key}: has no value")
            values[key] = rest.strip()
            i = j
            continue
        if j < n and text[j] == '"' and not word:
            i = j
            continue
        (excluded if negate else terms).append(word)
        i = j
    if not terms and not phrases:
        raise EmptyQueryError("the query needs at least one search term (filters alone are not a query)")
    sources = tuple(s for s in (v.strip() for v in values.get("source", "").split(",")) if s)
    if "source" in values and not sources:
        raise QuerySyntaxError("filter source: names no source key")
    filters = Filters(
        path=values.get("path"),
        media_type=values.get("type"),
        after_ns=_date_ns("after", values["after"]) if "after" in values else None,
        before_ns=_date_ns("before", values["before"]) if "before" in values else None,
        sources=sources,
        language=values.get("lang"),
        min_confidence=_confidence(values["confidence"]) if "confidence" in values else None,
    )
    return ParsedQuery(tuple(terms), tuple(phrases), tuple(excluded), filters)
