"""Lance tables under concurrent writers, in a local directory and on moto's S3 server (which
enforces the conditional writes Lance's commits rely on): each partition replace is one commit,
commits that race are retried, nothing is lost and nothing is doubled."""

from __future__ import annotations

import collections
import multiprocessing as mp
from pathlib import Path

import pyarrow as pa
import pytest

from fabric_resources.schema import LEXICAL_DOCUMENTS
from fabric_resources.tables import TableStore

ROUNDS = 5
PER_PARSE = 3
GROUPS = 2  # writers of disjoint partitions; one more writer replaces group 0's partitions too


def _parse_ids(group: int) -> list[str]:
    return [f"{group:04x}{i:012x}" for i in range(8)]


def _rows(parse_ids: list[str], tag: str) -> pa.Table:
    return pa.Table.from_pylist(
        [{"parse_id": p, "chunk_id": f"{p}-{i}", "folded_text": tag, "analyzer": "a"}
         for p in parse_ids for i in range(PER_PARSE)], schema=LEXICAL_DOCUMENTS)


def _store(spec: tuple[str, dict]) -> TableStore:
    root, options = spec
    return TableStore(root, options)


def _writer(spec: tuple[str, dict], group: int, writer: int, start, done) -> None:
    store = _store(spec)
    start.wait(60)
    for r in range(ROUNDS):
        store.replace_partitions("lexical_documents", _parse_ids(group), _rows(_parse_ids(group), f"w{writer}-r{r}"))
    done.put(writer)


@pytest.fixture(params=["local", "s3"])
def spec(request, tmp_path: Path) -> tuple[str, dict]:
    if request.param == "local":
        return str(tmp_path / "tables"), {}
    s3 = request.getfixturevalue("moto_s3")
    return f"s3://{s3.create_bucket('conc')}/tables", s3.storage_options()


def test_concurrent_partition_replaces_each_land_whole_exactly_once(spec):
    """guards against: a replace that is two commits (delete, then append): two writers replacing
    the same parse both append (rows doubled), and a reader between the two sees the parse gone;
    also against a commit that loses another writer's commit (a lost partition)."""
    store = _store(spec)
    everything = [p for g in range(GROUPS) for p in _parse_ids(g)]
    # All partitions start in one fragment, so every writer's first replace touches the same
    # fragment as every other's: their commits must conflict and be retried.
    first = store.replace_partitions("lexical_documents", everything, _rows(everything, "initial"))
    ctx = mp.get_context("spawn")  # lancedb's runtime is not fork-safe
    start, done = ctx.Event(), ctx.Queue()
    writers = [(g, g) for g in range(GROUPS)] + [(0, GROUPS)]  # (group, writer)
    procs = [ctx.Process(target=_writer, args=(spec, g, w, start, done)) for g, w in writers]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(240)
    assert [p.exitcode for p in procs] == [0] * len(procs)

    table = store.read("lexical_documents")
    keys = collections.Counter(zip(table.column("parse_id").to_pylist(), table.column("chunk_id").to_pylist()))
    assert set(keys) == {(p, f"{p}-{i}") for p in everything for i in range(PER_PARSE)}
    assert set(keys.values()) == {1}  # every row exactly once
    tags = collections.defaultdict(set)
    for p, t in zip(table.column("parse_id").to_pylist(), table.column("folded_text").to_pylist()):
        tags[p].add(t)
    for g in range(1, GROUPS):
        assert all(tags[p] == {f"w{g}-r{ROUNDS - 1}"} for p in _parse_ids(g))
    # Group 0 ends as one writer's last replace, whole: every partition of it carries the same tag.
    shared = {t for p in _parse_ids(0) for t in tags[p]}
    assert shared in ({f"w0-r{ROUNDS - 1}"}, {f"w{GROUPS}-r{ROUNDS - 1}"})
    # One commit per replace: none lost, none split in two.
    assert store.version("lexical_documents") == first + len(writers) * ROUNDS


FRESH_TABLES = 4  # tables created by racing writers, each a chance for a lost commit


def _first_writer(spec: tuple[str, dict], group: int, barrier, done) -> None:
    for k in range(FRESH_TABLES):
        store = _store((f"{spec[0]}/fresh-{k}", spec[1]))
        barrier.wait(60)  # every writer finds table k absent and creates it at the same moment
        store.replace_partitions("lexical_documents", _parse_ids(group), _rows(_parse_ids(group), f"w{group}"))
    done.put(group)


