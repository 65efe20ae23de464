"""Purge: the privacy property over real Dagster runs, Lance tables, tantivy and the real models.

A corpus with secret files (English and Japanese, UTF-8 and Shift_JIS plain text, an EPUB) is
ingested, each secret edited twice, deleted and purged. Then no byte sequence of any version of
any secret (its raw bytes, its phrases in UTF-8, in the file's own encoding and folded as the
lexical documents store them, each EPUB member) nor its file name or source key occurs in any file
under the home, Dagster's storage included (where the UI finds a partition by file name: run tags);
and search, status and resolve answer exactly as a home that never held them.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest
from answers import first_difference
from conftest import ingest

from fabric_assets.lifecycle.purge import PurgeRefused, PurgeSelector, plan_purge, purge
from fabric_query import Fabric
from fabric_resources.home import FabricHome
from fabric_resources.text_folding import fold
from fabric_resources.tombstones import tombstones

PUBLIC = {
    "lighthouse.txt": ("The lighthouse keeper climbed the spiral stairs every evening.\n\n"
                       "She wrote the tide tables in a green ledger.\n").encode(),
    "weather-ja.txt": "東京の天気は晴れです。灯台守は毎晩らせん階段を上りました。\n".encode("utf-8"),
    "harbour.md": "# Harbour\n\nThe harbour master counted the herring boats at dawn.\n".encode(),
}


def _secret_en(v: int) -> list[str]:
    return [f"Quixotic zebras signed manifesto number {v} inside the copper vault.",
            f"The vault combination is {v}{v}7-Ophelia-kettledrum, never to be written down."]


def _secret_ja(v: int) -> list[str]:
    return [f"秘密の金庫の暗証番号は第{v}の呪文で守られている。",
            f"灯台守の日記には{v}番目の隠し部屋の場所が書かれていた。"]


def _epub(paragraphs: list[str], title: str) -> tuple[bytes, list[bytes]]:
    """A small EPUB 3 whose members are stored, not deflated (so its text is visible in the raw
    bytes, which makes the byte walk below a sensitive check); returns (file, member bytes)."""
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    xhtml = (f'<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head>'
             f"<title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>").encode()
    opf = ('<?xml version="1.0" encoding="utf-8"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
           'unique-identifier="uid"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
           f'<dc:identifier id="uid">x</dc:identifier><dc:title>{title}</dc:title><dc:language>en</dc:language>'
           '</metadata><manifest><item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>'
           '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/></manifest>'
           '<spine><itemref idref="c1"/></spine></package>').encode()
    nav = ('<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml" '
           'xmlns:epub="http://www.idpf.org/2007/ops"><body><nav epub:type="toc"><ol><li>'
           f'<a href="c1.xhtml">{title}</a></li></ol></nav></body></html>').encode()
    container = ('<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:'
                 'container"><rootfiles><rootfile full-path="OEBPS/content.opf" '
                 'media-type="application/oebps-package+xml"/></rootfiles></container>').encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("mimetype", "application/epub+zip")
        zf.writestr("META-INF/container.xml", container)
        zf.writestr("OEBPS/content.opf", opf)
        zf.writestr("OEBPS/nav.xhtml", nav)
        zf.writestr("OEBPS/c1.xhtml", xhtml)
    return buf.getvalue(), [xhtml, opf]


#: The secret files' paths under the root (a file name is as private as its text).
SECRET_NAMES = ("secret/zebra-plan.txt", "secret/秘密の計画.txt", "secret/marmoset-ledger.epub")


def _name_needles(root_label: str) -> list[bytes]:
    """Every form of the secrets' names that must not survive a purge: each file name, path and
    source key, in UTF-8 and as JSON writes it (``\\u`` escapes for non-ASCII)."""
    needles = []
    for rel in SECRET_NAMES:
        for name in (rel.split("/")[-1], rel, f"fs:{root_label}/{rel}"):
            needles += [name.encode("utf-8"), json.dumps(name)[1:-1].encode("ascii")]
    return sorted(set(needles))


def _secret_files(v: int) -> tuple[dict[str, bytes], list[bytes]]:
    """Version ``v`` of the secret files, and every needle that must never survive a purge."""
    en, ja = _secret_en(v), _secret_ja(v)
    title = f"Ledger of the Marmoset Conspiracy {v}"
    epub, members = _epub([*en, *ja], title)
    files = {SECRET_NAMES[0]: "\n\n".join(en).encode("utf-8"),
             SECRET_NAMES[1]: "\n\n".join(ja).encode("shift_jis"),
             SECRET_NAMES[2]: epub}
    needles = [*files.values(), *members]
    for phrase in [*en, *ja, title]:
        for form in {phrase, fold(phrase)}:
            needles.append(form.encode("utf-8"))
            if phrase in ja:
                # A folded form may hold simplified characters (OpenCC folding) that Shift_JIS
                # cannot encode: such bytes cannot be anywhere, the UTF-8 needle stands for them.
                try:
                    needles.append(form.encode("shift_jis"))
                except UnicodeEncodeError:
                    pass
    # Parts too: a file cut into chunks or fragments still holds each half of a sentence.
    for phrase in [*en, *ja]:
        needles += [p.encode() for p in (phrase[: len(phrase) // 2], phrase[len(phrase) // 2:]) if len(p) >= 8]
    return files, needles


def _write(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def _occurrences(home: Path, needles: list[bytes]) -> dict[bytes, list[str]]:
    """Every file under ``home`` (Dagster's storage, WAL files, tables' old versions included)
    holding a needle."""
    found: dict[bytes, list[str]] = {}
    for dirpath, _, names in os.walk(home):
        for name in names:
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            data = path.read_bytes()
            for needle in needles:
                if needle in data:
                    found.setdefault(needle, []).append(str(path.relative_to(home)))
    return found


QUERIES = ["lighthouse keeper", "Quixotic zebras manifesto", "copper vault combination", "秘密の金庫",
           "灯台守", "harbour master herring", "Marmoset Conspiracy ledger", "隠し部屋"]


def _normalised(value):
    """``value`` less what differs between two homes holding the same documents: release
    numbers (a home that held more had more releases) and timings."""
    if isinstance(value, dict):
        return {k: _normalised(v) for k, v in value.items()
                if k not in ("release_id", "timings") and not k.endswith(("_ms", "_seconds", "_s"))}
    if isinstance(value, (list, tuple)):
        return [_normalised(v) for v in value]
    return value


def _answers(root: Path) -> dict:
    """Whole EvidencePacks, status and resolve answers (normalised, see above), and the home's
    path and roots' paths left out."""
    fabric = Fabric(root)
    out: dict = {}
    for q in QUERIES:
        pack = fabric.search(q, limit=10)
        out[q] = _normalised(pack.model_dump())
        out[q + " (resolve)"] = [(r.status, r.text) for r in (fabric.resolve(h.citation) for h in pack.results)]
    status = fabric.status().model_dump()
    for k in ("home", "roots", "release_id", "last_scan_at", "release_created_at"):  # paths, numbers, times
        status.pop(k)
    out["status"] = status
    return out


