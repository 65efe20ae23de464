"""The read routes (``/v1/...``): health, ready, search, resolve, status, sources, units, release.

Every route that touches storage or models runs its work in the admission gate's pool
(:mod:`fabric_query.server.gate`); health and readiness do not. Answers are the read side's own
models as JSON (an EvidencePack is the same JSON the Python API's ``model_dump_json`` gives).
A client that disconnects while its work runs cancels it
(:func:`~fabric_query.server.protocol.unless_disconnected`): a search stops at its next stage
boundary and frees its gate slot then.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from starlette.responses import JSONResponse, Response

from fabric_query.api import Fabric
from fabric_query.release import pinned_view
from fabric_query.server.client_view import client_search, client_status
from fabric_query.server.errors import error_response
from fabric_query.server.gate import AdmissionGate
from fabric_query.server.protocol import Disconnected, unless_disconnected
from fabric_query.server.security import is_admin
from fabric_query.server.wire import ResolveRequest, SearchRequest
from fabric_query.units import canonical_unit
from fabric_query.visibility import current_sources_config
from fabric_resources.catalog import CatalogUnavailableError


@dataclass
class ServerState:
    """What the routes share: the warm :class:`Fabric`, the gate, readiness."""

    fabric: Fabric
    gate: AdmissionGate
    ready: threading.Event = field(default_factory=threading.Event)
    #: Set when the warm-up ends, loaded or failed: the server waits for it before it stops.
    warmed: threading.Event = field(default_factory=threading.Event)
    #: Why the query models could not load (the server stays unready), or None.
    load_error: str | None = None
    models: dict[str, str] = field(default_factory=dict)


router = APIRouter(prefix="/v1")


def server_state(request: Request) -> ServerState:
    return request.app.state.fabric_server


def _json(model) -> Response:
    return Response(model.model_dump_json(), media_type="application/json")


def _not_ready(st: ServerState) -> JSONResponse:
    if st.load_error:
        return error_response(503, "NotReady", f"the query models failed to load: {st.load_error}")
    return error_response(503, "NotReady", "the query models are still loading", {"Retry-After": "1"})


@router.get("/health")
async def health() -> dict[str, str]:
    """Liveness: the process answers. No I/O."""
    return {"status": "ok"}


@router.get("/ready")
async def ready(request: Request) -> Any:
    """Readiness: the query models are loaded (200), else 503."""
    st = server_state(request)
    if not st.ready.is_set():
        return _not_ready(st)
    return {"ready": True, "models": st.models, "in_flight": st.gate.in_flight, "max_concurrent": st.gate.limit,
            "admitted": st.gate.admitted, "refused": st.gate.refused}


#: What a route answers to a client that disconnected (a status nobody receives; nginx's "client
#: closed request").
_GONE = 499


async def _gated(request: Request, fn, *args, cancellable: bool = False, **kwargs) -> Any:
    """``fn(*args, **kwargs)`` in the gate, unless the client disconnects first (a 499 then). With
    ``cancellable``, ``fn`` takes ``cancel`` (a search), which a disconnect sets."""
    st = server_state(request)
    if not st.ready.is_set():
        return _not_ready(st)
    cancel = threading.Event()
    if cancellable:
        kwargs["cancel"] = cancel
    try:
        return await unless_disconnected(request.receive, lambda: st.gate.run(partial(fn, *args, **kwargs),
                                                                              cancel=cancel))
    except Disconnected:
        return error_response(_GONE, "ClientDisconnected", "the client disconnected before the answer")


@router.post("/search")
async def search(body: SearchRequest, request: Request) -> Response:
    """One query (the query string, plus the structured request) → EvidencePack."""
    fabric = server_state(request).fabric
    # A client's pack without the home's paths in its reasons; the operator's (admin token) whole.
    run = fabric.search if _operator(request) else partial(client_search, fabric)
    pack = await _gated(request, run, body.query, limit=body.limit, release_id=body.release_id,
                        debug=body.debug, channels=body.channels, scope=body.scope, max_tokens=body.max_tokens,
                        cancellable=True)
    return pack if isinstance(pack, Response) else _json(pack)


@router.post("/resolve")
async def resolve(body: ResolveRequest, request: Request) -> Response:
    """Re-verify a citation: ``verified`` or ``stale`` with each check, never substituted text."""
    result = await _gated(request, server_state(request).fabric.resolve, body.citation, shown_text=body.text)
    return result if isinstance(result, Response) else _json(result)


def _operator(request: Request) -> bool:
    """Whether the request carries the admin token: the operator, who sees withheld sources by name
    (:mod:`fabric_query.server.client_view`)."""
    return is_admin(request.headers.getlist("authorization"), request.app.state.admin_token)


#: Response header naming whose view ``/v1/status`` answered: ``operator`` (the admin token's, as
#: in-process) or ``client``. ``fabric status`` prints only the operator's (a client's view, given
#: when its admin token was not sent or not this server's, would show the operator no withheld source).
VIEW_HEADER = "fabric-view"


@router.get("/status")
async def status(request: Request) -> Response:
    """Sources by state, the current release, failed / held / unfinished parses with reasons; with
    the admin token the operator's whole status, else withheld sources neither named nor counted
    (:data:`VIEW_HEADER` says which)."""
    fabric = server_state(request).fabric
    if _operator(request):
        result = await _gated(request, fabric.status)
        if isinstance(result, Response):
            return result
        answer = _json(result)
        answer.headers[VIEW_HEADER] = "operator"
        return answer
    result = await _gated(request, client_status, fabric)
    return result if isinstance(result, Response) else JSONResponse(result, headers={VIEW_HEADER: "client"})


#: Tries of ``/v1/sources`` whose release was retired between its catalog read and its view.
SOURCES_TRIES = 3


def _sources(fabric: Fabric, operator: bool = False) -> dict[str, Any]:
    home = fabric.home
    # The release it names and the sources' states and hashes from one catalog read: read apart, an
    # ingest between them paired the release's parse IDs with the next version's hashes and states.
    for _ in range(SOURCES_TRIES):
        release_id, sources = home.catalog.sources_at_current()
        view = pinned_view(home, release_id) if release_id is not None else None
        if release_id is None or view is not None:
            break
    else:  # retired under it each time (retention, a purge): answered as the catalog is busy
        raise CatalogUnavailableError(f"release {release_id} was retired while /v1/sources read it; try again")
    active = view.sources if view is not None else {}
    withheld = current_sources_config(home)  # today's patterns, re-read when config.json changes
    out = []
    for s in sources:
        if s.state == "deleted":
            continue
        if withheld.is_withheld(s.source_key):
            if operator:  # by key and state only; to any other client it does not exist
                out.append({"source_key": s.source_key, "state": "withheld"})
            continue
        out.append({"source_key": s.source_key, "state": s.state, "media_type": s.media_type,
                    "mtime_ns": s.mtime_ns, "size": s.size, "source_hash": s.source_hash,
                    "active_parse_id": active[s.source_key]["parse_id"] if s.source_key in active else None})
    return {"release_id": view.release_id if view is not None else None, "sources": out}


@router.get("/sources")
async def sources(request: Request) -> Any:
    """Every known source that is not deleted; withheld ones by key and state only, and only to the
    operator (the admin token)."""
    return await _gated(request, _sources, server_state(request).fabric, _operator(request))


def _unit(fabric: Fabric, unit_id: str):
    view = pinned_view(fabric.home)
    return None if view is None else canonical_unit(view, unit_id)


@router.get("/units/{unit_id}")
async def unit(request: Request, unit_id: Annotated[str, Path(pattern=r"^[0-9a-f]{32}$")]) -> Response:
    """A canonical unit of the current release (visible now) with its text and locator, else 404."""
    found = await _gated(request, _unit, server_state(request).fabric, unit_id)
    if isinstance(found, Response):
        return found
    if found is None:
        return error_response(404, "NotFound", "no visible unit of the current release has this ID")
    return _json(found)


def _current_release(fabric: Fabric) -> dict[str, Any] | None:
    view = pinned_view(fabric.home)
    if view is None:
        return None
    manifest = view.release.manifest
    return {"release_id": view.release_id, "created_at": view.release.created_at,
            "sources": len(view.sources), "parses": len(view.sources_by_parse),
            "visible_sources_only": view.visible_sources_only, "tables": manifest.get("tables", {}),
            "lexical_generation": manifest.get("lexical_generation")}


@router.get("/releases/current")
async def current_release(request: Request) -> Any:
    """The release queries pin now, as visible now (counts leave out withheld / deleted sources)."""
    found = await _gated(request, _current_release, server_state(request).fabric)
    if found is None:
        return error_response(409, "NoReleaseError", "no activated release in this home")
    return found
