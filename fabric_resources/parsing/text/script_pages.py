"""Short texts in a legacy code page of another script: Cyrillic, Greek, Hebrew, Arabic.

Under 64 bytes charset-normalizer gives no verdict (``_MIN_BYTES_FOR_CHARSET_NORMALIZER_VERDICT`` in
:mod:`~fabric_resources.parsing.text.decoding`), so a line of Russian in windows-1251, Greek in
windows-1253 or Hebrew in windows-1255 was undecodable, and a line of KOI8-R read as cp932 half-width
katakana (hostile trials 13a, 14a). :func:`short_script_reading` reads such a line in the page whose
reading is all one script and identified as a language of that script.

Measured (trial 14a) on 902 lines and 8-16-character snippets of Russian, Ukrainian, Bulgarian, Greek,
Hebrew, Arabic and Thai in their code pages (Russian in windows-1251, KOI8-R, ISO-8859-5 and cp866):
0 -> 237 read exactly (lines: 0 -> 28 of 38), 2 Arabic snippets that were undecodable read wrong;
Hebrew stays undecodable (its letters read as plausible Cyrillic and Greek: ambiguous), and a line
that decodes as GB18030 stays GB18030 (a Chinese line reads as Cyrillic letters just as well). Of
../shared's Chinese and Japanese units and snippets (38,706), none that read right moved; 2 Big5
snippets went from cp932 katakana to cp866 mojibake.

Random letter bytes C0-FF with spaces (not text at all) then read as one of these pages 1,664 times in
2,000 seeds (the language identifier's probability is normalised over languages: it says which
language letters are most like, not that they are one). Since trial 15a a reading must also be
written as words are (:func:`capitals_inside_words`) and spelt like one of its languages
(:func:`spelt_like_its_language`), together :func:`written_as_words`: 1 of those 2,000 reads so (an
Arabic-page reading with Urdu letters), and of 5,004 real lines (sentence pieces and lists of CLDR
names in eight languages, every page of each) 4,388 read exactly where 3,867 did: with implausible
rivals gone, fewer are ambiguous. A line that decodes as GB18030 or cp932 too is now read so as well
(Chinese and Japanese bytes read in these pages mix capitals and small letters inside words): 4,956
of the 5,004, and none of 11,598 short Chinese and Japanese snippets moved.
Hebrew lines, no longer ambiguous once their Cyrillic and Greek readings fail those tests, mostly read
as Hebrew: of 381 lines under 64 bytes (sentences and CLDR names in windows-1255 and ISO-8859-8), 330
exact where 33 were (undecodable 303 -> 37; 4 transliterated names, ``סרנאן טונגו``, read as
windows-1251 where 2 did).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from fabric_resources.parsing.text.latin_pages import capital_share, misplaced_characters
from fabric_resources.parsing.text.letter_pairs import LEXICONS, letter_pair_bits

#: py3langid's languages written in each script (its model: ``ba``, ``tt``, ``kk``... in Cyrillic).
CYRILLIC = frozenset({"ru", "uk", "be", "bg", "mk", "sr", "kk", "ky", "tg", "tt", "ba", "mn"})
GREEK = frozenset({"el", "grc"})
HEBREW = frozenset({"he", "hbo"})
ARABIC = frozenset({"ar", "arz", "ary", "fa", "ur", "ps", "sdh", "ug"})


@dataclass(frozen=True)
class ScriptPage:
    """A legacy code page of one script, the script's Unicode name prefix and its languages."""

    encoding: str
    script: str
    languages: frozenset[str]


#: The single-byte pages of :data:`~fabric_resources.parsing.text.decoding.NON_LATIN_LEGACY`, in the
#: order that breaks a tie (the Windows page of a script first). Thai (windows-874) is left out: the
#: identifier knows one language in Thai letters and calls any reading in them Thai, 1.0, and 156 of
#: ../shared's 8-16-character Chinese and Japanese snippets (Big5, EUC-JP, GB18030) read as such.
SCRIPT_PAGES: tuple[ScriptPage, ...] = (
    ScriptPage("cp1251", "CYRILLIC", CYRILLIC),
    ScriptPage("koi8_r", "CYRILLIC", CYRILLIC),
    ScriptPage("koi8_u", "CYRILLIC", CYRILLIC),
    ScriptPage("iso8859_5", "CYRILLIC", CYRILLIC),
    ScriptPage("cp866", "CYRILLIC", CYRILLIC),
    ScriptPage("cp1253", "GREEK", GREEK),
    ScriptPage("iso8859_7", "GREEK", GREEK),
    ScriptPage("cp1255", "HEBREW", HEBREW),
    ScriptPage("iso8859_8", "HEBREW", HEBREW),
    ScriptPage("cp1256", "ARABIC", ARABIC),
    ScriptPage("iso8859_6", "ARABIC", ARABIC),
)

