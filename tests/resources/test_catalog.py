"""The catalog behind one interface: every test here (and the release tests in test_storage.py)
runs against SQLite and PostgreSQL alike (the ``catalog`` fixture of conftest.py), plus the
PostgreSQL schema's equivalence to SQLite's and what only a shared catalog must survive."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import open_test_catalog, reopened
from fabric_resources.catalog import (CatalogUnavailableError, PostgresCatalog, RootOverlapError, SourceRow,
                                      SqliteCatalog, StatusUpdate, drop_verdicts, merge_verdicts)

HASH = "ab" * 32


def _source(key: str, root_id: int, **kw) -> SourceRow:
    base = dict(source_key=key, root_id=root_id, rel_path=key.split("/", 1)[-1], state="present",
                media_type="text/plain", mtime_ns=1_733_000_000_123_456_789, size=10, source_hash=HASH,
                parse_id=None, first_seen=1_733_000_000.123456, last_seen=1_733_000_000.654321)
    return SourceRow(**{**base, **kw})


def _parse_run(catalog, pid: str) -> bool:
    with catalog.transaction(immediate=True) as con:
        return catalog.ensure_parse_run(con, parse_id=pid, source_hash=HASH, media_type="text/plain",
                                        parser_name="text", parser_version="1", parser_config_hash="c")


# ==========================================================================
# One suite, both backends


def test_roots_register_idempotently_and_refuse_overlaps(catalog, tmp_path):
    """guards against: a second root ID for the same folder, a nested root, or two roots with one label."""
    a, b = tmp_path / "x" / "notes", tmp_path / "y" / "notes"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    r1 = catalog.register_root(a)
    assert catalog.register_root(a) == r1
    r2 = catalog.register_root(b)
    assert r2.root_id != r1.root_id and r2.label != r1.label and r2.label.startswith("notes-")
    with pytest.raises(RootOverlapError):
        catalog.register_root(a / "inner")
    with pytest.raises(RootOverlapError):
        catalog.register_root(tmp_path / "x")
    assert catalog.roots() == [r1, r2]


def test_sources_round_trip_exactly_and_sort_by_code_point(catalog, tmp_path):
    """guards against: nanosecond mtimes or float timestamps losing precision (PostgreSQL's REAL is
    4 bytes), or source keys sorted by a locale's collation instead of code points as SQLite does."""
    root = catalog.register_root(tmp_path)
    keys = ["fs:r/b.txt", "fs:r/B.txt", "fs:r/é.txt", "fs:r/e.txt", "fs:r/日本.txt", "fs:r/a b.txt", "fs:r/_x.txt"]
    with catalog.transaction(immediate=True) as con:
        for k in keys:
            catalog.upsert_source(con, _source(k, root.root_id))
            catalog.record_acquisition(con, k, HASH, 1_733_000_000_123_456_789, 10)
    got = catalog.sources()
    assert [s.source_key for s in got] == sorted(keys)  # Python compares code points
    assert got[0] == _source(got[0].source_key, root.root_id)
    assert catalog.source("fs:r/日本.txt") == _source("fs:r/日本.txt", root.root_id)
    assert [a["mtime_ns"] for a in catalog.acquisitions("fs:r/é.txt")] == [1_733_000_000_123_456_789]


def test_upsert_updates_state_but_keeps_first_seen(catalog, tmp_path):
    """guards against: an upsert that overwrites first_seen or fails on an existing key."""
    root = catalog.register_root(tmp_path)
    with catalog.transaction(immediate=True) as con:
        catalog.upsert_source(con, _source("fs:r/a", root.root_id))
    with catalog.transaction(immediate=True) as con:
        catalog.upsert_source(con, _source("fs:r/a", root.root_id, state="deleted", first_seen=5.0, last_seen=9.5))
    s = catalog.source("fs:r/a")
    assert (s.state, s.first_seen, s.last_seen) == ("deleted", 1_733_000_000.123456, 9.5)
    assert catalog.sources(state="deleted") == [s] and catalog.sources(state="present") == []
    assert catalog.sources(root_id=root.root_id + 1) == []


