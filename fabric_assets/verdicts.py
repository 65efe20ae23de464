"""Record per-parse gate verdicts and summarise them as one Dagster asset check result."""

from __future__ import annotations

import dagster as dg

from fabric_assets.gate import Verdict
from fabric_assets.projections import REQUIRED_VERDICTS
from fabric_resources.catalog import merge_verdicts
from fabric_resources.home import FabricHome


def record(home: FabricHome, check_name: str, verdicts: dict[str, Verdict]) -> None:
    """Store ``verdicts`` (parse ID → verdict) under ``check_name`` in the catalog (what activation
    reads), merged into each parse's other verdicts. A gate verdict whose outcome changes sends a
    ready or held parse back to the gate (``merge_verdicts``'s ``regated``): whichever run recorded
    it, a failing verdict is never published as ready."""
    merge_verdicts(home.catalog, {parse_id: {check_name: v} for parse_id, v in verdicts.items()},
                   regated=REQUIRED_VERDICTS)


def record_and_summarise(
    home: FabricHome, check_name: str, asset_key: str, verdicts: dict[str, Verdict]
) -> dg.AssetCheckResult:
    """Store ``verdicts`` (parse ID → verdict) under ``check_name``; return one check result.

    The catalog keeps the per-parse verdict (what activation reads); the check
    result only reports, because in a multi-partition run Dagster records one
    check result for all partitions.
    """
    record(home, check_name, verdicts)
    failing = sorted(p for p, v in verdicts.items() if not v["passed"])
    return dg.AssetCheckResult(
        check_name=check_name,
        asset_key=asset_key,
        passed=not failing,
        metadata={
            "parses_checked": len(verdicts),
            "parses_failing": len(failing),
            "failing_parse_ids": ", ".join(failing[:20]),
            "details": "; ".join(f"{p}: {verdicts[p]['detail']}" for p in failing[:5]),
        },
    )


def live_parse_ids(home: FabricHome, parse_ids: list[str], *, parsed_only: bool = False) -> list[str]:
    """The partitions of this run that have not failed (failed ones are skipped downstream).

    ``parsed_only``: leave out the ``pending`` ones too, whose units are not written (never
    parsed, or set to be parsed again): what a projection made from units would compute for them
    is made of nothing, and its verdicts, passing on no rows, would let the parse through the gate
    once its units alone were written."""
    status = {r.parse_id: r.status for r in home.catalog.parse_runs(parse_ids)}
    left_out = (None, "failed", "pending") if parsed_only else (None, "failed")
    return [p for p in parse_ids if status.get(p) not in left_out]
