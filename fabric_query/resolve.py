"""``resolve(citation)``: re-verify a citation against the source bytes as they are now.

``verified`` means: the cited text was re-derived from the source's current bytes by the parser
the parse recorded, and matches at the cited offsets; every identifier in the citation matches
(release, source, source hash, parse, chunk, units); and the catalog still says the same after
the unlocked read of the file. Checks, in order:

``release``
    The cited release exists and names the cited parse and source hash for the cited source (and
    the cited parse for every ``also_cited_by`` source, each visible now).
``source-active``
    The source's active parse in the *current* release is still the cited one.
``source-bytes``
    The file's current bytes (read without following a symlink, regular files only) hash to the
    cited ``source_hash``. No digest of the current bytes is ever printed. A citation of a release
    no longer kept (retention, a purge) gets it too, when the home still records the cited hash
    (:func:`fabric_query.source_bytes.retired_release_bytes`), or says why it cannot be made.
``parse``
    The parse run is ready for those bytes, its recorded parser identity hashes to the cited
    parse ID, and this Fabric's parser of that name has the same identity (``parser-changed``
    otherwise: the text could not be re-derived the way it was).
``chunk``
    The cited chunk is a chunk of that parse in the cited release, its ID is the one its
    definition (``identity.chunk_id``) gives, and the cited spans are exactly the fragments of a
    run of consecutive chunks that includes it (one chunk for a hit, a window's run for a passage).
``text``
    The bytes re-parsed give units whose text at every cited span hashes to the span's
    ``text_hash`` (UTF-16 offsets agree), and the spans rebuild the passage hash.
``location``
    Only for a citation that carries ``locations``: the units re-derived from the bytes sit where the
    citation says (pages, slide, heading path, table cell, element path), computed by the same
    :func:`fabric_query.locations.location_of` as at search time.
``text-now``
    Only when the file's bytes changed since the citation: whether the cited text (each cited
    span, in order) is in the file's current bytes, re-parsed by the parser of the cited parse,
    and where (``lines 3, 5``; pages, slide, element path). Never ``verified`` either way — the
    citation names other bytes — but it tells "the text moved" from "the text is gone"; the new
    text itself is never returned.
``catalog-recheck``
    After the read: the source's catalog row, its visibility and the current release's entry for
    it are what they were before.

A source that is not visible now (unknown to the catalog, deleted, or withheld by the current
``sources.withheld``) gets one answer whatever the citation holds — the same as for a source key
that never existed — so resolve tells nothing about withheld content (:func:`_not_visible`).
Any failure answers ``stale`` with what changed; the new text is never substituted.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any

from pydantic import ValidationError

from fabric_query.errors import CitationError, citation_problems
from fabric_query.release import ProjectionUnavailable, guarded_read
from fabric_query.source_bytes import read_source, retired_release_bytes
from fabric_query.types import Citation, ResolveCheck, ResolveResult
from fabric_query.visibility import VISIBLE_STATES, current_sources_config
from fabric_resources import identity
from fabric_resources.catalog import Release, SourceRow
from fabric_resources.home import FabricHome
from fabric_resources.identity import MAX_SOURCE_KEY_CHARS, text_hash
from fabric_resources.offsets import Utf16Offsets
from fabric_resources.schema import FRAGMENT_SEPARATOR

_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX32 = re.compile(r"[0-9a-f]{32}")
_SURROGATE = re.compile("[\ud800-\udfff]")
#: Offsets are int32 in the tables; anything larger cannot be a real offset.
_MAX_OFFSET = 2**31 - 1
_MAX_RELEASE_ID = 2**63 - 1
#: Bounds on what one citation may carry (a passage has at most ``passages.max_units`` units; the
#: bound leaves room for any configuration without letting a citation make resolve do unbounded work).
MAX_SPANS = 10_000


#: What a client whose citation is refused should do: a citation is a record the search made, and any
#: field changed (an offset, a hash, a re-typed key) makes it another, so it is sent back as it came.
#: (Trial 23h: "not a valid citation (malformed: spans.0)" said what, never what to send.)
RESEND = "send the citation object exactly as a search returned it"


def validated_citation(citation: Any) -> Citation:
    """``citation`` (a :class:`Citation` or its JSON dict) checked for shape and ranges.

    Raises
    ------
    CitationError
        Not a citation: missing or extra fields, wrong types, hashes and IDs that are not lower-case
        hex of the right length, negative or inverted offsets, a release ID out of range, text that
        is not valid Unicode, too many spans.
    """
    if not isinstance(citation, (Citation, dict)):
        raise CitationError(f"expected a Citation or its JSON object, got {type(citation).__name__}")
    try:
        # A Citation is validated again: model_construct() or model_copy(update=...) skip validation.
        citation = Citation.model_validate(citation.model_dump() if isinstance(citation, Citation) else citation)
    except ValidationError as exc:
        raise CitationError(f"not a valid citation ({citation_problems(exc)}): {RESEND}") from None
    except Exception as exc:  # noqa: BLE001 - model_dump of an unvalidated model with foreign values
        raise CitationError(f"not a valid citation ({type(exc).__name__}): {RESEND}") from None
    problems = []
    if not 1 <= citation.release_id <= _MAX_RELEASE_ID:
        problems.append("release_id")
    for name in ("source_hash", "text_hash"):
        if not _HEX64.fullmatch(getattr(citation, name)):
            problems.append(name)
    for name in ("parse_id", "chunk_id"):
        if not _HEX32.fullmatch(getattr(citation, name)):
            problems.append(name)
    for name, value in (("source_key", citation.source_key), *(("also_cited_by", k) for k in citation.also_cited_by)):
        if not value or len(value) > MAX_SOURCE_KEY_CHARS or _SURROGATE.search(value) or "\x00" in value:
            problems.append(name)
    if not 1 <= len(citation.spans) <= MAX_SPANS:
        problems.append("spans")
    for i, s in enumerate(citation.spans[:MAX_SPANS]):
        if (not _HEX32.fullmatch(s.unit_id) or not _HEX64.fullmatch(s.text_hash)
                or not 0 <= s.start_char <= s.end_char <= _MAX_OFFSET
                or not 0 <= s.start_utf16 <= s.end_utf16 <= _MAX_OFFSET):
            problems.append(f"spans.{i}")
    cited_units = {s.unit_id for s in citation.spans}
    if len(citation.locations) > MAX_SPANS:
        problems.append("locations")
    for i, loc in enumerate(citation.locations[:MAX_SPANS]):
        if loc.unit_id not in cited_units or any(not 1 <= p <= _MAX_OFFSET for p in loc.pages):
            problems.append(f"locations.{i}")
    if problems:
        raise CitationError(f"not a valid citation (malformed: {', '.join(dict.fromkeys(problems))}): {RESEND}")
    return citation


#: Why a cited release may be missing, what to do (trial 20g: "release 2 unknown" read like a damaged
#: citation); it names the release alone, as the answer about a source that is not visible must.
RELEASE_GONE = ("is not in the catalog (removed by the retention cleanup or a purge, rolled back by a snapshot "
                "restore, or never published here): search again to cite the current release")


def _check(name: str, ok: bool, detail: str) -> ResolveCheck:
    return ResolveCheck(check=name, ok=ok, detail=detail)


def _same_name_other_form(key: str, cited: str) -> bool:
    """Whether two source keys differ only in their Unicode normalization (``café`` written with
    U+00E9 or as ``e`` + U+0301): the same name to a reader, two keys to Fabric (a folder may hold both).

    >>> _same_name_other_form("fs:a/cafe\u0301.txt", "fs:a/caf\u00e9.txt"), _same_name_other_form("fs:a/x", "fs:a/x")
    (True, False)
    """
    return key != cited and unicodedata.normalize("NFC", key) == unicodedata.normalize("NFC", cited)


def _not_visible(home: FabricHome, citation: Citation) -> ResolveResult:
    """The one answer about a source that is unknown, deleted or withheld: it depends on the
    citation's release and source key only, never on what the home holds for that key."""
    elsewhere = _active_elsewhere(home, citation.parse_id)
    moved = (f"; the cited parse (the same bytes) is active at {', '.join(elsewhere)}: search again to cite it there"
             if elsewhere else "")
    if any(_same_name_other_form(key, citation.source_key) for key in elsewhere):
        # The two names print alike ("not fs:a/café.txt … active at fs:a/café.txt"), so a client
        # that normalised the key (NFC, as many tools do) was told nothing it could act on (trial 23h).
        moved += (" (that key is the cited one in another Unicode normalization form: the citation's source_key "
                  "was changed, e.g. normalised to NFC; send it exactly as the search gave it)")
    return ResolveResult(status="stale", active_at=elsewhere, checks=(
        _release_exists(home, citation),
        _check("source-active", False,
               f"no visible source {citation.source_key} (unknown, deleted or withheld){moved}"),
    ))