#: The identifier's probability, summed over the script's languages, a reading needs: the threshold of
#: :data:`fabric_resources.parsing.language.MIN_CONFIDENCE` (0.5; 99 % of such answers right there).
_MIN_PROBABILITY = 0.5
#: At least this share of the reading's letters (ASCII ones counted) must be the script's: Latin text
#: read in these pages keeps its ASCII letters (the Polish pangram ``Zażółć gęślą jaźń.`` in ISO-8859-2,
#: 9 of its 16 letters accented, read as Thai at 0.56 and identified ``th`` while windows-874 was a
#: candidate).
_MIN_SCRIPT_LETTER_SHARE = 2 / 3
#: The fewest different letters of the script a reading must hold: bytes that are no text repeat a few
#: (``FF FE FD`` four times reads in windows-1251 as ``яюэяюэяюэяюэ``, identified as Belarusian, 0.66);
#: every line and snippet of 10 letters or more measured holds 6 or more.
_MIN_DISTINCT_LETTERS = 6
#: The most a reading's letters may be capitals: prose is written in small letters, while KOI8-R read
#: as windows-1251 (or the reverse) swaps the case of every Cyrillic letter (``бВЕПЮ ЛШ``), and Arabic
#: or Thai read as ISO-8859-5 gives capitals (``ЭШЧЁ пэн ЭЧс``). A line in capitals alone stays
#: undecodable, as before.
_MAX_CAPITAL_SHARE = 0.5
#: Letters written only at a word's end: Hebrew's final kaf, mem, nun, pe and tsadi, and Greek's final
#: sigma (``ς``: windows-1251's ``т`` read as windows-1253).
_FINAL_FORMS = frozenset("\u05da\u05dd\u05df\u05e3\u05e5\u03c2")
#: The fewest bits per letter pair by which a reading must be likelier under its language's letter pairs
#: than under random letters (:func:`~fabric_resources.parsing.text.letter_pairs.letter_pair_bits`).
#: Measured (trial 15a) on the 4,303 real lines under 64 bytes this module read right before (1,207
#: pieces of sentences written for it and 3,096 lists of CLDR's territory and language names, in
#: Russian, Ukrainian, Belarusian, Bulgarian, Macedonian, Serbian, Greek and Arabic, in each of their
#: pages): 0 sentence pieces below it, 15 name lists (``Οσάζ, Λάνγκι``, ``Люксембург``; at 0: 4, at
#: 0.5: 64 and 10 sentence pieces). Of 2,000 seeded random small letters (bytes E0-FF with spaces)
#: that every other test here passes, 14 reach it (50 reach 0, 4 reach 0.5).
MIN_LETTER_PAIR_BITS = 0.25


