"""The annotation memo forgets with the parses it served: retention, purge and an in-place
snapshot restore leave no entry whose text only a removed parse held.

The memo (``annotation_memo.sqlite3``) keeps grounded chain outputs: entity names, statements and
quotes copied from the excerpt, summaries. Real Dagster runs annotate through a local
OpenAI-compatible server (``tests/fake_openai_server.py``), whose statements are the excerpt's
sentences verbatim, so a sentence of a secret file is a needle the byte walk can find.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest
from conftest import ingest
from fake_openai_server import FakeChatServer

from fabric_assets.annotations.assets import MEMO_FILE
from fabric_assets.lifecycle.forgetting import adopt_memo_entries, delete_memo_entries, memo_keys_only_of
from fabric_assets.lifecycle.purge import PurgeSelector, purge
from fabric_assets.lifecycle.retention import cleanup
from fabric_assets.lifecycle.snapshots import create, restore
from fabric_resources.annotator.memo import AnnotationMemo
from fabric_resources.home import FabricHome

PUBLIC = ("The harbour master counted the herring boats at dawn. "
          "Lanterns swung above the quay while gulls argued over nets.\n")


def _secret(v: int) -> str:
    return (f"Quixotic zebras signed manifesto number {v} inside the copper vault. "
            f"The vault combination is {v}{v}7 Ophelia kettledrum and nobody writes it down.\n")


def _needles(v: int) -> list[bytes]:
    return [s.encode() for s in (f"Quixotic zebras signed manifesto number {v} inside the copper vault.",
                                 f"The vault combination is {v}{v}7 Ophelia kettledrum")]


def _configure(home: FabricHome, srv: FakeChatServer) -> None:
    (home.root / "config.json").write_text(json.dumps({
        "annotation": {"enabled": True, "call_retries": 1,
                       "endpoint": {"base_url": srv.base_url, "model": "fake-model", "timeout_s": 10}},
        # One release kept and no grace: a superseded parse goes at the next cleanup.
        "retention": {"releases": 1, "release_days": 0, "superseded_days": 0}}))


def _holding(root: Path, needles: list[bytes]) -> dict[bytes, list[str]]:
    """The files under ``root`` (WAL files included) holding each needle."""
    found: dict[bytes, list[str]] = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                for needle in needles:
                    if needle in data:
                        found.setdefault(needle, []).append(str(path.relative_to(root)))
    return found


def _memo_text(home: FabricHome) -> str:
    """Every payload in the memo, as stored."""
    con = sqlite3.connect(home.root / MEMO_FILE)
    try:
        return "\n".join(r[0] for r in con.execute("SELECT payload FROM annotation_memo"))
    finally:
        con.close()


def _ingest(src: Path, home: FabricHome):
    summary = ingest(src, FabricHome(home.root))
    assert summary.failed_runs == [] and summary.annotation_failed_runs == [], summary
    return summary


@pytest.mark.slow
def test_retention_then_purge_leave_no_annotated_text_of_any_version(tmp_path, fabric_home):
    """guards against: a superseded version's memo entries (its sentences, verbatim) outliving the
    parse retention removed; purge finding a source's memo entries through the annotation rows
    only, so a version retention had already taken out of the tables kept its text in the memo
    for good; either forgetting the entries another file's identical text still uses."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "harbour.txt").write_text(PUBLIC)
    (src / "twin.txt").write_text(_secret(9))  # same text as the secret's last version, kept
    with FakeChatServer() as srv:
        _configure(fabric_home, srv)
        (src / "secret.txt").write_text(_secret(0))
        _ingest(src, fabric_home)
        assert "Quixotic zebras signed manifesto number 0" in _memo_text(fabric_home)  # sensitive
        (src / "secret.txt").write_text(_secret(9))
        _ingest(src, fabric_home)
        cleanup(FabricHome(fabric_home.root), now=time.time() + 60)  # (after activation, it ran already)
        chunks = FabricHome(fabric_home.root).tables.read("chunks", columns=["text"]).column("text").to_pylist()
        assert not any("number 0" in t for t in chunks) and any("number 9" in t for t in chunks)
        # Retention took version 0 out of every table: its memo entries go with it.
        assert "number 0" not in _memo_text(fabric_home)
        assert "number 9" in _memo_text(fabric_home) and "herring" in _memo_text(fabric_home)

        (src / "secret.txt").unlink()
        _ingest(src, fabric_home)
        home = FabricHome(fabric_home.root)
        keys = ("fs:src/secret.txt", "fs:src/twin.txt")
        # The twin, still present, shares every memo entry with the secret: purging the secret
        # alone keeps them. (A deleted twin would hold nothing: its text would go with the secret.)
        purge(home, PurgeSelector(source_keys=keys[:1]))
        assert "number 9" in _memo_text(fabric_home)
        (src / "twin.txt").unlink()
        _ingest(src, fabric_home)
        report = purge(FabricHome(fabric_home.root), PurgeSelector(source_keys=keys[1:]))
        assert report.memo_entries_removed > 0
    assert _holding(fabric_home.root, _needles(0) + _needles(9)) == {}
    assert "herring" in _memo_text(fabric_home)  # the public file's entries stay


