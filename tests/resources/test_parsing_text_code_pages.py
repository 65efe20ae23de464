"""Legacy code pages in plain text: random bytes are not text, and the pages' own letters (hostile trial 15a).

The measurements these tests sample (seeds, generators, real lines) are in ``docs/reliability.md``'s
rows for trial 15a; the code is :mod:`fabric_resources.parsing.text.script_pages`,
:mod:`~fabric_resources.parsing.text.letter_pairs` and :mod:`~fabric_resources.parsing.text.latin_pages`.
"""

from __future__ import annotations

import random

import pytest

from fabric_resources.parsing.document import ParseError
from fabric_resources.parsing.text.decoding import decode_text
from fabric_resources.parsing.text.script_pages import SCRIPT_PAGES, short_script_reading

_SCRIPT_ENCODINGS = {page.encoding for page in SCRIPT_PAGES}


def _random_letter_bytes(seed: int, low: int = 0xC0) -> bytes:
    """10-63 bytes, each a space (15 %) or a byte from ``low`` to 0xFF: letters in every Cyrillic,
    Greek, Hebrew and Arabic page."""
    r = random.Random(seed)
    return bytes(0x20 if r.random() < 0.15 else r.randint(low, 0xFF) for _ in range(r.randint(10, 63)))


def _decoded_encoding(data: bytes) -> str | None:
    try:
        return decode_text(data)[1]
    except ParseError as exc:
        assert exc.reason == "undecodable" and exc.detail
        return None


def test_random_high_letter_bytes_are_not_read_as_a_cyrillic_or_greek_line() -> None:
    """Guards against (hostile trial 15a): random bytes 0xC0-0xFF with spaces read as a Cyrillic or Greek
    page by the short-line rule of trial 14a (1,664 of 2,000 seeds; ``сНХИА нмПТмжквсЧ`` identified as
    Russian), where they had failed ``undecodable``. Catches dropping either new test of a reading:
    capitals inside words (:func:`capitals_inside_words`; without it 26 of 2,000 pass) or its letter
    pairs (:func:`spelt_like_its_language`; without it 26 of 2,000 pass)."""
    read = {seed: enc for seed in range(600) if (enc := _decoded_encoding(_random_letter_bytes(seed))) in _SCRIPT_ENCODINGS}
    assert read == {}


def test_random_high_letter_files_that_charset_normalizer_calls_cyrillic_are_not_read_so() -> None:
    """Guards against (hostile trial 15a): 64-400 random bytes C0-FF with spaces, which
    charset-normalizer ranks as windows-1251, KOI8-R or ISO-8859-5 (57 of 300 seeds), read as that page
    (``Рилгш хЖ эгР ярГв``). A reading in a Cyrillic, Greek, Hebrew or Arabic page must be written as
    words (``written_as_words``) on this path too. Catches dropping that test in ``non_latin_reading``."""
    read = {}
    for seed in range(120):
        r = random.Random(seed)
        data = bytes(0x20 if r.random() < 0.15 else r.randint(0xC0, 0xFF) for _ in range(r.randint(64, 400)))
        if (encoding := _decoded_encoding(data)) is not None:
            read[seed] = encoding
    assert read == {}
    paragraph = " ".join(SHORT_LINES["ru"]) + "\n"
    assert len(paragraph.encode("cp1251")) >= 64
    assert decode_text(paragraph.encode("cp1251")) == (paragraph, "cp1251")


def test_random_small_letters_are_rarely_read_as_a_line_of_words() -> None:
    """Bytes 0xE0-0xFF (windows-1251's small letters) with spaces pass the case test; their letter pairs
    are still unlike any language's (1,535 of 2,000 read as windows-1251 after trial 14a, 25 of 2,000
    now). Catches dropping the letter-pair test."""
    read = [seed for seed in range(400) if short_script_reading(_random_letter_bytes(seed, low=0xE0)) is not None]
    assert len(read) <= 4, read


