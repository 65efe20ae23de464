"""Thai, Lao, Khmer and Myanmar in the word channel: runs of them are words
(``fabric_resources.word_segmentation``), not character bigrams. Their alphabets are small, so a
bigram of a query stood in nearly every passage: each was a word match, lexical evidence, and the
pack never said "no lexical match" (hostile trial 13a; Thai left open until stop 50, Lao until stop
51, Khmer and Myanmar until stop 52)."""

from __future__ import annotations

import unicodedata

import pytest
from conftest import ingested_files

from fabric_query import Fabric
from fabric_query.evidence import match_ranges
from fabric_query.querylang import parse_query
from fabric_query.channels.lexical import word_tokens
from fabric_resources.text_folding import fold
from fabric_resources.word_segmentation import segmented_words, word_token

FILES = {
    # A cat likes to sleep on the sofa in our house.
    "cat.txt": "แมวชอบนอนบนโซฟาในบ้านของเรา\n",
    # The sky train runs from Bangkok to Chiang Mai every day, between the provinces.
    "train.txt": "รถไฟฟ้าวิ่งจากกรุงเทพไปเชียงใหม่ทุกวันระหว่างจังหวัด\n",
    # Heavy rain in the monsoon season floods many provinces.
    "rain.txt": "ฝนตกหนักในฤดูมรสุมทำให้น้ำท่วมหลายจังหวัด\n",
    # The floating market has plenty of fruit and food for tourists to choose from.
    "market.txt": "ตลาดน้ำมีผลไม้และอาหารมากมายให้นักท่องเที่ยวเลือกซื้อ\n",
    # Lao: the cat likes to sleep on the sofa in our house.
    "lao-cat.txt": "ແມວມັກນອນເທິງໂຊຟາໃນເຮືອນຂອງພວກເຮົາ\n",
    # Heavy rain in the rainy season floods many provinces.
    "lao-rain.txt": "ຝົນຕົກໜັກໃນລະດູຝົນເຮັດໃຫ້ນ້ຳຖ້ວມຫຼາຍແຂວງ\n",
    # The morning market has many kinds of fruit for tourists to choose from.
    "lao-market.txt": "ຕະຫຼາດເຊົ້າມີໝາກໄມ້ຫຼາຍຊະນິດໃຫ້ນັກທ່ອງທ່ຽວເລືອກຊື້\n",
    # The train runs from Vientiane to Luang Prabang every day.
    "lao-train.txt": "ລົດໄຟແລ່ນຈາກວຽງຈັນໄປຫຼວງພະບາງທຸກມື້\n",
    # Khmer: the cat likes to sleep on the sofa in our house.
    "km-cat.txt": "ឆ្មាចូលចិត្តដេកលើសាឡុងនៅក្នុងផ្ទះរបស់យើង\n",
    # Heavy rain in the rainy season floods many provinces.
    "km-rain.txt": "ភ្លៀងធ្លាក់ខ្លាំងនៅរដូវវស្សាធ្វើឱ្យទឹកជំនន់ច្រើនខេត្ត\n",
    # The morning market has many kinds of fruit for tourists to choose from.
    "km-market.txt": "ផ្សារព្រឹកមានផ្លែឈើច្រើនប្រភេទសម្រាប់ភ្ញៀវទេសចរជ្រើសរើស\n",
    # The train runs from Phnom Penh to Battambang every day.
    "km-train.txt": "រថភ្លើងរត់ពីភ្នំពេញទៅបាត់ដំបងរៀងរាល់ថ្ងៃ\n",
    # Myanmar: the cat likes to sleep on the sofa in our house.
    "my-cat.txt": "ကြောင်သည်ကျွန်ုပ်တို့အိမ်ရှိဆိုဖာပေါ်တွင်အိပ်ရသည်ကိုကြိုက်သည်\n",
    # In the rainy season it rains heavily, so many states flood.
    "my-rain.txt": "မိုးရာသီတွင်မိုးသည်းထန်စွာရွာသဖြင့်ပြည်နယ်များစွာတွင်ရေကြီးသည်\n",
    # The morning market has many kinds of fruit for travellers to choose from.
    "my-market.txt": "မနက်ဈေးတွင်ခရီးသွားများရွေးချယ်ရန်သစ်သီးအမျိုးမျိုးရှိသည်\n",
    # The train runs from Yangon to Mandalay every day.
    "my-train.txt": "ရထားသည်ရန်ကုန်မှမန္တလေးသို့နေ့တိုင်းပြေးသည်\n",
    # I want to eat mohinga, its snack (mont) typed asat before dot below: canonically the NFC word.
    "my-snack.txt": "ကျွန်တော်\u1019\u102f\u1014\u103a\u1037ဟင်းခါးစားချင်တယ်\n",
    # Khmer: a woman reads a book at school (ស្ត្រី typed as the Unicode Standard orders it).
    "km-woman.txt": "ស្ត្រីម្នាក់អានសៀវភៅនៅសាលារៀន\n",
}
#: Query words: (word, the files holding it). ``ช้าง`` (elephant) is in none; its bigram ``าง``
#: (folded) is in ``ระหว่าง``, and ``ตลาด``'s ``ลา`` is in ``หลาย``. ``ตลาด`` (market) stands inside
#: ``ตลาดน้ำ`` (floating market), one word of the word list: the substring channel finds it there.
#: Lao: ``ຊ້າງ`` (elephant), ``ຄວາຍ`` (buffalo) and ``ເມືອງ`` (town) are in no file, but their folded
#: bigrams are (``າງ`` in ``ຫຼວງພະບາງ``, ``ວາ`` and ``າຍ`` in ``ຫຼາຍ``, ``ອງ`` in ``ຂອງ``); ``ໝາ`` (dog)
#: stands only inside ``ໝາກໄມ້`` (fruit), where the substring channel finds it.
#: Khmer: ``ដំរី`` (elephant) and ``ក្របី`` (buffalo) are in no file, but their bigrams were (``ដំ`` in
#: ``ដំបង``; ``រប`` in ``របស់``, the coeng folded away). Myanmar: ``ဆင်`` (elephant) and ``ကျွဲ``
#: (buffalo) are in no file; ``ကျ`` is in ``ကျွန်ုပ်`` (we).
WORDS = [("มรสุม", {"rain.txt"}), ("ตลาด", {"market.txt"}), ("แมว", {"cat.txt"}),
         ("จังหวัด", {"train.txt", "rain.txt"}), ("ช้าง", set()), ("นักท่องเที่ยว", {"market.txt"}),
         ("ແຂວງ", {"lao-rain.txt"}), ("ຕະຫຼາດ", {"lao-market.txt"}), ("ແມວ", {"lao-cat.txt"}),
         ("ວຽງຈັນ", {"lao-train.txt"}), ("ນັກທ່ອງທ່ຽວ", {"lao-market.txt"}), ("ໝາ", {"lao-market.txt"}),
         ("ຊ້າງ", set()), ("ຄວາຍ", set()), ("ເມືອງ", set()),
         ("ខេត្ត", {"km-rain.txt"}), ("ផ្សារ", {"km-market.txt"}), ("ទេសចរ", {"km-market.txt"}),
         ("ឆ្មា", {"km-cat.txt"}), ("ដំរី", set()), ("ក្របី", set()),
         ("ဈေး", {"my-market.txt"}), ("ကြောင်", {"my-cat.txt"}), ("ခရီးသွား", {"my-market.txt"}),
         ("ဆင်", set()), ("ကျွဲ", set())]


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    return Fabric(ingested_files(tmp_path_factory.mktemp("thai"), FILES).root)


