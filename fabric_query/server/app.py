"""The app factory of ``fabric serve``: routes, error answers, warm-up, the guard in front.

:func:`create_app` builds the ASGI app around one warm :class:`~fabric_query.Fabric`. Its
lifespan loads the query models in a thread (``/v1/ready`` answers 503 until they are loaded,
and so do the query routes) and closes the gate and the admin backend at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from fabric_query.api import Fabric
from fabric_query.errors import FabricQueryError
from fabric_query.server import admin as admin_routes
from fabric_query.server import routes
from fabric_query.server.client_view import client_text
from fabric_query.server.errors import error_response, status_of
from fabric_query.server.gate import AdmissionGate, GateFull
from fabric_query.server.guard import Guard
from fabric_query.server.security import OriginPolicy, is_admin
from fabric_query.server.wire import field_problem, field_problems, not_json_reason
from fabric_resources.catalog import CatalogDamagedError, CatalogUnavailableError
from fabric_resources.config import ConfigError, ServerConfig

#: Seconds a server stopped during warm-up waits for the models to finish loading before it exits.
WARM_UP_WAIT_S = 120.0

#: What warm-up encodes: one Latin-script and one CJK query load both query models (MiniLM's
#: ONNX export and e5), the two routes of ``fabric_resources.language_routing``.
WARM_UP_QUERIES = ("lighthouse keeper", "認証トークン")


def load_query_models(fabric: Fabric) -> dict[str, str]:
    """Load (and run once) every query model the home's searches use; return their identities."""
    from fabric_resources.models.multilingual import shared_multilingual_embedder

    fabric.encoder.encode_queries([WARM_UP_QUERIES[0]])
    e5 = shared_multilingual_embedder()
    e5.encode_queries([WARM_UP_QUERIES[1]])
    models = {"dense": fabric.encoder.identity, "multilingual": e5.identity}
    if fabric.reranker is not None:
        models["reranker"] = getattr(fabric.reranker, "identity", type(fabric.reranker).__name__)
    return models


