"""``fabric bench scale``: the Dagster side at many parse partitions.

``N`` tiny distinct documents (two short paragraphs of real English text each,
:func:`fabric_assets.measurement.scaling_corpus.tiny_documents`) are registered as a root
of a fresh home, then:

(a) **sensor**: one evaluation of ``source_change_sensor`` through Dagster's
    ``build_sensor_context`` with the home's real (SQLite) ``DagsterInstance``
    — the first tick scans and acquires every file; its run requests and the
    dynamic partitions it asks for are counted, then applied as the daemon
    would (``add_dynamic_partitions``, timed). A second tick before any run (it
    re-requests the pending work under the same run keys) and a steady tick
    after activation (nothing to do) are timed too.
(b) **runs**: the parse runs executed in-process (:func:`fabric_assets.ingest.run_pending`,
    the path ``fabric ingest`` uses; MiniLM loaded beforehand) and the activation run. Time per
    partition, and Dagster's share read off its own event log: the run wall
    time outside steps (run creation with its planned events, launch,
    teardown) plus, inside each step, the time after its first
    materialization event (writing one materialization event per partition,
    and the step's check summaries).
(c) **UI**: ``dagster-webserver`` on loopback for the home's workspace
    (started under its own session, stopped with SIGINT to its process group);
    the start-up time and a few GraphQL queries the UI issues — the asset
    list, the ``chunks`` asset's partition counts, its partition keys and its
    per-partition statuses, the runs list — each timed cold and warm, with
    the partition count the UI reports.

Times are measured, never asserted.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import httpx
import numpy as np

from fabric_assets.ingest import dagster_instance, run_activation, run_pending
from fabric_assets.measurement.bench_query import machine
from fabric_assets.measurement.scaling_corpus import load_english_pool, tiny_documents, write_documents
from fabric_assets.sensors import source_change_sensor
from fabric_resources.dagster_resources import FabricHomeResource
from fabric_resources.home import FabricHome
from fabric_resources.models.embedder import shared_embedder

Log = Callable[[str], None]
WORKSPACE = Path(__file__).resolve().parents[2] / "workspace.yaml"

#: GraphQL queries the Dagster UI issues on the asset pages, by name.
UI_QUERIES: dict[str, str] = {
    "asset_nodes": "{ assetNodes { assetKey { path } groupName } }",
    "chunks_partition_stats": """{ assetNodeOrError(assetKey: {path: ["chunks"]}) {
        ... on AssetNode { partitionStats { numPartitions numMaterialized numFailed } } } }""",
    "chunks_partition_keys": """{ assetNodeOrError(assetKey: {path: ["chunks"]}) {
        ... on AssetNode { partitionKeysByDimension { name partitionKeys } } } }""",
    "chunks_partition_statuses": """{ assetNodeOrError(assetKey: {path: ["chunks"]}) {
        ... on AssetNode { assetPartitionStatuses {
            ... on DefaultPartitionStatuses { materializedPartitions failedPartitions } } } } }""",
    "runs": "{ runsOrError(limit: 50) { ... on Runs { results { runId status } } } }",
}


def _quiet(_: str) -> None:
    pass


def _sensor_tick(instance: dg.DagsterInstance, home: FabricHome) -> tuple[float, dg.SensorResult]:
    ctx = dg.build_sensor_context(instance=instance, resources={"fabric": FabricHomeResource(home=str(home.root))})
    t0 = time.perf_counter()
    result = source_change_sensor(ctx)
    return time.perf_counter() - t0, result


def dagster_share(instance: dg.DagsterInstance, run_ids: list[str], wall_s: float) -> dict:
    """Split ``wall_s`` (the wall time of ``run_ids``, run one after another) by Dagster's event log.

    Returns seconds: ``steps`` (sum of step durations), ``outside_steps``
    (wall − steps), ``in_step_after_first_materialization``, ``dagster``
    (the two Dagster parts), ``work`` (wall − dagster), and ``events``.
    """
    steps_s = 0.0
    after_mat = 0.0
    events = 0
    for run_id in run_ids:
        stats = {s.step_key: s for s in instance.get_run_step_stats(run_id)}
        steps_s += sum((s.end_time or 0) - (s.start_time or 0) for s in stats.values())
        first_mat: dict[str, float] = {}
        for entry in instance.all_logs(run_id):
            events += 1
            de = entry.dagster_event
            if de is not None and de.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION and entry.step_key:
                first_mat.setdefault(entry.step_key, entry.timestamp)
        for key, ts in first_mat.items():
            end = stats[key].end_time if key in stats else None
            if end:
                after_mat += max(0.0, end - ts)
    outside = max(0.0, wall_s - steps_s)
    dagster = outside + after_mat
    return {"steps": round(steps_s, 2), "outside_steps": round(outside, 2),
            "in_step_after_first_materialization": round(after_mat, 2), "dagster": round(dagster, 2),
            "work": round(wall_s - dagster, 2), "events": events}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _summary(name: str, data: dict) -> dict:
    """The figure each UI query shows (partition counts), to check the UI sees every partition."""
    node = data.get("assetNodeOrError") or {}
    if name == "asset_nodes":
        return {"assets": len(data.get("assetNodes", []))}
    if name == "chunks_partition_stats":
        return dict(node.get("partitionStats") or {})
    if name == "chunks_partition_keys":
        return {"partition_keys": sum(len(d["partitionKeys"]) for d in node.get("partitionKeysByDimension", []))}
    if name == "chunks_partition_statuses":
        st = node.get("assetPartitionStatuses") or {}
        return {"materialized": len(st.get("materializedPartitions", [])), "failed": len(st.get("failedPartitions", []))}
    if name == "runs":
        return {"runs": len((data.get("runsOrError") or {}).get("results", []))}
    return {}


def probe_ui(home: FabricHome, *, repeat: int = 3, startup_timeout_s: float = 300, query_timeout_s: float = 300,
             log: Log = _quiet) -> dict:
    """Start ``dagster-webserver`` on this home, time its start-up and ``UI_QUERIES``, stop it.

    Each query runs ``repeat`` times: the first is reported as ``cold_ms``, the
    median of the others as ``warm_ms``. ``server_info_ms`` is a plain GET.

    Raises
    ------
    RuntimeError
        If the server does not answer within ``startup_timeout_s`` or a query returns GraphQL errors.
    """
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DAGSTER_HOME": str(home.layout.dagster_home), "FABRIC_HOME": str(home.root),
           "HF_HUB_OFFLINE": "1"}
    exe = Path(sys.executable).with_name("dagster-webserver")
    cmd = [str(exe), "-w", str(WORKSPACE), "-h", "127.0.0.1", "-p", str(port)]
    log_path = home.root / "webserver.log"
    out: dict = {"port": port, "queries": {}}
    with log_path.open("wb") as log_file:
        # Its own session: SIGINT reaches the webserver and its code-server child together.
        proc = subprocess.Popen(cmd, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
                                cwd=WORKSPACE.parent)
        try:
            t0 = time.perf_counter()
            with httpx.Client(timeout=query_timeout_s) as client:
                while True:
                    try:
                        if client.get(f"{base}/server_info", timeout=5).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    if proc.poll() is not None or time.perf_counter() - t0 > startup_timeout_s:
                        raise RuntimeError(f"dagster-webserver did not start (see {log_path})")
                    time.sleep(0.5)
                out["startup_s"] = round(time.perf_counter() - t0, 1)
                log(f"UI up after {out['startup_s']} s on {base}")
                t = time.perf_counter()
                client.get(f"{base}/server_info").raise_for_status()
                out["server_info_ms"] = round((time.perf_counter() - t) * 1000, 1)
                for name, query in UI_QUERIES.items():
                    times, data = [], {}
                    for _ in range(max(1, repeat)):
                        t = time.perf_counter()
                        resp = client.post(f"{base}/graphql", json={"query": query})
                        times.append((time.perf_counter() - t) * 1000)
                        resp.raise_for_status()
                        body = resp.json()
                        if body.get("errors"):
                            raise RuntimeError(f"GraphQL {name}: {body['errors'][:2]}")
                        data = body["data"]
                    out["queries"][name] = {
                        "cold_ms": round(times[0], 1),
                        "warm_ms": round(float(np.median(times[1:])), 1) if len(times) > 1 else None,
                        "response_bytes": len(resp.content),
                        **_summary(name, data),
                    }
                    log(f"UI {name}: {out['queries'][name]}")
        finally:
            stop_process_group(proc)
    return out


def stop_process_group(proc: subprocess.Popen, timeout_s: float = 30) -> None:
    """SIGINT to the process group ``proc`` leads (started with ``start_new_session``); SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=timeout_s)
    except ProcessLookupError:
        pass


