"""Case and diacritic folding shared by the index writer and the query side.

Folding is per Unicode scalar so that every folded character maps back to
exactly one source character (needed for exact highlights): each scalar is
NFKD-decomposed, combining marks (category ``Mn``) are dropped, and the rest
is case-folded (``str.casefold``, Unicode default case folding). Hangul
syllables and kana are NFKC-normalised instead, because their decomposed
marks distinguish words (``ガラス`` glass, ``カラス`` crow); a kana followed by a separate voiced or
semi-voiced mark (NFD ``か\u3099``, half-width ``ｶﾞ``) and a run of conjoining Hangul jamo (NFD
``ᄒ ᅡ ᆫ``) fold as the one character they compose (``が``, ``ガ``, ``한``), mapped to the
cluster's first scalar, the others folding to nothing. In the Indic scripts (Devanagari to
Sinhala) and Thai, Lao, Tibetan, Myanmar and Khmer the combining marks spell the word too (Hindi
``हंस`` swan, ``हस`` laugh), so those the word tokenizer keeps inside a word (Unicode
``Alphabetic``: vowel signs, anusvara) are kept (NFKD, as everywhere); the others (virama, nukta,
Thai tone marks) still fold away, as tantivy would split the word at them. In Khmer and Myanmar
every mark is kept (:data:`KEPT_MARKS`: the Khmer coeng that writes a subscript consonant, the
Myanmar asat and virama, ``ខ្មែរ`` and ``မြန်မာ``): their word segmenter reads them
(:mod:`fabric_resources.word_segmentation`), the substring field holds each as a character, and
the word field writes them as codes in the words it makes, where the tokenizer would split
(:data:`~fabric_resources.word_segmentation.MARK_CODES`; the Khmer coeng it drops). Adjacent marks
of theirs that Unicode orders by combining class (the Myanmar dot below before the asat or virama:
``မုန့်`` typed ``န`` + asat + dot below, as keyboards let one, is canonically the same word) are
put in that canonical order (:data:`ORDERED_MARKS`), as NFC would: folding is per scalar, so it
did not, and a word typed in one order missed its text in the other. Khmer writers also type the parts of a
syllable in orders Unicode does not call equivalent, though they render alike: the subscript ro
before another subscript (``ស្រ្តី`` for ``ស្ត្រី``, woman), a vowel before the register shifter
(``ប៊ី``); those are put in the order the Unicode Standard gives (:data:`KHMER_CLUSTER`). Khmer
spellings the Standard names as variants of one letter fold to it (:data:`KHMER_VARIANTS`: the
deprecated independent vowels ``ឣ`` and ``ឤ`` as ``អ`` and ``អា``, ``ឲ`` as ``ឱ``, so ``ឲ្យ`` and
``ឱ្យ`` meet), and a two-part vowel typed as its two parts as the one vowel sign (``េ`` + ``ី`` as
``ើ``, ``េ`` + ``ា`` as ``ោ``: :data:`KHMER_SPLIT_VOWELS`). The same
rule applies at every term length and in every other script, so ``ΑΒΓ`` and
``αβγ``, ``Café`` and ``cafe`` fold alike.

Invisible format characters fold to nothing (:data:`IGNORABLE`: the soft hyphen, zero-width
space / non-joiner / joiner, word joiner, BOM, direction marks and embeddings, Unicode's
Default_Ignorable_Code_Point characters of category ``Cf``): they render as nothing inside a
word, so ``Bundes\u00adverfassungs\u200bgericht`` is found typed plainly and Persian written
with and without ZWNJ (``می\u200cخواهم``, ``میخواهم``) meet. Their offsets stay exact: the
origin map skips them, and a highlight over the joined word spans them in the source. This is
what Unicode's NFKC_Casefold does with every default-ignorable character (UAX #15 / the ICU
``nfkc_cf`` normalizer that search engines' ICU analysis uses), so a zero-width space *between*
two words joins them here too (``foo\u200bbar`` is found as ``foobar``, as it reads), although
UAX #29 would break a word there.

Three more foldings make a word typed without its diacritics, or with other digits, meet the text,
each one scalar to one scalar (or to nothing), so origins stay exact:

* a Latin letter whose diacritic Unicode does not decompose — a stroke or bar through it — folds to
  its base letter, as ``é`` does to ``e``: Vietnamese ``đ`` → ``d`` (``Đà Nẵng`` is found as typed
  ``Da Nang``), Polish ``ł`` → ``l``, Danish ``ø`` → ``o``, Maltese ``ħ`` → ``h``; and Turkish
  dotless ``ı`` → ``i``, so ``KIRMIZI`` (upper case has no dot to drop) and ``kırmızı`` meet, as
  ``İstanbul`` and ``istanbul`` already did (NFKD drops İ's dot). The pairs come from the Unicode
  character names (``LATIN SMALL LETTER D WITH STROKE`` → ``LATIN SMALL LETTER D``), the letters
  Lucene's ``ASCIIFoldingFilter`` and ICU's diacritic folding fold too;
* every decimal digit (Unicode ``Nd``) folds to its ASCII digit: Arabic-Indic ``١٩٦٥``, Persian
  ``۱۹۶۵``, Devanagari ``१९६५`` and Thai ``๑๙๖๕`` are found typed ``1965`` and the other way round
  (Lucene's ``DecimalDigitFilter``);
* the Arabic tatweel (kashida, U+0640), which only stretches a word (``كتـــاب`` is ``كتاب``),
  folds to nothing, as Lucene's Arabic normalisation removes it; the Arabic yeh and kaf fold to
  the Persian ones (``كتاب`` typed on an Arabic keyboard finds ``کتاب`` typed on a Persian one),
  as Lucene's Persian normalisation does.

Han characters then fold traditional → simplified, one character at a time, by
OpenCC's ``t2s`` tables (the ``opencc`` package ships them compiled; no
download): ``桃園`` and ``桃园`` fold alike, so do Japanese ``認證`` and ``认证``.
Per character, not per phrase: OpenCC's phrase conversion depends on context
(``乾隆`` stays, ``乾燥`` becomes ``干燥``), while per character every Han scalar
maps to exactly one scalar (checked over CJK Unified, Ext A-H and
Compatibility: 5,119 change, none changes length), so the origin map of
:func:`fold_with_map` stays exact and index and query fold the same way.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from itertools import chain, repeat

import regex

#: One character of a script written without spaces: Han, Hiragana, Katakana (incl. half-width),
#: Hangul, Thai, Lao, Khmer, Myanmar, the prolonged sound mark and 々. Mirrors
#: ``lexical_index.UNSPACED_SCRIPTS`` (tantivy's regex syntax) for Python's ``re``.
UNSPACED = re.compile(
    "[\u3400-\u9fff\uf900-\ufaff\U00020000-\U0003134f\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff"
    "\uff66-\uff9f\uac00-\ud7af\u1100-\u11ff\u3130-\u318f\u0e00-\u0eff\u1780-\u17ff\u1000-\u109f\u3005]"
)

#: Enters the analyzer identity; bump when the folding rule changes (the serving index is rebuilt).
FOLDING_VERSION = "nfkd-mn-casefold-opencc1.4.2-t2s-char-ignorable-kana-jamo-alphabetic-marks-stroke-digits-tatweel-yeh-kaf-khmer-myanmar-marks-ordered-khmer-clusters-khmer-variants-10"

#: Unicode's Default_Ignorable_Code_Point characters of general category ``Cf`` (DerivedCoreProperties.txt,
#: Unicode 15.1): invisible in rendered text, so folded to nothing. Not the other default-ignorables:
#: variation selectors and the grapheme joiner are ``Mn`` (dropped as marks already), and the Hangul
#: fillers are letters.
IGNORABLE = frozenset(
    "\u00ad\u061c\u180e\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\u206a\u206b\u206c\u206d\u206e\u206f"
    "\ufeff\U0001bca0\U0001bca1\U0001bca2\U0001bca3\U0001d173\U0001d174\U0001d175\U0001d176"
    "\U0001d177\U0001d178\U0001d179\U0001d17a\U000e0001"
) | frozenset(map(chr, range(0xE0020, 0xE0080)))

_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")


@lru_cache(maxsize=1)
def _t2s():
    import opencc  # the C++ converter and its compiled tables, inside the wheel

    return opencc.OpenCC("t2s")


def _simplified(ch: str) -> str:
    """``ch``'s simplified form by OpenCC ``t2s``, or ``ch`` when that is not one scalar."""
    out = _t2s().convert(ch)
    return out if len(out) == 1 else ch


