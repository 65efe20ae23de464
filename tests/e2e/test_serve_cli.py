"""`fabric serve` as a process, and the CLI using it: discovered through <home>/server.json (never
guessed), identical output to the in-process path, in-process again when the server is gone."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time

import httpx
import pytest
from conftest import ingest

from fabric_query.server.discovery import SERVER_FILE, read_server_file
from fabric_query.server.security import ADMIN_TOKEN_FILE

FABRIC = [sys.executable, "-m", "fabric_assets.cli"]


def _fabric(*args, env_extra=None, timeout=300):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env_extra or {})}
    return subprocess.run([*FABRIC, *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture
def home(tmp_path, fabric_home):
    src = tmp_path / "notes"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper logged the tide.\n\nA storm broke the lamp in March.\n")
    (src / "b.txt").write_text("認証トークンは利用者を示す文字列です。\n")
    ingest(src, fabric_home)
    return fabric_home.root


def _commands(home, citation_file):
    h = ["--home", str(home)]
    return [("search", "lighthouse keeper", *h), ("search", "認証トークン", "-n", "3", *h),
            ("search", "lamp paht:notes", *h), ("search", '"unclosed', *h), ("status", *h),
            ("status", "--json", *h), ("resolve", str(citation_file), *h),
            ("search", "caf\udce9", *h)]  # an undecodable byte: never sent, the same QuerySyntaxError


def _timeless(text: str) -> str:
    """``text`` with the ages `fabric status` prints ("last scan 48 s ago") as ``<age>``, and line
    wrapping undone: the two runs compared happen seconds apart, and an age one digit longer moves
    where the console wraps."""
    return re.sub(r"\s+", " ", re.sub(r"\d+(?:\.\d+)? ?[a-z]+ ago", "<age> ago", text))


def _outputs(home, citation_file, env_extra=None):
    out = []
    for args in _commands(home, citation_file):
        p = _fabric(*args, env_extra=env_extra)
        out.append((args[0], p.returncode, _timeless(p.stdout), p.stderr))
    p = _fabric("search", "lighthouse", "--json", "--home", str(home), env_extra=env_extra)
    pack = json.loads(p.stdout)
    pack.pop("timings")
    out.append(("search --json", p.returncode, pack, p.stderr))
    return out


def _start_server(home, sigint=signal.SIG_DFL):
    # The child's SIGINT disposition set explicitly: a pytest worker's own (some libraries leave it
    # ignored) is inherited through exec and decided what Ctrl-C did to the server.
    proc = subprocess.Popen([*FABRIC, "serve", "--port", "0", "--home", str(home)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))
    deadline = time.monotonic() + 180
    while (record := read_server_file(home)) is None:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no server.json"
        time.sleep(0.1)
    with httpx.Client(base_url=record.url, timeout=30) as client:
        while client.get("/v1/ready").status_code != 200:
            assert time.monotonic() < deadline, "server never ready"
            time.sleep(0.1)
    return proc, record


_PROBE = ("import sys; from fabric_query.cli_fast import run; code = run(sys.argv[1:]); "
          "print(code, sorted(m for m in ('typer', 'click', 'rich', 'pydantic', 'pyarrow', 'lance') if m in sys.modules))")


def test_cli_through_a_running_server_prints_what_in_process_prints(home, tmp_path):
    """guards against: the CLI guessing a port, or printing something else through the server."""
    p = _fabric("search", "lighthouse", "--json", "--home", str(home), env_extra={"FABRIC_USE_SERVER": "0"})
    citation_file = tmp_path / "pack.json"
    citation_file.write_text(p.stdout)
    in_process = _outputs(home, citation_file, {"FABRIC_USE_SERVER": "0"})
    assert in_process[2][1] == 2 and "did you mean path:" in in_process[2][3]

    proc, record = _start_server(home)
    try:
        token_file = home / ADMIN_TOKEN_FILE
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE((home / SERVER_FILE).stat().st_mode) == 0o600
        url = record.url
        api = json.loads((home / SERVER_FILE).read_text())["api"]  # what a program calls: the API's base
        assert api == f"{url}/v1" and httpx.get(f"{api}/ready").status_code == 200
        before = httpx.get(f"{url}/v1/ready").json()["admitted"]
        through_server = _outputs(home, citation_file)
        after = httpx.get(f"{url}/v1/ready").json()["admitted"]
        # Every command reached the server (the two refused queries too: they were admitted and
        # answered 400), none ran its query in-process; but the undecodable one, which has no JSON
        # form to send.
        assert after - before == len(through_server) - 1
        assert in_process[-2][:2] == ("search", 2) and "QuerySyntaxError" in in_process[-2][3]
        assert through_server == in_process
        # The plain searches above took the fast path: answered through the server with neither
        # Typer, rich, pydantic nor Arrow loaded, printing exactly what the in-process run printed.
        for i, args in enumerate(_commands(home, citation_file)[:4]):
            probe = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True,
                                   timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
            *printed, last = probe.stdout.splitlines()
            assert last == f"{in_process[i][1]} []", probe.stderr
            assert (_timeless("\n".join(printed) + "\n" if printed else ""), probe.stderr) == \
                (in_process[i][2], in_process[i][3])
        # A reader that closed stdout early (`| head -1`): the fast path ends as the full CLI does,
        # silently with 141 (tests/e2e/test_cli.py), not a BrokenPipeError traceback and exit 1.
        read, write = os.pipe()
        os.close(read)
        before = httpx.get(f"{url}/v1/ready").json()["admitted"]
        try:
            closed = subprocess.run([*FABRIC, "search", "lighthouse", "--home", str(home)], stdout=write,
                                    stderr=subprocess.PIPE, text=True, timeout=120,
                                    env={**os.environ, "HF_HUB_OFFLINE": "1"})
        finally:
            os.close(write)
        assert (closed.returncode, closed.stderr) == (141, ""), (closed.returncode, closed.stderr[-800:])
        assert httpx.get(f"{url}/v1/ready").json()["admitted"] == before + 1  # answered by the server
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err  # Ctrl-C: shut down cleanly, exit 130 as `fabric ingest` does
    assert token_file.read_text().strip() not in out + err  # the token is never printed
    assert api in out.split()  # the start-up line names the URL server.json gives (rich may wrap it)
    assert not (home / SERVER_FILE).exists()  # removed when the server stops
    assert _outputs(home, citation_file)[0] == in_process[0]  # in-process again, same output


def test_a_header_past_the_bound_or_a_request_never_finished_is_refused_and_others_are_answered(home):
    """guards against (hostile trial 6, 2026-12-05): one client sending an endless header slowing
    every other request to 10-20 s and growing the server without limit (uvicorn's httptools
    protocol bounds no header); connections that begin a request and never finish it held for good
    (20,000 of them exhausted the server's file descriptors)."""
    import socket
    from urllib.parse import urlsplit

    from fabric_query.server.guard import MAX_HEADER_BYTES

    (home / "config.json").write_text(json.dumps({"server": {"request_read_timeout_s": 1.5}}))
    proc, record = _start_server(home)
    try:
        url = urlsplit(record.url)

        def closed_after(first: bytes, wait_s: float) -> bool:
            """Send ``first`` (a request begun, never finished) and say whether the server closed."""
            with socket.create_connection((url.hostname, url.port), timeout=10) as conn:
                conn.sendall(first)
                time.sleep(wait_s)
                conn.settimeout(2)
                try:
                    return conn.recv(64) == b""
                except ConnectionResetError:
                    return True
                except TimeoutError:  # still open
                    return False

        # A request begun and never finished (slow headers, a body that never comes, nothing at
        # all) is closed after the read deadline; the server held such connections for good.
        host = f"Host: {url.netloc}\r\n".encode()
        assert closed_after(b"GET /v1/health HTTP/1.1\r\n" + host + b"X-Slow: a", 4.5)
        assert closed_after(b"POST /v1/search HTTP/1.1\r\n" + host + b"Content-Type: application/json\r\n"
                            b"Content-Length: 100\r\n\r\n{\"query\"", 4.5)
        assert closed_after(b"", 4.5)

        def raw(header_bytes: int) -> bytes:
            with socket.create_connection((url.hostname, url.port), timeout=30) as conn:
                conn.sendall(f"GET /v1/health HTTP/1.1\r\nHost: {url.netloc}\r\nX-Pad: ".encode())
                try:
                    conn.sendall(b"a" * header_bytes + b"\r\nConnection: close\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):  # refused before it was all sent
                    pass
                return conn.recv(64)

        assert raw(MAX_HEADER_BYTES // 4).startswith(b"HTTP/1.1 200")  # a long header within the bound
        assert raw(4 * MAX_HEADER_BYTES).startswith(b"HTTP/1.1 400")
        # Sent whole in one write, as many small headers or one a little past the bound (h11 bounds
        # only a header section still incomplete: hostile trial 7 got 200 for 86 KB of headers).
        many = b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 100) for i in range(800))
        with socket.create_connection((url.hostname, url.port), timeout=30) as conn:
            conn.sendall(b"GET /v1/health HTTP/1.1\r\n" + host + many + b"Connection: close\r\n\r\n")
            assert conn.recv(64).startswith(b"HTTP/1.1 431")
        assert raw(MAX_HEADER_BYTES + 4096)[:12] in (b"HTTP/1.1 431", b"HTTP/1.1 400")
        # A request h11 cannot read is answered in the API's JSON error shape (was uvicorn's text).
        for bad in (b"NOT A REQUEST\r\n\r\n", b"GET /v1/health HTTP/1.1\r\n" + host + b"Bad Header\r\n\r\n"):
            with socket.create_connection((url.hostname, url.port), timeout=30) as conn:
                conn.sendall(bad)
                answer = b""
                while chunk := conn.recv(4096):
                    answer += chunk
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 400") and b"content-type: application/json" in head.lower(), answer
            assert json.loads(body)["error"]["type"] == "BadRequest", answer
        assert httpx.get(f"{record.url}/v1/health", timeout=5).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)


