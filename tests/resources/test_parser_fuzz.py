"""Mutation fuzzing of the parser slot: every input yields a ParsedDocument or a named ParseError.

Seeds are real documents: the EPUBs of ../shared/corpus/epub and the texts of
../shared/corpus/text (skipped with a reason when ../shared is absent), and the
small in-repo set built in memory by tests/resources/parser_seeds.py (always). Each case applies one to
three seeded mutations — byte flips, truncation, splices, a member recompressed
with another zip method and then corrupted (the LZMA case of issue 13), XML
and text damage such as a billion-laughs DOCTYPE, invalid UTF-8, odd attribute
values, deep nesting, a megabyte on one line, another encoding — and parses the
result through the registry, as the parse asset does.

A case passes when the parser returns a ParsedDocument whose units respect the
unit cap and turn into rows, or raises ParseError with one of the named reasons
other than ``parser-error``: that one means an exception no parser step
anticipated escaped to the entry point's net, i.e. a bug worth a reason of its
own. Every case must finish within CASE_SECONDS. A failure names the seed, the
case number and the mutations, so it can be replayed with ``replay(...)``.
"""

from __future__ import annotations

import io
import random
import signal
import time
import zipfile
from dataclasses import dataclass
from typing import get_args

import pytest
from conftest import CORPUS, need_shared

from fabric_resources.config import ParserConfig
from fabric_resources.parsing.document import ParsedDocument, ParseError, ParseErrorReason
from fabric_resources.parsing.records import unit_rows
from fabric_resources.parsing.registry import detect_media_type, parser_for

# _rezip writes duplicate member names on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:Duplicate name:UserWarning")

SEED = 20261201
#: Wall-clock bound per case (seconds), on a loaded 2-core machine; typical cases take milliseconds.
CASE_SECONDS = 10.0
FIXTURE_CASES = 1500
SHARED_CASES = 1800
CONFIG = ParserConfig()
NAMED_REASONS = frozenset(get_args(ParseErrorReason)) - {"parser-error"}
#: Shared EPUBs keep at most this many spine documents (real ones, whole) so a case stays cheap.
SPINE_DOCUMENTS_KEPT = 3


class CaseTimeout(BaseException):
    """Raised by the alarm in a case that ran too long (a BaseException: no parser net catches it)."""


# --------------------------------------------------------------------------- mutations

def _flip_bits(rng: random.Random, data: bytes) -> bytes:
    raw = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if raw:
            raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
    return bytes(raw)


def _overwrite(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data) + 1)
    return data[:at] + rng.randbytes(rng.randint(1, 64)) + data[at + rng.randint(1, 64):]


def _truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def _splice(rng: random.Random, data: bytes) -> bytes:
    """Duplicate, drop or move a slice."""
    a, b = sorted(rng.randrange(len(data) + 1) for _ in range(2))
    at = rng.randrange(len(data) + 1)
    choice = rng.randrange(3)
    if choice == 0:
        return data[:at] + data[a:b] + data[at:]
    if choice == 1:
        return data[:a] + data[b:]
    rest = data[:a] + data[b:]
    at = min(at, len(rest))
    return rest[:at] + data[a:b] + rest[at:]


def _insert_bytes(rng: random.Random, data: bytes) -> bytes:
    pool = [b"\x00", b"\xff", b"\xfe\xff", b"\x80", b"\xc3", b"\xe9", b"\xef\xbb\xbf", b"\r", b"\r\n", b"\x1b",
            b"\xf0\x9f\x98", b"&", b"<", b"]]>", b"\xed\xa0\x80"]
    raw = bytearray(data)
    for _ in range(rng.randint(1, 12)):
        at = rng.randrange(len(raw) + 1)
        raw[at:at] = rng.choice(pool)
    return bytes(raw)


BYTE_MUTATIONS = (_flip_bits, _overwrite, _truncate, _splice, _insert_bytes)

_LAUGHS = ('<!DOCTYPE html [<!ENTITY a "ha">' + "".join(
    f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(8)) + "]>")