def _keeps_marks(ch: str) -> bool:
    """Hangul syllables and kana: their decompositions carry meaning (한 ≠ 하, ガ ≠ カ)."""
    cp = ord(ch)
    return 0xAC00 <= cp <= 0xD7A3 or 0x3040 <= cp <= 0x30FF or 0xFF66 <= cp <= 0xFF9F


#: Scripts whose combining marks spell the word (Indic, Thai, Lao, Tibetan, Myanmar, Khmer), and the
#: marks kept there: those tantivy's tokenizer counts as word characters (``char::is_alphanumeric``).
_SPELLING_MARKS = re.compile("[\u0900-\u0fff\u1000-\u109f\u1780-\u17ff]")
_ALPHABETIC = regex.compile(r"\p{Alphabetic}")
#: Khmer and Myanmar (their blocks and extensions), where every combining mark is kept, but Khmer's
#: two deprecated inherent vowels (U+17B4, U+17B5: invisible, Default_Ignorable, which Unicode
#: advises against using).
KEPT_MARKS = regex.compile("[\u1000-\u109f\u1780-\u17b3\u17b6-\u17ff\u19e0-\u19ff\ua9e0-\ua9ff\uaa60-\uaa7f]")
#: Two or more adjacent :data:`KEPT_MARKS` of a nonzero canonical combining class (Myanmar dot below
#: 7, virama and asat 9, Shan council emphatic tone 220; Khmer coeng 9, atthacan 230): Unicode's
#: canonical ordering sorts such a run by class.
ORDERED_MARKS = re.compile("[\u1037\u1039\u103a\u108d\u17d2\u17dd]{2,}")
#: Two or more adjacent parts of a Khmer syllable that writers type in either order, each a
#: subscript (coeng + consonant), a register shifter (muusikatoan, triisap) or a dependent vowel.
KHMER_CLUSTER = re.compile("(?:\u17d2[\u1780-\u17b3]|[\u17c9\u17ca\u17b6-\u17c5]){2,}")
_KHMER_PART = re.compile("\u17d2.|.", re.S)
#: Khmer letters the Unicode Standard names as another spelling of one (its code charts: U+17A3 and
#: U+17A4 are deprecated, "use 17A2" and "use 17A2 17B6"; U+17B2 is "a variant of 17B1, used in only
#: a few words", chiefly ``ឲ្យ``, written ``ឱ្យ`` as often).
KHMER_VARIANTS = {"\u17a3": "\u17a2", "\u17a4": "\u17a2\u17b6", "\u17b2": "\u17b1"}
#: A Khmer two-part vowel typed as its two parts, in either order (they render as the one sign; the
#: Standard says not to encode them so): the parts and the vowel sign they make.
KHMER_SPLIT_VOWELS = {"\u17c1\u17b8": "\u17be", "\u17b8\u17c1": "\u17be",
                      "\u17c1\u17b6": "\u17c4", "\u17b6\u17c1": "\u17c4"}
