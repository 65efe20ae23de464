"""Admin operations of `fabric serve`: the token file, 401s, 202 + Operation rows polled by ID,
pipeline work as real Dagster runs on the home's instance."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time

import httpx
import pytest
from conftest import ingest
from live_server import live_server, wait_ready

from fabric_assets.operations import PipelineAdmin
from fabric_assets.operations import backend
from fabric_query import Fabric
from fabric_query.server.app import create_app
from fabric_query.server.security import ADMIN_TOKEN_FILE, TokenFileError, ensure_token, load_token
from fabric_resources.config import ServerConfig
from fabric_resources.home import FabricHome


def _poll(client, op_id: str, token: str, timeout_s: float = 300) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        r = client.get(f"/v1/operations/{op_id}", headers={"authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
        op = r.json()
        assert op["status"] in ("pending", "running", "succeeded", "failed")
        if op["status"] in ("succeeded", "failed"):
            return op
        assert time.monotonic() < deadline, op
        time.sleep(0.1)


@pytest.fixture
def served(tmp_path, fabric_home):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("The lighthouse keeper logged the tide.\n")
    ingest(src, fabric_home)
    token = ensure_token(fabric_home.root / ADMIN_TOKEN_FILE)
    fabric = Fabric(fabric_home.root)
    admin = PipelineAdmin(fabric.home)
    with live_server(lambda port: create_app(fabric, ServerConfig(), port=port, admin=admin,
                                             admin_token=token)) as url:
        with httpx.Client(base_url=url, timeout=60) as client:
            wait_ready(client)
            yield client, token, fabric_home, tmp_path


def test_token_file_is_created_exclusively_owner_only(tmp_path):
    path = tmp_path / ADMIN_TOKEN_FILE
    token = ensure_token(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(token) >= 32
    assert ensure_token(path) == token == load_token(path)  # never overwritten


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660])
def test_a_token_readable_by_others_is_refused(tmp_path, mode):
    path = tmp_path / ADMIN_TOKEN_FILE
    ensure_token(path)
    path.chmod(mode)
    with pytest.raises(TokenFileError, match="chmod 600"):
        load_token(path)


def test_a_token_symlink_or_empty_file_is_refused(tmp_path):
    real = tmp_path / "real"
    ensure_token(real)
    (tmp_path / ADMIN_TOKEN_FILE).symlink_to(real)
    with pytest.raises(TokenFileError):
        ensure_token(tmp_path / ADMIN_TOKEN_FILE)
    empty = tmp_path / "empty"
    empty.touch(mode=0o600)
    with pytest.raises(TokenFileError, match="no token"):
        load_token(empty)


def test_serve_refuses_to_start_with_an_unsafe_token_file(tmp_path, fabric_home):
    """guards against: a server that runs with an admin token any local user can read."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("lamp\n")
    ingest(src, fabric_home)
    token_file = fabric_home.root / ADMIN_TOKEN_FILE
    token = ensure_token(token_file)
    token_file.chmod(0o644)
    proc = subprocess.run([sys.executable, "-m", "fabric_assets.cli", "serve", "--port", "0",
                           "--home", str(fabric_home.root)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "refusing to start" in proc.stderr and "group or others" in proc.stderr
    assert token not in proc.stdout + proc.stderr
    assert token not in fabric_home.config.model_dump_json()  # the token is no config: in no config hash


def test_admin_routes_need_the_admin_token(served):
    client, token, _, tmp_path = served
    body = {"path": str(tmp_path / "src")}
    for headers in ({}, {"authorization": "Bearer wrong-token-of-the-right-size-xxxxxxxxxx"},
                    {"authorization": f"Basic {token}"}, {"authorization": f"Bearer {token}x"},
                    {"authorization": token}):
        r = client.post("/v1/admin/ingest", json=body, headers=headers)
        assert r.status_code == 401 and r.json()["error"]["type"] == "Unauthorized", headers
        # where the token is (trial 20g: the message named none)
        assert "admin-token" in r.json()["error"]["message"], r.text
        assert client.get("/v1/operations/" + "0" * 32, headers=headers).status_code == 401
    auth = {"authorization": f"Bearer {token}"}
    assert client.get("/v1/operations/" + "0" * 32, headers=auth).status_code == 404
    assert client.post("/v1/admin/nope", json={}, headers=auth).status_code == 404
    for kind in ("accept", "discard", "re-parse", "restore"):  # lifecycle kinds: their bodies are checked
        r = client.post(f"/v1/admin/{kind}", json={}, headers=auth)
        assert r.status_code == 422 and r.json()["error"]["type"] == "RequestValidationError"
    assert client.post("/v1/admin/ingest", json={"path": str(tmp_path / "missing")}, headers=auth).status_code == 400
    assert client.post("/v1/admin/ingest", json={"path": "x", "force": True}, headers=auth).status_code == 422
    assert client.post("/v1/admin/ingest", content=b"[", headers=auth).status_code == 422


def test_admin_bodies_that_are_not_json_or_not_absolute_are_422(served):
    """guards against (hostile trial 6, 2026-12-05): a body nested 30,000 deep answered 500 with a
    traceback (RecursionError is no ValueError); a key named twice meaning its last value;
    `{"path": "."}` ingesting the folder the server
    was started in; `into` relative or holding a NUL byte (the Operation ended with a traceback)."""
    client, token, fabric_home, _ = served
    auth = {"authorization": f"Bearer {token}"}
    deep = b"[" * 30_000 + b"]" * 30_000
    for kind, body in (("snapshot", deep), ("snapshot", b'{"note": ' + deep + b"}")):
        r = client.post(f"/v1/admin/{kind}", content=body, headers={**auth, "content-type": "application/json"})
        assert r.status_code == 422 and r.json()["error"]["type"] == "RequestValidationError", r.text
    r = client.post("/v1/admin/snapshot", content=b'{"note": "a", "note": "b"}',
                    headers={**auth, "content-type": "application/json"})
    assert r.status_code == 422 and r.json()["error"]["message"] == "the body is not JSON: duplicate key 'note'", r.text
    for kind, body in (("ingest", {"path": "."}), ("ingest", {"path": "src"}), ("ingest", {"path": "/tmp/a\x00b"}),
                       ("restore", {"snapshot_id": 1, "into": "relative-into"}),
                       ("restore", {"snapshot_id": 1, "into": "/tmp/a\x00b"})):
        r = client.post(f"/v1/admin/{kind}", json=body, headers=auth)
        assert r.status_code == 422 and r.json()["error"]["type"] == "RequestValidationError", (body, r.text)
        assert ("absolute" in r.text or "NUL" in r.text) and str(fabric_home.root) not in r.text
    assert fabric_home.catalog.operations("pending") == [] and len(fabric_home.catalog.roots()) == 1


def test_admin_ingest_is_a_dagster_run_whose_operation_succeeds(served):
    """guards against: admin work outside Dagster (invisible in the UI), an operation that is
    never recorded, or one whose status lies about the outcome."""
    import dagster as dg

    client, token, home, tmp_path = served
    new = tmp_path / "more"
    new.mkdir()
    (new / "b.txt").write_text("Sourdough needs a lively starter and patience.\n")
    os.mkfifo(new / "pipe")  # found, never opened: skipped, which makes the ingest incomplete
    auth = {"authorization": f"Bearer {token}"}
    r = client.post("/v1/admin/ingest", json={"path": str(new)}, headers=auth)
    assert r.status_code == 202, r.text
    op_id = r.json()["operation_id"]
    assert r.headers["location"] == f"/v1/operations/{op_id}"
    op = _poll(client, op_id, token)
    assert op["status"] == "succeeded", op
    assert op["kind"] == "ingest" and op["reason"] is None and op["started_at"] <= op["finished_at"]
    # Incomplete, and the result says why (hostile trial 6: `complete: false`, nothing else).
    assert op["result"]["complete"] is False
    assert op["result"]["skipped"] == [{"path": "fs:more/pipe", "reason": "not-a-regular-file: fifo"}]
    run_ids = op["result"]["run_ids"] + [op["result"]["activation_run_id"]]
    assert op["result"]["run_ids"]
    os.environ["DAGSTER_HOME"] = str(home.layout.dagster_home)
    with dg.DagsterInstance.from_config(str(home.layout.dagster_home)) as instance:
        for run_id in run_ids:
            run = instance.get_run_by_id(run_id)
            assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS, run_id
    hits = client.post("/v1/search", json={"query": "sourdough starter"}).json()["results"]
    assert hits and hits[0]["citation"]["source_key"] == "fs:more/b.txt"
    assert home.catalog.operation(op_id).status == "succeeded"


def test_a_failing_operation_ends_failed_with_its_reason(served, monkeypatch):
    client, token, home, tmp_path = served

    def broken(_home, _params):
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(backend.WORK, "lexical-repair", broken)
    r = client.post("/v1/admin/lexical-repair", json={}, headers={"authorization": f"Bearer {token}"})
    assert r.status_code == 202
    op = _poll(client, r.json()["operation_id"], token)
    assert op["status"] == "failed" and op["reason"] == "RuntimeError: disk on fire"
    assert client.get("/v1/health").status_code == 200


def test_lexical_repair_operation_succeeds(served):
    client, token, home, _ = served
    r = client.post("/v1/admin/lexical-repair", json={}, headers={"authorization": f"Bearer {token}"})
    op = _poll(client, r.json()["operation_id"], token)
    assert op["status"] == "succeeded" and op["result"]["healthy"], op


def test_operations_a_stopped_server_left_are_failed_on_restart(fabric_home):
    stale = fabric_home.catalog.create_operation("ingest", {"path": "/x"})
    running = fabric_home.catalog.create_operation("ingest", {"path": "/y"})
    fabric_home.catalog.set_operation_status(running.operation_id, "running")
    PipelineAdmin(FabricHome(fabric_home.root)).close()
    for op in (stale, running):
        row = fabric_home.catalog.operation(op.operation_id)
        assert row.status == "failed" and row.reason == backend.SERVER_STOPPED
