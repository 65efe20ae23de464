"""``fabric serve``: the read side over HTTP (FastAPI on uvicorn) and MCP, one warm process.

One concept per module: :mod:`~fabric_query.server.app` (the app factory), :mod:`.gate` (the
admission gate and its bounded thread pool), :mod:`.security` (Host / Origin checks, token
files, bearer comparison), :mod:`.guard` (the ASGI middleware that applies them and bounds
bodies), :mod:`.wire` (request models), :mod:`.errors` (JSON error answers), :mod:`.routes`
(read routes), :mod:`.admin` (the admin-backend protocol and its routes), :mod:`.discovery`
(``<home>/server.json``). Nothing here imports Dagster or ``fabric_assets``: admin work is
plugged in through :class:`~fabric_query.server.admin.AdminBackend`.
"""