@pytest.mark.slow
def test_a_purged_secret_leaves_no_byte_and_answers_equal_a_home_that_never_held_it(tmp_path, fabric_home):
    """guards against: a deleted file's bytes, rows, old Lance versions, index generations,
    catalog rows or Dagster metadata surviving `fabric purge`; its name surviving in Dagster's run
    storage (the run tags that find a partition by file name) or anywhere else; a purge changing
    what anyone else sees."""
    src = tmp_path / "held" / "corpus"
    _write(src, PUBLIC)
    needles: list[bytes] = []
    for v in range(3):  # the secret, then two edits, each ingested
        files, found = _secret_files(v)
        needles += found
        _write(src, files)
        summary = ingest(src, fabric_home)
        assert summary.failed_runs == [] and summary.failed == []
    fabric = Fabric(fabric_home.root)
    assert fabric.search("Quixotic zebras manifesto").results[0].citation.source_key == f"fs:corpus/{SECRET_NAMES[0]}"
    shutil.rmtree(src / "secret")
    ingest(src, fabric_home)
    keys = tuple(sorted(f"fs:corpus/{rel}" for rel in SECRET_NAMES))
    assert {s.source_key for s in fabric_home.catalog.sources(state="deleted")} == set(keys)

    # The walk is sensitive: before the purge the secrets are on disk in the store and the tables,
    # and their names in Dagster's storage (the run tags the UI searches) and the catalog.
    before = _occurrences(fabric_home.root, needles)
    places = {p.split("/")[0] for paths in before.values() for p in paths}
    assert {"artifacts", "tables"} <= places, places
    names = _name_needles("corpus")
    named = _occurrences(fabric_home.root, names)
    assert "dagster" in {p.split("/")[0] for paths in named.values() for p in paths}, named
    assert all(any(p.startswith("dagster/") for p in named.get(f"fs:corpus/{rel}".encode(), []))
               for rel in SECRET_NAMES), named
    needles += names

    report = purge(FabricHome(fabric_home.root), PurgeSelector(source_keys=keys))
    assert report.artifacts_removed == 9 and len(report.plan.parse_ids) == 9
    assert report.rows_removed["units"] > 0 and report.rows_removed["chunks"] > 0

    leaks = _occurrences(fabric_home.root, needles)
    assert leaks == {}, {k[:40]: v for k, v in leaks.items()}

    # The tombstone keeps hashes only, and the catalog no row about the sources.
    home = FabricHome(fabric_home.root)
    (tomb,) = tombstones(home.catalog)
    assert tomb.completed_at is not None and len(tomb.source_key_hashes) == 3 and len(tomb.parse_ids) == 9
    assert not any(k in {s.source_key for s in home.catalog.sources()} for k in keys)

    never = tmp_path / "never" / "corpus"
    never.mkdir(parents=True)
    for rel in PUBLIC:
        shutil.copy2(src / rel, never / rel)  # same bytes and mtimes
    never_home = FabricHome(tmp_path / "never-home")
    ingest(never, never_home)
    assert first_difference(_answers(fabric_home.root), _answers(never_home.root)) is None  # tests/answers.py

    # The next ingest finds nothing to do and nothing of the secret comes back.
    again = ingest(src, FabricHome(fabric_home.root))
    assert again.scan.new == [] and again.scan.deleted == []
    assert first_difference(_answers(fabric_home.root), _answers(never_home.root)) is None  # tests/answers.py


