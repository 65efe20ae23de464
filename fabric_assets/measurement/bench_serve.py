"""``fabric bench serve``: the HTTP API against the in-process Python API, and a cold CLI search
with and without a server, on one home in one run.

1. **In-process**: this process opens the home (:class:`fabric_query.Fabric`), warms every query
   once, then runs ``requests`` searches at concurrency 1, 4 and 16 (threads calling ``search``).
2. **HTTP**: a ``fabric serve --port 0`` child process on the same home (found through
   ``<home>/server.json``, as the CLI finds it) answers the same searches at the same
   concurrencies, each client thread with its own keep-alive connection (httpx).
3. **Cold CLI**: ``fabric search`` as a new process, ``cli_runs`` times with the server up
   (answered through it) and again with ``FABRIC_USE_SERVER=0`` (in-process, as before the server).

4. **Paired, concurrency 1**: ``requests`` rounds, each one search in-process and the same search
   over HTTP back to back (the order alternating), so both see the same machine load; HTTP's
   overhead is the median of the per-round differences. On a shared machine the blocks of step 1
   and 2 run minutes apart under different load, so their difference is not the overhead.

Reported: per concurrency p50/p95 (ms) and throughput (searches/s) of both paths, HTTP status
counts (503s are the gate refusing, the only non-200 answer allowed), HTTP's p50 overhead at
concurrency 1 (paired), and the CLI's p50/p95 wall time either way. The issue's targets are printed beside
the figures (HTTP adds ≤ 5 ms at p50, concurrency 1; CLI through a server ≤ 150 ms p50; no request
errors at concurrency 16). Times are measured, never asserted.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from fabric_assets.measurement.query_latency import DEFAULT_QUERIES, percentiles
from fabric_query.api import Fabric
from fabric_query.server.discovery import read_server_file

CONCURRENCY = (1, 4, 16)
TARGET_HTTP_OVERHEAD_P50_MS = 5.0
TARGET_CLI_SERVER_P50_MS = 150.0
# The console script a user types (its fast path included), else the same entry point through -m.
_SCRIPT = Path(sys.executable).with_name("fabric")
_FABRIC = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "fabric_assets.cli"]


def _run_load(call, queries: list[str], requests: int, concurrency: int) -> tuple[list[float], float, dict[int, int]]:
    """``requests`` calls spread over ``concurrency`` threads: latencies (ms), wall s, status counts."""
    work = [queries[i % len(queries)] for i in range(requests)]
    statuses: dict[int, int] = {}
    lock = threading.Lock()

    def one(q: str) -> float:
        started = time.perf_counter()
        status = call(q)
        with lock:
            statuses[status] = statuses.get(status, 0) + 1
        return (time.perf_counter() - started) * 1000

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        latencies = list(pool.map(one, work))
    return latencies, time.perf_counter() - started, statuses


def _paired(local, remote, queries: list[str], rounds: int) -> dict:
    """Each round: the same query in-process and over HTTP back to back, the order alternating;
    p50 of each path and the median and p95 of the per-round difference (HTTP minus in-process), ms."""
    local_ms, remote_ms = [], []
    for i in range(rounds):
        q = queries[i % len(queries)]
        pair = [(local, local_ms), (remote, remote_ms)]
        for call, sink in (pair if i % 2 == 0 else pair[::-1]):
            started = time.perf_counter()
            call(q)
            sink.append((time.perf_counter() - started) * 1000)
    differences = percentiles([r - loc for r, loc in zip(remote_ms, local_ms)])
    return {"in_process_p50_ms": round(percentiles(local_ms)["p50"], 2), "http_p50_ms": round(percentiles(remote_ms)["p50"], 2),
            "overhead_p50_ms": round(differences["p50"], 2), "overhead_p95_ms": round(differences["p95"], 2)}


def _summary(latencies: list[float], wall_s: float, statuses: dict[int, int] | None = None) -> dict:
    p = percentiles(latencies)
    out = {"p50_ms": round(p["p50"], 2), "p95_ms": round(p["p95"], 2), "throughput_per_s": round(len(latencies) / wall_s, 1)}
    if statuses is not None:
        out["statuses"] = {str(k): v for k, v in sorted(statuses.items())}
    return out


def _start_server(home: Path, timeout_s: float = 300) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([*_FABRIC, "serve", "--port", "0", "--home", str(home)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout_s
    while (record := read_server_file(home)) is None or record.pid != proc.pid:
        if proc.poll() is not None:
            raise RuntimeError(f"fabric serve exited: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            raise RuntimeError("fabric serve did not announce itself")
        time.sleep(0.05)
    with httpx.Client(base_url=record.url, timeout=30) as client:
        while client.get("/v1/ready").status_code != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("fabric serve never became ready")
            time.sleep(0.05)
    return proc, record.url


def _cli_runs(home: Path, query: str, runs: int, use_server: bool) -> list[float]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "FABRIC_USE_SERVER": "1" if use_server else "0"}
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([*_FABRIC, "search", query, "--home", str(home)], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append((time.perf_counter() - started) * 1000)
    return times


def bench_serve(home: Path, queries: list[str] | None = None, requests: int = 200, cli_runs: int = 5,
                log=print) -> dict:
    """Run the benchmark on ``home`` (see the module docstring); a dict of figures.

    Raises
    ------
    fabric_query.errors.HomeNotFoundError, NoReleaseError
        ``home`` has no catalog or no release.
    RuntimeError
        The server could not start.
    """
    home = Path(home).resolve()
    queries = list(queries or DEFAULT_QUERIES)
    fabric = Fabric(home)
    for q in queries:  # warm-up: models, release view, index
        fabric.search(q)
    result: dict = {
        "home": str(home), "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}",
        "queries": len(queries), "requests_per_concurrency": requests,
        "gate": fabric.home.config.server.max_concurrent_queries, "in_process": {}, "http": {},
    }
    for c in CONCURRENCY:
        lat, wall, _ = _run_load(lambda q: (fabric.search(q), 200)[1], queries, requests, c)
        result["in_process"][str(c)] = _summary(lat, wall)
        log(f"in-process c={c}: {result['in_process'][str(c)]}")

    log("starting fabric serve ...")
    proc, url = _start_server(home)
    try:
        clients: dict[int, httpx.Client] = {}

        def http_search(q: str) -> int:
            # Not clients.setdefault(key, httpx.Client(...)): that builds a client (an SSL context
            # with the CA bundle, ~50-100 ms) on every call, which the first runs measured as HTTP.
            client = clients.get(threading.get_ident())
            if client is None:
                client = clients[threading.get_ident()] = httpx.Client(base_url=url, timeout=60)
            return client.post("/v1/search", json={"query": q}).status_code

        for q in queries:
            http_search(q)
        for c in CONCURRENCY:
            lat, wall, statuses = _run_load(http_search, queries, requests, c)
            result["http"][str(c)] = _summary(lat, wall, statuses)
            log(f"http c={c}: {result['http'][str(c)]}")
        result["paired_c1"] = _paired(lambda q: fabric.search(q), http_search, queries, requests)
        log(f"paired c=1: {result['paired_c1']}")
        for client in clients.values():
            client.close()
        served = _cli_runs(home, queries[0], cli_runs, use_server=True)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    cold = _cli_runs(home, queries[0], cli_runs, use_server=False)
    result["cli"] = {"with_server": _summary(served, sum(served) / 1000), "in_process": _summary(cold, sum(cold) / 1000)}
    for row in result["cli"].values():
        row.pop("throughput_per_s")
    result["http_overhead_p50_ms_c1"] = result["paired_c1"]["overhead_p50_ms"]
    result["errors_c16"] = sum(v for k, v in result["http"]["16"]["statuses"].items() if k not in ("200", "503"))
    result["targets"] = {"http_overhead_p50_ms_c1": TARGET_HTTP_OVERHEAD_P50_MS,
                         "cli_with_server_p50_ms": TARGET_CLI_SERVER_P50_MS, "errors_c16": 0}
    return result


def serve_rows(result: dict) -> list[dict[str, str]]:
    """Rows for the printed table: one per (path, concurrency), then the CLI."""
    rows = []
    for path in ("in_process", "http"):
        for c, row in result[path].items():
            rows.append({"path": path, "concurrency": c, "p50 ms": f"{row['p50_ms']:.2f}", "p95 ms": f"{row['p95_ms']:.2f}",
                         "searches/s": f"{row['throughput_per_s']:.1f}", "statuses": str(row.get("statuses", ""))})
    paired = result["paired_c1"]
    rows.append({"path": "paired in_process / http", "concurrency": "1",
                 "p50 ms": f"{paired['in_process_p50_ms']:.2f} / {paired['http_p50_ms']:.2f}",
                 "p95 ms": "", "searches/s": "", "statuses": f"overhead p50 {paired['overhead_p50_ms']:.2f} ms"})
    for name, row in result["cli"].items():
        rows.append({"path": f"cli {name}", "concurrency": "1", "p50 ms": f"{row['p50_ms']:.1f}",
                     "p95 ms": f"{row['p95_ms']:.1f}", "searches/s": "", "statuses": ""})
    return rows