_ODD_VALUES = ["²", "-1", "0", "99999999999999999999", "", "1e9", "٣", "\u00a0", "&#0;", "NaN", "3px"]


def _xml_damage(rng: random.Random, data: bytes) -> bytes:
    """Damage one XML/XHTML document the way broken books do."""
    text = data.decode("utf-8", errors="surrogateescape")
    choice = rng.randrange(9)
    if choice == 0:  # billion-laughs internal subset, referenced from the body
        head, sep, rest = text.partition("?>")
        text = (head + sep + _LAUGHS + rest) if sep else (_LAUGHS + text)
        text = text.replace("<p>", "<p>&i; ", 1)
    elif choice == 1:  # invalid UTF-8 inside the text
        return data.replace(b"e", b"\xe9", rng.randint(1, 5)).replace(b"a", b"\xc3\x28", 1)
    elif choice == 2:  # odd attribute values
        for attr in ("colspan", "rowspan", "href", "id", "epub:type", "xml:lang", "src", "title"):
            text = text.replace("<td", f'<td {attr}="{rng.choice(_ODD_VALUES)}"', 1)
            text = text.replace("<p", f'<p {attr}="{rng.choice(_ODD_VALUES)}"', 1)
    elif choice == 3:  # deep nesting
        depth = rng.choice([50, 255, 400])
        text = text.replace("<p>", "<div>" * depth + "<p>", 1).replace("</p>", "</p>" + "</div>" * depth, 1)
    elif choice == 4:  # unbalanced markup
        text = text.replace("</p>", "", rng.randint(1, 3)).replace("<body", "<body><table><tr><td>", 1)
    elif choice == 5:  # a megabyte-scale paragraph on one line
        text = text.replace("</p>", "x" * rng.choice([20_000, 300_000]) + "</p>", 1)
    elif choice == 6:  # undefined and HTML named entities
        text = text.replace("<p>", "<p>&nbsp;&eacute;&bogus;&#xD800;&#99999999;", 1)
    elif choice == 7:  # another encoding declared than used
        text = text.replace('encoding="utf-8"', rng.choice(['encoding="utf-16"', 'encoding="latin-1"',
                                                            'encoding="shift_jis"', 'encoding="bogus"']), 1)
    else:  # notes and links pointing nowhere or at themselves
        text = text.replace("<p>", '<p><a epub:type="noteref" href="#nowhere">*</a><a href="#">x</a>', 1)
    return text.encode("utf-8", errors="surrogateescape")


_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)


def _rezip(rng: random.Random, data: bytes) -> bytes:
    """Rewrite the zip with one member changed: recompressed (and maybe corrupted), damaged as XML,
    swapped with another, duplicated, or renamed."""
    try:
        zin = zipfile.ZipFile(io.BytesIO(data))
        members = [(info, zin.read(info)) for info in zin.infolist()]
    except Exception:
        return _flip_bits(rng, data)
    if not members:
        return data
    target = rng.randrange(len(members))
    choice = rng.randrange(5)
    buf = io.BytesIO()
    corrupt_name = None
    with zipfile.ZipFile(buf, "w") as zout:
        for i, (info, content) in enumerate(members):
            method = info.compress_type
            name = info.filename
            if i == target:
                if choice == 0:
                    method, corrupt_name = rng.choice(_METHODS), name
                elif choice == 1:
                    content = _xml_damage(rng, content)
                elif choice == 2:
                    content = members[rng.randrange(len(members))][1]
                elif choice == 3:
                    zout.writestr(name, rng.randbytes(rng.randint(0, 200)), compress_type=method)
                else:
                    name = rng.choice([name.upper(), name + "/", "../" + name, name.replace("/", "\\")])
            zout.writestr(zipfile.ZipInfo(name, info.date_time), content, compress_type=method)
    out = buf.getvalue()
    if corrupt_name is None or rng.random() < 0.2:
        return out
    # Corrupt the member's compressed bytes (the hostile trial's LZMA case, for every method).
    info = zipfile.ZipFile(io.BytesIO(out)).getinfo(corrupt_name)
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    raw = bytearray(out)
    for i in range(start + rng.randrange(max(info.compress_size, 1)), start + info.compress_size):
        if rng.random() < 0.3:
            raw[i] ^= rng.randrange(1, 256)
    return bytes(raw)


