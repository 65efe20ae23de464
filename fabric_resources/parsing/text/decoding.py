# Over 500 lines: the one strict decoder; each candidate encoding and the measured signal that admits it stay beside the others, since their order and thresholds are one decision.
"""Strict encoding detection for plain text: ``bytes -> str`` with the codec that produced it.

Decoding is always strict (no replacement characters; a stray NUL reads as U+FFFD): a file either decodes
exactly under one candidate or fails with the named reason ``"undecodable"``.
The candidates, in order: a BOM (UTF-32, UTF-8, UTF-16); ISO-2022-JP (7-bit bytes that
designate JIS X 0208); strict UTF-8; the Korean cp949 (EUC-KR's superset) where its reading looks
Korean; the legacy CJK encodings cp932 (a Shift_JIS superset) and GB18030, and EUC-JP where a
GB18030 reading is full of kana; a non-Latin code page charset-normalizer names where the CJK reading
is mojibake or none decodes (:func:`non_latin_reading`); and
windows-1252, the Western European legacy encoding (the WHATWG Encoding
Standard decodes the ``iso-8859-1``/``latin1`` labels as windows-1252, so it
reads real Latin-1 text exactly too), or the Central European and Baltic Latin
code pages where their reading is such text (:mod:`~fabric_resources.parsing.text.latin_pages`).
Legacy encodings decode almost any bytes, so each reading must also look like text of its kind; the signals and
their thresholds were measured on ../shared (the figures are next to each
constant).
"""

from __future__ import annotations

import codecs
import re
from typing import Literal

import charset_normalizer

from fabric_resources.parsing.document import ParseError
from fabric_resources.parsing.text.latin_pages import high_byte_sample, latin_page_reading
from fabric_resources.parsing.text.script_pages import SCRIPT_PAGE_BY_ENCODING, short_script_reading, written_as_words

# Longest BOMs first: the UTF-32 LE BOM starts with the UTF-16 LE BOM.
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)

_LEGACY_ENCODINGS: tuple[str, ...] = ("cp932", "gb18030")

#: Japanese in EUC-JP (old Unix text) decodes as GB18030 too, its kanji as unrelated Hanzi, but its
#: kana come out as kana: GB2312 put hiragana and katakana in the rows JIS X 0208 did. Share of the
#: GB18030 reading's non-ASCII characters that are kana (:func:`kana_share`), measured on ../shared:
#: the Aozora texts' units and unit pairs in EUC-JP, median ~0.5, 20 of 546 at 0 (kanji-only titles);
#: 8- and 16-character snippets at the 1st percentile 0.125 and 0.2; the Chinese texts in GB18030 at
#: 0.0 (every unit, pair and snippet), and 192 of 211 of them do not decode as EUC-JP at all.
_MIN_KANA_SHARE_FOR_EUC_JP = 0.1
EUC_JP = "euc_jp"
ISO2022_JP_FORMS = ("iso2022_jp", "iso2022_jp_ext", "iso2022_jp_2")
#: ISO-2022-JP's designations of JIS X 0208 (ESC $ B, ESC $ @), which ASCII text never holds.
_ISO2022_JP_DESIGNATION = re.compile(rb"\x1b\$[B@]")

#: The Western European legacy encoding. Python's cp1252 leaves 0x81, 0x8D, 0x8F, 0x90 and 0x9D
#: undefined, so bytes holding them (many Shift_JIS files: 0x81 leads its punctuation) never read as it.
WESTERN = "cp1252"

# Python's cp932 codec maps the single bytes 0x80, 0xA0 and 0xFD-0xFF, which
# Shift_JIS leaves unassigned, to U+0080 and U+F8F0-U+F8F3 (Microsoft's
# table). Real Shift_JIS text never holds them, so a reading that does is
# treated as invalid; otherwise cp932 would "decode" almost any binary.
_CP932_UNASSIGNED_SINGLE_BYTES = frozenset("\x80\uf8f0\uf8f1\uf8f2\uf8f3")

# Controls that never occur in text: the "F" entries of file(1)'s text_chars
# table (libmagic, src/encoding.c): NUL-ACK, SO-SUB, FS-US and DEL. BEL, BS,
# TAB, LF, VT, FF, CR and ESC are allowed.
_NON_TEXT_CONTROLS = frozenset(
    [chr(c) for c in range(0x00, 0x07)]
    + [chr(c) for c in range(0x0E, 0x1B)]
    + [chr(c) for c in range(0x1C, 0x20)]
    + ["\x7f"]
)

_NON_TEXT_CONTROL_RE = re.compile("[" + re.escape("".join(sorted(_NON_TEXT_CONTROLS))) + "]")

#: Most controls of ``_NON_TEXT_CONTROLS`` per 100 characters a reading may hold and still be text.
#: file(1) calls one such control binary, but real text carries strays: an old file's SUB (U+001A)
#: end-of-file mark, an apostrophe a conversion turned into U+0019 (2 of CACM's 3,204 abstracts,
#: which one stray kept out of every search). Binary read as text holds them at about the share of
#: their byte values, 25 of 256 (~10 %: random bytes read as windows-1252); 1 % keeps a margin of ten.
#: Counted per started hundred: a note shorter than 100 characters may hold one (a 15-character DOS
#: note ending in SUB was binary while the same note at 100 characters was text; hostile trial 12a).
_MAX_NON_TEXT_CONTROLS_PER_100 = 1

# GB2312 lead bytes 0xB0-0xDF (the common Hanzi) fall in cp932's single-byte
# half-width katakana range 0xA1-0xDF, so GB-encoded Chinese read as cp932 is
# mostly half-width katakana, which real Japanese prose hardly uses. Measured
# on the shared corpus (sentences and sentence pairs that decode both ways):
# Chinese read as cp932 >= 0.33, Japanese read as cp932 = 0.0.
_HALFWIDTH_KATAKANA_SHARE_FOR_GB = 0.2

