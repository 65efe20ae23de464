"""A parse taken back by a scan is checked before a release can publish it.

Retention keeps a parse no source points at (a file's superseded version, a deleted file's parse)
for ``retention.superseded_days``, so that a file put back with those bytes, or another file with
the same bytes, takes it back without parsing again. Its rows sat in the tables all that time
while ``fabric status`` and ``fabric repair`` audit only the parses a source serves or waits for,
so rows changed outside Fabric meanwhile (a chunk row deleted, text rewritten, a vector altered)
would be published as they are: a present file served with text that is not in it, or left out of
every search, with nothing said (trial 24g).

So the scan that takes one back checks its rows against what their writes recorded: each table's
row count (:mod:`fabric_resources.row_audit`), each vector table's parse digest
(:mod:`fabric_resources.vector_digest`), each unit's and chunk's text against its text hash, and
each chunk's text against its fragments' unit slices. A parse that differs is sent back to
``pending`` (an operator's acceptance kept: a re-parse makes the same rows) and parsed again from
the stored bytes the scan has just stored again, before any release serves it.

Not caught: units and chunks rewritten together with every hash recomputed, which no recorded
digest covers; ``fabric resolve`` re-derives from the bytes and calls such a citation stale, as
it does for a served parse.
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from fabric_assets.gate import ACCEPTED_VERDICT, fragments_reproduce_text
from fabric_assets.projections import VECTOR_DIGEST_VERDICTS
from fabric_resources.catalog import StatusUpdate, drop_verdicts, verdicts_of
from fabric_resources.home import FabricHome
from fabric_resources.identity import text_hash
from fabric_resources.object_store import TableStoreUnavailableError
from fabric_resources.row_audit import changed_rows
from fabric_resources.vector_digest import EMPTY_PARSE_DIGEST, parse_digests

#: The status detail a parse sent back by this check records (its reason: ``taken-back``).
DETAIL = ("rows changed outside Fabric while no source served it (taken back by a file with its bytes): "
          "parsed again from the stored bytes")


def taken_back(home: FabricHome, keys: list[str]) -> list[str]:
    """Of the parses the sources ``keys`` (just found new, changed or returned) point at, those
    already ``ready`` that the current release does not serve: rows written before, for another
    source, which nothing audited since."""
    if not keys:
        return []
    catalog = home.catalog
    current = catalog.current_release()
    served = {m["parse_id"] for m in current.manifest["sources"].values()} if current else set()
    pointed = {s.parse_id for s in catalog.sources(keys=keys) if s.parse_id and s.state == "present"}
    return sorted(r.parse_id for r in catalog.parse_runs(sorted(pointed - served)) if r.status == "ready")


def altered_vectors(home: FabricHome, table: str, parse_ids: set[str]) -> list[str]:
    """Of ``parse_ids``, those whose rows in vector table ``table`` (latest version) no longer give
    the parse digest their write recorded with its gate verdict (``[]`` for a table that holds no
    digests). Reads every vector of those parses: ~150 MB at 100k chunks, a repair's price, not a
    status check's."""
    verdict = VECTOR_DIGEST_VERDICTS.get(table)
    if verdict is None or not parse_ids or home.tables.version(table) is None:
        return []
    recorded = {r.parse_id: r.digests.get(verdict)
                for r in home.catalog.parse_run_digests([verdict], parse_ids=sorted(parse_ids))}
    judged = {p for p, d in recorded.items() if isinstance(d, str)}  # an older Fabric's write has none
    if not judged:
        return []
    pids, cids, models, vectors = [], [], [], []
    for batch in home.tables.read_active_batches(table, home.tables.version(table), judged,
                                                 ["parse_id", "chunk_id", "model", "vector"]):
        pids += batch.column("parse_id").to_pylist()
        cids += batch.column("chunk_id").to_pylist()
        models += batch.column("model").to_pylist()
        vectors.append(batch.column("vector").flatten().to_numpy(zero_copy_only=False).reshape(batch.num_rows, -1))
    found = parse_digests(pids, cids, models, np.concatenate(vectors)) if vectors else {}
    return sorted(p for p in judged if found.get(p, EMPTY_PARSE_DIGEST) != recorded[p])


def _text_altered(home: FabricHome, parse_ids: set[str]) -> set[str]:
    """Of ``parse_ids``, those with a unit or chunk whose text does not give its text hash, or a
    chunk whose text is not its fragments' unit slices."""
    bad: set[str] = set()
    units = home.tables.read("units", parse_ids=parse_ids, columns=["parse_id", "unit_id", "text", "text_hash"])
    chunks = home.tables.read("chunks", parse_ids=parse_ids,
                              columns=["parse_id", "chunk_id", "text", "text_hash", "fragments"])
    for rows in (units, chunks):
        for pid, text, digest in zip(rows.column("parse_id").to_pylist(), rows.column("text").to_pylist(),
                                     rows.column("text_hash").to_pylist()):
            if text_hash(text) != digest:
                bad.add(pid)
    for pid in parse_ids - bad:
        mine = chunks.filter(pc.equal(chunks.column("parse_id"), pid))
        if mine.num_rows and not fragments_reproduce_text(
                mine, units.filter(pc.equal(units.column("parse_id"), pid)))["passed"]:
            bad.add(pid)
    return bad


def recheck_taken_back(home: FabricHome, keys: list[str]) -> list[str]:
    """Check the parses the sources ``keys`` take back (:func:`taken_back`); send those whose rows
    differ from what their writes recorded back to ``pending`` and return them (to be run)."""
    pids = set(taken_back(home, keys))
    if not pids:
        return []
    try:
        changed = {p for c in changed_rows(home, pids) for p, _, _ in c.parses}
        changed |= {p for table in VECTOR_DIGEST_VERDICTS for p in altered_vectors(home, table, pids)}
        changed |= _text_altered(home, pids - changed)
    except TableStoreUnavailableError:
        raise
    except (OSError, ValueError, RuntimeError):  # Lance: a data file lost or cut short
        # Rows that cannot be read cannot be vouched for: parsed again, the write fails while the
        # file is damaged (the ingest names `fabric repair`), and after the repair it is whole.
        changed = pids
    if not changed:
        return []
    bad = sorted(changed)
    with home.catalog.transaction() as con:
        names = {n for p in bad for r in [con.execute("SELECT verdicts FROM parse_runs WHERE parse_id = ?",
                                                      (p,)).fetchone()] if r for n in verdicts_of(r["verdicts"], p)}
    drop_verdicts(home.catalog, bad, names - {ACCEPTED_VERDICT})
    home.catalog.set_parse_statuses([StatusUpdate(p, "pending", "taken-back", DETAIL) for p in bad])
    return bad
