"""Khmer and Myanmar spellings that differ but should meet, and words that look alike but must not
(trial 21d): variant letters and split vowels of Khmer; words that differ only by a mark the word
field's tokenizer would split at; a Khmer word typed without its coeng."""

from __future__ import annotations

import pytest
from conftest import ingest

from fabric_query import Fabric
from fabric_resources.home import FabricHome
from fabric_resources.text_folding import fold, fold_with_map

FILES = {
    # I want to eat Khmer food (food, អាហារ, written with the deprecated U+17A4 for អា).
    "km-food.txt": "ខ្ញុំចង់ញ៉ាំ\u17a4ហារខ្មែរ\n",
    # Please do it well (ឲ្យ, the traditional spelling of ឱ្យ).
    "km-please.txt": "សូមធ្វើ\u17b2្យបានល្អ\n",
    # I go for a walk (ដើរ walk, its vowel typed as its two parts េ + ី).
    "km-walk.txt": "ខ្ញុំទៅដ\u17c1\u17b8រលេង\n",
    # Mother sews clothes (ដេរ sew: only the first part of that vowel).
    "km-sew.txt": "ម្ដាយដេរខោអាវ\n",
    # His house is big (ផ្ទះ house, followed by the invisible inherent vowel U+17B4).
    "km-house.txt": "ផ្ទះ\u17b4របស់គាត់ធំ\n",
}


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("khmer-myanmar")
    folder = tmp / "corpus"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    ingest(folder, FabricHome(tmp / "home"))
    return Fabric(tmp / "home")


def _lexical(pack) -> list[tuple[str, list[str]]]:
    """(file name, highlighted texts) of each lexical hit."""
    return [(h.citation.source_key.rsplit("/", 1)[-1], [s.text for s in h.highlights if s.highlighted])
            for h in pack.results if h.lexical]


#: (query, file, the file's own characters the highlight covers): a Khmer spelling and the file's
#: variant of it, which the Unicode Standard names as the same letter or vowel.
KHMER_VARIANT_QUERIES = [("អាហារ", "km-food.txt", "\u17a4ហារ"), ("\u17a4ហារ", "km-food.txt", "\u17a4ហារ"),
                         ("ធ្វើឱ្យ", "km-please.txt", "ធ្វើ\u17b2្យ"), ("ដើរ", "km-walk.txt", "ដ\u17c1\u17b8រ"),
                         ("ដ\u17b8\u17c1រ", "km-walk.txt", "ដ\u17c1\u17b8រ"), ("ផ្ទះ", "km-house.txt", "ផ្ទះ\u17b4")]  # the mark ends ះ's cluster


def test_khmer_variant_letters_and_split_vowels_fold_to_one_spelling():
    """guards against: a deprecated independent vowel (U+17A3, U+17A4), ``ឲ`` (U+17B2) or a two-part
    vowel typed as its parts folding to another string than the standard spelling, a folded
    character without one source character, or folding too much: ``ដេរ`` (sew) is not ``ដើរ``
    (walk), ``ឳ`` is not ``ឱ``, a lone ``េ`` stays."""
    assert fold("\u17a3្នក") == fold("អ្នក") and fold("\u17a4ហារ") == fold("អាហារ")
    assert fold("\u17b2្យ") == fold("ឱ្យ")
    for split in ("ដ\u17c1\u17b8រ", "ដ\u17b8\u17c1រ"):
        assert fold(split) == fold("ដើរ") == "ដើរ"
    assert fold("ក\u17c1\u17b6ះ") == fold("កោះ") == "កោះ"  # island
    assert fold("ផ្ទះ\u17b4\u17b5") == "ផ្ទះ"
    folded, origin = fold_with_map("ដ\u17c1\u17b8រ\u17a4")
    assert folded == "ដើរអា" and origin == [0, 1, 3, 4, 4]
    assert fold("ដេរ") == "ដេរ" != fold("ដើរ")
    assert fold("\u17b3") != fold("\u17b1") and fold("ក\u17c1") == "ក\u17c1"
    assert fold("ក\u17c1\u17bb") == "ក\u17c1\u17bb"  # e + u: no two-part vowel


@pytest.mark.parametrize("query, file, highlighted", KHMER_VARIANT_QUERIES)
def test_a_khmer_variant_spelling_finds_the_text(fabric, query, file, highlighted):
    """Property: a Khmer query and the text differing only by a variant letter or a split vowel
    match each other, and the highlight covers exactly the text's own characters (was:
    ``no_lexical_match``)."""
    hits = _lexical(fabric.search(query))
    assert hits and hits[0] == (file, [highlighted]), hits
    assert {name for name, _ in hits} == {file}


def test_a_folded_vowel_does_not_make_sew_find_walk(fabric):
    """guards against: folding too much: ``ដេរ`` (sew) finds the file that holds it, not the one
    holding ``ដើរ`` (walk) typed as ``េ`` + ``ី``."""
    assert _lexical(fabric.search("ដេរ")) == [("km-sew.txt", ["ដេរ"])]