def test_thai_and_lao_text_is_read_as_words_that_join_back_to_it():
    """guards against: a cut that drops or alters characters (the word field would then hold text
    the chunk does not), or Thai read as bigrams again."""
    for name, text in FILES.items():
        if name[:3] in ("km-", "my-"):
            continue
        tokens = word_tokens(text)
        assert "".join(tokens) == fold(text).strip()
        assert max(len(t) for t in tokens) > 2
    assert word_tokens("ฤดูมรสุม") == ["ฤดู", "มรสุม"]
    assert word_tokens("ລົດໄຟແລ່ນຈາກວຽງຈັນ") == ["ລົດໄຟ", "ແລນ", "ຈາກ", "ວຽງຈັນ"]  # folded: no tone mark


def test_lao_words_after_an_unlisted_stretch_are_still_words():
    """guards against (hostile trial 18e): newmm reads Lao letters as no Thai, so where no listed word
    started (a name, a typo, a stray sign) it took the rest of the run as one word: every Lao word
    after ``ຂຂຂ`` or ``ຯ`` was lost to the word field. The stretch ends where a listed word starts."""
    language_today = ["ພາສາລາວ", "ໃນ", "ປັດຈຸບັນ"]  # the Lao language today
    assert word_tokens("ຂຂຂພາສາລາວໃນປັດຈຸບັນ") == ["ຂຂຂ", *language_today]
    assert word_tokens("ຯພາສາລາວໃນປັດຈຸບັນ") == ["ຯ", *language_today]
    assert word_tokens("ພາສາລາວຂຂຂໃນປັດຈຸບັນ") == ["ພາສາລາວ", "ຂຂຂ", *language_today[1:]]
    long_run = "ຂຂ".join(["ພາສາລາວໃນປັດຈຸບັນ"] * 40)  # past safe_mode's ~120-character pieces
    tokens = word_tokens(long_run)  # (a piece's edge may still cut a word, as in Thai)
    assert "".join(tokens) == long_run and max(map(len, tokens)) <= len("ປັດຈຸບັນ")


