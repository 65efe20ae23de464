"""The lifecycle admin routes of `fabric serve` over a real loopback server: accept / discard a
held parse, re-parse, retry, purge, snapshot and restore, each a 202 + Operation polled by ID,
the pipeline work as real Dagster runs on the home's instance (the lifecycle jobs with their
typed config, as the UI's Launchpad runs them)."""

from __future__ import annotations

import os

import dagster as dg
import httpx
import pytest
from conftest import ingest
from live_server import live_server, wait_ready
from test_operations import _poll

from fabric_assets.operations import PipelineAdmin
from fabric_query import Fabric
from fabric_query.server.app import create_app
from fabric_query.server.security import ADMIN_TOKEN_FILE, ensure_token
from fabric_resources.config import ServerConfig
from fabric_resources.home import FabricHome

LIGHTHOUSE = "The lighthouse keeper logged the tide.\n"
SECRET = "Zanzibar copper ledger: the vault code is 4417 under the orchard.\n"
HARBOUR = "The harbour master counted the herring boats at dawn.\n"


@pytest.fixture
def served(tmp_path, fabric_home):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text(LIGHTHOUSE)
    ingest(src, fabric_home)
    token = ensure_token(fabric_home.root / ADMIN_TOKEN_FILE)
    fabric = Fabric(fabric_home.root)
    admin = PipelineAdmin(fabric.home)
    with live_server(lambda port: create_app(fabric, ServerConfig(), port=port, admin=admin,
                                             admin_token=token)) as url:
        with httpx.Client(base_url=url, timeout=60, headers={"authorization": f"Bearer {token}"}) as client:
            wait_ready(client)
            yield client, token, fabric_home, src


def _op(client, token: str, kind: str, body: dict) -> dict:
    r = client.post(f"/v1/admin/{kind}", json=body)
    assert r.status_code == 202, r.text
    return _poll(client, r.json()["operation_id"], token)


def _run_status(home: FabricHome, run_id: str):
    os.environ["DAGSTER_HOME"] = str(home.layout.dagster_home)
    with dg.DagsterInstance.from_config(str(home.layout.dagster_home)) as instance:
        run = instance.get_run_by_id(run_id)
        return run.status if run else None


def _texts(pack: dict) -> list[tuple[str, str]]:
    return [(h["citation"]["source_key"], h["text"]) for h in pack["results"]]


def test_lifecycle_bodies_are_checked_and_a_backend_without_a_kind_answers_501(served, tmp_path, fabric_home):
    """guards against: a lifecycle route that takes any body, or one a backend cannot run that
    pretends to start."""
    client, token, home, _ = served
    for kind, body in (("accept", {}), ("discard", {"parse_id": 7}), ("re-parse", {"source_key": ""}),
                       ("retry", {"parse_ids": "x"}), ("purge", {}),
                       ("purge", {"source_keys": ["fs:a"], "root": "src"}), ("snapshot", {"note": 3}),
                       ("restore", {}), ("restore", {"snapshot_id": "1"}), ("accept", {"parse_id": "p", "x": 1}),
                       ("purge", {"before": "2024-02-30"}), ("purge", {"before": "yesterday!"})):
        r = client.post(f"/v1/admin/{kind}", json=body)
        assert r.status_code == 422 and r.json()["error"]["type"] == "RequestValidationError", (kind, body, r.text)
    # The message says what is wrong with the body, not only where.
    r = client.post("/v1/admin/purge", json={"source_keys": []})
    assert "give exactly one of source_keys, root, before" in r.json()["error"]["message"], r.text
    r = client.post("/v1/admin/purge", json={"before": "2024-02-30"})
    assert "before: " in r.json()["error"]["message"] and "day is out of range" in r.json()["error"]["message"], r.text

    class IngestOnly(PipelineAdmin):
        def kinds(self):
            return ("ingest",)

    other = IngestOnly(FabricHome(home.root))
    with live_server(lambda port: create_app(Fabric(home.root), ServerConfig(), port=port, admin=other,
                                             admin_token=token)) as url:
        with httpx.Client(base_url=url, timeout=60, headers={"authorization": f"Bearer {token}"}) as c2:
            r = c2.post("/v1/admin/purge", json={"root": "src"})
            assert r.status_code == 501 and r.json()["error"]["type"] == "NotImplemented"


def test_snapshot_and_restore_into_a_new_home_over_http(served, tmp_path):
    """guards against: a snapshot route that records nothing, or a restore whose home answers
    differently from the one snapshotted."""
    client, token, home, _ = served
    before = client.post("/v1/search", json={"query": "lighthouse tide"}).json()
    assert _texts(before)
    op = _op(client, token, "snapshot", {"note": "over http"})
    assert op["status"] == "succeeded", op
    snapshot_id = op["result"]["snapshot_id"]
    assert op["result"]["release_id"] == home.catalog.current_release_id()
    assert (home.root / "snapshots").is_dir()
    into = tmp_path / "restored"
    op = _op(client, token, "restore", {"snapshot_id": snapshot_id, "into": str(into)})
    assert op["status"] == "succeeded", op
    restored = Fabric(into).search("lighthouse tide")
    assert [(h.citation.source_key, h.text) for h in restored.results] == _texts(before)
    again = _op(client, token, "restore", {"snapshot_id": snapshot_id, "into": str(into)})
    assert again["status"] == "failed" and again["reason"].startswith("restore-refused: ") \
        and "already holds a Fabric home" in again["reason"]
    missing = _op(client, token, "restore", {"snapshot_id": snapshot_id + 100})
    assert missing["status"] == "failed" and "restore-refused" in missing["reason"]
    # In place: nothing came after the snapshot, so nothing is forgotten, and it answers the same.
    here = _op(client, token, "restore", {"snapshot_id": snapshot_id})
    assert here["status"] == "succeeded", here
    assert here["result"]["forgotten"]["sources_forgotten"] == 0 and here["result"]["forgotten"]["parses_forgotten"] == 0
    assert _texts(client.post("/v1/search", json={"query": "lighthouse tide"}).json()) == _texts(before)


