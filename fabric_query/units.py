"""Canonical units by ID, read from the pinned release under today's visibility.

A unit of a parse that is not active in the release, or whose sources are all withheld or
deleted now, is answered exactly as a unit that never existed (``None``).
"""

from __future__ import annotations

import json
import re

import pyarrow.compute as pc

from fabric_query.errors import InvalidArgumentError, ReleaseUnreadableError
from fabric_query.release import ReleaseView, guarded_read
from fabric_query.types import CanonicalUnit
from fabric_resources.identity import text_hash

_HEX32 = re.compile(r"[0-9a-f]{32}")
_COLUMNS = ["parse_id", "unit_id", "ordinal", "kind", "text", "text_hash", "locator", "section_path", "attributes"]


def canonical_unit(view: ReleaseView, unit_id: str) -> CanonicalUnit | None:
    """The unit ``unit_id`` of the view's visible parses, or None.

    Raises
    ------
    InvalidArgumentError
        ``unit_id`` is not 32 lower-case hex digits (what :func:`fabric_resources.identity.unit_id` makes).
    ProjectionUnavailable
        The units table cannot be read.
    ReleaseUnreadableError
        The unit's stored text does not hash to the ``text_hash`` recorded beside it.
    """
    if not isinstance(unit_id, str) or not _HEX32.fullmatch(unit_id):
        raise InvalidArgumentError("unit_id must be 32 lower-case hex digits")
    version = view.release.manifest["tables"].get("units")
    store = view.home.tables
    if version is None or not store.exists("units"):
        return None
    # The ID is bound as a value of a typed expression, never spliced into a filter string.
    # Through the store, so a home whose tables are on object storage opens them with its options.
    rows = guarded_read("units", lambda: store.dataset("units", version=version).to_table(
        columns=_COLUMNS, filter=pc.field("unit_id") == unit_id)).to_pylist()
    row = next((r for r in rows if r["parse_id"] in view.sources_by_parse), None)
    if row is None:
        return None
    if text_hash(row["text"]) != row["text_hash"]:
        # As a chunk's (ReleaseView.altered): a row rewritten behind Fabric's back is never served.
        raise ReleaseUnreadableError(f"release {view.release_id}: unit {unit_id}'s text differs from the hash recorded "
                                     "when it was parsed (the units table was altered); restore the home from a "
                                     "snapshot or re-ingest")
    return CanonicalUnit(
        unit_id=row["unit_id"], parse_id=row["parse_id"], source_keys=tuple(view.sources_by_parse[row["parse_id"]]),
        release_id=view.release_id, ordinal=row["ordinal"], kind=row["kind"], text=row["text"],
        text_hash=row["text_hash"], locator=json.loads(row["locator"] or "{}"),
        section_path=tuple(row["section_path"] or ()), attributes=json.loads(row["attributes"] or "{}"),
    )