#: The most sources :func:`_active_elsewhere` names (a file copied into many folders).
ACTIVE_AT_MOST = 10


def _active_elsewhere(home: FabricHome, parse_id: str) -> tuple[str, ...]:
    """The visible sources (sorted, at most :data:`ACTIVE_AT_MOST`) whose active parse in the current
    release is ``parse_id``: where a file that was moved or renamed since the citation now is.
    It depends on the citation's parse ID and on visible sources only, so it says the same for an
    unknown, a deleted and a withheld cited source."""
    current = home.catalog.current_release()
    if current is None:
        return ()
    # Visible as resolve counts it (not deleted nor withheld now), as a release may still list a
    # source deleted since it was published.
    keys = sorted(k for k, m in current.manifest["sources"].items() if m.get("parse_id") == parse_id)
    return tuple(k for k in keys if _visible_row(home, k) is not None)[:ACTIVE_AT_MOST]


def _release_exists(home: FabricHome, citation: Citation) -> ResolveCheck:
    exists = home.catalog.release(citation.release_id) is not None
    return _check("release", exists, f"release {citation.release_id} " + ("exists" if exists else RELEASE_GONE))


def _visible_row(home: FabricHome, source_key: str) -> SourceRow | None:
    row = home.catalog.source(source_key)
    if row is None or row.state not in VISIBLE_STATES or current_sources_config(home).is_withheld(source_key):
        return None
    return row


