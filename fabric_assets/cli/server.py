"""``fabric serve`` and ``fabric mcp``: the read side as a warm process, with the admin backend.

The app, its routes and the MCP tools are read-side code (:mod:`fabric_query.server`); this
module composes them with the write side's :class:`~fabric_assets.operations.PipelineAdmin` and
imports both inside the command bodies, so ``fabric search`` pays nothing for them.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from fabric_query.cli import HomeOption, console, err, fail, set_home
from fabric_query.cli_interrupt import READS, on_interrupt

server_app = typer.Typer(help="The server commands (HTTP API, MCP).")


@server_app.command()
@on_interrupt("nothing was changed (it stopped before it was serving)")
def serve(
    host: Annotated[Optional[str], typer.Option("--host", help="Interface to bind (default server.host: 127.0.0.1).")] = None,
    port: Annotated[Optional[int], typer.Option("--port", min=0, max=65535,
                                                help="Port (default server.port: 7433; 0 = any free one).")] = None,
    home: HomeOption = None,
) -> None:
    """Serve the HTTP API (and MCP at /mcp) for one home until Ctrl-C.

    Admin routes need the bearer token in <home>/admin-token (created 0600 when missing). Binding
    anything but loopback needs <home>/read-token on every route too (created the same way).
    """
    import errno
    import os
    import signal
    import sys
    import threading

    from fabric_assets.operations import PipelineAdmin
    from fabric_query.api import Fabric
    from fabric_query.errors import FabricQueryError
    from fabric_query.server.app import create_app
    from fabric_query.server.app import _version as fabric_version
    from fabric_query.server.discovery import (
        API_PREFIX,
        EVERY_INTERFACE,
        READ_TOKEN_FILE,
        read_server_file,
        remove_server_file,
    )
    from fabric_query.server.runner import ListenError, listen
    from fabric_query.server.runner import serve as run_server
    from fabric_query.server.security import (
        ADMIN_TOKEN_FILE,
        TokenFileError,
        ensure_token,
        is_loopback,
    )

    path = set_home(home)
    from fabric_resources.home_location import read_only_file_system

    if read_only_file_system(path):
        fail(f"refusing to start: {path} is on a read-only file system, and a server writes its address "
             "(server.json) and its admin token there; `fabric search`, `fabric status`, `fabric resolve` and "
             "the Python API read such a home as it is")
    # Before anything touches the home: a second server would take over server.json (and remove
    # it when it stops, while the first still runs) and mark the first's admin operations failed.
    running = read_server_file(path, unbound=True)  # an older Fabric's server names no home
    if running is not None:
        older = ("" if running.home is not None else f" (its {path / 'server.json'} is an older Fabric's, which names"
                 " no home: if that server serves the folder this one was copied from, remove the file)")
        fail(f"refusing to start: {running.url} (pid {running.pid}) already serves this home; stop it first{older}")
    try:
        fabric = Fabric(path)
    except FabricQueryError as exc:
        fail(str(exc))
    config = fabric.home.config.server
    host = host or config.host
    port = config.port if port is None else port
    try:
        admin_token = ensure_token(path / ADMIN_TOKEN_FILE)
        read_token = None if is_loopback(host) else ensure_token(path / READ_TOKEN_FILE)
    except TokenFileError as exc:
        fail(f"refusing to start: {exc}")
    try:  # before the app loads its models: a port in use is said at once, in one line
        sock = listen(host, port)
    except ListenError as exc:
        hint = (" (another process holds the port: choose another with --port, or 0 for any free one)"
                if exc.errno == errno.EADDRINUSE else "")
        fail(f"refusing to start: {exc.strerror}{hint}")
    # The port bound (the OS's choice for --port 0): the Host and Origin checks compare a browser's
    # origin with it, and with 0 refused every origin of the server itself.
    port = sock.getsockname()[1]
    admin = PipelineAdmin(fabric.home, config.admin_workers)

    def stopping_while_loading() -> None:  # Ctrl-C during warm-up: say why the exit is not at once
        if threading.current_thread() is threading.main_thread():  # where signal handlers can be set
            # Uvicorn's own second Ctrl-C (force_exit) skips waiting for connections, not this wait
            # of the lifespan's (up to WARM_UP_WAIT_S). Exiting normally under the loading thread
            # aborts in the C++ runtime (exit 134); _exit runs no C++ static destructor, so none does.
            # Set before the line that invites the second Ctrl-C, so that one always finds it.
            signal.signal(signal.SIGINT, stop_now)
        err.print("fabric serve: stopping once the query models have loaded (a load cannot be interrupted; "
                  "Ctrl-C again to stop now)", markup=False)

    def stop_now(sig, frame) -> None:
        remove_server_file(path)
        sys.stdout.flush()
        # Straight to the descriptor: this handler may run inside the first line's err.print, and the
        # console's buffer, which that print has not cleared yet, would print that line again.
        os.write(2, b"fabric serve: stopped without waiting for the query models' load\n")
        os._exit(128 + signal.SIGINT)  # 130, the shell's convention for Ctrl-C

    app = create_app(fabric, config, bind_host=host, port=port, admin=admin, admin_token=admin_token,
                     read_token=read_token, on_stop_while_loading=stopping_while_loading)
    def listening(url: str) -> None:  # once bound: with --port 0 the port is known only then
        where = f"{url}{API_PREFIX}"
        if host in EVERY_INTERFACE:  # server.json's url is loopback, this machine's: the line says both
            bound = f"[{host}]" if ":" in host else host
            where = (f"listening on {bound}:{url.rsplit(':', 1)[1]} (every interface; other machines use a name "
                     f"in server.allowed_hosts), on this machine {where}")
        console.print(f"fabric serve: home {path}, {where} (admin token: {path / ADMIN_TOKEN_FILE}"
                      + (f", read token: {path / READ_TOKEN_FILE}" if read_token else "") + ")")

    try:
        stopped_by = run_server(app, host, port, path, fabric_version(), on_listening=listening,
                                request_read_timeout_s=config.request_read_timeout_s, sock=sock,
                                max_waiting_connections=config.max_waiting_connections,
                                max_body_bytes=config.max_body_bytes)
    except KeyboardInterrupt:
        # Uvicorn re-raises the SIGINT it stopped on, after its shutdown: the stop that was asked
        # for, not an interrupted start (the line root's wrapper would print).
        raise typer.Exit(128 + signal.SIGINT) from None
    if stopped_by is not None:
        # 128 + the signal, the shell's convention (130 for Ctrl-C, as `fabric ingest`).
        raise typer.Exit(128 + stopped_by)


@server_app.command()
@on_interrupt(READS)
def mcp(home: HomeOption = None) -> None:
    """Serve the read-only MCP tools over stdio (for an agent that starts its own server).

    The query models load before the first message is read; logs go to stderr, stdout carries
    only the protocol.
    """
    import sys

    from fabric_query.api import Fabric
    from fabric_query.errors import FabricQueryError
    from fabric_query.server.app import _version as fabric_version
    from fabric_query.server.app import load_query_models
    from fabric_query.server.gate import AdmissionGate
    from fabric_query.server.mcp_tools import build_mcp

    path = set_home(home)
    try:
        fabric = Fabric(path)
    except FabricQueryError as exc:
        fail(str(exc))
    config = fabric.home.config.server
    load_query_models(fabric)
    gate = AdmissionGate(config.max_concurrent_queries, config.retry_after_s)
    print(f"fabric mcp: home {path}, stdio", file=sys.stderr)
    try:
        build_mcp(fabric, gate, version=fabric_version(), max_line_bytes=config.max_body_bytes).run("stdio")
    except BaseExceptionGroup as group:
        # The client closed its end of stdout (it stopped reading): the session is over, as when
        # it closes stdin; one line instead of the SDK's task-group traceback (84 lines).
        if group.split(BrokenPipeError)[1] is not None:
            raise
        print("fabric mcp: the client stopped reading (broken pipe); stopped", file=sys.stderr)
    finally:
        gate.close()
