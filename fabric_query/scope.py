"""The structured scope of a search: the query string's filters as typed fields.

A :class:`Scope` and the same filters written in the query string select the same sources, so
they give identical results: ``search("tide", scope=Scope(media_types=("text",)))`` equals
``search("tide type:text")``. Each dimension is given once: in the scope or in the query
string, not both (as each filter key appears at most once in the query string).

========================  ==========================  ====================================
scope field               query-string twin           admits a source when
========================  ==========================  ====================================
``source_keys``           ``source:k1,k2``            its key is one of them
``path_prefixes``         ``prefix:corpus/a/,fs:b/``  its key (or key after ``fs:``) starts with one
``media_types``           ``type:pdf``                its media type matches one (``type:`` rules)
``languages``             ``lang:ja``                 its language matches one (``lang:`` rules)
``modified_after``        ``after:2024-01-01``        modified on or after that day (UTC)
``modified_before``       ``before:2024-02-01``       modified before that day (UTC)
========================  ==========================  ====================================
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import inspect
import re
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, StringConstraints

from fabric_query.errors import InvalidArgumentError
from fabric_query.querylang import ParsedQuery, day_ns
from fabric_resources.identity import MAX_SOURCE_KEY_CHARS

#: Items one scope list may hold, and the longest item (Unicode scalars): bounds for input from the network.
MAX_SCOPE_ITEMS = 1000
MAX_SCOPE_ITEM_CHARS = MAX_SOURCE_KEY_CHARS

#: Strict: ``b"notes/"`` is refused, not decoded into a prefix (pydantic's lax mode read bytes as text).
_Item = Annotated[str, Strict(), StringConstraints(min_length=1, max_length=MAX_SCOPE_ITEM_CHARS)]
_Items = Annotated[tuple[_Item, ...], Field(max_length=MAX_SCOPE_ITEMS)]
_YYYY_MM_DD = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def calendar_day(value: object) -> dt.date:
    """A scope date as ``after:`` / ``before:`` take it: a ``datetime.date`` or ``"YYYY-MM-DD"``,
    a UTC day. Pydantic's own ``date`` also read a time, a number of seconds (or milliseconds) and
    its string, so ``"2024-01-01T00:00:00+09:00"`` (Tokyo's midnight, 15:00 UTC the day before)
    became the UTC day 2024-01-01 and ``0`` the day 1970-01-01: a second spelling of a day, nine
    hours off for the first.

    >>> calendar_day("2024-02-29"), calendar_day(dt.date(2024, 1, 1))
    (datetime.date(2024, 2, 29), datetime.date(2024, 1, 1))
    >>> calendar_day(1704067200)
    Traceback (most recent call last):
    ValueError: expects a calendar day YYYY-MM-DD (UTC), got 1704067200
    """
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    if isinstance(value, str) and _YYYY_MM_DD.fullmatch(value):
        return dt.date.fromisoformat(value)  # ValueError for a day the month does not have
    raise ValueError(f"expects a calendar day YYYY-MM-DD (UTC), got {value!r:.40}")


_Day = Annotated[dt.date, BeforeValidator(calendar_day)]


class Scope(BaseModel):
    """Which sources a search may answer from (every field: any of; fields combine with AND).

    Unknown fields are rejected. Dates are calendar days (``YYYY-MM-DD``) in UTC, as ``after:``
    and ``before:``: ``modified_after`` inclusive, ``modified_before`` exclusive.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    source_keys: _Items = ()
    path_prefixes: _Items = ()
    media_types: _Items = ()
    languages: _Items = ()
    modified_after: _Day | None = None
    modified_before: _Day | None = None

    def __init__(self, *positional: object, **fields: object) -> None:
        """Raises :class:`InvalidArgumentError` (a ``ValueError``, as pydantic's own error) for an
        unknown field or a value of the wrong type or form, naming each, and for a value given
        without its field's name (``Scope("notes/")``, which was Python's bare ``TypeError``,
        "takes 1 positional argument"): built directly, a scope is an argument of the Python API,
        which raises only its typed errors."""
        from pydantic import ValidationError

        if positional:
            raise InvalidArgumentError(
                f"Scope takes its fields by name, got {len(positional)} value(s) without one "
                f"({positional[0]!r:.40}): e.g. Scope(path_prefixes=(\"notes/\",)); the fields are "
                f"{', '.join(type(self).model_fields)}")
        try:
            super().__init__(**fields)
        except ValidationError as exc:
            raise InvalidArgumentError(f"Scope: {scope_problems(exc)}") from None

    # Pydantic's own mark (RootModel's __init__ bears it too): validation as a field of another
    # model (the HTTP API's request body, MCP's arguments) skips this __init__ and keeps its error
    # locations (``scope.foo``) in the 422 it answers; only a direct construction is translated.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]


# `help(Scope)` and editors show the fields by name only: ``*positional`` is there to be refused.
Scope.__signature__ = inspect.signature(Scope).replace(parameters=[  # type: ignore[misc]
    p for p in inspect.signature(Scope).parameters.values() if p.kind is not p.VAR_POSITIONAL])


def scope_problems(exc) -> str:
    """What a scope that failed validation (``exc``, pydantic's ``ValidationError``) has wrong, field
    by field (the first five) and in one line: ``media_types: Input should be a valid tuple; foo:
    unknown field``."""
    def problem(e) -> str:
        where = ".".join(str(p) for p in e["loc"]) or "(scope)"
        return f"{where}: {'unknown field' if e['type'] == 'extra_forbidden' else e['msg'].removeprefix('Value error, ')}"
    errors = exc.errors()
    more = f"; and {len(errors) - 5} more" if len(errors) > 5 else ""  # 1000 bad items: one line still
    return "; ".join(problem(e) for e in errors[:5]) + more


def apply_scope(parsed: ParsedQuery, scope: Scope | dict | None) -> ParsedQuery:
    """``parsed`` with the scope's filters added.

    Raises
    ------
    InvalidArgumentError
        ``scope`` is not a :class:`Scope` (or its dict), holds a value its field does not take
        (also a Scope changed by ``model_copy(update=...)``, which pydantic does not validate), or
        sets a dimension the query string already filters on (``type:`` and ``media_types``, ...).
    """
    if scope is None:
        return parsed
    if not isinstance(scope, (Scope, dict)):
        raise InvalidArgumentError(f"scope must be a Scope or a dict, got {type(scope).__name__}")
    from pydantic import ValidationError

    try:
        # A Scope is validated again (as a citation is): model_copy(update=...) and model_construct()
        # skip validation, so ``source_keys="fs:a.txt"`` filtered by its characters (no answer, no
        # error) and a date given as a string raised TypeError (trial 20d).
        scope = Scope.model_validate(dict(scope))
    except ValidationError as exc:
        raise InvalidArgumentError(f"scope: {scope_problems(exc)}") from None
    f = parsed.filters
    given = {
        "source_keys": (bool(scope.source_keys), bool(f.sources), "source:"),
        "path_prefixes": (bool(scope.path_prefixes), bool(f.path_prefixes), "prefix:"),
        "media_types": (bool(scope.media_types), f.media_type is not None or bool(f.media_types), "type:"),
        "languages": (bool(scope.languages), f.language is not None or bool(f.languages), "lang:"),
        "modified_after": (scope.modified_after is not None, f.after_ns is not None, "after:"),
        "modified_before": (scope.modified_before is not None, f.before_ns is not None, "before:"),
    }
    for name, (in_scope, in_query, key) in given.items():
        if in_scope and in_query:
            raise InvalidArgumentError(f"scope.{name} and the query's {key} filter the same thing; give one")
    merged = dataclasses.replace(
        f,
        sources=scope.source_keys or f.sources,
        path_prefixes=scope.path_prefixes or f.path_prefixes,
        media_types=scope.media_types or f.media_types,
        languages=scope.languages or f.languages,
        after_ns=day_ns(scope.modified_after) if scope.modified_after is not None else f.after_ns,
        before_ns=day_ns(scope.modified_before) if scope.modified_before is not None else f.before_ns,
    )
    return dataclasses.replace(parsed, filters=merged)


__all__ = ["Scope", "apply_scope", "scope_problems", "MAX_SCOPE_ITEMS", "MAX_SCOPE_ITEM_CHARS"]