def _row_identity(row: SourceRow | None) -> tuple | None:
    """What the verification relied on (not ``last_seen``, which every scan touches)."""
    return None if row is None else (row.root_id, row.rel_path, row.state, row.source_hash, row.parse_id)


def _parse_check(home: FabricHome, citation: Citation):
    """(check, parser spec or None, parse run or None)."""
    # Imported here: the parser plug-ins (lxml among them) are resolve's only, not every search's.
    from fabric_resources.parsing.registry import parser_named

    run = home.catalog.parse_run(citation.parse_id)
    if run is None or run.status != "ready" or run.source_hash != citation.source_hash:
        return _check("parse", False, f"parse {citation.parse_id} is not ready for the cited bytes"), None, None
    recorded = identity.parse_id(run.source_hash, run.parser_name, run.parser_version, run.parser_config_hash)
    if recorded != citation.parse_id:
        return _check("parse", False, f"parse-record-mismatch: the parse run's recorded parser identity gives "
                                      f"parse ID {recorded}"), None, None
    spec = parser_named(run.parser_name)
    if spec is None or run.media_type not in spec.media_types:
        return _check("parse", False, f"parser-changed: no parser {run.parser_name} for {run.media_type} in this "
                                      "Fabric"), None, None
    now = spec.identity(home.config.parsers)
    if identity.parse_id(run.source_hash, now.name, now.version, now.config_hash) != citation.parse_id:
        # What the config hash covers besides the settings (the PDF parser's OCR engine): an OCR
        # engine removed or upgraded since is the usual reason an OCR citation cannot be re-derived.
        env = spec.environment(spec.section(home.config.parsers)) if spec.environment else ""
        return _check("parse", False, f"parser-changed: the parse was made by {run.parser_name} "
                                      f"{run.parser_version} (config {run.parser_config_hash}); this Fabric's is "
                                      f"{now.version} (config {now.config_hash}"
                                      f"{'; ' + env if env else ''}), so the text cannot be re-derived "
                                      "as it was"), None, None
    return _check("parse", True, f"{run.parser_name} {run.parser_version} (config {run.parser_config_hash})"), spec, run


def _fragment_key(f: dict) -> tuple:
    return (f["unit_id"], f["start_char"], f["end_char"], f["start_utf16"], f["end_utf16"])


