"""The console logger of Fabric's Dagster runs (fabric_assets/console_logger.py)."""

from __future__ import annotations

import dagster as dg

from fabric_assets.console_logger import console_logger
from fabric_assets.definitions import build_definitions
from fabric_resources.config import FabricConfig
from fabric_resources.dagster_resources import FAKE_MODELS

RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _run(error: Exception, capfd) -> str:
    @dg.op
    def step():
        raise error

    @dg.job(logger_defs={"console": console_logger})
    def one_step():
        step()

    assert not one_step.execute_in_process(raise_on_error=False, run_config=RUN_CONFIG).success
    return capfd.readouterr().err


def test_an_interrupted_run_prints_no_stack_trace_but_a_failing_step_does(capfd):
    """guards against (hostile trial 11c): Ctrl-C of `fabric ingest` printing two Dagster stack
    traces of DagsterExecutionInterruptedError (~130 lines) above the CLI's one line and exit 130."""
    interrupted = _run(dg.DagsterExecutionInterruptedError(), capfd)
    assert "DagsterExecutionInterruptedError" not in interrupted and "Stack Trace" not in interrupted, interrupted
    failed = _run(ValueError("a fault of Fabric"), capfd)
    assert "STEP_FAILURE" in failed and "a fault of Fabric" in failed


def test_fabric_runs_use_it():
    defs = build_definitions(FabricConfig(), FAKE_MODELS, "/nonexistent-home")
    assert defs.loggers["console"] is console_logger
