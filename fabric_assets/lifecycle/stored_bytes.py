"""Stored source bytes a re-parse reads (the artifact store), checked and stored again from the
file that still holds exactly them: :func:`repair <fabric_assets.lifecycle.repair.repair>` does it
before re-deriving, ``parse reparse`` and ``parse retry`` before a re-parse
(:mod:`fabric_assets.lifecycle.operator`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fabric_resources.home import FabricHome


@dataclass(frozen=True)
class BytesRestore:
    """Stored source bytes a re-parse needs that cannot be read, and the file on disk that still
    holds exactly them (it hashes to their address)."""

    source_key: str
    digest: str
    path: str
    size: int | None


def restorable(home: FabricHome, unreadable: dict[str, str]) -> tuple[list[BytesRestore], list[tuple[str, str]]]:
    """For the parses of ``unreadable`` (parse ID → why its stored bytes cannot be read): a
    :class:`BytesRestore` from the first present source file that still hashes to the parse's
    bytes, and ``(source key, why)`` for each parse no file holds any more, by key."""
    from fabric_resources.artifact_store import file_digest

    if not unreadable:
        return [], []
    roots = {r.root_id: r.path for r in home.catalog.roots()}
    runs = {r.parse_id: r for r in home.catalog.parse_runs(unreadable)}
    by_parse: dict[str, list] = {}
    for source in home.catalog.sources(parse_ids=unreadable):
        by_parse.setdefault(source.parse_id, []).append(source)
    restore, lost = [], []
    for parse_id, why in unreadable.items():
        digest = runs[parse_id].source_hash
        sources = by_parse.get(parse_id, [])
        found = next((s for s in sources if s.state == "present" and s.source_hash == digest
                      and s.root_id in roots and file_digest(Path(roots[s.root_id]) / s.rel_path) == digest), None)
        if found is None:
            lost.append((sources[0].source_key if sources else parse_id, why))
        elif all(r.digest != digest for r in restore):  # one file per stored artifact
            restore.append(BytesRestore(found.source_key, digest, str(Path(roots[found.root_id]) / found.rel_path),
                                        found.size))
    return sorted(restore, key=lambda r: r.source_key), sorted(lost)


def bytes_unreadable(home: FabricHome, parse_ids: list[str]) -> dict[str, str]:
    """Parse ID → why, for each parse of ``parse_ids`` whose stored source bytes are missing or no
    longer hash to their address (each read whole, as a re-parse reads it)."""
    from fabric_resources.artifact_store import ArtifactIntegrityError

    if not parse_ids:
        return {}
    unreadable: dict[str, str] = {}
    for run in home.catalog.parse_runs(parse_ids):
        try:
            home.artifacts.get(run.source_hash)
        except FileNotFoundError:
            unreadable[run.parse_id] = "missing from the artifact store"
        except ArtifactIntegrityError as exc:
            unreadable[run.parse_id] = str(exc)
    return unreadable


def restore_unreadable_bytes(home: FabricHome, parse_ids: list[str]) -> list[tuple[str, str]]:
    """Store again, from the present file that still holds exactly them, the stored source bytes of
    ``parse_ids`` that are missing or corrupt (as ``fabric repair`` does before a re-parse); return
    ``(source key, why)`` for each parse whose bytes cannot be read and that no file holds any more
    (a re-parse would fail it)."""
    restore, lost = restorable(home, bytes_unreadable(home, parse_ids))
    for r in restore:
        if not home.artifacts.restore(r.digest, r.path, r.size):
            lost.append((r.source_key, "its file changed while it was read"))
    return lost