def _chunk_check(home: FabricHome, cited: Release, citation: Citation) -> ResolveCheck:
    version = cited.manifest["tables"].get("chunks")
    if version is None:
        return _check("chunk", False, f"release {citation.release_id} records no chunks table")
    try:
        t = guarded_read("chunks", lambda: home.tables.read(
            "chunks", parse_ids=[citation.parse_id], version=version,
            columns=["chunk_id", "ordinal", "fragments", "chunker"]))
    except ProjectionUnavailable as exc:
        return _check("chunk", False, exc.describe())
    rows = sorted(t.to_pylist(), key=lambda r: r["ordinal"])
    at = next((i for i, r in enumerate(rows) if r["chunk_id"] == citation.chunk_id), None)
    if at is None:
        return _check("chunk", False, f"chunk {citation.chunk_id} is not a chunk of parse {citation.parse_id} "
                                      f"in release {citation.release_id}")
    row = rows[at]
    if identity.chunk_id(citation.parse_id, row["chunker"], row["ordinal"]) != citation.chunk_id:
        return _check("chunk", False, f"chunk {citation.chunk_id} is not the ID its definition gives "
                                      "(parse, chunker, ordinal)")
    spans = [(s.unit_id, s.start_char, s.end_char, s.start_utf16, s.end_utf16) for s in citation.spans]
    first = next((i for i, r in enumerate(rows) if r["fragments"] and _fragment_key(r["fragments"][0]) == spans[0]),
                 None)
    covered: list[tuple] = []
    i = first
    while i is not None and i < len(rows) and len(covered) < len(spans):
        covered += [_fragment_key(f) for f in rows[i]["fragments"]]
        i += 1
    last = (i - 1) if i is not None else None
    if first is None or covered != spans or not first <= at <= last:
        return _check("chunk", False, "the cited spans are not the fragments of consecutive chunks around "
                                      f"chunk {citation.chunk_id} in release {citation.release_id}")
    n = last - first + 1
    return _check("chunk", True, f"chunk {citation.chunk_id[:12]}… of parse {citation.parse_id[:12]}…"
                                 + (f" in a run of {n} chunks" if n > 1 else ""))


def _location_check(units, citation: Citation) -> ResolveCheck:
    """The cited locations against those of the re-derived units (``units``: UNITS rows)."""
    from fabric_query.locations import location_label, location_of

    wanted = {loc.unit_id for loc in citation.locations}
    now = {u: location_of(u, k, loc, tuple(sp or ()), a) for u, k, loc, sp, a in zip(
        *(units.column(c).to_pylist() for c in ("unit_id", "kind", "locator", "section_path", "attributes")))
        if u in wanted}
    moved = [loc.unit_id for loc in citation.locations if now.get(loc.unit_id) != loc]
    spanned = list(dict.fromkeys(s.unit_id for s in citation.spans))
    if moved or [loc.unit_id for loc in citation.locations] != spanned:
        return _check("location", False, f"the cited location differs from the re-derived unit's "
                                         f"({len(moved) or 'not one per cited unit'}"
                                         f"{f', e.g. unit {moved[0]}' if moved else ''})")
    return _check("location", True, f"{location_label(citation.locations) or 'units'} re-derived from the bytes")


def _text_check(home: FabricHome, spec, run, data: bytes, citation: Citation
                ) -> tuple[ResolveCheck, str | None, ResolveCheck | None]:
    """(the ``text`` check, the re-derived passage when it holds, the ``location`` check or None)."""
    check, passage, units = _rederived_text(spec, run, home, data, citation)
    location = _location_check(units, citation) if citation.locations and units is not None else None
    return check, passage, location


