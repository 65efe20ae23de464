"""``fabric bench annotate``: the annotation producer against a stub chat server on loopback.

Measures the three targets of issue 6 with :class:`~fabric_assets.measurement.chat_server.StubChatServer`
(a real HTTP server on 127.0.0.1 that answers every stage after ``delay_s``), by default in a
child process so that this process's CPU time and GIL are Fabric's alone:

1. **re-parse**: the same windows under a new parse (new unit, window and parse IDs, same texts)
   must make zero calls — every chain a memo hit;
2. **Fabric's overhead per call**: ``wall × concurrency / calls − delay_s`` (time an excerpt slot
   spends on anything but the server's delay: HTTP, the SDK, validation, grounding, the memo,
   scheduling), its variant against the server's *measured* time per call, and this process's
   CPU time per call (``time.process_time``; with the share of one core that CPU time comes to
   at the server's full rate, ``concurrency / delay_s`` calls per second); target ≤ 10 ms.
   The wall-clock figures also hold the stub's own HTTP and JSON work outside its timed span
   (its CPU per call is reported) and the OS scheduler; on a loaded machine, CPU time per call is
   the figure that is Fabric's alone;
3. **server-bound**: wall time against the server's lower bound ``calls × delay_s /
   concurrency`` (and against the measured server time / concurrency), next to the same ratio
   at concurrency 1 on a subset (the baseline, same process, same server).

The synthetic parse is real English text: the paragraphs of the Cranfield collection
(``<shared>/eval/cranfield/corpus.jsonl``, one unit each), cut at sentence ends into context
windows of about :data:`WINDOW_CHARS` characters (a window may hold fragments of several
consecutive units, as real windows do), ``excerpts × indexing.excerpt_windows`` of them.
Every stored annotation is checked against the window text (its support spans' hashes).
Times are measured and printed, never asserted.
"""

from __future__ import annotations

import json
import os
import platform
import re
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from fabric_assets.annotations.producer import annotate_parse
from fabric_assets.measurement.chat_server import CallTiming, StubChatServer, StubChatServerProcess
from fabric_assets.measurement.scaling_corpus import SharedCorpusMissing
from fabric_resources.annotator import AnnotationMemo, ChatClient
from fabric_resources.config import FabricConfig
from fabric_resources.identity import derived_id, text_hash
from fabric_resources.offsets import utf16_offset
from fabric_resources.schema import FRAGMENT_SEPARATOR, WINDOWS

__all__ = [
    "WINDOW_CHARS",
    "bench_annotate",
    "cranfield_paragraphs",
    "grounded_rows",
    "plan_windows",
    "summary_rows",
    "windows_table",
]

#: Target characters of one synthetic context window (~150 word pieces of English; the
#: Cranfield collection, 1.43 M characters, gives about 2,300 such windows).
WINDOW_CHARS = 600
#: Issue 6: Fabric's own time per call beyond the server's.
TARGET_OVERHEAD_MS_PER_CALL = 10.0
SECTION_PATH = ("Cranfield collection",)

Fragment = tuple[int, int, int]  # (paragraph index, start_char, end_char)


class _Server(Protocol):
    base_url: str

    def timings(self) -> list[CallTiming]: ...


# -- the synthetic parse ------------------------------------------------------------------------


def cranfield_paragraphs(shared: Path) -> list[str]:
    """The non-empty ``text`` fields of ``<shared>/eval/cranfield/corpus.jsonl``, file order,
    whitespace squashed to single spaces.

    Raises
    ------
    SharedCorpusMissing
        If the file is absent.
    """
    path = Path(shared) / "eval" / "cranfield" / "corpus.jsonl"
    if not path.is_file():
        raise SharedCorpusMissing(f"{path} not found: the benchmark's English text comes from the Cranfield "
                                  "collection in ../shared/eval")
    out = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            text = " ".join(str(json.loads(line).get("text", "")).split()) if line.strip() else ""
            if text:
                out.append(text)
    return out


