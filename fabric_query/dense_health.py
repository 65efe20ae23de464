"""Whether each dense channel can serve the current release, as ``fabric status`` reports it.

A dense channel is off for every query of a release when its vectors cannot be read or do not
give the digest the release recorded (``vector-digest-mismatch``: rows altered, damaged, deleted
or added after they were written). A search finds that when it first loads the vectors (or the
ANN index) into its view; :func:`dense_channels_off` asks the same questions in the same view.
That reads every vector once (~0.33 s per 100,000 rows, ``docs/benchmarks.md``, "Read-side
checks"), so the answer is kept in the home under a digest of everything it read — the release's
records of those tables, the dense search settings, and the files of the pinned table versions
and index generations as they lie on disk — and a status on an unchanged home does not read the
vectors again (as :func:`fabric_resources.row_audit.audited_rows` keeps the row audit).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from fabric_resources.dense_index import MANIFEST_KEY as INDEX_RECORDS
from fabric_resources.home import FabricHome
from fabric_resources.row_audit import folder_state, load_cached, store_cached, table_state
from fabric_resources.vector_digest import MANIFEST_KEY as VECTOR_DIGESTS

#: Bumped when what the cache holds, or what its key covers, changes.
CACHE_FORMAT = 1


def dense_channels_off(home: FabricHome, release) -> tuple[str, ...]:
    """Each dense channel whose table ``release`` pins and whose search would be skipped for every
    query, as ``"<channel>: <reason>: <table>: <detail>"`` (``()`` when all serve, or when no search
    answers at all: :attr:`~fabric_query.types.Status.unreadable_tables` says so). ``release``: the
    catalog's current release record, or None.

    Answered from ``<home>/dense_check_cache.json`` when nothing it reads has changed; never
    cached for tables on an object store, a release that recorded no vector digest (its check then
    depends on which chunks are visible), a read-only home, a check a write landed in, or one this
    process's view answered from vectors it read before (:func:`~fabric_query.release.vectors_held`)."""
    from fabric_query.channels.dense import DENSE_CHANNELS

    if release is None:
        return ()
    tables = [c.table for c in DENSE_CHANNELS.values() if release.manifest["tables"].get(c.table) is not None]
    if not tables:
        return ()
    from fabric_query.release import vectors_held

    # A view this process read the vectors into before (a running server's) answers from the files
    # as they were then: under the key of the files as they are now, that answer would be kept for
    # every later status, which a new process's search contradicts (trial 20h).
    held = vectors_held(home, release.release_id, tables)
    key = _cache_key(home, release, tables)
    path = home.layout.dense_check_cache
    if key is not None:
        cached = _load(path, key)
        if cached is not None:
            return cached
    found = _check(home, release)
    if (found is not None and key is not None and not held and not home.read_only
            and _cache_key(home, release, tables) == key):
        _store(path, key, found)
    return () if found is None else found


def _check(home: FabricHome, release) -> tuple[str, ...] | None:
    """What a search finds before it encodes a query (the source it would search, then the models
    of that source's vectors); None when no search answers (nothing to cache)."""
    from fabric_query.channels.dense import DENSE_CHANNELS, vector_models
    from fabric_query.dense_search import dense_source
    from fabric_query.errors import FabricQueryError
    from fabric_query.release import ProjectionUnavailable, pinned_view
    from fabric_resources.object_store import TableStoreUnavailableError

    try:
        view = pinned_view(home, release.release_id)
    except (TableStoreUnavailableError, FabricQueryError):
        return None
    if view is None:
        return None
    out = []
    for name, channel in DENSE_CHANNELS.items():
        if release.manifest["tables"].get(channel.table) is None:
            continue  # no vectors of that model pinned (a corpus with no Japanese: no e5 table)
        try:
            source, _ = dense_source(view, channel.table, home.config.query.dense_search)
            vector_models(view, channel.table, source)
        except ProjectionUnavailable as exc:
            out.append(f"{name}: {exc.describe()}")
        except (TableStoreUnavailableError, FabricQueryError):
            return None
    return tuple(out)


def _cache_key(home: FabricHome, release, tables: list[str]) -> str | None:
    if home.tables.remote:
        return None  # a stat per data file would be a request each
    digests = release.manifest.get(VECTOR_DIGESTS) or {}
    if any(digests.get(t) is None for t in tables):
        return None
    indexes = release.manifest.get(INDEX_RECORDS) or {}
    digest = hashlib.sha256(f"dense check {CACHE_FORMAT}\n{release.release_id}\n".encode())
    digest.update(json.dumps(home.config.query.dense_search.model_dump(mode="json"), sort_keys=True).encode())
    for table in tables:
        pinned = release.manifest["tables"][table]
        record = indexes.get(table)
        digest.update(json.dumps([table, pinned, digests[table], record], sort_keys=True, default=str).encode())
        state = table_state(home, table, pinned if isinstance(pinned, int) else None)
        if state is None or not isinstance(pinned, int):
            return None
        digest.update(state.encode())
        generation = record.get("generation") if isinstance(record, dict) else None
        if isinstance(generation, str):
            try:
                folder = home.dense_indexes.path(table, generation)
            except ValueError:
                continue  # not a generation name: the check says so, every time
            files = folder_state(folder) if folder.is_dir() else f"{generation} absent\n"
            if files is None:
                return None
            digest.update(files.encode())
    return digest.hexdigest()


def _load(path: Path, key: str) -> tuple[str, ...] | None:
    data = load_cached(path, key)
    if data is None or not isinstance(data.get("off"), list):
        return None
    return tuple(str(reason) for reason in data["off"])


def _store(path: Path, key: str, off: tuple[str, ...]) -> None:
    store_cached(path, {"key": key, "off": list(off)})