# Below this many bytes charset-normalizer's verdicts are unreliable: on the
# shared corpus it rejected the cp932 reading of short Japanese quotes such as
# 「良秀。 while keeping gb18030, and it chose cp932 for 1,287 of 2,407 short
# English snippets in windows-1252.
_MIN_BYTES_FOR_CHARSET_NORMALIZER_VERDICT = 64

# Western European text writes its accented letters and typographic marks one or two at a time
# between ASCII letters; CJK bytes read as windows-1252 give long runs of symbols and accented
# capitals (日本語 in Shift_JIS reads as “ú–{Œê). Share of the reading's non-ASCII, non-space
# characters that stand in runs of 3 or more such characters, measured on ../shared units
# encoded as windows-1252 (English, Spanish, German: 5,327 units), Shift_JIS (1,101) and
# GB18030 (2,018): Western at most 0.27; CJK, wherever windows-1252 decodes them at all,
# 1.0 except one- and two-character texts.
_MAX_WESTERN_RUN_SHARE = 0.3
_NON_ASCII_RUN = re.compile(r"[^\x00-\x7f\s]+")

# A Western text that also decodes as CJK has each accented byte paired with the ASCII letter
# after it (SJIS and GB trail bytes include 0x40-0x7E), so its CJK reading puts lone CJK
# characters against ASCII letters ("Geschäftsführer" reads as "Gesch" + a Hanzi + "tsf"...), or
# lone half-width katakana (©, » and ª read as ｩ, ｻ, ｪ). Share of the CJK reading's non-ASCII
# characters that do: real Japanese and Chinese at most 0.16 (the same 3,119 CJK units and
# 4-24 character snippets of them); the threshold keeps a margin above it.
_MIN_CJK_ODD_SHARE_FOR_WESTERN = 0.5

_CJK_RUN = re.compile(r"[^\x00-\x7f]+")

# A well-formed multi-byte UTF-8 sequence (RFC 3629: no overlong forms, surrogates or code points
# past U+10FFFF).
_UTF8_MULTIBYTE = re.compile(
    rb"[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}"
    rb"|\xed[\x80-\x9f][\x80-\xbf]|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2}"
)
_HIGH_BYTES = bytes(range(0x80, 0x100))

# UTF-8 with a flaw (a last character cut short, one stray byte) read as windows-1252 or cp932 is
# mojibake ("cafÃ©", "Grﾃｼﾃ歹"): the whole file active, its accented words in no search (hostile
# trial 12a). Share of a file's non-ASCII bytes that stand in well-formed UTF-8 sequences, measured
# on the texts of ../shared/corpus/text encoded as windows-1252 (0.0), Shift_JIS (sentences at
# most 0.54, files 0.40) and GB18030 (0.59, 0.43); random snippets of 8 CJK characters reach 0.94
# (2 of 40,000), of 16 at most 0.89 (of 32, 0.77). UTF-8 with one flaw is about 1.0; it is told
# apart from at least 32 non-ASCII bytes on.
_MIN_UTF8_SHARE_FOR_DAMAGED = 0.95
_MIN_NON_ASCII_BYTES_FOR_DAMAGED = 32
_DAMAGE_BLOCK_BYTES = 1 << 18

#: The Turkish legacy encoding, tried for a Western reading only (:func:`lookalike_page_reading`).
TURKISH = "cp1254"
#: The Baltic legacy encoding, tried for a Western reading that is Estonian, Lithuanian or Latvian
#: (:func:`lookalike_page_reading`).
BALTIC = "cp1257"
#: Pages that windows-1252 reads right but for a few letters it reads as Icelandic ones, those letters
#: (of the windows-1252 reading) and the languages whose page it is: Turkish ``ĞİŞğış`` (``ÐÝÞðýþ``);
#: Estonian, Lithuanian and Latvian ``ŠŽšž`` (``ÐÞðþ``: windows-1257 and ISO-8859-13 hold ``õ ä ö ü``
#: where windows-1252 does, so Estonian in them read as windows-1252 looked Western and spelt
#: ``ðokolaad``, ``þürii``; so did Lithuanian whose other letters were few, ``Ðiandien labai ðalta``).
_ICELANDIC_LOOKALIKES: tuple[tuple[str, re.Pattern[str], frozenset[str]], ...] = (
    (TURKISH, re.compile("[\u00d0\u00dd\u00de\u00f0\u00fd\u00fe]"), frozenset({"tr"})),
    (BALTIC, re.compile("[\u00d0\u00de\u00f0\u00fe]"), frozenset({"et", "lt", "lv", "ltg"})),
)

#: The Korean legacy encoding (EUC-KR and its superset UHC, Windows' code page 949). EUC-KR Korean
#: also decodes as GB18030, into Hanzi that mean nothing ("서울의 봄은" read as "辑匡狼 航篮"), so
#: before this candidate a Korean file was active as Chinese mojibake, no Korean word in any search
#: (hostile trial 13a). Its reading wins only when it looks Korean (:func:`looks_korean`).
KOREAN = "cp949"