def _rederived_text(spec, run, home: FabricHome, data: bytes, citation: Citation):
    from fabric_resources.parsing.document import ParseError
    from fabric_resources.parsing.records import unit_rows

    try:
        doc = spec.run(data, home.config.parsers, run.media_type)
    except ParseError as exc:
        return _check("text", False, f"re-parse failed: {exc.reason}"), None, None
    units, _ = unit_rows(citation.parse_id, doc)
    text_of = dict(zip(units.column("unit_id").to_pylist(), units.column("text").to_pylist()))
    pieces, bad = [], []
    utf16: dict[str, Utf16Offsets] = {}
    for span in citation.spans:
        unit = text_of.get(span.unit_id)
        if unit is None or span.end_char > len(unit):
            bad.append(span.unit_id)
            continue
        conv = utf16.setdefault(span.unit_id, Utf16Offsets(unit))
        piece = unit[span.start_char:span.end_char]
        if text_hash(piece) != span.text_hash or (span.start_utf16, span.end_utf16) != (
                conv.at(span.start_char), conv.at(span.end_char)):
            bad.append(span.unit_id)
        else:
            pieces.append(piece)
    passage = FRAGMENT_SEPARATOR.join(pieces)
    if bad:
        return _check("text", False, f"re-derived text differs at {len(bad)} span(s), e.g. unit {bad[0]}"), None, units
    if text_hash(passage) != citation.text_hash:
        return _check("text", False, "the spans do not rebuild the cited passage"), None, units
    return _check("text", True, f"re-derived from the source bytes by {run.parser_name}: {len(pieces)} span(s) "
                                "match at the cited offsets"), passage, units


def _cited_pieces(home: FabricHome, cited: Release, citation: Citation) -> list[str] | None:
    """The cited spans' texts from the units the cited release pins, or None when they cannot be
    read or do not rebuild the cited passage's hash (then nothing is looked for)."""
    version = cited.manifest["tables"].get("units")
    if version is None:
        return None
    try:
        t = guarded_read("units", lambda: home.tables.read(
            "units", parse_ids=[citation.parse_id], version=version, columns=["unit_id", "text"]))
    except ProjectionUnavailable:
        return None
    text_of = dict(zip(t.column("unit_id").to_pylist(), t.column("text").to_pylist()))
    pieces = []
    for span in citation.spans:
        unit = text_of.get(span.unit_id)
        if unit is None or span.end_char > len(unit):
            return None
        pieces.append(unit[span.start_char:span.end_char])
    return pieces if text_hash(FRAGMENT_SEPARATOR.join(pieces)) == citation.text_hash else None


def _text_now_check(home: FabricHome, cited: Release, citation: Citation, row: SourceRow) -> ResolveCheck | None:
    """The ``text-now`` check (module docstring), or None when it cannot be made: the file cannot
    be read, the cited parse's parser is not this Fabric's, or the cited text is not in the tables."""
    from fabric_query.locations import location_label, location_of
    from fabric_resources.parsing.document import ParseError
    from fabric_resources.parsing.records import unit_rows

    _, spec, run = _parse_check(home, citation)
    if spec is None:
        return None
    data, _ = read_source(home, row, None)
    pieces = _cited_pieces(home, cited, citation) if data is not None else None
    if pieces is None:
        return None
    try:
        doc = spec.run(data, home.config.parsers, run.media_type)
    except ParseError as exc:
        return _check("text-now", False, f"the file's current bytes do not parse ({exc.reason}): the cited "
                                         "text cannot be looked for in them")
    units, _ = unit_rows(citation.parse_id, doc)
    rows = list(zip(*(units.column(c).to_pylist()
                      for c in ("unit_id", "kind", "locator", "section_path", "attributes", "text"))))
    # Each span in order, a later span in the same unit after the earlier one or in a later unit.
    at, start, found = 0, 0, []
    for piece in pieces:
        while at < len(rows):
            pos = rows[at][5].find(piece, start)
            if pos >= 0:
                found.append(at)
                start = pos + len(piece)
                break
            at, start = at + 1, 0
        else:
            return _check("text-now", False, "the cited text is not in the file's current bytes (edited or "
                                             "removed since the citation)")
    where = location_label([location_of(*rows[i][:5]) for i in dict.fromkeys(found)])
    return _check("text-now", True, f"the cited text is in the file's current bytes{f', at {where}' if where else ''} "
                                    "(a version other than the cited one)")