SHORT_LINES = {
    "ru": ["Москва — столица России.", "Мама мыла раму, а папа читал газету.", "Завтра будет дождь, возьми зонт.",
           "Кошка спит на подоконнике весь день.", "Пожалуйста, закройте дверь за собой."],
    "uk": ["Київ — столиця України.", "Сьогодні гарна погода, ходімо гуляти.", "Де знаходиться найближча аптека?"],
    "bg": ["София е столицата на България.", "Трябва да купим хляб и мляко.", "Къде е най-близката аптека?"],
    "el": ["Χθες πήγαμε στο θέατρο.", "Σήμερα ο καιρός είναι πολύ ωραίος.", "Θέλω ένα καφέ χωρίς ζάχαρη."],
    "ar": ["مرحبا بالعالم", "القاهرة هي عاصمة مصر.", "أين أقرب صيدلية؟", "أحب شرب الشاي مع النعناع."],
}
_PAGES = {"ru": ("cp1251", "koi8_r", "iso8859_5", "cp866"), "uk": ("cp1251", "koi8_u"), "bg": ("cp1251",),
          "el": ("cp1253", "iso8859_7"), "ar": ("cp1256", "iso8859_6")}


@pytest.mark.parametrize("language", sorted(SHORT_LINES))
def test_real_short_lines_still_read_in_their_script(language) -> None:
    """The lines the short-line rule was built for still read as written in every page of their language
    (the letter-pair and case tests reject none of them; measured: 0 of 160 sentence lines, 11 of 4,303
    lines with CLDR's foreign names)."""
    for text in SHORT_LINES[language]:
        for encoding in _PAGES[language]:
            try:
                data = text.encode(encoding)
            except UnicodeEncodeError:
                continue  # KOI8-R and cp866 hold no em dash
            assert len(data) < 64
            reading = short_script_reading(data)
            assert reading is not None and reading[1] == text, (text, encoding, reading)


@pytest.mark.parametrize("text", [
    "Tallinn on Eesti pealinn. Šokolaad ja žürii. Eile õhtul käisime teatris.\n",
    "Tööpäeval on poes järjekord, aga šokolaadi ja žürii üle ei vaielda.\n",
    "ŠOKOLAAD ja Žürii on siin.\n",
    "Šiandien labai šalta.\n",  # Lithuanian whose only letters outside windows-1252's bytes are š
    "Žurnāls un šampūns.\n",  # Latvian
])
def test_estonian_and_baltic_text_whose_windows_1252_reading_looks_icelandic_reads_as_windows_1257(text) -> None:
    """Guards against (hostile trial 15a): Estonian in windows-1257 or ISO-8859-13 read as windows-1252,
    which holds ``õ ä ö ü`` at the same bytes, so the file looked Western and spelt ``Ðokolaad ja þürii``
    (``šokolaad`` in no search); Lithuanian and Latvian lines whose other letters were too few for the
    Baltic page's own test. Catches dropping the windows-1257 row of ``_ICELANDIC_LOOKALIKES``.
    Estonian in windows-1252 (``š`` at 0x9A) keeps windows-1252."""
    for encoding in ("cp1257", "iso8859_13"):
        assert decode_text(text.encode(encoding)) == (text, "cp1257")
    if text.isascii() or all(ch.isascii() or ch in "šžŠŽõäöüÕÄÖÜ" for ch in text):
        assert decode_text(text.encode("cp1252")) == (text, "cp1252")


@pytest.mark.parametrize("text", [
    "Þetta er góður dagur.\n", "Það var einu sinni maður.\n", "Þórður og Guðrún\n", "Sigurður Þórðarson\n",
    "Reykjavík, Ísafjörður, Akureyri, Seyðisfjörður og Þingvellir.\n", "Tallinn er höfuðborg Eistlands.\n",
    "Eg eri føddur í Havn. Tað er gott veður í dag.\n",
    "Hwæt! We Gardena in geardagum, þeodcyninga þrym gefrunon.\n",
])
def test_icelandic_faroese_and_old_english_keep_windows_1252(text) -> None:
    """The letters ``ð þ`` that send a reading to windows-1257 are Icelandic, Faroese and Old English
    letters: such texts stay windows-1252 (their windows-1257 readings, ``Žetta``, ``Tallinn er
    höfušborg``, are never identified as Estonian, Lithuanian or Latvian)."""
    assert decode_text(text.encode("cp1252")) == (text, "cp1252")


