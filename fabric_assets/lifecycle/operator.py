"""Operator actions on parses: accept or discard a held parse, retry failed parses, force a
re-parse, rebuild every projection from canonical records.

Each is a plain function over the catalog (and activation) that the CLI (``fabric parse ...``,
``fabric rebuild-projections``), a Dagster job and later an admin route call. The actions that
need parse work only mark it: a parse set back to ``pending`` is run by the next scan (``fabric
ingest``, or the source sensor), which runs every pending parse a source waits for; the CLI runs
that scan at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabric_assets.activation.activate import ActivationReport, activate
from fabric_assets.gate import acceptance
from fabric_assets.lifecycle.stored_bytes import restore_unreadable_bytes
from fabric_resources.catalog import StatusUpdate, merge_verdicts
from fabric_resources.home import FabricHome


class OperatorError(Exception):
    """The action does not apply (unknown parse or source, wrong status); nothing changed."""


@dataclass(frozen=True)
class ActionResult:
    """What an action changed: the parses it moved and the activation it ran (if any)."""

    parse_ids: tuple[str, ...]
    status: str
    release_id: int | None = None
    published: bool = False


def _run(home: FabricHome, parse_id: str, expected: str):
    run = home.catalog.parse_run(parse_id)
    if run is None:
        raise OperatorError(f"no parse {parse_id} (see `fabric status`)")
    if run.status != expected:
        raise OperatorError(f"parse {parse_id} is {run.status}, not {expected}")
    return run


def _activated(report: ActivationReport, parse_ids: tuple[str, ...], status: str) -> ActionResult:
    return ActionResult(parse_ids, status, report.release_id, report.published)


def accept_held(home: FabricHome, parse_id: str) -> ActionResult:
    """Accept a held parse as it is (its failing verdicts stay recorded): it becomes ``ready``
    with reason ``accepted`` and the activation it runs makes it its sources' active parse. The
    failing verdicts accepted are recorded (``gate.ACCEPTED_VERDICT``): a re-derivation that fails
    them again leaves it ready.

    Raises
    ------
    OperatorError
        If the parse is unknown or not held.
    """
    run = _run(home, parse_id, "held")
    # Recorded as a verdict too, so that a re-derivation failing the same verdicts keeps it ready.
    merge_verdicts(home.catalog, {parse_id: acceptance(run.verdicts)})
    home.catalog.set_parse_statuses([StatusUpdate(parse_id, "ready", "accepted",
                                                  f"accepted by an operator; was {run.reason}")])
    return _activated(activate(home), (parse_id,), "ready")


def discard_held(home: FabricHome, parse_id: str) -> ActionResult:
    """Discard a held parse: it becomes ``failed`` with reason ``discarded`` (never retried blindly;
    the source keeps its previous active parse and `fabric status` lists it as failed).

    Raises
    ------
    OperatorError
        If the parse is unknown or not held.
    """
    run = _run(home, parse_id, "held")
    home.catalog.set_parse_statuses([StatusUpdate(parse_id, "failed", "discarded",
                                                  f"discarded by an operator; was {run.reason}")])
    return _activated(activate(home), (parse_id,), "failed")


def to_pending(home: FabricHome, parse_ids: list[str], reason: str, keep: tuple[str, ...] = ()) -> None:
    """Send ``parse_ids`` back to ``pending`` with every verdict but ``keep`` removed (``reason``
    recorded): the next scan parses their stored bytes again under the same parse IDs."""
    from fabric_resources.catalog import drop_verdicts, verdicts_of

    with home.catalog.transaction(immediate=True) as con:
        names = set()
        for pid in parse_ids:
            r = con.execute("SELECT verdicts FROM parse_runs WHERE parse_id = ?", (pid,)).fetchone()
            names |= set(verdicts_of(r["verdicts"], pid)) if r else set()
    drop_verdicts(home.catalog, parse_ids, names - set(keep))
    home.catalog.set_parse_statuses([StatusUpdate(p, "pending", reason) for p in parse_ids])


def retry_failed(home: FabricHome, parse_ids: list[str] | None = None) -> ActionResult:
    """Clear failures: the failed parses ``parse_ids`` (default: every failed parse a present
    source waits for) go back to ``pending`` with their verdicts removed; the next scan runs them.

    Raises
    ------
    OperatorError
        If a named parse is unknown or not failed.
    """
    from fabric_assets.sources.scan import awaited_parse_ids

    if parse_ids is None:
        awaited = awaited_parse_ids(home.catalog)
        ids = sorted(r.parse_id for r in home.catalog.parse_runs(status="failed") if r.parse_id in awaited)
    else:
        ids = sorted(set(parse_ids))
        for pid in ids:
            _run(home, pid, "failed")
    restore_unreadable_bytes(home, ids)  # a parse failed for corrupt stored bytes its file still holds
    to_pending(home, ids, "retry")
    return ActionResult(tuple(ids), "pending")


def force_reparse(home: FabricHome, source_key: str) -> ActionResult:
    """Parse a source's current bytes again, whatever its parse's status (the parse ID is the same:
    same bytes, same parser). Until the new parse is ready the source is out of new releases (its
    rows are rewritten in place); the next scan runs it.

    Raises
    ------
    OperatorError
        If the source is unknown, not present, or has no parse (unsupported); or if its stored bytes
        are missing or corrupt and no file holds them any more (nothing changed: it stays served).
    """
    source = home.catalog.source(source_key)
    if source is None or source.state != "present" or not source.parse_id:
        raise OperatorError(f"{source_key}: no present source with a parse ({_meant(home, source_key)}see "
                            "`fabric status`)")
    # The re-parse reads the stored bytes: stored again from the file when they are corrupt or
    # missing; when no file holds them, a re-parse would fail and take the source out of search
    # (trial 12b: a tampered artifact, then `parse reparse`: the file was in no search, and neither
    # retry nor ingest brought it back).
    lost = restore_unreadable_bytes(home, [source.parse_id])
    if lost:
        raise OperatorError(f"{source_key}: its stored bytes cannot be read ({lost[0][1]}) and no file holds them "
                            "any more: a re-parse would fail it and take it out of search; restore the artifact "
                            "store (`fabric snapshot restore`)")
    to_pending(home, [source.parse_id], "reparse")
    return ActionResult((source.parse_id,), "pending")


def _meant(home: FabricHome, typed: str) -> str:
    """The keys of present sources a mistyped ``typed`` names: the key without its ``fs:`` (the
    path `fabric search` prints after it) or a file's name or path inside its folder (trial 22e:
    ``fabric parse reparse tide.md`` answered only "no present source with a parse"), as purge says."""
    if typed.startswith("fs:"):
        return ""
    meant = sorted(s.source_key for s in home.catalog.sources()
                   if s.state == "present" and s.parse_id
                   and (s.source_key == f"fs:{typed}" or s.source_key.endswith(f"/{typed}")))
    shown = ", ".join(meant[:3]) + (f" or {len(meant) - 3} more" if len(meant) > 3 else "")
    return f"did you mean {shown}? source keys start with fs:; " if meant else "source keys start with fs:; "
