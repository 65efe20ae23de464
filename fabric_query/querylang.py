"""Query language: free text, ``"exact phrases"``, ``-excluded`` terms and filters.

Filters: ``path:`` (substring of the source key), ``type:`` (media type, its
part before ``/``, a subtype part, or a file extension: :func:`media_type_matches`),
``lang:`` (document language, BCP 47 primary subtag:
declared by the document, e.g. an EPUB's ``dc:language``, else guessed from
its script for ja/zh/ko/th), ``after:`` / ``before:`` (source modification time,
``YYYY-MM-DD``, after is inclusive, before exclusive), ``source:`` (one or
more source keys, comma-separated — the scope), ``prefix:`` (one or more
prefixes of the source key, comma-separated; a prefix without a scheme such as
``fs:`` is matched after it), ``confidence:`` (a number in [0, 1]: text
recognised by OCR is admitted only where its unit's confidence is at least that; text read from
a text layer or a file is exact and always passes). A filter value may be quoted.
Each filter key may appear at most once. A word with a colon whose key is not
a filter (``OR 1=1 --``, ``a:b``, ``http://x``) is plain text: user text is
only ever bound as values, never spliced into a query string. A key one edit
away from a filter key (``paht:``, ``typ:``, ``lnag:``; Damerau-Levenshtein
distance 1) is a typo, reported as a :class:`QuerySyntaxError` rather than
searched as a word; quote it (``"paht:x"``) to search it as a phrase. A negated filter (``-path:x``;
``-paht:x`` is an excluded word) is a :class:`QuerySyntaxError` too: a filter cannot be negated,
``-"path:x"`` excludes the text. A key in full-width forms (``ｐａｔｈ：x``) is the filter it reads as.

The structured twin of the filters is :class:`fabric_query.scope.Scope`.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache

from fabric_query.errors import EmptyQueryError, QuerySyntaxError, QueryTooLongError
from fabric_resources.text_folding import IGNORABLE

FILTER_KEYS = ("path", "type", "lang", "after", "before", "source", "prefix", "confidence")


@dataclass(frozen=True)
class Filters:
    path: str | None = None
    media_type: str | None = None
    after_ns: int | None = None
    before_ns: int | None = None
    sources: tuple[str, ...] = ()
    language: str | None = None
    #: Source-key prefixes (any of); one without a scheme matches the key after its ``fs:``.
    path_prefixes: tuple[str, ...] = ()
    #: Media types (any of), each with ``type:`` semantics (:func:`media_type_matches`).
    media_types: tuple[str, ...] = ()
    #: Languages (any of), each with ``lang:`` semantics.
    languages: tuple[str, ...] = ()
    #: ``confidence:``: the least OCR confidence (0-1) a unit needs; it filters chunks, not sources
    #: (``fabric_query.context.low_confidence_chunks``), so it is not part of :attr:`active`.
    min_confidence: float | None = None

    def __post_init__(self) -> None:
        # Source keys compare in NFC (as does :meth:`admits`): a file named on macOS (NFD) is found by
        # the name as typed (NFC), and the reverse.
        object.__setattr__(self, "path", None if self.path is None else _nfc(self.path))
        object.__setattr__(self, "sources", tuple(map(_nfc, self.sources)))
        object.__setattr__(self, "path_prefixes", tuple(map(_nfc, self.path_prefixes)))

    @property
    def active(self) -> bool:
        return (self.path is not None or self.media_type is not None or self.after_ns is not None
                or self.before_ns is not None or bool(self.sources) or self.language is not None
                or bool(self.path_prefixes) or bool(self.media_types) or bool(self.languages))

    def admits(self, source_key: str, media_type: str, mtime_ns: int | None, language: str | None = None) -> bool:
        """True if a source with these attributes is eligible.

        ``lang:`` compares BCP 47 primary subtags case-insensitively (``lang:en`` admits
        ``en-US``); a source whose language is unknown is not admitted by a ``lang:`` filter.
        ``source:``, ``path:`` and ``prefix:`` compare the key and the values in Unicode NFC.
        """
        source_key = _nfc(source_key)
        if self.sources and source_key not in self.sources:
            return False
        if self.language is not None and not language_matches(language, self.language):
            return False
        if self.languages and not any(language_matches(language, w) for w in self.languages):
            return False
        if self.path is not None and self.path not in source_key:
            return False
        if self.path_prefixes and not any(_has_prefix(source_key, p) for p in self.path_prefixes):
            return False
        if self.media_type is not None:
            if not media_type_matches(media_type, self.media_type):
                return False
        if self.media_types and not any(media_type_matches(media_type, w) for w in self.media_types):
            return False
        if self.after_ns is not None and (mtime_ns is None or mtime_ns < self.after_ns):
            return False
        if self.before_ns is not None and (mtime_ns is None or mtime_ns >= self.before_ns):
            return False
        return True

    def dimensions(self) -> tuple[tuple[str, Filters], ...]:
        """Each active filter dimension alone, as ``(key, filters)``: keys ``source``, ``path``,
        ``prefix``, ``type`` and ``lang`` (a query's filter and a scope's list of the same dimension
        together), ``after``, ``before``; in that order. :func:`fabric_query.context.unmatched_filters`
        asks which of them admits no source by itself."""
        parts = (("source", Filters(sources=self.sources)), ("path", Filters(path=self.path)),
                 ("prefix", Filters(path_prefixes=self.path_prefixes)),
                 ("type", Filters(media_type=self.media_type, media_types=self.media_types)),
                 ("lang", Filters(language=self.language, languages=self.languages)),
                 ("after", Filters(after_ns=self.after_ns)), ("before", Filters(before_ns=self.before_ns)))
        return tuple((key, part) for key, part in parts if part.active)


def _nfc(text: str) -> str:
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def language_matches(language: str | None, wanted: str) -> bool:
    """``lang:`` semantics: BCP 47 primary subtags compared case-insensitively; unknown never matches."""
    wanted, have = wanted.lower(), (language or "").lower()
    return have == wanted or (bool(have) and have.split("-")[0] == wanted.split("-")[0])


def _has_prefix(source_key: str, prefix: str) -> bool:
    """``prefix:`` semantics: a prefix of the key, or of the key after its scheme (``fs:``)."""
    return source_key.startswith(prefix) or source_key.partition(":")[2].startswith(prefix)


def media_type_matches(media_type: str, wanted: str) -> bool:
    """``type:`` semantics: the full type (``text/plain``), its major type (``text``), a subtype
    part (``epub`` and ``zip`` both match ``application/epub+zip``), or a file extension, matched
    through the type the scan gives a file so named (``docx``, ``pptx``, ``md``); case-insensitive."""
    media_type, wanted = media_type.lower(), wanted.lower()
    if "/" in wanted:
        return media_type == wanted
    major, _, sub = media_type.partition("/")
    return wanted == major or wanted in sub.split("+") or _type_of_extension(wanted) == media_type


@lru_cache(maxsize=256)
def _type_of_extension(extension: str) -> str:
    """The media type the scan gives a file named ``file.<extension>`` (lower case); asked once per
    filter value, not once per source and query."""
    from fabric_resources.parsing.registry import detect_media_type  # only here: ~20 ms to import

    return detect_media_type(f"file.{extension}").lower()


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


#: A Hebrew letter or point (niqqud, cantillation): the Hebrew block's letters and marks, and its
#: presentation forms.
_HEBREW = re.compile("[\u0591-\u05c7\u05d0-\u05f2\ufb1d-\ufb4f]")


def _is_gershayim(text: str, i: int) -> bool:
    """``text[i]`` is an ASCII double quote written between two Hebrew letters: the gershayim of a
    Hebrew acronym as keyboards type it (``צה"ל``, ``ארה"ב``, ``ד"ר``), part of the word, never a
    phrase's quote (a quote opens or closes a phrase beside a space or the query's end)."""
    return (text[i] == '"' and 0 < i < len(text) - 1
            and _HEBREW.match(text[i - 1]) is not None and _HEBREW.match(text[i + 1]) is not None)


def _read_quoted(text: str, i: int) -> tuple[str, int]:
    """``text[i] == '"'``; return the content up to the closing quote and the index after it (a
    Hebrew acronym's gershayim inside, :func:`_is_gershayim`, closes nothing)."""
    end = text.find('"', i + 1)
    while end >= 0 and _is_gershayim(text, end):
        end = text.find('"', end + 1)
    if end < 0:
        raise QuerySyntaxError(f'unclosed quote starting at character {i}')
    return text[i + 1:end], end + 1


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
#: What separates a filter key from its value: the colon and its full-width and small forms.
_COLON = re.compile("[:\uff1a\ufe55]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _date_ns(key: str, value: str) -> int:
    if not _DATE.fullmatch(value):
        raise QuerySyntaxError(f"{key}: expects a date YYYY-MM-DD, got {value!r}")
    try:
        d = dt.date.fromisoformat(value)
    except ValueError as exc:
        raise QuerySyntaxError(f"{key}: expects a date YYYY-MM-DD, got {value!r}") from exc
    return day_ns(d)


def day_ns(day: dt.date) -> int:
    """Nanoseconds since the epoch of ``day``'s UTC midnight, within a signed 64-bit integer: the
    catalog records a file dated past 2262-04-11 (before 1677-09-21) at that bound (:func:`fabric_assets.sources.scan.storable_mtime`),
    so ``after:2300-01-01`` admits it (and ``before:`` a later day does not). Exact integers: a
    float product would miss midnight by up to 128 ns.

    >>> day_ns(dt.date(1970, 1, 2)), day_ns(dt.date(2300, 1, 1)) == 2**63 - 1
    (86400000000000, True)
    """
    seconds = (day - dt.date(1970, 1, 1)).days * 86_400
    return min(max(seconds * 1_000_000_000, -(2**63)), 2**63 - 1)


def _one_edit_apart(a: str, b: str) -> bool:
    """Damerau-Levenshtein distance exactly 1 (one insertion, deletion, substitution or swap of
    neighbours); the distance of Damerau (CACM 7(3), 1964) that covers most typing errors."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def misspelt_filter_key(key: str) -> str | None:
    """The filter key ``key`` is one edit away from (``paht`` → ``path``), else None.

    Only alphabetic keys of three or more letters count, so ``a:b``, ``http://…``, ``1=1`` and
    ``title:`` stay plain words.

    >>> misspelt_filter_key("paht"), misspelt_filter_key("Typ"), misspelt_filter_key("title")
    ('path', 'type', None)
    """
    key = key.lower()
    if len(key) < 3 or not key.isascii() or not key.isalpha() or key in FILTER_KEYS:
        return None
    return next((k for k in FILTER_KEYS if _one_edit_apart(key, k)), None)


def _comma_list(key: str, value: str) -> tuple[str, ...]:
    items = tuple(s for s in (v.strip() for v in value.split(",")) if s)
    if not items:
        raise QuerySyntaxError(f"filter {key}: names nothing")
    return items


_NUMBER = re.compile(r"(?:0|1)?(?:\.\d+)?|[01]")


def _confidence(value: str) -> float:
    """``confidence:`` value: a decimal number in [0, 1] (``0.8``, ``.8``, ``1``)."""
    if not value or not _NUMBER.fullmatch(value) or value == ".":
        raise QuerySyntaxError(f"confidence: expects a number between 0 and 1, got {value!r}")
    number = float(value)
    if not 0.0 <= number <= 1.0:
        raise QuerySyntaxError(f"confidence: expects a number between 0 and 1, got {value!r}")
    return number


def _visible(text: str) -> str:
    """``text`` without the invisible format characters of :data:`IGNORABLE`."""
    return "".join(c for c in text if c not in IGNORABLE) if not text.isascii() else text


def parse_query(text: str, max_chars: int = 1000) -> ParsedQuery:
    """Parse ``text`` strictly.

    Raises
    ------
    QueryTooLongError
        ``len(text) > max_chars`` (Unicode scalars).
    QuerySyntaxError
        Unclosed quote, repeated filter key, a misspelt filter key (``paht:``: one edit from a
        filter key, :func:`misspelt_filter_key`), empty filter value, bad date, a ``confidence:`` that is
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
        # Invisible format characters (a zero-width space, a soft hyphen) are no syntax: they
        # separate nothing, start no word, and hide no filter key; they fold away in the index.
        if text[i].isspace() or text[i] in IGNORABLE:
            i += 1
            continue
        negate = text[i] == "-" and i + 1 < n and not text[i + 1].isspace()
        start = i + 1 if negate else i
        while start < n and text[start] in IGNORABLE:  # `-\u200b"x"` excludes "x", as `-"x"` does
            start += 1
        if start == n:
            break
        if text[start] == '"':
            content, i = _read_quoted(text, start)
            content = content.strip()
            if _visible(content):
                (excluded if negate else phrases).append(content)
            continue
        j = start
        while j < n and not text[j].isspace() and (text[j] != '"' or _is_gershayim(text, j)):
            j += 1
        word = text[start:j]
        if not _visible(word):  # `-` before invisible characters only
            i = j
            continue
        colon = _COLON.search(word)
        key, sep, rest = (word[:colon.start()], ":", word[colon.end():]) if colon else (word, "", "")
        # Compatibility forms are the key they read as: `ｐａｔｈ：x` (an IME's full width) is `path:x`.
        key = unicodedata.normalize("NFKC", _visible(key)) if not key.isascii() else key
        if negate and sep and key.lower() in FILTER_KEYS:
            excluded_text = word
            if not _visible(rest) and j < n and text[j] == '"':  # `-path:"a b"`: the quoted value too
                value, j = _read_quoted(text, j)
                excluded_text = _visible(word) + value.strip()
            raise QuerySyntaxError(f"a filter cannot be negated ({text[i:j]}); to exclude the text, quote it: "
                                   f'-"{excluded_text}"')
        if not negate and sep and key.lower() in FILTER_KEYS:
            key = key.lower()
            if key in values:
                raise QuerySyntaxError(f"filter {key}: given more than once")
            rest = _visible(rest)  # `lang:\u200ben` is `lang:en`; `path:\u200b"a b"` the quoted value
            if not rest and j < n and text[j] == '"':
                rest, j = _read_quoted(text, j)
            if not rest.strip():
                raise QuerySyntaxError(f"filter {key}: has no value")
            values[key] = _visible(rest).strip()
            i = j
            continue
        if not negate and sep and rest and (meant := misspelt_filter_key(key)) is not None:
            raise QuerySyntaxError(f"unknown filter {key}: (did you mean {meant}:?); to search it as text, "
                                   f'quote it: "{word}"')
        if j < n and text[j] == '"' and not word:
            i = j
            continue
        (excluded if negate else terms).append(word)
        i = j
    if not terms and not phrases:
        if excluded:
            shown = f'-"{excluded[0]}"' if any(c.isspace() for c in excluded[0]) else f"-{excluded[0]}"
            raise EmptyQueryError(f"the query needs at least one search term: an excluded term ({shown}) only "
                                  "narrows what a search term finds")
        if values:
            raise EmptyQueryError("the query needs at least one search term (filters alone are not a query)")
        raise EmptyQueryError("the query needs at least one search term (it holds only spaces, quotes or "
                              "invisible characters)")
    sources = tuple(s for s in (v.strip() for v in values.get("source", "").split(",")) if s)
    if "source" in values and not sources:
        raise QuerySyntaxError("filter source: names no source key")
    prefixes = _comma_list("prefix", values["prefix"]) if "prefix" in values else ()
    filters = Filters(
        path=values.get("path"),
        media_type=values.get("type"),
        after_ns=_date_ns("after", values["after"]) if "after" in values else None,
        before_ns=_date_ns("before", values["before"]) if "before" in values else None,
        sources=sources,
        language=values.get("lang"),
        path_prefixes=prefixes,
        min_confidence=_confidence(values["confidence"]) if "confidence" in values else None,
    )
    return ParsedQuery(tuple(terms), tuple(phrases), tuple(excluded), filters)
