"""A query process that served a release before retention or a purge retired it never answers
from it afterwards (fabric_query/release.py caches manifests and views per process: a running
`fabric serve` is such a process)."""

from __future__ import annotations

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