def test_romanian_reads_its_comma_letters_where_the_bytes_are_iso_8859_16_and_the_cedilla_ones_where_they_match() -> None:
    """Guards against (hostile trial 15a): Romanian in ISO-8859-16, the one legacy page with the comma
    letters ``ș ț``, read as windows-1250 with its quotation marks as letters (``ĄÎnţelepciunea …
    răbdare.µ``) or as ISO-8859-2 (``Ťmunţiť``). Where the bytes are ISO-8859-16's own (``„ ”`` at
    0xA5 0xB5) they read as it, comma letters and quotes exact; where they are the same in windows-1250
    (Romanian's letters and ``« »`` are), they read as windows-1250 defines them, ``ş ţ``, as they did:
    which page such a file is in is not in its bytes, and search folds ``ş``, ``ș`` and ``s`` alike.
    Catches dropping the ISO-8859-16 page or Romanian's quotation marks (the windows-1250 reading
    ``Ą…µ`` then ties and the identifier's probability decides), and reading cedilla bytes as
    ISO-8859-16 when both pages read them alike."""
    quoted = "El a spus: „Înțelepciunea își are rădăcinile în răbdare.”\n"
    assert decode_text(quoted.encode("iso8859_16")) == (quoted, "iso8859_16")
    guillemets = "Țara noastră are «munți» și râuri frumoase.\n"
    cedilla = guillemets.replace("ș", "ş").replace("ț", "ţ").replace("Ț", "Ţ")
    assert decode_text(guillemets.encode("iso8859_16")) == (cedilla, "cp1250")
    plain = "București este capitala României și cel mai mare oraș al țării.\n"
    assert decode_text(plain.encode("iso8859_16")) == (plain.replace("ș", "ş").replace("ț", "ţ"), "cp1250")
    for text in (cedilla, quoted.replace("ș", "ş").replace("ț", "ţ")):
        assert decode_text(text.encode("cp1250")) == (text, "cp1250")


@pytest.mark.parametrize("encoding", ["cp1250", "iso8859_2"])
def test_a_polish_word_alone_reads_in_its_page(encoding) -> None:
    """Guards against (hostile trial 15a): ``Łódź`` alone in windows-1250 or ISO-8859-2 read as
    windows-1252, ``£ódŸ`` / ``£ód¼``: the capital ``Ÿ`` after a small letter went uncounted at the
    text's end, ``¼`` against a letter was no misplaced character, and a word with 1 ASCII letter in 4
    fell under the letters signal's share (it needed a third; Cyrillic read as windows-1250 has none).
    Catches restoring any of the three. A fraction after a digit or alone stays windows-1252."""
    for text in ("Łódź", "Łódź\n"):
        assert decode_text(text.encode(encoding)) == (text, encoding)
    for western in ("1¼ c. sugar", "¼ cup\n", "Add ½ cup of flour.\n"):
        assert decode_text(western.encode("cp1252")) == (western, "cp1252")


def test_a_file_of_one_long_line_is_judged_on_a_bounded_sample(monkeypatch) -> None:
    """Guards against (hostile trial 15a): a file of one 8 MB line in windows-1252 or windows-1250 took
    21 s / 10 s to decode (170 s at the 64 MiB cap, in-process): the Latin-page test's sample kept
    lines whole, so the language identifier and the misplaced-character count read the whole file
    four times. The sample now cuts a long line; the identifier reads at most 16 KiB and a bit, and
    the text still decodes exactly. Catches keeping a long line whole."""
    import fabric_resources.parsing.language as language

    read: list[int] = []
    for name in ("identify_language", "language_probability"):
        original = getattr(language, name)

        def recording(text, *args, _original=original):
            read.append(len(text))
            return _original(text, *args)

        monkeypatch.setattr(language, name, recording)
    polish = "Pchnąć w tę łódź jeża lub ośm skrzyń fig. W Łodzi źdźbło trawy rośnie. " * 4000
    french = "Où est la bibliothèque? Là-bas, à côté du café, après l'église. Noël à Besançon. " * 4000
    for text, encoding in ((polish, "cp1250"), (french, "cp1252")):
        read.clear()
        assert decode_text(text.encode(encoding)) == (text, encoding)
        assert read and max(read) <= (1 << 14) + 256, max(read)


