"""What the catalog stores, as frozen records (the same for every backend)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple


class RootOverlapError(ValueError):
    """A new root lies inside a registered root, or contains one (files would get two keys)."""

    @classmethod
    def between(cls, path: Path, registered: Path, label: str) -> "RootOverlapError":
        """The error for ``path`` overlapping the registered root ``registered`` (labelled ``label``),
        saying what to do instead: ingest the root that holds ``path``, or purge the root ``path``
        holds before making ``path`` the root (trial 19c: the message named no way out)."""
        if path.is_relative_to(registered):
            todo = f"ingest {registered}, which holds it (its new and changed files are found there)"
        else:
            todo = (f"to make {path} the root instead, run `fabric purge --root {shlex.quote(label)}` first "
                    f"(its sources are removed, then read again under {path})")
        return cls(f"{path} overlaps the registered root {registered} (a file under both would be two sources): "
                   f"{todo}")


class CatalogUnavailableError(RuntimeError):
    """The catalog's database cannot be reached or opened (a service that is down, a wrong URL or
    password): a fault of the deployment, not of a document. The message names the catalog, never a
    password."""


class CatalogVersionError(RuntimeError):
    """The catalog's schema version is not the one this Fabric reads and writes.

    Attributes
    ----------
    catalog : str
        Where the catalog is (``Catalog.describe``).
    found, supported : int
        The catalog's schema version and the latest this Fabric knows.
    """

    def __init__(self, message: str, *, catalog: str, found: int, supported: int) -> None:
        super().__init__(message)
        self.catalog, self.found, self.supported = catalog, found, supported


class CatalogTooNewError(CatalogVersionError):
    """A newer Fabric migrated the catalog past the versions this one knows: upgrade Fabric."""


class CatalogMigrationNeededError(CatalogVersionError):
    """A read-only opener found a catalog an older Fabric wrote; a writer must migrate it first."""


#: What a damaged catalog row's error tells the operator to do.
RESTORE_REMEDY = "restore the home from a snapshot or a copy"


class CatalogDamagedError(RuntimeError):
    """A catalog row cannot be what it must be (a release manifest that is not a JSON object with
    its ``sources`` and ``tables``, the current pointer naming a release the catalog lacks): the
    catalog was altered behind Fabric's back. The message names the row."""

    @classmethod
    def missing_current(cls, release_id: int) -> "CatalogDamagedError":
        """The ``current`` pointer names ``release_id``, which the catalog does not hold."""
        return cls(f"the catalog's current pointer names release {release_id}, which it does not hold: "
                   f"{RESTORE_REMEDY}")


class CatalogMigrationError(RuntimeError):
    """A migration failed; its transaction was rolled back, so the catalog keeps its old version."""


@dataclass(frozen=True)
class Root:
    root_id: int
    path: str
    label: str


class SourceRow(NamedTuple):
    """One ``sources`` row. A named tuple rather than a frozen dataclass: scans and activations
    build one per source (a frozen dataclass's construction was a third of a no-change scan at
    10,000 sources)."""

    source_key: str
    root_id: int
    rel_path: str
    state: str
    media_type: str
    mtime_ns: int | None
    size: int | None
    source_hash: str | None
    parse_id: str | None
    first_seen: float
    last_seen: float


class ParseRunDigests(NamedTuple):
    """A parse run's status and language, and the ``digest`` of some of its verdicts
    (:meth:`Catalog.parse_run_digests`; ``None`` where the verdict or its digest is absent).
    A named tuple: activation reads one per parse run."""

    parse_id: str
    status: str
    language: str | None
    digests: dict[str, Any]
    change_seq: int = 0  # the run row's change number (catalog version 2)


@dataclass(frozen=True)
class ParseRun:
    parse_id: str
    source_hash: str
    media_type: str
    parser_name: str
    parser_version: str
    parser_config_hash: str
    language: str | None
    status: str
    reason: str | None
    detail: str | None
    verdicts: dict[str, Any]
    counts: dict[str, Any]
    created_at: float
    updated_at: float


class ParseRunOverview(NamedTuple):
    """What ``fabric status`` reads of every parse run (:meth:`Catalog.parse_run_overview`): no
    verdicts, source hash, language or times; the counts as their JSON text, known to be a JSON
    object, decoded when asked for (the row audit's cache needs only the text). A named tuple:
    status reads one per parse run."""

    parse_id: str
    media_type: str
    parser_name: str
    parser_version: str
    parser_config_hash: str
    status: str
    reason: str | None
    detail: str | None
    counts_json: str

    @property
    def counts(self) -> dict[str, Any]:
        """The counts decoded (a JSON object: the catalog checked it when it read the row)."""
        return json.loads(self.counts_json)

    @property
    def failed_units(self) -> Any:
        """``counts["failed_units"]``, None when absent, decoding only counts that can hold it: the
        key's name or a JSON escape (that could spell it) appears in their text."""
        text = self.counts_json
        return self.counts.get("failed_units") if "failed_units" in text or "\\" in text else None


@dataclass(frozen=True)
class StatusUpdate:
    parse_id: str
    status: str
    reason: str | None = None
    detail: str | None = None
    counts: dict[str, Any] | None = None
    language: str | None = None


@dataclass(frozen=True)
class Release:
    release_id: int
    created_at: float
    manifest: dict[str, Any]


@dataclass(frozen=True)
class Operation:
    """An admin operation of ``fabric serve`` (``schema.OPERATIONS_DDL``)."""

    operation_id: str
    kind: str
    status: str
    params: dict[str, Any]
    reason: str | None
    result: dict[str, Any]
    created_at: float
    started_at: float | None
    finished_at: float | None