def test_purge_refuses_a_present_source_and_an_unknown_one_removing_nothing(tmp_path, fabric_home):
    """guards against: purging a file that is still on disk (the next scan takes it in again, so
    the purge would be a lie) or a typo silently purging nothing."""
    src = tmp_path / "corpus"
    _write(src, {"lighthouse.txt": PUBLIC["lighthouse.txt"]})
    ingest(src, fabric_home)
    with pytest.raises(PurgeRefused, match="still present"):
        purge(fabric_home, PurgeSelector(source_keys=("fs:corpus/lighthouse.txt",)))
    with pytest.raises(PurgeRefused, match="no such source"):
        purge(fabric_home, PurgeSelector(source_keys=("fs:corpus/nope.txt",)))
    with pytest.raises(PurgeRefused, match="exactly one"):
        plan_purge(fabric_home.catalog, PurgeSelector())
    assert tombstones(fabric_home.catalog) == []
    assert Fabric(fabric_home.root).search("lighthouse keeper").results


def test_a_source_named_without_its_fs_prefix_is_answered_with_the_key_it_means(tmp_path, fabric_home):
    """guards against (hostile trial 14c): `fabric purge --source library/notes/reise-de.txt`, the
    path as `fabric search` prints it but for `fs:`, refused with "no such source" and no word of
    the key it meant."""
    src = tmp_path / "corpus"
    _write(src, {"lighthouse.txt": PUBLIC["lighthouse.txt"]})
    ingest(src, fabric_home)
    with pytest.raises(PurgeRefused, match=r"no such source: corpus/lighthouse\.txt \(did you mean "
                                           r"fs:corpus/lighthouse\.txt\?"):
        plan_purge(fabric_home.catalog, PurgeSelector(source_keys=("corpus/lighthouse.txt",)))
    with pytest.raises(PurgeRefused, match=r"no such source: fs:corpus/nope\.txt \(see"):
        plan_purge(fabric_home.catalog, PurgeSelector(source_keys=("fs:corpus/nope.txt",)))


def test_purging_a_root_unregisters_it_and_keeps_content_shared_with_another_root(tmp_path, fabric_home):
    """guards against: a root purge leaving the root registered (the next ingest would take every
    file in again) or removing bytes another source still holds; and (trial 20c) the re-published
    release keeping the vector digests of the parses it had before, so every query after a purge
    of a present source skipped the dense channel ("vector-digest-mismatch")."""
    a, b = tmp_path / "alpha", tmp_path / "beta"
    _write(a, {"lighthouse.txt": PUBLIC["lighthouse.txt"], "own.txt": b"Only alpha speaks of marzipan comets.\n"})
    _write(b, {"copy.txt": PUBLIC["lighthouse.txt"]})
    ingest(a, fabric_home)
    ingest(b, fabric_home)
    report = purge(fabric_home, PurgeSelector(root="alpha"))
    assert len(report.plan.shared_kept) == 1 and report.artifacts_removed == 1
    home = FabricHome(fabric_home.root)
    assert [r.label for r in home.catalog.roots()] == ["beta"]
    fabric = Fabric(home.root)
    pack = fabric.search("lighthouse keeper")
    assert [r.citation.source_key for r in pack.results] == ["fs:beta/copy.txt"]
    assert not pack.skipped_channels and "dense" in pack.channels_run, pack.skipped_channels
    # Its text is gone (the dense channel, on again, still offers its nearest chunk, another text).
    assert not any("marzipan" in h.text for h in fabric.search("marzipan comets").results)
    hit = fabric.search("lighthouse keeper").results[0]
    assert fabric.resolve(hit.citation).status == "verified"
    again = ingest(b, home)
    assert again.scan.new == [] and {s.source_key for s in home.catalog.sources()} == {"fs:beta/copy.txt"}