def _sentence_spans(text: str) -> Iterator[tuple[int, int]]:
    for m in re.finditer(r"[^.!?]+(?:[.!?]+|$)", text):
        s, e = m.start(), m.end()
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            yield s, e


def plan_windows(paragraphs: Sequence[str], n_windows: int, window_chars: int = WINDOW_CHARS) -> list[list[Fragment]]:
    """The first ``n_windows`` context windows over ``paragraphs`` read in order: whole sentences
    packed until the next would pass ``window_chars`` (a longer sentence is a window alone);
    a window's fragments are ``(paragraph index, start_char, end_char)``, one per paragraph it
    touches.

    Raises
    ------
    ValueError
        If the paragraphs yield fewer than ``n_windows`` windows.
    """
    windows: list[list[Fragment]] = []
    current: list[Fragment] = []
    size = 0
    for u, text in enumerate(paragraphs):
        for s, e in _sentence_spans(text):
            if current and size + (e - s) > window_chars:
                windows.append(current)
                current, size = [], 0
                if len(windows) == n_windows:
                    return windows
            if current and current[-1][0] == u:
                size += e - current[-1][2]
                current[-1] = (u, current[-1][1], e)
            else:
                size += (len(FRAGMENT_SEPARATOR) if current else 0) + e - s
                current.append((u, s, e))
    if current:
        windows.append(current)
    if len(windows) < n_windows:
        raise ValueError(f"the text gives {len(windows)} windows of about {window_chars} characters, "
                         f"{n_windows} asked for")
    return windows[:n_windows]


def windows_table(parse_id: str, paragraphs: Sequence[str], plan: Sequence[Sequence[Fragment]],
                  section_path: Sequence[str] = SECTION_PATH) -> tuple[pa.Table, dict[str, str]]:
    """A ``WINDOWS`` table of one synthetic parse: paragraph ``k`` is unit
    ``derived_id("unit", parse_id, k)``; window ``i`` (ordinal ``i``) holds ``plan[i]``'s unit
    slices joined by the fragment separator (the storage contract). Returns the table and
    ``{unit_id: unit text}`` of the units it uses."""
    units: dict[str, str] = {}
    rows = []
    for ordinal, fragments in enumerate(plan):
        frags = []
        for u, s, e in fragments:
            unit_id = derived_id("unit", parse_id, u)
            units[unit_id] = paragraphs[u]
            frags.append({"unit_id": unit_id, "start_char": s, "end_char": e,
                          "start_utf16": utf16_offset(paragraphs[u], s), "end_utf16": utf16_offset(paragraphs[u], e)})
        text = FRAGMENT_SEPARATOR.join(paragraphs[u][s:e] for u, s, e in fragments)
        rows.append({
            "parse_id": parse_id, "window_id": derived_id("window", parse_id, ordinal), "ordinal": ordinal,
            "chunk_ids": [derived_id("chunk", parse_id, ordinal)], "text": text, "text_hash": text_hash(text),
            "fragments": frags, "section_path": list(section_path), "token_count": len(text.split()),
            "policy": "bench-annotate",
        })
    return pa.Table.from_pylist(rows, schema=WINDOWS), units


