"""The parse-ID index of a Lance table (``TableStore.index_parse_ids``) is an access path only:
with it, before it covers new fragments, and after replaces and deletes, every read by parse
gives exactly what a scan gives; and it is created and brought up to date at its thresholds."""

from __future__ import annotations

import random

import pyarrow as pa

from fabric_resources.schema import LEXICAL_DOCUMENTS
from fabric_resources.tables import PARSE_ID_INDEX, TableStore

TABLE = "lexical_documents"


def _rows(parse_ids: list[str], tag: str, per_parse: int = 4) -> pa.Table:
    return pa.Table.from_pylist(
        [{"parse_id": p, "chunk_id": f"{p}-{i}", "folded_text": f"{tag} {i}", "analyzer": "a"}
         for p in parse_ids for i in range(per_parse)], schema=LEXICAL_DOCUMENTS)


def _pid(i: int) -> str:
    return f"{i:032x}"


def _scan(store: TableStore, parse_ids: list[str]) -> list[tuple]:
    """The same rows by a scan that no index can answer: every row, filtered here."""
    whole = store.read(TABLE).to_pylist()
    wanted = set(parse_ids)
    return sorted((r["parse_id"], r["chunk_id"], r["folded_text"]) for r in whole if r["parse_id"] in wanted)


def _read(store: TableStore, parse_ids: list[str]) -> list[tuple]:
    t = store.read(TABLE, parse_ids=parse_ids)
    return sorted(zip(t.column("parse_id").to_pylist(), t.column("chunk_id").to_pylist(),
                      t.column("folded_text").to_pylist()))


def _read_streamed(store: TableStore, parse_ids: list[str]) -> list[tuple]:
    """The same read as a stream of batches of at most 3 rows (``read_batches``)."""
    rows = []
    for batch in store.read_batches(TABLE, parse_ids=parse_ids, columns=["parse_id", "chunk_id", "folded_text"],
                                    batch_rows=3):
        assert batch.num_rows <= 3
        rows += zip(*(batch.column(c).to_pylist() for c in ("parse_id", "chunk_id", "folded_text")))
    return sorted(rows)


def _indexed(store: TableStore) -> bool:
    return any(i["name"] == PARSE_ID_INDEX for i in store.dataset(TABLE).list_indices())


def test_reads_by_parse_equal_a_scan_with_the_index_at_every_stage(tmp_path):
    """guards against: an index that answers for rows replaced or deleted after it was built, or
    misses rows written since (fragments it does not cover), or a read that trusts it alone."""
    store = TableStore(tmp_path / "tables")
    rng = random.Random(7)
    parses = [_pid(i) for i in range(60)]
    store.replace_partitions(TABLE, parses[:40], _rows(parses[:40], "v0"))
    assert store.index_parse_ids(TABLE, min_rows=1000) is None  # 160 rows: below the threshold
    assert not _indexed(store)
    assert store.index_parse_ids(TABLE, min_rows=100) == "created"
    assert _indexed(store)
    version_before = store.version(TABLE)
    assert store.index_parse_ids(TABLE, min_rows=100) is None  # nothing written since
    assert store.version(TABLE) == version_before
    for step in range(12):
        # Replace some indexed parses, add new ones (fragments the index does not cover), drop some.
        replaced = rng.sample(parses[:40], 5)
        added = parses[40 + step:41 + step]
        store.replace_partitions(TABLE, replaced + added, _rows(replaced + added, f"v{step + 1}"))
        dropped = rng.sample(parses, 2)
        store.delete_partitions(TABLE, dropped)
        probe = rng.sample(parses, 7) + ["f" * 32]
        assert _read(store, probe) == _scan(store, probe) == _read_streamed(store, probe), step
        if step == 5:
            assert store.index_parse_ids(TABLE, min_rows=20) == "updated"
            assert store.dataset(TABLE).stats.index_stats(PARSE_ID_INDEX)["num_unindexed_rows"] == 0
    # The index is used: Lance's plan for a read by parse names it.
    plan = store.dataset(TABLE).scanner(filter=f"parse_id = '{parses[0]}'", columns=["chunk_id"]).explain_plan()
    assert PARSE_ID_INDEX in plan
    assert _read(store, parses) == _scan(store, parses) == _read_streamed(store, parses)
    assert _read_streamed(store, []) == []


def test_an_older_version_read_by_parse_is_unchanged_by_a_later_index(tmp_path):
    """guards against: the index commit altering the rows of a pinned version (a release reads
    the versions it pinned, which may predate the index)."""
    store = TableStore(tmp_path / "tables")
    parses = [_pid(i) for i in range(30)]
    pinned = store.replace_partitions(TABLE, parses, _rows(parses, "old"))
    before = store.read(TABLE, parse_ids=parses[:3], version=pinned).to_pylist()
    assert store.index_parse_ids(TABLE, min_rows=10) == "created"
    store.replace_partitions(TABLE, parses[:3], _rows(parses[:3], "new"))
    assert store.read(TABLE, parse_ids=parses[:3], version=pinned).to_pylist() == before
    assert {r["folded_text"].split()[0] for r in store.read(TABLE, parse_ids=parses[:3]).to_pylist()} == {"new"}


def _fragment_ids(store: TableStore) -> list[int]:
    return [f.fragment_id for f in store.dataset(TABLE).get_fragments()]


def test_merging_small_fragments_keeps_every_row_and_leaves_large_fragments_alone(tmp_path):
    """guards against: a fragment merge that loses, duplicates or revives a row, breaks reads by
    parse through the index, alters a pinned older version, runs below its threshold, or rewrites
    fragments that are already large (its cost must follow the small fragments, not the table)."""
    from fabric_resources.tables import PARSE_ID_INDEX_ROWS

    store = TableStore(tmp_path / "tables")
    big = [_pid(i) for i in range(PARSE_ID_INDEX_ROWS // 4 + 1)]  # one fragment of > 4,096 rows
    store.replace_partitions(TABLE, big, _rows(big, "big"))
    large_fragment = _fragment_ids(store)[0]
    small = [_pid(10**6 + i) for i in range(24)]
    for i, p in enumerate(small):  # one commit, one small fragment each
        store.replace_partitions(TABLE, [p], _rows([p], f"s{i}"))
    store.delete_partitions(TABLE, small[::5] + big[:3])
    assert store.index_parse_ids(TABLE, min_rows=10) == "created"
    pinned = store.version(TABLE)
    whole_before = sorted(map(tuple, (r.values() for r in store.read(TABLE).to_pylist())))
    assert len(_fragment_ids(store)) == 20  # a fragment whose rows were all deleted is dropped
    assert not store.merge_fragments(TABLE, max_fragments=20)  # at the threshold: nothing to do
    assert store.version(TABLE) == pinned
    assert store.merge_fragments(TABLE, max_fragments=16)
    after = _fragment_ids(store)
    assert large_fragment in after and len(after) <= 3
    assert sorted(map(tuple, (r.values() for r in store.read(TABLE).to_pylist()))) == whole_before
    probe = big[:5] + small[:7] + ["f" * 32]
    assert _read(store, probe) == _scan(store, probe)
    plan = store.dataset(TABLE).scanner(filter=f"parse_id = '{big[5]}'", columns=["chunk_id"]).explain_plan()
    assert PARSE_ID_INDEX in plan  # Lance remapped the index onto the merged fragments
    assert sorted(map(tuple, (r.values() for r in store.read(TABLE, version=pinned).to_pylist()))) == whole_before
    assert not store.merge_fragments(TABLE, max_fragments=16)
