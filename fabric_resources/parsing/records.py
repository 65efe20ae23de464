"""Turn a ParsedDocument into the Arrow rows of the ``units`` and ``relationships`` tables."""

from __future__ import annotations

import json

import pyarrow as pa

from fabric_resources import identity
from fabric_resources.parsing.document import ParsedDocument
from fabric_resources.schema import RELATIONSHIPS, UNITS


#: The longest section title a unit's ``section_path`` keeps (Unicode scalars; longer ones are cut
#: and end in "…"), and the most titles it keeps (the outermost, then the innermost). A path is
#: copied into every unit under it, and into every chunk, window and model input made of them: a
#: 200,000-character PDF outline title over 29 units stored 5.8 million characters (trial 21e).
#: Titles are context for models and readers, never cited, so cutting them moves no offset. 500
#: scalars hold any real heading; 16 levels are more than HTML's 6 or Word's 9 outline levels.
MAX_SECTION_TITLE_CHARS = 500
MAX_SECTION_DEPTH = 16


def bounded_section_path(path: tuple[str, ...] | list[str]) -> list[str]:
    """``path`` within :data:`MAX_SECTION_TITLE_CHARS` per title and :data:`MAX_SECTION_DEPTH`
    titles: the outermost title and the innermost ones are kept.

    >>> bounded_section_path(("Book", "x" * 600))[1][-3:], len(bounded_section_path(("Book", "x" * 600))[1])
    ('xx…', 501)
    >>> bounded_section_path([str(i) for i in range(20)])[:3]
    ['0', '5', '6']
    """
    titles = list(path)
    if len(titles) > MAX_SECTION_DEPTH:
        titles = titles[:1] + titles[len(titles) - MAX_SECTION_DEPTH + 1:]
    return [t if len(t) <= MAX_SECTION_TITLE_CHARS else t[:MAX_SECTION_TITLE_CHARS] + "…" for t in titles]


def unit_rows(parse_id: str, doc: ParsedDocument) -> tuple[pa.Table, pa.Table]:
    """Rows for ``units`` and ``relationships``; unit IDs from parse ID + reading-order position.
    Each unit's ``section_path`` is bounded (:func:`bounded_section_path`)."""
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
                "section_path": bounded_section_path(u.section_path),
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
