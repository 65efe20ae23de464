"""Today's visibility through every release: a source withheld or deleted now is invisible through
past releases (results, statistics, the scan fallback), and resolve answers about it exactly as
about a source that never existed (issue 13, items 2 and 3)."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from conftest import ingest
from typer.testing import CliRunner

from fabric_query import Fabric
from fabric_assets.cli import app
from fabric_resources.home import FabricHome
from test_withheld import QUERIES, VISIBLE, _visible_view

VISIBLE_SOURCES_ONLY = "visible-sources-only"  # fabric_query.release.VISIBLE_SOURCES_ONLY

PRIVATE = {
    "en": {"private/diary.txt": "lighthouse lighthouse keeper lamp tide storm beam zebra orchid " * 20 + "\n"},
    "ja": {"private/memo.txt": "認証トークン認証トークン署名検証 秘密の蘭 " * 20 + "\n"},
}
DOOMED = {
    "en": {"old/log.txt": "The keeper's old log: lamp trimmed, tide high, storm at dusk.\n"},
    "ja": {"old/log.txt": "古い記録：トークンの署名を毎晩検証した。\n"},
}
#: Queries that only the withheld or deleted text answers.
PROBES = {"en": ["zebra orchid", "trimmed dusk"], "ja": ["秘密の蘭", "古い記録"]}


def _write(folder, files):
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")


@pytest.fixture(scope="module", params=["en", "ja"])
def homes(request, tmp_path_factory):
    """Home A: release 1 holds VISIBLE + PRIVATE + DOOMED; then PRIVATE is withheld and DOOMED
    deleted (release 2). Home B never had PRIVATE nor DOOMED. Citations of release 1's hits on the
    private and deleted text are kept."""
    lang = request.param
    tmp = tmp_path_factory.mktemp(f"visibility-{lang}")
    folder = tmp / "a" / "corpus"
    _write(folder, {**VISIBLE[lang], **PRIVATE[lang], **DOOMED[lang]})
    home = FabricHome(tmp / "a" / "home")
    ingest(folder, home)
    fa = Fabric(home.root)
    cited = {}
    for q in PROBES[lang]:
        hit = fa.search(q).results[0]
        assert "private" in hit.citation.source_key or "old/" in hit.citation.source_key
        cited[hit.citation.source_key] = hit.citation
    home.layout.config_file.write_text(json.dumps({"sources": {"withheld": ["corpus/private/*"]}}))
    for rel in DOOMED[lang]:
        (folder / rel).unlink()
    ingest(folder, FabricHome(home.root))
    ref_folder = tmp / "b" / "corpus"
    _write(ref_folder, VISIBLE[lang])
    reference = FabricHome(tmp / "b" / "home")
    ingest(ref_folder, reference)
    return lang, home, reference, cited, folder


def _same_answer(a, b):
    """Everything a caller sees except the release number, timings and fallback reason; dense
    scores to 1e-5 (batch padding with the now-invisible texts moves float32 digits)."""
    va, vb = _visible_view(a), _visible_view(b)
    assert va[1] == vb[1] and va[3] == vb[3]
    assert [(h[0], h[3], h[4], h[5], h[6]) for h in va[0]] == [(h[0], h[3], h[4], h[5], h[6]) for h in vb[0]]
    for ha, hb in zip(va[0], vb[0]):
        # RRF is rank-only (exact); the convex fusion of e5-routed queries mixes dense scores.
        assert ha[1] == (hb[1] if "dense_multilingual" not in ha[2] else pytest.approx(hb[1], abs=1e-5))
        assert ha[2].keys() == hb[2].keys()
        for channel, (rank, score) in ha[2].items():
            assert rank == hb[2][channel][0]
            assert score == (hb[2][channel][1] if not channel.startswith("dense")
                             else pytest.approx(hb[2][channel][1], abs=1e-5))


def test_past_release_applies_todays_visibility(homes):
    """guards against: search(release_id=<older>) serving withheld or deleted text, or letting it move
    BM25 document frequencies, counts or ranks of the visible results."""
    lang, home, reference, _, _ = homes
    fa, fb = Fabric(home.root), Fabric(reference.root)
    for q in PROBES[lang]:
        assert all("private" not in h.citation.source_key and "old/" not in h.citation.source_key
                   for h in fa.search(q, release_id=1).results), q
    for q in QUERIES[lang] + PROBES[lang]:
        old = fa.search(q, release_id=1, limit=10)
        assert old.release_id == 1 and old.fallback_reason == VISIBLE_SOURCES_ONLY
        assert all("private" not in p.citation.source_key and "old/" not in p.citation.source_key
                   for p in old.passages)
        _same_answer(old, fb.search(q, limit=10))
        current = fa.search(q, limit=10)
        assert current.fallback_reason is None  # release 2 names no invisible source: its own index
        _same_answer(current, fb.search(q, limit=10))


def test_past_release_after_its_index_is_pruned(homes):
    """guards against: the scan fallback over old Lance table versions serving withheld text once a
    release's index generation is gone."""
    lang, home, _, _, _ = homes
    gen = home.catalog.release(1).manifest["lexical_generation"]
    saved = home.root / "saved-gen"
    shutil.copytree(home.layout.indexes / "lexical" / gen, saved)
    shutil.rmtree(home.layout.indexes / "lexical" / gen)
    try:
        fa = Fabric(home.root)
        for q in QUERIES[lang] + PROBES[lang]:
            pack = fa.search(q, release_id=1)
            assert all("private" not in h.citation.source_key and "old/" not in h.citation.source_key
                       and "zebra" not in h.text and "秘密" not in h.text and "古い記録" not in h.text
                       for h in pack.results), q
    finally:
        shutil.copytree(saved, home.layout.indexes / "lexical" / gen)


