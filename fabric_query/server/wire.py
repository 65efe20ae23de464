"""Request bodies of the HTTP API: strict JSON (unknown keys rejected, types not coerced).

Ranges the read side checks itself (``limit`` 1–1000, ``max_tokens``, the query's length and
syntax) are left to it, so the HTTP API and the Python API refuse exactly the same inputs.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from fabric_query.scope import Scope
from fabric_query.types import Citation

#: The longest query text a body may carry; the home's ``query.max_query_chars`` is the real
#: bound (checked by the query language), this one only keeps absurd bodies out of the parser.
MAX_WIRE_QUERY_CHARS = 100_000


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SearchRequest(_Body):
    """``POST /v1/search``: the query string and, beside it, the structured request."""

    query: Annotated[StrictStr, Field(max_length=MAX_WIRE_QUERY_CHARS)]
    limit: StrictInt | None = None
    scope: Scope | None = None
    max_tokens: StrictInt | None = None
    debug: StrictBool = False
    release_id: StrictInt | None = None
    channels: Annotated[tuple[StrictStr, ...], Field(max_length=32)] | None = None


class ResolveRequest(_Body):
    """``POST /v1/resolve``: one citation, as a search returned it."""

    citation: Citation


class IngestRequest(_Body):
    """``POST /v1/admin/ingest``: a folder on the server's machine to register and ingest."""

    path: Annotated[StrictStr, Field(min_length=1, max_length=4096)]


class EmptyRequest(_Body):
    """An admin operation without arguments (``{}``)."""