def test_a_purge_that_matches_nothing_retires_nothing_and_an_interrupted_one_is_finished_by_its_rerun(
        tmp_path, fabric_home, monkeypatch):
    """guards against: ``purge --before`` matching no source still retiring every release the
    retention policy keeps (and dropping every old table version), and a purge killed part-way
    that its own rerun could not finish: refused by the snapshot the purge itself had taken
    ("before purge N"), or, once the catalog rows were gone, "no such source" with the file's name
    left in Dagster's run storage (hostile trial 8)."""
    import fabric_assets.lifecycle.purge as purge_module
    from fabric_assets.lifecycle.snapshots import list_snapshots

    src = tmp_path / "corpus"
    _write(src, {"lighthouse.txt": PUBLIC["lighthouse.txt"], "zebra-plan.txt": "\n\n".join(_secret_en(1)).encode()})
    ingest(src, fabric_home)
    (src / "zebra-plan.txt").unlink()
    ingest(src, fabric_home)
    releases = [r.release_id for r in fabric_home.catalog.releases()]
    assert len(releases) == 2

    nothing = purge(fabric_home, PurgeSelector(before=purge_module.parse_before("2000-01-01")))
    assert nothing.tombstone_id is None and nothing.releases_retired == []
    assert [r.release_id for r in fabric_home.catalog.releases()] == releases and tombstones(fabric_home.catalog) == []
    assert Fabric(fabric_home.root).search("lighthouse keeper", release_id=releases[0]).results

    selector = PurgeSelector(source_keys=("fs:corpus/zebra-plan.txt",))

    def killed(*args, **kwargs):
        raise RuntimeError("killed")

    with monkeypatch.context() as m:  # killed after its snapshot and the rows' deletion, before republishing
        m.setattr(purge_module, "republish", killed)
        with pytest.raises(RuntimeError):
            purge(fabric_home, selector)
    assert [s.note for s in list_snapshots(fabric_home)] == ["before purge 1"]
    assert Fabric(fabric_home.root).status().purges_unfinished == (1,)  # `fabric status` says so
    with monkeypatch.context() as m:  # killed once the catalog rows were forgotten, before the run tags
        m.setattr(purge_module, "forget_source_tags", killed)
        with pytest.raises(RuntimeError):
            purge(fabric_home, selector)
    assert "fs:corpus/zebra-plan.txt" not in {s.source_key for s in fabric_home.catalog.sources()}
    report = purge(fabric_home, selector)
    assert report.resumed == [1, 2] and report.run_tags_removed > 0
    assert list_snapshots(fabric_home) == [] and all(t.completed_at for t in tombstones(fabric_home.catalog))
    assert Fabric(fabric_home.root).status().purges_unfinished == ()
    needles = [b"zebra-plan", *(p.encode() for p in _secret_en(1))]
    assert _occurrences(fabric_home.root, needles) == {}
    assert Fabric(fabric_home.root).search("lighthouse keeper").results
    # An audit of a pack from before names the purge among the reasons its release is gone.
    from fabric_assets.lifecycle.audit import AuditError, passages_in_release

    with pytest.raises(AuditError, match="a purge retired it"):
        passages_in_release(fabric_home, releases[0], ["x"])


def test_purging_a_moved_file_by_its_current_name_removes_its_text(tmp_path, fabric_home):
    """guards against: the old name a move leaves (a deleted source, same bytes) counting as a
    source that still holds the content, so purging the file by its current name kept its whole
    text in every table and the artifact store, saying only ``shared_kept: 1`` (hostile trial 8)."""
    src = tmp_path / "corpus"
    secret = "\n\n".join(_secret_en(3))
    _write(src, {"lighthouse.txt": PUBLIC["lighthouse.txt"], "zebra-plan.txt": secret.encode()})
    ingest(src, fabric_home)
    (src / "zebra-plan.txt").rename(src / "zebra-plan-final.txt")
    assert len(ingest(src, fabric_home).scan.moved) == 1
    (src / "zebra-plan-final.txt").unlink()
    ingest(src, fabric_home)
    report = purge(fabric_home, PurgeSelector(source_keys=("fs:corpus/zebra-plan-final.txt",)))
    assert report.plan.shared_kept == () and report.artifacts_removed == 1
    assert _occurrences(fabric_home.root, [p.encode() for p in _secret_en(3)]) == {}
    # The old name is still a deleted source; the file coming back under it is parsed afresh.
    _write(src, {"zebra-plan.txt": secret.encode()})
    ingest(src, fabric_home)
    hit = Fabric(fabric_home.root).search("Quixotic zebras manifesto").results[0]
    assert hit.citation.source_key == "fs:corpus/zebra-plan.txt"
    assert Fabric(fabric_home.root).resolve(hit.citation).status == "verified"


def test_purging_a_root_leaves_no_name_of_its_skipped_files_nor_its_path(tmp_path, fabric_home):
    """guards against: after ``purge --root``, `fabric status` still listing the root's skipped
    files by name (a file over the size cap, a FIFO: never stored, so no source row) and the
    catalog still holding the root's path in the activation's marks (hostile trial 8)."""
    (fabric_home.root / "config.json").write_text(json.dumps({"sources": {"max_file_bytes": 1000}}))
    home = FabricHome(fabric_home.root)
    keep, gone = tmp_path / "keep", tmp_path / "okonkwo-division"
    _write(keep, {"lighthouse.txt": PUBLIC["lighthouse.txt"]})
    _write(gone, {"small.txt": b"Small note.\n", "layoff-plan.txt": b"Quarterly layoff plan. " * 100})
    os.mkfifo(gone / "pipe-marmalade")
    ingest(keep, home)
    ingest(gone, home)
    assert "fs:okonkwo-division/layoff-plan.txt" in Fabric(home.root).status().model_dump_json()
    purge(home, PurgeSelector(root="okonkwo-division"))
    assert "okonkwo" not in Fabric(home.root).status().model_dump_json()
    assert _occurrences(home.root, [b"okonkwo", b"layoff-plan", b"pipe-marmalade"]) == {}
    assert Fabric(home.root).search("lighthouse keeper").results


