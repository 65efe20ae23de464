"""Khmer and Myanmar spellings that differ but should meet, and words that look alike but must not
(trial 21d): variant letters and split vowels of Khmer; words that differ only by a mark the word
field's tokenizer would split at; a Khmer word typed without its coeng."""

from __future__ import annotations

import unicodedata

import pytest
from conftest import ingested_files

from fabric_query import Fabric
from fabric_query.channels.lexical import substring_query_tokens, word_tokens
from fabric_resources.text_folding import fold, fold_with_map
from fabric_resources.word_segmentation import MARK_CODES, word_token

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
    # Myanmar: it is hot today (နေ့ day); I live in Yangon (နေ live: no dot below).
    "my-day.txt": "ဒီနေ့ပူတယ်\n",
    "my-live.txt": "ကျွန်တော်ရန်ကုန်မှာနေတယ်\n",
    # Khmer: mother cuts paper (កាត់ cut); I lost my bank card (កាត card: no bantoc).
    "km-cut.txt": "ម្ដាយកាត់ក្រដាស\n",
    "km-card.txt": "ខ្ញុំបាត់កាតធនាគារ\n",
    # I learn Khmer at school (ខ្មែរ, with its coeng); we go to the market every day (ផ្សារ market
    # typed without its coeng, ផសារ).
    "km-khmer.txt": "ខ្ញុំរៀនភាសាខ្មែរនៅសាលា\n",
    "km-informal.txt": "យើងទៅផសាររាល់ថ្ងៃ\n",
}


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    return Fabric(ingested_files(tmp_path_factory.mktemp("khmer-myanmar"), FILES).root)


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


#: (the word with a mark, its file; the word without it, its file): Myanmar day / live (dot below),
#: Khmer cut / card (bantoc).
MARKED_PAIRS = [("နေ့", "my-day.txt", "နေ", "my-live.txt"), ("កាត់", "km-cut.txt", "កាត", "km-card.txt")]


def test_a_mark_the_tokenizer_splits_at_stays_in_the_word_token():
    """guards against: the word field dropping a mark (dot below, asat, bantoc, register shifter)
    from a word's token, so two words differing only by it shared one token; a code that reads as
    another mark's or as a digit of the text; or the coeng kept (a word typed without it, as people
    do, would no longer share its token)."""
    assert word_tokens("နေ့") != word_tokens("နေ") and word_tokens("កាត់") != word_tokens("កាត")
    assert word_tokens("တယ်") != word_tokens("တယ") and word_tokens("ប៊ី") != word_tokens("ប៉ី") != word_tokens("បី")
    assert word_token(fold("ខ្មែរ")) == word_token("ខមែរ")
    assert word_tokens("ម៉ោង ១២") == ["ម០០ោង", "12"]  # the text's digits fold to ASCII: no code
    for block in (range(0x1000, 0x10A0), range(0x1780, 0x1800)):  # Myanmar, Khmer
        codes = [code for mark, code in MARK_CODES.items() if mark in block]
        assert len(set(codes)) == len(codes) and len({len(c) for c in codes}) == 1
        assert all(ord(c) in block and fold(c).isascii() for c in "".join(codes))


@pytest.mark.parametrize("marked, marked_file, plain, plain_file", MARKED_PAIRS)
def test_a_word_differing_only_by_a_mark_is_no_word_match(fabric, marked, marked_file, plain, plain_file):
    """Property: a Khmer or Myanmar query word is a lexical match only where it stands, mark and all:
    ``နေ့`` (day) no longer finds ``နေ`` (live) by the word field, nor ``កាត់`` (cut) ``កាត`` (card),
    and each still finds its own file by the word field, highlighted on it. The plain word finds the
    marked one only as the characters it is made of (the substring field), never as a word."""
    pack = fabric.search(marked, debug=True)
    assert _lexical(pack) == [(marked_file, [marked])]
    assert "word" in pack.results[0].channels
    pack = fabric.search(plain, debug=True)
    by_word = {h.citation.source_key.rsplit("/", 1)[-1] for h in pack.results if "word" in h.channels}
    assert by_word == {plain_file} and (plain_file, [plain]) in _lexical(pack)


@pytest.mark.parametrize("query, files, highlighted", [("ខមែរ", {"km-khmer.txt", "km-food.txt"}, "ខ្មែរ"),
                                                       ("ផ្សារ", {"km-informal.txt"}, "ផសារ")])
def test_a_khmer_word_typed_without_its_coeng_finds_the_text(fabric, query, files, highlighted):
    """Property: a Khmer query and the text differing only by a coeng (U+17D2) match each other, in
    either direction, and the highlight covers exactly the text's own characters, its coeng
    included (was: ``no_lexical_match``: the substring field held the coeng as a character)."""
    hits = _lexical(fabric.search(query))
    assert {name for name, _ in hits} == files and all(marked == [highlighted] for _, marked in hits)


def test_only_the_coeng_holds_no_substring_position():
    """guards against: folding too much: every other Khmer or Myanmar mark (bantoc, register
    shifters, the Myanmar asat, virama and dot below) still spells the substring (``កាត់`` cut is
    not ``កាត`` card there either), and the coeng still spells the word field's cut."""
    assert substring_query_tokens("ខ្មែរ") == substring_query_tokens("ខមែរ") == list("ខមែរ")
    for block in (range(0x1780, 0x1800), range(0x1000, 0x10A0)):
        for mark in map(chr, block):
            if unicodedata.category(mark) == "Mn" and mark not in "\u17d2\u17b4\u17b5":  # the inherent vowels fold away
                assert substring_query_tokens("\u1780" + mark + "\u1780") == ["\u1780", fold(mark), "\u1780"], hex(ord(mark))
    assert substring_query_tokens("កាត់") != substring_query_tokens("កាត")