def _text_damage(rng: random.Random, data: bytes) -> bytes:
    """Re-encode, add a BOM, make one very long line, or mix line endings."""
    choice = rng.randrange(5)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    if choice == 0:
        return text.encode(rng.choice(["utf-16", "utf-16-be", "utf-32", "cp1252", "cp932", "gb18030", "latin-1"]),
                           errors="ignore")
    if choice == 1:
        return rng.choice([b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff"]) + data
    if choice == 2:
        return data.replace(b"\n", b" ").replace(b"\r", b"") * rng.randint(1, 8)
    if choice == 3:
        return data.replace(b"\n", rng.choice([b"\r", b"\r\r\n", b"\n\r", b"\x0b", b"\x0c"]))
    return data[: rng.randrange(len(data) + 1)] + "\u2028\u00a0\u3000\ufeff".encode("utf-8") * rng.randint(1, 50)


EPUB_MUTATIONS = (*BYTE_MUTATIONS, _rezip, _rezip, _rezip)
TEXT_MUTATIONS = (*BYTE_MUTATIONS, _text_damage, _text_damage)


# --------------------------------------------------------------------------- seeds and cases

@dataclass(frozen=True)
class Seed:
    name: str
    data: bytes


def reduced_epub(data: bytes, keep: int = SPINE_DOCUMENTS_KEPT) -> bytes:
    """The EPUB with every member but its first ``keep`` XHTML documents (in zip order), so a
    case parses a real book's package, navigation and prose in milliseconds. The OPF still lists
    the dropped documents: the parser sees missing members, which it must handle anyway."""
    zin = zipfile.ZipFile(io.BytesIO(data))
    buf = io.BytesIO()
    kept = 0
    with zipfile.ZipFile(buf, "w") as zout:
        for info in zin.infolist():
            if info.filename.lower().endswith((".xhtml", ".html", ".htm")) and "nav" not in info.filename.lower():
                kept += 1
                if kept > keep:
                    continue
            elif not info.filename.lower().endswith((".opf", ".ncx", ".xml", "mimetype")):
                continue  # images, fonts, audio: nothing the parser reads
            zout.writestr(info, zin.read(info))
    return buf.getvalue()


def fixture_seeds() -> list[Seed]:
    from parser_seeds import FIXTURES

    seeds = [Seed(name, data) for name, data in sorted(FIXTURES.items()) if parser_for(detect_media_type(name))]
    assert len(seeds) >= 6, "in-repo seeds missing"
    return seeds


def shared_seeds() -> list[Seed]:
    need_shared(CORPUS)
    seeds = [Seed(p.name, reduced_epub(p.read_bytes())) for p in sorted((CORPUS / "epub").glob("*.epub"))]
    seeds += [Seed(p.name, p.read_bytes()) for p in sorted((CORPUS / "epub-edge").glob("*.epub"))]
    for p in sorted((CORPUS / "text").rglob("*.txt")):
        data = p.read_bytes()
        seeds.append(Seed(p.name, data[:16_384]))  # a real opening; the text parser is linear in size
    return seeds


def mutate(rng: random.Random, seed: Seed) -> tuple[bytes, list[str]]:
    pool = EPUB_MUTATIONS if seed.name.endswith(".epub") else TEXT_MUTATIONS
    data, names = seed.data, []
    for _ in range(rng.choice([1, 1, 2, 3])):
        step = rng.choice(pool)
        data = step(rng, data) if data else data
        names.append(step.__name__)
    return data, names


def check_case(seed: Seed, data: bytes) -> str:
    """Parse one input through the registry; return ``""`` if it behaved, else what went wrong."""
    media_type = detect_media_type(seed.name)
    spec = parser_for(media_type)
    try:
        doc = spec.run(data, CONFIG, media_type)
    except ParseError as exc:
        return "" if exc.reason in NAMED_REASONS else f"ParseError {exc.reason}: {exc.detail[:300]}"
    except CaseTimeout:
        raise
    except BaseException as exc:  # noqa: BLE001 - the point of the test
        return f"escaped {type(exc).__name__}: {exc}"
    if not isinstance(doc, ParsedDocument):
        return f"returned {type(doc).__name__}"
    cap = spec.section(CONFIG).max_unit_chars
    for unit in doc.units:
        if not unit.text.strip():
            return "empty unit"
        if len(unit.text) > cap:
            return f"unit of {len(unit.text)} characters > max_unit_chars {cap}"
    for rel in doc.relationships:
        if not (0 <= rel.source_index < len(doc.units) and 0 <= rel.target_index < len(doc.units)):
            return f"relationship {rel} out of range"
    unit_rows("f" * 32, doc)  # the rows the asset stores (JSON attributes, Arrow types)
    return ""


def run_cases(seeds: list[Seed], cases: int, seed: int) -> None:
    rng = random.Random(seed)
    failures, slowest = [], (0.0, "")

    def alarm(signum, frame):
        raise CaseTimeout()

    previous = signal.signal(signal.SIGALRM, alarm)
    try:
        for case in range(cases):
            chosen = seeds[case % len(seeds)]
            data, names = mutate(rng, chosen)
            started = time.perf_counter()
            signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
            try:
                problem = check_case(chosen, data)
            except CaseTimeout:
                problem = f"no answer within {CASE_SECONDS} s"
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            elapsed = time.perf_counter() - started
            slowest = max(slowest, (elapsed, f"{chosen.name} case {case} {names}"))
            if problem:
                failures.append(f"{chosen.name} case {case} {names}: {problem}")
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert not failures, f"{len(failures)} of {cases} cases misbehaved (seed {seed}):\n" + "\n".join(failures[:15])
    print(f"{cases} cases, slowest {slowest[0]:.2f} s ({slowest[1]})")


def replay(seeds: list[Seed], seed: int, case: int) -> tuple[Seed, bytes]:
    """The input of case ``case`` of a run with ``seed`` (for debugging a reported failure)."""
    rng = random.Random(seed)
    for i in range(case + 1):
        chosen = seeds[i % len(seeds)]
        data, _ = mutate(rng, chosen)
    return chosen, data


def test_fuzz_in_repo_fixtures():
    """guards against: any exception type escaping a parser (the LZMAError of issue 13: 225 of
    3,000 mutated inputs), an unanticipated one labelled with a made-up reason, a unit over the
    cap, rows that cannot be stored, or a hang; on seeds that ship with the repository."""
    run_cases(fixture_seeds(), FIXTURE_CASES, SEED)


def test_fuzz_shared_corpus():
    """guards against: the same on real books and texts (../shared/corpus/epub and text)."""
    run_cases(shared_seeds(), SHARED_CASES, SEED + 1)


def test_lzma_member_corruption_is_in_the_mix():
    """guards against: a fuzz run that never builds the case it exists for (a corrupt LZMA member)."""
    rng = random.Random(SEED)
    seed = next(s for s in fixture_seeds() if s.name.endswith(".epub"))
    methods = set()
    for _ in range(200):
        data = _rezip(rng, seed.data)
        try:
            methods |= {i.compress_type for i in zipfile.ZipFile(io.BytesIO(data)).infolist()}
        except zipfile.BadZipFile:
            continue
    assert zipfile.ZIP_LZMA in methods and zipfile.ZIP_BZIP2 in methods


@pytest.mark.parametrize("name", ["keeper-epub3.epub", "gardien-cp1252.txt"])
def test_unmutated_fixtures_parse(name):
    """guards against: fixtures that no longer parse (the fuzz would then only test failure paths)."""
    seed = next(s for s in fixture_seeds() if s.name == name)
    spec = parser_for(detect_media_type(name))
    assert spec.run(seed.data, CONFIG, detect_media_type(name)).units
