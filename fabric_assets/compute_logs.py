"""Dagster's local compute-log manager, with the children it starts deaf to Ctrl-C.

Why: while a step runs, Dagster's ``LocalComputeLogManager`` copies the captured stdout and
stderr back to the terminal through two child processes per stream, a ``tail -F`` and Dagster's
``watch_orphans.py`` script (which ends the ``tail`` if this process dies). A Ctrl-C in the
terminal reaches the whole foreground process group, children included, and each
``watch_orphans.py`` died of it with a ``KeyboardInterrupt`` traceback printed under ``fabric
ingest``'s own short "interrupted" message.

:class:`FabricComputeLogManager` is the same manager on the same files (Dagster's default folder,
``<dagster home>/storage``); only its children start with SIGINT blocked. They still end as before:
Dagster terminates them (SIGTERM) when the step's capture ends, and the watcher ends the ``tail``
when this process dies. This process keeps SIGINT: the block is lifted as soon as they are started,
and a Ctrl-C that came meanwhile is delivered then (a blocked signal stays pending). It is named in
the ``dagster.yaml`` Fabric writes (:mod:`fabric_resources.dagster_instance`).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

from dagster._core.storage.local_compute_log_manager import LocalComputeLogManager  # @public, not exported at the top


class FabricComputeLogManager(LocalComputeLogManager):
    """Dagster's ``LocalComputeLogManager`` whose mirroring children ignore the terminal's Ctrl-C
    (see the module docstring). Config: Dagster's (``base_dir``, ``polling_timeout``)."""

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> FabricComputeLogManager:
        return cls(inst_data=inst_data, **config_value)

    @contextmanager
    def capture_logs(self, log_key: Sequence[str]) -> Iterator[object]:
        with ExitStack() as stack:
            # A child inherits the blocked-signal mask through fork and exec, and Python leaves it as it finds it.
            before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                captured = stack.enter_context(super().capture_logs(log_key))
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, before)
            yield captured