def test_withholding_applies_to_the_next_query_without_ingest(homes, tmp_path):
    """guards against: a source withheld in config.json staying searchable (and counted) in the current
    release until the next ingest."""
    lang, home, _, _, _ = homes
    fa = Fabric(home.root)
    before = fa.search(QUERIES[lang][0], limit=10)
    victim = before.results[0].citation.source_key
    config = home.layout.config_file
    original = config.read_text()
    try:
        config.write_text(json.dumps({"sources": {"withheld": ["corpus/private/*", victim.split(":", 1)[1]]}}))
        after = fa.search(QUERIES[lang][0], limit=10)
        assert after.fallback_reason is None  # withheld, not deleted: nothing says something was (trial 22b)
        assert all(h.citation.source_key != victim for h in after.results)
        assert after.eligible_sources == before.eligible_sources - 1
        assert fa.resolve(before.results[0].citation).status == "stale"
    finally:
        config.write_text(original)
    assert fa.search(QUERIES[lang][0], limit=10).fallback_reason is None


def _guesses(citation, folder):
    """The kept citation, the same with the file's true current hash, and with a wrong hash."""
    rel = citation.source_key.split("/", 1)[1]
    path = folder / rel
    true_hash = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else citation.source_hash
    return [citation, citation.model_copy(update={"source_hash": true_hash}),
            citation.model_copy(update={"source_hash": "0" * 64}),
            citation.model_copy(update={"release_id": 2})], true_hash


def test_resolve_is_no_oracle_for_withheld_or_deleted_sources(homes):
    """guards against: resolve printing digits of a withheld file's current SHA-256, or confirming a
    correct guess of it (Python API); answers that differ from those about a source that never existed."""
    _, home, reference, cited, folder = homes
    fa, fb = Fabric(home.root), Fabric(reference.root)
    for key, citation in cited.items():
        variants, true_hash = _guesses(citation, folder)
        answers = [fa.resolve(v) for v in variants]
        for v, answer in zip(variants, answers):
            assert answer.status == "stale" and answer.text is None
            never = "fs:corpus/never/was.txt"
            absent = fa.resolve(v.model_copy(update={"source_key": never}))
            assert answer.model_dump_json() == absent.model_dump_json().replace(never, key)
            if v.release_id == 1:
                assert answer == fb.resolve(v), key  # home B never had this source
            assert true_hash[:12] not in answer.model_dump_json()
        # The right guess and a wrong one are answered alike.
        assert answers[1].checks == answers[2].checks