def test_a_server_started_with_sigint_ignored_still_exits_130_on_ctrl_c(home):
    """guards against: `fabric serve &` from a script (the shell starts it with SIGINT ignored)
    exiting 0 after SIGINT, as if it had stopped on its own: uvicorn re-raises the signal it caught,
    and an ignored signal raised again does nothing."""
    proc, record = _start_server(home, sigint=signal.SIG_IGN)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert f"{record.url}/v1" in out and ":0/" not in out  # --port 0: the banner names the port bound
    assert not (home / SERVER_FILE).exists()


def test_a_server_bound_to_every_interface_says_so_and_records_a_loopback_url(home):
    """guards against (trial 17): `fabric serve --host 0.0.0.0` starting with the line
    `fabric serve: home …, http://127.0.0.1:PORT/v1`, as if it listened on loopback only. server.json
    keeps the loopback URL (what the CLI on this machine connects to: 0.0.0.0 is no portable
    destination); the line names the address listened on as well."""
    proc = subprocess.Popen([*FABRIC, "serve", "--host", "0.0.0.0", "--port", "0", "--home", str(home)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        deadline = time.monotonic() + 180
        while (record := read_server_file(home)) is None:
            assert proc.poll() is None and time.monotonic() < deadline, "no server.json"
            time.sleep(0.1)
        token = {"Authorization": f"Bearer {(home / 'read-token').read_text().strip()}"}  # beyond loopback
        while httpx.get(f"{record.url}/v1/ready", headers=token, timeout=30).status_code != 200:  # the CLI's URL
            assert time.monotonic() < deadline, "server never ready"
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    port = record.url.rsplit(":", 1)[1]
    assert record.url == f"http://127.0.0.1:{port}"
    assert f"listening on 0.0.0.0:{port} (every interface" in " ".join(out.split()), out  # rich wraps lines
    assert f"{record.url}/v1" in out.split(), out


def test_a_server_that_cannot_print_its_start_up_line_leaves_no_server_file(home):
    """guards against: `fabric serve | true` (stdout closed before the line that names the bound
    port) failing after server.json was written, leaving it behind with a dead pid."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone: the first print is a broken pipe
    proc = subprocess.Popen([*FABRIC, "serve", "--port", "0", "--home", str(home)], stdout=write,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    os.close(write)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode != 0, err
    assert not (home / SERVER_FILE).exists(), err


def test_a_port_in_use_is_refused_in_one_line_and_leaves_no_server_file(home):
    """guards against: uvicorn's bind failure (its log line, then `sys.exit` inside the event loop)
    aborting the process, exit 134 and "FATAL: exception not rethrown", once the query models'
    threads ran (stop 43's trial left it)."""
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        p = _fabric("serve", "--port", str(port), "--home", str(home), timeout=180)
    finally:
        taken.close()
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = [line for line in (p.stdout + p.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and f"cannot listen on 127.0.0.1:{port}" in lines[0] and "--port" in lines[0], lines
    assert not (home / SERVER_FILE).exists()


def test_a_dead_servers_file_is_ignored(home, tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (home / SERVER_FILE).write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": dead.pid, "started": 1.0,
                                                "version": "0"}))
    p = _fabric("search", "lighthouse", "--home", str(home))
    assert p.returncode == 0 and "a.txt" in p.stdout, p.stderr


def test_version():
    p = _fabric("--version")
    assert p.returncode == 0 and p.stdout.startswith("fabric ")


_SLOW_LOAD = """
import sys
from pathlib import Path

import fabric_query.server.app as server_app

marks, real = Path(sys.argv[1]), server_app.load_query_models


def load(fabric):  # the real models, with marks for the test: when the load began, when it ended
    (marks / "loading").touch()
    models = real(fabric)
    (marks / "loaded").touch()
    return models


server_app.create_app.__kwdefaults__["load_models"] = load
from fabric_assets.cli.root import run

sys.argv = ["fabric", *sys.argv[2:]]
run()
"""


def _serve_until_loading(script: str, home, tmp_path, ready=lambda: True) -> subprocess.Popen:
    """`fabric serve --port 0` of ``home`` run by ``script`` (a stand-in load writing its marks in
    ``tmp_path``), returned once the load has begun and ``ready()`` holds (killed if it never does)."""
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path), "serve", "--port", "0", "--home",
                             str(home)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 180
    try:
        while not ((tmp_path / "loading").exists() and ready()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
    except BaseException:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        raise
    return proc


def test_ctrl_c_while_the_models_load_exits_130_in_one_line_after_the_load(home, tmp_path):
    """guards against (trial 18a): Ctrl-C while `fabric serve` still loaded its query models
    aborting the process ("terminate called without an active exception", SIGABRT, exit 134): the
    process exited under the warm-up thread, inside ONNX Runtime / torch. The server now lets the
    load end, says so in one line and exits 130."""
    proc = _serve_until_loading(_SLOW_LOAD, home, tmp_path)
    try:
        assert not (tmp_path / "loaded").exists()  # the signal comes while the models load
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert (proc.returncode, (tmp_path / "loaded").exists()) == (130, True), (proc.returncode, err[-2000:])
    assert err.splitlines() == [_STOPPING_WHILE_LOADING], err
    assert not (home / SERVER_FILE).exists()


_STOPPING_WHILE_LOADING = ("fabric serve: stopping once the query models have loaded (a load cannot be interrupted; "
                           "Ctrl-C again to stop now)")

_STUCK_LOAD = """
import sys
import time
from pathlib import Path

import fabric_query.server.app as server_app

marks = Path(sys.argv[1])
server_app.WARM_UP_WAIT_S = 3600.0  # the first Ctrl-C's wait outlasts the test: only the second ends it


def load(fabric):  # a load that ends only when the test says so (a slow download, a stuck native call)
    (marks / "loading").touch()
    while not (marks / "release").exists():
        time.sleep(0.05)
    (marks / "loaded").touch()
    return {}


server_app.create_app.__kwdefaults__["load_models"] = load
from fabric_assets.cli.root import run

sys.argv = ["fabric", *sys.argv[2:]]
run()
"""


def test_a_second_ctrl_c_while_the_models_load_exits_130_at_once(home, tmp_path):
    """guards against (trial 19a): a second Ctrl-C during `fabric serve`'s wait for the models' load
    did nothing (uvicorn's own second-signal exit skips waiting for connections, not its lifespan),
    so the server could be stopped only by waiting out the load or by SIGKILL, which left its
    server.json behind. It ends the process while the load is still under way: exit 130 (no abort,
    134), one line more, and no server.json."""
    proc = _serve_until_loading(_STUCK_LOAD, home, tmp_path, ready=lambda: read_server_file(home) is not None)
    try:
        proc.send_signal(signal.SIGINT)
        assert proc.stderr.readline().rstrip("\n") == _STOPPING_WHILE_LOADING  # waiting for the load now
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        (tmp_path / "release").touch()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert (proc.returncode, (tmp_path / "loaded").exists()) == (130, False), (proc.returncode, err[-2000:])
    assert err.splitlines() == ["fabric serve: stopped without waiting for the query models' load"], err
    assert not (home / SERVER_FILE).exists()


def test_with_port_0_a_browser_origin_of_the_port_bound_is_accepted_and_a_foreign_one_refused(home):
    """guards against (trial 18a): `fabric serve --port 0` checking Origin against port 0, not the
    port the OS gave: every browser request from the server's own origin was refused (403)."""
    proc, record = _start_server(home)
    try:
        port = record.url.rsplit(":", 1)[1]
        answers = {origin: httpx.get(f"{record.url}/v1/health", headers={"Origin": origin}, timeout=30).status_code
                   for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}", "http://evil.example",
                                  "http://127.0.0.1:0")}
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert answers == {f"http://127.0.0.1:{port}": 200, f"http://localhost:{port}": 200, "http://evil.example": 403,
                       "http://127.0.0.1:0": 403}


def test_the_body_bound_set_in_the_homes_config_is_the_one_fabric_serve_keeps(home):
    """guards against (trial 24b): ``server.max_body_bytes`` was tested only on an app built in the
    test with the setting passed by hand, never on ``fabric serve`` reading it from the home's
    ``config.json``: a server that kept the 64 KiB default (or a protocol bound that differed from
    the guard's) went unseen. Now a body one byte over the configured bound is 413 on the API and a
    JSON-RPC error on ``/mcp``, with and without ``Content-Length``; one at the bound is served."""
    bound = 3000
    (home / "config.json").write_text(json.dumps({"server": {"max_body_bytes": bound}}))
    proc, record = _start_server(home)
    try:
        with httpx.Client(base_url=record.url, timeout=30) as client:
            def body(size: int) -> bytes:  # JSON of exactly ``size`` bytes: the query padded with spaces
                head, tail = b'{"query": "lighthouse keeper"', b"}"
                return head + b" " * (size - len(head) - len(tail)) + tail

            json_type = {"content-type": "application/json"}
            at_bound = client.post("/v1/search", content=body(bound), headers=json_type)
            assert at_bound.status_code == 200 and at_bound.json()["results"], at_bound.text
            over = client.post("/v1/search", content=body(bound + 1), headers=json_type)
            assert over.status_code == 413, over.text
            assert over.json()["error"] == {"type": "PayloadTooLarge", "message": f"the body is over {bound} bytes"}

            def chunked(data: bytes):  # no Content-Length: the bound is met while the body is read
                yield from (data[i:i + 500] for i in range(0, len(data), 500))

            assert client.post("/v1/search", content=chunked(body(bound)), headers=json_type).status_code == 200
            assert client.post("/v1/search", content=chunked(body(bound + 1)), headers=json_type).status_code == 413
            call = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                               "params": {"name": "search", "arguments": {"query": "lighthouse keeper"}}}).encode()
            mcp_headers = {**json_type, "accept": "application/json, text/event-stream"}
            padded = call[:-1] + b" " * (bound - len(call)) + b"}"
            assert len(padded) == bound
            served = client.post("/mcp", content=padded, headers=mcp_headers)
            assert served.status_code == 200 and not served.json()["result"]["isError"], served.text
            refused = client.post("/mcp", content=padded[:-1] + b" }", headers=mcp_headers)
            assert refused.status_code == 413 and f"over {bound} bytes" in refused.json()["error"]["message"], refused.text
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
