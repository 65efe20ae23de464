"""Bytes -> text for an HTML page: which encoding a page may declare, and when its bytes are not text.

The declared encoding is read the way the WHATWG Encoding Standard's label table and the HTML
Standard's prescan (§13.2.3.2, "prescan a byte stream to determine its encoding") read it: only
the standard's labels name an encoding, so a page cannot make Python run a codec such as
``unicode_escape``, ``rot13`` or ``base64`` on its bytes, and a declared UTF-16 means UTF-8 (a
page whose ASCII ``<meta>`` the prescan could read is not UTF-16). No maintained copy of the
label table is installed here (``webencodings``, html5lib's, is not a dependency), so the table
below is the standard's, https://encoding.spec.whatwg.org/#names-and-labels (encodings.json).

A page whose bytes neither carry a BOM nor decode as UTF-8 or as a declared encoding is read by
the plain-text parser's detection (:func:`fabric_resources.parsing.text.decoding.decode_text`):
the same rule decides what is binary (a NUL byte, controls that never occur in text, no
candidate decoding), so a PDF or random bytes named ``.html`` fail ``undecodable`` as they do
named ``.txt``.
"""

from __future__ import annotations

import codecs
import re

from fabric_resources.parsing.text.decoding import decode_text, looks_like_damaged_utf8

# The WHATWG encodings a label can name, as the Python codec that decodes each, with its labels
# (https://encoding.spec.whatwg.org/#names-and-labels). Where the standard's decoder is a superset
# of the encoding its name suggests, the codec is that superset: GBK decodes as gb18030, Big5 as
# Big5-HKSCS, Shift_JIS as windows-31j (cp932), EUC-KR as windows-949 (cp949). Left out, so that
# their declaration is ignored: "replacement" (csiso2022kr, hz-gb-2312, iso-2022-cn,
# iso-2022-cn-ext, iso-2022-kr, reversed), which the standard decodes as one U+FFFD. The prescan
# turns UTF-16BE/LE into UTF-8 and x-user-defined into windows-1252.
_LABELS_BY_CODEC: dict[str, str] = {
    "utf-8": "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8 "
             # UTF-16BE, UTF-16LE: a <meta> declaring them means UTF-8 (prescan)
             "unicodefffe utf-16be csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le",
    "cp866": "866 cp866 csibm866 ibm866",
    "iso8859_2": "csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 iso_8859-2:1987 l2 latin2",
    "iso8859_3": "csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 iso_8859-3:1988 l3 latin3",
    "iso8859_4": "csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 iso_8859-4:1988 l4 latin4",
    "iso8859_5": "csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 iso_8859-5 iso_8859-5:1988",
    "iso8859_6": "arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 iso-8859-6 iso-8859-6-e "
                 "iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6 iso_8859-6:1987",
    "iso8859_7": "csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 iso8859-7 iso88597 "
                 "iso_8859-7 iso_8859-7:1987 sun_eu_greek",
    # ISO-8859-8 and ISO-8859-8-I decode alike; they differ in bidi handling only
    "iso8859_8": "csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 iso8859-8 iso88598 "
                 "iso_8859-8 iso_8859-8:1988 visual csiso88598i iso-8859-8-i logical",
    "iso8859_10": "csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6",
    "iso8859_13": "iso-8859-13 iso8859-13 iso885913",
    "iso8859_14": "iso-8859-14 iso8859-14 iso885914",
    "iso8859_15": "csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9",
    "iso8859_16": "iso-8859-16",
    "koi8_r": "cskoi8r koi koi8 koi8-r koi8_r",
    "koi8_u": "koi8-ru koi8-u",
    "mac_roman": "csmacintosh mac macintosh x-mac-roman",
    "cp874": "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874",
    "cp1250": "cp1250 windows-1250 x-cp1250",
    "cp1251": "cp1251 windows-1251 x-cp1251",
    # windows-1252 (Latin-1 and ASCII labels included, as the standard has it); x-user-defined (prescan)
    "cp1252": "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100 iso8859-1 iso88591 "
              "iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252 x-cp1252 x-user-defined",
    "cp1253": "cp1253 windows-1253 x-cp1253",
    "cp1254": "cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9 iso_8859-9:1989 l5 latin5 "
              "windows-1254 x-cp1254",
    "cp1255": "cp1255 windows-1255 x-cp1255",
    "cp1256": "cp1256 windows-1256 x-cp1256",
    "cp1257": "cp1257 windows-1257 x-cp1257",
    "cp1258": "cp1258 windows-1258 x-cp1258",
    "mac_cyrillic": "x-mac-cyrillic x-mac-ukrainian",
    "gb18030": "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 x-gbk gb18030",
    "big5hkscs": "big5 big5-hkscs cn-big5 csbig5 x-x-big5",
    "euc_jp": "cseucpkdfmtjapanese euc-jp x-euc-jp",
    "iso2022_jp": "csiso2022jp iso-2022-jp",
    "cp932": "csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis",
    "cp949": "cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 ksc5601 ksc_5601 "
             "windows-949",
}
#: WHATWG label (lower case) -> Python codec name.
LABELS: dict[str, str] = {label: codec for codec, labels in _LABELS_BY_CODEC.items() for label in labels.split()}