#: A character either reordering starts with (a Myanmar or Khmer mark, a Khmer vowel sign).
_REORDERED = re.compile("[\u1037\u1039\u103a\u108d\u17b6-\u17c5\u17c9\u17ca\u17d2\u17dd]")


def _khmer_rank(part: str) -> int:
    """The place of a :data:`KHMER_CLUSTER` part in the order the Unicode Standard gives for a Khmer
    syllable (§16.4, "Khmer": subscript consonants, the subscript ro last among them, then a register
    shifter, then the dependent vowel)."""
    if part[0] == "\u17d2":
        return 1 if part == "\u17d2\u179a" else 0
    return 2 if part in "\u17c9\u17ca" else 3


#: A Latin letter with a diacritic Unicode does not decompose (``LATIN SMALL LETTER D WITH STROKE``),
#: or the Turkish dotless ``ı``: its name names the base letter (see the module docstring).
_OVERSTRUCK = re.compile(r"LATIN (SMALL|CAPITAL) LETTER (?:([A-Z]) WITH (?:DIAGONAL )?(?:STROKE|BAR)|DOTLESS ([IJ]))")
#: The Arabic tatweel: it stretches a word and spells nothing.
TATWEEL = "\u0640"
#: One letter, two code points by keyboard: Arabic yeh and kaf (``ي`` U+064A, ``ك`` U+0643) as the
#: Persian (and Urdu) ones (``ی`` U+06CC, ``ک`` U+06A9), as Lucene's ``PersianNormalizer`` does;
#: the alef maksura ``ى`` is another letter and stays.
_ARABIC_VARIANTS = str.maketrans({"\u064a": "\u06cc", "\u0643": "\u06a9"})