def test_pointer_and_hidden_sources_in_one_read(catalog, tmp_path):
    """guards against: the query path's combined read missing the pointer or a state."""
    root = catalog.register_root(tmp_path)
    with catalog.transaction(immediate=True) as con:
        for k, state in [("fs:r/a", "present"), ("fs:r/b", "deleted"), ("fs:r/c", "access_lost")]:
            catalog.upsert_source(con, _source(k, root.root_id, state=state))
    assert catalog.pointer_and_source_keys_in(["deleted"]) == (None, {"fs:r/b"})
    r = catalog.publish_release({"tables": {}, "sources": {}}, None)
    assert catalog.pointer_and_source_keys_in(["deleted", "access_lost"]) == (r.release_id, {"fs:r/b", "fs:r/c"})
    assert catalog.pointer_and_source_keys_in([]) == (r.release_id, set())
    assert catalog.current_release_id() == r.release_id


def test_parse_runs_statuses_and_events(catalog):
    """guards against: a second pending run for one parse, or status changes without their events."""
    p = "0" * 16
    assert _parse_run(catalog, p) is True
    assert _parse_run(catalog, p) is False
    catalog.set_parse_statuses([StatusUpdate(p, "parsed", counts={"units": 3}, language="ja")])
    catalog.set_parse_status(p, "failed", reason="parser-error", detail="ValueError: x")
    run = catalog.parse_run(p)
    assert (run.status, run.reason, run.counts, run.language) == ("failed", "parser-error", {"units": 3}, "ja")
    assert [e["kind"] for e in catalog.events() if e["parse_id"] == p] == ["parse-parsed", "parse-failed"]
    assert catalog.parse_runs(status="failed") == [run] and catalog.parse_runs(status="ready") == []
    assert catalog.parse_run("f" * 16) is None


def test_light_reads_equal_the_full_ones(catalog):
    """guards against: a cleanup deciding on other states than the parse runs hold, or the last
    releases not being the newest ones in order (the cleanup and activation read these instead of
    decoding every run's verdicts and every release's manifest)."""
    for i, p in enumerate(("1" * 16, "2" * 16, "3" * 16)):
        _parse_run(catalog, p)
        catalog.set_parse_status(p, ("parsed", "failed", "ready")[i])
    assert catalog.parse_run_states() == [(r.parse_id, r.status, r.source_hash) for r in catalog.parse_runs()]
    base = None
    for n in range(4):
        base = catalog.publish_release({"tables": {}, "n": n, "sources": {}}, base).release_id
    every = catalog.releases()
    assert catalog.releases(last=2) == every[-2:] and catalog.releases(last=10) == every
    assert [r.manifest["n"] for r in every] == [0, 1, 2, 3]