@pytest.mark.parametrize("legacy", [False, True])
def test_a_root_purge_killed_once_its_root_was_forgotten_is_finished_by_its_rerun(tmp_path, fabric_home,
                                                                                   monkeypatch, legacy):
    """guards against: rerunning ``purge --root LABEL`` after a purge of that root was killed once
    its catalog rows (the root's among them) were gone answering "no root labelled" and leaving the
    root's file names in Dagster's run tags (hostile trial 8)."""
    import fabric_assets.lifecycle.purge as purge_module

    keep, gone = tmp_path / "keep", tmp_path / "gone"
    _write(keep, {"lighthouse.txt": PUBLIC["lighthouse.txt"]})
    _write(gone, {"zebra-plan.txt": "\n\n".join(_secret_en(2)).encode()})
    ingest(keep, fabric_home)
    ingest(gone, fabric_home)

    def killed(*args, **kwargs):
        raise RuntimeError("killed")

    with monkeypatch.context() as m:
        m.setattr(purge_module, "forget_source_tags", killed)
        with pytest.raises(RuntimeError):
            purge(fabric_home, PurgeSelector(root="gone"))
    assert [r.label for r in fabric_home.catalog.roots()] == ["keep"]
    # A mistyped label is refused, naming the pending purge, and finishes nothing (it did, as
    # "resumed": the tombstone held no label to compare).
    with pytest.raises(PurgeRefused, match="no root labelled 'goen'.*interrupted purge of another root"):
        purge(fabric_home, PurgeSelector(root="goen"))
    assert not all(t.completed_at for t in tombstones(fabric_home.catalog))
    label = "gone"
    if legacy:  # a tombstone written before they kept the root's marker: any label finishes it, as then
        (tomb,) = tombstones(fabric_home.catalog)
        with fabric_home.catalog.transaction(immediate=True) as con:
            con.execute("UPDATE tombstones SET source_key_hashes = ? WHERE tombstone_id = ?",
                        (json.dumps([h for h in tomb.source_key_hashes if not h.startswith("root:")]),
                         tomb.tombstone_id))
        label = "goen"
    report = purge(fabric_home, PurgeSelector(root=label))
    assert report.resumed == [1] and report.run_tags_removed > 0
    assert all(t.completed_at for t in tombstones(fabric_home.catalog))
    assert _occurrences(fabric_home.root, [b"zebra-plan", *(p.encode() for p in _secret_en(2))]) == {}
    with pytest.raises(PurgeRefused, match="no root labelled"):
        purge(fabric_home, PurgeSelector(root="gone"))


