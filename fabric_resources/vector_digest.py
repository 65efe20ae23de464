"""Digests of dense vector rows: recorded when the vectors are written, bound into the release,
recomputed by the reader.

* **parse digest** — SHA-256 (hex) over one parse's rows of one vector table in chunk-ID order:
  ``f"{n}\n"``, then ``chunk_id + "\x1f" + model + "\x1f"`` for each row, ``"\n"``, then the
  ``n`` vectors as little-endian float32, row after row (chunk and model identities never hold
  ``\x1f``: they are hex digests and ``name@version#hash`` strings, so the encoding is
  unambiguous).
* **table digest** — SHA-256 (hex) over ``f"{parse_id}:{parse digest}\\n"`` for every active parse
  of a release, in parse-ID order; a parse with no row in the table contributes the digest of zero
  rows.

The dense assets record each parse's digest with its gate verdict (which verdict, per table, is
the write side's projection registry: ``VECTOR_DIGEST_VERDICTS``), activation combines the active parses' digests into the release manifest under
``MANIFEST_KEY``, and the query side recomputes the table digest from the rows it loads: a
vector file altered after it was written (flipped bytes, swapped rows, rows added or removed)
gives another digest and the channel is skipped with a named reason instead of serving it.

Releases published since stop 56 also record each active parse's digest under
``PARSES_MANIFEST_KEY``. The reader trusts that map only where it gives back the table digest
(:func:`recorded_parse_digests`), and then checks each parse's rows on their own: a parse whose
rows do not give its digest is left out of dense ranking (its chunks stay findable through the
lexical channels) while every other parse is still served, and a reader need read only the parses
it may see, so a damaged parse of a withheld source changes nothing it is shown. A release without
the map (an older home) is checked as a whole, as before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Release-manifest key: ``{table: table digest, or None when a parse has no recorded digest}``.
MANIFEST_KEY = "vector_digests"
#: Release-manifest key: ``{table: {parse ID: parse digest}}`` for each table whose table digest
#: is recorded (releases published before stop 56 have none).
PARSES_MANIFEST_KEY = "vector_parse_digests"

def _digest(n: int, header: bytes | memoryview, vectors: np.ndarray) -> str:
    h = hashlib.sha256(f"{n}\n".encode())
    h.update(header)
    h.update(b"\n")
    h.update(np.ascontiguousarray(vectors, dtype="<f4").tobytes())
    return h.hexdigest()


#: The parse digest of a parse that has no row in the table.
EMPTY_PARSE_DIGEST = _digest(0, b"", np.zeros((0, 0), dtype=np.float32))


def _strings(values) -> pa.Array | pa.ChunkedArray:
    return values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values, pa.string())


def parse_digests(
    parse_ids: Sequence[str] | pa.Array | pa.ChunkedArray, chunk_ids: Sequence[str] | pa.Array | pa.ChunkedArray,
    models: Sequence[str] | pa.Array | pa.ChunkedArray, vectors: np.ndarray,
) -> dict[str, str]:
    """Parse digest of every parse present in the rows, whatever their order.

    Parameters
    ----------
    parse_ids, chunk_ids, models
        One entry per row (``n`` rows); Python sequences or Arrow string arrays.
    vectors
        ``(n, d) float32``; row ``i`` is the vector of ``chunk_ids[i]``.

    The sort and the per-row identity bytes stay in Arrow (no Python string per row): at 100k rows
    this is dominated by hashing the 150 MB of vectors.
    """
    n = len(chunk_ids)
    if n == 0:
        return {}
    keys = pa.table({"p": _strings(parse_ids), "c": _strings(chunk_ids), "m": _strings(models)})
    order = pc.sort_indices(keys, sort_keys=[("p", "ascending"), ("c", "ascending")])
    keys = keys.take(order)
    rows = order.to_numpy()
    header = pc.binary_join_element_wise(keys.column("c"), keys.column("m"), pa.scalar("", pa.string()), "\x1f")
    header = header.combine_chunks().cast(pa.large_string())
    offsets = np.frombuffer(header.buffers()[1], dtype=np.int64)[header.offset:header.offset + n + 1]
    data = memoryview(header.buffers()[2]) if header.buffers()[2] is not None else memoryview(b"")
    runs = pc.run_end_encode(keys.column("p").combine_chunks())
    ends = runs.run_ends.to_numpy()
    out: dict[str, str] = {}
    start = 0
    for pid, end in zip(runs.values.to_pylist(), ends.tolist()):
        out[pid] = _digest(end - start, data[offsets[start]:offsets[end]], vectors[rows[start:end]])
        start = end
    return out


def table_digest(per_parse: Mapping[str, str], active_parse_ids: Iterable[str]) -> str:
    """The table digest over ``active_parse_ids`` (see the module docstring)."""
    get = per_parse.get
    # One update of the joined lines: the same bytes as an update per line, fewer Python calls.
    lines = "".join([f"{pid}:{get(pid, EMPTY_PARSE_DIGEST)}\n" for pid in sorted(set(active_parse_ids))])
    return hashlib.sha256(lines.encode()).hexdigest()


def manifest_digests(digests_by_parse: Mapping[str, Mapping[str, Any]], active_parse_ids: Iterable[str],
                     verdict_of_table: Mapping[str, str]) -> dict[str, str | None]:
    """``MANIFEST_KEY`` value for a release whose active parses are ``active_parse_ids``.

    ``digests_by_parse``: parse ID → {verdict name: that verdict's ``digest``} as recorded
    (:meth:`Catalog.parse_run_digests`); ``verdict_of_table``: vector table → the verdict whose
    ``digest`` is a parse's digest of that table. A table whose active parses do not all carry a
    digest (vectors written before digests existed) gets ``None``: the reader then serves it
    unverified (finite, unit-norm values only).
    """
    active = sorted(set(active_parse_ids))
    of_parse = [digests_by_parse.get(pid, {}) for pid in active]
    out: dict[str, str | None] = {}
    for table, verdict_name in verdict_of_table.items():
        found = [d.get(verdict_name) for d in of_parse]
        if all(isinstance(d, str) for d in found):
            out[table] = table_digest(dict(zip(active, found)), active)
        else:
            out[table] = None
    return out


def manifest_parse_digests(digests_by_parse: Mapping[str, Mapping[str, Any]], active_parse_ids: Iterable[str],
                           verdict_of_table: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """``PARSES_MANIFEST_KEY`` value for a release whose active parses are ``active_parse_ids``:
    per table, each active parse's recorded digest (arguments as :func:`manifest_digests`); a
    table :func:`manifest_digests` gives ``None`` is left out."""
    active = sorted(set(active_parse_ids))
    out: dict[str, dict[str, str]] = {}
    for table, verdict_name in verdict_of_table.items():
        found = [digests_by_parse.get(pid, {}).get(verdict_name) for pid in active]
        if all(isinstance(d, str) for d in found):
            out[table] = dict(zip(active, found))
    return out


def recorded_parse_digests(manifest: Mapping[str, Any], table: str, release_parse_ids: Iterable[str]
                           ) -> dict[str, str] | None:
    """Each parse's recorded digest of ``table`` in a release manifest, or None: the release
    records none (published before they were), or a map that does not name exactly the release's
    parses or does not give back the table digest it recorded (a manifest rewritten by hand, or
    republished with new table digests only). The table digest binds the map, so a parse's digest
    read from it is the one its write recorded.
    """
    expected = (manifest.get(MANIFEST_KEY) or {}).get(table)
    per_parse = (manifest.get(PARSES_MANIFEST_KEY) or {}).get(table)
    if not isinstance(expected, str) or not isinstance(per_parse, dict):
        return None
    parses = set(release_parse_ids)
    if set(per_parse) != parses or not all(isinstance(d, str) for d in per_parse.values()):
        return None
    if table_digest(per_parse, parses) != expected:
        return None
    return dict(per_parse)


def parses_not_matching(found: Mapping[str, str], recorded: Mapping[str, str], parse_ids: Iterable[str]) -> set[str]:
    """Of ``parse_ids``, those whose rows (``found``: :func:`parse_digests` of the rows read; a
    parse with no row there has the digest of zero rows) do not give the digest ``recorded``."""
    return {pid for pid in parse_ids if found.get(pid, EMPTY_PARSE_DIGEST) != recorded.get(pid)}