def test_reads_in_the_database_equal_decoding_in_python(catalog, tmp_path):
    """guards against: activation or retention deciding on other digests, parses or manifests
    than the full reads give (they read these through each backend's JSON functions): a digest
    read from the wrong verdict, a parse of a release missed (its rows removed while pinned), a
    summary that lost a field or kept the sources."""
    runs = {"1" * 16: {"lexical": {"passed": True, "digest": "d1"}, "vec": {"passed": True, "digest": "v1"}},
            "2" * 16: {"lexical": {"passed": False, "detail": "no digest"}},
            "3" * 16: {},
            "4" * 16: {'we"ird': {"digest": "w"}, "vec": {"digest": None}}}
    for p, verdicts in runs.items():
        _parse_run(catalog, p)
        if verdicts:
            merge_verdicts(catalog, {p: verdicts})
    catalog.set_parse_status("1" * 16, "ready")
    names = ("lexical", "vec", "absent")
    got = catalog.parse_run_digests(names)
    full = catalog.parse_runs()
    assert [(d.parse_id, d.status, d.language) for d in got] == [(r.parse_id, r.status, r.language) for r in full]
    assert {d.parse_id: d.digests for d in got} == {
        r.parse_id: {n: (r.verdicts.get(n) or {}).get("digest") for n in names} for r in full}
    assert got[0].digests == {"lexical": "d1", "vec": "v1", "absent": None}
    # Verdicts rewritten behind Fabric's back, as non-JSON or as JSON of another type, name the
    # parse on both backends (an array read as "no digest", and the activation published without
    # it; non-JSON was SQLite's "malformed JSON").
    from fabric_resources.catalog import CatalogDamagedError

    good = full[1].verdicts
    for bad in ("[]", "{garbage", '"x"'):
        with catalog.transaction(immediate=True) as con:
            con.execute("UPDATE parse_runs SET verdicts = ? WHERE parse_id = ?", (bad, "2" * 16))
        with pytest.raises(CatalogDamagedError, match=f"parse run {'2' * 16}'s verdicts"):
            catalog.parse_run_digests(names)
    with catalog.transaction(immediate=True) as con:
        con.execute("UPDATE parse_runs SET verdicts = ? WHERE parse_id = ?", (json.dumps(good), "2" * 16))
    assert catalog.parse_run_digests(names) == got

    root = catalog.register_root(tmp_path)
    with catalog.transaction(immediate=True) as con:
        for key, state, pid in (("a", "present", "1" * 16), ("b", "deleted", "2" * 16), ("c", "access_lost", "3" * 16),
                                ("d", "present", None), ("e", "present", "1" * 16)):
            catalog.upsert_source(con, _source(f"fs:x/{key}", root.root_id, state=state, parse_id=pid))
    assert catalog.source_parse_ids(("present", "access_lost")) == {
        s.parse_id for s in catalog.sources() if s.state in ("present", "access_lost") and s.parse_id} == {"1" * 16, "3" * 16}
    assert catalog.source_parse_ids(()) == set()

    base = None
    # A parse named, dropped and named again (1), and one named by two releases in a row (3).
    for n, pids in enumerate((["1" * 16], ["1" * 16, "2" * 16], [], ["3" * 16, "4" * 16], ["1" * 16, "3" * 16])):
        manifest = {"n": n, "tables": {"chunks": n}, "lexical_generation": f"g{n}", "nested": {"x": [1, 2.5, None]},
                    "sources": {f"fs:x/{i}-{p}": {"parse_id": p, "media_type": "text/plain"} for i, p in enumerate(pids)}}
        base = catalog.publish_release(manifest, base).release_id
    every = catalog.releases()
    summaries = catalog.release_summaries()
    assert [(r.release_id, r.created_at) for r in summaries] == [(r.release_id, r.created_at) for r in every]
    assert [r.manifest for r in summaries] == [{k: v for k, v in r.manifest.items() if k != "sources"} for r in every]
    assert catalog.release_summaries(last=2) == summaries[-2:]
    many = [f"{i:016x}" for i in range(700)] + ["1" * 16, "4" * 16]  # more than one statement's IDs
    at = [r.release_id for r in every]
    for ids in ([at[0]], at[1:3], at, [], [at[2]], [at[0], at[2]], [at[2], at[4]], [at[3]], [at[4]]):
        named = {m["parse_id"] for r in every if r.release_id in ids for m in r.manifest["sources"].values()}
        assert catalog.release_parse_ids(ids) == named, ids
        for among in (["1" * 16, "2" * 16, "3" * 16, "5" * 16], many, []):
            assert catalog.release_parse_ids(ids, among=among) == named & set(among), (ids, len(among))


