"""The ASGI guard in front of `fabric serve` (fabric_query/server/guard.py), over a real uvicorn on
loopback: what it answers before any route runs. A home with no release is enough (nothing here
searches), and the query models are not loaded (``load_models`` answers at once)."""

from __future__ import annotations

import json

import httpx
import pytest
from live_server import live_server, wait_ready

from fabric_query import Fabric
from fabric_query.server.app import create_app
from fabric_resources.config import ServerConfig
from fabric_resources.home import FabricHome

MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
LIST_TOOLS = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = FabricHome(tmp_path_factory.mktemp("guard") / "home")
    home.catalog  # an empty catalog: a home Fabric opens, with no release
    fabric = Fabric(home.root)
    with live_server(lambda port: create_app(fabric, ServerConfig(), port=port, load_models=lambda f: {})) as url:
        with httpx.Client(base_url=url, timeout=10) as client:
            wait_ready(client)
            yield client


def test_a_get_on_mcp_is_405_not_a_stream_held_open_for_good(server):
    """guards against (hostile trial 10a): the MCP SDK answering a GET with an event stream that
    stayed open for good though this stateless server never sends on it; 300 such connections were
    all still held 40 s later (past every read deadline), each ~100 KB, towards the process's file
    descriptor limit. Without the guard's answer this read times out (the stream never ends)."""
    for accept in ("text/event-stream", "application/json, text/event-stream", "*/*"):
        r = server.get("/mcp", headers={"accept": accept})
        assert r.status_code == 405, r.text
        assert r.headers["allow"] == "POST" and r.headers["content-type"] == "application/json"
        assert r.json()["error"]["code"] == -32600 and "POST each JSON-RPC message" in r.json()["error"]["message"]
    tools = server.post("/mcp", content=LIST_TOOLS, headers=MCP_HEADERS)  # the transport MCP clients use
    assert tools.status_code == 200 and {t["name"] for t in tools.json()["result"]["tools"]} >= {"search", "resolve"}