#: Share of a cp949 reading's non-ASCII, non-space characters that must be Hangul syllables of KS X
#: 1001 (EUC-KR's 2,350, bytes B0-C8 A1-FE; modern Korean prose is all of them but for a stray
#: symbol). Measured on the units of ../shared read as cp949 where they decode (sentences of the
#: Aozora files and of 三国演义, alone): Shift_JIS 352 sentences, 0.0 (UHC's extended area holds
#: their Hangul); GB18030 788 sentences, at most 0.89 (GB's common Hanzi rows are KS X 1001's Hangul
#: rows, so GB text reads as syllables too, but with its Hanzi rows among them).
_MIN_KS_HANGUL_SHARE_FOR_KOREAN = 0.9
#: Korean writes a space between words (eojeol, 3-4 syllables on average): at most this many Hangul
#: syllables per run of whitespace (plus one). Chinese and Japanese read as cp949 hold no space: the
#: six GB18030 sentences above 0.8 of KS X 1001 Hangul were 4-9 characters without a space.
_MAX_SYLLABLES_PER_SPACE_FOR_KOREAN = 8
#: Whitespace between two Hangul syllables: a space between Korean words. (Any whitespace run let a
#: file of a few Hanzi after ASCII and a space, ``<p> 次日``, read as Korean: 9 of 6,003 8-character
#: snippets of ../shared's Chinese; none with this.)
_SPACE_BETWEEN_HANGUL = re.compile("(?<=[\uac00-\ud7a3])\\s+(?=[\uac00-\ud7a3])")


def decode_text(data: bytes, *, nul_as: str = "\ufffd") -> tuple[str, str]:
    """Decode a text file strictly, detecting its encoding.

    Order: a BOM (UTF-32, UTF-8, UTF-16) decides alone; otherwise bytes that
    hold NUL are binary, but for a stray one (counted as any control that never occurs in text,
    below; read as U+FFFD; in bytes that are not UTF-8 the encoding is detected as if it were not
    there: :func:`_decode_with_stray_nuls`); otherwise ISO-2022-JP where 7-bit bytes designate JIS X 0208;
    otherwise strict UTF-8; otherwise cp949 when its reading looks Korean (:func:`looks_korean`);
    otherwise the legacy encodings: cp932 and GB18030 (between them :func:`choose_legacy_encoding`;
    a GB18030 reading full of kana is EUC-JP, :func:`euc_jp_reading`; a cp932 reading of KOI8-R
    katakana is dropped, :func:`looks_japanese`), a non-Latin code page charset-normalizer names
    (:func:`non_latin_reading`), and windows-1252 (:func:`looks_western`, :func:`western_beats_cjk`),
    read as windows-1250, ISO-8859-2, windows-1257 or ISO-8859-13 when that reading is Central European
    or Baltic text (:func:`~fabric_resources.parsing.text.latin_pages.latin_page_reading`; also where
    windows-1252 does not decode or look Western and no other candidate does, or the CJK reading is
    odd, :func:`cjk_odd_share`), or as windows-1254 or windows-1257 when it is Turkish or Estonian, Lithuanian, Latvian
    (:func:`lookalike_page_reading`), or, under 64 bytes, in a Cyrillic, Greek, Hebrew or Arabic page
    (:func:`~fabric_resources.parsing.text.script_pages.short_script_reading`: cp866 reads as symbols).

    Parameters
    ----------
    data : bytes
        The whole file.
    nul_as : str
        What a stray NUL reads as: U+FFFD (one scalar for one, so offsets stay exact), or ``"\x00"``
        for a reader with a rule of its own (HTML ignores it).

    Returns
    -------
    text : str
        The decoded text, without a BOM. Offsets into it are Unicode scalars.
    encoding : str
        Python codec name: ``"utf-8"``, ``"utf-8-sig"``, ``"utf-16"``,
        ``"utf-32"``, ``"iso2022_jp"`` (or ``_ext``, ``_2``), ``"cp949"``, ``"cp932"``, ``"gb18030"``,
        ``"euc_jp"``, a code page of :data:`NON_LATIN_LEGACY` (``"big5"``, ``"cp1251"``, ...),
        ``"cp1252"``, ``"cp1254"``, ``"cp1250"``, ``"iso8859_2"``, ``"cp1257"``, ``"iso8859_13"`` or
        ``"iso8859_16"``.
        Empty input is ``("", "utf-8")``.

    Raises
    ------
    ParseError
        ``"undecodable"`` when a BOM-declared encoding does not decode, when
        the bytes hold NUL without a UTF-16/32 BOM and more than the stray controls allowed (or one
        inside a multi-byte character), when no candidate decodes
        to text of its kind, or when the decoded text holds more than one
        control that never occurs in text per started 100 characters (binary
        data; a stray one is kept); ``detail`` names what was tried.
    """
    text, encoding = _decode(data)
    return (text.replace("\x00", nul_as) if "\x00" in text else text), encoding