def test_the_parse_run_overview_is_the_parse_runs_without_verdicts_and_names_damage_alike(catalog):
    """guards against: fabric status's read of every parse run (verdicts checked by the database,
    not decoded in Python) reading another row than parse_runs(), or letting verdicts or counts
    through that parse_runs() refuses (status named them; hostile trial 2), on either backend."""
    from fabric_resources.catalog import CatalogDamagedError, ParseRunOverview

    for i, p in enumerate(("1" * 16, "2" * 16, "3" * 16)):
        _parse_run(catalog, p)
        merge_verdicts(catalog, {p: {"gate": {"passed": bool(i), "detail": "d", "digest": f"x{i}"}}})
    catalog.set_parse_statuses([StatusUpdate("1" * 16, "ready", counts={"failed_units": 2, "rows": {"chunks": 3}}),
                                StatusUpdate("2" * 16, "failed", reason="r", detail="why")])

    fields = ParseRunOverview._fields[:-1]

    def expected():
        return [(*(getattr(r, f) for f in fields), r.counts, r.counts.get("failed_units")) for r in catalog.parse_runs()]

    def overview():
        return [(*r[:-1], r.counts, r.failed_units) for r in catalog.parse_run_overview()]

    assert overview() == expected() and len(expected()) == 3 and expected()[0][-1] == 2
    # What Python reads and the database's JSON functions may not (NaN; SQLite 3.42+ reads JSON5,
    # which Python refuses) is decided by Python, as parse_runs() decides it; the empty verdicts too.
    for column, odd in (("verdicts", '{"gate": {"passed": NaN}}'), ("verdicts", ""), ("counts", '{"x": NaN}'),
                        ("counts", ""), ("counts", '{"f\\u0061iled_units": 1}')):
        with catalog.transaction(immediate=True) as con:
            con.execute(f"UPDATE parse_runs SET {column} = ? WHERE parse_id = ?", (odd, "3" * 16))
        assert str(overview()) == str(expected())  # str: NaN is not equal to itself
    for column, bad in (("verdicts", "{garbage"), ("verdicts", "[]"), ("verdicts", '"x"'), ("verdicts", "{a: 1}"),
                        ("counts", "{garbage"), ("counts", "[]")):
        good = {"verdicts": '{"gate": {"passed": true}}', "counts": "{}"}[column]
        with catalog.transaction(immediate=True) as con:
            con.execute(f"UPDATE parse_runs SET {column} = ? WHERE parse_id = ?", (bad, "2" * 16))
        with pytest.raises(CatalogDamagedError, match=f"parse run {'2' * 16}'s {column} in the catalog") as got:
            catalog.parse_run_overview()
        with pytest.raises(CatalogDamagedError) as want:
            catalog.parse_runs()
        assert str(got.value) == str(want.value)
        with catalog.transaction(immediate=True) as con:
            con.execute(f"UPDATE parse_runs SET {column} = ? WHERE parse_id = ?", (good, "2" * 16))
    assert str(overview()) == str(expected())


def test_the_source_overview_is_the_sources_four_columns_in_their_order(catalog, tmp_path):
    """guards against: fabric status's light read of every source (key, state, media type, parse
    ID) reading other rows or another order than sources() on either backend."""
    root = catalog.register_root(tmp_path)
    _parse_run(catalog, "1" * 16)
    with catalog.transaction(immediate=True) as con:
        for key, state, pid in (("b", "present", "1" * 16), ("a", "deleted", None), ("Z", "access_lost", "1" * 16),
                                ("é", "present", None)):
            catalog.upsert_source(con, _source(f"fs:x/{key}", root.root_id, state=state, parse_id=pid))
    assert catalog.source_overview() == [(s.source_key, s.state, s.media_type, s.parse_id) for s in catalog.sources()]
    assert [k for k, *_ in catalog.source_overview()] == ["fs:x/Z", "fs:x/a", "fs:x/b", "fs:x/é"]


