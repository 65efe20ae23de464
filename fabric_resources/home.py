"""A Fabric home: one directory holding the config, the data and the Dagster instance.

``FABRIC_HOME`` (default ``./.fabric``) selects it. ``DAGSTER_HOME`` is
``<home>/dagster`` so that ``fabric ingest`` and ``dagster dev`` see the same
runs and materializations. ``storage`` in ``config.json`` may put the shared state
elsewhere — the catalog and the Dagster instance on PostgreSQL, the Lance tables on
S3 (``docs/scale.md``); the artifacts and the serving indexes (lexical, dense ANN) stay in the directory.
"""

from __future__ import annotations

import errno
import os
from functools import cached_property
from pathlib import Path

from fabric_resources.artifact_store import ArtifactStore
from fabric_resources.catalog import Catalog, open_catalog
from fabric_resources.config import ConfigError, FabricConfig
from fabric_resources.dagster_instance import write_instance_yaml
from fabric_resources.dense_index import DenseIndexStore
from fabric_resources.lexical_index import LexicalIndex
from fabric_resources.schema import HomeLayout
from fabric_resources.home_location import (  # noqa: F401 - DEFAULT_HOME, HomeUnusableError re-exported
    DEFAULT_HOME,
    HomeUnusableError,
    home_path,
    read_only_file_system,
)
from fabric_resources.tables import TableStore, is_remote, load_storage_options_file, table_lock_name


class HomeReadOnlyError(HomeUnusableError):
    """The home cannot be written: it is on a file system mounted read-only, or its folders refuse
    this user's writes. Read commands open it with ``read_only=True`` instead."""


def _read_only(root: Path, why: str) -> HomeReadOnlyError:
    return HomeReadOnlyError(f"the Fabric home {root} is read-only ({why}): this command writes to the home and "
                             "cannot run on it; the read commands (search, resolve, status, snapshot list, snapshot "
                             "verify) can; copy the home to writable storage to change it")


def _refuse_unnameable_path(root: Path) -> None:
    """Raise :class:`HomeUnusableError` for a home path the stores cannot name, before anything is
    made there. Lance's object store refuses a path segment holding an ASCII control character
    (a newline, a tab, ESC: "illegal character sequence"), and tantivy one that is not UTF-8 (an
    undecodable byte, PEP 383): the home was made, then every parse run failed, or a
    ``UnicodeEncodeError`` traceback ended the ingest."""
    text = str(root)
    if any(c < " " or c == "\x7f" for c in text):
        raise HomeUnusableError(f"cannot use {text!r} as a Fabric home: its path holds a control character, "
                                "which Lance cannot name its tables under; choose another folder")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise HomeUnusableError(f"cannot use {text!r} as a Fabric home: its path is not valid UTF-8, which the "
                                "word index (tantivy) cannot open; choose another folder") from None


class FabricHome:
    """Opens the stores of one home lazily. Creating it makes the directories.

    Raises
    ------
    HomeUnusableError
        (unless ``read_only``) the home's directories cannot be made: the path is a file or lies
        under one, or the OS refuses (permission); (always) the path holds a control character or
        is not valid UTF-8.
    HomeReadOnlyError
        (unless ``read_only``; a :class:`HomeUnusableError`) the home is on a read-only file
        system, or its ``dagster.yaml`` cannot be rewritten (a home opened at another path than
        where it was made, on media this user cannot write).
    """

    def __init__(self, root: str | os.PathLike | None = None, *, read_only: bool = False) -> None:
        self.layout = HomeLayout(home_path(root))
        self.read_only = read_only
        _refuse_unnameable_path(self.layout.root)
        if not read_only:
            if read_only_file_system(self.layout.root):
                # Opened as a writer there, its catalog failed as a "storage fault" (SQLite cannot
                # make its WAL files) and a moved home's dagster.yaml rewrite raised a traceback.
                raise _read_only(self.layout.root, "its file system is mounted read-only")
            try:
                if not self.layout.root.exists():
                    # Owner only: the home holds copies of private documents, their text and the
                    # server's admin token. A folder the user made beforehand keeps its own mode.
                    self.layout.root.parent.mkdir(parents=True, exist_ok=True)
                    self.layout.root.mkdir(mode=0o700, exist_ok=True)
                self.layout.dagster_home.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                root = self.layout.root
                blocker = next((p for p in (root, *root.parents) if p.is_file()), None)
                why = (f"{blocker} is a file, not a folder" if isinstance(exc, (FileExistsError, NotADirectoryError))
                       and blocker is not None else f"{type(exc).__name__}: {exc.strerror or exc}")
                raise HomeUnusableError(f"cannot use {root} as a Fabric home: {why}") from None
            try:
                storage = self.config.storage
            except ConfigError:
                pass  # raised again where the configuration is used, with the file named
            else:
                try:
                    write_instance_yaml(self.layout.dagster_home, storage)
                except OSError as exc:
                    if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                        raise
                    raise _read_only(self.layout.root, f"dagster/dagster.yaml cannot be rewritten: "
                                     f"{exc.strerror or exc}") from None

    @property
    def root(self) -> Path:
        return self.layout.root

    @cached_property
    def config(self) -> FabricConfig:
        return FabricConfig.load(self.layout.config_file)

    @cached_property
    def catalog(self) -> Catalog:
        """The configured catalog (``storage.catalog``: SQLite in the home, or PostgreSQL)."""
        return open_catalog(self.config.storage.catalog, self.layout.catalog_file, read_only=self.read_only)

    @cached_property
    def artifacts(self) -> ArtifactStore:
        return ArtifactStore(self.layout.artifacts)

    @cached_property
    def tables(self) -> TableStore:
        """The Lance tables: ``<home>/tables``, or ``storage.tables_uri`` (a path relative to the
        home, or an object-store URI opened with the storage options)."""
        storage = self.config.storage
        uri = storage.tables_uri
        if uri is None:
            root = self.layout.tables
        elif is_remote(uri):
            root = uri
        else:
            root = self.root / Path(uri.removeprefix("file://"))  # an absolute path stays itself
        options = dict(storage.tables_storage_options)
        if storage.tables_storage_options_file:
            options.update(load_storage_options_file(storage.tables_storage_options_file))
        # Writers of a table in an object store are serialised by the catalog's named lock, which
        # on PostgreSQL holds across hosts: two hosts' runs adding the same new parse touch no
        # common fragment, so Lance sees no conflict and both commits landed (rows doubled).
        return TableStore(root, options, remote_write_lock=lambda name: self.catalog.exclusive(table_lock_name(name)))

    @cached_property
    def lexical(self) -> LexicalIndex:
        return LexicalIndex(self.layout.indexes / "lexical", self.config.indexing.lexical_segment_documents)

    @cached_property
    def dense_indexes(self) -> DenseIndexStore:
        """The ANN index generations of the dense vector tables (``<home>/indexes/dense``)."""
        return DenseIndexStore(self.layout.indexes / "dense")

    def exists(self) -> bool:
        """True when something was ever ingested here (its catalog exists).

        Raises
        ------
        CatalogUnavailableError
            If the configured PostgreSQL catalog cannot be reached.
        """
        if self.config.storage.catalog.backend == "sqlite":
            return self.layout.catalog_file.exists()
        return self.catalog.initialized()

