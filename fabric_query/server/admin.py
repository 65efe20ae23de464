"""Admin routes and the protocol of the backend that runs them (the write side implements it).

Every admin route needs ``Authorization: Bearer <admin token>`` (``<home>/admin-token``); a
missing or wrong token is 401. ``POST /v1/admin/<kind>`` answers ``202 {"operation_id"}`` at once
and the backend runs the work (pipeline work as real Dagster runs on the home's instance); the
Operation (``pending`` → ``running`` → ``succeeded`` / ``failed`` with a reason) is polled at
``GET /v1/operations/{id}``. The read side never imports the backend: the app factory takes one
(``fabric serve`` passes :class:`fabric_assets.operations.PipelineAdmin`).

Kinds (bodies in :mod:`fabric_query.server.wire`): ``ingest`` (``{"path": FOLDER}``),
``lexical-repair`` (``{}``), and the lifecycle actions: ``accept`` / ``discard`` of a held parse
(``{"parse_id"}``), ``re-parse`` (``{"source_key"}``, forced), ``retry`` (``{"parse_ids": [...]}``,
empty: every failed parse), ``purge`` (one of ``source_keys``, ``root``, ``before``), ``snapshot``
(``{"note"}``), ``restore`` (``{"snapshot_id", "into"}``) and ``repair`` (``{}``: damaged table data
files, as ``fabric repair``). A backend that does not list a
lifecycle kind in ``kinds`` answers it 501.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse

from fabric_query.server.errors import error_response
from fabric_query.server.security import ADMIN_TOKEN_NEEDED, is_admin
from fabric_query.server.wire import (EmptyRequest, IngestRequest, ParseRequest, PurgeRequest, RestoreRequest,
                                      RetryRequest, SnapshotRequest, SourceRequest, field_problems,
                                      not_json_reason)

#: Operation kinds of the lifecycle actions; a backend that does not list one answers it 501.
LIFECYCLE_KINDS = ("re-parse", "accept", "discard", "retry", "purge", "snapshot", "restore", "repair")
#: Body model of each kind.
BODIES = {"ingest": IngestRequest, "lexical-repair": EmptyRequest, "accept": ParseRequest,
          "discard": ParseRequest, "re-parse": SourceRequest, "retry": RetryRequest, "purge": PurgeRequest,
          "snapshot": SnapshotRequest, "restore": RestoreRequest, "repair": EmptyRequest}


class AdminBackend(Protocol):
    """What runs admin operations for the server (implemented on the write side)."""

    def kinds(self) -> tuple[str, ...]:
        """The operation kinds this backend runs."""
        ...

    def submit(self, kind: str, params: dict[str, Any]) -> str:
        """Record a ``pending`` Operation for ``kind`` and start it; return its ID at once.

        Raises ``ValueError`` for parameters the kind cannot take (answered 400)."""
        ...

    def operation(self, operation_id: str) -> dict[str, Any] | None:
        """The Operation as JSON (``operation_id``, ``kind``, ``status``, ``reason``, ``result``, times), or None."""
        ...

    def close(self) -> None:
        """Stop taking operations (running ones finish)."""
        ...


router = APIRouter(prefix="/v1")


def _authorised(request: Request) -> JSONResponse | AdminBackend:
    admin: AdminBackend | None = request.app.state.admin
    token: str | None = request.app.state.admin_token
    if admin is None or token is None:
        return error_response(404, "NotFound", "this server runs no admin operations")
    if not is_admin(request.headers.getlist("authorization"), token):
        return error_response(401, "Unauthorized", ADMIN_TOKEN_NEEDED, {"WWW-Authenticate": "Bearer"})
    return admin


@router.post("/admin/{kind}", status_code=202)
async def submit(kind: str, request: Request) -> Any:
    """Start an admin operation: ``202 {"operation_id": ...}``."""
    admin = _authorised(request)
    if isinstance(admin, JSONResponse):
        return admin
    if kind in LIFECYCLE_KINDS and kind not in admin.kinds():
        return error_response(501, "NotImplemented", f"this server's backend does not run {kind}")
    if kind not in BODIES or kind not in admin.kinds():
        return error_response(404, "NotFound", f"no admin operation {kind!r}; known: {sorted(admin.kinds())}")
    try:
        raw = await request.json()
    except RecursionError:
        return error_response(422, "RequestValidationError", "the body is not JSON: arrays or objects nest too deeply")
    except ValueError as exc:  # json.JSONDecodeError (strict_json), or bytes that are not text
        return error_response(422, "RequestValidationError", "the body is not JSON: " + (
            not_json_reason(exc.msg, exc.pos) if isinstance(exc, json.JSONDecodeError) else "not UTF-8, -16 or -32 text"))
    try:
        params = BODIES[kind].model_validate(raw).model_dump()
    except ValidationError as exc:
        # Each field with pydantic's reason (never the value sent): "(body)" for a rule of the
        # whole body, such as purge's "give exactly one of source_keys, root, before".
        return error_response(422, "RequestValidationError",
                              f"invalid or unknown fields: {field_problems(exc.errors(include_url=False))}")
    try:
        operation_id = await run_in_threadpool(admin.submit, kind, params)
    except ValueError as exc:
        return error_response(400, "InvalidArgumentError", str(exc))
    return JSONResponse({"operation_id": operation_id, "status": "pending"}, status_code=202,
                        headers={"Location": f"/v1/operations/{operation_id}"})


@router.get("/operations/{operation_id}")
async def operation(operation_id: str, request: Request) -> Any:
    """An Operation by ID (admin token), else 404."""
    admin = _authorised(request)
    if isinstance(admin, JSONResponse):
        return admin
    found = await run_in_threadpool(admin.operation, operation_id) if len(operation_id) <= 64 else None
    if found is None:
        return error_response(404, "NotFound", "no such operation")
    return found