def test_every_write_of_a_source_or_parse_run_gets_a_higher_change_number(catalog, tmp_path):
    """guards against: a write of a source or parse run (insert, update, status, verdicts merged or
    dropped) that keeps its old change number, which activation from the change would never read
    again; and reads since a number returning rows written before it."""
    root = catalog.register_root(tmp_path)
    n0, m0 = catalog.change_marks()
    names = ("lexical",)
    with catalog.transaction(immediate=True) as con:
        for key in ("a", "b", "c"):
            catalog.upsert_source(con, _source(f"fs:x/{key}", root.root_id))
    for pid in ("1" * 16, "2" * 16):
        _parse_run(catalog, pid)
    rows, n1 = catalog.sources_changed_after(n0)
    assert [s.source_key for s in rows] == ["fs:x/a", "fs:x/b", "fs:x/c"] and n1 == n0 + 3
    runs = catalog.parse_run_digests(names, changed_after=m0)
    assert sorted(r.parse_id for r in runs) == ["1" * 16, "2" * 16]
    m1 = max(r.change_seq for r in runs)
    assert catalog.change_marks() == (n1, m1)
    assert catalog.sources_changed_after(n1) == ([], n1) and catalog.parse_run_digests(names, changed_after=m1) == []

    with catalog.transaction(immediate=True) as con:  # an update (the upsert's conflict branch)
        catalog.upsert_source(con, _source("fs:x/b", root.root_id, state="deleted"))
    rows, n2 = catalog.sources_changed_after(n1)
    assert [(s.source_key, s.state) for s in rows] == [("fs:x/b", "deleted")] and n2 > n1
    seen = m1
    for write in (lambda: catalog.set_parse_status("1" * 16, "ready"),
                  lambda: merge_verdicts(catalog, {"2" * 16: {"lexical": {"passed": True, "digest": "d"}}}),
                  lambda: drop_verdicts(catalog, ["2" * 16], ["lexical"])):
        write()
        changed = catalog.parse_run_digests(names, changed_after=seen)
        assert len(changed) == 1 and changed[0].change_seq > seen
        seen = changed[0].change_seq
    assert not _parse_run(catalog, "1" * 16)  # an existing run is not written: no new number
    assert catalog.parse_run_digests(names, changed_after=seen) == []
    assert [r.parse_id for r in catalog.parse_run_digests(names, parse_ids=["2" * 16, "9" * 16])] == ["2" * 16]


def test_verdicts_merge_and_drop(catalog):
    """guards against: a merge that replaces earlier verdicts, or a drop that removes others' names."""
    p = "1" * 16
    _parse_run(catalog, p)
    merge_verdicts(catalog, {p: {"a": {"passed": True}}})
    merge_verdicts(catalog, {p: {"b": {"passed": False, "detail": "x"}}})
    assert catalog.parse_run(p).verdicts == {"a": {"passed": True}, "b": {"passed": False, "detail": "x"}}
    drop_verdicts(catalog, [p, "2" * 16], ["a"])
    assert catalog.parse_run(p).verdicts == {"b": {"passed": False, "detail": "x"}}
    with pytest.raises(KeyError):
        merge_verdicts(catalog, {"3" * 16: {"a": {"passed": True}}})


def test_state_round_trips_json(catalog):
    """guards against: named state losing JSON types, or an update inserting a second row."""
    assert catalog.state("x") is None
    catalog.set_state("x", {"a": [1, 2.5, None, "é"]})
    catalog.set_state("x", {"a": [3]})
    assert catalog.state("x") == {"a": [3]}


def test_a_failed_transaction_leaves_nothing(catalog, tmp_path):
    """guards against: writes of a transaction that raised becoming visible (no rollback)."""
    root = catalog.register_root(tmp_path)
    with pytest.raises(ZeroDivisionError):
        with catalog.transaction(immediate=True) as con:
            catalog.upsert_source(con, _source("fs:r/a", root.root_id))
            catalog.log_event(con, "source-new", source_key="fs:r/a")
            1 / 0
    assert catalog.sources() == [] and catalog.events("source-new") == []
    with catalog.transaction(immediate=True) as con:  # the connection is usable again
        catalog.upsert_source(con, _source("fs:r/a", root.root_id))
    assert len(catalog.sources()) == 1


def test_read_modify_writes_from_many_threads_lose_nothing(catalog):
    """guards against: immediate transactions that do not serialise (two merges reading the same
    verdicts and the second overwriting the first: a lost update)."""
    p = "4" * 16
    _parse_run(catalog, p)
    errors = []

    def work(t: int) -> None:
        try:
            for i in range(15):
                merge_verdicts(catalog, {p: {f"t{t}-{i}": {"passed": True}}})
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert set(catalog.parse_run(p).verdicts) == {f"t{t}-{i}" for t in range(4) for i in range(15)}


