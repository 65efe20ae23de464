"""The release's materialization in Dagster's UI says what changed: sources added, replaced and
removed (issue 18, "the UI as an operator console"), with parse IDs and counts only, never a
source key or text (Dagster's event log outlives a purge)."""

from __future__ import annotations

import dagster as dg
from conftest import ingest


def _release_metadata(home) -> dict:
    instance = dg.DagsterInstance.from_config(str(home.layout.dagster_home))
    event = instance.get_latest_materialization_event(dg.AssetKey("release"))
    return {k: v.value for k, v in event.asset_materialization.metadata.items()}


def test_the_release_lists_sources_added_replaced_and_removed(tmp_path, fabric_home):
    src = tmp_path / "notes"
    src.mkdir()
    (src / "kept.txt").write_text("The lighthouse keeper logged the tide.\n")
    (src / "edited.txt").write_text("A storm broke the lamp in March.\n")
    (src / "deleted-secret-name.txt").write_text("The harbour froze in the winter of that year.\n")
    ingest(src, fabric_home)
    first = _release_metadata(fabric_home)
    assert (first["sources_added"], first["sources_replaced"], first["sources_removed"]) == (3, 0, 0)
    assert len(first["parses_added"]) == 3

    (src / "edited.txt").write_text("A storm broke the lamp in April.\n")
    (src / "deleted-secret-name.txt").unlink()
    (src / "new.txt").write_text("Gulls nested on the north cliff.\n")
    ingest(src, fabric_home)
    second = _release_metadata(fabric_home)
    assert (second["sources_added"], second["sources_replaced"], second["sources_removed"]) == (1, 1, 1)
    assert second["release_id"] > first["release_id"]
    assert set(second["parses_superseded"]) <= set(first["parses_added"])
    assert not set(second["parses_added"]) & set(first["parses_added"])
    assert len(second["parses_replacing"]) == 1
    assert "deleted-secret-name" not in repr(second) and "edited.txt" not in repr(second)