@pytest.mark.parametrize("word, holders", WORDS)
def test_a_word_is_lexical_evidence_only_where_it_stands(fabric, word, holders):
    """Property: the lexical hits for a Thai word are exactly the files that hold it, the word
    channel's among them; each is highlighted on the word, and a word no file holds leaves the pack
    saying ``no_lexical_match``.

    guards against: Thai, Lao, Khmer or Myanmar read as character bigrams, where ``ตลาด`` (market)
    matched ``หลาย`` (many) by ``ลา``, and ``ช้าง`` (elephant), in no file, matched ``ระหว่าง`` by
    ``าง``; a Khmer word split by the tokenizer at its coeng sign."""
    assert holders == {n for n, t in FILES.items() if fold(word) in fold(t)}
    pack = fabric.search(word, debug=True)
    lexical = {h.citation.source_key.rsplit("/", 1)[-1] for h in pack.results if h.lexical}
    by_word = {h.citation.source_key.rsplit("/", 1)[-1] for h in pack.results if "word" in h.channels}
    assert lexical == holders and by_word <= holders
    assert pack.no_lexical_match == (not holders)
    for hit in pack.results:
        if hit.lexical:
            assert [s.text for s in hit.highlights if s.highlighted] == [word], hit.text


def test_a_thai_sentence_query_ranks_the_file_it_paraphrases_first(fabric):
    """guards against: a query's words lost to the cut: ``ฝนตก`` (rain falls) and ``น้ำท่วม`` (flood)
    find the rain file first, by the word channel."""
    pack = fabric.search("ฝนตกแล้วน้ำท่วม", debug=True)
    assert pack.channel_rankings["word"]
    first = pack.results[0]
    assert first.citation.source_key.endswith("/rain.txt") and "word" in first.channels


def test_a_lao_sentence_query_ranks_the_file_it_paraphrases_first(fabric):
    """guards against: Lao read as bigrams or left out of the cut: ``ຝົນຕົກ`` (rain falls) and
    ``ນ້ຳຖ້ວມ`` (flood) find the Lao rain file first, by the word channel."""
    pack = fabric.search("ຝົນຕົກແລ້ວນ້ຳຖ້ວມ", debug=True)
    assert pack.channel_rankings["word"]
    first = pack.results[0]
    assert first.citation.source_key.endswith("/lao-rain.txt") and "word" in first.channels