def grounded_rows(annotations: pa.Table, windows: pa.Table) -> int:
    """Annotation rows whose every support span is a piece of one of the row's windows: the span
    lies inside a fragment of one of ``window_ids`` (same unit) and its ``text_hash`` is the
    SHA-256 of that piece of the window text. Rows without support count as ungrounded."""
    by_id = {w["window_id"]: w for w in windows.select(["window_id", "text", "fragments"]).to_pylist()}

    def piece(window: dict[str, Any], span: dict[str, Any]) -> str | None:
        offset = 0
        for k, f in enumerate(window["fragments"]):
            if k:
                offset += len(FRAGMENT_SEPARATOR)
            if f["unit_id"] == span["unit_id"] and f["start_char"] <= span["start_char"] <= span["end_char"] <= f["end_char"]:
                a = offset + span["start_char"] - f["start_char"]
                return window["text"][a:a + span["end_char"] - span["start_char"]]
            offset += f["end_char"] - f["start_char"]
        return None

    good = 0
    for row in annotations.select(["support", "window_ids"]).to_pylist():
        ok = bool(row["support"])
        for span in row["support"]:
            pieces = (piece(by_id[w], span) for w in row["window_ids"] if w in by_id)
            ok = ok and any(p is not None and text_hash(p) == span["text_hash"] for p in pieces)
        good += ok
    return good


# -- measurement --------------------------------------------------------------------------------


def _config(base_url: str, concurrency: int) -> FabricConfig:
    return FabricConfig.model_validate({"annotation": {
        "enabled": True, "concurrency": concurrency, "malformed_retries": 2, "call_retries": 2,
        "endpoint": {"base_url": base_url, "model": "stub-model", "timeout_s": 60.0},
    }})