def bench_scale(
    shared: Path,
    n_documents: int = 10_000,
    *,
    work_dir: Path | None = None,
    ui: bool = True,
    ui_repeat: int = 3,
    seed: int = 0,
    stock_event_log: bool = False,
    log: Log = _quiet,
) -> dict:
    """Run (a), (b) and (c) of the module docstring on ``n_documents`` tiny documents.

    ``work_dir`` keeps the corpus and home (default: a scratch folder, removed after).
    ``stock_event_log`` runs the home on Dagster's own SQLite event log instead of Fabric's
    (:mod:`fabric_assets.event_log`), the baseline of that storage: its ``dagster.yaml`` is then
    written as a user's own file, which Fabric leaves alone.

    Raises
    ------
    SharedCorpusMissing
        If ``shared`` lacks the English sources.
    """
    pool = load_english_pool(shared)
    scratch = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="fabric-scale-"))
    try:
        if (scratch / "home").exists():
            raise FileExistsError(f"{scratch / 'home'} exists: bench scale needs a fresh home")
        docs = tiny_documents(pool.paragraphs, n_documents, seed=seed)
        corpus = write_documents(docs, scratch / "notes")
        home = FabricHome(scratch / "home")
        if stock_event_log:
            (home.layout.dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        home.catalog.register_root(corpus)
        instance = dagster_instance(home)
        result: dict = {"benchmark": "scale", "machine": machine(), "documents": n_documents,
                        "document_bytes_mean": round(sum(len(d.text.encode()) for d in docs) / max(1, len(docs)), 1),
                        "partitions_per_run": home.config.sources.partitions_per_run,
                        "event_log": type(instance.event_log_storage).__name__}

        log(f"(a) sensor tick over {n_documents} new files")
        first_s, first = _sensor_tick(instance, home)
        keys = [k for req in first.dynamic_partitions_requests for k in req.partition_keys]
        t0 = time.perf_counter()
        if keys:
            instance.add_dynamic_partitions("parses", keys)
        add_s = time.perf_counter() - t0
        second_s, second = _sensor_tick(instance, home)
        result["sensor"] = {
            "first_tick_s": round(first_s, 2),
            "run_requests": len(first.run_requests),
            "parse_run_requests": sum(1 for r in first.run_requests if r.job_name == "parse_job"),
            "dynamic_partitions_added": len(keys),
            "add_dynamic_partitions_s": round(add_s, 2),
            "second_tick_before_runs_s": round(second_s, 2),
            "second_tick_run_requests": len(second.run_requests),
            "second_tick_partitions_added": sum(len(r.partition_keys) for r in second.dynamic_partitions_requests),
        }
        log(f"(a) {result['sensor']}")

        log(f"(b) executing the parse runs for {len(keys)} partitions")
        shared_embedder(home.config.dense.batch_size).encode_passages(["warm-up"])  # model load is not per partition
        t0 = time.perf_counter()
        run_ids, failed = run_pending(home, instance, keys)
        runs_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        activation_id, activation = run_activation(home, instance)
        activation_s = time.perf_counter() - t0
        share = dagster_share(instance, run_ids, runs_s)
        n = max(1, len(keys))
        result["runs"] = {
            "partitions": len(keys),
            "parse_runs": len(run_ids),
            "failed_runs": len(failed),
            "parse_runs_s": round(runs_s, 1),
            "activation_s": round(activation_s, 1),
            "release_published": bool(activation.get("published", False)),
            "ms_per_partition": round(runs_s / n * 1000, 1),
            "dagster_ms_per_partition": round(share["dagster"] / n * 1000, 1),
            "work_ms_per_partition": round(share["work"] / n * 1000, 1),
            "dagster_share": round(share["dagster"] / runs_s, 3) if runs_s else 0.0,
            "events_per_partition": round(share["events"] / n, 1),
            "breakdown_s": share,
            "activation_run_id": activation_id,
        }
        log(f"(b) {result['runs']}")
        steady_s, steady = _sensor_tick(instance, home)
        result["sensor"]["steady_tick_s"] = round(steady_s, 2)
        result["sensor"]["steady_tick_run_requests"] = len(steady.run_requests)
        result["registered_partitions"] = len(instance.get_dynamic_partitions("parses"))
        if ui:
            log("(c) starting dagster-webserver")
            result["ui"] = probe_ui(home, repeat=ui_repeat, log=log)
        return result
    finally:
        if work_dir is None:
            shutil.rmtree(scratch, ignore_errors=True)


def summary_rows(result: dict) -> list[dict[str, str]]:
    """The headline figures as (figure, value) rows."""
    s, r = result["sensor"], result["runs"]
    rows = [
        ("documents = parse partitions", f"{result['documents']:,} = {result['registered_partitions']:,}"),
        ("Dagster event log", result.get("event_log", "?")),
        ("sensor first tick (scan + plan)", f"{s['first_tick_s']} s → {s['parse_run_requests']} parse run requests, "
                                           f"{s['dynamic_partitions_added']:,} partitions"),
        ("add_dynamic_partitions", f"{s['add_dynamic_partitions_s']} s"),
        ("sensor tick, pending work", f"{s['second_tick_before_runs_s']} s ({s['second_tick_run_requests']} requests)"),
        ("sensor tick, steady", f"{s['steady_tick_s']} s ({s['steady_tick_run_requests']} requests)"),
        ("parse runs", f"{r['parse_runs']} runs, {r['parse_runs_s']} s, {r['failed_runs']} failed"),
        ("per partition", f"{r['ms_per_partition']} ms (Dagster {r['dagster_ms_per_partition']} ms, "
                          f"work {r['work_ms_per_partition']} ms; Dagster share {r['dagster_share']:.0%})"),
        ("events per partition", str(r["events_per_partition"])),
        ("activation", f"{r['activation_s']} s (published: {r['release_published']})"),
    ]
    ui = result.get("ui")
    if ui:
        rows.append(("UI start-up", f"{ui['startup_s']} s; GET /server_info {ui['server_info_ms']} ms"))
        for name, q in ui["queries"].items():
            facts = {k: v for k, v in q.items() if k not in ("cold_ms", "warm_ms", "response_bytes")}
            rows.append((f"UI {name}", f"cold {q['cold_ms']} ms, warm {q['warm_ms']} ms, "
                                       f"{q['response_bytes']:,} B {facts}"))
    return [{"figure": k, "value": v} for k, v in rows]
