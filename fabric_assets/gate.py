"""Per-parse gate verdicts: invariants a parse must satisfy before activation.

Pure functions over one parse's rows; each returns ``{"passed": bool,
"detail": str}``. The assets record them in the catalog per parse; the
activation reads them (:func:`gate_status`); Dagster asset checks summarise
them per run. Which verdicts a parse needs is the registry's
(``projections.REQUIRED_VERDICTS``, ``ANNOTATION_VERDICT``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from fabric_assets.chunking.fine_chunks import SEPARATOR
from fabric_assets.projections import ANNOTATION_VERDICT, REQUIRED_VERDICTS
from fabric_resources.identity import text_hash

Verdict = dict[str, Any]

#: Tolerance on ``| ||v|| - 1 |`` for float32 vectors.
NORM_TOLERANCE = 1e-3


def _v(passed: bool, detail: str = "") -> Verdict:
    return {"passed": bool(passed), "detail": detail}


def ids_unique(table: pa.Table, column: str) -> Verdict:
    ids = table.column(column).to_pylist()
    dupes = len(ids) - len(set(ids))
    return _v(dupes == 0, f"{dupes} duplicate {column}" if dupes else f"{len(ids)} unique")


def units_nonempty(units: pa.Table) -> Verdict:
    empty = sum(1 for t in units.column("text").to_pylist() if not t.strip())
    return _v(empty == 0, f"{empty} empty units" if empty else "")


def fragments_reproduce_text(chunks: pa.Table, units: pa.Table) -> Verdict:
    """Every chunk's text equals ``SEPARATOR.join`` of its fragments' unit slices."""
    text_of = dict(zip(units.column("unit_id").to_pylist(), units.column("text").to_pylist()))
    bad = []
    for cid, text, frags in zip(
        chunks.column("chunk_id").to_pylist(), chunks.column("text").to_pylist(),
        chunks.column("fragments").to_pylist(),
    ):
        try:
            rebuilt = SEPARATOR.join(text_of[f["unit_id"]][f["start_char"]:f["end_char"]] for f in frags)
        except KeyError:
            rebuilt = None
        if rebuilt != text or not frags:
            bad.append(cid)
    return _v(not bad, f"{len(bad)} chunks differ, e.g. {bad[:3]}" if bad else f"{chunks.num_rows} chunks exact")


def counts_consistent(expected_ids: list[str], actual_ids: list[str], what: str) -> Verdict:
    missing = set(expected_ids) - set(actual_ids)
    extra = set(actual_ids) - set(expected_ids)
    ok = not missing and not extra and len(actual_ids) == len(expected_ids)
    return _v(ok, f"{what}: {len(missing)} missing, {len(extra)} extra, {len(actual_ids)} rows")


def vectors_finite_unit_norm(vectors: np.ndarray) -> Verdict:
    """``vectors``: ``(n, d) float32``; all finite, each L2 norm within NORM_TOLERANCE of 1."""
    if vectors.size == 0:
        return _v(True, "no vectors")
    finite = np.isfinite(vectors).all(axis=1)
    norms = np.linalg.norm(np.where(np.isfinite(vectors), vectors, 0), axis=1)
    bad = int((~finite | (np.abs(norms - 1.0) > NORM_TOLERANCE)).sum())
    return _v(bad == 0, f"{bad} vectors not finite or not unit-norm" if bad else f"{len(vectors)} ok")


def required_verdicts(config) -> tuple[str, ...]:
    """``REQUIRED_VERDICTS``, plus ``ANNOTATION_VERDICT`` when ``config`` (a ``FabricConfig``)
    enables annotation and requires it for activation."""
    ann = config.annotation
    return REQUIRED_VERDICTS + ((ANNOTATION_VERDICT,) if ann.enabled and ann.required_for_activation else ())


#: The verdict an operator's acceptance of a held parse records beside its others
#: (``lifecycle.operator.accept_held``): ``accepted`` lists the failing verdicts accepted. The
#: acceptance is of the parse, not of one run's status: a re-derivation that fails those same
#: verdicts again (a backfill of every partition from the UI re-parses it) keeps it ready, where the
#: re-parse's ``parsed`` status alone sent it back to ``held`` and its file out of the release. A
#: verdict that newly fails still holds it; a retry or forced re-parse drops the acceptance.
ACCEPTED_VERDICT = "accepted_by_operator"


def accepted_failures(verdicts: dict[str, Verdict]) -> frozenset[str]:
    """The failing verdicts an operator accepted for this parse (:data:`ACCEPTED_VERDICT`)."""
    names = (verdicts.get(ACCEPTED_VERDICT) or {}).get("accepted")
    return frozenset(n for n in names if isinstance(n, str)) if isinstance(names, list) else frozenset()


def acceptance(verdicts: dict[str, Verdict]) -> dict[str, Verdict]:
    """The :data:`ACCEPTED_VERDICT` entry that accepts every verdict of ``verdicts`` failing now
    (the annotation verdict, never a reason to hold, aside): ``{ACCEPTED_VERDICT: {...}}``."""
    failing = sorted(k for k, v in verdicts.items() if not v.get("passed") and k != ANNOTATION_VERDICT)
    return {ACCEPTED_VERDICT: {"passed": True, "detail": "accepted by an operator", "accepted": failing}}


def gate_status(
    verdicts: dict[str, Verdict], required: tuple[str, ...] = REQUIRED_VERDICTS
) -> tuple[str | None, list[str]]:
    """``("ready", [])`` if every required verdict passed (or failed as an operator accepted,
    :data:`ACCEPTED_VERDICT`), ``("held", failing)`` if another failed, ``(None, missing)`` while
    some are still missing (the parse's run has not finished)."""
    accepted = accepted_failures(verdicts)
    failing = sorted(k for k, v in verdicts.items()
                     if not v.get("passed") and k != ANNOTATION_VERDICT and k not in accepted)
    if failing:
        return "held", failing
    missing = [k for k in required
               if k not in verdicts or (k == ANNOTATION_VERDICT and not verdicts[k].get("passed"))]
    return (None, missing) if missing else ("ready", [])


def unfinished(run) -> list[str]:
    """The parse-job verdicts a ``parsed`` run still lacks: non-empty while its run is in
    progress, or forever once that run was killed — :func:`fabric_assets.ingest.ingest` re-runs
    such parses. Empty for any other status."""
    if run.status != "parsed":
        return []
    status, missing = gate_status(run.verdicts, REQUIRED_VERDICTS)
    return missing if status is None else []


def windows_cover_chunks(windows: pa.Table, chunks: pa.Table, max_tokens: int) -> Verdict:
    """One parse's window rows (``WINDOWS``) against its chunk rows (``CHUNKS``), re-keyed by chunk ID.

    Passes when the windows, in ``ordinal`` order 0..n-1, list every chunk exactly once in chunk
    ``ordinal`` order, and each window's ``text`` is ``SEPARATOR.join`` of its members' texts,
    ``fragments`` the concatenation of theirs, ``section_path`` its first member's,
    ``text_hash`` the SHA-256 of its text, and ``token_count`` the sum of theirs and at most
    ``max_tokens`` (seed 003, "Grains"). No tokenizer is needed.
    """
    c = chunks.sort_by("ordinal").to_pydict()
    by_id = {cid: i for i, cid in enumerate(c["chunk_id"])}
    w = windows.sort_by("ordinal").to_pydict()
    problems: list[str] = []
    if w["ordinal"] != list(range(len(w["ordinal"]))):
        problems.append("window ordinals are not 0..n-1")
    listed = [cid for ids in w["chunk_ids"] for cid in ids]
    if listed != c["chunk_id"]:
        problems.append(f"windows list {len(listed)} chunk IDs ({len(set(listed))} distinct), "
                        f"not the parse's {len(c['chunk_id'])} chunks in reading order")
    bad: list[str] = []
    for wid, ids, text, h, frags, path, tokens in zip(
        w["window_id"], w["chunk_ids"], w["text"], w["text_hash"], w["fragments"], w["section_path"],
        w["token_count"],
    ):
        rows = [by_id.get(cid) for cid in ids]
        if not rows or None in rows:
            bad.append(wid)
            continue
        ok = (
            text == SEPARATOR.join(c["text"][i] for i in rows)
            and frags == [f for i in rows for f in c["fragments"][i]]
            and (path or []) == (c["section_path"][rows[0]] or [])
            and h == text_hash(text)
            and tokens == sum(c["token_count"][i] for i in rows) <= max_tokens
        )
        if not ok:
            bad.append(wid)
    if bad:
        problems.append(f"{len(bad)} windows differ from their chunks, e.g. {bad[:3]}")
    return _v(not problems, "; ".join(problems) if problems else
              f"{len(w['window_id'])} windows cover {len(c['chunk_id'])} chunks")