def short_script_reading(data: bytes) -> tuple[str, str] | None:
    """``(encoding, text)`` for a short text in a page of :data:`SCRIPT_PAGES`, or None.

    A page's reading qualifies when it decodes strictly and (:func:`_all_of_script`) every non-ASCII
    character but punctuation and spaces (Unicode categories P, Z) is of the page's script (its Unicode
    name starts so: letters and Hebrew points alike), two thirds of its letters are, six different
    ones or more; at most half its letters are capitals, none right after a small letter, and it is
    spelt like one of the script's languages (:func:`written_as_words`); a Cyrillic reading's letters
    all belong to one
    Cyrillic alphabet (:func:`foreign_letters`: Bulgarian in windows-1251 read as ISO-8859-5 spells
    ``бюєшџ``); and the language identifier gives it at least 0.5 probability summed over the script's
    languages (which needs 10 letters, :data:`~fabric_resources.parsing.language.MIN_LETTERS`). Of
    several (Russian reads as Cyrillic letters in every Cyrillic page), the one with the fewest
    misplaced characters (:func:`~fabric_resources.parsing.text.latin_pages.misplaced_characters`,
    :func:`misplaced_marks`: KOI8-R read as windows-1251 is ``лПУЛЧБ``, Russian read as windows-1255
    opens words with Hebrew points), then the highest probability, then the first in
    :data:`SCRIPT_PAGES`. When a reading in another script has as few misplaced characters as that
    one, the bytes are ambiguous and None is returned (a Hebrew line could read as plausible Cyrillic
    and Greek before those had to be spelt as words).

    >>> short_script_reading("Москва — столица России.".encode("cp1251"))
    ('cp1251', 'Москва — столица России.')
    >>> short_script_reading("Ёлка стояла в углу.".encode("koi8_r"))
    ('koi8_r', 'Ёлка стояла в углу.')
    """
    from fabric_resources.parsing.language import language_probability

    candidates = []
    for order, page in enumerate(SCRIPT_PAGES):
        try:
            reading = data.decode(page.encoding, errors="strict")
        except UnicodeDecodeError:
            continue
        if not _all_of_script(reading, page.script) or capital_share(reading) > _MAX_CAPITAL_SHARE \
                or foreign_letters(reading):
            continue
        probability = language_probability(reading, page.languages)
        if probability < _MIN_PROBABILITY or not written_as_words(reading, page):
            continue
        key = (misplaced_characters(reading) + misplaced_marks(reading), -probability, order)
        candidates.append((key, page, reading))
    if not candidates:
        return None
    candidates.sort(key=lambda c: c[0])
    (key, page, reading), rivals = candidates[0], candidates[1:]
    if any(r_page.script != page.script and r_key[0] == key[0] for r_key, r_page, _ in rivals):
        return None  # another script reads the bytes as plausibly: ambiguous, left undecodable
    return page.encoding, reading


#: The letters of each Cyrillic language py3langid names, small (CLDR's main exemplar characters,
#: ``common/main/<lang>.xml``).
CYRILLIC_ALPHABETS: dict[str, str] = {
    "ru": "абвгдеёжзийклмнопрстуфхцчшщъыьэюя",
    "uk": "абвгґдеєжзиіїйклмнопрстуфхцчшщьюя",
    "be": "абвгдеёжзійклмнопрстуўфхцчшыьэюя",
    "bg": "абвгдежзийклмнопрстуфхцчшщъьюя",
    "mk": "абвгдѓежзѕијклљмнњопрстќуфхцчџш",
    "sr": "абвгдђежзијклљмнњопрстћуфхцчџш",
}


def foreign_letters(text: str) -> int:
    """How many of ``text``'s Cyrillic letters are not letters of the Cyrillic alphabet of
    :data:`CYRILLIC_ALPHABETS` that holds most of them, capitals counted as small letters (0 without
    Cyrillic letters).

    >>> foreign_letters("София е столицата"), foreign_letters("бюєшџ х ёђюышірђ")
    (0, 4)
    """
    cyrillic = [ch.lower() for ch in text if "\u0400" <= ch <= "\u04ff" and ch.isalpha()]
    return min(sum(1 for ch in cyrillic if ch not in letters) for letters in CYRILLIC_ALPHABETS.values())


#: A longer text is judged on its first this many characters (the letter pairs cost a few microseconds
#: each; 4,096 characters hold far more pairs than a line).
_WORDS_SAMPLE_CHARS = 4096
#: The most capitals right after a small letter per 100 letters (:func:`capitals_inside_words`): none in
#: a line of fewer than 100 letters; a longer text may hold a name such as ``МакДональдс``. Measured
#: (trial 15a): real texts 0 (565 texts of 2-8 sentences or 6-30 CLDR names joined, every page);
#: random bytes C0-FF that charset-normalizer read as a Cyrillic page, at least 7.7 per 100.
_MAX_CAPITALS_INSIDE_WORDS_PER_100_LETTERS = 1


