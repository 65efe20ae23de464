"""Tests for the plain-text parser (fabric_resources.parsing.text) and the registry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_resources.parsing.document import ParseError
from fabric_resources.parsing.registry import detect_media_type, parser_for
from fabric_resources.parsing.text import PARSER_NAME, PARSER_VERSION
from fabric_resources.parsing.text.parser import decode_text, parse_text
from fabric_resources.config import ParserConfig, TextParserConfig

SHARED = Path(__file__).resolve().parents[3] / "shared"
CORPUS = SHARED / "corpus" / "text"
CONFIG = TextParserConfig()


def corpus_file(relative: str) -> bytes:
    path = CORPUS / relative
    if not path.exists():
        pytest.skip("../shared/corpus not present")
    return path.read_bytes()


def normalised_span(text: str, start: int, end: int) -> str:
    """What a unit's text must be: the span with "\\n" endings, each line right-stripped."""
    lines = re.split(r"\r\n|\r|\n", text[start:end])
    return "\n".join(line.rstrip() for line in lines)


def assert_locators_exact(text: str, units) -> None:
    previous_end = 0
    for unit in units:
        loc = unit.locator
        assert unit.text.strip(), "unit is empty or only whitespace"
        assert normalised_span(text, loc["char_start"], loc["char_end"]) == unit.text
        assert loc["char_start"] >= previous_end, "units out of reading order or overlapping"
        assert 1 <= loc["line_start"] <= loc["line_end"]
        previous_end = loc["char_end"]


# --------------------------------------------------------------------------
# Real corpus files

AOZORA = [
    ("aozora/akutagawa_rashomon.sjis.txt", "下人"),
    ("aozora/akutagawa_kumono_ito.sjis.txt", "御釈迦様"),
    ("aozora/akutagawa_momotaro.sjis.txt", "桃太郎"),
    ("aozora/akutagawa_jigokuhen_shinji.sjis.txt", "良秀"),
]


@pytest.mark.parametrize(("relative", "word"), AOZORA)
def test_aozora_files_decode_as_cp932(relative: str, word: str) -> None:
    """Guards against: preferring gb18030 (which also decodes these bytes) over cp932,
    dropping Aozora markup (《》 ruby), or mislocating units in CRLF files."""
    data = corpus_file(relative)
    doc = parse_text(data, CONFIG)
    text, _ = decode_text(data)
    assert doc.encoding == "cp932"
    assert doc.metadata == {"line_endings": "crlf", "bom": False}
    assert any(word in unit.text for unit in doc.units)
    assert_locators_exact(text, doc.units)
    if "momotaro" in relative:
        assert any("桃《もも》" in unit.text for unit in doc.units)


def test_chinese_utf8_file() -> None:
    """Guards against: trying legacy encodings before strict UTF-8, or losing CRLF positions."""
    data = corpus_file("chinese/sanguoyanyi_ch01-10.utf8.txt")
    doc = parse_text(data, CONFIG)
    text, _ = decode_text(data)
    assert doc.encoding == "utf-8"
    assert doc.metadata["line_endings"] == "crlf"
    assert any("刘备" in unit.text or "玄德" in unit.text for unit in doc.units)
    assert_locators_exact(text, doc.units)


def test_pride_and_prejudice() -> None:
    """Guards against: merging paragraphs across blank lines, or breaking lines inside one."""
    data = corpus_file("gutenberg/1342-0_pride-and-prejudice.txt")
    doc = parse_text(data, CONFIG)
    text, _ = decode_text(data)
    assert (doc.parser_name, doc.parser_version, doc.encoding) == (PARSER_NAME, PARSER_VERSION, "utf-8")
    opening = [u for u in doc.units if "It is a truth universally acknowledged" in u.text]
    assert len(opening) == 1
    assert "\n\n" not in opening[0].text
    assert_locators_exact(text, doc.units)


# --------------------------------------------------------------------------
# Units and locators

LINE_ENDINGS = st.sampled_from(["\n", "\r\n", "\r"])
WORD_CHARS = {
    "latin": "abcdefghijklmnopqrstuvwxyzABCXYZ.,;'é",
    "japanese": "あいうえおかきくけこのはをにでしたです日本語東京大学図書館猫名前。、「」",
    "chinese": "我们今天去北京大学学习中文天气很好三国演义刘备关羽张飞。，",
}
INLINE_SPACE = st.sampled_from([" ", "\t", "\u3000", "  "])


@st.composite
def document_text(draw, chars: str) -> str:
    """Random paragraphs of non-blank lines, separated by runs of blank lines."""
    word = st.text(alphabet=chars, min_size=1, max_size=8)

    def line():
        lead = draw(st.sampled_from(["", " ", "\u3000", "\t"]))
        words = draw(st.lists(word, min_size=1, max_size=5))
        body = draw(INLINE_SPACE).join(words)
        trail = draw(st.sampled_from(["", " ", "\t ", "\u3000"]))
        return lead + body + trail

    parts = [draw(st.sampled_from(["", " \n", "\r\n"]))]
    for _ in range(draw(st.integers(0, 5))):
        lines = [line() for _ in range(draw(st.integers(1, 4)))]
        parts.append("".join(text + draw(LINE_ENDINGS) for text in lines[:-1]) + lines[-1])
        blanks = draw(st.lists(st.sampled_from(["", " ", "\t", "\u3000"]), min_size=1, max_size=3))
        parts.append(draw(LINE_ENDINGS) + "".join(b + draw(LINE_ENDINGS) for b in blanks))
    return "".join(parts)


ENCODED_SAMPLES = st.one_of(
    st.tuples(document_text(WORD_CHARS["latin"] + WORD_CHARS["japanese"]), st.sampled_from(["utf-8", "utf-8-sig", "utf-16"])),
    st.tuples(document_text(WORD_CHARS["japanese"]), st.just("cp932")),
    st.tuples(document_text(WORD_CHARS["chinese"]), st.just("gb18030")),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ENCODED_SAMPLES)
def test_locators_reproduce_unit_text(sample: tuple[str, str]) -> None:
    """Guards against: offsets counted after CRLF normalisation or in bytes, offsets that
    include the BOM, empty units, units out of order, and lossy decoding."""
    original, encoding = sample
    data = original.encode(encoding)
    doc = parse_text(data, CONFIG)
    text, _ = decode_text(data)
    assert text == original
    assert_locators_exact(text, doc.units)
    blank_line_run = r"(?>\r\n|\r|\n)(?:[ \t\u3000]*(?>\r\n|\r|\n))+"  # atomic: CRLF is one ending
    expected = [p for p in re.split(blank_line_run, original) if p.strip()]
    assert len(doc.units) == len(expected)


