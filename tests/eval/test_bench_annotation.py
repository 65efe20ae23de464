"""`fabric bench annotate` at tiny sizes: the stub server's answers, the synthetic parse, and the
benchmark's invariants (calls on a first parse, none on a re-parse, every annotation grounded).
Structure only; times are never asserted."""

from __future__ import annotations

import json

import pytest
from conftest import EVAL, need_shared
from typer.testing import CliRunner

from fabric_assets.cli import app
from fabric_assets.measurement.bench_annotate import (
    bench_annotate,
    grounded_rows,
    plan_windows,
    summary_rows,
    windows_table,
)
from fabric_assets.annotations.excerpts import build_excerpts
from fabric_assets.annotations.producer import annotate_parse
from fabric_assets.annotations.prompts import ENTITIES, QUOTES, RELATIONS, STATEMENTS, SUMMARY
from fabric_assets.measurement.chat_server import StubChatServer, stub_answer
from fabric_resources.annotator import AnnotationMemo, ChatClient
from fabric_resources.config import FabricConfig
from fabric_resources.identity import text_hash
from fabric_resources.schema import FRAGMENT_SEPARATOR

runner = CliRunner()

PARAGRAPHS = [
    "experimental investigation of the aerodynamics of a wing in a slipstream . an experimental study "
    "of a wing in a propeller slipstream was made . the results were intended in part as an evaluation basis .",
    "Ludwig Prandtl described the boundary layer in 1904. It changed fluid dynamics for good! short one.",
    "simple shear flow past a flat plate in an incompressible fluid of small viscosity .",
]


def test_stub_answers_follow_each_stage_schema_and_copy_the_excerpt():
    """guards against: stub answers the producer would reject (schema) or drop (ungrounded), which would
    make the benchmark time retries instead of calls."""
    excerpt = FRAGMENT_SEPARATOR.join(PARAGRAPHS[:2])
    entities = ENTITIES.output.model_validate(stub_answer(ENTITIES.name, {"excerpt": excerpt}))
    assert [e.name for e in entities.entities] == ["Ludwig", "Prandtl", "It"]
    lower = ENTITIES.output.model_validate(stub_answer(ENTITIES.name, {"excerpt": PARAGRAPHS[2]}))
    assert lower.entities and all(e.name in PARAGRAPHS[2] for e in lower.entities)
    statements = STATEMENTS.output.model_validate(stub_answer(STATEMENTS.name, {"excerpt": excerpt})).statements
    assert len(statements) == 2 and all(s in excerpt for s in statements)
    numbered = [{"index": i, "text": s} for i, s in enumerate(statements)]
    relations = RELATIONS.output.model_validate(
        stub_answer(RELATIONS.name, {"excerpt": excerpt, "statements": numbered})).relations
    assert [r.statement_index for r in relations] == [0, 1]
    listed = [{"index": i, "statement_index": r.statement_index, "subject": r.subject, "predicate": r.predicate,
               "object": r.object} for i, r in enumerate(relations)]
    supports = QUOTES.output.model_validate(
        stub_answer(QUOTES.name, {"excerpt": excerpt, "statements": numbered, "relations": listed})).supports
    assert [q for s in supports for q in s.quotes] == statements
    summary = SUMMARY.output.model_validate(stub_answer(SUMMARY.name, {"excerpt": excerpt})).summary
    assert summary and summary in excerpt
    with pytest.raises(KeyError):
        stub_answer("fabric_unknown", {"excerpt": excerpt})


def test_windows_reproduce_their_text_and_a_reparse_keeps_texts_under_new_ids():
    """guards against: synthetic windows that break the storage contract (fragments that do not
    reproduce the text), or a 're-parse' whose texts differ (the memo would then be bypassed honestly)."""
    plan = plan_windows(PARAGRAPHS, 4, window_chars=80)
    assert len(plan) == 4
    a, units_a = windows_table("pa", PARAGRAPHS, plan)
    b, units_b = windows_table("pb", PARAGRAPHS, plan)
    assert a.column("text").to_pylist() == b.column("text").to_pylist()
    assert not set(units_a) & set(units_b)
    assert not set(a.column("window_id").to_pylist()) & set(b.column("window_id").to_pylist())
    for row in a.to_pylist():
        assert row["text"] == FRAGMENT_SEPARATOR.join(units_a[f["unit_id"]][f["start_char"]:f["end_char"]]
                                                      for f in row["fragments"])
    assert len(build_excerpts(a, 2)) == 2
    with pytest.raises(ValueError, match="windows"):
        plan_windows(PARAGRAPHS, 1000, window_chars=80)


