"""Whether each dense channel can serve the current release, as ``fabric status`` reports it.

A dense channel is off for every query of a release when its vectors cannot be read or, for a
release that recorded a table digest only, do not give it (``vector-digest-mismatch``: rows
altered, damaged, deleted or added after they were written). A release that recorded each parse's
digest leaves out the damaged parses alone, and the check names their visible sources
(``left_out``; a hidden parse is not read). A search finds that when it first loads the vectors
(or the ANN index) into its view; :func:`dense_check` asks the same questions in the same view,
so the answer depends on what is visible now, which the cache key covers.
That reads every vector once (~0.33 s per 100,000 rows, ``docs/benchmarks.md``, "Read-side
checks"), so the answer is kept in the home under a digest of everything it read — the release's
records of those tables, the dense search settings, the sources of the release not visible now
(which decide whether the index is wanted), and the files of the pinned table versions and index
generations as they lie on disk — and a status on an unchanged home does not read the
vectors again (as :func:`fabric_resources.row_audit.audited_rows` keeps the row audit).

The same pass finds the two other things a search finds there: an ANN index the settings want that
it would not use (``dense-index-release-mismatch``: bytes flipped inside a file that still reads;
the exact product then answers), and the model identities of the vectors, which are compared with
the query encoder's outside the cache (``model-mismatch``: the channel is skipped), so that another
encoder never makes a status read the vectors again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fabric_resources.dense_index import MANIFEST_KEY as INDEX_RECORDS
from fabric_resources.home import FabricHome
from fabric_resources.row_audit import folder_state, load_cached, store_cached, table_state
from fabric_resources.vector_digest import MANIFEST_KEY as VECTOR_DIGESTS

#: Bumped when what the cache holds, or what its key covers, changes.
CACHE_FORMAT = 4


@dataclass(frozen=True)
class DenseCheck:
    """What a search of a release finds of each dense channel before it encodes a query.

    ``off``: ``"<channel>: <reason>: <detail>"`` for each channel skipped for every query (its
    vectors cannot serve; or they are another model's than its query encoder, ``model-mismatch``).
    ``index_fallback``: the same for each channel whose ANN index the dense search settings want
    but a search would not use (``dense-index-missing``, ``-unreadable``, ``-release-mismatch``,
    ``-schema-mismatch``): it answers with the exact product (slower at scale).
    ``left_out``: ``"<channel>: <source key>"`` for each visible source whose vectors the channel
    leaves out of its ranking (their rows do not give the digest the release recorded for their
    parse); the channel serves the others. ``index_left_out``: those of ``left_out`` whose damage is
    the ANN index's own rows (:attr:`fabric_query.dense_search.DenseSource.index_left_out`)."""

    off: tuple[str, ...] = ()
    index_fallback: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()
    index_left_out: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Found:
    """One channel as the check found it: why it is off, why its index is not used, its models."""

    off: str | None = None
    fallback: str | None = None
    models: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()  # visible source keys
    index_left_out: tuple[str, ...] = ()  # of left_out: the index's rows damaged, not the vectors


def dense_check(home: FabricHome, release, encoder: Callable[[str], str | None]) -> DenseCheck:
    """:class:`DenseCheck` of each dense channel whose table ``release`` pins (empty when none, or
    when no search answers at all: :attr:`~fabric_query.types.Status.unreadable_tables` says so).
    ``release``: the catalog's current release record, or None; ``encoder``: channel name → the
    identity of the query encoder a search uses for it, asked only for a channel whose table
    holds vectors (None: not compared; the channel does not apply, or its encoder cannot be made,
    which a search then raises).

    Answered from ``<home>/dense_check_cache.json`` when nothing it reads has changed; never
    cached for tables on an object store, a release that recorded no vector digest (its check then
    depends on which chunks are visible), a read-only home, a check a write landed in, or one this
    process's view answered from vectors it read before (:func:`~fabric_query.release.vectors_held`)."""
    from fabric_query.channels.dense import DENSE_CHANNELS, model_mismatch

    found = _found(home, release)
    off, fallback, left_out, index_left_out = [], [], [], []
    for name, channel in DENSE_CHANNELS.items():
        f = found.get(name)
        if f is None:
            continue
        identity = encoder(name) if f.models else None
        mismatch = model_mismatch(channel.table, frozenset(f.models), identity) if identity else None
        if f.off is not None or mismatch is not None:
            off.append(f"{name}: {f.off or mismatch}")
        if f.fallback is not None:
            fallback.append(f"{name}: {f.fallback}")
        left_out += [f"{name}: {key}" for key in f.left_out]
        index_left_out += [f"{name}: {key}" for key in f.index_left_out]
    return DenseCheck(tuple(off), tuple(fallback), tuple(left_out), tuple(index_left_out))


def _found(home: FabricHome, release) -> dict[str, _Found]:
    from fabric_query.channels.dense import DENSE_CHANNELS

    if release is None:
        return {}
    tables = [c.table for c in DENSE_CHANNELS.values() if release.manifest["tables"].get(c.table) is not None]
    if not tables:
        return {}
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
    return {} if found is None else found


def _check(home: FabricHome, release) -> dict[str, _Found] | None:
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
    out = {}
    for name, channel in DENSE_CHANNELS.items():
        if release.manifest["tables"].get(channel.table) is None:
            continue  # no vectors of that model pinned (a corpus with no Japanese: no e5 table)
        fallback = None
        try:
            source, fallback = dense_source(view, channel.table, home.config.query.dense_search)
            models = tuple(sorted(vector_models(view, channel.table, source)))
            keys = sorted({k for p in source.left_out for k in view.sources_by_parse.get(p, ())})
            in_index = sorted({k for p in source.index_left_out for k in view.sources_by_parse.get(p, ())})
            out[name] = _Found(fallback=fallback, models=models, left_out=tuple(keys), index_left_out=tuple(in_index))
        except ProjectionUnavailable as exc:
            out[name] = _Found(off=exc.describe(), fallback=fallback)
        except (TableStoreUnavailableError, FabricQueryError):
            return None
    return out


def _cache_key(home: FabricHome, release, tables: list[str]) -> str | None:
    if home.tables.remote:
        return None  # a stat per data file would be a request each
    digests = release.manifest.get(VECTOR_DIGESTS) or {}
    if any(digests.get(t) is None for t in tables):
        return None
    indexes = release.manifest.get(INDEX_RECORDS) or {}
    digest = hashlib.sha256(f"dense check {CACHE_FORMAT}\n{release.release_id}\n".encode())
    # What is visible now decides which parses are read (so which damaged ones are named) and,
    # through the visible rows, whether the ANN index is wanted (dense_search.wants_index): a
    # source withheld or deleted since changes both.
    digest.update(json.dumps(sorted(_hidden(home, release))).encode())
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


def _hidden(home: FabricHome, release) -> frozenset[str]:
    from fabric_query.release import hidden_sources
    from fabric_query.visibility import current_visibility

    return hidden_sources(home, release, current_visibility(home)[1])[0]


def _load(path: Path, key: str) -> dict[str, _Found] | None:
    data = load_cached(path, key)
    channels = data.get("channels") if data is not None else None
    if not isinstance(channels, dict):
        return None
    try:
        return {str(name): _Found(None if f["off"] is None else str(f["off"]),
                                  None if f["fallback"] is None else str(f["fallback"]),
                                  tuple(str(m) for m in _listed(f["models"])),
                                  tuple(str(k) for k in _listed(f["left_out"])),
                                  tuple(str(k) for k in _listed(f["index_left_out"])))
                for name, f in channels.items()}
    except (TypeError, KeyError):
        return None  # a cache only saves work


def _listed(value) -> list:
    if not isinstance(value, list):
        raise TypeError("not a list")
    return value


def _store(path: Path, key: str, found: dict[str, _Found]) -> None:
    store_cached(path, {"key": key, "channels": {name: {"off": f.off, "fallback": f.fallback, "models": list(f.models),
                                                        "left_out": list(f.left_out),
                                                        "index_left_out": list(f.index_left_out)}
                                                 for name, f in found.items()}})