def test_racing_publishers_never_share_a_base(catalog):
    """guards against: two activations both publishing on the same current release (the pointer's
    compare-and-swap not atomic)."""
    won: list[tuple[int | None, int]] = []
    lock = threading.Lock()

    def publisher(n: int) -> None:
        for _ in range(8):
            base = catalog.current_release_id()
            try:
                r = catalog.publish_release({"sources": {}, "tables": {}, "by": n}, expected_current=base)
            except RuntimeError:
                continue
            with lock:
                won.append((base, r.release_id))

    threads = [threading.Thread(target=publisher, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bases = [b for b, _ in won]
    assert len(bases) == len(set(bases))  # each base was published on once
    assert len(catalog.releases()) == len(won) and catalog.current_release_id() == max(r for _, r in won)
    # The releases form one chain from the first.
    assert sorted(bases, key=lambda b: -1 if b is None else b) == [None, *sorted(r for _, r in won)[:-1]]


def test_exclusive_lock_excludes_across_handles(catalog):
    """guards against: a named lock that two holders take at once (e.g. a PostgreSQL lock taken
    inside a pooled transaction, or a file lock shared by handles)."""
    order: list[str] = []
    held = threading.Event()

    def first() -> None:
        with catalog.exclusive("activation"):
            order.append("first-in")
            held.set()
            time.sleep(0.4)
            order.append("first-out")

    t = threading.Thread(target=first)
    t.start()
    held.wait(10)
    other = reopened(catalog, read_only=False)
    with other.exclusive("activation"):
        order.append("second-in")
    t.join()
    assert order == ["first-in", "first-out", "second-in"]
    with catalog.exclusive("ingest"), other.exclusive("activation"):  # other names do not wait
        pass
    with pytest.raises(ValueError):
        with catalog.exclusive("../x"):
            pass


_HOLD = """
import sys, time
from fabric_resources.catalog import PostgresCatalog, SqliteCatalog
c = SqliteCatalog(sys.argv[2]) if sys.argv[1] == "sqlite" else PostgresCatalog(sys.argv[2], schema=sys.argv[3])
with c.exclusive("activation"):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_killed_holder_frees_the_lock(catalog):
    """guards against: a lock that outlives a killed holder (every later activation would hang)."""
    args = (["sqlite", str(catalog.path), ""] if isinstance(catalog, SqliteCatalog)
            else ["postgres", catalog.url, catalog.schema])
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, *args], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        acquired = threading.Event()

        def take() -> None:
            with catalog.exclusive("activation"):
                acquired.set()

        t = threading.Thread(target=take, daemon=True)
        t.start()
        assert not acquired.wait(0.5)  # held by the child
        proc.send_signal(signal.SIGKILL)
        assert acquired.wait(20)
    finally:
        proc.kill()
        proc.wait()


# ==========================================================================
# PostgreSQL only


def _sqlite_schema(path: Path) -> dict:
    import sqlite3

    con = sqlite3.connect(path)
    types = {"TEXT": "text", "INTEGER": "integer", "REAL": "float"}
    out = {}
    for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
        cols = con.execute(f"PRAGMA table_info({table})").fetchall()
        uniques = set()
        for idx in con.execute(f"PRAGMA index_list({table})").fetchall():
            if idx[2] and idx[3] == "u":  # unique constraints, not primary keys
                uniques.add(tuple(r[2] for r in con.execute(f"PRAGMA index_info({idx[1]})")))
        fks = {(r[3], r[2], r[4]) for r in con.execute(f"PRAGMA foreign_key_list({table})")}
        out[table] = {
            "columns": [(c[1], types[c[2]], bool(c[3]) or bool(c[5]), c[4]) for c in cols],
            "primary_key": tuple(c[1] for c in sorted(cols, key=lambda c: c[5]) if c[5]),
            "unique": uniques, "foreign_keys": fks,
        }
    indexes = {(r[0], r[1]) for r in con.execute(
        "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")}
    con.close()
    return {"tables": out, "indexes": indexes}


def _postgres_schema(catalog: PostgresCatalog) -> dict:
    types = {"text": "text", "bigint": "integer", "double precision": "float"}
    out = {}
    with catalog.transaction() as con:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ? ORDER BY table_name",
            (catalog.schema,)).fetchall()]
        for table in tables:
            cols = con.execute(
                """SELECT column_name, data_type, is_nullable, column_default, collation_name
                   FROM information_schema.columns WHERE table_schema = ? AND table_name = ?
                   ORDER BY ordinal_position""", (catalog.schema, table)).fetchall()
            assert all(c[4] == "C" for c in cols if c[1] == "text"), table  # code-point order
            constraints = con.execute(
                """SELECT tc.constraint_type, tc.constraint_name, kcu.column_name
                   FROM information_schema.table_constraints tc
                   JOIN information_schema.key_column_usage kcu
                     ON kcu.constraint_name = tc.constraint_name AND kcu.table_schema = tc.table_schema
                   WHERE tc.table_schema = ? AND tc.table_name = ? ORDER BY kcu.ordinal_position""",
                (catalog.schema, table)).fetchall()
            by_name: dict[tuple[str, str], list[str]] = {}
            for kind, name, col in constraints:
                by_name.setdefault((kind, name), []).append(col)
            fks = set()
            for r in con.execute(
                    """SELECT kcu.column_name, ccu.table_name, ccu.column_name
                       FROM information_schema.referential_constraints rc
                       JOIN information_schema.key_column_usage kcu ON kcu.constraint_name = rc.constraint_name
                       JOIN information_schema.constraint_column_usage ccu ON ccu.constraint_name = rc.unique_constraint_name
                       WHERE kcu.table_schema = ? AND kcu.table_name = ?""", (catalog.schema, table)).fetchall():
                fks.add((r[0], r[1], r[2]))
            pk = next((tuple(v) for (k, _), v in by_name.items() if k == "PRIMARY KEY"), ())

            def default(value):
                # SQLite reports a literal default as written ('{}'); PostgreSQL adds a cast.
                return value.split("::")[0] if value else None

            out[table] = {
                "columns": [(c[0], types[c[1]], c[2] == "NO", default(c[3])) for c in cols],
                "primary_key": pk,
                "unique": {tuple(v) for (k, _), v in by_name.items() if k == "UNIQUE"},
                "foreign_keys": fks,
            }
        indexes = {(r[0], r[1]) for r in con.execute(
            "SELECT indexname, tablename FROM pg_indexes WHERE schemaname = ? AND indexname NOT LIKE '%%_pkey' "
            "AND indexname NOT LIKE '%%_key'", (catalog.schema,)).fetchall()}
    return {"tables": out, "indexes": indexes}


def test_postgres_schema_is_the_sqlite_schema(tmp_path, request):
    """guards against: the two DDLs drifting apart — a table, column, type class, NOT NULL,
    default, key, foreign key or index that only one backend has."""
    sqlite = open_test_catalog("sqlite", tmp_path, request)
    pg = open_test_catalog("postgres", tmp_path, request)
    a, b = _sqlite_schema(sqlite.path), _postgres_schema(pg)
    assert set(a["tables"]) == set(b["tables"])
    for table in a["tables"]:
        assert a["tables"][table] == b["tables"][table], table
    assert a["indexes"] == b["indexes"]


def test_postgres_unreachable_is_a_typed_error_without_the_password(postgres_server):
    """guards against: a raw driver exception (or the URL's password) escaping when the server is down."""
    from fabric_assets.measurement.local_services import free_port

    url = f"postgresql://fabric:s3cret-pw@127.0.0.1:{free_port()}/nope"
    with pytest.raises(CatalogUnavailableError) as err:
        PostgresCatalog(url, schema="x")
    assert "s3cret-pw" not in str(err.value) and "127.0.0.1" in str(err.value)


def test_postgres_catalog_survives_its_connections_being_killed(tmp_path, request):
    """guards against: pooled connections that the server closed (a restart, an idle timeout)
    failing every later transaction of a long-lived process."""
    catalog = open_test_catalog("postgres", tmp_path, request)
    catalog.set_state("x", 1)
    import psycopg2

    killer = psycopg2.connect(catalog.url)  # not the catalog's own pool
    try:
        with killer.cursor() as cur:
            cur.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE application_name = 'fabric' AND datname = current_database()")
            killed = cur.fetchone()[0]
    finally:
        killer.close()
    assert killed >= 1
    assert catalog.state("x") == 1
    catalog.set_state("x", 2)
    assert catalog.state("x") == 2


def test_postgres_catalogs_in_two_schemas_are_apart(tmp_path, request):
    """guards against: two homes on one database seeing each other's releases or locks."""
    a = open_test_catalog("postgres", tmp_path, request)
    b = open_test_catalog("postgres", tmp_path, request)
    a.publish_release({"sources": {}, "tables": {}, "n": 1}, None)
    assert b.current_release() is None and a.current_release() is not None
    with a.exclusive("activation"), b.exclusive("activation"):
        pass


def _merge_in_process(url: str, schema: str, n: int) -> None:
    c = PostgresCatalog(url, schema=schema)
    for i in range(10):
        merge_verdicts(c, {"5" * 16: {f"p{n}-{i}": {"passed": True}}})


def test_postgres_read_modify_writes_from_processes_lose_nothing(tmp_path, request):
    """guards against: serialisation that holds only inside one process (several hosts share this catalog)."""
    catalog = open_test_catalog("postgres", tmp_path, request)
    _parse_run(catalog, "5" * 16)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_merge_in_process, args=(catalog.url, catalog.schema, n)) for n in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert len(catalog.parse_run("5" * 16).verdicts) == 30


def test_sqlite_activation_lock_is_the_homes_file(tmp_path):
    """guards against: the default catalog's locks moving away from the files older Fabric
    processes on the same home lock (``<home>/activation.lock``, ``<home>/ingest.lock``)."""
    import fcntl

    catalog = SqliteCatalog(tmp_path / "catalog.sqlite3")
    with catalog.exclusive("activation"):
        with open(tmp_path / "activation.lock", "a+") as fh, pytest.raises(BlockingIOError):
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert os.path.exists(tmp_path / "activation.lock")


_HOLD_INGEST = _HOLD.replace('"activation"', '"ingest"')


def test_lock_held_tells_a_live_holder_from_a_killed_one(catalog):
    """guards against (trial 18c): ``fabric status`` unable to tell a running ingest from an
    interrupted one. A child process holds the ingest lock: ``lock_held`` says so (and takes
    nothing: the lock stays the child's); killed, it holds nothing."""
    args = (["sqlite", str(catalog.path), ""] if isinstance(catalog, SqliteCatalog)
            else ["postgres", catalog.url, catalog.schema])
    assert catalog.lock_held("ingest") is False  # never taken (no lock file yet: none is made)
    proc = subprocess.Popen([sys.executable, "-c", _HOLD_INGEST, *args], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        assert catalog.lock_held("ingest") is True and catalog.lock_held("ingest") is True
        assert catalog.lock_held("activation") is False
        proc.send_signal(signal.SIGKILL)
        proc.wait(20)
        assert catalog.lock_held("ingest") is False
        with catalog.exclusive("ingest"):  # the probe left it free
            pass
    finally:
        proc.kill()
        proc.wait()


def test_an_error_after_sqlite_ended_the_transaction_is_raised_as_it_is(tmp_path):
    """guards against (trial 21c): SQLite ends a transaction itself on some errors (a full disk,
    SQLITE_FULL); the catalog's ROLLBACK then raised `cannot rollback - no transaction is active`
    in its place, which the CLI named a damaged catalog. Rows of a transaction that fails still
    do not land."""
    import sqlite3

    catalog = SqliteCatalog(tmp_path / "catalog.sqlite3")
    full = sqlite3.OperationalError("database or disk is full")
    with pytest.raises(sqlite3.OperationalError, match="database or disk is full"):
        with catalog.transaction(immediate=True) as con:
            con.execute("ROLLBACK")  # as SQLite does on SQLITE_FULL
            raise full
    with pytest.raises(ValueError, match="body failed"):
        with catalog.transaction(immediate=True) as con:
            con.execute("INSERT INTO state(name, value) VALUES ('t21c', '1')")
            raise ValueError("body failed")
    assert catalog.state("t21c") is None
