"""``resolve(citation)``: re-verify a citation against the current release and source bytes.

Checks, in order: the cited release exists; the source's active parse in the
*current* release is still the cited one; the source file's current bytes hash
to the cited ``source_hash``; the parse run is ready for those bytes; every
cited span still hashes to its ``text_hash`` in the stored unit, and the spans
rebuild the passage hash. Any failure answers ``stale`` with what changed; the
new text is never substituted.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from fabric_query.types import Citation, ResolveCheck, ResolveResult
from fabric_resources.home import FabricHome
from fabric_resources.identity import text_hash
from fabric_resources.offsets import utf16_offset
from fabric_resources.schema import FRAGMENT_SEPARATOR


def _source_bytes_check(home: FabricHome, citation: Citation) -> ResolveCheck:
    row = home.catalog.source(citation.source_key)
    if row is None:
        return ResolveCheck(check="source-bytes", ok=False, detail="source unknown to the catalog")
    roots = {r.root_id: r.path for r in home.catalog.roots()}
    path = Path(roots.get(row.root_id, "/nonexistent")) / row.rel_path
    try:
        if path.is_symlink():
            return ResolveCheck(check="source-bytes", ok=False, detail=f"{path} is now a symlink")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return ResolveCheck(check="source-bytes", ok=False, detail=f"source file {path} no longer exists")
    except OSError as exc:
        return ResolveCheck(check="source-bytes", ok=False, detail=f"cannot read {path}: {exc}")
    if digest != citation.source_hash:
        return ResolveCheck(
            check="source-bytes", ok=False,
            detail=f"source bytes changed: now {digest[:12]}…, cited {citation.source_hash[:12]}…",
        )
    return ResolveCheck(check="source-bytes", ok=True, detail="current bytes match the cited hash")


def resolve(home: FabricHome, citation: Citation) -> ResolveResult:
    """Verify ``citation``; ``verified`` carries the cited canonical text, ``stale`` says why not."""
    checks: list[ResolveCheck] = []
    cited = home.catalog.release(citation.release_id)
    checks.append(ResolveCheck(check="release", ok=cited is not None,
                               detail=f"release {citation.release_id} exists" if cited
                               else f"release {citation.release_id} unknown"))
    current = home.catalog.current_release()
    active = (current.manifest["sources"].get(citation.source_key) if current else None) or {}
    if not active:
        checks.append(ResolveCheck(check="source-active", ok=False,
                                   detail="source is no longer active (deleted or deactivated)"))
    elif active["parse_id"] != citation.parse_id:
        checks.append(ResolveCheck(check="source-active", ok=False,
                                   detail=f"superseded: active parse is now {active['parse_id']}"))
    else:
        checks.append(ResolveCheck(check="source-active", ok=True,
                                   detail=f"active in release {current.release_id}"))
    checks.append(_source_bytes_check(home, citation))
    run = home.catalog.parse_run(citation.parse_id)
    parse_ok = run is not None and run.status == "ready" and run.source_hash == citation.source_hash
    checks.append(ResolveCheck(check="parse", ok=parse_ok,
                               detail=f"parse run {citation.parse_id[:12]}… is ready for these bytes" if parse_ok
                               else f"parse run {citation.parse_id} not ready for these bytes"))
    text = None
    release_for_units = current if active.get("parse_id") == citation.parse_id else cited
    if release_for_units is not None:
        t = home.tables.read("units", parse_ids=[citation.parse_id],
                             version=release_for_units.manifest["tables"].get("units"), columns=["unit_id", "text"])
        units = dict(zip(t.column("unit_id").to_pylist(), t.column("text").to_pylist()))
        pieces, bad = [], []
        for span in citation.spans:
            unit = units.get(span.unit_id)
            piece = unit[span.start_char:span.end_char] if unit is not None else None
            if (
                piece is None
                or not 0 <= span.start_char <= span.end_char <= len(unit)
                or text_hash(piece) != span.text_hash
                or (span.start_utf16, span.end_utf16) != (utf16_offset(unit, span.start_char),
                                                          utf16_offset(unit, span.end_char))
            ):
                bad.append(span.unit_id)
            else:
                pieces.append(piece)
        passage = FRAGMENT_SEPARATOR.join(pieces)
        units_ok = not bad and text_hash(passage) == citation.text_hash
        detail = ("spans and their offsets reproduce the cited text" if units_ok
                  else f"spans differ: {bad[:3]}" if bad else "no spans, or they do not rebuild the cited text")
        checks.append(ResolveCheck(check="units", ok=units_ok, detail=detail))
        text = passage if units_ok else None
    else:
        checks.append(ResolveCheck(check="units", ok=False, detail="no release to read units from"))
    ok = all(c.ok for c in checks)
    return ResolveResult(status="verified" if ok else "stale", checks=tuple(checks), text=text if ok else None)