def create_app(
    fabric: Fabric,
    config: ServerConfig,
    *,
    bind_host: str = "127.0.0.1",
    port: int = 7433,
    admin: admin_routes.AdminBackend | None = None,
    admin_token: str | None = None,
    read_token: str | None = None,
    load_models: Callable[[Fabric], dict[str, str]] = load_query_models,
    mcp: bool = True,
    on_stop_while_loading: Callable[[], None] | None = None,
) -> Guard:
    """The ASGI app of one server.

    Parameters
    ----------
    fabric
        The warm read API over the home.
    config
        ``server`` settings: the gate's size, ``Retry-After``, body bound, extra hosts / origins.
    bind_host, port
        Where the server listens (Host and Origin checks accept them).
    admin, admin_token
        The admin backend and the token its routes need; without both, admin routes answer 404.
    read_token
        When set, every route but health needs a bearer token (read or admin): for binding an
        interface other than loopback.
    load_models
        Warm-up run in a thread at start-up; the server is ready when it returns.
    mcp
        Serve the MCP tools at ``/mcp`` (streamable HTTP, :mod:`fabric_query.server.mcp_tools`).
    on_stop_while_loading
        Called when the server stops before warm-up has ended, before it waits (at most
        :data:`WARM_UP_WAIT_S`) for the load to end (``fabric serve`` says so on stderr).
    """
    gate = AdmissionGate(config.max_concurrent_queries, config.retry_after_s)
    state = routes.ServerState(fabric=fabric, gate=gate)
    mcp_server = None
    if mcp:
        from fabric_query.server.mcp_tools import build_mcp

        mcp_server = build_mcp(fabric, gate, state.ready.is_set, _version())

    def warm_up() -> None:
        try:
            state.models = load_models(fabric)
        except Exception as exc:  # noqa: BLE001 - reported by /v1/ready, never a dead server
            state.load_error = f"{type(exc).__name__}: {exc}"
            return
        finally:
            state.warmed.set()
        state.ready.set()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        threading.Thread(target=warm_up, name="fabric-warm-up", daemon=True).start()
        async with contextlib.AsyncExitStack() as stack:
            held = getattr(fabric.home.catalog, "held_open", None)  # SQLite's; PostgreSQL needs none
            if held is not None:
                stack.enter_context(held())
            if mcp_server is not None:
                await stack.enter_async_context(mcp_server.session_manager.run())
            try:
                yield
            finally:
                if not state.warmed.is_set():
                    # Stopped (Ctrl-C) while the models load in native code (ONNX Runtime, torch):
                    # a process that exits under that thread is aborted by the C++ runtime
                    # ("terminate called without an active exception", exit 134); the load
                    # cannot be interrupted, so it is let finish (bounded) and the exit is clean.
                    if on_stop_while_loading is not None:
                        on_stop_while_loading()
                    await asyncio.to_thread(state.warmed.wait, WARM_UP_WAIT_S)
                gate.close()
                if admin is not None:
                    admin.close()

    # redirect_slashes off: the guard reads `/v1/search/` as `/v1/search`; no 307 is left to answer.
    app = FastAPI(title="Fabric", version=_version(), lifespan=lifespan, docs_url=None, redoc_url=None,
                  redirect_slashes=False,
                  openapi_url="/v1/openapi.json")
    app.state.fabric_server = state
    app.state.admin = admin
    app.state.admin_token = admin_token
    app.include_router(routes.router)
    app.include_router(admin_routes.router)
    if mcp_server is not None:
        from mcp.server.transport_security import TransportSecuritySettings

        # Stateless JSON answers: every tool call is one POST. Host and Origin are the Guard's
        # (the same rules as every route), so the SDK's own check is off rather than different.
        mcp_app = mcp_server.streamable_http_app(
            streamable_http_path="/mcp", stateless_http=True, json_response=True,
            max_request_body_size=config.max_body_bytes,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        app.router.routes.extend(mcp_app.routes)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_request: Request, exc: RequestValidationError):
        errors = exc.errors()
        if errors and errors[0].get("type") == "json_invalid":  # FastAPI's: the body did not decode
            loc = errors[0].get("loc", ())
            reason = str((errors[0].get("ctx") or {}).get("error", "JSON decode error"))
            pos = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else None
            return error_response(422, "RequestValidationError", f"the body is not JSON: {not_json_reason(reason, pos)}",
                                  problems=[{"loc": ["body"], "msg": reason}])
        # Each field with the JSON type it takes (pydantic's words name Python's types: "a valid tuple").
        problems = [{"loc": [str(p) for p in e.get("loc", ())], "msg": field_problem(e)} for e in errors[:20]]
        return error_response(422, "RequestValidationError", f"invalid request: {field_problems(errors)}",
                              problems=problems)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        message, path = str(exc.detail), request.url.path[:200]
        if exc.status_code == 404 and message == "Not Found":  # Starlette's words for a path no route has
            message = f"no route {path}: the API's routes are listed at /v1/openapi.json"
        elif exc.status_code == 405 and message == "Method Not Allowed":
            message = f"{request.method} is not allowed on {path}; it takes {(exc.headers or {}).get('Allow')}"
        return error_response(exc.status_code, "HTTPError", message, headers=dict(exc.headers or {}))

    @app.exception_handler(GateFull)
    async def gate_full(_request: Request, exc: GateFull):
        return error_response(503, "GateFull", str(exc), {"Retry-After": str(exc.retry_after_s)})

    def said(request: Request, exc: Exception, roots: bool = True) -> str:
        """``exc``'s message as the asker may read it: whole to the operator (the admin token),
        else without the home's, roots' and tables' paths (:func:`client_view.client_text`)."""
        if is_admin(request.headers.getlist("authorization"), admin_token):
            return str(exc)
        return client_text(fabric, str(exc), roots=roots)

    @app.exception_handler(FabricQueryError)
    async def query_error(request: Request, exc: FabricQueryError):
        return error_response(status_of(exc), type(exc).__name__, said(request, exc))

    @app.exception_handler(ConfigError)
    async def config_error(request: Request, exc: ConfigError):
        # The home's configuration file was edited into something invalid while the server runs:
        # not the client's fault, and nothing can be answered until it is fixed.
        return error_response(503, "ConfigError", said(request, exc))

    @app.exception_handler(CatalogDamagedError)
    async def catalog_damaged(request: Request, exc: CatalogDamagedError):
        # A release row altered behind Fabric's back: nothing can be answered until the home is
        # restored, and the message (which names the row) says so.
        return error_response(503, "CatalogDamagedError", said(request, exc, roots=False))

    @app.exception_handler(CatalogUnavailableError)
    async def catalog_unavailable(request: Request, exc: CatalogUnavailableError):
        # The PostgreSQL catalog is down or refuses the connection: a fault of the deployment, which
        # may pass (a restart); the message names the catalog, never a password.
        return error_response(503, "CatalogUnavailableError", said(request, exc, roots=False), {"Retry-After": "5"})

    @app.exception_handler(Exception)
    async def fault(_request: Request, exc: Exception):
        # Fabric's own fault: typed, JSON, without the traceback (it goes to the server's log).
        return error_response(500, "InternalError", f"{type(exc).__name__} in the server; see its log")

    policy = OriginPolicy(bind_host, port, config.allowed_hosts, config.allowed_origins)
    return Guard(app, policy, config.max_body_bytes, read_token=read_token, admin_token=admin_token)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fabric")
    except PackageNotFoundError:
        return "0+unknown"