def test_purge_over_http_is_a_dagster_run_and_the_text_is_gone(served):
    """guards against: a purge route that skips Dagster (invisible in the UI), that purges a
    source still on disk, or leaves the purged text searchable through the server."""
    client, token, home, src = served
    (src / "secret.txt").write_text(SECRET)
    ingest(src, home)
    assert _texts(client.post("/v1/search", json={"query": "zanzibar vault code"}).json())
    (src / "secret.txt").unlink()
    ingest(src, home)

    refused = _op(client, token, "purge", {"source_keys": ["fs:src/a.txt"]})  # still on disk
    # A refusal in its own words: not labelled a fault of Fabric, nor a Python class name.
    assert refused["status"] == "failed" and refused["reason"].startswith("purge refused: "), refused
    assert _run_status(home, refused["result"]["run_id"]) == dg.DagsterRunStatus.FAILURE
    assert FabricHome(home.root).catalog.source("fs:src/a.txt") is not None

    op = _op(client, token, "purge", {"source_keys": ["fs:src/secret.txt"]})
    assert op["status"] == "succeeded", op
    assert _run_status(home, op["result"]["run_id"]) == dg.DagsterRunStatus.SUCCESS
    assert op["result"]["release_id"] == FabricHome(home.root).catalog.current_release_id()
    assert FabricHome(home.root).catalog.source("fs:src/secret.txt") is None
    for query in ("zanzibar vault code", "copper ledger orchard"):
        hits = _texts(client.post("/v1/search", json={"query": query}).json())
        assert not [t for _, t in hits if "Zanzibar" in t or "4417" in t], hits
    assert _texts(client.post("/v1/search", json={"query": "lighthouse tide"}).json())[0][0] == "fs:src/a.txt"
    # Its own record names it no more (it kept `"source_keys": ["fs:src/secret.txt"]`, hostile trial 8),
    # nor does any file under the home.
    from test_purge import _occurrences

    assert FabricHome(home.root).catalog.operation(op["operation_id"]).params["source_keys"] == ["(purged)"]
    assert _occurrences(home.root, [b"secret.txt"]) == {}


def test_accept_re_parse_and_retry_over_http(served, monkeypatch):
    """guards against: held parses that the server can neither accept nor discard, a re-parse
    route that marks but never runs the parse, a retry that fails on nothing to retry."""
    import fabric_assets.dense.assets as dense_assets

    client, token, home, src = served
    real = dense_assets.vectors_finite_unit_norm
    monkeypatch.setattr(dense_assets, "vectors_finite_unit_norm",
                        lambda v: {"passed": False, "detail": "injected"} if v.shape[0] == 1 else real(v))
    (src / "a.txt").write_text(HARBOUR)
    ingest(src, home)
    monkeypatch.setattr(dense_assets, "vectors_finite_unit_norm", real)
    (held,) = Fabric(home.root).status().held

    wrong = _op(client, token, "discard", {"parse_id": "0" * 16})
    assert wrong["status"] == "failed" and wrong["reason"].startswith("no parse"), wrong
    op = _op(client, token, "accept", {"parse_id": held.parse_id})
    assert op["status"] == "succeeded", op
    assert op["result"]["parse_status"] == "ready"
    assert _run_status(home, op["result"]["run_id"]) == dg.DagsterRunStatus.SUCCESS
    release = FabricHome(home.root).catalog.current_release()
    assert release.manifest["sources"]["fs:src/a.txt"]["parse_id"] == held.parse_id
    hits = _texts(client.post("/v1/search", json={"query": "harbour master herring"}).json())
    assert hits[0] == ("fs:src/a.txt", HARBOUR.strip()) or "harbour" in hits[0][1]

    op = _op(client, token, "re-parse", {"source_key": "fs:src/a.txt"})
    assert op["status"] == "succeeded", op
    assert op["result"]["run_ids"] and op["result"]["failed_runs"] == []
    for run_id in op["result"]["run_ids"]:
        assert _run_status(home, run_id) == dg.DagsterRunStatus.SUCCESS
    assert FabricHome(home.root).catalog.parse_run(held.parse_id).status == "ready"
    unknown = _op(client, token, "re-parse", {"source_key": "fs:src/none.txt"})
    assert unknown["status"] == "failed" and "no present source" in unknown["reason"]

    op = _op(client, token, "retry", {"parse_ids": []})  # nothing failed: nothing to do, no error
    assert op["status"] == "succeeded", op


def test_repair_over_http_re_derives_a_lost_data_file(served):
    """guards against: a home whose chunks data file is lost answering nothing through the server
    until someone reaches a shell; the `repair` route runs `repair_job` (a Dagster run) and the
    re-derivation, and the server answers from the repaired release."""
    import lance

    client, token, home, src = served
    uri = home.layout.tables / "chunks.lance"
    for fragment in lance.dataset(str(uri)).get_fragments():
        (uri / "data" / fragment.data_files()[0].path).unlink()
    assert Fabric(home.root).status().unreadable_tables
    op = _op(client, token, "repair", {})
    assert op["status"] == "succeeded", op
    assert _run_status(home, op["result"]["run_id"]) == dg.DagsterRunStatus.SUCCESS
    assert Fabric(home.root).status().unreadable_tables == ()
    assert _texts(client.post("/v1/search", json={"query": "lighthouse tide"}).json())[0][0] == "fs:src/a.txt"
    assert client.post("/v1/admin/repair", json={"extra": 1}).status_code == 422  # a body it cannot take
