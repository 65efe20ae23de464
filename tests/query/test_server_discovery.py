"""<home>/server.json (fabric_query/server/discovery.py): a record is trusted only while the
process that wrote it runs, identified by pid and start time, so a reused pid is never taken for
the server; on Linux the exact kernel start ticks decide, without psutil."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fabric_query.server.discovery import SERVER_FILE, read_server_file, remove_server_file, write_server_file

LINUX = Path("/proc/self/stat").exists()


def test_this_process_is_found_and_then_removed(tmp_path):
    written = write_server_file(tmp_path, "127.0.0.1", 7433, "9.9")
    assert read_server_file(tmp_path) == written and written.url == "http://127.0.0.1:7433"
    assert (written.start_ticks is not None) == LINUX
    remove_server_file(tmp_path)
    assert not (tmp_path / SERVER_FILE).exists()


@pytest.mark.parametrize(("host", "family", "recorded"), [("0.0.0.0", "AF_INET", "127.0.0.1"),
                                                        ("::", "AF_INET6", "[::1]")])
def test_a_server_bound_to_every_interface_records_a_loopback_url_that_reaches_it(tmp_path, host, family, recorded):
    """guards against (trial 18a): `fabric serve --host ::` recording http://127.0.0.1:PORT, which
    reaches an IPv6 socket only where the system maps IPv4 onto it (not with IPV6_V6ONLY, the
    default of Windows and the BSDs): the CLI then ran every command in-process."""
    import socket
    from urllib.parse import urlsplit

    try:
        server = socket.socket(getattr(socket, family), socket.SOCK_STREAM)
    except OSError:
        pytest.skip(f"no {family} sockets here")
    with server:
        if family == "AF_INET6":
            server.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # no IPv4 mapped onto it
        server.bind((host, 0))
        server.listen()
        port = server.getsockname()[1]
        url = write_server_file(tmp_path, host, port, "9.9").url
        assert url == f"http://{recorded}:{port}"
        with socket.create_connection((urlsplit(url).hostname, port), timeout=5):
            pass  # the recorded URL reaches the socket as bound


@pytest.mark.skipif(not LINUX, reason="needs /proc (Linux)")
def test_a_live_pid_with_other_start_ticks_is_not_the_server(tmp_path):
    """guards against: a pid reused by another process being taken for the server (the start time
    psutil gives is ignored when the exact ticks disagree)."""
    record = write_server_file(tmp_path, "127.0.0.1", 7433, "9.9")._asdict()
    (tmp_path / SERVER_FILE).write_text(json.dumps({**record, "start_ticks": record["start_ticks"] - 1}))
    assert read_server_file(tmp_path) is None
    assert read_server_file(tmp_path, check_alive=False) is not None


def test_a_record_without_ticks_falls_back_to_psutil(tmp_path):
    record = write_server_file(tmp_path, "127.0.0.1", 7433, "9.9")._asdict()
    del record["start_ticks"]  # as written before the ticks were recorded
    (tmp_path / SERVER_FILE).write_text(json.dumps(record))
    assert read_server_file(tmp_path) is not None
    (tmp_path / SERVER_FILE).write_text(json.dumps({**record, "started": record["started"] - 5}))
    assert read_server_file(tmp_path) is None


def test_a_copy_of_the_home_is_not_served_by_the_originals_server(tmp_path):
    """Property: a server file is trusted only in the home folder whose server wrote it. A copy of
    a home (``cp -a``, a backup) holds the original's ``server.json`` while that server runs; the
    copy's commands run in-process (trial 12b).

    guards against: ``fabric search --home COPY`` answered by the original's server (its release,
    its sources: a hit citing a file the copy had seen moved), and ``fabric resolve --home COPY``
    checked against the original; also a record without the home it serves (an older server)."""
    import shutil

    from fabric_query.remote import call

    home = tmp_path / "home"
    home.mkdir()
    written = write_server_file(home, "127.0.0.1", 7433, "9.9")
    copy = tmp_path / "copy"
    shutil.copytree(home, copy)
    assert read_server_file(home) == written
    assert read_server_file(copy) is None and read_server_file(copy, check_alive=False) is None
    assert call(copy, "GET", "/v1/status") is None
    record = written._asdict()
    del record["home"]  # as written before the home was recorded
    (home / SERVER_FILE).write_text(json.dumps(record))
    assert read_server_file(home) is None


@pytest.mark.parametrize("text", ["", "{", "[]", '{"url": 1}', '{"url": "x", "pid": "a", "started": 0, "version": ""}',
                                  '{"url": "x", "pid": 1, "started": 0, "version": "", "start_ticks": "many"}'])
def test_malformed_files_are_ignored(tmp_path, text):
    (tmp_path / SERVER_FILE).write_text(text)
    assert read_server_file(tmp_path) is None


@pytest.mark.skipif(not LINUX, reason="needs /proc (Linux)")
def test_finding_a_server_loads_no_psutil(tmp_path):
    write_server_file(tmp_path, "127.0.0.1", 7433, "9.9")
    record = json.loads((tmp_path / SERVER_FILE).read_text())
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ticks = int(Path(f"/proc/{child.pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[19])
        (tmp_path / SERVER_FILE).write_text(json.dumps({**record, "pid": child.pid, "start_ticks": ticks}))
        code = ("import sys; from fabric_query.server.discovery import read_server_file; "
                f"r = read_server_file({str(tmp_path)!r}); print(r is not None and r.pid, 'psutil' in sys.modules)")
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert p.stdout.split() == [str(child.pid), "False"], p.stderr
    finally:
        child.kill()
        child.wait()
    assert read_server_file(tmp_path) is None  # gone: the same record is no longer trusted


@pytest.mark.parametrize("url", ["http://127.0.0.1:notaport", "http://[::1:7433", "http://127.0.0.1:99999"])
def test_a_damaged_url_runs_the_command_in_process(tmp_path, url):
    """guards against: a damaged server.json crashing every read command with a traceback."""
    from fabric_query.remote import call

    record = write_server_file(tmp_path, "127.0.0.1", 7433, "9.9")._asdict()
    (tmp_path / SERVER_FILE).write_text(json.dumps({**record, "url": url}))
    assert call(tmp_path, "GET", "/v1/status") is None


def test_a_second_server_for_a_served_home_refuses_to_start(tmp_path):
    """guards against: a second `fabric serve` taking over server.json (and removing it when it
    stops, while the first still serves) and marking the first's admin operations failed
    (fresh-user trial, 2026-12-04)."""
    from typer.testing import CliRunner

    from fabric_assets.cli import app

    home = tmp_path / "home"
    home.mkdir()
    written = write_server_file(home, "127.0.0.1", 7499, "9.9")  # this live process is "the first server"
    result = CliRunner().invoke(app, ["serve", "--port", "0", "--home", str(home)])
    assert result.exit_code == 2, result.output
    assert "already serves this home" in result.output and written.url in result.output
    assert read_server_file(home) == written, "the first server's record is untouched"
    assert not (home / "catalog.sqlite3").exists(), "refused before anything touched the home"


def test_a_server_started_before_the_upgrade_still_keeps_a_second_one_from_starting(tmp_path):
    """An older Fabric's server writes server.json without ``home`` (and ``api``); after an upgrade
    it still serves the home, so the new ``fabric serve`` refuses as it does for its own kind. Its
    clients still run in-process (the record names no home; trial 12b's copy-of-a-home rule).

    guards against: the new `fabric serve` started beside an old one still running (trial 12d: the
    record was read as no server), taking over server.json and removing it when it stopped, while
    the old one still served the home."""
    from typer.testing import CliRunner

    from fabric_assets.cli import app
    from fabric_query.remote import call

    home = tmp_path / "home"
    home.mkdir()
    record = write_server_file(home, "127.0.0.1", 7498, "0.1.0")._asdict()  # this live process
    del record["home"]  # as an older server writes it: url, pid, started, version, start_ticks
    (home / SERVER_FILE).write_text(json.dumps(record))
    assert read_server_file(home) is None and call(home, "GET", "/v1/status") is None
    result = CliRunner().invoke(app, ["serve", "--port", "0", "--home", str(home)])
    assert result.exit_code == 2, result.output
    assert "already serves this home" in result.output and record["url"] in result.output
    assert "older Fabric" in result.output
    assert read_server_file(home, unbound=True).pid == record["pid"]
    assert json.loads((home / SERVER_FILE).read_text()) == record, "the old server's record is untouched"
    assert not (home / "catalog.sqlite3").exists(), "refused before anything touched the home"


def test_a_body_over_the_servers_bound_runs_the_command_in_process(tmp_path):
    """guards against (hostile trial 10a): `fabric search` with a long query printing the server's
    "PayloadTooLarge: the body is over 65536 bytes" where in-process it prints "QueryTooLongError:
    … the limit is 1000" (the path through a server must never answer differently)."""
    import httpx
    from live_server import live_server, wait_ready

    from fabric_query import Fabric
    from fabric_query.cli_fast import run
    from fabric_query.remote import RemoteError, call
    from fabric_query.server.app import create_app
    from fabric_resources.config import ServerConfig
    from fabric_resources.home import FabricHome

    home = FabricHome(tmp_path / "home")
    home.catalog  # an empty catalog: a home Fabric opens
    config = ServerConfig(max_body_bytes=1024)
    with live_server(lambda port: create_app(Fabric(home.root), config, port=port, load_models=lambda f: {})) as url:
        with httpx.Client(base_url=url, timeout=10) as client:
            wait_ready(client)
            assert client.post("/v1/search", json={"query": "x" * 2000}).status_code == 413
        write_server_file(home.root, "127.0.0.1", int(url.rsplit(":", 1)[1]), "9.9")
        try:
            assert call(home.root, "POST", "/v1/search", {"query": "x" * 2000}) is None
            assert run(["search", "x" * 2000, "--home", str(home.root)]) is None  # the full CLI answers
            with pytest.raises(RemoteError):  # a refusal of the request itself still comes back as one
                call(home.root, "POST", "/v1/search", {"query": "x", "limit": 0})
        finally:
            remove_server_file(home.root)
