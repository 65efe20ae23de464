"""One error hierarchy for the read side. Every error says what is wrong."""


class FabricQueryError(Exception):
    """Base class of every error ``fabric_query`` raises on purpose."""


class QuerySyntaxError(FabricQueryError):
    """The query text cannot be parsed (unclosed quote, unknown or repeated filter, bad date…)."""


class EmptyQueryError(QuerySyntaxError):
    """The query has no text term (empty, or filters only)."""


class QueryTooLongError(QuerySyntaxError):
    """The query is longer than ``query.max_query_chars``."""


class NoReleaseError(FabricQueryError):
    """The home has no activated release yet: run ``fabric ingest`` first."""


class HomeNotFoundError(FabricQueryError):
    """The Fabric home does not exist or holds no catalog."""


class CitationError(FabricQueryError):
    """A citation is malformed (missing fields, bad offsets)."""