@pytest.mark.slow
def test_an_in_place_restore_forgets_the_memo_entries_of_what_came_after(tmp_path, fabric_home):
    """guards against: a restore reading the memo keys to forget from the annotation rows it has
    just put back (which never held the later parses), leaving a file ingested after the snapshot
    in the memo, verbatim."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "harbour.txt").write_text(PUBLIC)
    with FakeChatServer() as srv:
        _configure(fabric_home, srv)
        _ingest(src, fabric_home)
        first = create(FabricHome(fabric_home.root))
        (src / "secret.txt").write_text(_secret(3))
        _ingest(src, fabric_home)
        assert "number 3" in _memo_text(fabric_home)  # sensitive
        (src / "secret.txt").unlink()  # only the home holds it now
        restore(FabricHome(fabric_home.root), first.snapshot_id)
    assert "number 3" not in _memo_text(fabric_home) and "herring" in _memo_text(fabric_home)
    assert _holding(fabric_home.root, _needles(3)) == {}


def test_an_entry_is_forgotten_with_the_last_parse_that_used_it_rows_or_no_rows(fabric_home):
    """guards against: finding a parse's memo entries through its annotation rows only (a run
    stopped after its chains were memoised wrote none, and its text stayed); forgetting an entry
    another parse found and still uses; an entry from before uses were recorded being taken."""
    path = fabric_home.layout.annotation_memo
    with AnnotationMemo(path) as memo:
        memo.put("k-mine", {"items": ["Ophelia kettledrum"]}, producer="p", chain="entities", parse_id="A")
        memo.put("k-shared", {"items": ["herring"]}, producer="p", chain="entities", parse_id="A")
        assert memo.get("k-shared", parse_id="B") is not None  # B found A's entry: B uses it too
        memo.put("k-older", {"items": ["lantern"]}, producer="p", chain="entities")  # no user recorded
    assert memo_keys_only_of(fabric_home, {"A"}) == {"k-mine"}
    assert memo_keys_only_of(fabric_home, {"A", "B"}) == {"k-mine", "k-shared"}
    assert delete_memo_entries(fabric_home, {"k-mine"}, {"A"}) == 1
    with AnnotationMemo(path) as memo:
        assert memo.get("k-mine") is None and memo.get("k-older") is not None
        assert memo.users_of({"k-mine", "k-shared"}) == {"k-shared": {"B"}}  # A's uses went with it
    assert memo_keys_only_of(fabric_home, {"B"}) == {"k-shared"}
    assert _holding(fabric_home.root, [b"Ophelia"]) == {}  # nor in a free page or the WAL


def test_a_memo_from_before_uses_were_recorded_is_adopted_and_its_orphans_go(fabric_home):
    """guards against: entries memoised by an older Fabric (no use recorded) staying for good once
    their parse's rows are gone, where neither a purge nor retention can find them; adoption
    taking an entry a live parse's rows still use."""
    import pyarrow as pa

    from fabric_resources.schema import ANNOTATIONS

    path = fabric_home.layout.annotation_memo
    with AnnotationMemo(path) as memo:
        for key, text in (("k-live", "herring"), ("k-gone", "Ophelia kettledrum")):
            memo.put(key, {"items": [text]}, producer="p", chain="summary")  # as an older Fabric did
    live = "ab" * 32  # a parse ID (a hex digest)
    row = {"parse_id": live, "annotation_id": "a", "excerpt_id": "e", "kind": "summary", "text": "herring",
           "quotes": [], "support": [], "window_ids": [], "producer": "p", "memo_key": "k-live"}
    fabric_home.tables.replace_partitions("annotations", [live], pa.Table.from_pylist([row], schema=ANNOTATIONS))
    assert adopt_memo_entries(fabric_home) == 1
    with AnnotationMemo(path) as memo:
        assert memo.get("k-gone") is None and memo.users_of({"k-live"}) == {"k-live": {live}}
        assert memo.unowned_keys() == set()
    assert adopt_memo_entries(fabric_home) == 0  # nothing left to adopt: the memo alone is read
    assert _holding(fabric_home.root, [b"Ophelia"]) == {}