def _decode(data: bytes) -> tuple[str, str]:
    """:func:`decode_text`, a stray NUL kept as U+0000."""
    bom_encoding = bom_encoding_of(data)
    if bom_encoding is not None:
        try:
            text = data.decode(bom_encoding, errors="strict")
        except UnicodeDecodeError as exc:
            raise ParseError("undecodable", f"BOM declares {bom_encoding}, but {_describe(exc)}") from None
        if bom_encoding == "utf-16" and looks_8_bit_after_utf16_bom(data):
            raise ParseError("undecodable", "BOM declares utf-16, but the rest is 8-bit text: UTF-8 and no NUL "
                             "byte (UTF-16 writes one in every ASCII character); read as UTF-16 it is "
                             "unrelated CJK characters")
        return _require_text_like(text, bom_encoding), bom_encoding

    nul_offset = data.find(b"\x00")
    if nul_offset >= 0 and data.count(b"\x00") > _max_non_text_controls(len(data)):
        raise ParseError("undecodable", f"binary: NUL byte at offset {nul_offset} and no UTF-16/32 BOM"
                         + _utf16_hint(data))
    if nul_offset >= 0 and not _is_utf8(data):
        return _decode_with_stray_nuls(data, nul_offset)

    failures_2022 = []
    if data.isascii() and _ISO2022_JP_DESIGNATION.search(data):
        # 7-bit bytes that designate JIS X 0208 are ISO-2022-JP (Japanese mail and old Unix text);
        # as ASCII they read as "$BCO9v(B" with escapes between. The plain form first, then its
        # extensions (half-width katakana, JIS X 0212 and more).
        for encoding in ISO2022_JP_FORMS:
            try:
                return _require_text_like(data.decode(encoding, errors="strict"), encoding), encoding
            except UnicodeDecodeError as exc:
                failures_2022.append(f"{encoding} ({_describe(exc)})")
    try:
        return _require_text_like(data.decode("utf-8", errors="strict"), "utf-8"), "utf-8"
    except UnicodeDecodeError as exc:
        if looks_like_damaged_utf8(data):
            raise ParseError("undecodable", f"damaged UTF-8: {_describe(exc)}, while the rest is UTF-8 (not read "
                             "as a legacy encoding: that reading would be mojibake)") from None
        failures = [*failures_2022, f"utf-8 ({_describe(exc)})"]

    try:
        korean = data.decode(KOREAN, errors="strict")
    except UnicodeDecodeError as exc:
        failures.append(f"{KOREAN} ({_describe(exc)})")
    else:
        if looks_korean(korean):
            return _require_text_like(korean, KOREAN), KOREAN
        failures.append(f"{KOREAN} (decodes, but not as Korean text)")

    readings: dict[str, str] = {}
    for encoding in (*_LEGACY_ENCODINGS, WESTERN):
        try:
            readings[encoding] = _decode_legacy(data, encoding)
        except UnicodeDecodeError as exc:
            failures.append(f"{encoding} ({_describe(exc)})")
    if "cp932" in readings and "gb18030" not in readings and not looks_japanese(data, readings["cp932"]):
        del readings["cp932"]
        failures.append("cp932 (decodes, but not as Japanese text: half-width katakana)")
    western = raw_western = readings.pop(WESTERN, None)
    if western is not None and not looks_western(western):
        failures.append(f"{WESTERN} (decodes, but not as Western European text: runs of symbols)")
        western = None
    if readings:
        encoding = next(iter(readings)) if len(readings) == 1 else choose_legacy_encoding(data, readings["cp932"])
        other = (euc_jp_reading(data, readings["gb18030"]) if encoding == "gb18030" else None) \
            or non_latin_reading(data, encoding, readings[encoding])
        if other is not None:
            encoding, readings[other[0]] = other
        elif western is not None and western_beats_cjk(data, readings[encoding]):
            encoding, readings[WESTERN] = WESTERN, western
        elif cjk_odd_share(readings[encoding]) >= _MIN_CJK_ODD_SHARE_FOR_WESTERN \
                and (latin := latin_page_reading(data, raw_western)) is not None:
            # Latin bytes the CJK codec happened to decode: windows-1252 leaves ť (0x9D in windows-1250)
            # undefined, and Polish runs such as "żółć" do not look Western.
            encoding, readings[latin[0]] = latin
    elif western is not None:
        encoding, readings[WESTERN] = WESTERN, western
    else:
        other = non_latin_reading(data, None, None) or latin_page_reading(data, raw_western)
        if other is None:
            raise ParseError("undecodable", "no BOM; tried " + ", ".join(failures))
        encoding, readings[other[0]] = other
    if encoding == WESTERN:
        if (latin := latin_page_reading(data, readings[WESTERN])) is not None:
            encoding, readings[latin[0]] = latin
        elif (own := lookalike_page_reading(data, readings[WESTERN])) is not None:
            encoding, readings[own[0]] = own
        elif len(data) < _MIN_BYTES_FOR_CHARSET_NORMALIZER_VERDICT and (line := short_script_reading(data)):
            encoding, readings[line[0]] = line
    return _require_text_like(readings[encoding], encoding), encoding


def euc_jp_reading(data: bytes, gb18030_text: str) -> tuple[str, str] | None:
    """``("euc_jp", text)`` for bytes chosen as GB18030 that are Japanese in EUC-JP, or None: GB18030
    decodes them as unrelated Hanzi, but their kana come out as kana, so at least 10 % of the
    reading's non-ASCII characters are kana (``_MIN_KANA_SHARE_FOR_EUC_JP``) and the bytes decode
    strictly as EUC-JP."""
    if kana_share(gb18030_text) < _MIN_KANA_SHARE_FOR_EUC_JP:
        return None
    try:
        return EUC_JP, data.decode(EUC_JP, errors="strict")
    except UnicodeDecodeError:
        return None


#: Legacy code pages of scripts other than Latin, Japanese, simplified Chinese and Korean (Korean has
#: its own test: charset-normalizer put cp949 first for a Shift_JIS snippet), as charset-normalizer
#: names them: a file whose only readings among Fabric's own candidates are mojibake (Big5 read as
#: GB18030, Arabic windows-1256 as cp932, Thai TIS-620 as GB18030) or none (windows-1251 Russian).
NON_LATIN_LEGACY = frozenset({
    "big5", "cp950", "big5hkscs",  # traditional Chinese
    "cp1251", "koi8_r", "koi8_u", "iso8859_5", "cp866", "mac_cyrillic",  # Cyrillic
    "cp1253", "iso8859_7",  # Greek
    "cp1255", "iso8859_8",  # Hebrew
    "cp1256", "iso8859_6",  # Arabic
    "cp874", "tis_620",  # Thai
})