def _base_letter(ch: str) -> str | None:
    """``ch``'s base letter when ``ch`` is a Latin letter with a stroke or bar, or dotless (``đ`` → ``d``,
    ``Ø`` → ``O``, ``ı`` → ``i``); None otherwise (every letter with a decomposition included)."""
    m = _OVERSTRUCK.fullmatch(unicodedata.name(ch, ""))
    if m is None or unicodedata.decomposition(ch):
        return None
    try:
        return unicodedata.lookup(f"LATIN {m.group(1)} LETTER {m.group(2) or m.group(3)}")
    except KeyError:
        return None


@lru_cache(maxsize=65536)
def fold_char(ch: str) -> str:
    """Fold one Unicode scalar; may return ``""`` (a bare combining mark, an :data:`IGNORABLE`
    format character, the tatweel) or several chars."""
    if ch in IGNORABLE or ch == TATWEEL:
        return ""
    digit = unicodedata.decimal(ch, None)
    if digit is not None:
        return str(digit)
    base = _base_letter(ch) if ch.isalpha() and not ch.isascii() else None
    if base is not None:
        return base.casefold()
    if _keeps_marks(ch):
        return unicodedata.normalize("NFKC", ch).casefold()
    if ch in KHMER_VARIANTS:
        return KHMER_VARIANTS[ch]
    decomposed = unicodedata.normalize("NFKD", ch)
    if KEPT_MARKS.match(ch):
        return decomposed
    if _SPELLING_MARKS.match(ch):
        return "".join(c for c in decomposed if unicodedata.category(c) != "Mn" or _ALPHABETIC.match(c))
    kept = "".join(c for c in decomposed if unicodedata.category(c) != "Mn").casefold().translate(_ARABIC_VARIANTS)
    if len(kept) == 1 and _HAN.match(kept):
        return _simplified(kept)
    return kept


#: A voiced or semi-voiced sound mark written apart from its kana (NFD, half-width), or a medial
#: or final conjoining Hangul jamo: the tail of a cluster that composes into one character.
CLUSTER_TAIL = re.compile("[\u3099\u309a\uff9e\uff9f\u1160-\u11ff]")
_CLUSTER = re.compile("[\u3040-\u30ff\uff66-\uff9d][\u3099\u309a\uff9e\uff9f]"
                      "|[\u1100-\u115f][\u1160-\u11a7][\u11a8-\u11ff]?")


