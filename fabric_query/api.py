"""The Python API of the read side: open a home, search, resolve, status. No Dagster."""

from __future__ import annotations

import os
import threading
import unicodedata
from collections import Counter
from collections.abc import Collection
from functools import cached_property
from typing import Any

from fabric_query import pipeline
from fabric_query.cli_text import one_line, shown_key
from fabric_query.dense_health import dense_check
from fabric_query.errors import ForkedProcessError, HomeNotFoundError, HomeUnusableError, InvalidArgumentError
from fabric_query.resolve import check_shown_text, validated_citation
from fabric_query.resolve import resolve as resolve_citation
from fabric_query.scope import Scope
from fabric_query.visibility import current_sources_config
from fabric_query.types import (Citation, EvidencePack, OutdatedParses,  # noqa: F401 - re-exported
                                ParseProblem, ResolveResult, SourcePartition, SourcePartitions, Status)
from fabric_resources.catalog import str_map
from fabric_resources.home import FabricHome, home_path
from fabric_resources.home_location import HomeUnusableError as ResourcesHomeUnusableError
from fabric_resources.home_location import no_home_message, read_only_file_system
from fabric_resources.run_tags import source_tag_key
from fabric_query.memory import limit_malloc_arenas
from fabric_resources.models.embedder import Encoder
from fabric_resources.models.http_embedder import dense_backend
from fabric_resources.models.reranker import Reranker, reranker_from_config
from fabric_resources.schema import INGEST_LOCK, LAST_SCAN_STATE, RESCAN_REMEDY, SCAN_SKIPPED_STATE, scan_record
from fabric_resources.object_store import TableStoreUnavailableError


#: The process that opened a :class:`Fabric` first (None: none has); a child forked from it
#: inherits the value, which is then not its own PID.
_OPENED_IN: int | None = None


def _refuse_after_fork(opened_in: int | None) -> None:
    """Raises :class:`ForkedProcessError` when this process is not ``opened_in`` (a fork of it)."""
    if opened_in is not None and opened_in != os.getpid():
        raise ForkedProcessError(
            f"this process was forked from process {opened_in}, which had opened a Fabric home: Lance and "
            "the read side's locks are not fork-safe, so a read here could hang; open the home in a process "
            "started with multiprocessing's 'spawn' or 'forkserver' method")


def _checked_home(home: object) -> str | os.PathLike | None:
    """``home`` as ``Fabric()`` takes it: None (``$FABRIC_HOME``, else ``./.fabric``) or a folder's
    path as ``str`` or ``os.PathLike``; anything else is an :class:`InvalidArgumentError` (bytes or a
    number were a ``TypeError`` from ``pathlib``, a NUL a ``ValueError``, and ``""`` opened
    ``$FABRIC_HOME`` or ``./.fabric`` in its place: another home, with nothing said)."""
    if home is None:
        return None
    path = os.fspath(home) if isinstance(home, (str, os.PathLike)) else None
    if not isinstance(path, str):
        raise InvalidArgumentError(f"home must be a folder's path (str or os.PathLike), got {type(home).__name__}")
    if not path.strip() or "\x00" in path:
        raise InvalidArgumentError(f"home must name a folder, got {path!r:.80} (None: $FABRIC_HOME, else ./.fabric)")
    return home