def non_latin_reading(data: bytes, chosen: str | None, chosen_text: str | None) -> tuple[str, str] | None:
    """``(encoding, text)`` for bytes in a legacy code page of another script (:data:`NON_LATIN_LEGACY`),
    or None: on at least 64 bytes, charset-normalizer ranks such a code page first, the bytes decode
    strictly as it, and charset-normalizer rejects the reading Fabric chose (``chosen``, a CJK codec;
    None when no candidate decoded, so nothing would be read at all; ``chosen_text`` its reading) or
    that reading is cp932 of
    mostly half-width katakana (KOI8-R Russian, which charset-normalizer may also keep as cp932).
    Under 64 bytes, where charset-normalizer gives no verdict, the page whose reading is one script,
    identified as its language and written as its words
    (:func:`~fabric_resources.parsing.text.script_pages.short_script_reading`; a line of Russian in
    windows-1251 was undecodable, one in KOI8-R katakana: hostile trial 14a), whatever CJK reading was
    chosen: since such a reading must be written as words (trial 15a), a line that decodes as GB18030
    or cp932 too (``Мама мыла раму,`` as ``锑爨 禧豚 疣祗,``) reads in its page: 568 of 5,004 real lines
    that read as CJK mojibake now read exactly, and none of 11,598 4-24-character snippets of ../shared's
    Chinese (GB18030, Big5) and Japanese (Shift_JIS, EUC-JP) moved.

    A reading in a single-byte page of :data:`~fabric_resources.parsing.text.script_pages.SCRIPT_PAGES`
    must also be written as words of its script
    (:func:`~fabric_resources.parsing.text.script_pages.written_as_words`): charset-normalizer named
    such a page for 57 of 300 seeded files of random bytes C0-FF and spaces (64-400 bytes), which now
    fail undecodable; 565 real texts (2-8 sentences or 6-30 CLDR names joined) read as before (trial 15a).

    On ../shared's Chinese in GB18030 and Japanese in Shift_JIS (every unit, unit pair and 8-128-character
    snippet), charset-normalizer rejected the chosen reading for 6 of 739 and 4 of 616 64-character
    snippets, never ranking one of these code pages first: no decision moved.
    """
    if len(data) < _MIN_BYTES_FOR_CHARSET_NORMALIZER_VERDICT:
        return short_script_reading(data)
    # A cp932 reading that is mostly half-width katakana is another script's bytes (KOI8-R Cyrillic
    # reads so, and charset-normalizer may keep it): real Japanese prose holds none.
    katakana = chosen == "cp932" and halfwidth_katakana_share(chosen_text) >= _HALFWIDTH_KATAKANA_SHARE_FOR_GB
    best = charset_normalizer.from_bytes(data).best()
    if best is None or best.encoding not in NON_LATIN_LEGACY:
        return None
    if chosen is not None and not katakana and chosen in {
            m.encoding for m in charset_normalizer.from_bytes(data, cp_isolation=[chosen])}:
        return None
    try:
        text = data.decode(best.encoding, errors="strict")
    except UnicodeDecodeError:
        return None
    page = SCRIPT_PAGE_BY_ENCODING.get(best.encoding)
    if page is not None and not written_as_words(text, page):
        return None  # random bytes read as letters of the page (57 of 300 seeds of C0-FF: trial 15a)
    return best.encoding, text


def kana_share(text: str) -> float:
    """Share of ``text``'s non-ASCII, non-whitespace characters that are kana (U+3040-U+30FF).

    >>> kana_share("速李の络怕屯のやうな数"), kana_share("桃园结义")
    (0.45454545454545453, 0.0)
    """
    total = kana = 0
    for c in text:
        if not c.isascii() and not c.isspace():
            total += 1
            kana += "\u3040" <= c <= "\u30ff"
    return kana / total if total else 0.0


def looks_korean(text: str) -> bool:
    """Whether a cp949 reading is Korean text: at least 90 % of its non-ASCII, non-space characters
    are Hangul syllables of KS X 1001, and it writes a space between words (at least one whitespace
    run between two Hangul syllables, and at most 8 syllables per such run). Measured on ../shared: no
    Shift_JIS or GB18030 sentence that decodes as cp949 passes (constants above).

    >>> looks_korean("서울의 봄은 짧다. 벚꽃이 피면 사람들은 여의도로 모인다."), looks_korean("辑匡狼 航篮")
    (True, False)
    >>> looks_korean("君臣皆哭。".encode("gb18030").decode("cp949"))  # KS X 1001 Hangul, but no space
    False
    """
    non_ascii = syllables = 0
    for ch in text:
        if ch > "\x7f" and not ch.isspace():
            non_ascii += 1
            if "\uac00" <= ch <= "\ud7a3":
                code = ch.encode(KOREAN)
                syllables += 0xB0 <= code[0] <= 0xC8 and code[1] >= 0xA1
    if not syllables or syllables < _MIN_KS_HANGUL_SHARE_FOR_KOREAN * non_ascii:
        return False
    spaces = len(_SPACE_BETWEEN_HANGUL.findall(text))
    return spaces > 0 and syllables <= _MAX_SYLLABLES_PER_SPACE_FOR_KOREAN * (spaces + 1)


#: The fewest bytes after a UTF-16 BOM for :func:`looks_8_bit_after_utf16_bom` to judge them.
_MIN_BYTES_AFTER_BOM_FOR_8_BIT = 16
#: 8-bit text writes a space or line end (bytes 20, 0A) at least once per this many bytes; UTF-16 CJK
#: text holds those bytes only in rare code units (U+xx20, U+20xx: ``丠``, ``†``).
_BYTES_PER_SPACE_IN_8_BIT_TEXT = 32