def test_khmer_and_myanmar_text_is_read_as_words_that_keep_their_marks():
    """guards against: folding that drops the coeng, asat and virama signs (ICU's segmenter then
    reads another text), a cut that drops or alters characters, Khmer or Myanmar read as bigrams
    again, or a word token split at a coeng (``ខ``, ``មែរ``)."""
    assert fold("ខ្មែរ") == "ខ្មែរ" and fold("မြန်မာ") == "မြန်မာ"
    for name, text in FILES.items():
        if name[:3] not in ("km-", "my-"):
            continue
        words = segmented_words(fold(text).strip())
        assert "".join(words) == fold(text).strip()
        assert word_tokens(text) == [t for t in map(word_token, words) if t]
        assert sum(len(w) > 2 for w in words) >= len(words) // 2, words
    assert word_tokens("ភ្លៀងធ្លាក់ខ្លាំង") == ["ភលៀង", "ធលាក០២", "ខលាំង"]  # rain falls heavily (bantoc coded)
    assert word_tokens("မနက်ဈေး") == ["မနက၂", "ဈေး"]  # morning market (asat coded)


def test_a_khmer_word_inside_a_compound_is_found_and_highlighted_by_its_characters(fabric):
    """guards against: a kept coeng breaking the substring field (``ជំនន់`` inside ``ទឹកជំនន់``
    flood, and ``ភ្លើង`` fire inside ``រថភ្លើង`` train, are no words of their own: found only
    there), or a highlight that misses the sign."""
    pack = fabric.search("ជំនន់")
    assert {h.citation.source_key.rsplit("/", 1)[-1] for h in pack.results if h.lexical} == {"km-rain.txt"}
    assert [s.text for s in pack.results[0].highlights if s.highlighted] == ["ជំនន់"]
    pack = fabric.search("ភ្លើង")  # coeng + lo
    assert {h.citation.source_key.rsplit("/", 1)[-1] for h in pack.results if h.lexical} == {"km-train.txt"}
    assert [s.text for s in pack.results[0].highlights if s.highlighted] == ["ភ្លើង"]


@pytest.mark.parametrize("query, file", [("ភ្លៀងធ្លាក់ធ្វើឱ្យទឹកជំនន់", "km-rain.txt"),  # rain falls, causing floods
                                         ("မိုးရွာပြီးရေကြီးသည်", "my-rain.txt")])  # it rained and flooded
def test_a_khmer_or_myanmar_sentence_query_ranks_the_file_it_paraphrases_first(fabric, query, file):
    """guards against: a Khmer or Myanmar query's words lost to the cut or to folding."""
    pack = fabric.search(query, debug=True)
    assert pack.channel_rankings["word"]
    first = pack.results[0]
    assert first.citation.source_key.endswith("/" + file) and "word" in first.channels


#: Myanmar ``မုန့်`` (mont, snack), NFC (dot below, then asat) and as typed in my-snack.txt.
MONT_NFC, MONT_TYPED = "\u1019\u102f\u1014\u1037\u103a", "\u1019\u102f\u1014\u103a\u1037"


def test_canonically_equivalent_khmer_and_myanmar_fold_alike():
    """guards against: folding per scalar keeping the marks in the order typed, so a word and its
    canonical equivalent (Unicode orders the dot below, class 7, before the asat, 9) were two
    words to the segmenter and two strings to the substring field; or a reordering that moves marks
    of one class (the kinzi's asat + virama) or drops one."""
    assert unicodedata.normalize("NFC", MONT_TYPED) == MONT_NFC
    assert fold(MONT_TYPED) == fold(MONT_NFC) == MONT_NFC
    assert word_tokens("ကျွန်တော်" + MONT_TYPED) == word_tokens("ကျွန်တော်" + MONT_NFC)
    kinzi = "သင်္ချိုင်း"  # cemetery: asat then virama, one class, kept in order
    assert fold(kinzi) == kinzi
    coeng_atthacan = "\u1780\u17dd\u17d2\u1780"  # atthacan (230) after coeng (9)
    assert fold(coeng_atthacan) == unicodedata.normalize("NFC", coeng_atthacan)


