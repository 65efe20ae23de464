"""Turn a ParsedDocument into the Arrow rows of the ``units`` and ``relationships`` tables."""

from __future__ import annotations

import json

import pyarrow as pa

from fabric_resources import identity
from fabric_resources.parsing.document import ParsedDocument
from fabric_resources.schema import RELATIONSHIPS, UNITS


def unit_rows(parse_id: str, doc: ParsedDocument) -> tuple[pa.Table, pa.Table]:
    """Rows for ``units`` and ``relationships``; unit IDs from parse ID + reading-order position."""
    ids = [identity.unit_id(parse_id, i) for i in range(len(doc.units))]
    units = pa.Table.from_pylist(
        [
            {
                "parse_id": parse_id,
                "unit_id": ids[i],
                "ordinal": i,
                "kind": u.kind,
                "text": u.text,
                "text_hash": identity.text_hash(u.text),
                "locator": json.dumps(u.locator, sort_keys=True, ensure_ascii=False),
                "section_path": list(u.section_path),
                "attributes": json.dumps(u.attributes, sort_keys=True, ensure_ascii=False),
            }
            for i, u in enumerate(doc.units)
        ],
        schema=UNITS,
    )
    rels = pa.Table.from_pylist(
        [
            {
                "parse_id": parse_id,
                "relationship_id": identity.relationship_id(parse_id, i),
                "kind": r.kind,
                "source_unit_id": ids[r.source_index],
                "target_unit_id": ids[r.target_index],
                "attributes": json.dumps(r.attributes, sort_keys=True, ensure_ascii=False),
            }
            for i, r in enumerate(doc.relationships)
            if 0 <= r.source_index < len(ids) and 0 <= r.target_index < len(ids)
        ],
        schema=RELATIONSHIPS,
    )
    return units, rels