@pytest.mark.parametrize("error, says", [
    ("Invalid user input: column metadata range for column index 4 is outside metadata region",
     "repair the home"),
    # Lance on a full disk (a 40 MB tmpfs, trial 21c): it said to restore a snapshot, for nothing damaged.
    ("LanceError(IO): Generic LocalFileSystem error: Unable to copy data to file: No space left on device "
     "(os error 28), rust/lance-table/src/io/commit.rs:1663:50",
     "No space left on device (errno 28); nothing is known to be damaged: free the resource"),
])
def test_a_purge_that_cannot_rewrite_a_table_is_one_line_and_named_by_status(tmp_path, fabric_home, error, says):
    """guards against: `fabric purge` on a home whose table file is damaged printing Lance's
    `OSError: Invalid user input: column metadata range ...` traceback (hostile trial 8); on a full
    disk, telling the operator to restore a snapshot (trial 21c)."""
    from typer.testing import CliRunner

    from fabric_assets.cli import app
    from fabric_resources.tables import TableStore

    src = tmp_path / "corpus"
    _write(src, {"lighthouse.txt": PUBLIC["lighthouse.txt"], "zebra-plan.txt": "\n\n".join(_secret_en(4)).encode()})
    ingest(src, fabric_home)
    (src / "zebra-plan.txt").unlink()
    ingest(src, fabric_home)

    def damaged(self, name, parse_ids):
        raise OSError(error)

    command = ["purge", "--source", "fs:corpus/zebra-plan.txt", "--home", str(fabric_home.root)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(TableStore, "delete_partitions", damaged)
        out = CliRunner().invoke(app, command)
    assert out.exit_code == 2 and "purge stopped part-way" in out.output, out.output
    assert says in " ".join(out.output.split()) and ("restore" in out.output) == (says == "repair the home")
    assert out.exception is None or isinstance(out.exception, SystemExit)
    assert Fabric(fabric_home.root).status().purges_unfinished == (1,)
    again = CliRunner().invoke(app, command)
    assert again.exit_code == 0, again.output
    assert _occurrences(fabric_home.root, [p.encode() for p in _secret_en(4)]) == {}


def test_a_key_typed_in_nfc_purges_a_file_named_in_nfd(tmp_path, fabric_home):
    """guards against (hostile trial 8): `fabric purge --source fs:corpus/café.txt` typed on a
    keyboard (NFC) answering "no such source" for the file macOS named (NFD), which `fabric status`
    prints identically; a key that reads as two sources in NFC resolved to either."""
    import unicodedata

    src = tmp_path / "corpus"
    nfd = unicodedata.normalize("NFD", "café-plan.txt")
    _write(src, {"lighthouse.txt": PUBLIC["lighthouse.txt"], nfd: "\n\n".join(_secret_en(2)).encode()})
    ingest(src, fabric_home)
    (src / nfd).unlink()
    ingest(src, fabric_home)
    typed = unicodedata.normalize("NFC", "fs:corpus/café-plan.txt")
    assert typed != f"fs:corpus/{nfd}"
    report = purge(fabric_home, PurgeSelector(source_keys=(typed,)))
    assert report.plan.source_keys == (f"fs:corpus/{nfd}",) and report.artifacts_removed == 1
    assert _occurrences(fabric_home.root, [p.encode() for p in _secret_en(2)]) == {}


def test_a_key_typed_in_nfc_that_reads_as_several_sources_is_taken_as_typed():
    """guards against: a typed key that two sources read as in NFC (combining marks in either order)
    resolved to one of them; docs/reliability.md: "several such: refused as typed"."""
    import unicodedata

    from fabric_assets.lifecycle.purge import _as_stored

    one, other = "fs:corpus/e\u0323\u0302.txt", "fs:corpus/e\u0302\u0323.txt"
    typed = unicodedata.normalize("NFC", one)
    assert typed == unicodedata.normalize("NFC", other) and typed not in (one, other)
    assert _as_stored((typed,), {one: None, other: None}) == {typed}
    assert _as_stored((typed,), {one: None}) == {one}
    assert _as_stored((other,), {one: None, other: None}) == {other}


def test_a_query_whose_release_a_purge_retires_mid_flight_answers_from_the_purged_release(
        tmp_path, fabric_home, monkeypatch):
    """guards against (trial 17b): a query that pinned the release a purge then retired (the purge
    re-publishes the current release without the source and removes every older version and index
    generation before it forgets the retired releases) read the removed files: a
    `ReleaseUnreadableError` naming damage and `fabric repair` on a sound home."""
    import fabric_query.context as context

    src = tmp_path / "corpus"
    _write(src, {"lighthouse.txt": PUBLIC["lighthouse.txt"], "zebra-plan.txt": "\n\n".join(_secret_en(3)).encode()})
    ingest(src, fabric_home)
    (src / "zebra-plan.txt").unlink()
    ingest(src, fabric_home)
    pinned = fabric_home.catalog.current_release_id()
    real, fired = context.eligible_parses, []

    def purge_then(*args, **kwargs):
        if not fired:
            fired.append(purge(fabric_home, PurgeSelector(source_keys=("fs:corpus/zebra-plan.txt",))).release_id)
        return real(*args, **kwargs)

    monkeypatch.setattr(context, "eligible_parses", purge_then)
    from test_retention import _files_go_after_their_release

    _files_go_after_their_release(monkeypatch, fabric_home, pinned)
    during = Fabric(fabric_home.root).search("lighthouse keeper")
    assert fired and fired[0] != pinned and not fabric_home.catalog.has_release(pinned)
    monkeypatch.undo()
    assert during.model_dump(exclude={"timings"}) == \
        Fabric(fabric_home.root).search("lighthouse keeper").model_dump(exclude={"timings"})
    assert during.release_id == fired[0] and during.results and not during.skipped_channels


def test_purge_and_cleanup_print_their_reports_in_words(tmp_path, fabric_home):
    """guards against (trial 19c): `fabric purge` and `fabric cleanup` printing Python reprs
    (``sources: ['fs:…']``, ``rows_removed: {'chunks': 3, …}``, ``republished_release: None``);
    ``--json`` keeps the values as they are."""
    from typer.testing import CliRunner

    from fabric_assets.cli.root import app

    src = tmp_path / "corpus"
    _write(src, {"lighthouse.txt": PUBLIC["lighthouse.txt"], "zebra-plan.txt": "\n\n".join(_secret_en(2)).encode()})
    ingest(src, fabric_home)
    (src / "zebra-plan.txt").unlink()
    ingest(src, fabric_home)
    home = ["--home", str(fabric_home.root)]
    purged = CliRunner().invoke(app, ["purge", "--source", "fs:corpus/zebra-plan.txt", *home])
    cleaned = CliRunner().invoke(app, ["cleanup", *home])
    for out in (purged, cleaned):
        assert out.exit_code == 0, out.output
        for line in out.output.splitlines():
            name, _, value = line.partition(": ")
            assert name.isidentifier() and not any(r in value for r in ("{", "[", "'", "None", "True", "False")), line
    lines = dict(line.split(": ", 1) for line in purged.output.splitlines())
    assert lines["sources"] == "fs:corpus/zebra-plan.txt"
    assert "chunks " in lines["rows_removed"]
    as_json = CliRunner().invoke(app, ["cleanup", "--json", *home])
    assert isinstance(json.loads(as_json.output)["parses_removed"], dict)


def test_a_dry_run_is_refused_where_the_purge_would_be_and_only_there(tmp_path, fabric_home, monkeypatch):
    """guards against (trial 20g): ``fabric purge --dry-run`` exiting 0 with the plan while a snapshot
    made the purge itself refuse (exit 2), so the dry run promised what the purge would not do. The
    snapshot an interrupted purge took of its own, which the purge removes, refuses neither."""
    from typer.testing import CliRunner

    import fabric_assets.lifecycle.purge as purge_module
    from fabric_assets.cli.root import app
    from fabric_assets.lifecycle.snapshots import create, list_snapshots

    src = tmp_path / "corpus"
    _write(src, {"lighthouse.txt": PUBLIC["lighthouse.txt"], "zebra-plan.txt": "\n\n".join(_secret_en(3)).encode()})
    ingest(src, fabric_home)
    (src / "zebra-plan.txt").unlink()
    ingest(src, fabric_home)
    args = ["purge", "--source", "fs:corpus/zebra-plan.txt", "--home", str(fabric_home.root)]
    create(fabric_home)
    dry = CliRunner().invoke(app, [*args, "--dry-run"])
    real = CliRunner().invoke(app, args)
    assert dry.exit_code == real.exit_code == 2, dry.output + real.output
    assert "snapshot(s) 1 (release 2)" in dry.output and "delete them first" in dry.output
    assert [s.snapshot_id for s in list_snapshots(fabric_home)] == [1]  # the dry run removed nothing
    CliRunner().invoke(app, ["snapshot", "delete", "1", "--home", str(fabric_home.root)])

    selector = PurgeSelector(source_keys=("fs:corpus/zebra-plan.txt",))
    with monkeypatch.context() as m:  # killed after its own snapshot, before republishing
        m.setattr(purge_module, "republish", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("killed")))
        with pytest.raises(RuntimeError):
            purge(fabric_home, selector)
    assert [s.note for s in list_snapshots(fabric_home)] == ["before purge 1"]
    dry = CliRunner().invoke(app, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output  # that snapshot is the purge's own: it would be removed, not refuse
    assert CliRunner().invoke(app, args).exit_code == 0 and list_snapshots(fabric_home) == []


def test_a_dry_run_a_snapshot_refuses_still_lists_what_the_purge_would_remove(tmp_path, fabric_home):
    """guards against (trial 23g): `fabric purge --dry-run` printing only the purge's refusal while a
    snapshot exists, so a user could not see what a purge would remove before deciding to delete
    the snapshot. Now it lists that (as text and as --json) and then says the real purge would be
    refused and why, with the purge's exit code (2); nothing is removed."""
    from typer.testing import CliRunner

    from fabric_assets.cli.root import app
    from fabric_assets.lifecycle.snapshots import create, list_snapshots

    src = tmp_path / "corpus"
    _write(src, {"lighthouse.txt": PUBLIC["lighthouse.txt"], "zebra-plan.txt": "\n\n".join(_secret_en(3)).encode()})
    ingest(src, fabric_home)
    (src / "zebra-plan.txt").unlink()
    ingest(src, fabric_home)
    create(fabric_home)
    args = ["purge", "--source", "fs:corpus/zebra-plan.txt", "--dry-run", "--home", str(fabric_home.root)]
    dry = CliRunner().invoke(app, args)
    assert dry.exit_code == 2, dry.output
    lines = dict(line.split(": ", 1) for line in dry.stdout.splitlines())
    assert lines["sources"] == "fs:corpus/zebra-plan.txt" and lines["parse_ids"] == "1", dry.stdout
    assert "snapshot(s) 1 (release 2)" in lines["refused"]
    assert "would be refused" in dry.stderr and "delete them first" in dry.stderr
    as_json = CliRunner().invoke(app, [*args, "--json"])
    assert as_json.exit_code == 2, as_json.output
    out = json.loads(as_json.stdout)
    assert out["dry_run"] is True and out["sources"] == ["fs:corpus/zebra-plan.txt"]
    assert "snapshot(s) 1 (release 2)" in out["refused"]
    assert [s.snapshot_id for s in list_snapshots(fabric_home)] == [1]
    assert fabric_home.catalog.source("fs:corpus/zebra-plan.txt") is not None  # nothing removed


def test_a_purge_waiting_for_a_snapshot_reader_holds_none_of_the_homes_locks_meanwhile(tmp_path, fabric_home,
                                                                                      monkeypatch):
    """guards against (left open by trial 20f): purge took the ingest and activation locks, then
    waited for the snapshots' lock (which `snapshot list` and `snapshot verify` share) to delete
    its own snapshot, so every ingest and activation of the home waited for the reader too. A
    reader holds the shared lock while a purge runs in a thread: when the purge starts to wait for
    it, neither lock of the home is held; once the reader lets go, the purge finishes and its
    snapshot is gone. A snapshot that refuses the purge refuses it at once, not after the wait."""
    import threading

    import fabric_assets.lifecycle.snapshots as snapshots
    from fabric_assets.activation.activate import INGEST_LOCK
    from fabric_assets.lifecycle.snapshots import create, delete, list_snapshots, reading

    src = tmp_path / "corpus"
    _write(src, {"lighthouse.txt": PUBLIC["lighthouse.txt"], "zebra-plan.txt": "\n\n".join(_secret_en(4)).encode()})
    ingest(src, fabric_home)
    (src / "zebra-plan.txt").unlink()
    ingest(src, fabric_home)
    selector = PurgeSelector(source_keys=("fs:corpus/zebra-plan.txt",))
    pinned = create(fabric_home, "kept by hand")
    with reading(fabric_home):  # a reader that would never let go: the refusal must not wait for it
        with pytest.raises(PurgeRefused, match="delete them first"):
            purge(FabricHome(fabric_home.root), selector)
    delete(fabric_home, pinned.snapshot_id)

    real_writing, waiting, held, failures = snapshots._writing, threading.Event(), [], []

    def writing(root, *, wait=True):
        if wait:  # about to wait for the snapshots' lock: which of the home's locks are held meanwhile?
            catalog = FabricHome(fabric_home.root).catalog
            held.append((catalog.lock_held("activation"), catalog.lock_held(INGEST_LOCK)))
            waiting.set()
        return real_writing(root, wait=wait)

    def go():
        try:
            purge(FabricHome(fabric_home.root), selector)
        except Exception as exc:  # noqa: BLE001 - reported by the assert below
            failures.append(exc)

    monkeypatch.setattr(snapshots, "_writing", writing)
    with reading(fabric_home):  # a `snapshot list` or `verify` under way
        purger = threading.Thread(target=go)
        purger.start()
        assert waiting.wait(60)
        free_meanwhile = not fabric_home.catalog.lock_held("activation") and not fabric_home.catalog.lock_held(
            INGEST_LOCK)
    purger.join(120)
    monkeypatch.undo()
    assert not purger.is_alive() and not failures, failures
    assert held and all(h == (False, False) for h in held) and free_meanwhile, held
    assert list_snapshots(fabric_home) == [] and all(t.completed_at for t in tombstones(fabric_home.catalog))
    assert _occurrences(fabric_home.root, [p.encode() for p in _secret_en(4)]) == {}


def test_a_purged_roots_mount_record_does_not_pass_to_a_root_given_its_id(tmp_path, fabric_home, monkeypatch):
    """guards against (trial 21f): `purge --root` left the purged root's ID among the roots the
    last scan found mounted; SQLite gives the next root registered the same ID, so an empty new
    folder was `root-unavailable: … was a mount point at the last scan … (unmounted?)` and its
    ingest incomplete. A root whose drive is unmounted is still purged."""
    from fabric_assets.sources.scan import scan

    drive = tmp_path / "drive"
    _write(drive, {"note.txt": b"Kept on a drive.\n"})
    mounted = {"now": True}
    real_ismount = os.path.ismount
    monkeypatch.setattr(os.path, "ismount", lambda p: mounted["now"] if os.fspath(p) == str(drive) else real_ismount(p))
    ingest(drive, fabric_home)
    (drive / "note.txt").unlink()
    mounted["now"] = False  # unmounted: the mount point is left, empty
    assert scan(fabric_home).access_lost == ["fs:drive/note.txt"]
    (old_id,) = [r.root_id for r in fabric_home.catalog.roots()]
    purge(fabric_home, PurgeSelector(root="drive"))
    assert fabric_home.catalog.roots() == [] and fabric_home.catalog.sources() == []

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    home = FabricHome(fabric_home.root)
    home.catalog.register_root(fresh)
    assert [r.root_id for r in home.catalog.roots()] == [old_id]  # the ID is given again
    assert scan(home).skipped == []


def test_a_purged_roots_inner_mount_points_are_forgotten(tmp_path, fabric_home, monkeypatch):
    """guards against (trial 22a): the mount points the scan found inside a root (catalog state
    `scan_inner_mounts`) outliving `purge --root`, to be read against the next root given its ID."""
    from fabric_assets.sources import walk
    from fabric_assets.sources.mounts import SCAN_INNER_MOUNTS_STATE

    docs = tmp_path / "docs"
    _write(docs, {"usb/note.txt": b"Kept on a drive.\n", "other.txt": b"At the top.\n"})
    table = tmp_path / "mountinfo"
    table.write_text(f"22 1 0:21 / / rw - ext4 /dev/sda1 rw\n98 22 0:30 / {os.path.realpath(docs)}/usb rw - tmpfs t rw\n")
    monkeypatch.setattr(walk, "MOUNT_TABLE", str(table))
    ingest(docs, fabric_home)
    (root_id,) = [r.root_id for r in fabric_home.catalog.roots()]
    assert fabric_home.catalog.state(SCAN_INNER_MOUNTS_STATE) == {str(root_id): ["usb"]}
    purge(fabric_home, PurgeSelector(root="docs"))
    assert fabric_home.catalog.state(SCAN_INNER_MOUNTS_STATE) == {}