@pytest.mark.parametrize("mont", [MONT_NFC, MONT_TYPED])
def test_a_myanmar_word_finds_its_canonical_equivalent(fabric, mont):
    """guards against: ``မုန့်ဟင်းခါး`` (mohinga, one word to ICU) typed in NFC missing the file that
    holds it typed asat first (and the other way round), in both lexical fields, or left without a
    highlight."""
    pack = fabric.search(mont + "ဟင်းခါး", debug=True)
    hits = [h for h in pack.results if h.lexical]
    assert [h.citation.source_key.rsplit("/", 1)[-1] for h in hits] == ["my-snack.txt"]
    assert {"word", "substring"} <= set(hits[0].channels)
    assert [s.text for s in hits[0].highlights if s.highlighted] == [MONT_TYPED + "ဟင်းခါး"]


@pytest.mark.parametrize("passage", ["စာအုပ်\U000116d1 ဖတ်",  # a Myanmar Extended-C digit (beyond the BMP)
                                     "စာအုပ်\ua9e0 ဖတ်",  # a Myanmar Extended-B letter (Shan gha)
                                     "ផ្សារ\u19e1 ព្រឹក"])  # a Khmer lunar date symbol
def test_the_highlighter_cuts_a_run_as_the_index_does(passage):
    """Property: a word the word field holds and the query asks for is highlighted. guards against:
    the highlighter cutting a run that took in a letter of the Khmer Symbols or Myanmar Extended
    blocks, which the index leaves out of its runs, so the cut differed (and ICU's UTF-16 offsets
    shifted past an Extended-C digit): ``စာအုပ်`` (book) was no highlight in ``စာအုပ်𑛑 ဖတ်``."""
    first, second = passage.split(" ")
    first = first[:-1]
    query = first + second  # read (the two words without the gap, so no substring match spans them)
    assert set(word_tokens(query)) <= set(word_tokens(passage))
    assert [passage[a:b] for a, b in match_ranges(passage, parse_query(query))] == [first, second]


#: Khmer written with the parts of a syllable in another order than the Unicode Standard's, as
#: writers type them (they render alike): (typed, standard). The subscript ro before another
#: subscript (woman; science), a vowel before the register shifter (soup; B).
KHMER_ORDERS = [("ស្រ្តី", "ស្ត្រី"), ("សាស្រ្ត", "សាស្ត្រ"), ("ស\u17bb\u17ca\u1794", "ស\u17ca\u17bb\u1794"),
                ("\u1794\u17b8\u17ca", "\u1794\u17ca\u17b8")]


def test_khmer_syllable_parts_typed_in_another_order_fold_alike():
    """guards against: ``ស្រ្តី`` (coeng ro typed first, common in real text) missing ``ស្ត្រី`` in both
    lexical fields (trial 19d), or a reordering that changes text already in the standard order,
    changes its length (every folded character maps to one source character) or moves a part past
    a sign that ends the run."""
    for typed, standard in KHMER_ORDERS:
        assert fold(typed) == fold(standard) == standard
        assert len(fold(typed)) == len(typed)
        assert word_tokens(typed + "ម្នាក់") == word_tokens(standard + "ម្នាក់")
    for name, text in FILES.items():
        if name[:3] in ("km-", "my-") and name != "my-snack.txt":
            assert fold(text) == text, name
    assert fold("\u1780\u17b6\u17c6\u17d2\u179a") == "\u1780\u17b6\u17c6\u17d2\u179a"  # a sign between: left as typed


@pytest.mark.parametrize("typed, standard", KHMER_ORDERS[:1])
def test_khmer_typed_in_another_order_finds_the_standard_spelling(fabric, typed, standard):
    """Property: the same Khmer word typed in either order finds the file, by both lexical fields,
    highlighted on the file's own characters."""
    for query in (typed, standard):
        pack = fabric.search(query, debug=True)
        hits = [h for h in pack.results if h.lexical]
        assert [h.citation.source_key.rsplit("/", 1)[-1] for h in hits] == ["km-woman.txt"], query
        assert {"word", "substring"} <= set(hits[0].channels)
        assert [s.text for s in hits[0].highlights if s.highlighted] == [standard]
