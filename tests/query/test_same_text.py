"""Versions and copies of one text take one place in the results (``query.collapse_same_text``).

Three versions of a report share a section word for word; without collapsing, a search for it
gave the same paragraph three of its three places, and the note that differs fell out.
"""

from __future__ import annotations

import json

import pytest
from conftest import ingest

from fabric_query import Fabric
from fabric_query.assembly import same_text_key
from fabric_query.cli_text import render_pack
from fabric_query.server.mcp_tools import agent_answer
from fabric_resources.home import FabricHome

LIGHT = ("The lighthouse keeper trimmed the wick, polished the great lens and logged the tide "
         "at dusk before the supply boat came round the point.")


def _report(budget: str, light: str = LIGHT) -> str:
    return (f"# Budget\n\n{budget}\n\n# Lighthouse\n\n{light}\n\n"
            "# Staff\n\nTwo assistants share the night watch; one of them keeps the stores.\n")


FILES = {
    "reports/report-v1.md": _report("The budget for the year is four thousand crowns."),
    "reports/report-v2.md": _report("The budget for the year is five thousand crowns."),
    # Re-wrapped, with other line ends: the same text to a reader.
    "reports/report-final.md": _report("The budget is five thousand crowns and a new boat.",
                                       LIGHT.replace(" logged", "\nlogged")).replace("\n", "\r\n"),
    "notes/keeper.txt": "A keeper's log: the wick of the lighthouse lamp was trimmed twice in the storm.\n",
    "notes/lens.txt": "The lighthouse lens was polished by the keeper before the tide turned.\n",
    "secret/report-draft.md": _report("A draft budget nobody may read."),
}


@pytest.fixture(scope="module")
def home_root(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("same-text")
    for rel, text in FILES.items():
        path = tmp / "corpus" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
    home = FabricHome(tmp / "home")
    ingest(tmp / "corpus", home)
    return home.root


def _fabric(root, collapse: bool) -> Fabric:
    FabricHome(root).layout.config_file.write_text(json.dumps(
        {"query": {"collapse_same_text": collapse}, "sources": {"withheld": ["corpus/secret/*"]}}))
    return Fabric(root)


QUERY = "lighthouse keeper trimmed the wick and polished the lens"


def test_copies_of_one_text_take_one_place_and_each_keeps_its_citation(home_root):
    """guards against: three versions of a report filling three places with one paragraph (the
    notes that say something else pushed out), and a copy listed without a citation that verifies."""
    fabric = _fabric(home_root, True)
    pack = fabric.search(QUERY, limit=3)
    keys = [same_text_key(h.text) for h in pack.results]
    assert len(set(keys)) == len(keys) == 3  # three places, three different texts
    [top] = [h for h in pack.results if h.citation.source_key.startswith("fs:corpus/reports/")]
    assert {c.source_key for c in (top.citation, *top.same_text)} == {
        f"fs:corpus/{rel}" for rel in FILES if rel.startswith("reports/")}
    assert {h.citation.source_key for h in pack.results} >= {"fs:corpus/notes/keeper.txt", "fs:corpus/notes/lens.txt"}
    assert top.same_text_omitted == 0
    for copy in top.same_text:  # each a citation like any hit's: verified, located, its own chunk
        resolved = fabric.resolve(copy)
        assert resolved.status == "verified", resolved.checks
        assert same_text_key(resolved.text) == same_text_key(top.text) and copy.chunk_id != top.chunk_id
        assert copy.locations and copy.locations[-1].path == top.citation.locations[-1].path == ("Lighthouse",)
    # Shown to a person and to an agent.
    out, _ = render_pack(pack.model_dump(mode="json"))
    assert "same text in: fs:corpus/reports/" in out
    answer = agent_answer(pack)
    assert [len(r["same_text"]) for r in answer["results"]] == [len(h.same_text) for h in pack.results]


def test_without_collapsing_every_copy_takes_a_place_and_collapsing_loses_none(home_root):
    """The switch, and what the first test would not see if the collapse keyed on anything but the
    text: with it off one text takes two of the three places; with it on, every chunk the three
    places showed is still shown, as a result or as a copy under one (nothing is dropped)."""
    off = _fabric(home_root, False).search(QUERY, limit=3)
    assert len({same_text_key(h.text) for h in off.results}) < len(off.results) == 3
    assert all(h.same_text == () for h in off.results)
    on = _fabric(home_root, True).search(QUERY, limit=3)
    shown = [c for h in on.results for c in (h.chunk_id, *(s.chunk_id for s in h.same_text))]
    assert {h.chunk_id for h in off.results} <= set(shown) and len(shown) == len(set(shown))


def test_a_short_text_that_documents_share_is_no_copy(home_root):
    """guards against: a title or one-line section that several documents share collapsed under the
    first (JSQuAD's article titles: the best paragraph's title took its siblings' places with it). The
    Staff section, under 24 tokens, stays a result in each report."""
    pack = _fabric(home_root, True).search("assistants share the night watch and keep the stores", limit=3)
    staff = [h for h in pack.results if "night watch" in h.text]
    assert len(staff) == 3 and len({same_text_key(h.text) for h in staff}) == 1
    assert all(h.same_text == () for h in pack.results)


def test_a_withheld_copy_is_never_named(home_root):
    """guards against: a withheld version (its text the same as a visible one's) named under a
    visible hit: every copy comes from the eligible candidates, so the draft is never cited."""
    pack = _fabric(home_root, True).search(QUERY, limit=10)
    named = [c.source_key for h in pack.results for c in (h.citation, *h.same_text)]
    assert named and not any("secret" in k for k in named)
    assert "secret" not in json.dumps(pack.model_dump(mode="json"))