def looks_8_bit_after_utf16_bom(data: bytes) -> bool:
    """Whether bytes after a UTF-16 BOM are 8-bit text (a BOM a tool put before ASCII or UTF-8): at
    least 16 of them, no NUL, two spaces or line ends and one per 32 bytes, and they decode strictly as
    UTF-8. UTF-16 writes a NUL byte in every ASCII character (spaces, line ends, digits); UTF-16 text
    without one is CJK characters only, whose bytes are spaces or line ends only in rare code units:
    of 8,000 4-40-character snippets of ../shared's Japanese and Chinese in UTF-16 with a BOM, 19 were
    UTF-8 without NUL, 2 held one such byte (``欠`` is U+6B20), none two. Hostile trial 15a: ``Hello
    world…`` after FF FE read as ``效汬\\u206f潷汲``, active.

    >>> looks_8_bit_after_utf16_bom(b"\\xff\\xfeHello world, this is ASCII.")
    True
    >>> looks_8_bit_after_utf16_bom(b"\\xff\\xfe" + "Hello world, this is UTF-16.".encode("utf-16-le"))
    False
    """
    body = data[2:]
    if len(body) < _MIN_BYTES_AFTER_BOM_FOR_8_BIT or b"\x00" in body \
            or (spaces := body.count(b" ") + body.count(b"\n")) < 2 \
            or spaces * _BYTES_PER_SPACE_IN_8_BIT_TEXT < len(body):
        return False
    try:
        body.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        return False
    return True


def _utf16_hint(data: bytes) -> str:
    """A hint for bytes with NUL that read like UTF-16 without a BOM (Latin text: every other byte
    NUL), which is not guessed: a BOM-less UTF-16 reading of binary data is text of any script."""
    half = len(data) // 2
    if half < 4:
        return ""
    odd, even = data[1::2].count(0) / half, data[0::2].count(0) / half
    for share, other, order in ((odd, even, "LE"), (even, odd, "BE")):
        if share > 0.5 and other < 0.05:
            return f" (it reads like UTF-16 {order} without a byte-order mark: save it as UTF-8, or with a BOM)"
    return ""


def choose_legacy_encoding(data: bytes, cp932_text: str) -> Literal["cp932", "gb18030"]:
    """Choose cp932 or GB18030 for bytes that decode strictly as both.

    GB18030 decodes almost any byte sequence, so cp932 is the default.
    GB18030 wins when either signal says so:

    1. The cp932 reading looks like GB-encoded Hanzi: at least 20 % of its
       non-ASCII characters are half-width katakana (U+FF61-U+FF9F), and
       charset-normalizer does not keep cp932 while rejecting GB18030.
    2. charset-normalizer keeps GB18030 and rejects cp932, on at least 64
       bytes of input.

    The decision is deterministic: charset-normalizer has no randomness and
    the rule reads only which encodings it keeps.

    Parameters
    ----------
    data : bytes
        The file, without BOM (none was present).
    cp932_text : str
        ``data`` decoded strictly as cp932.

    Returns
    -------
    str
        ``"cp932"`` or ``"gb18030"``.
    """
    kept = {match.encoding for match in charset_normalizer.from_bytes(data, cp_isolation=list(_LEGACY_ENCODINGS))}
    normalizer_prefers_cp932 = "cp932" in kept and "gb18030" not in kept
    normalizer_prefers_gb18030 = "gb18030" in kept and "cp932" not in kept

    if halfwidth_katakana_share(cp932_text) >= _HALFWIDTH_KATAKANA_SHARE_FOR_GB and not normalizer_prefers_cp932:
        return "gb18030"
    if normalizer_prefers_gb18030 and len(data) >= _MIN_BYTES_FOR_CHARSET_NORMALIZER_VERDICT:
        return "gb18030"
    return "cp932"


def looks_japanese(data: bytes, cp932_text: str) -> bool:
    """For bytes that decode as cp932 and not as GB18030, whether that reading is Japanese: not when
    at least 20 % of its non-ASCII characters are half-width katakana (real Japanese prose: 0.0,
    ``_HALFWIDTH_KATAKANA_SHARE_FOR_GB``) and charset-normalizer, asked about cp932 alone, rejects
    it. Cyrillic in KOI8-R reads as cp932 half-width katakana (``Ёлка стояла`` as ``ｳﾌﾋﾁ ﾓﾔﾏﾑﾌﾁ``)
    and was active as such, no Russian word in any search (hostile trial 13a);
    a Shift_JIS file that writes half-width katakana (``ﾃﾞｰﾀﾍﾞｰｽの設定``) is kept by charset-normalizer.
    """
    if halfwidth_katakana_share(cp932_text) < _HALFWIDTH_KATAKANA_SHARE_FOR_GB:
        return True
    return any(m.encoding == "cp932" for m in charset_normalizer.from_bytes(data, cp_isolation=["cp932"]))


