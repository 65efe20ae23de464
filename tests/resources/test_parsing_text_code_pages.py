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


def test_random_small_letters_are_rarely_read_as_a_line_of_words() -> None:
    """Bytes 0xE0-0xFF (windows-1251's small letters) with spaces pass the case test; their letter pairs
    are still unlike any language's (1,535 of 2,000 read as windows-1251 after trial 14a, 10 of 2,000
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