def test_grounding_check_rejects_a_span_that_is_not_window_text(tmp_path):
    """guards against: a grounding check that passes anything (the benchmark's 'grounded' column would lie)."""
    windows, _ = windows_table("p", PARAGRAPHS, plan_windows(PARAGRAPHS, 2, window_chars=120))
    with StubChatServer() as srv, AnnotationMemo(tmp_path / "memo.sqlite3") as memo:
        config = FabricConfig.model_validate({"annotation": {"enabled": True, "endpoint": {
            "base_url": srv.base_url, "model": "stub-model"}}})
        table, stats = annotate_parse(windows, config, memo, ChatClient.from_config(config.annotation))
    assert stats.calls > 0 and stats.dropped_ungrounded.total == 0 and not stats.failures
    assert grounded_rows(table, windows) == table.num_rows > 0
    rows = table.to_pylist()
    rows[0]["support"][0]["text_hash"] = text_hash("not in the window")
    tampered = type(table).from_pylist(rows, schema=table.schema)
    assert grounded_rows(tampered, windows) == table.num_rows - 1


@pytest.mark.parametrize("server_process", [True, False], ids=["server-process", "server-thread"])
def test_bench_annotate_first_parse_calls_reparse_hits_the_memo_and_everything_is_grounded(server_process):
    """guards against: a re-parse that calls the server (memo keyed by unit IDs), counts that disagree
    with what the server saw, ungrounded or dropped annotations, a baseline not at concurrency 1."""
    need_shared(EVAL / "cranfield")
    result = bench_annotate(20, 0.0, 4, shared=EVAL.parent, baseline_excerpts=5, server_process=server_process)
    first, reparse, baseline = result["first"], result["reparse"], result["baseline"]
    assert result["windows"] == 20 * result["excerpt_windows"]
    assert first["excerpts"] == 20 and first["chains"] == 60
    assert first["calls"] == first["server_requests"] >= 3 * 20  # at least entities, statements, summary
    assert first["memo_hits"] == 0 and first["failures"] == 0 and first["dropped_ungrounded"] == 0
    assert first["malformed_retries"] == first["call_retries"] == 0
    assert first["prompt_tokens"] > 0 and first["completion_tokens"] > 0 and first["replies_without_usage"] == 0
    assert 1 <= first["server_max_in_flight"] <= 4
    assert first["annotations_grounded"] == first["annotations"] > 0
    assert reparse["calls"] == reparse["server_requests"] == 0
    assert reparse["memo_hits"] == reparse["chains"] == 60 and reparse["memo_hit_rate"] == 1.0
    assert reparse["annotations_grounded"] == reparse["annotations"] == first["annotations"]
    assert result["memo_entries"] == 60
    assert baseline["excerpts"] == 5 and baseline["concurrency"] == 1 and baseline["server_max_in_flight"] == 1
    assert baseline["calls"] > 0 and baseline["annotations_grounded"] == baseline["annotations"]
    assert result["verdicts"]["reparse_makes_no_calls"] is True
    assert result["verdicts"]["overhead_within_target"] is None  # no delay: no server-bound figure
    assert first["ratio_wall_to_lower_bound"] is None and first["overhead_ms_per_call"] is not None
    assert [r["run"] for r in summary_rows(result)] == ["first parse", "re-parse", "baseline"]
    json.dumps(result)


def test_cli_bench_annotate_prints_json():
    """guards against: the command not wiring its options through, or printing something that is not JSON."""
    need_shared(EVAL / "cranfield")
    out = runner.invoke(app, ["bench", "annotate", "--excerpts", "4", "--delay", "0.001", "--concurrency", "2",
                              "--baseline-excerpts", "0", "--shared", str(EVAL.parent), "--json"])
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["excerpts"] == 4 and result["concurrency"] == 2 and result["delay_s"] == 0.001
    assert "baseline" not in result and result["reparse"]["calls"] == 0
    assert result["first"]["lower_bound_s"] == pytest.approx(result["first"]["calls"] * 0.001 / 2, abs=1e-4)


def test_cli_bench_annotate_says_why_it_skips_without_shared(tmp_path):
    """guards against: a traceback when ../shared is absent."""
    missing = tmp_path / "no-shared"
    out = runner.invoke(app, ["bench", "annotate", "--excerpts", "2", "--shared", str(missing)])
    assert out.exit_code == 2, out.output
    assert "skipped" in out.output and "Traceback" not in out.output
