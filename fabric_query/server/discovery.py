"""``<home>/server.json``: how a command finds the ``fabric serve`` of its home.

The server writes it (atomically: a temporary file renamed over it, mode 0600) once it listens,
and removes it when it stops. A reader trusts it only when the process it names is alive and is
the one that wrote it (``pid`` and the process's start time, so a reused pid is not taken for the
server); a crashed server's file is therefore ignored, never guessed around.

The start time is psutil's ``create_time`` (seconds since the epoch, compared within 1 s), and on
Linux also the kernel's exact start time of the process (``starttime``, clock ticks since boot,
field 22 of ``/proc/<pid>/stat``, proc(5)), compared exactly. A reader that finds the latter
needs no psutil: ``fabric search`` through the server (:mod:`fabric_query.cli_fast`) starts
~50 ms sooner without importing it. The module itself imports only the standard library.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

from fabric_resources.process_identity import start_ticks

SERVER_FILE = "server.json"
#: The read token's file in the home (required by a server bound beyond loopback); named here, not
#: in :mod:`.security`, so the client can look for it without importing that module.
READ_TOKEN_FILE = "read-token"
#: The path every route of the HTTP API is under.
API_PREFIX = "/v1"
#: Hosts that bind every interface: no client can connect to them portably, so the server file
#: names loopback of the same family for them (the address this machine's clients, the CLI among
#: them, use): ``127.0.0.1`` for ``0.0.0.0``, ``[::1]`` for ``::``.
EVERY_INTERFACE = ("0.0.0.0", "::")


class ServerRecord(NamedTuple):
    """A running server: ``url`` (``http://host:port``), ``pid``, process start time (psutil's
    ``create_time``), version, the kernel's start ticks of the process (None off Linux), and the
    home folder it serves (``device:inode``, :func:`_home_identity`)."""

    url: str
    pid: int
    started: float
    version: str
    start_ticks: int | None = None
    home: str | None = None


def _home_identity(home_root: Path) -> str | None:
    """The home folder as the file system names it (``device:inode``): a copy of the home (``cp -a``,
    a backup) holds the server file too, but is another folder, which that server does not serve."""
    try:
        st = os.stat(home_root)
    except OSError:
        return None
    return f"{st.st_dev}:{st.st_ino}"


def _process_started(pid: int) -> float | None:
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:  # noqa: BLE001 - no such process, or no access: not a server we can use
        return None


def write_server_file(home_root: Path, host: str, port: int, version: str) -> ServerRecord:
    """Record this process as the home's server: the record's fields, and ``api``, the base URL of
    the HTTP API (``url`` + :data:`API_PREFIX`)."""
    pid = os.getpid()
    shown = f"[{host}]" if ":" in host else host
    if host in EVERY_INTERFACE:  # local clients use loopback, of the family bound: an IPv6 socket
        # takes IPv4 connections only where the system maps them (not with IPV6_V6ONLY, the
        # default of Windows and the BSDs), so `::` recorded as 127.0.0.1 could not be reached.
        shown = "[::1]" if ":" in host else "127.0.0.1"
    record = ServerRecord(url=f"http://{shown}:{port}", pid=pid, started=_process_started(pid) or 0.0,
                          version=version, start_ticks=start_ticks(pid), home=_home_identity(Path(home_root)))
    path = Path(home_root) / SERVER_FILE
    tmp = path.with_name(f".{SERVER_FILE}.{pid}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        # ``api`` is what a program calls (the start-up line names it); ``url`` stays the origin.
        json.dump({**record._asdict(), "api": f"{record.url}{API_PREFIX}"}, f)
    os.replace(tmp, path)
    return record


def remove_server_file(home_root: Path) -> None:
    """Remove the home's server file if this process wrote it."""
    path = Path(home_root) / SERVER_FILE
    found = read_server_file(home_root, check_alive=False)
    if found is not None and found.pid == os.getpid():
        path.unlink(missing_ok=True)


def read_server_file(home_root: Path, *, check_alive: bool = True, unbound: bool = False) -> ServerRecord | None:
    """The home's running server, or None (no file, a malformed one, one written for another
    folder — a copy of the home holds the original's file, and its searches were answered, and its
    citations resolved, by the original's server — or its process is gone).

    ``unbound``: a record that names no home (written by an older Fabric's server) is taken too,
    its ``home`` None. ``fabric serve`` asks so: a server started before an upgrade still serves
    the home, and a second one took over its server.json (clients then ask that one only)."""
    try:
        data = json.loads((Path(home_root) / SERVER_FILE).read_text(encoding="utf-8"))
        ticks = data.get("start_ticks")
        served = data["home"] if not unbound or "home" in data else None
        record = ServerRecord(url=str(data["url"]), pid=int(data["pid"]), started=float(data["started"]),
                              version=str(data["version"]), start_ticks=None if ticks is None else int(ticks),
                              home=None if served is None else str(served))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if record.home != _home_identity(Path(home_root)) and not (unbound and record.home is None):
        return None
    if check_alive and not _alive(record):
        return None
    return record


def _alive(record: ServerRecord) -> bool:
    """Whether the process ``record`` names is running and is the one that wrote it."""
    if record.start_ticks is not None:
        ticks = start_ticks(record.pid)
        if ticks is not None:
            return ticks == record.start_ticks
    started = _process_started(record.pid)
    return started is not None and abs(started - record.started) <= 1.0