def written_as_words(text: str, page: ScriptPage) -> bool:
    """Whether ``text`` (its first 4,096 characters) is written as words of ``page``'s script are: at most
    one capital right after a small letter per started 100 letters (:func:`capitals_inside_words`; none
    in a short line) and spelt like one of its languages (:func:`spelt_like_its_language`). Random bytes
    read in these pages are neither (module docstring); every real text measured is both.

    >>> written_as_words("Москва — столица России.", SCRIPT_PAGES[0]), written_as_words("сНХИА нмПТм", SCRIPT_PAGES[0])
    (True, False)
    """
    text = text[:_WORDS_SAMPLE_CHARS]
    letters = sum(1 for ch in text if ch.isalpha())
    allowed = -(-letters // 100) * _MAX_CAPITALS_INSIDE_WORDS_PER_100_LETTERS if letters >= 100 else 0
    return capitals_inside_words(text) <= allowed and spelt_like_its_language(text, page)


def spelt_like_its_language(text: str, page: ScriptPage) -> bool:
    """Whether ``text``'s letter pairs are at least :data:`MIN_LETTER_PAIR_BITS` likelier under those of
    one of ``page``'s languages (those with a lexicon,
    :data:`~fabric_resources.parsing.text.letter_pairs.LEXICONS`) than under random letters. (Under the
    language the identifier ranks first alone, a Bulgarian ``купим хляб и мляко.`` that it calls
    Russian fell short.)

    >>> spelt_like_its_language("Вчера мы ходили в театр.", SCRIPT_PAGES[0])
    True
    >>> spelt_like_its_language("ъщжю ыьфц пжаъшд", SCRIPT_PAGES[0])
    False
    """
    return any(letter_pair_bits(text, language) >= MIN_LETTER_PAIR_BITS
               for language in sorted(page.languages & LEXICONS.keys()))


def capitals_inside_words(text: str) -> int:
    """How many non-ASCII capitals of ``text`` follow a small letter: words are written small, opened by
    a capital or all in capitals, while bytes at random are capitals and small letters at random
    (``сНХИА нмПТмжквсЧ``: each letter of windows-1251, KOI8-R and the Greek pages is one or the other at
    even odds). None of the 4,303 real lines measured for :data:`MIN_LETTER_PAIR_BITS` holds one.

    >>> capitals_inside_words("Москва — столица России, МГУ."), capitals_inside_words("сНХИА нмПТмжквсЧ")
    (0, 3)
    """
    return sum(1 for i in range(1, len(text))
               if text[i].isupper() and not text[i].isascii() and text[i - 1].islower())


def misplaced_marks(text: str) -> int:
    """How many combining marks of ``text`` follow no letter or mark (a Hebrew point or Thai vowel sign
    opening a word: windows-1251's capitals ``А-Ш`` read as windows-1255 are points), plus Hebrew final
    letters and Greek's final sigma inside a word (``ךםןףץ``: windows-1251's ``к н п у х``; ``ς``).

    >>> misplaced_marks("שלום, מה שלומך?"), misplaced_marks("ּמסךגא")
    (0, 2)
    """
    count = 0
    for i, ch in enumerate(text):
        if unicodedata.category(ch) == "Mn" and (i == 0 or not (text[i - 1].isalpha()
                                                              or unicodedata.category(text[i - 1]) == "Mn")):
            count += 1
        elif ch in _FINAL_FORMS and i + 1 < len(text) and text[i + 1].isalpha() and not text[i + 1].isascii():
            count += 1
    return count


def _all_of_script(text: str, script: str) -> bool:
    """Whether every non-ASCII character of ``text`` but punctuation and spaces is of ``script`` (a
    Unicode name prefix), at least ``_MIN_SCRIPT_LETTER_SHARE`` of its letters are, and they are
    ``_MIN_DISTINCT_LETTERS`` different letters or more."""
    letters = in_script = 0
    distinct = set()
    for ch in text:
        if ch.isalpha():
            letters += 1
        if ch.isascii() or unicodedata.category(ch)[0] in "PZ":
            continue
        if not unicodedata.name(ch, "").startswith(script):
            return False
        if ch.isalpha():
            in_script += 1
            distinct.add(ch.lower())
    return len(distinct) >= _MIN_DISTINCT_LETTERS and in_script >= _MIN_SCRIPT_LETTER_SHARE * letters


#: The pages of :data:`SCRIPT_PAGES` by codec name.
SCRIPT_PAGE_BY_ENCODING: dict[str, ScriptPage] = {page.encoding: page for page in SCRIPT_PAGES}
