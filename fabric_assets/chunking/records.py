"""Arrow rows for the ``chunks`` and ``lexical_documents`` tables."""

from __future__ import annotations

import json

import pyarrow as pa

from fabric_assets.chunking.fine_chunks import ChunkInputUnit, FineChunk
from fabric_resources import identity
from fabric_resources.lexical_index import ANALYZER_ID
from fabric_resources.offsets import Utf16Offsets
from fabric_resources.schema import CHUNKS, LEXICAL_DOCUMENTS
from fabric_resources.text_folding import fold


def chunk_inputs(units: pa.Table) -> list[ChunkInputUnit]:
    """Units of one parse (rows of ``units``) in reading order, as chunker input."""
    d = units.sort_by("ordinal").select(["unit_id", "kind", "text", "section_path", "locator"]).to_pydict()
    return [
        ChunkInputUnit(uid, kind, text, tuple(sp or ()), unit_place(loc))
        for uid, kind, text, sp, loc in zip(d["unit_id"], d["kind"], d["text"], d["section_path"], d["locator"])
    ]


def _number(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def unit_place(locator: str | None) -> tuple[int, int] | None:
    """The first and last page (PDF) or the slide (PPTX) a unit's locator (JSON) names, else None.

    >>> unit_place('{"page": 3, "page_end": 4, "bbox": [0, 0, 1, 1]}'), unit_place('{"slide": 2, "notes": true}')
    ((3, 4), (2, 2))
    >>> unit_place('{"element_path": "/html/body/p"}'), unit_place("not json"), unit_place(None)
    (None, None, None)
    """
    try:
        loc = json.loads(locator) if locator else None
    except ValueError:
        return None
    if not isinstance(loc, dict):
        return None
    first = _number(loc.get("page")) or _number(loc.get("slide"))
    if first is None:
        return None
    last = _number(loc.get("page_end")) if _number(loc.get("page")) else None
    return first, max(first, last or first)


def chunk_rows(parse_id: str, chunks: list[FineChunk], chunker: str, unit_texts: dict[str, str]) -> pa.Table:
    """Rows of ``chunks``; ``unit_texts`` (unit_id → text) gives the UTF-16 offsets of each fragment.

    Offsets are converted through one :class:`Utf16Offsets` per unit, so a unit cut into many
    chunks (a multi-megabyte single paragraph) costs linear time, not quadratic.
    """
    converters: dict[str, Utf16Offsets] = {}

    def u16(unit_id: str, index: int) -> int:
        conv = converters.get(unit_id)
        if conv is None:
            conv = converters[unit_id] = Utf16Offsets(unit_texts[unit_id])
        return conv.at(index)

    return pa.Table.from_pylist(
        [
            {
                "parse_id": parse_id,
                "chunk_id": identity.chunk_id(parse_id, chunker, c.ordinal),
                "ordinal": c.ordinal,
                "text": c.text,
                "text_hash": identity.text_hash(c.text),
                "fragments": [
                    {"unit_id": f.unit_id, "start_char": f.start_char, "end_char": f.end_char,
                     "start_utf16": u16(f.unit_id, f.start_char), "end_utf16": u16(f.unit_id, f.end_char)}
                    for f in c.fragments
                ],
                "section_path": list(c.section_path),
                "token_count": c.token_count,
                "chunker": chunker,
            }
            for c in chunks
        ],
        schema=CHUNKS,
    )


def lexical_rows(chunks: pa.Table) -> pa.Table:
    """One lexical document per chunk: its folded text under the current analyzers."""
    d = chunks.select(["parse_id", "chunk_id", "text"]).to_pydict()
    return pa.table(
        {
            "parse_id": d["parse_id"],
            "chunk_id": d["chunk_id"],
            "folded_text": [fold(t) for t in d["text"]],
            "analyzer": [ANALYZER_ID] * len(d["text"]),
        },
        schema=LEXICAL_DOCUMENTS,
    )