@settings(max_examples=50, deadline=None)
@given(document_text(WORD_CHARS["latin"]))
def test_line_numbers_count_each_ending_once(original: str) -> None:
    """Guards against: counting CRLF as two line breaks, or 0-based line numbers."""
    doc = parse_text(original.encode("utf-8"), CONFIG)
    for unit in doc.units:
        loc = unit.locator
        before = original[: loc["char_start"]]
        assert loc["line_start"] == 1 + len(re.findall(r"\r\n|\r|\n", before))
        assert loc["line_end"] == loc["line_start"] + unit.text.count("\n")


def test_paragraph_text_and_locator_example() -> None:
    """Guards against: stripping leading indentation of inner lines, or stripping markup."""
    text = "  <p>First line  \r\n\u3000second 《ruby》\t\r\n \r\n\r\nNext\n"
    doc = parse_text(text.encode("utf-8"), CONFIG)
    assert [u.text for u in doc.units] == ["<p>First line\n\u3000second 《ruby》", "Next"]
    assert doc.units[0].locator == {"char_start": 2, "char_end": 33, "line_start": 1, "line_end": 2}
    assert doc.units[1].locator == {"char_start": 41, "char_end": 45, "line_start": 5, "line_end": 5}
    assert all(u.kind == "paragraph" and u.section_path == () for u in doc.units)
    assert doc.metadata == {"line_endings": "mixed", "bom": False}
    assert doc.title is None


@pytest.mark.parametrize(
    ("data", "endings"),
    [(b"a\r\nb", "crlf"), (b"a\nb\n", "lf"), (b"a\rb", "cr"), (b"a\nb\r\n", "mixed"), (b"one line", "none")],
)
def test_line_endings_metadata(data: bytes, endings: str) -> None:
    """Guards against: reporting CRLF as mixed CR+LF, or a default instead of what is there."""
    assert parse_text(data, CONFIG).metadata["line_endings"] == endings


@pytest.mark.parametrize("data", [b"", b"   \n\t\r\n  ", "\u3000\r\n".encode("utf-8"), b"\xef\xbb\xbf"])
def test_empty_or_blank_file_has_no_units(data: bytes) -> None:
    """Guards against: failing on empty files, or emitting whitespace-only units."""
    doc = parse_text(data, CONFIG)
    assert doc.units == []


def test_plain_text_has_no_headings_or_sections() -> None:
    """Guards against: treating '#' lines as headings in plain text (Markdown has its own parser)."""
    text = "# Book\nintro\n\n## Part 1\nbody one\n"
    doc = parse_text(text.encode("utf-8"), CONFIG)
    assert [(u.kind, u.text, u.section_path) for u in doc.units] == [
        ("paragraph", "# Book\nintro", ()), ("paragraph", "## Part 1\nbody one", ())]
    assert_locators_exact(text, doc.units)


# --------------------------------------------------------------------------
# Encodings

JAPANESE = (
    "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"
    "何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。"
)
SHORT_JAPANESE_QUOTE = "「良秀。"  # charset-normalizer alone rejects its cp932 reading
CHINESE = "玄德幼孤，事母至孝；家贫，贩屦织席为业。其家之东南，有一大桑树，高五丈余，遥望之，童童如车盖。"
SHORT_CHINESE = "唐周乃径赴省中告变。"  # charset-normalizer keeps both readings


@pytest.mark.parametrize(
    ("text", "encoding"),
    [(JAPANESE, "cp932"), (SHORT_JAPANESE_QUOTE, "cp932"), (CHINESE, "gb18030"), (SHORT_CHINESE, "gb18030")],
)
def test_ambiguous_legacy_bytes_pick_the_right_encoding(text: str, encoding: str) -> None:
    """Guards against: trying gb18030 first (it decodes the Japanese bytes too), trusting
    charset-normalizer alone on short input, or always answering cp932."""
    data = text.encode(encoding)
    for candidate in ("cp932", "gb18030"):
        data.decode(candidate)  # the bytes really are ambiguous
    assert decode_text(data) == (text, encoding)


@pytest.mark.parametrize("encoding", ["euc_jp", "iso2022_jp"])
def test_japanese_in_euc_jp_or_iso_2022_jp_decodes_exactly(encoding: str) -> None:
    """Property: Japanese in the two other legacy Japanese encodings (old Unix text, mail) reads as
    written, and the Chinese and Japanese bytes that read as GB18030 and cp932 still do.

    guards against: EUC-JP read as GB18030 (``吾輩は猫`` came back as unrelated Hanzi around the
    kana, so no Japanese search found the file, and nothing said so); ISO-2022-JP read as ASCII
    with its escapes (``$B8`GZ$OG-(B``)."""
    data = JAPANESE.encode(encoding)
    assert decode_text(data) == (JAPANESE, encoding)
    assert decode_text((JAPANESE + "\n\n" + CHINESE).encode("utf-8"))[1] == "utf-8"
    for text, own in ((JAPANESE, "cp932"), (CHINESE, "gb18030"), (SHORT_CHINESE, "gb18030")):
        assert decode_text(text.encode(own)) == (text, own)
    doc = parse_text(data, CONFIG)
    assert "".join(u.text for u in doc.units) == JAPANESE


KOREAN = ("오늘은 날씨가 좋아서 공원에 산책을 나갔다. 아이들이 뛰어놀고 있었다.\n"
          "이 문서는 회의록입니다. 다음 회의는 월요일 오전 열 시에 열립니다.\n")
TRADITIONAL = "臺北是中華民國的首都，人口眾多，文化豐富。\n香港的夜景很美，維多利亞港兩岸燈火通明。\n"


@pytest.mark.parametrize(("text", "encoding"), [(KOREAN, "euc_kr"), (KOREAN, "cp949"), (TRADITIONAL, "big5")])
def test_korean_in_euc_kr_and_traditional_chinese_in_big5_decode_exactly(text: str, encoding: str) -> None:
    """Property: Korean (EUC-KR, Windows cp949) and traditional Chinese (Big5) files read as written.

    guards against: both read as GB18030, every character an unrelated Hanzi (``오늘은`` as ``醴疵篮``),
    the file active and in no Korean or Chinese search, nothing said; and against the signals that
    choose them firing for Chinese in GB18030 (also checked on ../shared's Chinese texts: none moved)."""
    data = text.encode(encoding)
    data.decode("gb18030")  # the mojibake reading exists
    assert decode_text(data)[0] == text
    assert decode_text(data)[1] in ("cp949", "big5")
    assert decode_text(CHINESE.encode("gb18030")) == (CHINESE, "gb18030")
    assert decode_text((CHINESE * 3).encode("gb18030")) == (CHINESE * 3, "gb18030")