def _home_folder(home: str | os.PathLike | None) -> FabricHome:
    """The home at ``home`` (``Fabric()``'s argument), opened read-only, its path checked first.

    Raises :class:`InvalidArgumentError` (see :func:`_checked_home`), :class:`HomeUnusableError`
    for a file or a path under one, a folder that cannot be read, a symbolic link loop or a name
    the stores cannot open (a file was a ``ConfigError``, as if its config were wrong, and an
    unreadable folder a bare ``PermissionError``), :class:`HomeNotFoundError` for no such path
    or a folder that holds no home."""
    try:
        path = home_path(_checked_home(home))
        try:  # inside the folder, as every read of the home is: a file there, or no permission, is said now
            os.stat(path / "config.json")
        except FileNotFoundError:
            pass  # no such folder, or no config (the defaults): the catalog decides below
        except NotADirectoryError:
            blocker = next((p for p in (path, *path.parents) if p.is_file()), path)
            what = f"{path} is a file" if blocker == path else f"{blocker} is a file, so {path} cannot be a folder"
            raise HomeUnusableError(f"{what}: a Fabric home is a folder (the one `fabric ingest` made, holding "
                                    "config.json and the catalog)") from None
        except PermissionError as exc:
            raise HomeUnusableError(f"the Fabric home folder {path} cannot be read ({exc.strerror}): give this user "
                                    "read and search permission on it, or open the home as its owner") from None
        except OSError:
            pass  # a link loop (config.json itself, or the home's path): the config's reader or the home's names it
        reader = FabricHome(path, read_only=True)
        if not reader.exists():  # its catalog, wherever storage.catalog puts it
            raise HomeNotFoundError(no_home_message(path))
    except ResourcesHomeUnusableError as exc:  # a link loop, a name the stores cannot open: the read side's type
        if isinstance(exc, HomeUnusableError):
            raise
        raise HomeUnusableError(str(exc)) from None
    return reader


