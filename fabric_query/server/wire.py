"""Request bodies of the HTTP API: strict JSON (unknown keys rejected, types not coerced).

Ranges the read side checks itself (``limit`` 1–1000, ``max_tokens``, the query's length and
syntax) are left to it, so the HTTP API and the Python API refuse exactly the same inputs.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
from typing import Annotated, Any

from mcp_types import CallToolRequestParams, jsonrpc_message_adapter
from pydantic import (BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError,
                      field_validator, model_validator)

from fabric_query.scope import Scope
from fabric_query.types import Citation
from fabric_resources.identity import MAX_SOURCE_KEY_CHARS

#: The longest query text a body may carry; the home's ``query.max_query_chars`` is the real
#: bound (checked by the query language), this one only keeps absurd bodies out of the parser.
MAX_WIRE_QUERY_CHARS = 100_000


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def strict_json(body: bytes) -> Any:
    """A request body (UTF-8, -16 or -32, as :func:`json.loads` detects) → its JSON value, refusing
    an object that names a key twice (the guard, :mod:`fabric_query.server.guard`, applies it to
    every JSON body before any route, MCP's included).

    RFC 8259 §4 leaves a repeated name's meaning to the parser (Python keeps the last, others the
    first), so a proxy that checked one value and Fabric that used the other would read two
    different requests.

    Raises
    ------
    json.JSONDecodeError
        Not JSON (``msg`` says why, ``pos`` the character where), or a key repeated
        (``msg`` ``"duplicate key 'name'"``, ``pos`` 0).
    RecursionError
        Arrays or objects nested deeper than the interpreter's recursion limit.
    """
    try:
        return json.loads(body, object_pairs_hook=_unique_keys)
    except _DuplicateKey as dup:
        raise json.JSONDecodeError(f"duplicate key {dup.key!r}", "", 0) from None


#: Why a body nested past the interpreter's recursion limit is refused (the admin routes' words).
TOO_DEEP = "arrays or objects nest too deeply"


def unreadable_json(body: bytes) -> str | None:
    """``"duplicate key 'name'"`` when a JSON body names a key twice, :data:`TOO_DEEP` when it
    nests past the recursion limit, why when its bytes are not Unicode text (``"not UTF-8, -16 or
    -32 text: invalid start byte at byte 12"``) or one of its numbers has more digits than Python
    converts (:func:`sys.get_int_max_str_digits`); else None, also for a body that is not JSON at
    all (its route says why, with the character where).

    These are refused here because FastAPI reads each as "There was an error parsing the body" (a
    400 of type ``HTTPError`` on the read routes, trials 14b and 20d), the admin routes called a
    number too long "not UTF-8, -16 or -32 text", and the MCP SDK's parser gives up on nesting far
    sooner. ``fabric mcp`` refuses the same stdio lines
    (:class:`~fabric_query.server.mcp_tools.CappedLines`), so both transports answer alike."""
    if not body:
        return None
    try:
        strict_json(body)
    except json.JSONDecodeError as exc:
        return exc.msg if exc.msg.startswith("duplicate key") else None
    except RecursionError:
        return TOO_DEEP
    except UnicodeDecodeError as exc:
        return f"not UTF-8, -16 or -32 text: {exc.reason} at byte {exc.start}"
    except ValueError as exc:
        if "integer string conversion" in str(exc):  # int()'s guard against quadratic conversion
            return f"a number has more than {sys.get_int_max_str_digits()} digits"
        return None
    return None


def has_unusable_request_id(raw: bytes | str) -> bool:
    """Whether a raw JSON-RPC message (an HTTP body, a stdio line) is an object whose ``id`` MCP
    does not allow: null, a boolean, a float, an array or an object (MCP's base protocol: requests
    "MUST include a string or integer ID", "MUST NOT be null"). The MCP SDK reads such a request as
    a notification, drops the id and answers nothing (over stdio) or 202 (over HTTP), so its sender
    never learns why. False for text that is not a JSON object: the SDK answers that itself."""
    if isinstance(raw, str) and not raw.lstrip().startswith("{"):  # a stdio line: most are not objects
        return False
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    if not isinstance(message, dict) or "id" not in message:
        return False
    request_id = message["id"]
    return isinstance(request_id, bool) or not isinstance(request_id, (str, int))


#: How ``/mcp`` answers a JSON body that is no JSON-RPC message, as ``fabric mcp`` answers such a line.
NOT_A_MESSAGE = ("Invalid Request: the body is not a JSON-RPC 2.0 message; POST one request, notification or "
                 'response object with "jsonrpc": "2.0" (MCP takes no batch)')


def not_a_message(raw: bytes) -> tuple[bool, str | int | None]:
    """For a JSON body posted to ``/mcp``: whether it is no JSON-RPC 2.0 message (a batch, an
    object without ``"jsonrpc": "2.0"`` or a ``method``, ``params`` that are not an object), and
    its request id where usable (a string or an integer), else None. ``(False, None)`` for a
    message, and for a body that is not JSON (the MCP SDK answers that Parse error itself).

    The SDK answers such a body -32602 (Invalid params) with its pydantic dump ("4 validation
    errors for union[JSONRPCRequest, …]", a link per error) and id null; JSON-RPC 2.0 names it
    Invalid Request (-32600), as ``fabric mcp`` answers the same line over stdio (trial 23h).

    >>> not_a_message(b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]')
    (True, None)
    >>> not_a_message(b'{"jsonrpc": "1.0", "id": 7, "method": "ping"}')
    (True, 7)
    >>> not_a_message(b'{"jsonrpc": "2.0", "id": 7, "method": "ping"}')
    (False, None)
    """
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError):
        return False, None
    try:
        jsonrpc_message_adapter.validate_python(message, by_name=False)  # as the SDK reads it
    except ValidationError:
        pass
    else:
        return False, None
    request_id = message.get("id") if isinstance(message, dict) else None
    usable = isinstance(request_id, (str, int)) and not isinstance(request_id, bool)
    return True, request_id if usable else None


#: A JSON escape of a surrogate code point (U+D800-U+DFFF), in text or in bytes.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(raw: bytes | str) -> tuple[str, str | int | None] | None:
    r"""For a JSON-RPC message (an HTTP body, a stdio line) one of whose strings is not Unicode
    text: ``(escape, id)``, the first lone surrogate's escape (``\ud83d``) and the message's id
    where usable (a string or an integer, else None). None for a message without one, and for
    text that is not JSON.

    A lone surrogate is half a character: what a client sends that cut a string by UTF-16 units
    (a JavaScript ``slice`` through an emoji; ``JSON.stringify`` escapes the half). JSON's grammar
    takes the escape; the MCP SDK's reader refuses the whole message as "unexpected end of hex
    escape", with no id, so a stdio client waited for an answer for ever.

    >>> lone_surrogate('{"id": 7, "params": {"text": "ok \\ud83d"}}')
    ('\\ud83d', 7)
    >>> lone_surrogate('{"id": 7, "params": {"text": "ok \\ud83d\\ude00"}}') is None  # a whole pair
    True
    """
    pattern = _SURROGATE_ESCAPE_BYTES if isinstance(raw, bytes) else _SURROGATE_ESCAPE
    if not pattern.search(raw):  # almost every message: no escape, nothing decoded
        return None
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    # A valid pair decodes to one character; a surrogate left in the decoded text is a lone one.
    found = _SURROGATE.search(json.dumps(message, ensure_ascii=False))
    if found is None:
        return None
    request_id = message.get("id") if isinstance(message, dict) else None
    usable = isinstance(request_id, (str, int)) and not isinstance(request_id, bool)
    return f"\\u{ord(found.group()):04x}", request_id if usable else None


def lone_surrogate_message(escape: str) -> str:
    """The JSON-RPC error message for a message holding the lone surrogate ``escape``."""
    return (f"Invalid Request: a string holds {escape}, half of a character (a lone surrogate), which is "
            "not Unicode text; send each character whole")


def not_json_reason(msg: str, pos: int | None) -> str:
    """Why a body is not JSON, for a 422's message: the decoder's reason and the character
    (0-based, into the decoded text) where it stopped; a repeated key names the key only."""
    return msg if msg.startswith("duplicate key") or pos is None else f"{msg} at character {pos}"


#: Why a string holding a lone surrogate is refused (pydantic: "unable to parse raw data as a unicode
#: string", which told a client neither what was wrong nor what to send; trial 23h), as `/mcp` says it.
HALF_A_CHARACTER = ("holds half of a character (a lone surrogate escape such as \\ud83d: text cut by UTF-16 "
                    "units), which is not Unicode text; send each character whole")

#: Pydantic's type errors → the JSON type the field takes. Its own words are Python's ("a valid
#: tuple", "a valid dictionary or instance of Scope"), which name nothing a JSON client can send.
_TAKES = {"string_type": "a string", "int_type": "an integer", "int_parsing": "an integer",
          "float_type": "a number", "bool_type": "true or false", "dict_type": "an object",
          "model_type": "an object", "model_attributes_type": "an object", "list_type": "an array",
          "tuple_type": "an array", "set_type": "an array", "frozen_set_type": "an array"}


def json_kind(value: Any) -> str:
    """The JSON type of a decoded value, as a client names it.

    >>> json_kind([1]), json_kind("5"), json_kind(True), json_kind(None), json_kind(2.0)
    ('an array', 'a string', 'a boolean', 'null', 'a number')
    """
    if value is None:
        return "null"
    for kind, name in ((bool, "a boolean"), (str, "a string"), (int, "an integer"), (float, "a number"),
                       (dict, "an object"), ((list, tuple), "an array")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def field_problem(error: dict[str, Any], skip: int = 0) -> str:
    """One of pydantic's errors (``ValidationError.errors()``) as a JSON client reads it: the
    field (its ``loc`` past the first ``skip`` parts), the JSON type it takes and the type sent,
    never the value sent, no link (trial 24b: MCP clients were handed the whole pydantic dump).

    >>> field_problem({"type": "tuple_type", "loc": ("body", "scope", "languages"), "input": "en",
    ...                "msg": "Input should be a valid tuple"}, skip=1)
    'scope.languages takes an array, not a string'
    >>> field_problem({"type": "missing", "loc": ("unit_id",), "input": {}, "msg": "Field required"})
    'unit_id is required'
    """
    where = ".".join(str(part) for part in error.get("loc", ())[skip:]) or "(body)"
    kind = error.get("type")
    if kind == "missing":
        return f"{where} is required"
    if kind == "extra_forbidden":
        return f"{where} is not a field this request takes"
    if kind == "string_unicode":
        return f"{where} {HALF_A_CHARACTER}"
    if kind in _TAKES:
        return f"{where} takes {_TAKES[kind]}, not {json_kind(error.get('input'))}"
    return f"{where}: {str(error.get('msg', '')).removeprefix('Value error, ')}"


def field_problems(errors: list[dict[str, Any]], skip: int = 0, most: int = 5) -> str:
    """:func:`field_problem` of each error, joined on one line: at most ``most``, then a count."""
    said = "; ".join(field_problem(e, skip) for e in errors[:most])
    return said + (f"; and {len(errors) - most} more" if len(errors) > most else "")


def bad_tool_call(message: Any) -> str | None:
    """For a decoded JSON-RPC message: why a ``tools/call`` request's ``params`` cannot be read (a
    name that is no string, ``arguments`` that are no object), naming the field, else None.

    The SDK answers it -32602 "Invalid request parameters" with empty data (it keeps pydantic's
    text off the wire, and with it every word of what was wrong; trial 24b).

    >>> call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    >>> print(bad_tool_call({**call, "params": {"name": "search", "arguments": "x"}}))
    Invalid params: params.arguments takes an object, not a string (tools/call takes {"name": "<tool>", "arguments": {…}})
    >>> bad_tool_call({**call, "params": {"name": "search"}}) is None
    True
    """
    if not isinstance(message, dict) or message.get("method") != "tools/call" or "id" not in message:
        return None
    params = message.get("params")
    try:
        CallToolRequestParams.model_validate({} if params is None else params, by_name=False)  # as the SDK reads it
    except ValidationError as exc:
        errors = [{**e, "loc": ("params", *e["loc"])} for e in exc.errors(include_url=False)]
        return (f"Invalid params: {field_problems(errors)} "
                '(tools/call takes {"name": "<tool>", "arguments": {…}})')
    return None


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
    """``POST /v1/resolve``: one citation, as a search returned it, and optionally the text its hit
    showed (``text``: checked against the citation's ``text_hash``, the ``hit-text`` check)."""

    citation: Citation
    text: StrictStr | None = None


def _absolute(value: str | None) -> str | None:
    """A folder on the server's machine must be given absolute: a relative one would be read from
    the server's working directory (``"."`` ingested the folder the server was started in)."""
    if value is not None:
        if "\x00" in value:
            raise ValueError("a path holds no NUL character")
        if not os.path.isabs(value):
            raise ValueError("give an absolute path (a relative one would be read from the server's working folder)")
    return value


class IngestRequest(_Body):
    """``POST /v1/admin/ingest``: a folder on the server's machine (an absolute path) to register
    and ingest."""

    path: Annotated[StrictStr, Field(min_length=1, max_length=4096)]

    _absolute_path = field_validator("path")(_absolute)


class EmptyRequest(_Body):
    """An admin operation without arguments (``{}``)."""


_Key = Annotated[StrictStr, Field(min_length=1, max_length=MAX_SOURCE_KEY_CHARS)]


class ParseRequest(_Body):
    """``POST /v1/admin/accept`` and ``/v1/admin/discard``: a held parse, by its ID."""

    parse_id: Annotated[StrictStr, Field(min_length=1, max_length=128)]


class SourceRequest(_Body):
    """``POST /v1/admin/re-parse``: a present source, by its key (``fs:notes/a.md``)."""

    source_key: _Key


class RetryRequest(_Body):
    """``POST /v1/admin/retry``: failed parses back to pending; empty: every failed parse a present
    source waits for."""

    parse_ids: Annotated[tuple[Annotated[StrictStr, Field(min_length=1, max_length=128)], ...],
                         Field(max_length=10_000)] = ()


class PurgeRequest(_Body):
    """``POST /v1/admin/purge``: exactly one of ``source_keys`` (deleted sources), ``root`` (a
    root's label) or ``before`` (``YYYY-MM-DD``: deleted sources last seen before it)."""

    source_keys: Annotated[tuple[_Key, ...], Field(max_length=10_000)] = ()
    root: _Key | None = None
    before: Annotated[StrictStr, Field(min_length=10, max_length=10)] | None = None

    @field_validator("before")
    @classmethod
    def _a_day(cls, value: str | None) -> str | None:
        # Refused here, as `fabric purge --before` refuses it, not as a failed Dagster run later.
        if value is not None:
            dt.date.fromisoformat(value)  # ValueError: "day is out of range for month", ...
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> "PurgeRequest":
        if sum((bool(self.source_keys), self.root is not None, self.before is not None)) != 1:
            raise ValueError("give exactly one of source_keys, root, before")
        return self


class SnapshotRequest(_Body):
    """``POST /v1/admin/snapshot``: a snapshot of the current state, with an optional note."""

    note: Annotated[StrictStr, Field(max_length=1000)] = ""


class RestoreRequest(_Body):
    """``POST /v1/admin/restore``: a snapshot back into this home, or into a new home at ``into``
    (an absolute path to a folder on the server's machine with no home in it)."""

    snapshot_id: StrictInt
    into: _Key | None = None

    _absolute_into = field_validator("into")(_absolute)