def _fold_parts(text: str) -> list[str]:
    """Each scalar of ``text`` folded (:func:`fold_char`), except that a cluster :data:`_CLUSTER`
    finds which composes (NFKC) into one character folds as that character at its first scalar and
    to nothing at the others: NFD or half-width ``が`` and NFC ``が`` fold alike, as do NFD and NFC
    Hangul. A run of :data:`ORDERED_MARKS` is put in canonical order, and the parts of a Khmer
    syllable in the Unicode Standard's (:data:`KHMER_CLUSTER`): their scalars fold to themselves, so
    each folded character still maps to one of the run's."""
    parts = list(map(fold_char, text))
    if _REORDERED.search(text):  # one scan where neither script is (most text)
        for m in ORDERED_MARKS.finditer(text):  # each folds to itself: the map stays one to one
            parts[m.start():m.end()] = sorted(parts[m.start():m.end()], key=unicodedata.combining)
        for m in KHMER_CLUSTER.finditer(text):  # also scalars that fold to themselves, moved as a whole
            ordered = sorted(_KHMER_PART.findall(m.group()), key=_khmer_rank)
            parts[m.start():m.end()] = list("".join(ordered))
        if "\u17c1" in text:
            _join_split_vowels(parts)
    if CLUSTER_TAIL.search(text):
        for m in _CLUSTER.finditer(text):
            for end in range(m.end(), m.start() + 1, -1):  # a jamo syllable whose final does not compose: L V
                composed = unicodedata.normalize("NFKC", text[m.start():end]).casefold()
                if len(composed) == 1:
                    parts[m.start():end] = [composed] + [""] * (end - m.start() - 1)
                    break
    return parts


def _join_split_vowels(parts: list[str]) -> None:
    """Each :data:`KHMER_SPLIT_VOWELS` pair of adjacent ``parts`` (after reordering) as its vowel
    sign at the first part's place and nothing at the second's (the kana rule: one source scalar
    per folded character)."""
    at = -1
    while True:
        try:
            at = parts.index("\u17c1", at + 1)
        except ValueError:
            return
        for first in (at - 1, at):  # the other part before or after the e
            if first >= 0 and first + 1 < len(parts) and parts[first] + parts[first + 1] in KHMER_SPLIT_VOWELS:
                parts[first:first + 2] = [KHMER_SPLIT_VOWELS[parts[first] + parts[first + 1]], ""]
                break


def fold(text: str) -> str:
    """Fold a whole string (see module docstring)."""
    if text.isascii():
        return text.lower()
    return "".join(_fold_parts(text))


def fold_with_map(text: str) -> tuple[str, list[int]]:
    """Fold ``text`` and map each folded character back to its source index.

    Returns
    -------
    folded : str
    origin : list[int]
        ``len(origin) == len(folded)``; ``origin[i]`` is the Unicode scalar
        index in ``text`` of the character that produced ``folded[i]``.
    """
    if text.isascii():
        return text.lower(), list(range(len(text)))
    parts = _fold_parts(text)
    lengths = list(map(len, parts))
    if lengths.count(1) == len(lengths):  # every scalar folds to one: the map is the identity
        return "".join(parts), list(range(len(text)))
    return "".join(parts), list(chain.from_iterable(map(repeat, range(len(text)), lengths)))


def normalise_entity_name(name: str) -> str:
    """The graph key of an entity name, predicate or entity type (writer and query side alike).

    Unicode NFKC (compatibility forms: full-width ``Ａ`` → ``A``, ligatures ``ﬁ`` → ``fi``), then
    ``str.casefold`` (Unicode default case folding) and NFKC again (case folding can leave
    unnormalised sequences, e.g. ``İ``), then every maximal run of characters that are not
    letters, digits or combining marks (Unicode categories ``L*``, ``N*``, ``M*``) — whitespace
    and punctuation — becomes one space, trimmed at both ends. Diacritics are kept (NFKC
    composes them), so ``Ada  Lovelace``, ``ADA LOVELACE`` and ``ada-lovelace`` share one key
    but ``Café`` and ``Cafe`` do not. ``""`` when nothing alphanumeric remains.

    >>> normalise_entity_name("  Ada \\u00a0 LOVELACE. "), normalise_entity_name("Ｕ.Ｓ.　Navy")
    ('ada lovelace', 'u s navy')
    >>> normalise_entity_name("東京タワー"), normalise_entity_name("O’Brien") == normalise_entity_name("o'brien")
    ('東京タワー', True)
    """
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())
    out: list[str] = []
    gap = False
    for ch in folded:
        if unicodedata.category(ch)[0] in "LNM":
            if gap and out:
                out.append(" ")
            out.append(ch)
            gap = False
        else:
            gap = True
    return "".join(out)