def _union_s(intervals: Sequence[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def _max_overlap(intervals: Sequence[tuple[float, float]]) -> int:
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    best = now = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return best


def _ms(x: float | None) -> float | None:
    return None if x is None else round(x * 1000, 3)


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 4) if b > 0 else None


def _measure(server: _Server, windows: pa.Table, memo: AnnotationMemo, concurrency: int,
             delay_s: float) -> tuple[pa.Table, dict[str, Any]]:
    config = _config(server.base_url, concurrency)
    client = ChatClient.from_config(config.annotation)
    server_cpu = getattr(server, "cpu_s", None)  # a server in a child process reports its own CPU
    before = len(server.timings())
    server_cpu0 = server_cpu() if server_cpu else 0.0
    cpu0, t0 = time.process_time(), time.perf_counter()
    table, stats = annotate_parse(windows, config, memo, client)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    server_cpu_s = server_cpu() - server_cpu0 if server_cpu else None
    timings = server.timings()[before:]
    spans = [(t.received_s, t.replied_s) for t in timings]
    served_s = sum(b - a for a, b in spans)
    calls = stats.calls
    lower_bound = calls * delay_s / concurrency
    out: dict[str, Any] = {
        "excerpts": stats.excerpts, "concurrency": concurrency, "chains": stats.chains,
        "calls": calls, "server_requests": len(timings), "memo_hits": stats.memo_hits,
        "memo_hit_rate": round(stats.memo_hits / stats.chains, 4) if stats.chains else None,
        "wall_s": round(wall, 4),
        "lower_bound_s": round(lower_bound, 4),
        "server_time_s": round(served_s, 4),
        "server_bound_s": round(served_s / concurrency, 4),
        "server_busy_s": round(_union_s(spans), 4),
        "server_max_in_flight": _max_overlap(spans),
        "server_mean_in_flight": round(served_s / wall, 3) if wall > 0 else None,
        "ratio_wall_to_lower_bound": _ratio(wall, lower_bound),
        "ratio_wall_to_server_bound": _ratio(wall, served_s / concurrency),
        "overhead_ms_per_call": _ms((wall * concurrency / calls - delay_s)) if calls else None,
        "overhead_vs_server_ms_per_call": _ms((wall * concurrency - served_s) / calls) if calls else None,
        "in_request_outside_server_ms_per_call": _ms((stats.call_time_s - served_s) / calls) if calls else None,
        "cpu_ms_per_call": _ms(cpu / calls) if calls else None,
        # CPU of this process per second at the server's full rate (concurrency / delay_s calls/s):
        # above 1.0 no core could keep the server busy, whatever the load.
        "cpu_cores_needed_at_server_rate": round(cpu / calls * concurrency / delay_s, 3) if calls and delay_s else None,
        "cpu_s": round(cpu, 4),
        "server_cpu_ms_per_call": _ms(server_cpu_s / calls) if calls and server_cpu_s is not None else None,
        "wall_ms_per_excerpt": _ms(wall / stats.excerpts) if stats.excerpts else None,
        "prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.completion_tokens,
        "replies_without_usage": stats.replies_without_usage,
        "annotations": stats.annotations, "dropped_ungrounded": stats.dropped_ungrounded.total,
        "malformed_retries": stats.malformed_retries, "call_retries": stats.call_retries,
        "failures": len(stats.failures),
    }
    return table, out


def bench_annotate(
    excerpts: int = 1000,
    delay_s: float = 0.05,
    concurrency: int = 8,
    *,
    shared: Path = Path("../shared"),
    baseline_excerpts: int | None = None,
    server_process: bool = True,
    window_chars: int = WINDOW_CHARS,
) -> dict[str, Any]:
    """Annotate ``excerpts`` excerpts of real text against a stub server; see the module docstring.

    Parameters
    ----------
    excerpts : int
        Excerpts of the synthetic parse (each ``indexing.excerpt_windows`` windows; default 2).
    delay_s : float
        The server's time per call, seconds.
    concurrency : int
        ``annotation.concurrency`` of the main run.
    shared : Path
        The ``../shared`` folder (Cranfield text).
    baseline_excerpts : int, optional
        Excerpts of the concurrency-1 baseline (default ``max(1, excerpts // 10)``; 0 skips it).
    server_process : bool
        Run the server in a child process (default; the figures are the client's alone) or in a
        thread of this process (faster to start; its CPU and GIL then count as Fabric's).
    window_chars : int
        Target characters per window.

    Returns
    -------
    dict
        ``first`` (fresh memo, ``concurrency``), ``reparse`` (same texts, new IDs, same memo),
        ``baseline`` (fresh memo, concurrency 1, the first ``baseline_excerpts`` excerpts) — each
        with calls, wall and bound seconds, ratios, overhead and CPU per call, tokens, memo hits
        and ``annotations_grounded`` — plus the corpus shape, the machine (CPUs, load average
        before and after), ``ratio_first_to_baseline`` (of ``ratio_wall_to_lower_bound``) and the
        verdicts of the two numeric targets.

    Raises
    ------
    SharedCorpusMissing
        If the Cranfield corpus is not under ``shared``.
    ValueError
        If ``excerpts`` windows' worth of text is more than the corpus gives, or an argument is
        out of range.
    """
    if excerpts < 1 or concurrency < 1 or delay_s < 0:
        raise ValueError("excerpts and concurrency must be >= 1 and delay_s >= 0")
    baseline_excerpts = max(1, excerpts // 10) if baseline_excerpts is None else min(baseline_excerpts, excerpts)
    per_excerpt = FabricConfig().indexing.excerpt_windows
    paragraphs = cranfield_paragraphs(shared)
    plan = plan_windows(paragraphs, excerpts * per_excerpt, window_chars)
    first_windows, _ = windows_table("bench-annotate-first", paragraphs, plan)
    reparse_windows, _ = windows_table("bench-annotate-reparse", paragraphs, plan)
    base_plan = plan[:baseline_excerpts * per_excerpt]
    base_windows, _ = windows_table("bench-annotate-baseline", paragraphs, base_plan)
    warm_windows, _ = windows_table("bench-annotate-warmup", paragraphs, plan[:2 * per_excerpt])
    texts = first_windows.column("text").to_pylist()
    load_before = os.getloadavg()
    result: dict[str, Any] = {
        "excerpts": excerpts, "excerpt_windows": per_excerpt, "windows": len(plan),
        "window_chars_target": window_chars,
        "mean_excerpt_chars": round(sum(map(len, texts)) / excerpts + (per_excerpt - 1) * len(FRAGMENT_SEPARATOR), 1),
        "units": len({u for w in plan for u, _, _ in w}), "text_source": "cranfield",
        "delay_s": delay_s, "concurrency": concurrency, "baseline_excerpts": baseline_excerpts,
        "server": "child process" if server_process else "thread in this process",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_avg_before": [round(x, 2) for x in load_before]},
        "targets": {"reparse_calls": 0, "overhead_ms_per_call": TARGET_OVERHEAD_MS_PER_CALL},
    }
    server_cm = StubChatServerProcess(delay_s=delay_s) if server_process else StubChatServer(delay_s=delay_s)
    with tempfile.TemporaryDirectory(prefix="fabric-bench-annotate-") as tmp, server_cm as server:
        with AnnotationMemo(Path(tmp) / "warmup.sqlite3") as memo:  # imports, schemas, connections
            _measure(server, warm_windows, memo, concurrency, delay_s)
        if baseline_excerpts:
            with AnnotationMemo(Path(tmp) / "baseline.sqlite3") as memo:
                table, result["baseline"] = _measure(server, base_windows, memo, 1, delay_s)
                result["baseline"]["annotations_grounded"] = grounded_rows(table, base_windows)
        with AnnotationMemo(Path(tmp) / "memo.sqlite3") as memo:
            table, result["first"] = _measure(server, first_windows, memo, concurrency, delay_s)
            result["first"]["annotations_grounded"] = grounded_rows(table, first_windows)
            table, result["reparse"] = _measure(server, reparse_windows, memo, concurrency, delay_s)
            result["reparse"]["annotations_grounded"] = grounded_rows(table, reparse_windows)
            result["memo_entries"] = len(memo)
    result["machine"]["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    first, reparse, baseline = result["first"], result["reparse"], result.get("baseline")
    result["ratio_first_to_baseline"] = (
        _ratio(first["ratio_wall_to_lower_bound"], baseline["ratio_wall_to_lower_bound"])
        if baseline and first["ratio_wall_to_lower_bound"] and baseline["ratio_wall_to_lower_bound"] else None)
    overhead = first["overhead_ms_per_call"]
    result["verdicts"] = {
        "reparse_makes_no_calls": reparse["calls"] == 0 and reparse["memo_hit_rate"] == 1.0,
        "overhead_within_target": None if overhead is None or delay_s == 0
        else overhead <= TARGET_OVERHEAD_MS_PER_CALL,
        "cpu_within_target": first["cpu_ms_per_call"] is not None
        and first["cpu_ms_per_call"] <= TARGET_OVERHEAD_MS_PER_CALL,
    }
    return result


def _f(x: Any, fmt: str = "{:,.2f}") -> str:
    return "—" if x is None else fmt.format(x)


def summary_rows(result: dict[str, Any]) -> list[dict[str, str]]:
    """One row per run (first, re-parse, baseline) with the headline figures, as strings."""
    rows = []
    for name in ("first", "reparse", "baseline"):
        r = result.get(name)
        if r is None:
            continue
        rows.append({
            "run": {"first": "first parse", "reparse": "re-parse", "baseline": "baseline"}[name],
            "excerpts": f"{r['excerpts']:,}", "C": str(r["concurrency"]), "calls": f"{r['calls']:,}",
            "memo hits": f"{r['memo_hit_rate']:.0%}" if r["memo_hit_rate"] is not None else "—",
            "wall s": _f(r["wall_s"]), "bound s": _f(r["lower_bound_s"]),
            "server/C s": _f(r["server_bound_s"]),
            "wall/bound": _f(r["ratio_wall_to_lower_bound"], "{:.3f}"),
            "overhead ms/call": _f(r["overhead_ms_per_call"]),
            "CPU ms/call": _f(r["cpu_ms_per_call"]),
            "tokens in/out": f"{r['prompt_tokens']:,}/{r['completion_tokens']:,}",
            "grounded": f"{r['annotations_grounded']:,}/{r['annotations']:,}",
        })
    return rows
