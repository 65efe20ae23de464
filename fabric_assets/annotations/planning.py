"""Which parses need annotation, under which producer (read by the sensor and by ``fabric ingest``).

Annotation runs after activation for active parses that have no annotation verdict of the current
producer yet — and, with ``annotation.required_for_activation``, before it for parsed parses whose
other verdicts all passed. No Dagster here, and the producer (with ``openai``) is imported only
when annotation is enabled.
"""

from __future__ import annotations

from collections.abc import Iterable

from fabric_assets.gate import gate_status
from fabric_assets.projections import ANNOTATION_VERDICT, REQUIRED_VERDICTS
from fabric_resources.config import FabricConfig
from fabric_resources.home import FabricHome


def current_producer(config: FabricConfig) -> str:
    """The producer identity annotations of ``config`` are made by ("disabled" when off)."""
    if not config.annotation.enabled:
        return "disabled"
    from fabric_assets.annotations.producer import producer_identity

    return producer_identity(config.annotation, config.indexing)


def parses_needing_annotation(home: FabricHome, *, retry_failed: bool = False) -> list[str]:
    """Parse IDs to annotate, in parse-run creation order; ``[]`` when annotation is disabled.

    Candidates are the parses active in the current release and, with
    ``annotation.required_for_activation``, ``parsed`` parses whose every other required verdict
    passed (their projections are complete); of them, the :func:`visible_parses`. A candidate is
    returned when it has no ``annotations_are_complete`` verdict yet, or one of another producer,
    or (``retry_failed``) its last attempt failed.
    """
    cfg = home.config.annotation
    if not cfg.enabled:
        return []
    producer = current_producer(home.config)
    release = home.catalog.current_release()
    active = {m["parse_id"] for m in release.manifest["sources"].values()} if release else set()
    out = []
    for run in home.catalog.parse_runs():
        waiting = (cfg.required_for_activation and run.status == "parsed"
                   and gate_status(run.verdicts, REQUIRED_VERDICTS) == ("ready", []))
        if run.parse_id not in active and not waiting:
            continue
        verdict = run.verdicts.get(ANNOTATION_VERDICT)
        if (verdict is None or verdict.get("producer") != producer
                or (retry_failed and not verdict.get("passed"))):
            out.append(run.parse_id)
    return visible_parses(home, out)


def visible_parses(home: FabricHome, parse_ids: Iterable[str]) -> list[str]:
    """Those of ``parse_ids`` (in order) that a source not withheld now (``sources.withheld``)
    holds: named by the current release under such a key, or pointed at by such a present source.

    Only these are sent to the model. A source withheld (or deleted) after it was parsed, or after
    the release that still names it, was sent once its parse waited for annotation under
    ``required_for_activation`` or was re-chunked under it: the withheld text reached the endpoint.
    """
    wanted = list(parse_ids)
    if not wanted:
        return []
    withheld = home.config.sources.is_withheld
    release = home.catalog.current_release()
    shown = {m["parse_id"] for k, m in (release.manifest["sources"] if release else {}).items() if not withheld(k)}
    shown |= {pid for key, state, _, pid in home.catalog.source_overview()
              if pid and state == "present" and not withheld(key)}
    return [p for p in wanted if p in shown]