NON_LATIN = {
    "cp1251": "Москва — столица России. Съешь же ещё этих мягких французских булок, да выпей чаю.\n",
    "koi8_r": "Ёлка стояла в углу комнаты, и дети украшали её игрушками весь вечер.\n",
    "cp1253": "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας και η μεγαλύτερη πόλη της χώρας.\n",
    "cp1255": "ירושלים היא בירת ישראל והעיר הגדולה ביותר בה. העיר העתיקה מוקפת חומה.\n",
    "cp1256": "القاهرة هي عاصمة مصر وأكبر مدنها، وتقع على ضفاف نهر النيل منذ أكثر من ألف عام.\n",
    "cp874": "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย และเป็นเมืองที่มีประชากรมากที่สุด\n",
}


@pytest.mark.parametrize("encoding", sorted(NON_LATIN))
def test_a_legacy_code_page_of_another_script_reads_as_written(encoding: str) -> None:
    """Property: a paragraph in the Cyrillic, Greek, Hebrew, Arabic or Thai legacy code page reads
    as written (charset-normalizer names it, and rejects the CJK reading Fabric would take).

    guards against: Arabic windows-1256 active as cp932 katakana and Thai TIS-620 as GB18030 Hanzi
    (in no search, nothing said), Russian, Greek and Hebrew failing ``undecodable`` although the
    library names their code page."""
    text = NON_LATIN[encoding]
    data = text.encode(encoding)
    assert len(data) >= 64
    assert decode_text(data)[0] == text


@pytest.mark.skipif(not SHARED.exists(), reason="../shared is absent")
@pytest.mark.parametrize("encoding", ["euc_jp", "iso2022_jp"])
def test_aozora_files_in_the_other_japanese_encodings_decode_exactly(encoding: str) -> None:
    """guards against: a whole novel in EUC-JP or ISO-2022-JP read as GB18030 or ASCII."""
    checked = 0
    for path in sorted((SHARED / "corpus" / "text" / "aozora").glob("*.txt")):
        text = path.read_bytes().decode("cp932")
        try:
            data = text.encode(encoding)
        except UnicodeEncodeError:  # a character outside JIS X 0208 (Microsoft's extensions)
            continue
        assert decode_text(data) == (text, encoding), path.name
        checked += 1
    assert checked >= 3


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"\xef\xbb\xbfhello", ("hello", "utf-8-sig")),
        ("h\u00e9llo\r\n".encode("utf-16-le"), None),
        (b"\xff\xfe" + "héllo".encode("utf-16-le"), ("héllo", "utf-16")),
        (b"\xfe\xff" + "日本".encode("utf-16-be"), ("日本", "utf-16")),
        (b"\xff\xfe\x00\x00" + "日本".encode("utf-32-le"), ("日本", "utf-32")),
        ("plain ascii".encode("utf-8"), ("plain ascii", "utf-8")),
    ],
)
def test_bom_and_utf8(data: bytes, expected: tuple[str, str] | None) -> None:
    """Guards against: leaving the BOM in the text, reading UTF-32 as UTF-16, and
    guessing BOM-less UTF-16 (NUL-bearing bytes without a BOM are binary)."""
    if expected is None:
        with pytest.raises(ParseError) as err:
            decode_text(data)
        assert err.value.reason == "undecodable"
    else:
        assert decode_text(data) == expected


def test_bom_offsets_exclude_the_bom() -> None:
    """Guards against: counting the BOM in char offsets."""
    doc = parse_text("\ufeffab\n\ncd".encode("utf-8"), CONFIG)
    assert doc.metadata["bom"] is True
    assert [u.locator["char_start"] for u in doc.units] == [0, 4]


