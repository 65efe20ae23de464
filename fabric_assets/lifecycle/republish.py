"""Re-publishing the current release over rewritten table versions (after a purge or a cleanup).

Both rewrite tables under a published release: rows of parses no release will pin are deleted and
every data file holding a deleted row is rewritten (compaction). The current release still pins
the versions before that, so the old files stay on disk as long as it is retained. Re-publishing
it — the same active parses, the same index (or one rebuilt without the purged parses), the
tables' latest versions — lets the old versions go. It is only correct while the current
release's parses are unchanged in the latest versions: callers hold the activation lock (no
release is published meanwhile) and check that every active parse is still ``ready`` (a parse
re-derived in place, which rewrites its own rows, goes back to ``parsed`` first).
"""

from __future__ import annotations

from typing import Any

from fabric_resources.catalog import Release
from fabric_resources.dense_index import MANIFEST_KEY as DENSE_INDEXES
from fabric_resources.home import FabricHome
from fabric_resources.vector_digest import MANIFEST_KEY as VECTOR_DIGESTS, PARSES_MANIFEST_KEY as VECTOR_PARSE_DIGESTS


def active_parses_unchanged(home: FabricHome, release: Release) -> bool:
    """True when every parse the release names is ``ready`` (none is being rewritten in place)."""
    parse_ids = {m["parse_id"] for m in release.manifest["sources"].values()}
    runs = home.catalog.parse_runs(parse_ids)
    return len(runs) == len(parse_ids) and all(r.status == "ready" for r in runs)


def republish(home: FabricHome, current: Release, tables: dict[str, int | None], *,
              sources: dict[str, Any] | None = None, lexical_generation: str | None = None,
              dense_indexes: dict[str, Any] | None = None, vector_digests: dict[str, str | None] | None = None,
              vector_parse_digests: dict[str, dict[str, str]] | None = None,
              note: dict[str, Any] | None = None) -> Release:
    """Publish ``current`` again with ``tables`` (and ``sources`` / ``lexical_generation`` /
    ``dense_indexes`` / ``vector_digests`` / ``vector_parse_digests`` when given), recording
    ``note`` under ``republished``; return the new release. A caller that changes the active parses
    (``sources``) gives their ``vector_digests``: a table's digest covers every active parse; and
    their ``vector_parse_digests``, else the release records none (a reader would otherwise find
    the previous ones not giving the new table digest, and check each table as a whole).

    Without ``dense_indexes`` the release keeps ``current``'s dense index records: an index holds
    copies of the active parses' vectors only, so rewriting the tables under the same active
    parses (a cleanup's compaction) leaves it exact.

    Raises
    ------
    RuntimeError
        If another release was published since ``current`` (callers hold the activation lock).
    """
    manifest = {k: v for k, v in current.manifest.items() if k not in ("release_id", "created_at")}
    manifest["tables"] = dict(tables)
    if sources is not None:
        manifest["sources"] = sources
    if lexical_generation is not None:
        manifest["lexical_generation"] = lexical_generation
    if dense_indexes is not None:
        manifest[DENSE_INDEXES] = dense_indexes
    if vector_digests is not None:
        manifest[VECTOR_DIGESTS] = dict(vector_digests)
        manifest.pop(VECTOR_PARSE_DIGESTS, None)
    if vector_parse_digests is not None:
        manifest[VECTOR_PARSE_DIGESTS] = dict(vector_parse_digests)
    manifest["republished"] = {"from_release": current.release_id, **(note or {})}
    return home.catalog.publish_release(manifest, expected_current=current.release_id)
