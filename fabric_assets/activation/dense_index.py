"""The dense ANN indexes of a release: which vector tables get one, built from the rows it pins.

Activation (and a purge, and ``fabric dense-index-repair``) calls :func:`dense_index_records`
with the table versions and active parses of the release it is about to publish; the records go
into its manifest under :data:`~fabric_resources.dense_index.MANIFEST_KEY`. Per vector table
(``query.dense_search``): ``exact`` builds nothing; ``ann`` builds an index; ``auto`` builds one
when the release holds at least ``auto_min_rows`` rows of the table. Tables with fewer than
:data:`~fabric_resources.dense_index.MIN_INDEX_ROWS` rows never get one. An index is built from
the pinned rows of the active parses only, after checking that their digest is the one the release
records. Where the release records each parse's digest (``vector_parse_digests``), a parse whose
rows do not give it is left out of the index (never indexed, so never ranked or scored) and named
in the record's ``left_out``; the others are indexed, so the reader keeps the index and leaves out
those parses alone, as its exact product does (a reader that may not see such a parse is told
nothing). Without that map, rows altered on disk get no index (the reader would skip them anyway).
An index is reused by the next release when its rows, digest and build settings are unchanged
and every parse it left out is still damaged (their rows alone are read; a release that only
changes annotations or other tables costs nothing here). Building one costs the whole table: the rows are
read into memory (twice their size during the sort) and Lance trains the index; the figures at 1M
rows are in docs/benchmarks.md ("Dense search at a million chunks").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fabric_resources.config import DenseSearchConfig
from fabric_resources.dense_index import (
    INDEXED_TABLES,
    MANIFEST_KEY,
    MIN_INDEX_ROWS,
    BuildSpec,
    DenseIndexUnusable,
    build_spec,
    generation_digest,
)
from fabric_resources.home import FabricHome
from fabric_resources.vector_digest import MANIFEST_KEY as VECTOR_DIGESTS
from fabric_resources.vector_digest import PARSES_MANIFEST_KEY as VECTOR_PARSE_DIGESTS
from fabric_resources.vector_digest import parse_digests, parses_not_matching, recorded_parse_digests, table_digest

#: ``skipped`` values of a record without an index.
SKIP_MODE_EXACT = "mode-exact"
SKIP_BELOW_AUTO = "below-auto-min-rows"
SKIP_TOO_FEW = "too-few-rows"
SKIP_DIGEST = "vector-digest-mismatch"


def skip_reason(config: DenseSearchConfig, rows: int) -> str | None:
    """Why a table of ``rows`` release rows gets no index under ``config`` (``None``: it gets one)."""
    if config.mode == "exact":
        return SKIP_MODE_EXACT
    if rows < MIN_INDEX_ROWS:
        return SKIP_TOO_FEW
    if config.mode == "auto" and rows < config.auto_min_rows:
        return SKIP_BELOW_AUTO
    return None


def skip_words(config: DenseSearchConfig, record: Mapping[str, Any]) -> str:
    """``record``'s ``skipped`` reason in words for the operator, with what answers instead
    (``fabric dense-index-repair`` printed the bare code: ``chunk_vectors: - -> none (too-few-rows)``)."""
    why, rows = record.get("skipped"), record.get("rows")
    count = f"{rows:,} rows" if isinstance(rows, int) else "its rows"
    if why == SKIP_MODE_EXACT:
        said = "query.dense_search.mode is exact"
    elif why == SKIP_TOO_FEW:
        said = f"{count}, fewer than the {MIN_INDEX_ROWS:,} an index is built from"
    elif why == SKIP_BELOW_AUTO:
        said = f"{count}, under query.dense_search.auto_min_rows ({config.auto_min_rows:,}) with mode auto"
    elif why == SKIP_DIGEST:
        return (f"no index ({why}: the vectors are not those the release's digest names): the channel is off "
                "until `fabric repair` re-embeds them")
    else:
        said = str(why)
    return f"no index ({said}): the exact product over every vector answers"


def _spec(config: DenseSearchConfig, rows: int) -> dict[str, Any]:
    return build_spec(config.index_type, rows, config.partition_rows, config.pq_sub_vectors, config.rq_bits).as_dict()


def _reusable(home: FabricHome, table: str, previous: Any, rows: int, digest: str | None, spec: dict,
              version: int | None, recorded: Mapping[str, str] | None) -> bool:
    if not isinstance(previous, Mapping) or not previous.get("generation") or digest is None:
        return False
    left = previous.get("left_out")
    if left:
        # Built without those parses: reused while each of them still does not give its recorded
        # digest (their rows alone are read; one repaired since gets the index rebuilt) and the
        # index holds the other parses' recorded rows.
        if recorded is None or not isinstance(left, list) or not set(left) <= set(recorded):
            return False
        theirs = home.tables.read_active(table, version, left, ["parse_id", "chunk_id", "model", "vector"])
        vectors = theirs.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False).reshape(
            theirs.num_rows, -1) if theirs.num_rows else np.zeros((0, 0), dtype=np.float32)
        found = parse_digests(theirs.column("parse_id"), theirs.column("chunk_id"), theirs.column("model"), vectors)
        if parses_not_matching(found, recorded, left) != set(left):
            return False
        rows -= theirs.num_rows
        digest = table_digest({p: d for p, d in recorded.items() if p not in set(left)}, recorded)
    if previous.get("rows") != rows or previous.get("digest") != digest or previous.get("spec") != spec:
        return False
    try:
        meta = home.dense_indexes.meta(table, previous["generation"])
    except DenseIndexUnusable:
        return False
    return all(meta.get(k) == previous.get(k) for k in ("rows", "digest", "spec", "windows"))


def active_rows(home: FabricHome, table: str, version: int | None, parse_ids: Iterable[str]) -> int:
    """Rows of ``parse_ids`` in ``table`` at ``version`` (reads the ``parse_id`` column only)."""
    if version is None:
        return 0
    return sum(b.num_rows for b in home.tables.read_active_batches(table, version, parse_ids, ["parse_id"]))


def dense_index_records(home: FabricHome, tables: Mapping[str, int | None], parse_ids: Iterable[str],
                        vector_digests: Mapping[str, str | None], previous: Mapping[str, Any] | None = None,
                        *, rebuild: bool = False,
                        vector_parse_digests: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, dict[str, Any]]:
    """The :data:`MANIFEST_KEY` value of a release whose active parses are ``parse_ids`` and whose
    table versions are ``tables``; builds the indexes it names that ``previous`` (the current
    release's records) does not already hold, or all of them with ``rebuild``.
    ``vector_parse_digests``: the release's ``vector_parse_digests`` (table → parse → digest), or
    None for a release without them.

    Each record: ``rows`` (the rows indexed) and either ``generation``, ``digest`` (of the rows
    indexed), ``windows``, ``spec``, ``format``, ``build_seconds`` of the index and, when some
    parse's rows did not give its recorded digest, ``left_out`` (those parse IDs, not indexed); or
    ``generation`` None and ``skipped`` (:func:`skip_reason`, or ``vector-digest-mismatch`` when
    the pinned rows are not those the release's digest names and it records no parse digests).
    """
    config = home.config.query.dense_search
    active = sorted(set(parse_ids))
    previous = previous or {}
    out: dict[str, dict[str, Any]] = {}
    for table in INDEXED_TABLES:
        version = tables.get(table)
        rows = active_rows(home, table, version, active)
        why = skip_reason(config, rows)
        if why is not None:
            out[table] = {"generation": None, "rows": rows, "skipped": why}
            continue
        spec = _spec(config, rows)
        digest = vector_digests.get(table)
        recorded = recorded_parse_digests({VECTOR_DIGESTS: vector_digests, VECTOR_PARSE_DIGESTS: vector_parse_digests or {}},
                                          table, active)
        if not rebuild and _reusable(home, table, previous.get(table), rows, digest, spec, version, recorded):
            out[table] = dict(previous[table])
            continue
        out[table] = build_table_index(home, table, tables, active, digest, BuildSpec(**spec), recorded=recorded)
    return out


def build_table_index(home: FabricHome, table: str, tables: Mapping[str, int | None], active: list[str],
                      digest: str | None, spec: BuildSpec, generation: str | None = None,
                      recorded: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Build ``table``'s index with ``spec`` over the rows of ``active`` at the versions ``tables``
    pins; return its record. ``recorded``: each active parse's digest, bound to ``digest``
    (:func:`~fabric_resources.vector_digest.recorded_parse_digests`), or None. When the rows'
    digest is not ``digest``: with ``recorded``, the parses whose rows do not give theirs are left
    out (``left_out``; a ``skipped`` record when the rest are too few for an index); without it, a
    ``skipped`` record. ``generation``: rebuild that one in place (a snapshot restore)."""
    data = home.tables.read_active(table, tables.get(table), active, ["parse_id", "chunk_id", "model", "vector"])
    vectors = (data.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
               .reshape(data.num_rows, -1) if data.num_rows else None)
    per_parse = (parse_digests(data.column("parse_id"), data.column("chunk_id"), data.column("model"), vectors)
                 if vectors is not None else {})
    found = table_digest(per_parse, active) if vectors is not None else None
    del vectors
    left_out: list[str] = []
    if digest is not None and found != digest:
        if recorded is None:
            return {"generation": None, "rows": data.num_rows, "skipped": SKIP_DIGEST}
        # Strict per parse, as the reader is: a damaged parse's rows are never indexed, the rest are.
        left_out = sorted(parses_not_matching(per_parse, recorded, active))
        data = data.filter(pc.invert(pc.is_in(data.column("parse_id"), value_set=pa.array(left_out, pa.string()))))
        found = table_digest({p: d for p, d in per_parse.items() if p not in left_out}, active)
        why = skip_reason(home.config.query.dense_search, data.num_rows)
        if why is not None:
            return {"generation": None, "rows": data.num_rows, "skipped": why, "left_out": left_out}
    windows = (home.tables.read_active("context_windows", tables["context_windows"], active,
                                       ["parse_id", "window_id", "chunk_ids"])
               if tables.get("context_windows") is not None else None)
    if windows is not None and left_out:
        windows = windows.filter(pc.invert(pc.is_in(windows.column("parse_id"), value_set=pa.array(left_out, pa.string()))))
    return home.dense_indexes.build(table, data, windows, spec, found, generation=generation, left_out=left_out)


def records_current(home: FabricHome, manifest: Mapping[str, Any]) -> bool:
    """True when ``manifest``'s dense index records are what the configuration wants for its rows
    now (so activation need not publish a release for them): every table has a record, built
    where it should be with today's build settings, its generation on disk."""
    config = home.config.query.dense_search
    records = manifest.get(MANIFEST_KEY)
    if not isinstance(records, Mapping):
        return False
    for table in INDEXED_TABLES:
        record = records.get(table)
        if not isinstance(record, Mapping) or not isinstance(record.get("rows"), int):
            return False
        why = skip_reason(config, record["rows"])
        if why is not None:
            if record.get("generation") is not None or record.get("skipped") != why:
                return False
            continue
        if record.get("skipped") == SKIP_DIGEST:
            continue  # rebuilding would find the same rows
        if not record.get("generation") or record.get("spec") != _spec(config, record["rows"]):
            return False
        try:
            home.dense_indexes.meta(table, record["generation"])
        except DenseIndexUnusable:
            return False
    return True


def serving_problem(home: FabricHome, table: str, record: Any, parse_ids: Iterable[str]) -> str | None:
    """Why the index generation ``record`` (a release's record of ``table``) would not serve that
    release, or None when it would: what a search checks (its meta against the record, each data
    file and the vector index readable) and the digest of every row it holds against the one
    recorded (bit flips in a file that still reads: ``dense-index-release-mismatch``), as a deep
    ``snapshot verify`` does. Reads every vector of the generation once; a record without a
    generation has nothing to check (None)."""
    if not isinstance(record, Mapping) or not record.get("generation"):
        return None
    try:
        opened = home.dense_indexes.open(table, record)
        opened.check_files()
        if generation_digest(opened, parse_ids) != record.get("digest"):
            raise DenseIndexUnusable("dense-index-release-mismatch",
                                     f"{table}/{record['generation']}: its rows' digest is not the one recorded")
    except DenseIndexUnusable as exc:
        return exc.describe()
    return None


def release_digests(manifest: Mapping[str, Any]) -> dict[str, str | None]:
    """The vector digests a release manifest records (table → digest or None)."""
    return dict(manifest.get(VECTOR_DIGESTS) or {})