class Fabric:
    """A Fabric home opened for reading.

    Not fork-safe: a ``Fabric`` is used in the process that opened it, and a process forked from
    one that opened a ``Fabric`` opens none (both raise :class:`ForkedProcessError`; a search there
    hung in Lance or on a lock another thread held at the fork). Threads may share one ``Fabric``.

    Raises
    ------
    ForkedProcessError
        In a process forked from one that had opened a ``Fabric`` (here, or by any later call of a
        ``Fabric`` carried across the fork).
    InvalidArgumentError
        ``home`` is not None, a ``str`` or an ``os.PathLike`` of one, or is empty or holds a NUL.
    HomeNotFoundError
        If there is no such path, or the folder has no catalog (nothing was ever ingested there).
    HomeUnusableError
        If the path cannot hold a home (it is a file or lies under one, is a symbolic link loop,
        or is not valid UTF-8, which the word index cannot open), or its folder cannot be read (no
        permission). Also a ``fabric_resources.home.HomeUnusableError``.
    ConfigError
        (``fabric_resources.config``) If the home's ``config.json`` cannot be read or is invalid
        (not UTF-8 JSON, a folder, a FIFO, unknown keys). ``search``,
        ``resolve`` and ``status`` raise it too when ``config.json`` is edited into an invalid one
        while the home is open: they re-read ``sources.withheld``.
    CatalogMigrationNeededError
        If an older Fabric wrote the catalog: a reader never migrates it (the message names
        `fabric ingest PATH`, which does).
    CatalogTooNewError
        If a newer Fabric wrote it.
    CatalogUnavailableError
        If a PostgreSQL catalog (``storage.catalog``) cannot be reached or opened; also from any
        later call once the home's SQLite catalog is gone (the home moved or deleted while open).
    sqlite3.DatabaseError
        If the SQLite catalog file is damaged (truncated or overwritten); ``fabric`` prints it as
        one line, exit 2.
    """

    _pid: int | None = None  # the process that opened it

    def __init__(self, home: str | os.PathLike | None = None) -> None:
        global _OPENED_IN
        _refuse_after_fork(_OPENED_IN)
        reader = _home_folder(home)
        path = reader.root
        reader.catalog  # a read-only open checks the schema version and changes nothing
        # On read-only media (a read-only mount of a home, or of a copy of one) nothing can be
        # written: the home is opened as the reader above is, and its catalog read as immutable.
        self.home = reader if read_only_file_system(path) else FabricHome(path)
        # Opened now, where it was found: opened first at a later call, a home moved or deleted
        # since (under a running server) was made again there, empty, and read as "no release".
        self.home.catalog
        limit_malloc_arenas(self.home.config.query.malloc_arena_max)
        _OPENED_IN = self._pid = os.getpid()  # opened: a process forked from this one opens none

    def __reduce__(self):
        """Pickled as its home's path: unpickling opens that home again, in whatever process (a
        ``Fabric`` passed to a ``spawn`` pool's worker; pickled after a search it was an
        ``AttributeError``, "Can't pickle local object", and before one it carried its opener's
        process, and its caches' state, with it)."""
        return (Fabric, (str(self.home.root),))

    def search(
        self, query: str, *, limit: int | None = None, release_id: int | None = None, debug: bool = False,
        channels: Collection[str] | None = None, scope: Scope | dict | None = None, max_tokens: int | None = None,
        cancel: threading.Event | None = None,
    ) -> EvidencePack:
        """Search the current (or a given) release under today's visibility, with every channel that
        applies or only the named ``channels``, within ``scope`` (the structured twin of the query
        string's filters, :class:`fabric_query.scope.Scope`) and a token budget ``max_tokens``
        (whole passages only); ``cancel``, set from another thread, stops it at its next stage
        boundary (``QueryCancelled``); see :func:`fabric_query.pipeline.search` for the errors its
        arguments raise (all in :mod:`fabric_query.errors`; the home's own state can raise those
        the class lists, e.g. ``ConfigError`` for a ``config.json`` edited into an invalid one)."""
        _refuse_after_fork(self._pid)
        return pipeline.search(self.home, query, self.encoder, limit=limit, release_id=release_id, debug=debug,
                               reranker=self.reranker, channels=channels, scope=scope, max_tokens=max_tokens,
                               cancel=cancel)

    # The models are properties checked on every read, not cached ones: once loaded, a cached
    # property is an instance attribute that a forked child read past the fork guard, and its ONNX
    # session (or the embedder's lock) hung there while the parent was encoding on a thread.
    @property
    def encoder(self) -> Encoder:
        """The query encoder of the dense role (``dense.backend``: local MiniLM or HTTP, no fallback),
        loaded on first use; :class:`ForkedProcessError` in a forked child."""
        _refuse_after_fork(self._pid)
        return self._encoder

    @property
    def reranker(self) -> Reranker | None:
        """The reranker role (``reranker.backend``), or None when it is off (the default), loaded on
        first use; :class:`ForkedProcessError` in a forked child."""
        _refuse_after_fork(self._pid)
        return self._reranker

    @cached_property
    def _encoder(self) -> Encoder:
        return dense_backend(self.home.config)

    @cached_property
    def _reranker(self) -> Reranker | None:
        return reranker_from_config(self.home.config)

    def resolve(self, citation: Citation | dict[str, Any], *, shown_text: str | None = None) -> ResolveResult:
        """Re-verify a citation (a :class:`Citation` or its JSON dict); see :mod:`fabric_query.resolve`.

        ``shown_text``: the text the hit showed beside the citation (``Hit.text``); it must be the
        cited passage too (the ``hit-text`` check, :func:`fabric_query.resolve.check_shown_text`).

        Raises
        ------
        CitationError
            ``citation`` is not a well-formed citation (any other input, however odd, answers
            ``verified`` or ``stale``).
        InvalidArgumentError
            ``shown_text`` is given and not a string.
        ConfigError
            The home's ``config.json`` was edited into an invalid one (as for ``search``).
        """
        _refuse_after_fork(self._pid)
        if shown_text is None:
            return resolve_citation(self.home, citation)
        if not isinstance(shown_text, str):
            raise InvalidArgumentError(f"shown_text must be a string, got {type(shown_text).__name__}")
        checked = validated_citation(citation)
        return check_shown_text(resolve_citation(self.home, checked), checked, shown_text)

    def source_partitions(self, text: str) -> tuple[SourcePartitions, ...]:
        """Every source whose key contains ``text`` (case-insensitive; e.g. part of a file name),
        by source key, each with every parse of its versions: the Dagster partition keys of a file.
        Sources of any state (deleted and withheld ones included: this is the operator's view,
        as ``status``); a purged source is not in the catalog any more and is not found.

        Raises
        ------
        InvalidArgumentError
            If ``text`` is not a string, or is empty or only white space.
        """
        _refuse_after_fork(self._pid)
        if not isinstance(text, str):  # None or a number was an AttributeError from .strip()
            raise InvalidArgumentError(f"give part of a source key or file name as a string, got {type(text).__name__}")
        needle = unicodedata.normalize("NFC", text.strip()).casefold()  # a name typed (NFC) finds one made on macOS (NFD)
        if not needle:
            raise InvalidArgumentError("give part of a source key or file name")
        catalog = self.home.catalog
        release = catalog.current_release()
        active = {k: m["parse_id"] for k, m in (release.manifest["sources"] if release else {}).items()}
        runs_by_hash: dict[str, list] = {}
        # Also as `fabric` prints the key (a control character as ``\xNN``, quoted: shown_key), so a name
        # copied from its output finds the file whose name holds the character itself.
        found = [s for s in catalog.sources()
                 if any(needle in unicodedata.normalize("NFC", k).casefold()
                        for k in (s.source_key, one_line(s.source_key), shown_key(s.source_key)))]
        if found:
            for r in catalog.parse_runs():
                runs_by_hash.setdefault(r.source_hash, []).append(r)
        out = []
        for s in found:
            # Versions in the order they were seen (a reverted file's bytes once, where first seen).
            hashes = list(dict.fromkeys([a["source_hash"] for a in catalog.acquisitions(s.source_key)]
                                        + ([s.source_hash] if s.source_hash else [])))
            parts = tuple(SourcePartition(parse_id=r.parse_id, source_hash=h, status=r.status,
                                          current=r.parse_id == s.parse_id,
                                          active=active.get(s.source_key) == r.parse_id)
                          for h in hashes for r in runs_by_hash.get(h, ()))
            out.append(SourcePartitions(source_key=s.source_key, state=s.state, run_tag=source_tag_key(s.source_key),
                                        partitions=parts))
        return tuple(out)

    def _ingest_running(self) -> bool | None:
        """Whether a live process holds the ingest lock (``Status.ingest_running``)."""
        try:
            return self.home.catalog.lock_held(INGEST_LOCK)
        except OSError:  # a lock file this user may not open: unknown, not "interrupted"
            return None

    def status(self) -> Status:
        """What the home holds (:class:`Status`); raises as the class does."""
        _refuse_after_fork(self._pid)
        catalog = self.home.catalog
        sources = catalog.source_overview()  # (key, state, media type, parse ID), by key
        by_parse: dict[str, list[str]] = {}
        for key, state, _, parse_id in sources:
            # A deleted source's parse is nobody's problem any more (and is never run again).
            if parse_id and state != "deleted":
                by_parse.setdefault(parse_id, []).append(key)
        release = catalog.current_release()
        active = release.manifest["sources"] if release else {}
        # An active parse re-derived in place (a chunking change) reports its problems too, also
        # where its source already points at a newer parse.
        for key, meta in sorted(active.items()):
            if key not in by_parse.setdefault(meta["parse_id"], []):
                by_parse[meta["parse_id"]].append(key)
        runs = catalog.parse_run_overview()  # no verdicts decoded: status prints none

        def problems(status: str) -> tuple[ParseProblem, ...]:
            return tuple(
                ParseProblem(parse_id=r.parse_id, status=r.status, reason=r.reason, detail=r.detail,
                             sources=tuple(by_parse.get(r.parse_id, ())))
                for r in runs if r.status == status and r.parse_id in by_parse
            )

        # As a search does: the patterns in the config file now, not when this Fabric opened (a
        # pattern added while a server runs must hide its sources from an agent's status at once).
        withheld_now = current_sources_config(self.home)
        withheld = tuple(key for key, state, _, _ in sources if state == "present" and withheld_now.is_withheld(key))
        withheld_keys = set(withheld)  # asked once a source: 100k pattern matches are not free
        ready = {r.parse_id for r in runs if r.status == "ready"}
        dense = dense_check(self.home, release, self._query_encoder)
        return Status(
            home=str(self.home.root),
            roots=tuple(r.path for r in catalog.roots()),
            sources_by_state=dict(Counter(state for _, state, _, _ in sources)),
            release_id=release.release_id if release else None,
            last_scan_at=(catalog.state(LAST_SCAN_STATE, dict, valid=scan_record, remedy=RESCAN_REMEDY) or {}).get("at"),
            release_created_at=release.created_at if release else None,
            active_sources=len(active),
            active_parses=len({m["parse_id"] for m in active.values()}),
            failed=problems("failed"),
            held=problems("held"),
            pending=sum(1 for r in runs if r.status == "pending" and r.parse_id in by_parse),
            unfinished=problems("parsed"),
            ingest_running=self._ingest_running(),
            unpublished=tuple(sorted(
                key for key, state, _, parse_id in sources
                if state == "present" and parse_id in ready and key not in withheld_keys
                and (active.get(key) or {}).get("parse_id") != parse_id)),
            unsupported=tuple(
                (key, media_type) for key, state, media_type, parse_id in sources
                if parse_id is None and state == "present"
            ),
            withheld=withheld,
            skipped=tuple(sorted((catalog.state(SCAN_SKIPPED_STATE, dict, valid=str_map, remedy=RESCAN_REMEDY) or {}).items())),
            partial=tuple(
                ParseProblem(parse_id=r.parse_id, status=r.status, reason="failed-units",
                             detail=unread_detail(r.failed_units), sources=tuple(by_parse.get(r.parse_id, ())))
                for r in runs if r.status == "ready" and r.parse_id in by_parse and r.failed_units
            ),
            restore_pending=self.home.layout.restore_pending.exists(),
            purges_unfinished=self._purges_unfinished(),
            unreadable_tables=self._unreadable_tables(release),
            lexical_index_problem=self._lexical_index_problem(release),
            dense_index_problems=self._dense_index_problems(release),
            dense_channels_off=dense.off,
            dense_index_fallback=dense.index_fallback,
            dense_sources_left_out=dense.left_out,
            dense_index_sources_left_out=dense.index_left_out,
            rows_changed=self._rows_changed(active, runs),
            outdated=self._outdated(active, runs),
        )

    def _outdated(self, active: dict, runs) -> tuple[OutdatedParses, ...]:
        """The active sources whose parse's recorded parser identity is not the one this Fabric's
        registry gives their media type under the home's ``parsers`` settings (the scan's test,
        ``fabric_assets.sources.scan``), grouped by (recorded, current) identity."""
        from fabric_resources.parsing.registry import parser_for

        active_ids = {meta["parse_id"] for meta in active.values()}
        now: dict[str, tuple[str, str, str] | None] = {}
        # The active runs parsed otherwise than this Fabric would parse them now, found run by run
        # first: usually none, and then the 100k active sources need no look-up each.
        stale = {}
        for run in runs:
            if run.parse_id not in active_ids:
                continue
            if run.media_type not in now:
                spec = parser_for(run.media_type)
                ident = spec.identity(self.home.config.parsers) if spec is not None else None
                now[run.media_type] = (ident.name, ident.version, ident.config_hash) if ident else None
            if now[run.media_type] != (run.parser_name, run.parser_version, run.parser_config_hash):
                stale[run.parse_id] = run
        groups: dict[tuple, list[str]] = {}
        for key, meta in sorted(active.items()) if stale else ():
            run = stale.get(meta["parse_id"])
            if run is None:
                continue
            current = now[run.media_type]
            settings_only = current is not None and current[:2] == (run.parser_name, run.parser_version)
            groups.setdefault((run.parser_name, run.parser_version, current[:2] if current else None,
                               settings_only), []).append(key)
        return tuple(OutdatedParses(parser=name, parsed_with=version, current_parser=cur[0] if cur else None,
                                    current_version=cur[1] if cur else None, settings_changed=settings_only,
                                    sources=tuple(keys))
                     for (name, version, cur, settings_only), keys in sorted(groups.items(), key=lambda g: str(g[0])))

    def _query_encoder(self, channel: str) -> str | None:
        """The identity of the query encoder this Fabric's searches use for dense channel
        ``channel``, or None: the channel does not apply (``dense_multilingual`` with
        ``dense.multilingual`` off), or its encoder cannot be made (a search raises that). Loads no
        model: an identity reads 1 MiB of weights at most, once a process."""
        from fabric_resources.models.api_key import ApiKeyFileError
        from fabric_resources.models.multilingual import shared_multilingual_embedder

        try:
            if channel == "dense":
                return self.encoder.identity
            if channel == "dense_multilingual" and self.home.config.dense.multilingual:
                return shared_multilingual_embedder().identity
        except (ApiKeyFileError, OSError, ImportError):
            pass
        return None

    def _dense_index_problems(self, release) -> tuple[str, ...]:
        """``"<table>: <reason>: <detail>"`` for each dense ANN index generation the release names
        that cannot serve: its meta is not the release's record, or Lance cannot read a data file's
        footer or the vector index's files (a few ms a table). Its rows are checked against the
        release's digests when a search first loads it."""
        from fabric_resources.dense_index import MANIFEST_KEY, DenseIndexUnusable

        records = (release.manifest.get(MANIFEST_KEY) or {}) if release is not None else {}
        out = []
        for table, record in sorted(records.items()):
            if not isinstance(record, dict) or not record.get("generation"):
                continue  # none built (a table under the auto threshold): the exact product serves
            try:
                self.home.dense_indexes.open(table, record).check_files()
            except DenseIndexUnusable as exc:
                out.append(f"{table}: {exc.describe()}")
        return tuple(out)

    def _rows_changed(self, active: dict, runs) -> tuple[str, ...]:
        """:attr:`Status.rows_changed` (:func:`~fabric_resources.row_audit.release_rows_changed`)."""
        from fabric_resources.row_audit import release_rows_changed

        return tuple(c.describe() for c in release_rows_changed(self.home, {m["parse_id"] for m in active.values()},
                                                                 runs))

    def _lexical_index_problem(self, release) -> str | None:
        from fabric_query.release import open_generation
        from fabric_resources.lexical_index import IndexUnusable
        from fabric_resources.storage_errors import storage_error_text

        if release is None or not release.manifest.get("sources"):
            return None  # nothing to search, no index needed
        opened = open_generation(self.home, release.manifest.get("lexical_generation"))
        if not isinstance(opened, IndexUnusable):
            return None
        return storage_error_text(opened, 300).removeprefix(f"{type(opened).__name__}: ")

    def _purges_unfinished(self) -> tuple[int, ...]:
        with self.home.catalog.transaction() as con:
            rows = con.execute("SELECT tombstone_id FROM tombstones WHERE completed_at IS NULL "
                               "ORDER BY tombstone_id").fetchall()
        return tuple(int(r[0]) for r in rows)

    def _unreadable_tables(self, release) -> tuple[str, ...]:
        """``"<table> version <v>: <problem>"`` for each pinned table version of ``release`` that
        cannot be read (:meth:`~fabric_resources.tables.TableStore.version_problem`), or the one
        entry saying the object store cannot be used."""
        out = []
        for name, version in sorted((release.manifest["tables"] if release else {}).items()):
            if version is None:
                continue
            try:
                problem = self.home.tables.version_problem(name, version)
            except TableStoreUnavailableError as exc:
                return (f"every table: the object store cannot be used: {exc.problem}",)
            if problem is not None:
                out.append(f"{name} version {version}: {problem}")
        if out:  # a HEAD request's 404 does not say whether the bucket went: one list request does
            try:
                self.home.tables.check_available()
            except TableStoreUnavailableError as exc:
                return (f"every table: the object store cannot be used: {exc.problem}",)
        return tuple(out)


def unread_detail(failed_units: list[dict[str, Any]]) -> str:
    """``"<where>: <reason>; …"``: what a partly read parse left unread, from its catalog counts
    (``failed_units``, written from :attr:`ParsedDocument.unread
    <fabric_resources.parsing.document.ParsedDocument>`).

    Parses stored before the parts carried ``where`` were PDFs, naming a page:

    >>> unread_detail([{"where": "slide 1: Table 4", "reason": "KeyError: 'rId9'"},
    ...                {"page": 3, "reason": "ocr-unavailable"}])
    "slide 1: Table 4: KeyError: 'rId9'; page 3: ocr-unavailable"
    """
    parts = []
    for failed in failed_units:
        where = failed.get("where") or f"page {failed.get('page')}"
        parts.append(f"{where}: {failed.get('reason')}")
    return "; ".join(parts)
