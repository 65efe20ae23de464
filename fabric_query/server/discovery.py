"""``<home>/server.json``: how a command finds the ``fabric serve`` of its home.

The server writes it (atomically: a temporary file renamed over it, mode 0600) once it listens,
and removes it when it stops. A reader trusts it only when the process it names is alive and is
the one that wrote it (``pid`` and the process's start time, so a reused pid is not taken for the
server); a crashed server's file is therefore ignored, never guessed around.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

SERVER_FILE = "server.json"


@dataclass(frozen=True)
class ServerRecord:
    """A running server: ``url`` (``http://host:port``), ``pid``, process start time, version."""

    url: str
    pid: int
    started: float
    version: str


def _process_started(pid: int) -> float | None:
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:  # noqa: BLE001 - no such process, or no access: not a server we can use
        return None


def write_server_file(home_root: Path, host: str, port: int, version: str) -> ServerRecord:
    """Record this process as the home's server."""
    pid = os.getpid()
    shown = f"[{host}]" if ":" in host else host
    if host in ("0.0.0.0", "::"):  # bound to every interface: local clients use loopback
        shown = "127.0.0.1"
    record = ServerRecord(url=f"http://{shown}:{port}", pid=pid, started=_process_started(pid) or 0.0,
                          version=version)
    path = Path(home_root) / SERVER_FILE
    tmp = path.with_name(f".{SERVER_FILE}.{pid}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(asdict(record), f)
    os.replace(tmp, path)
    return record


def remove_server_file(home_root: Path) -> None:
    """Remove the home's server file if this process wrote it."""
    path = Path(home_root) / SERVER_FILE
    found = read_server_file(home_root, check_alive=False)
    if found is not None and found.pid == os.getpid():
        path.unlink(missing_ok=True)


def read_server_file(home_root: Path, *, check_alive: bool = True) -> ServerRecord | None:
    """The home's running server, or None (no file, a malformed one, or its process is gone)."""
    try:
        data = json.loads((Path(home_root) / SERVER_FILE).read_text(encoding="utf-8"))
        record = ServerRecord(url=str(data["url"]), pid=int(data["pid"]), started=float(data["started"]),
                              version=str(data["version"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if check_alive:
        started = _process_started(record.pid)
        if started is None or abs(started - record.started) > 1.0:
            return None
    return record
