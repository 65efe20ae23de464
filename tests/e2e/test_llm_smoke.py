"""Optional smoke test against a real OpenAI-compatible chat endpoint (llama.cpp, vLLM, …).

Runs only when ``FABRIC_LLM_BASE_URL`` (e.g. ``http://127.0.0.1:8000/v1``) and ``FABRIC_LLM_MODEL``
are set; ``FABRIC_LLM_API_KEY_FILE`` (owner-only) is optional. It ingests one short document with
annotation on and checks that calls were made, whatever was stored is grounded (its spans resolve
to the exact unit text), and search still answers.
"""

from __future__ import annotations

import json
import os

import pytest
from conftest import ingest

BASE_URL = os.environ.get("FABRIC_LLM_BASE_URL")
MODEL = os.environ.get("FABRIC_LLM_MODEL")

pytestmark = pytest.mark.skipif(not (BASE_URL and MODEL),
                                reason="set FABRIC_LLM_BASE_URL and FABRIC_LLM_MODEL to run against a real LLM server")


def test_annotation_against_a_real_endpoint(fabric_home, tmp_path):
    from fabric_query.api import Fabric
    from fabric_resources.identity import text_hash

    endpoint = {"base_url": BASE_URL, "model": MODEL, "timeout_s": 300}
    if os.environ.get("FABRIC_LLM_API_KEY_FILE"):
        endpoint["api_key_file"] = os.environ["FABRIC_LLM_API_KEY_FILE"]
    fabric_home.layout.config_file.write_text(json.dumps({"annotation": {"enabled": True, "endpoint": endpoint}}))
    src = tmp_path / "docs"
    src.mkdir()
    (src / "ada.txt").write_text(
        "Ada Lovelace worked with Charles Babbage on the Analytical Engine.\n\n"
        "Lovelace published the first algorithm intended for the engine in 1843.\n", encoding="utf-8")
    summary = ingest(src, fabric_home)
    assert summary.annotation_run_ids, "annotation did not run"
    units = fabric_home.tables.read("units", columns=["unit_id", "text"]).to_pydict()
    text_of = dict(zip(units["unit_id"], units["text"]))
    rows = fabric_home.tables.read("annotations").to_pylist()
    for row in rows:
        for span in row["support"]:
            assert text_hash(text_of[span["unit_id"]][span["start_char"]:span["end_char"]]) == span["text_hash"]
    pack = Fabric(fabric_home.root).search("Lovelace algorithm")
    assert pack.results