def test_a_long_turkish_or_estonian_line_is_identified_on_a_bounded_sample(monkeypatch) -> None:
    """The Turkish and Estonian test (``lookalike_page_reading``) identified the whole file: 4 s for a
    line of 8 MB, and on a sentence repeated 10,000 times py3langid's probability for Turkish fell
    under 0.5 (0.40 at 64,000 characters), so the file read as windows-1252 (``Kýrmýzý``). It now reads
    the same 16 KiB sample as the Latin pages. Catches identifying the whole text."""
    import fabric_resources.parsing.language as language

    read: list[int] = []
    original = language.identify_language

    def recording(text):
        read.append(len(text))
        return original(text)

    monkeypatch.setattr(language, "identify_language", recording)
    for text, encoding in (("Kırmızı elma ağaçta. İstanbul çok güzel. " * 10000, "cp1254"),
                           ("Šokolaad ja žürii. Eile õhtul käisime teatris. " * 10000, "cp1257")):
        read.clear()
        assert decode_text(text.encode(encoding)) == (text, encoding)
        assert max(read) <= (1 << 14) + 256


def test_8_bit_text_after_a_utf16_bom_is_undecodable_not_cjk_mojibake() -> None:
    """Guards against (hostile trial 15a): ASCII or UTF-8 text behind a UTF-16 BOM (a tool's stray
    BOM) read as UTF-16, ``效汬\\u206f潷汲…``: active, no word of it in any search. It fails
    ``undecodable`` naming why; real UTF-16 text with its BOM, Latin or CJK without a space, still reads.
    Catches dropping ``looks_8_bit_after_utf16_bom``."""
    import codecs

    for data in (codecs.BOM_UTF16_LE + b"Hello world, this is plain ASCII text.\r\n",
                 codecs.BOM_UTF16_BE + "Grüße aus Köln, schön hier!\n".encode("utf-8")):
        with pytest.raises(ParseError) as caught:
            decode_text(data)
        assert caught.value.reason == "undecodable" and "8-bit text" in caught.value.detail
    for text in ("Hello world, this is UTF-16.\n", "、この男には欠けていた", "けしきがない。そこ"):
        for bom, encoding in ((codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")):
            assert decode_text(bom + text.encode(encoding)) == (text, "utf-16")


@pytest.mark.parametrize(("text", "encoding"), [
    ("Мама мыла раму,\n", "cp1251"), ("Ёлка стояла\n", "koi8_r"), ("Ёлка стояла\n", "iso8859_5"),
    ("Χθες πήγαμε\n", "cp1253"), ("في المستشفى.\n", "cp1256"), ("погода, ходімо\n", "koi8_u"),
    ("саду цветут\n", "cp1251"),
])
def test_a_short_line_that_also_decodes_as_cjk_reads_in_its_script(text, encoding) -> None:
    """Guards against (hostile trial 15a): a short line of another script whose bytes also decode as
    GB18030 or cp932 read as CJK mojibake (``Мама мыла раму,`` as ``锑爨 禧豚 疣祗,``: 568 of 5,004 real
    lines), because the short-line rule was consulted only where nothing else decoded. With readings
    required to be written as words, it is consulted whatever CJK reading was chosen; no Chinese or
    Japanese snippet of ../shared moved. Catches consulting it only when nothing decoded."""
    data = text.encode(encoding)
    assert len(data) < 64
    assert decode_text(data) == (text, encoding)


def test_a_short_dos_cyrillic_line_is_not_read_as_windows_1252() -> None:
    """Guards against (hostile trial 15a): Russian in cp866 (DOS), whose small letters а-п are bytes
    A0-AF, windows-1252's symbols, read as windows-1252 (``Œ\\xa0¬\\xa0 ¬ë«\\xa0``): the short-line rule
    was not consulted once windows-1252 had read a line. It is, after the Latin pages; no Western text
    or snippet of ../shared moved (12,397). Catches not consulting it there."""
    for text in ("Мама мыла раму, а папа\n", "Я не знаю, где он\n"):
        assert decode_text(text.encode("cp866")) == (text, "cp866")