def resolve(home: FabricHome, citation: Citation) -> ResolveResult:
    """Verify ``citation``; ``verified`` carries the re-derived cited text, ``stale`` says why not.

    Raises
    ------
    CitationError
        ``citation`` is malformed (:func:`validated_citation`).
    """
    citation = validated_citation(citation)
    before = _visible_row(home, citation.source_key)
    if before is None:
        return _not_visible(home, citation)
    checks: list[ResolveCheck] = []
    cited = home.catalog.release(citation.release_id)
    named = (cited.manifest["sources"].get(citation.source_key) if cited else None) or {}
    bound = named.get("parse_id") == citation.parse_id and named.get("source_hash") == citation.source_hash
    # Sources with the same bytes: each must be cited by the release with this parse and be visible now
    # (one message whatever the reason, so a withheld key is answered like an absent one).
    others_ok = all(
        ((cited.manifest["sources"].get(k) or {}).get("parse_id") == citation.parse_id and _visible_row(home, k))
        for k in citation.also_cited_by) if cited is not None else False
    if cited is None:
        checks.append(_check("release", False, f"release {citation.release_id} {RELEASE_GONE}"))
    elif not bound:
        checks.append(_check("release", False, f"release {citation.release_id} does not cite this parse and source "
                                               "hash for this source"))
    elif not others_ok:
        bound = False
        checks.append(_check("release", False, f"also_cited_by names a source that release {citation.release_id} "
                                               "does not show with this parse"))
    else:
        checks.append(_check("release", True, f"release {citation.release_id} cites this parse for this source"))
    current = home.catalog.current_release()
    active = (current.manifest["sources"].get(citation.source_key) if current else None) or {}
    if not active:
        checks.append(_check("source-active", False, "source is no longer active (deactivated)"))
    elif active["parse_id"] != citation.parse_id:
        checks.append(_check("source-active", False, f"superseded: active parse is now {active['parse_id']}"))
    else:
        checks.append(_check("source-active", True, f"active in release {current.release_id}"))
    data = None
    if bound:
        # Only a hash the cited release published is ever compared with the file: resolve confirms
        # no guess about bytes that no release showed.
        data, why = read_source(home, before, named.get("size"))
        if data is not None and hashlib.sha256(data).hexdigest() != citation.source_hash:
            data, why = None, "source bytes changed since the citation"
        checks.append(_check("source-bytes", data is not None, why or "current bytes match the cited hash"))
        if data is None and why.startswith("source bytes changed"):
            moved = _text_now_check(home, cited, citation, before)
            if moved is not None:
                checks.append(moved)
    elif cited is None:  # retired: its hash is still compared when the home recorded it
        checks.append(retired_release_bytes(home, citation, before, active))
    text = None
    if data is not None and bound:
        parse_check, spec, run = _parse_check(home, citation)
        checks.append(parse_check)
        if spec is not None:
            checks.append(_chunk_check(home, cited, citation))
            text_check, text, location_check = _text_check(home, spec, run, data, citation)
            checks.append(text_check)
            if location_check is not None:
                checks.append(location_check)
    after = _visible_row(home, citation.source_key)
    again = home.catalog.current_release()
    active_after = (again.manifest["sources"].get(citation.source_key) if again else None) or {}
    unchanged = _row_identity(after) == _row_identity(before) and active_after == active
    checks.append(_check("catalog-recheck", unchanged, "catalog unchanged during verification" if unchanged
                         else "the source changed in the catalog while it was being verified"))
    if after is None:
        return _not_visible(home, citation)
    ok = all(c.ok for c in checks) and text is not None
    return ResolveResult(status="verified" if ok else "stale", checks=tuple(checks), text=text if ok else None)


def check_shown_text(result: ResolveResult, citation: Citation, shown_text: str) -> ResolveResult:
    """``result`` with the ``hit-text`` check added: ``shown_text`` (the text a hit showed beside
    ``citation``) must be the cited passage, i.e. its SHA-256 is the citation's ``text_hash``; when
    it is not (edited after the search, or text with no UTF-8 form), the result is ``stale``
    without text. Pure: nothing is read.
    """
    try:
        same = text_hash(shown_text) == citation.text_hash
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 form, so not any cited passage
        same = False
    check = _check("hit-text", same, "the hit's text is the cited passage" if same else
                   "the hit's text is not the cited passage (its SHA-256 differs from the citation's "
                   "text_hash): edited after the search?")
    return ResolveResult(status="verified" if result.status == "verified" and same else "stale",
                         checks=(*result.checks, check), text=result.text if same else None,
                         active_at=result.active_at)