def test_writers_that_create_a_table_at_once_lose_nothing(spec):
    """guards against: Lance's ``mode="create"`` retrying a creator that lost the race as an
    Overwrite on top of the winner, which erased a partition another writer had committed in
    between (both parse runs reported success; seen on moto's S3 as a table missing one run's
    partitions, and as a second empty version after the first create)."""
    writers = 3
    ctx = mp.get_context("spawn")
    barrier, done = ctx.Barrier(writers), ctx.Queue()
    procs = [ctx.Process(target=_first_writer, args=(spec, g, barrier, done)) for g in range(writers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(240)
    assert [p.exitcode for p in procs] == [0] * writers
    for k in range(FRESH_TABLES):
        store = _store((f"{spec[0]}/fresh-{k}", spec[1]))
        table = store.read("lexical_documents")
        keys = collections.Counter(zip(table.column("parse_id").to_pylist(), table.column("chunk_id").to_pylist()))
        assert keys == {(p, f"{p}-{i}"): 1 for g in range(writers) for p in _parse_ids(g) for i in range(PER_PARSE)}, k
        # One create, then one commit per writer: no second create slipped in as an overwrite.
        assert store.version("lexical_documents") == 1 + writers, k
        assert store.count_rows("lexical_documents", 1) == 0


def test_a_local_table_never_committed_is_absent_and_a_lost_version_is_an_error(tmp_path):
    """guards against: a creator's empty directory read as a table (or as an error) by a racing
    writer, and the opposite: a pinned version that is gone read as an empty table by a fresh
    process (a release with no rows instead of 'restore the table')."""
    root = tmp_path / "tables"
    (root / "lexical_documents.lance").mkdir(parents=True)
    store = TableStore(root)
    assert not store.exists("lexical_documents") and store.dataset("lexical_documents") is None
    v = store.replace_partitions("lexical_documents", _parse_ids(0), _rows(_parse_ids(0), "x"))
    assert TableStore(root).count_rows("lexical_documents", v) == len(_parse_ids(0)) * PER_PARSE
    with pytest.raises(ValueError):
        TableStore(root).read("lexical_documents", version=v + 5)


def test_two_local_writers_adding_the_same_new_parse_land_it_once(tmp_path, monkeypatch):
    """guards against (hostile trial 9): two writers adding a parse the table does not hold yet
    (the daemon's parse run and `fabric ingest` running one pending parse at once) each committing
    it: their commits touch no common fragment, so Lance saw no conflict and the rows were doubled.
    The second writer now runs while the first is about to commit; it must wait, then replace."""
    import threading

    import lance

    root = tmp_path / "tables"
    TableStore(root).replace_partitions("lexical_documents", _parse_ids(1), _rows(_parse_ids(1), "other"))
    new = _parse_ids(0)[:1]
    real_commit = lance.LanceDataset.commit
    second: list[threading.Thread] = []

    def commit(*args, **kwargs):
        if not second:  # the first writer, computed and about to commit
            second.append(threading.Thread(target=lambda: TableStore(root).replace_partitions(
                "lexical_documents", new, _rows(new, "second"))))
            second[0].start()
            second[0].join(1.0)  # unserialised, it commits now; serialised, it waits for this commit
        return real_commit(*args, **kwargs)

    monkeypatch.setattr(lance.LanceDataset, "commit", staticmethod(commit))
    TableStore(root).replace_partitions("lexical_documents", new, _rows(new, "first"))
    second[0].join(30)
    table = TableStore(root).read("lexical_documents")
    rows = [(p, t) for p, t in zip(table.column("parse_id").to_pylist(), table.column("folded_text").to_pylist())
            if p in new]
    assert sorted(rows) == [(new[0], "second")] * PER_PARSE


def test_two_writers_of_an_s3_table_adding_the_same_new_parse_land_it_once(tmp_path, monkeypatch, request):
    """guards against (stop 42 left it): two hosts' runs adding a parse an S3 table does not hold
    yet both committing it (no common fragment, so Lance saw no conflict: rows doubled); the file
    lock serialising local writers binds one host only. Writers of an object store now hold the
    catalog's named lock, on PostgreSQL an advisory lock every host sees."""
    import threading

    import lance
    from conftest import open_test_catalog

    from fabric_resources.tables import table_lock_name

    s3 = request.getfixturevalue("moto_s3")
    root = f"s3://{s3.create_bucket('lock')}/tables"
    catalog = open_test_catalog("postgres", tmp_path, request)

    def host() -> TableStore:  # each "host" its own store and catalog connection
        return TableStore(root, s3.storage_options(), remote_write_lock=lambda name: catalog.exclusive(table_lock_name(name)))

    host().replace_partitions("lexical_documents", _parse_ids(1), _rows(_parse_ids(1), "other"))
    new = _parse_ids(0)[:1]
    real_commit = lance.LanceDataset.commit
    second: list[threading.Thread] = []

    def commit(*args, **kwargs):
        if not second:  # the first writer, computed and about to commit
            second.append(threading.Thread(target=lambda: host().replace_partitions(
                "lexical_documents", new, _rows(new, "second"))))
            second[0].start()
            second[0].join(1.0)  # unserialised, it commits now; serialised, it waits for this commit
        return real_commit(*args, **kwargs)

    monkeypatch.setattr(lance.LanceDataset, "commit", staticmethod(commit))
    host().replace_partitions("lexical_documents", new, _rows(new, "first"))
    second[0].join(60)
    table = host().read("lexical_documents")
    rows = [(p, t) for p, t in zip(table.column("parse_id").to_pylist(), table.column("folded_text").to_pylist())
            if p in new]
    assert sorted(rows) == [(new[0], "second")] * PER_PARSE
