"""A query process that served a release before retention or a purge retired it never answers
from it afterwards (fabric_query/release.py caches manifests and views per process: a running
`fabric serve` is such a process)."""

from __future__ import annotations

import hashlib

import pytest
from conftest import ingest

from fabric_assets.lifecycle.purge import PurgeSelector, purge
from fabric_query import Fabric
from fabric_query.errors import FabricQueryError
from fabric_resources.home import FabricHome

SECRET = "Quixotic zebras manifesto for the harbour board."


def test_a_purged_text_is_not_served_from_a_release_cached_before_the_purge(tmp_path, fabric_home):
    """guards against: a long-lived process answering `release_id=<old>` from its cached view after
    the purge retired that release, returning the purged text."""
    src = tmp_path / "c"
    src.mkdir()
    (src / "public.txt").write_text("The lighthouse keeper logged the tide.\n")
    (src / "secret.txt").write_text(SECRET + "\n")
    ingest(src, fabric_home)
    fabric = Fabric(fabric_home.root)  # one process throughout, as a server is
    first = fabric.search("Quixotic zebras manifesto")
    old = first.release_id
    assert first.results[0].text.startswith("Quixotic")
    (src / "secret.txt").unlink()
    ingest(src, fabric_home)
    assert not fabric.search("Quixotic zebras", release_id=old).results[0].text.startswith("Quixotic")

    purge(FabricHome(fabric_home.root), PurgeSelector(source_keys=("fs:c/secret.txt",)))
    with pytest.raises(FabricQueryError):
        fabric.search("Quixotic zebras manifesto", release_id=old)
    current = fabric.search("Quixotic zebras manifesto")
    assert current.release_id != old and not any("Quixotic" in h.text for h in current.results)


def test_a_home_made_again_at_the_same_path_is_not_answered_from_the_old_homes_release(tmp_path, fabric_home):
    """guards against (trial 17d): a process that searched a home, which was then deleted and made
    again at the same path (its release IDs start at 1 again), answering a new ``Fabric`` of that
    path from the old home's cached release 1: the old files' text, citations that resolve stale."""
    import shutil

    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    (old / "a.txt").write_text(SECRET + "\n")
    (new / "b.txt").write_text("The lighthouse keeper logged the tide at the harbour.\n")
    ingest(old, fabric_home)
    first = Fabric(fabric_home.root).search("harbour")
    assert first.results[0].text.startswith("Quixotic")
    shutil.rmtree(fabric_home.root)
    ingest(new, FabricHome(fabric_home.root))
    fabric = Fabric(fabric_home.root)
    again = fabric.search("harbour")
    assert again.release_id == first.release_id  # the same ID, another release
    assert [h.citation.source_key for h in again.results] == ["fs:new/b.txt"]
    assert again.results[0].text.startswith("The lighthouse keeper")
    assert fabric.resolve(again.results[0].citation).status == "verified"


def test_a_citation_of_a_release_no_longer_kept_says_why_and_what_to_do(tmp_path, fabric_home):
    """guards against (trial 20g): ``resolve`` of a pack whose release a purge had retired answered
    ``NO release: release 2 unknown``, which read like a damaged citation and named no next step; the
    same words for a source that is not visible (deleted), whose answer must not depend on it."""
    from fabric_query.resolve import RELEASE_GONE

    src = tmp_path / "c"
    src.mkdir()
    (src / "public.txt").write_text("The lighthouse keeper logged the tide.\n")
    (src / "gone.txt").write_text("The harbour pilot boarded at dawn.\n")
    ingest(src, fabric_home)
    fabric = Fabric(fabric_home.root)
    kept = fabric.search("lighthouse keeper").results[0].citation
    gone = fabric.search("harbour pilot").results[0].citation
    (src / "gone.txt").unlink()
    ingest(src, fabric_home)
    purge(FabricHome(fabric_home.root), PurgeSelector(source_keys=("fs:c/gone.txt",)))
    for citation in (kept, gone):
        result = fabric.resolve(citation)
        release = [c for c in result.checks if c.check == "release"]
        assert result.status == "stale" and release and not release[0].ok
        assert release[0].detail == f"release {citation.release_id} {RELEASE_GONE}"
        assert "search again" in release[0].detail


def test_a_citation_of_a_release_no_longer_kept_still_has_its_bytes_checked_when_the_hash_is_recorded(
        tmp_path, fabric_home):
    """guards against (trial 21b): ``resolve`` of a citation whose release was retired said why and
    stopped, never reading the file: a user could not tell "the cited bytes are still there, search
    again" from "the file changed". The bytes are compared now (the citation stays stale: its
    text cannot be re-derived through a release that is gone); a hash the home never recorded
    (a made-up citation) is not compared, and the check says why."""
    from fabric_query.types import Citation

    src = tmp_path / "c"
    src.mkdir()
    (src / "public.txt").write_text("The lighthouse keeper logged the tide.\n")
    (src / "gone.txt").write_text("The harbour pilot boarded at dawn.\n")
    ingest(src, fabric_home)
    fabric = Fabric(fabric_home.root)
    kept = fabric.search("lighthouse keeper").results[0].citation
    (src / "gone.txt").unlink()
    ingest(src, fabric_home)
    purge(FabricHome(fabric_home.root), PurgeSelector(source_keys=("fs:c/gone.txt",)))  # retires kept's release

    def checks(citation: Citation) -> tuple[str, dict[str, tuple[bool, str]]]:
        result = fabric.resolve(citation)
        return result.status, {c.check: (c.ok, c.detail) for c in result.checks}

    status, said = checks(kept)
    assert status == "stale" and said["release"][0] is False
    assert said["source-bytes"] == (True, f"current bytes match the cited hash (release {kept.release_id} is gone: "
                                          "search again to cite them)"), said
    made_up = Citation.model_validate({**kept.model_dump(), "source_hash": "0" * 64})
    status, said = checks(made_up)  # the file holds the bytes the home recorded, not the cited ones
    assert status == "stale" and said["source-bytes"] == (False, "source bytes changed since the citation"), said
    edited = b"The lighthouse keeper logged the storm.\n"
    (src / "public.txt").write_bytes(edited)  # edited, not ingested again
    status, said = checks(kept)
    assert status == "stale" and said["source-bytes"] == (False, "source bytes changed since the citation"), said
    # A guess of bytes no release showed (the edit, not ingested) is answered as a wrong guess is.
    cannot = (False, f"cannot be checked: release {kept.release_id} is gone, this home does not record the cited "
                     "source hash for this source, and the file changed since Fabric last read it")
    for guess in (hashlib.sha256(edited).hexdigest(), "0" * 64):
        status, said = checks(Citation.model_validate({**kept.model_dump(), "source_hash": guess}))
        assert status == "stale" and said["source-bytes"] == cannot, said