#: The bytes Python's cp1252 leaves undefined. The standard's windows-1252 (what every Latin-1 and
#: ASCII label names too) decodes each as the C1 control of its number, so a browser never fails on
#: it; strict cp1252 did, and a page declaring iso-8859-1 that held one (0x9D, the last byte of a
#: right quote's UTF-8 read as windows-1252 and saved again: "â€\x9d") failed ``undecodable`` whole.
_CP1252_UNDEFINED = frozenset(b"\x81\x8d\x8f\x90\x9d")
_WINDOWS_1252_ERRORS = "fabric-whatwg-windows-1252"


def _c1_control(error: UnicodeDecodeError) -> tuple[str, int]:
    """The WHATWG windows-1252 decoding of the bytes strict cp1252 refused: C1 controls."""
    refused = error.object[error.start:error.end]
    if not all(byte in _CP1252_UNDEFINED for byte in refused):
        raise error
    return "".join(map(chr, refused)), error.end


codecs.register_error(_WINDOWS_1252_ERRORS, _c1_control)

_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([^\s"'>;/]+)""", re.IGNORECASE)
_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>")
# An ISO-2022-JP escape sequence (RFC 1468: to JIS X 0208, to ASCII or to JIS X 0201 Roman). Its bytes
# are 7-bit, so strict UTF-8 took them and the page read as "\x1b$BF|K\8l…" (its meta declaration unread).
_ISO2022JP_ESCAPE = re.compile(rb"\x1b(?:\$[@B]|\([BJ])")


def declared_codec(data: bytes) -> str | None:
    """The Python codec for the encoding the page's first 4,096 bytes declare in a ``<meta>``
    (``charset=`` or ``http-equiv`` content), or ``None`` when none is declared or the label is
    not a WHATWG label. Labels match case-insensitively, as the standard says.

    >>> declared_codec(b'<meta charset="UTF-16">'), declared_codec(b"<meta charset=rot13>")
    ('utf-8', None)
    """
    declared = _CHARSET.search(data[:4096])
    if declared is None:
        return None
    return LABELS.get(declared.group(1).decode("ascii", errors="replace").strip().lower())


def decode_html(data: bytes) -> tuple[str, str]:
    """Bytes -> (text, Python codec name).

    A BOM decides (UTF-8, UTF-16; undecodable bytes replaced, as browsers do); else ISO-2022-JP,
    strictly, when the bytes hold its escape sequences (declared or not, as browsers detect it);
    else strict UTF-8;
    else the WHATWG encoding the page declares (:func:`declared_codec`), strictly (windows-1252 as
    the standard decodes it: its five bytes undefined in cp1252 are C1 controls); else UTF-8 with
    its bad bytes replaced when the bytes are UTF-8 but for a flaw
    (:func:`~fabric_resources.parsing.text.decoding.looks_like_damaged_utf8`); else the
    plain-text parser's detection (:func:`~fabric_resources.parsing.text.decoding.decode_text`:
    cp932, GB18030, windows-1252). An XML declaration is removed (lxml refuses one in a str).

    Raises
    ------
    ParseError
        ``undecodable`` from that detection: the bytes hold NULs past a stray one, decode under no candidate, or
        hold controls that never occur in text (binary data, e.g. a PDF named ``.html``).
    """
    for bom, name in _BOMS:
        if data.startswith(bom):
            return data.decode(name, errors="replace"), name
    if _ISO2022JP_ESCAPE.search(data):
        try:
            return _XML_DECL.sub("", data.decode("iso2022_jp")), "iso2022_jp"
        except UnicodeDecodeError:
            pass
    try:
        return _XML_DECL.sub("", data.decode("utf-8")), "utf-8"
    except UnicodeDecodeError:
        pass
    name = declared_codec(data)
    if name is not None and name != "utf-8":  # a declared UTF-8 has just failed
        try:
            return _XML_DECL.sub("", data.decode(name, _WINDOWS_1252_ERRORS if name == "cp1252" else "strict")), name
        except UnicodeDecodeError:
            pass
    if looks_like_damaged_utf8(data):  # UTF-8 but for a flaw: its bad bytes replaced, as browsers do
        return _XML_DECL.sub("", data.decode("utf-8", errors="replace")), "utf-8"
    text, name = decode_text(data, nul_as="\x00")  # a stray NUL: ignored as HTML ignores it (parser)
    return _XML_DECL.sub("", text), name