@settings(max_examples=50, deadline=None)
@given(st.binary(min_size=1, max_size=512).map(lambda b: b[: len(b) // 2] + b"\x00" + b[len(b) // 2 :]))
def test_random_bytes_with_nul_are_undecodable(data: bytes) -> None:
    """Guards against: accepting binary as UTF-8 (NUL is valid UTF-8) or as a legacy encoding. Only
    text whose NULs and other controls that never occur in text are strays (one per started 100
    characters, as decode_text allows) reads, each NUL as U+FFFD in its place (trial 22f), in the
    encoding the bytes without their NULs read in (trial 23i)."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf", b"\x00\x00\xfe\xff")):
        data = b"x" + data
    try:
        text, encoding = decode_text(data)
    except ParseError as err:
        assert err.reason == "undecodable"
        return
    exact = data.decode(encoding)
    assert encoding == "utf-8" or decode_text(data.replace(b"\x00", b""))[1] == encoding
    controls = sum(ch in "\x00\x01\x02\x03\x04\x05\x06\x7f" or "\x0e" <= ch <= "\x1f" and ch != "\x1b" for ch in exact)
    assert controls <= -(-len(exact) // 100) and text == exact.replace("\x00", "\ufffd"), (data, text)


def test_a_stray_nul_in_utf8_text_reads_as_a_replacement_character_and_binary_still_fails() -> None:
    """guards against (trial 22f): one stray NUL byte (a bad copy, an editor's slip) failed a whole
    UTF-8 text or Markdown file ``undecodable``, though every editor and browser shows it. Strays are
    counted as any control that never occurs in text (one per started 100 characters); each reads
    as U+FFFD, one scalar for one, so every offset after it stays exact. Many NULs (binary data,
    UTF-16 without a BOM) still fail."""
    line = "The harbour master counted the herring boats at dawn and wrote the tally down. "
    data = (line + "\x00" + line + "\n\nSecond paragraph after it.\n").encode()
    doc = parse_text(data, CONFIG)
    assert doc.encoding == "utf-8" and doc.units[0].text == line + "\ufffd" + line.rstrip()
    assert doc.units[1].text == "Second paragraph after it." and doc.units[1].locator["char_start"] == 2 * len(line) + 3
    for binary in (b"\x00\x01binary now\x00" * 50, (line * 3).encode("utf-16-le"), (line + "\x00\x00").encode()):
        with pytest.raises(ParseError) as err:
            parse_text(binary, CONFIG)
        assert err.value.reason == "undecodable", binary[:20]


@pytest.mark.parametrize("encoding, before, after", [
    ("cp1252", "Caf\u00e9 cr\u00e8me, na\u00efve fa\u00e7ade, the d\u00e9j\u00e0 vu of a r\u00e9sum\u00e9. ",
     "Sold \u00e0 la carte for \u00a35, \u00ab tr\u00e8s cher \u00bb.\n"),
    ("cp932", "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。",
     "何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。\n"),
    ("gb18030", "中华人民共和国成立于一九四九年十月一日，首都是北京。", "长江是中国最长的河流，流经十一个省份。\n"),
    ("cp1251", "Москва — столица России, крупнейший город страны. ", "Население города превышает двенадцать миллионов.\n"),
])
def test_a_stray_nul_in_legacy_encoded_text_reads_as_a_replacement_character(encoding, before, after) -> None:
    """guards against (trial 23i; left by 22f): one stray NUL byte failed a whole Shift_JIS, GB18030,
    windows-1252 or windows-1251 file ``undecodable`` ("binary: NUL byte"), though the same slip in
    UTF-8 reads as U+FFFD. The encoding is detected as if the NUL were not there, and the NUL reads
    as U+FFFD, one scalar for one, so the units after it keep their exact offsets."""
    text = before + "\x00" + after + "\n" + after
    data = text.encode(encoding)
    assert decode_text(data) == (text.replace("\x00", "\ufffd"), encoding)
    doc = parse_text(data, CONFIG)
    assert doc.encoding == encoding and doc.units[0].text == before + "\ufffd" + after.rstrip()
    assert_locators_exact(text.replace("\x00", "\ufffd"), doc.units)


def test_binary_with_a_few_nuls_and_a_nul_inside_a_character_stay_undecodable() -> None:
    """guards against (trial 23i): reading a stray NUL in text that is not UTF-8 letting binary
    through. Random or compressed bytes hold a NUL per 256 bytes, within the stray allowance, but
    without their NULs they decode as no text; a NUL that splits a Shift_JIS character is damage;
    many NULs are binary, as before."""
    import random
    import zlib

    noise = random.Random(23).randbytes(4000)
    packed = zlib.compress(("The harbour master counted the boats. " * 400).encode())
    japanese = "吾輩は猫である。名前はまだ無い。".encode("cp932")
    torn = japanese[:9] + b"\x00" + japanese[9:]  # between the two bytes of である's で
    padded = ("caf\u00e9 au lait " * 10).encode("cp1252") + b"\x00" * 20
    for binary in (noise, packed, torn, padded):
        assert b"\x00" in binary
        with pytest.raises(ParseError) as err:
            parse_text(binary, CONFIG)
        assert err.value.reason == "undecodable" and "NUL byte at offset" in err.value.detail, binary[:20]
    assert "inside a cp932 character" in str(pytest.raises(ParseError, decode_text, torn).value)


def test_a_citation_after_a_stray_nul_in_shift_jis_text_resolves_verified(tmp_path) -> None:
    """guards against (trial 23i): a Shift_JIS text file holding a stray NUL was in no search
    (``undecodable``); now it is read, and a citation of the paragraph after the NUL resolves
    verified against the file's bytes (its offsets count the NUL as one character)."""
    from conftest import ingest
    from fabric_query import Fabric
    from fabric_resources.home import FabricHome

    text = ("吾輩は猫である。名前はまだ無い。\x00どこで生れたかとんと見当がつかぬ。\n\n"
            "The harbour master counted the herring boats at dawn and wrote the tally down.\n")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "neko.txt").write_bytes(text.encode("cp932"))
    home = FabricHome(tmp_path / "home")
    ingest(corpus, home)
    pack = Fabric(home.root).search("herring boats tally", limit=1)
    assert pack.results and "herring" in pack.results[0].text
    resolved = Fabric(home.root).resolve(pack.results[0].citation)
    assert resolved.status == "verified", resolved.checks


@pytest.mark.parametrize(
    "data", [b"\xff\xfe\xfd", b"\xff\xfe\xfd" * 3, b"ok " + b"\xff\xfe\xfd" * 4, b"\x80\xfd\xfe\xff\x80", b"ab\x01\x02cd"]
)
def test_bytes_invalid_in_every_candidate_are_undecodable(data: bytes) -> None:
    """Guards against: lossy decoding (errors="replace"), falling back past a BOM that
    does not decode, accepting cp932's private-use mappings of 0x80/0xA0/0xFD-0xFF,
    and accepting control-laden binary."""
    with pytest.raises(ParseError) as err:
        parse_text(data, CONFIG)
    assert err.value.reason == "undecodable"
    assert err.value.detail


def test_a_stray_control_in_text_is_kept_and_control_dense_bytes_stay_binary() -> None:
    """Guards against: one stray control (2 of CACM's abstracts hold U+0019 for an apostrophe; old
    files end with SUB) failing a whole text file as binary, so it is in no search; a stray that is
    dropped or moved (offsets must count every scalar of the source); and the allowance letting
    binary through: random bytes read as text are ~10 % such controls, above the 1 % allowed."""
    import random

    abstract = ("A method is given for computing the coefficients of a polynomial; the author\x19s "
                "procedure needs no division and is stable.\n\nIts cost is linear in the degree.\n")
    assert decode_text(abstract.encode("utf-8")) == (abstract, "utf-8")
    doc = parse_text(abstract.encode("utf-8"), CONFIG)
    first = doc.units[0]
    assert "\x19" in first.text and abstract[first.locator["char_start"]:first.locator["char_end"]] == first.text
    dos = ("caf\xe9 au lait " * 10).encode("cp1252") + b"\r\n\x1a"
    assert decode_text(dos) == (dos.decode("cp1252"), "cp1252")
    body = "x" * 98
    assert decode_text((body + "\x19\n").encode()) == (body + "\x19\n", "utf-8")  # 1 in 100: text
    for dense, named in ((body + "\x19\x19", "2 of its 100 characters are controls that never occur in "
                          "text (the first: U+0019 at char 98)"),
                         ("ab\x01\x02cd", "2 of its 6 characters are controls that never occur in text "
                          "(the first: U+0001 at char 2)")):  # 2 in 100, 2 in 6: binary
        with pytest.raises(ParseError) as err:
            decode_text(dense.encode())
        # the reason names the count and the first control (docs/reliability.md)
        assert err.value.reason == "undecodable" and named in err.value.detail, err.value.detail
    for seed in range(40):
        noise = random.Random(seed).randbytes(2000).replace(b"\x00", b"")
        with pytest.raises(ParseError) as err:
            parse_text(noise, CONFIG)
        assert err.value.reason == "undecodable", seed


def test_a_short_note_with_one_stray_control_is_text() -> None:
    """Property: the allowance is one stray control per started hundred characters, so a note
    shorter than 100 characters may hold one (an old DOS note's closing SUB, a U+0019 apostrophe)
    and is searchable; two in such a note are still binary.

    Guards against: the ratio taken over the text's exact length (``count * 100 > len``), which
    failed every text under 100 characters holding one stray as binary ("old DOS note\\r\\n" +
    SUB, 15 characters, was undecodable while the same note at 100 characters was text)."""
    for note, encoding in (("old DOS note about the armadillo shelter\r\n\x1a", "utf-8"),
                           ("Weird \u2018quote\u2019\x1a", "cp1252"),
                           ("The heron\x19s nest by the estuary.\n", "utf-8")):
        assert decode_text(note.encode(encoding)) == (note, encoding)
        doc = parse_text(note.encode(encoding), CONFIG)
        assert [u.text for u in doc.units] == [note.replace("\r\n", "\n").rstrip()]  # the stray kept
    for dense in ("ab\x01cd\x02", "x" * 150 + "\x1a\x1a\x1a"):  # 2 in 6; 3 in 153 (2 allowed)
        with pytest.raises(ParseError) as err:
            decode_text(dense.encode())
        assert err.value.reason == "undecodable" and "controls that never occur in text" in err.value.detail


def test_bom_less_utf16_is_refused_with_a_hint_and_binary_gets_none() -> None:
    """Guards against: a UTF-16 file saved without a BOM failing as plain 'binary' with no clue what
    to do (trial 12a), and the hint given to binary data that merely holds NUL bytes."""
    for data, order in (("Meeting notes: café at noon".encode("utf-16-le"), "LE"),
                        ("Meeting notes".encode("utf-16-be"), "BE")):
        with pytest.raises(ParseError) as err:
            decode_text(data)
        assert err.value.reason == "undecodable" and f"UTF-16 {order} without a byte-order mark" in err.value.detail
    import random

    with pytest.raises(ParseError) as err:
        decode_text(random.Random(3).randbytes(400) + b"\x00")
    assert "UTF-16" not in err.value.detail.replace("UTF-16/32 BOM", "")


def test_undecodable_detail_names_what_was_tried() -> None:
    """Guards against: an error that does not say which encodings failed."""
    with pytest.raises(ParseError) as err:
        decode_text(b"ok " + b"\x80\xfd\xfe\xff" * 4)
    assert all(name in err.value.detail for name in ("utf-8", "cp932", "gb18030"))


def test_too_large() -> None:
    """Guards against: ignoring max_bytes, or checking it against characters instead of bytes."""
    data = "日本語".encode("utf-8")  # 3 chars, 9 bytes
    assert parse_text(data, TextParserConfig(max_bytes=9)).units
    with pytest.raises(ParseError) as err:
        parse_text(data, TextParserConfig(max_bytes=8))
    assert err.value.reason == "too-large"


# --------------------------------------------------------------------------
# Registry


@pytest.mark.parametrize(
    ("name", "media_type", "parser"),
    [
        ("notes.txt", "text/plain", "text"),
        ("dir/NOTES.TEXT", "text/plain", "text"),
        ("README.md", "text/markdown", "markdown"),
        ("a.Markdown", "text/markdown", "markdown"),
        ("book.EPUB", "application/epub+zip", "epub"),
        ("doc.pdf", "application/pdf", "pdf"),
        ("cover.jpg", "image/jpeg", None),
        ("content.opf", "application/oebps-package+xml", None),
        ("chapter.xhtml", "application/xhtml+xml", None),
        ("notes.txt.gz", "application/octet-stream", None),
        ("data.csv", "text/csv", None),
        ("Makefile", "application/octet-stream", None),
    ],
)
def test_detect_media_type_and_parser_for(name: str, media_type: str, parser: str | None) -> None:
    """Guards against: case-sensitive extensions, parsing unsupported types (csv, xhtml,
    gzip'd text) as text, and host-dependent mimetypes answers."""
    assert detect_media_type(name, b"") == media_type
    spec = parser_for(media_type)
    assert (spec.name if spec else None) == parser


def test_registry_text_parser_uses_text_config() -> None:
    """Guards against: the registry ignoring parser_config.text or dropping the media type."""
    spec = parser_for("text/plain")
    assert spec is not None and (spec.name, spec.version) == (PARSER_NAME, PARSER_VERSION)
    doc = spec.run(b"# T\nx\n\ny\n", ParserConfig(), "text/plain")
    assert [u.kind for u in doc.units] == ["paragraph", "paragraph"]
    with pytest.raises(ParseError) as err:
        spec.run(b"x" * 10, ParserConfig(text=TextParserConfig(max_bytes=5)), "text/plain")
    assert err.value.reason == "too-large"


# --------------------------------------------------------------------------
# Western European legacy encodings (issue 13, item 12)

SHORT_WESTERN = ["Café crème", "Müller", "Größe", "naïve façade", "¿Qué?", "Ærøskøbing", "l’été", "© 2024 Ünal",
                 "Straße", "São Paulo", "fiancé", "Zürich – Genève"]


@pytest.mark.parametrize("text", SHORT_WESTERN)
def test_short_latin1_and_cp1252_texts_decode(text: str) -> None:
    """Guards against: Latin-1 / cp1252 text failing as undecodable, or read as cp932/GB18030
    mojibake (Müller decodes as GB18030, l’été as cp932)."""
    for encoding in ("latin-1", "cp1252"):
        try:
            data = text.encode(encoding)
        except UnicodeEncodeError:
            continue  # ’ and – exist in cp1252 only
        assert decode_text(data) == (text, "cp1252")


@pytest.mark.parametrize(
    ("relative", "encoding"),
    [("gutenberg/1342-0_pride-and-prejudice.txt", "cp1252"), ("gutenberg/1342-0_pride-and-prejudice.txt", "latin-1")],
)
def test_a_real_novel_in_a_western_legacy_encoding_decodes_exactly(relative: str, encoding: str) -> None:
    """Guards against: a whole Latin-1 or cp1252 file failing (it has no BOM and is not UTF-8)."""
    original, _ = decode_text(corpus_file(relative))
    data = original.encode(encoding, errors="ignore")  # latin-1 lacks the curly quotes
    text, detected = decode_text(data)
    assert (detected, text) == ("cp1252", data.decode(encoding))
    doc = parse_text(data, CONFIG)
    assert doc.encoding == "cp1252" and any("truth universally acknowledged" in u.text for u in doc.units)


def test_spanish_book_text_in_latin1_decodes_exactly() -> None:
    """Guards against: accented Spanish (ñ, á, ¿) in Latin-1 failing or reading as CJK."""
    from fabric_resources.parsing.epub.parser import parse_epub
    from fabric_resources.config import EpubParserConfig

    path = SHARED / "corpus" / "epub" / "todo-es-mio_test.epub"
    if not path.exists():
        pytest.skip("../shared/corpus not present")
    units = [u.text for u in parse_epub(path.read_bytes(), EpubParserConfig()).units]
    text = "\n\n".join(t for t in units if all(ord(c) < 256 for c in t))
    assert decode_text(text.encode("latin-1")) == (text, "cp1252")
    for unit in units[:200]:  # each paragraph alone, as a short file
        if all(ord(c) < 256 for c in unit) and not unit.isascii():
            assert decode_text(unit.encode("latin-1")) == (unit, "cp1252"), unit


def test_cjk_legacy_units_still_decode_as_before() -> None:
    """Guards against: the Western reading taking over Shift_JIS or GB18030 text that decoded right
    (every unit of the Aozora files and of 三国演义, alone, as a short file)."""
    checked = 0
    for relative, encoding in [(f"aozora/{name}", "cp932") for name in (
            "akutagawa_rashomon.sjis.txt", "akutagawa_kumono_ito.sjis.txt", "akutagawa_momotaro.sjis.txt",
            "akutagawa_jigokuhen_shinji.sjis.txt")] + [("chinese/sanguoyanyi_ch01-10.utf8.txt", "gb18030")]:
        for unit in parse_text(corpus_file(relative), CONFIG).units:
            for sentence in unit.text.split("。")[:40]:
                data = (sentence + "。").encode(encoding)
                assert decode_text(data)[1] == encoding, sentence
                checked += 1
    assert checked > 500


@pytest.mark.parametrize("data", [b"ok " + b"\xff\xfe\xfd" * 4, bytes(range(0xA0, 0x100)) * 3, "Привет мир".encode("cp1251")])
def test_symbol_runs_are_not_western_text(data: bytes) -> None:
    """Guards against: windows-1252, which maps almost every byte, turning binary or Cyrillic
    (cp1251) bytes into mojibake instead of undecodable."""
    with pytest.raises(ParseError) as err:
        decode_text(data)
    assert err.value.reason == "undecodable" and "cp1252" in err.value.detail


def test_utf8_with_one_flaw_is_undecodable_not_legacy_mojibake() -> None:
    """Property: bytes that are UTF-8 but for a flaw (the last character cut in half, one stray
    byte) fail ``undecodable`` naming the damage; they are never read as windows-1252 or cp932,
    whose reading would be mojibake. Legacy text still decodes as before.

    Guards against: the legacy candidates taking damaged UTF-8 (French notes cut mid-character
    read as cp1252 "cafÃ©", German ones as cp932 "Grﾃｼﾃ歹"): the file active, its accented words
    in no search, its citations verifying the mojibake (hostile trial 12a)."""
    french = "Le café de la forêt était fermé; nous avons mangé une crêpe à la crème.\n" * 5
    german = "Grüße aus Köln, schöne Straße, Übermorgen in München.\n" * 5
    for text in (french + "é", german + "ü"):
        data = text.encode()
        for damaged in (data[:-1], data[:40] + b"\xff" + data[40:]):
            with pytest.raises(ParseError) as err:
                decode_text(damaged)
            assert err.value.reason == "undecodable" and "damaged UTF-8" in err.value.detail, damaged[:60]
        for legacy in ("cp1252", "latin-1"):
            assert decode_text(text.encode(legacy)) == (text, "cp1252")
    japanese = "会議のメモです。明日は灯台守の研修を行います。\n" * 5
    assert decode_text(japanese.encode("cp932")) == (japanese, "cp932")
    chinese = "项目笔记：下周三讨论熊猫保护区的预算分配问题。\n" * 5
    assert decode_text(chinese.encode("gb18030")) == (chinese, "gb18030")
    # The check's memory is bounded by blocks: re.sub over a whole 4 MB file held ~80 MB of pieces.
    import tracemalloc

    from fabric_resources.parsing.text.decoding import looks_like_damaged_utf8

    for data in ((japanese * 14000).encode("cp932"), (french * 12000 + "é").encode()[:-1]):
        tracemalloc.start()
        looks_like_damaged_utf8(data)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < len(data) + 8 * 2**20, (len(data), peak)


def test_many_short_paragraphs_fail_cap_units_and_blank_lines_cost_nothing() -> None:
    """A file of one-word paragraphs was ~100x its size in memory as units (a 9 MB one took 4.5 GB
    to ingest); past ``max_units`` it fails ``cap-units``, naming the cap. Blank lines are read one
    at a time, so a file of nothing but line endings makes no units and holds no line list."""
    config = TextParserConfig(max_units=50)
    with pytest.raises(ParseError) as caught:
        parse_text(b"word\n\n" * 51, config)
    assert caught.value.reason == "cap-units" and "50" in str(caught.value)
    assert len(parse_text(b"word\n\n" * 50, config).units) == 50
    assert parse_text(b"\n" * 100_000, config).units == []
    # one long paragraph cut by max_unit_chars counts its pieces
    with pytest.raises(ParseError, match="cap-units"):
        parse_text(b"x" * (256 * 51), TextParserConfig(max_units=50, max_unit_chars=256))


def test_a_paragraph_of_very_many_lines_ends_at_a_line_end_past_64_unit_caps() -> None:
    """A "paragraph" of millions of short lines (55 MB, one word a line) held 1.6 GB of lines until
    its end; now a run ends at the first line end past 64 ``max_unit_chars``, every unit still
    within the cap and its locator exact."""
    line = "lighthouse keeper.\n"
    data = line * 2000  # 38,000 characters, no blank line
    doc = parse_text(data.encode(), TextParserConfig(max_unit_chars=256))
    assert all(len(u.text) <= 256 for u in doc.units)
    assert all(data[u.locator["char_start"]:u.locator["char_end"]] == u.text for u in doc.units)
    # the first run ends at the line end past 64 * 256 characters: a unit ends exactly there
    first_cut = (64 * 256 // len(line) + 1) * len(line) - 1
    assert first_cut in {u.locator["char_end"] for u in doc.units}
    assert "".join(u.text + "\n" for u in doc.units) == data  # nothing lost or repeated


@pytest.mark.parametrize("encoding", ["euc-kr", "cp949"])
def test_legacy_korean_decodes_as_korean_not_as_chinese_mojibake(encoding) -> None:
    """Guards against (hostile trial 13a): a Korean file in EUC-KR (or Windows' cp949) decoded as
    GB18030, whose Hanzi mean nothing ("서울의 봄은" as "辑匡狼 航篮"), active as Chinese, no Korean
    word in any search. Chinese and Japanese that decode as cp949 stay what they were
    (``test_cjk_legacy_units_still_decode_as_before``)."""
    for text in ("서울의 봄은 짧다. 벚꽃이 피면 사람들은 여의도 한강공원으로 모인다.\n",
                 "김철수 부장님은 출장 중이시다.\n", "오늘 회의에서는 예산안을 검토하였다. 다음 주까지 보고서를 제출해야 한다.\n" * 5):
        assert decode_text(text.encode(encoding)) == (text, "cp949")
    chinese = "刘备、关羽、张飞在桃园中结为兄弟。君臣皆哭。"
    assert decode_text(chinese.encode("gb18030")) == (chinese, "gb18030")


def test_koi8r_cyrillic_is_read_as_written_not_as_half_width_katakana() -> None:
    """Guards against (hostile trial 13a): Russian in KOI8-R read as cp932 half-width katakana
    (``Ёлка стояла`` as ``ｳﾌﾋﾁ ﾓﾔﾏﾑﾌﾁ``) and active, no Russian word in any search; it reads as
    KOI8-R (charset-normalizer names it, :func:`non_latin_reading`; under 64 bytes it has no verdict
    and a line of KOI8-R still reads as katakana). Shift_JIS that writes half-width katakana still decodes."""
    russian = "Ёлка стояла в углу. Всё было тихо, и мы пили чёрный чай. Москва - столица России.\n"
    assert decode_text(russian.encode("koi8-r")) == (russian, "koi8_r")
    japanese = "ﾃﾞｰﾀﾍﾞｰｽの設定を変更しました。ｼｽﾃﾑ管理者に連絡してください。ﾛｸﾞｲﾝ画面\n"
    assert decode_text(japanese.encode("cp932")) == (japanese, "cp932")


@pytest.mark.parametrize("text", [
    "İstanbul'da sonbahar çok güzeldir. Kırmızı yapraklar ılık rüzgârla uçuşur. Şişli, Ağrı.\n",
    "Kırmızı elma ağaçta.\n",
])
def test_turkish_in_windows_1254_decodes_with_its_own_letters(text) -> None:
    """Guards against (hostile trial 13a): Turkish in windows-1254 (or ISO-8859-9) read as windows-1252,
    which it matches but for six letters: ``Ýstanbul``, ``Kýrmýzý``, ``aðaçta`` active, identified as
    Turkmen, ``İstanbul`` and ``kırmızı`` in no search. Icelandic, Faroese and Spanish text holding
    those windows-1252 letters still reads as windows-1252."""
    assert decode_text(text.encode("cp1254")) == (text, "cp1254")
    for western in ("Ég þakka þér fyrir. Við fórum til Reykjavíkur í gær.\n", "Føroyar eru eitt oyggjaland í Norðuratlantshavi.\n",
                    "¿Dónde está Ýñigo? El niño comió.\n"):
        assert decode_text(western.encode("cp1252")) == (western, "cp1252")


# Latin code pages of Central and Eastern Europe (hostile trial 14a)

CENTRAL_EUROPEAN_TEXTS = {
    "pl": "Pchnąć w tę łódź jeża lub ośm skrzyń fig. W Łodzi źdźbło trawy rośnie między płytami chodnika.\n",
    "cs": "Příliš žluťoučký kůň úpěl ďábelské ódy. Praha je hlavní město České republiky a leží na Vltavě.\n",
    "sk": "Kŕdeľ šťastných ďatľov učí pri ústí Váhu mĺkveho koňa obhrýzať kôru a žrať čerstvé mäso.\n",
    "hu": "Árvíztűrő tükörfúrógép. Budapest Magyarország fővárosa, a Duna két partján fekszik.\n",
    "sl": "Včeraj smo šli v gledališče, kjer smo si ogledali novo predstavo, ki nam je bila zelo všeč.\n",
    "hr": "Jučer smo išli u kazalište gdje smo gledali novu predstavu koja nam se jako svidjela.\n",
    "ro": "Bucureşti este capitala României şi cel mai mare oraş al ţării. Înţelepciunea îşi are rădăcinile"
          " în răbdare.\n",
}


@pytest.mark.parametrize("encoding", ["cp1250", "iso8859_2"])
@pytest.mark.parametrize("language", sorted(CENTRAL_EUROPEAN_TEXTS))
def test_central_european_text_in_windows_1250_or_iso_8859_2_decodes_exactly(language, encoding) -> None:
    """Guards against (hostile trial 14a): Polish, Czech, Slovak, Hungarian, Slovenian, Croatian or
    Romanian in windows-1250 or ISO-8859-2 read as windows-1252 (``¼d¼b³o``, ``pøíli¹ ¾lu»ouèký``:
    active, those words in no search), or failing undecodable. Where the two pages give the text the
    same letters (Hungarian, Romanian) either label reads it exactly; Polish and Czech name their page."""
    text = CENTRAL_EUROPEAN_TEXTS[language]
    decoded, detected = decode_text(text.encode(encoding))
    assert decoded == text
    if language in ("pl", "cs", "sk", "sl"):
        assert detected == encoding
    else:
        assert detected in ("cp1250", encoding)


@pytest.mark.parametrize("text", [
    "Vilnius yra Lietuvos sostinė ir didžiausias šalies miestas, įsikūręs prie Neries upės.\n",
    "Rīga ir Latvijas galvaspilsēta un lielākā pilsēta, kas atrodas pie Daugavas upes.\n",
])
def test_baltic_text_in_windows_1257_decodes_exactly(text) -> None:
    """Guards against (hostile trial 14a): Lithuanian and Latvian in windows-1257 / ISO-8859-13 read as
    windows-1252 (``sostinë``, ``didþiausias``, ``Rîga``)."""
    for encoding in ("cp1257", "iso8859_13"):
        assert decode_text(text.encode(encoding)) == (text, "cp1257")


WESTERN_GUARDS = [
    "Le cœur a ses raisons que la raison ne connaît point. «Bonjour», dit-il à l'élève.\n",
    "Où est la bibliothèque? Là-bas, à côté du café, après l'église. Noël à Besançon.\n",
    "Der Bürgermeister begrüßte die Gäste im großen Saal. »Nein«, sagte er, »das weiß ich nicht.«\n",
    "Größe, Maß, Fuß, Öl, Ärger, Übermut: süße Äpfel.\n",
    "¿Dónde está la biblioteca? ¡Está allí! El niño comió una piña.\n",
    "Mezcle ¼ taza de azúcar, ½ taza de harina y ¾ de cucharadita de sal. Nº 5, 1ª edición.\n",
    "Add ¼ cup of sugar and ½ cup of flour, then bake at 180°C for ¾ hour.\n",
    "¼ cup\n",
    "O governo anunciou que as pensões vão aumentar, informações da imprensa. Não, irmãs.\n",
    "Perché la città è così bella? Perché è antica: caffè, però, più.\n",
    "Hé, ik heb één idee: coördinatie, reünie, financiële, geïnteresseerd.\n",
    "Räksmörgås och blåbärssylt på Åland, sa hon.\n",
    "Ærøskøbing ligger på Ærø, og søen er blå. Rødgrød med fløde.\n",
    "Blåbærsyltetøy og brunost på Bodø, sa bestemoren.\n",
    "Ég þakka þér fyrir, Þórður og Guðrún.\n",
    "Hyvää päivää, mitä kuuluu? Äiti ja isä ovat kotona.\n",
    "Ahir vam anar al teatre. Col·legi, què, però.\n",
    "Tallinn on Eesti pealinn. Šokolaad ja žürii. Eile õhtul käisime teatris.\n",
    "Microsoft®Word und Apple©Pages, © 2024 Müller & Søn, µm, ±3.\n",
    "Nous avons visité Cracovie et Lodz l'été dernier; c'était très agréable. Où êtes-vous allés?\n",
]


@pytest.mark.parametrize("text", WESTERN_GUARDS)
def test_western_text_keeps_its_windows_1252_reading(text) -> None:
    """Guards against (hostile trial 14a): the Central European or Baltic reading taking over Western
    European text, whose windows-1250 reading (``trčs``, ``pĺ``, ``ŤBonjourť`` in ISO-8859-2) is
    still French or Swedish to the language identifier, and Estonian, which windows-1252 holds whole.
    Fractions (``¼ cup``), ``ß``, guillemets and ``®`` between two letters stay as written."""
    for encoding in ("cp1252", "latin-1", "iso8859_15"):
        try:
            data = text.encode(encoding)
        except UnicodeEncodeError:
            continue
        if data.decode("cp1252", errors="replace") != text:
            continue  # ISO-8859-15 puts œ, Š, Ž where windows-1252 has other characters
        assert decode_text(data) == (text, "cp1252")


def test_mixed_polish_and_french_and_lone_high_bytes() -> None:
    """Hostile trial 14a's attacks: a Polish text quoting French and a French text naming Polish towns,
    both in windows-1250, read exactly (the identifier calls the second French; the windows-1252
    reading's ``£ódŸ`` puts a capital after a small letter, which windows-1250 repairs); a file of
    digits and one high byte, and a recipe's fractions, keep reading as windows-1252."""
    polish = "Wczoraj w Paryżu zjedliśmy croissanty i wypiliśmy café au lait. Pani Dubois powiedziała: «Ça va bien».\n"
    assert decode_text(polish.encode("cp1250")) == (polish, "cp1250")
    french = "Hier, je suis allé voir Łódź; c'était génial, et Kraków aussi. Le musée était fermé, hélas.\n"
    assert decode_text(french.encode("cp1250")) == (french, "cp1250")
    for data in (b"12345\xb3678", b"2024\xb9", b"\xb3", b"Tel. 123\xbc45\r\n", "1¼ c. sugar".encode("cp1252")):
        assert decode_text(data) == (data.decode("cp1252"), "cp1252")


@pytest.mark.parametrize(("text", "encoding"), [
    ("Москва — столица России.\n", "cp1251"),
    ("София е столицата на България.\n", "cp1251"),
    ("Київ — столиця України.\n", "cp1251"),
    ("Вчера мы ходили в театр.\n", "koi8_r"),
    ("Ёлка стояла в углу.\n", "koi8_r"),
    ("Χθες πήγαμε στο θέατρο.\n", "cp1253"),
    ("مرحبا بالعالم\n", "cp1256"),
])
def test_a_short_line_in_another_script_reads_as_written(text, encoding) -> None:
    """Guards against (hostile trials 13a, 14a): a line under 64 bytes, where charset-normalizer gives
    no verdict, of Russian in windows-1251, Greek in windows-1253 or Arabic in windows-1256 failing
    undecodable, and of KOI8-R read as cp932 half-width katakana. It reads in the page whose reading is
    one script and identified as a language of it (``short_script_reading``)."""
    data = text.encode(encoding)
    assert len(data) < 64
    assert decode_text(data) == (text, encoding)


def test_short_bytes_two_scripts_read_alike_are_never_read_in_the_wrong_one() -> None:
    """A short Hebrew line in windows-1255 is also a plausible Cyrillic and Greek line (unpointed Hebrew
    letters sit where windows-1251 has small letters): it reads as Hebrew or stays undecodable (today,
    as before), never as Russian. Random bytes that repeat a few letters stay undecodable."""
    hebrew = "שלום, מה שלומך?\n"
    try:
        assert decode_text(hebrew.encode("cp1255")) == (hebrew, "cp1255")
    except ParseError:
        pass
    with pytest.raises(ParseError):
        decode_text(b"ok " + b"\xff\xfe\xfd" * 4)


def test_a_short_line_of_another_script_is_not_read_as_a_latin_page() -> None:
    """Guards against (hostile trial 14a): Ukrainian in windows-1251 read as windows-1250 (``Ęčżâ —
    ńňîëč`` for ``Київ — столи``) by the letters signal (its windows-1252 reading ``Êè¿â`` puts ``¿``
    between two letters): that signal needs a third of the letters to be ASCII, as Latin text's are."""
    for text in ("Київ — столи", "Київ — с", " України"):
        try:
            assert decode_text(text.encode("cp1251"))[1] not in ("cp1250", "iso8859_2", "cp1257", "iso8859_13")
        except ParseError:
            pass