def test_a_retired_release_citation_of_a_visible_file_is_no_oracle_for_a_withheld_files_bytes(homes, tmp_path):
    """guards against (trial 23c): a citation naming a *visible* file, a release no longer kept (or
    never published) and the source hash and parse ID of a withheld or deleted file's guessed bytes
    was answered "source bytes changed" for a right guess and "cannot be checked … no longer
    records the cited source hash" for a wrong one: the retired-release byte check took any parse
    run's hash as recorded, and parse runs are keyed by bytes, not by source. A right guess, a
    wrong one and a home that never had the file now get one answer."""
    from fabric_resources import identity

    lang, home, reference, cited, _ = homes
    fa, fb = Fabric(home.root), Fabric(reference.root)
    visible = fa.search(QUERIES[lang][0]).results[0].citation
    for key, citation in cited.items():
        run = home.catalog.parse_run(citation.parse_id)
        assert run is not None and run.source_hash == citation.source_hash, key  # what a right guess finds
        wrong_hash = hashlib.sha256(b"not the withheld text\n").hexdigest()
        wrong_parse = identity.parse_id(wrong_hash, run.parser_name, run.parser_version, run.parser_config_hash)
        answers = []
        for source_hash, parse_id in ((citation.source_hash, citation.parse_id), (wrong_hash, wrong_parse)):
            crafted = visible.model_copy(update={"release_id": 10**6, "source_hash": source_hash,
                                                 "parse_id": parse_id})
            answer = fa.resolve(crafted)
            assert answer.status == "stale" and answer == fb.resolve(crafted), key
            f = tmp_path / "c.json"
            f.write_text(crafted.model_dump_json())
            printed = [CliRunner().invoke(app, ["resolve", str(f), "--home", str(h.root)]) for h in (home, reference)]
            assert printed[0].exit_code == printed[1].exit_code == 1 and printed[0].output == printed[1].output
            answers.append((answer, printed[0].output))
        assert answers[0] == answers[1], key


def test_cli_resolve_is_no_oracle(homes, tmp_path):
    """guards against: `fabric resolve` printing 12 hex digits of a withheld file's hash."""
    _, home, reference, cited, folder = homes
    runner = CliRunner()
    for citation in cited.values():
        for v in _guesses(citation, folder)[0]:
            f = tmp_path / "c.json"
            f.write_text(v.model_dump_json())
            out_a = runner.invoke(app, ["resolve", str(f), "--home", str(home.root)])
            out_b = runner.invoke(app, ["resolve", str(f), "--home", str(reference.root)])
            assert out_a.exit_code == out_b.exit_code == 1
            if v.release_id == 1:  # home B has no release 2
                assert out_a.output == out_b.output
            assert _guesses(citation, folder)[1][:12] not in out_a.output


def test_a_citation_whose_key_a_client_normalised_says_so(tmp_path):
    """guards against (trial 23h): a file named in NFD (as macOS writes names), its citation's key
    normalised to NFC by a client, answered "no visible source fs:corpus/café.txt …; the cited parse
    is active at fs:corpus/café.txt: search again to cite it there", two names that print alike,
    so the client could not tell what was wrong. Still stale: two files may hold both names."""
    import unicodedata

    folder = tmp_path / "corpus"
    _write(folder, {unicodedata.normalize("NFD", "café.txt"): "The café serves espresso by the harbour.\n"})
    home = FabricHome(tmp_path / "home")
    ingest(folder, home)
    fabric = Fabric(home.root)
    citation = fabric.search("espresso harbour").results[0].citation
    assert citation.source_key == unicodedata.normalize("NFD", "fs:corpus/café.txt")
    assert fabric.resolve(citation).status == "verified"
    changed = citation.model_copy(update={"source_key": unicodedata.normalize("NFC", citation.source_key)})
    result = fabric.resolve(changed)
    assert result.status == "stale" and result.active_at == (citation.source_key,)
    (check,) = [c for c in result.checks if not c.ok]
    assert "another Unicode normalization form" in check.detail and "exactly as the search gave it" in check.detail
    moved = citation.model_copy(update={"source_key": "fs:corpus/menu.txt"})  # no such note for another name
    assert "normalization" not in " ".join(c.detail for c in fabric.resolve(moved).checks)