def lookalike_page_reading(data: bytes, western_text: str) -> tuple[str, str] | None:
    """``(encoding, text)``: the windows-1254 (Turkish; ISO-8859-9 but for its C1 range) or windows-1257
    (Estonian, Lithuanian, Latvian) reading of bytes that read as Western European text, when it is text of that language;
    else None.

    windows-1254 differs from windows-1252 in six letters only (``ĞİŞğış`` where windows-1252 has
    ``ÐÝÞðýþ``), so Turkish read as windows-1252 looks Western but spells ``Ýstanbul`` and ``Kýrmýzý``
    (active, identified as Turkmen, ``İstanbul`` and ``kırmızı`` in no search: hostile trial 13a).
    Estonian writes ``õ ä ö ü`` at windows-1252's bytes in windows-1257 too, and ``š ž`` where
    windows-1252 has ``ð þ`` (``Ðokolaad ja þürii``: hostile trial 15a). A page is chosen when the
    windows-1252 reading holds one of those letters (:data:`_ICELANDIC_LOOKALIKES`) and the language
    identifier names one of the page's languages for its reading, with at least 0.5 (Icelandic, Faroese
    and Spanish texts holding them stay ``is``, ``fo``, ``es`` either way; 17 Icelandic, Faroese and Old
    English texts read as windows-1257 were never ``et``, ``lt`` or ``lv`` above 0.22). A file over 16 KiB
    is identified from its lines holding a byte above 0x7F, up to 16 KiB
    (:func:`~fabric_resources.parsing.text.latin_pages.high_byte_sample`: the whole of a file of one 8 MB
    line took 4 s).

    >>> lookalike_page_reading("Kırmızı elma ağaçta.".encode("cp1254"), "Kýrmýzý elma aðaçta.")
    ('cp1254', 'Kırmızı elma ağaçta.')
    >>> lookalike_page_reading("Šokolaad ja žürii.".encode("cp1257"), "Ðokolaad ja þürii.")
    ('cp1257', 'Šokolaad ja žürii.')
    >>> lookalike_page_reading("Ég þakka þér fyrir.".encode("cp1252"), "Ég þakka þér fyrir.") is None
    True
    """
    from fabric_resources.parsing.language import MIN_CONFIDENCE, identify_language

    sample = high_byte_sample(data)  # the identifier reads at most ~16 KiB (a file of one 8 MB line: 4 s)
    for encoding, letters, languages in _ICELANDIC_LOOKALIKES:
        if not letters.search(western_text):
            continue
        try:
            code, probability = identify_language(sample.decode(encoding, errors="strict"))
            if code in languages and probability >= MIN_CONFIDENCE:
                return encoding, data.decode(encoding, errors="strict")
        except UnicodeDecodeError:
            continue
    return None


def looks_western(text: str) -> bool:
    """Whether a windows-1252 reading looks like Western European text.

    True when at most 30 % of its non-ASCII, non-whitespace characters stand in runs of three
    or more such characters (see ``_MAX_WESTERN_RUN_SHARE`` for the measurement); a reading
    without such characters is trivially Western. Counted in Unicode scalars.

    >>> looks_western("Geschäftsführer, café, año"), looks_western("“ú–{Œê‚Å‚·")
    (True, False)
    """
    total = in_runs = 0
    for match in _NON_ASCII_RUN.finditer(text):
        n = match.end() - match.start()
        total += n
        in_runs += n if n >= 3 else 0
    return in_runs <= _MAX_WESTERN_RUN_SHARE * total


def western_beats_cjk(data: bytes, cjk_text: str) -> bool:
    """For bytes whose windows-1252 reading looks Western, whether it beats their CJK reading.

    Yes when either signal says so (the CJK reading is what decoding would otherwise return):

    1. At least half of the CJK reading's non-ASCII characters are "odd" for CJK text: a
       character at the edge of its run of non-ASCII characters that touches an ASCII letter,
       or a lone half-width katakana (``_MIN_CJK_ODD_SHARE_FOR_WESTERN``).
    2. charset-normalizer, choosing among cp932, GB18030 and windows-1252, ranks windows-1252
       first, on at least 64 bytes.

    On the units of ../shared neither signal fired for one Shift_JIS or GB18030 text, so
    what decodes as CJK today still does; measured there, the windows-1252 encodings of
    English, Spanish and German units decoded back exactly in 5,326 of 5,327 cases
    (snippets of 4-24 characters: 5,072 of 5,327). What stays ambiguous is a short text whose
    only non-ASCII characters open a word and pair with the letter after it ("“I hope",
    "Ça va"): its CJK reading has a lone character between spaces, as CJK text may; it decodes
    as CJK, as it did before windows-1252 was a candidate.

    >>> western_beats_cjk("Geschäftsführer".encode("cp1252"), "Gesch\u4000tsf\u4000rer")
    True
    """
    if cjk_odd_share(cjk_text) >= _MIN_CJK_ODD_SHARE_FOR_WESTERN:
        return True
    if len(data) < _MIN_BYTES_FOR_CHARSET_NORMALIZER_VERDICT:
        return False
    best = charset_normalizer.from_bytes(data, cp_isolation=[*_LEGACY_ENCODINGS, WESTERN]).best()
    return best is not None and best.encoding == WESTERN


def cjk_odd_share(cjk_text: str) -> float:
    """Share of a CJK reading's non-ASCII characters that are odd for CJK text: at the edge of their run
    of non-ASCII characters and touching an ASCII letter, or a lone half-width katakana (0.0 without
    non-ASCII characters). Real Japanese and Chinese measured at most 0.16; Latin text's bytes read as
    CJK, about 1 (``_MIN_CJK_ODD_SHARE_FOR_WESTERN``).

    >>> cjk_odd_share("Gesch\u4000tsf\u4000rer"), cjk_odd_share("桃园结义")
    (1.0, 0.0)
    """
    total = odd = 0
    for match in _CJK_RUN.finditer(cjk_text):
        start, end = match.start(), match.end()
        total += end - start
        left = start > 0 and cjk_text[start - 1].isascii() and cjk_text[start - 1].isalpha()
        right = end < len(cjk_text) and cjk_text[end].isascii() and cjk_text[end].isalpha()
        if end - start == 1:
            odd += left or right or "\uff61" <= cjk_text[start] <= "\uff9f"
        else:
            odd += left + right
    return odd / total if total else 0.0


