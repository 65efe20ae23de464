"""The Dagster instance of a home: the ``dagster.yaml`` Fabric writes under ``<home>/dagster``.

The default: telemetry off; SQLite run, event-log and schedule storage in that folder, the event
log through :class:`fabric_assets.event_log.FabricSqliteEventLogStorage` (Dagster's
SQLite event log on the same files, with batched writes; named by module path, so this module
still imports no Dagster), and step output captured by
:class:`fabric_assets.compute_logs.FabricComputeLogManager` (Dagster's local one, whose children a
Ctrl-C leaves to it). ``storage.dagster`` in ``config.json`` can put the instance on
PostgreSQL (every host that runs a daemon, a webserver or run workers for the home points at the
same database) and turn on the queued run coordinator with a limit, so runs launched by sensors,
backfills or the UI go several at once. No Dagster import here: this only writes YAML (JSON
strings are YAML strings).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from fabric_resources.catalog.postgres import sqlalchemy_url
from fabric_resources.config import StorageConfig

#: First line of every file Fabric writes; a ``dagster.yaml`` without it is the user's and is left alone.
MARKER = "# Written by Fabric"


def _sqlite_event_log(dagster_home: Path) -> list[str]:
    # Dagster's own default place for the shards under `dagster_home`, written as an absolute path:
    # `DagsterInstance.from_config(folder)` sets no DAGSTER_HOME, so `{env: DAGSTER_HOME}` could name
    # another home's event log. A home that moves is rewritten the next time Fabric opens it.
    return ["event_log_storage:", "  module: fabric_assets.event_log",
            "  class: FabricSqliteEventLogStorage", "  config:",
            f"    dagster_home: {json.dumps(str(Path(dagster_home).resolve()))}"]


def instance_yaml(storage: StorageConfig, dagster_home: Path) -> str:
    """The ``dagster.yaml`` text for ``storage``, for the instance folder ``dagster_home``."""
    dagster = storage.dagster
    default = dagster.backend == "sqlite" and dagster.max_concurrent_runs is None
    header = ("# Written by Fabric. The instance lives under the Fabric home." if default
              else f"{MARKER} from config.json (storage.dagster); rewritten when that changes.")
    lines = [header, "telemetry:", "  enabled: false", "nux:", "  enabled: false"]
    if dagster.backend == "postgres":
        # Run, event-log and schedule storage all in this database (dagster-postgres).
        lines += ["storage:", "  postgres:", f"    postgres_url: {json.dumps(sqlalchemy_url(storage.dagster_url))}"]
    else:
        lines += _sqlite_event_log(dagster_home)
    # Dagster's default compute-log folder, through a manager whose `tail` children a Ctrl-C does
    # not end with a traceback (fabric_assets.compute_logs).
    lines += ["compute_logs:", "  module: fabric_assets.compute_logs", "  class: FabricComputeLogManager",
              "  config:", f"    base_dir: {json.dumps(str(Path(dagster_home).resolve() / 'storage'))}"]
    if dagster.max_concurrent_runs is not None:
        # The queued coordinator (Dagster 1.13's default, named so it stays so) takes its limit from
        # `concurrency > runs`; the daemon dequeues runs up to it.
        lines += ["run_coordinator:", "  module: dagster.core.run_coordinator", "  class: QueuedRunCoordinator",
                  "concurrency:", "  runs:", f"    max_concurrent_runs: {dagster.max_concurrent_runs}"]
    return "\n".join(lines) + "\n"


def write_instance_yaml(dagster_home: Path, storage: StorageConfig) -> bool:
    """Write ``<dagster_home>/dagster.yaml`` for ``storage`` unless it already says that or is not
    Fabric's (no :data:`MARKER` line); True if written. Atomic (a reader sees the old or the new
    file); owner-only when it names a database, whose URL may carry a password."""
    path = Path(dagster_home) / "dagster.yaml"
    text = instance_yaml(storage, dagster_home)
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = None
    if current is not None and (current == text or not current.startswith(MARKER)):
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".dagster.yaml.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        if storage.dagster.backend == "sqlite":
            os.chmod(tmp, 0o644)  # mkstemp makes 0600; the default file was always world-readable
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True
