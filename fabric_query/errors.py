"""One error hierarchy for the read side. Every error says what is wrong.

These are the only exceptions :class:`fabric_query.Fabric` raises on purpose for any input to
``search`` and ``resolve`` (a query fuzz test holds the public API to that).
"""

from fabric_resources.home_location import HomeUnusableError as _ResourcesHomeUnusableError


class FabricQueryError(Exception):
    """Base class of every error ``fabric_query`` raises on purpose."""


class QuerySyntaxError(FabricQueryError):
    """The query text cannot be parsed (unclosed quote, unknown or repeated filter, bad date,
    text that is not valid Unicode such as a lone surrogate…)."""


class EmptyQueryError(QuerySyntaxError):
    """The query has no text term (empty, or filters only)."""


class QueryTooLongError(QuerySyntaxError):
    """The query is longer than ``query.max_query_chars``."""


class InvalidArgumentError(FabricQueryError, ValueError):
    """An argument other than the query text is out of its range or of the wrong type
    (``limit``, ``release_id``, ``debug``, ``channels``, ``scope``, ``max_tokens``, ``cancel``;
    ``resolve``'s ``shown_text``, ``source_partitions``' text)."""


class NoReleaseError(FabricQueryError):
    """The home has no activated release yet (run ``fabric ingest`` first), or the asked release
    does not exist."""


class HomeNotFoundError(FabricQueryError):
    """The Fabric home does not exist or holds no catalog."""


class HomeUnusableError(FabricQueryError, _ResourcesHomeUnusableError):
    """The path given as the home cannot be one, or cannot be read: a file (or a path under one),
    a symbolic link loop, a name the stores cannot open, or a folder this process may not read (no
    permission). Also a :class:`fabric_resources.home.HomeUnusableError`, which it was before."""


class CitationError(FabricQueryError):
    """A citation is malformed (missing fields, wrong types, bad offsets or identifiers)."""


def citation_problems(exc) -> str:
    """What a citation that failed validation (``exc``, pydantic's ``ValidationError``) lacks or has
    wrong, field by field: ``missing: release_id; unknown: foo; malformed: spans.0.start_char``. An
    unknown key was listed among the missing ones ("missing or malformed: …, foo"), as if the
    citation needed it.

    >>> from pydantic import BaseModel, ConfigDict, ValidationError
    >>> class M(BaseModel):
    ...     model_config = ConfigDict(extra="forbid")
    ...     a: int
    ...     b: int
    >>> try:
    ...     M.model_validate({"b": "x", "foo": 1})
    ... except ValidationError as e:
    ...     citation_problems(e)
    'missing: a; unknown: foo; malformed: b'
    """
    groups: dict[str, list[str]] = {"missing": [], "unknown": [], "malformed": []}
    for e in exc.errors():
        where = ".".join(str(p) for p in e["loc"]) or "(citation)"
        kind = {"missing": "missing", "extra_forbidden": "unknown"}.get(e["type"], "malformed")
        groups[kind].append(where)
    return "; ".join(f"{kind}: {', '.join(fields)}" for kind, fields in groups.items() if fields)


class ReleaseUnreadableError(FabricQueryError):
    """The pinned release's canonical chunk rows cannot be read (a damaged or missing table), so no
    channel can answer. Projections that cannot be read are skipped instead
    (``EvidencePack.skipped_channels``)."""


class ForkedProcessError(FabricQueryError):
    """The process was forked (``os.fork``, multiprocessing's ``fork`` start method) from one that
    had opened a :class:`fabric_query.Fabric`: Lance's runtime and the read side's locks are not
    fork-safe (a lock another thread held at the fork is held for ever in the child), so a read
    there could hang. Open the home in a process started with ``spawn`` or ``forkserver``."""


class QueryCancelled(FabricQueryError):
    """The caller asked the query to stop (``cancel`` set: over HTTP, the client disconnected); it
    stopped at the next stage boundary and its partial work was dropped."""