def looks_like_damaged_utf8(data: bytes) -> bool:
    """Whether bytes that are not strict UTF-8 are UTF-8 with a flaw rather than a legacy encoding:
    at least 32 of their bytes are non-ASCII and 95 % of those stand in well-formed multi-byte
    UTF-8 sequences (``_MIN_UTF8_SHARE_FOR_DAMAGED``; legacy text measured at most 0.59, short
    snippets below 32 non-ASCII bytes up to 0.94).

    >>> note = "Le café de la forêt était fermé; nous avons mangé une crêpe à la crème. " * 3
    >>> cut_short = (note + "é").encode()[:-1]  # its last character cut in half
    >>> looks_like_damaged_utf8(cut_short), looks_like_damaged_utf8(note.encode("cp1252"))
    (True, False)
    """
    non_ascii = len(data) - len(data.translate(None, _HIGH_BYTES))
    if non_ascii < _MIN_NON_ASCII_BYTES_FOR_DAMAGED:
        return False
    allowed = (1 - _MIN_UTF8_SHARE_FOR_DAMAGED) * non_ascii  # non-ASCII bytes outside every sequence
    outside = 0
    # By blocks, stopping once too many are outside: re.sub holds a piece per match (a 39 MB
    # Shift_JIS file at once: +800 MB), and legacy text is told after a block or two.
    for start in range(0, len(data), _DAMAGE_BLOCK_BYTES):
        block = data[start:start + _DAMAGE_BLOCK_BYTES]
        inside = len(block) - len(_UTF8_MULTIBYTE.sub(b"", block))
        outside += len(block) - len(block.translate(None, _HIGH_BYTES)) - inside
        if outside > allowed:
            return False
    return True


def halfwidth_katakana_share(text: str) -> float:
    """Share of ``text``'s non-ASCII characters that are half-width katakana.

    Returns
    -------
    float
        In [0, 1]; 0.0 when ``text`` has no non-ASCII character. Counted in
        Unicode scalars; half-width katakana are U+FF61-U+FF9F.
    """
    non_ascii = [ch for ch in text if ord(ch) > 0x7F]
    if not non_ascii:
        return 0.0
    return sum(1 for ch in non_ascii if "\uff61" <= ch <= "\uff9f") / len(non_ascii)


def bom_encoding_of(data: bytes) -> str | None:
    """The codec a leading byte-order mark names, or ``None`` without one."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding
    return None


def _decode_legacy(data: bytes, encoding: str) -> str:
    """Strict decode; cp932 also rejects bytes that Shift_JIS leaves unassigned."""
    text = data.decode(encoding, errors="strict")
    if encoding == "cp932":
        for index, ch in enumerate(text):
            if ch in _CP932_UNASSIGNED_SINGLE_BYTES:
                offset = len(text[:index].encode(encoding))
                raise UnicodeDecodeError(encoding, data, offset, offset + 1, "byte unassigned in Shift_JIS")
    return text


def _decode_with_stray_nuls(data: bytes, nul_offset: int) -> tuple[str, str]:
    """Decode legacy-encoded bytes holding a stray NUL (or a few: within the controls allowed): the
    encoding is detected as if the NULs were not there (a NUL would sway the signals that detect it),
    and the bytes are then decoded whole under it, each NUL a character of its own (it is one in
    every candidate: no multi-byte sequence holds byte 0x00), so offsets count every scalar. A NUL
    inside a character, or bytes that without their NULs decode under no candidate, stay binary."""
    stripped = data.replace(b"\x00", b"")
    try:
        if bom_encoding_of(stripped) is not None:
            raise ParseError("undecodable", "a byte-order mark after a NUL")
        text, encoding = _decode(stripped)
    except ParseError as exc:
        raise ParseError("undecodable", f"binary: NUL byte at offset {nul_offset} and no UTF-16/32 BOM"
                         f"{_utf16_hint(data)}; without its NULs: {exc.detail}") from None
    try:
        whole = _decode_legacy(data, encoding)
    except UnicodeDecodeError as exc:
        raise ParseError("undecodable", f"binary: NUL byte at offset {nul_offset} inside a {encoding} "
                         f"character ({_describe(exc)})") from None
    if whole.replace("\x00", "") != text:  # a stateful codec (none of the candidates now) read it otherwise
        raise ParseError("undecodable", f"binary: NUL byte at offset {nul_offset} changes the {encoding} reading")
    return _require_text_like(whole, encoding), encoding


def _max_non_text_controls(length: int) -> int:
    return -(-length // 100) * _MAX_NON_TEXT_CONTROLS_PER_100


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        return False
    return True


def _require_text_like(text: str, encoding: str) -> str:
    """``text``, unless it holds more controls that never occur in text than
    ``_MAX_NON_TEXT_CONTROLS_PER_100`` per started 100 characters: then ParseError ``"undecodable"``
    naming the first. The controls a text keeps stay in it, so offsets still count every scalar of
    the source; but a stray NUL then reads (in :func:`decode_text`) as U+FFFD, one scalar for one, as CommonMark says a Markdown reader must and as browsers
    show plain text (HTML's PLAINTEXT state): a NUL passed on as text is a string terminator to C
    code that reads it later."""
    count = len(_NON_TEXT_CONTROL_RE.findall(text))
    if count > _max_non_text_controls(len(text)):
        first = _NON_TEXT_CONTROL_RE.search(text).start()
        raise ParseError(
            "undecodable", f"binary: decodes as {encoding} but {count} of its {len(text)} characters are "
            f"controls that never occur in text (the first: U+{ord(text[first]):04X} at char {first})"
        )
    return text


def _describe(exc: UnicodeDecodeError) -> str:
    return f"{exc.reason} at byte {exc.start}"
