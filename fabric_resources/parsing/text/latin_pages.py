"""The Latin code pages of Central and Eastern Europe, told apart from windows-1252 (Western).

Polish, Czech, Slovak, Hungarian, Slovenian, Croatian and Romanian in windows-1250 or ISO-8859-2,
and Lithuanian and Latvian in windows-1257 or ISO-8859-13, decode as windows-1252 too, as
mojibake: ``źdźbło`` reads ``¼d¼b³o``, ``příliš žluťoučký`` reads ``pøíli¹ ¾lu»ouèký``, and the
file was active with none of those words in any search (or undecodable, or GB18030 Hanzi: hostile
trial 14a). These pages hold the same bytes as windows-1252 for most letters, so which one a file
is in shows only in a few of its characters; charset-normalizer does not tell them apart (it named
cp1250 for French text). :func:`latin_page_reading` decides from two signals, the language
identifier's and misplaced characters'.

Measured (trial 14a) on sentences written in each language, each alone and all of a language as one
file, encoded in both pages of its pair: Central European 74 of 74 read exactly (4 before), Baltic
12 of 12 (0 before); their 8-32-character snippets 3,857 of 5,116 (1,289 before) and 212 of 840 (0
before). No Western text moved: 0 of 87,738 texts and snippets (../shared's Pride and Prejudice, the
Spanish EPUB, the html-extraction sentences, sentences in 13 Western languages; in windows-1252,
Latin-1 and ISO-8859-15) read in these pages, nor 0 of 38,706 units and snippets of ../shared's
Japanese and Chinese in Shift_JIS, EUC-JP, GB18030 and Big5.

Romanian in ISO-8859-16 (trial 15a) reads as it where its bytes are its own (:data:`ROMANIAN`); the
same 11,833 Western texts and snippets of ../shared (html-extraction lines, Pride and Prejudice) in
windows-1252, Latin-1 and ISO-8859-15 still read as windows-1252, none moved.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

#: Languages written in windows-1250 / ISO-8859-2, as py3langid names them (``bs`` and ``sr``:
#: Bosnian and Serbian in Latin letters, which the identifier confuses with Croatian).
CENTRAL_EUROPEAN = frozenset({"pl", "cs", "sk", "hu", "sl", "hr", "bs", "sr", "ro"})
#: Languages written in windows-1257 / ISO-8859-13 but not in windows-1252 (``ltg``: Latgalian).
#: Estonian is left out: windows-1252 holds all its letters (``õ``, ``š``, ``ž``), so a windows-1252
#: Estonian file must not be read as windows-1257 (Estonian in windows-1257 is told by its ``š ž``, which
#: windows-1252 reads as ``ð þ``: :func:`~fabric_resources.parsing.text.decoding.lookalike_page_reading`).
BALTIC = frozenset({"lt", "lv", "ltg"})
#: ISO-8859-16 (Latin-10), the one legacy page that holds Romanian's comma letters ``Ș ș Ț ț``, is tried
#: for Romanian alone. Romanian's letters ``ă â î`` and ``ș ț`` / ``ş ţ`` have the same bytes in it,
#: windows-1250 and ISO-8859-2, which define 0xAA 0xBA 0xDE 0xFE as the cedilla forms ``Ş ş Ţ ţ`` (the
#: stand-ins Romanian text was written with where the comma forms were missing): bytes holding only
#: those read as windows-1250, the common page, exactly as it defines them (search folds ``ş``,
#: ``ș`` and ``s`` alike, so ``București`` finds ``Bucureşti``). ISO-8859-16 wins only where the bytes
#: say so: its ``„ ” « »`` stand where windows-1250 and ISO-8859-2 have letters (``Ą µ``, ``Ť ť``).
ROMANIAN = frozenset({"ro"})
#: ISO-8859-16's comma letters as windows-1250 and ISO-8859-2 read their bytes.
_COMMA_AS_CEDILLA = str.maketrans("\u0218\u0219\u021a\u021b", "\u015e\u015f\u0162\u0163")


#: Each language's letters beyond ASCII, small: CLDR's main exemplar characters (Unicode CLDR,
#: ``common/main/<lang>.xml``), Romanian with the cedilla forms ``ş ţ`` that windows-1250 and ISO-8859-2
#: hold beside the comma forms it prefers; Latgalian taken as Latvian plus ``ō``. Between two pages that
#: both read a text without a misplaced character, the one whose letters are the language's wins:
#: Czech in ISO-8859-2 read as windows-1250 spells ``kdyľ`` (``ľ`` is Slovak) and ``«uhýk``.
ALPHABETS: dict[str, str] = {
    "pl": "ąćęłńóśźż", "cs": "áčďéěíňóřšťúůýž", "sk": "áäčďéíĺľňóôŕšťúýž", "hu": "áéíóöőúüű",
    "sl": "čšž", "hr": "čćđšž", "bs": "čćđšž", "sr": "čćđšž", "ro": "ăâîșțşţ",
    "lt": "ąčęėįšųūž", "lv": "āčēģīķļņšūž", "ltg": "āčēģīķļņōšūž",
}


#: Quotation marks beyond ASCII that a language writes and that one of these pages reads as a letter in
#: another (``« »``: windows-1250's 0xAB 0xBB are ISO-8859-2's ``Ť ť``; ``„ ”``: ISO-8859-16's 0xA5 0xB5
#: are windows-1250's ``Ą µ``): CLDR's quotation delimiters (``common/main/<lang>.xml``), Romanian and
#: Polish ``„ ” « »``, Hungarian ``„ ” » «``. A page reading them as letters reads that many foreign letters.
QUOTATION_MARKS: dict[str, str] = {"ro": "„”«»", "pl": "„”«»", "hu": "„”»«"}


@dataclass(frozen=True)
class LatinPage:
    """A legacy Latin code page other than windows-1252 and the languages written in it."""

    encoding: str
    languages: frozenset[str]
    #: Whether the letters signal may read a text in this page even where the identifier names another
    #: language (a French text quoting ``Łódź``): true of the Windows pages, which read as letters only
    #: windows-1252 symbols no text writes between two letters (windows-1250: ``¡ £ ¥ ¯ ³ ¹ ¼ ¾ ¿``,
    #: windows-1257: ``¨ ¯ ¸ ¿``); ISO-8859-2 also reads ``© ® « » ±`` as letters, which a Western text
    #: may set between two (``Microsoft®Word``).
    letters_outweigh_language: bool = False


#: The candidates, in the order that breaks a tie (a file whose readings are the same text under
#: both pages of a pair, such as Hungarian or Romanian, is labelled with the Windows page; Romanian
#: that reads alike in ISO-8859-16 but for ``ş``/``ș`` stays windows-1250, :data:`ROMANIAN`).
LATIN_PAGES: tuple[LatinPage, ...] = (
    LatinPage("cp1250", CENTRAL_EUROPEAN, letters_outweigh_language=True),
    LatinPage("iso8859_2", CENTRAL_EUROPEAN),
    LatinPage("cp1257", BALTIC, letters_outweigh_language=True),
    LatinPage("iso8859_13", BALTIC),
    LatinPage("iso8859_16", ROMANIAN),
)

#: The normalised probability (summed over a page's languages) at and above which an identification
#: is used: the threshold of :data:`fabric_resources.parsing.language.MIN_CONFIDENCE` (0.5, measured
#: there: 99 % of such answers right).
_MIN_PROBABILITY = 0.5

#: Larger files are judged on their lines that hold a byte above 0x7F, up to this many bytes (the
#: identifier reads ~5 MB/s; a 16 KiB sample of such lines holds far more evidence than a sentence).
_SAMPLE_BYTES = 1 << 14
#: The bytes before a long line's first byte above 0x7F that its piece of the sample starts within.
_CONTEXT_BYTES = 64

#: The C1 controls, which ISO-8859-2 and ISO-8859-13 give bytes 0x80-0x9F: text never holds them, while
#: windows-1250 and windows-1257 put letters and punctuation there (``ś``, ``ź``, ``ť``, ``„``).
_C1_CONTROL = re.compile("[\u0080-\u009f]")
#: Share of a reading's non-ASCII characters (but punctuation and spaces: dashes, quotes, « », ¿)
#: that must be letters. The sentences of every language measured (trial 14a) are at
#: 1.0; bytes that are no text (``€ýţ˙€ýţ˙`` for 80 FD FE FF) are at 0.5.
_MIN_LETTER_SHARE = 0.8
#: The most a short text's letters may be capitals for the letters signal alone to read it in another
#: page: the sentences of every language measured (trial 14a) at most 0.2; 10-16-byte snippets of
#: ../shared's Chinese in Big5 that the signal took for ISO-8859-2 (``ĽXĄC</p><p``), 0.67 and more.
_MAX_CAPITAL_SHARE_FOR_LETTERS = 0.5
#: The least share of a short text's letters that must be ASCII for the letters signal alone to read it
#: in another page: Latin text writes most letters without accents (the pangram ``Zażółć gęślą
#: jaźń``, 0.4; the word ``Łódź`` alone, 0.25: a third kept it out, trial 15a); Ukrainian in
#: windows-1251 read as windows-1250 (``Ęčżâ — ńňîëč``) has none.
_MIN_ASCII_LETTER_SHARE_FOR_LETTERS = 1 / 4
_NON_ASCII = re.compile("[^\x00-\x7f]")
#: windows-1252's fractions, written after a digit or alone (``1½``, ``¼ cup``), never against a letter;
#: windows-1250 and ISO-8859-2 put letters at their bytes (``Ľ ľ``, ``ź ž``: ``Łódź`` reads ``£ód¼``).
_VULGAR_FRACTIONS = frozenset("¼½¾")
_HIGH_BYTE = re.compile(rb"[\x80-\xff]")


def misplaced_characters(text: str) -> int:
    """How many of ``text``'s characters no text in any language would hold where they stand: C1
    controls, a non-ASCII character that is not a letter between two letters (``Pchn¹æ``, ``je¿a``,
    ``¾lu»ou``), a fraction ``¼ ½ ¾`` against a letter (``£ód¼``), a non-ASCII capital right after a
    small letter (``dŸ``, ``ĽdĽbło``; at the text's end too) and a non-ASCII small letter right before
    a capital, after a letter (``ľM``). A page that
    reads a text's bytes right gives none of them but for a rare ``Col·legi`` (Catalan, read alike
    by every page here); the wrong page gives one for about every other misread letter.

    >>> misplaced_characters("Pchn¹æ w tê ³ódŸ je¿a"), misplaced_characters("Pchnąć w tę łódź jeża")
    (3, 0)
    >>> misplaced_characters("¼ cup, 1½ cups, «Bonjour», ¿Qué?, Müller & Søn, µm")
    0
    >>> misplaced_characters("£ódŸ"), misplaced_characters("£ód¼"), misplaced_characters("Łódź")
    (1, 1, 0)
    """
    count = len(_C1_CONTROL.findall(text))
    for match in _NON_ASCII.finditer(text):
        i = match.start()
        before, ch, after = text[i - 1:i], text[i], text[i + 1:i + 2]  # "" at the text's edges
        if ch in _VULGAR_FRACTIONS and (before.isalpha() or after.isalpha()):
            count += 1
            continue
        if not before.isalpha():
            continue
        if (not _is_letter(ch) and after.isalpha()) or (ch.isupper() and before.islower()) \
                or (ch.islower() and after.isupper()):
            count += 1
    return count


def latin_page_reading(data: bytes, western_text: str | None) -> tuple[str, str] | None:
    """``(encoding, text)`` when ``data`` is in a Latin code page of :data:`LATIN_PAGES` rather than
    windows-1252 (``western_text``, its windows-1252 reading; None where it has none), else None.

    A page's reading is a candidate when it decodes strictly, differs from the windows-1252 one,
    holds no C1 control and is text: at least 80 % of its non-ASCII characters but punctuation are
    letters (:func:`letter_share`). It wins when either signal says so:

    1. Language: the language identifier gives the reading at least 0.5 probability, summed over
       the page's languages (:func:`~fabric_resources.parsing.language.language_probability`), and
       the windows-1252 reading too where there is one: the identifier reads through the mojibake
       (Polish read as windows-1252 is still ``pl``, 1.0), while Western text read in these pages
       stays French or Spanish (``trčs``, ``estį``: short snippets of it were ``lt`` 0.5-0.9, their
       windows-1252 reading never Baltic).
    2. Letters (short texts, where the identifier says little): the windows-1252 reading holds a
       misplaced character (:func:`misplaced_characters`) and this one none, at most half its
       letters are capitals (``_MAX_CAPITAL_SHARE_FOR_LETTERS``), and it is not identified, with at
       least 0.5, as a language outside the page's, unless the page is a Windows one
       (:attr:`LatinPage.letters_outweigh_language`: a French text quoting ``Łódź``).

    Of several winners, the one with the fewest misplaced characters, then the fewest characters
    outside the identified language's letters (:func:`foreign_letters`), then the highest
    probability, then the first in :data:`LATIN_PAGES`. Western European text keeps its windows-1252 reading:
    its windows-1250 reading (``trčs``, ``ŕ``, ``pĺ``) is still identified as French or Swedish, and
    its windows-1252 reading as a Western language. Files over 16 KiB are judged on their lines that
    hold a byte above 0x7F (up to 16 KiB of them); the text returned is the whole file's.

    >>> latin_page_reading("Příliš žluťoučký kůň úpěl ďábelské ódy.".encode("iso8859_2"), None)
    ('iso8859_2', 'Příliš žluťoučký kůň úpěl ďábelské ódy.')
    >>> french = "Où est la bibliothèque? Là-bas."
    >>> latin_page_reading(french.encode("cp1252"), french) is None
    True
    """
    from fabric_resources.parsing.language import MIN_CONFIDENCE, identify_language, language_probability

    sample = high_byte_sample(data)
    western = sample.decode("cp1252", errors="strict") if western_text is not None else None
    western_misplaced = misplaced_characters(western) if western is not None else None
    best: tuple[int, float, int] | None = None
    chosen = None
    readings: set[str] = set()
    for order, page in enumerate(LATIN_PAGES):
        try:
            reading = sample.decode(page.encoding, errors="strict")
        except UnicodeDecodeError:
            continue
        if reading == western or _C1_CONTROL.search(reading) or letter_share(reading) < _MIN_LETTER_SHARE:
            continue
        if page.languages is ROMANIAN and reading.translate(_COMMA_AS_CEDILLA) in readings:
            continue  # the bytes read alike in windows-1250 or ISO-8859-2: their page (ROMANIAN)
        readings.add(reading)
        misplaced = misplaced_characters(reading)
        code, p = identify_language(reading)
        foreign = code is not None and code not in page.languages and p >= MIN_CONFIDENCE
        probability = language_probability(reading, page.languages)
        by_language = probability >= _MIN_PROBABILITY and (
            western is None or language_probability(western, page.languages) >= _MIN_PROBABILITY)
        by_letters = misplaced == 0 and western_misplaced is not None and western_misplaced > 0 \
            and capital_share(reading) <= _MAX_CAPITAL_SHARE_FOR_LETTERS \
            and ascii_letter_share(reading) >= _MIN_ASCII_LETTER_SHARE_FOR_LETTERS \
            and (not foreign or page.letters_outweigh_language)
        if not (by_language or by_letters):
            continue
        key = (misplaced, foreign_letters(reading, code if code in page.languages else None, page),
               -probability, order)
        if best is None or key < best:
            best, chosen = key, page.encoding
    if chosen is None:
        return None
    try:
        return chosen, data.decode(chosen, errors="strict")
    except UnicodeDecodeError:
        return None  # a byte past the sample that the page leaves undefined


def foreign_letters(text: str, language: str | None, page: LatinPage) -> int:
    """How many of ``text``'s non-ASCII, non-space characters are neither letters of ``language`` (of
    :data:`ALPHABETS`; None: of any of ``page``'s languages), capitals counted as small letters, nor
    its quotation marks (:data:`QUOTATION_MARKS`).

    >>> foreign_letters("i kdyľ bylo", "cs", LATIN_PAGES[0]), foreign_letters("«uhýk", "cs", LATIN_PAGES[0])
    (1, 1)
    >>> foreign_letters("«munţi» şi", "ro", LATIN_PAGES[0]), foreign_letters("Ťmunţiť şi", "ro", LATIN_PAGES[1])
    (0, 2)
    """
    codes = (language,) if language else tuple(page.languages)
    allowed = "".join(ALPHABETS[code] + QUOTATION_MARKS.get(code, "") for code in codes)
    return sum(1 for match in _NON_ASCII.finditer(text)
               if not match.group().isspace() and match.group().lower() not in allowed)


def letter_share(text: str) -> float:
    """Share of ``text``'s non-ASCII characters, but punctuation and spaces (Unicode categories P and
    Z), that are letters (1.0 when there is none).

    >>> letter_share("„Łódź” – rzekł"), letter_share("ok €ýţ˙€ýţ˙")
    (1.0, 0.5)
    """
    chars = [ch for ch in _NON_ASCII.findall(text) if unicodedata.category(ch)[0] not in "PZ"]
    return sum(map(_is_letter, chars)) / len(chars) if chars else 1.0


def ascii_letter_share(text: str) -> float:
    """Share of ``text``'s letters that are ASCII (0.0 without letters).

    >>> ascii_letter_share("Zażółć gęślą jaźń."), ascii_letter_share("Ęčżâ — ńňîëč")
    (0.4, 0.0)
    """
    letters = [ch for ch in text if ch.isalpha()]
    return sum(ch.isascii() for ch in letters) / len(letters) if letters else 0.0


def capital_share(text: str) -> float:
    """Share of ``text``'s letters that are capitals (0.0 without letters).

    >>> capital_share("Łódź"), capital_share("ĽXĄC</p><p")
    (0.25, 0.6666666666666666)
    """
    letters = [ch for ch in text if ch.isalpha()]
    return sum(ch.isupper() for ch in letters) / len(letters) if letters else 0.0


def _is_letter(ch: str) -> bool:
    """A letter of a word: ``isalpha`` but not a modifier letter (``ˇ``, ISO-8859-2's caron, is one)."""
    return ch.isalpha() and not ("\u02b0" <= ch <= "\u02ff")


def high_byte_sample(data: bytes) -> bytes:
    """``data``, or for a larger file its lines holding a byte above 0x7F, joined, up to
    ``_SAMPLE_BYTES``; a line longer than what is left is cut to it, from a word before its first such
    byte to a space (these pages are single-byte: any cut is between characters). Whole lines made a
    file of one 8 MB line its own sample: 21 s to decode, 170 s at the 64 MiB cap (hostile trial 15a).
    """
    if len(data) <= _SAMPLE_BYTES:
        return data
    lines, size, position = [], 0, 0
    while size < _SAMPLE_BYTES and (match := _HIGH_BYTE.search(data, position)):
        start = data.rfind(b"\n", 0, match.start()) + 1
        end = data.find(b"\n", match.end())
        end = len(data) if end < 0 else end
        remaining = _SAMPLE_BYTES - size
        if end - start > remaining:
            word = data.rfind(b" ", start, max(start, match.start() - _CONTEXT_BYTES))
            start = max(start, word + 1, match.start() - 2 * _CONTEXT_BYTES)
            end = min(end, start + remaining)
            space = data.rfind(b" ", match.end(), end)
            end = space if space > 0 else end
        lines.append(data[start:end])
        size += end - start + 1
        position = end
    return b"\n".join(lines)
