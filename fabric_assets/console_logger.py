"""The console logger of Fabric's Dagster runs: Dagster's colored console logger, less the two
stack traces an interrupt prints.

A Ctrl-C during ``fabric ingest`` (or any in-process run) makes Dagster log the interrupted step's
failure and the run's, each with a full ``DagsterExecutionInterruptedError`` stack trace (~130
lines on the terminal), before the CLI's one line ("error: interrupted. …", exit 130). The run's
event log still records both events; only the console copy is left out.
"""

from __future__ import annotations

import logging

import dagster as dg

#: The error Dagster raises in a step when the process gets SIGINT or SIGTERM.
INTERRUPTED = "DagsterExecutionInterruptedError"


def not_an_interruption(record: logging.LogRecord) -> bool:
    """False for the step and run failures an interrupt causes (logging filter)."""
    return INTERRUPTED not in record.getMessage()


@dg.logger(dg.colored_console_logger.config_schema,
           description="Dagster's colored console logger, without the stack traces of an interrupted run.")
def console_logger(init_context: dg.InitLoggerContext) -> logging.Logger:
    logger = dg.colored_console_logger.logger_fn(init_context)
    logger.addFilter(not_an_interruption)
    return logger
