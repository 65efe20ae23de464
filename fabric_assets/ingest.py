"""``fabric ingest``: register a root and run the Dagster pipeline in-process to completion.

The same scan the sensor runs, the same jobs, the persistent Dagster instance
under the Fabric home (``DAGSTER_HOME``), so the runs and materializations
show up in ``dagster dev -w workspace.yaml``. Partitions are batched into few
runs (``sources.partitions_per_run``), and each run embeds across documents.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from fabric_assets.activation.activate import ingest_lock
from fabric_assets.annotations.planning import parses_needing_annotation, visible_parses
from fabric_assets.chunker_identity import chunker_settings, stale_chunk_partitions
from fabric_assets.definitions import build_definitions
from fabric_assets.lifecycle.repair import awaited_unfinished, rechunk_only
from fabric_assets.model_identity import expected_identities, stale_partitions
from fabric_assets.partition_memo import partition_key_memo
from fabric_assets.projections import CHUNKER_SETTINGS, RECHUNK_VERDICTS
from fabric_assets.run_owner import owner_tags
from fabric_assets.sensors import (partitions_in_progress, plan_annotation_runs, plan_parse_runs, range_tags,
                                   run_budget, runs_over)
from fabric_assets.sources.scan import ScanReport, scan
from fabric_assets.sources.walk import not_a_folder
from fabric_resources.catalog import RootOverlapError, StatusUpdate, drop_verdicts
from fabric_resources.dagster_resources import CONFIGURED_MODELS, ModelResources
from fabric_resources.home import FabricHome

#: Called with (steps done, steps in all) while runs execute: two steps per parse — parsed,
#: then its run (chunks, embeddings, checks) finished. Never called when there is nothing to parse.
ProgressCallback = Callable[[int, int], None]

#: Folders never taken as roots (nor any folder inside them): the kernel's pseudo-file systems.
SYSTEM_FOLDERS = (Path("/proc"), Path("/sys"), Path("/dev"))


class NotADirectoryRoot(ValueError):
    """``fabric ingest`` was given something that is not a readable directory."""


@dataclass(frozen=True)
class FailedSource:
    """A present source whose current version failed to parse (its last good version, if any,
    stays active). ``new``: it failed in this ingest; otherwise earlier, and the same bytes are
    not parsed again (the no-blind-retry rule)."""

    source_key: str
    parse_id: str
    reason: str
    detail: str
    new: bool


@dataclass
class IngestSummary:
    """What one ``fabric ingest`` did. ``complete`` when every file found is active (or
    unsupported, or withheld by policy) and every run succeeded."""

    scan: ScanReport
    run_ids: list[str] = field(default_factory=list)
    failed_runs: list[str] = field(default_factory=list)
    activation: dict = field(default_factory=dict)
    activation_run_id: str | None = None
    reproject_run_ids: list[str] = field(default_factory=list)
    #: Runs of ``rechunk_job`` and the parses they re-chunked (a chunking change; no re-parse).
    rechunk_run_ids: list[str] = field(default_factory=list)
    rechunked: list[str] = field(default_factory=list)
    #: Parses re-run because a killed run had left them without all their verdicts.
    retried: list[str] = field(default_factory=list)
    #: Parse ID → the Dagster run in progress (the daemon's, the UI's) that is writing it: this
    #: ingest left it to that run (pending, or unfinished because that run is not done).
    left_to_runs: dict[str, str] = field(default_factory=dict)
    annotation_run_ids: list[str] = field(default_factory=list)
    annotation_failed_runs: list[str] = field(default_factory=list)
    #: After this ingest: every present source whose current version failed to parse.
    failed: list[FailedSource] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def rechunked_by_change(self) -> list[str]:
        """Of :attr:`rechunked`, the parses re-chunked because the chunking changed; the others were
        resumed after a killed run (in :attr:`retried`), which re-chunks them from their units too."""
        return [p for p in self.rechunked if p not in set(self.retried)]

    @property
    def complete(self) -> bool:
        return not (self.failed or self.scan.skipped or self.failed_runs or self.annotation_failed_runs)


def failed_sources(home: FabricHome, parsed_now: set[str]) -> list[FailedSource]:
    """Present sources whose current parse failed, by source key; ``parsed_now``: the parse IDs
    this ingest ran."""
    runs = {r.parse_id: r for r in home.catalog.parse_runs(status="failed")}
    return [FailedSource(s.source_key, s.parse_id, runs[s.parse_id].reason or "", runs[s.parse_id].detail or "",
                         s.parse_id in parsed_now)
            for s in home.catalog.sources(state="present", parse_ids=runs) if s.parse_id in runs]


def dagster_instance(home: FabricHome) -> dg.DagsterInstance:
    """The persistent instance under ``<home>/dagster`` (sets ``DAGSTER_HOME``)."""
    os.environ["DAGSTER_HOME"] = str(home.layout.dagster_home)
    return dg.DagsterInstance.get()


def _run_config(home: FabricHome, *, failures_raised: bool = False) -> dict:
    """The run config of an in-process run for ``home``. Run logs stay in the instance (visible in
    the UI); the console shows warnings, or nothing below CRITICAL when ``failures_raised`` (the
    caller turns a failed step into its own error: Dagster's STEP_FAILURE stack trace on the
    console put ~90 lines before the CLI's one-line refusal)."""
    return {
        "resources": {"fabric": {"config": {"home": str(home.root)}}},
        "loggers": {"console": {"config": {"log_level": "CRITICAL" if failures_raised else "WARNING"}}},
    }


def _execute(job: dg.JobDefinition, home: FabricHome, instance: dg.DagsterInstance, tags: dict | None = None,
             raise_on_error: bool = False) -> dg.ExecuteInProcessResult:
    """Run ``job`` in-process; a Ctrl-C (SIGINT/SIGTERM) during the run stops the ingest.

    Dagster turns the signal into a failed run (``UNEXPECTED_TERMINATION``) and returns as if a
    step had failed, so without this check the ingest carried on into activation and exited 0.

    Raises
    ------
    KeyboardInterrupt
        If the run ended because of an interrupt. An interrupted parse run activates nothing
        and the next ingest re-runs its parses (see ``unfinished``); an interrupted activation
        either published its release or did not (publishing is one catalog transaction).
    """
    try:
        result = job.execute_in_process(instance=instance, tags={**(tags or {}), **owner_tags()},
                                        raise_on_error=raise_on_error,
                                        run_config=_run_config(home, failures_raised=raise_on_error))
    except dg.DagsterExecutionInterruptedError as exc:  # re-raised as is when raise_on_error
        raise KeyboardInterrupt(f"Dagster run of {job.name} was interrupted") from exc
    failure = result.get_run_failure_event() if not result.success else None
    reason = getattr(failure.event_specific_data, "failure_reason", None) if failure else None
    if getattr(reason, "value", None) == "UNEXPECTED_TERMINATION":  # dagster RunFailureReason (not public)
        raise KeyboardInterrupt(f"Dagster run {result.run_id} was interrupted")
    return result


def job(home: FabricHome, name: str, models: ModelResources = CONFIGURED_MODELS) -> dg.JobDefinition:
    """The job ``name`` of the definitions for ``home``'s configuration and ``models``."""
    return build_definitions(home.config, models).resolve_job_def(name)


def run_pending(
    home: FabricHome,
    instance: dg.DagsterInstance,
    pending: list[str],
    progress: ProgressCallback | None = None,
    models: ModelResources = CONFIGURED_MODELS,
) -> tuple[list[str], list[str]]:
    """Materialize ``pending`` parse partitions in batched in-process runs; return (run IDs, failed)."""
    new_keys, runs = plan_parse_runs(instance, pending, home.config.sources.partitions_per_run,
                                     **run_budget(home, pending))
    if new_keys:
        instance.add_dynamic_partitions("parses", new_keys)
    parse_job = job(home, "parse_job", models)
    run_ids, failed = [], []
    stop = threading.Event()
    finished = [0]  # parses whose run has completed

    def poll() -> None:
        while not stop.wait(0.5):
            parsed = sum(1 for r in home.catalog.parse_runs(pending) if r.status != "pending")
            progress(parsed + finished[0], 2 * len(pending))

    watcher = threading.Thread(target=poll, daemon=True) if progress and pending else None
    if watcher:
        watcher.start()
    try:
        for keys in runs:
            result = _execute(parse_job, home, instance, range_tags(keys))
            run_ids.append(result.run_id)
            finished[0] += len(keys)
            if not result.success:
                failed.append(result.run_id)
    finally:
        stop.set()
        if watcher:
            watcher.join()
    if progress and pending:  # nothing to parse (a re-chunk alone, say) is no count of 0 of 0
        progress(2 * len(pending), 2 * len(pending))
    return run_ids, failed


def run_activation(home: FabricHome, instance: dg.DagsterInstance,
                   models: ModelResources = CONFIGURED_MODELS) -> tuple[str, dict]:
    """Run the activation job in-process; return its run ID and the release metadata it recorded."""
    result = _execute(job(home, "activation_job", models), home, instance, raise_on_error=True)
    mats = result.asset_materializations_for_node("release")
    meta = {k: v.value for k, v in mats[-1].metadata.items()} if mats else {}
    return result.run_id, meta


def run_annotation(home: FabricHome, instance: dg.DagsterInstance,
                   models: ModelResources = CONFIGURED_MODELS) -> tuple[list[str], list[str]]:
    """Run ``annotation_job`` in-process over the parses that need it (none when annotation is
    disabled), retrying parses whose last annotation failed; return (run IDs, failed run IDs)."""
    wanted = parses_needing_annotation(home, retry_failed=True)
    annotation_job = job(home, "annotation_job", models)
    run_ids, failed = [], []
    for keys in plan_annotation_runs(instance, wanted, home.config.sources.partitions_per_run):
        result = _execute(annotation_job, home, instance, range_tags(keys))
        run_ids.append(result.run_id)
        if not result.success:
            failed.append(result.run_id)
    return run_ids, failed


#: Catalog state: the model identities every active parse's projections were last confirmed to carry.
PROJECTION_MODELS = "projection_models"


def run_reprojection(home: FabricHome, instance: dg.DagsterInstance,
                     models: ModelResources = CONFIGURED_MODELS) -> tuple[list[str], list[str]]:
    """Recompute the model projections of active parses written by another model than configured.

    Returns (run IDs, failed run IDs); no runs when nothing is stale.
    """
    identities = expected_identities(home.config, models)
    # Every parse written since the last clean check carries these identities, so only a model
    # change needs the check, which reads every active parse's vector rows (it grows with the corpus).
    if home.catalog.state(PROJECTION_MODELS, memo=True) == identities:
        return [], []
    current = home.catalog.current_release()
    active = {m["parse_id"] for m in current.manifest["sources"].values()} if current else set()
    stale = sorted({p for parses in stale_partitions(home, active, models).values() for p in parses})
    if not stale:
        home.catalog.set_state(PROJECTION_MODELS, identities)
        return [], []
    reproject_job = job(home, "reproject_job", models)
    run_ids, failed = [], []
    for keys in runs_over(instance, stale, home.config.sources.partitions_per_run, **run_budget(home, stale)):
        result = _execute(reproject_job, home, instance, range_tags(keys))
        run_ids.append(result.run_id)
        if not result.success:
            failed.append(result.run_id)
    if not failed:
        home.catalog.set_state(PROJECTION_MODELS, identities)
    return run_ids, failed


#: Catalog state: the chunker settings every active parse's chunks were last confirmed to follow.


def run_rechunk(home: FabricHome, instance: dg.DagsterInstance, returning: set[str] = frozenset(),
                resume: list[str] = (), models: ModelResources = CONFIGURED_MODELS
                ) -> tuple[list[str], list[str], list[str]]:
    """Re-chunk the parses whose chunks were cut under another chunker than configured, and
    recompute every projection made from their chunks (``rechunk_job``; units stay).

    Checked are the active parses and the ready or held parses of present sources when the
    chunker settings changed since the last clean check, else only ``returning`` (parses that sources
    point at again, e.g. a reverted file: they may predate a change); an active parse all of whose
    sources point at a newer parsed or ready parse is left to that parse (checked again by the next
    ingest, the settings not yet recorded as checked). ``resume`` are re-chunks
    a killed run left unfinished. Each re-chunked parse goes back to ``parsed`` with the verdicts
    of what it recomputes removed, so the next activation gates it again, a failing verdict
    holds it (``fabric status``) and a killed run is resumed by the next ingest.

    Returns (run IDs, failed run IDs, re-chunked parse IDs).
    """
    catalog = home.catalog
    settings = chunker_settings(home.config, models)
    changed = catalog.state(CHUNKER_SETTINGS, memo=True) != settings
    scope = set(returning)
    deferred = False
    if changed:
        current = catalog.current_release()
        sources = catalog.sources()
        if current:
            # An active parse every source of which now points at a newer parse this ingest has run
            # (a parser upgrade re-parses them under the new chunker too) is about to be replaced:
            # re-chunking it would double the work of an upgrade and count it as "re-chunked". It is
            # checked again by the next ingest (the settings are not recorded as checked), in case
            # its replacement is held at the activation and it stays active.
            pointing = {s.source_key: s.parse_id for s in sources}
            replacing = {r.parse_id for r in catalog.parse_runs(
                {p for p in pointing.values() if p}) if r.status in ("parsed", "ready")}
            for key, meta in current.manifest["sources"].items():
                now = pointing.get(key)
                if now and now != meta["parse_id"] and now in replacing:
                    deferred = True
                else:
                    scope.add(meta["parse_id"])
        scope |= {s.parse_id for s in sources if s.parse_id and s.state in ("present", "access_lost")}
    # Held ones too: a parse held after a re-chunk gets another chance under other settings.
    gated = {r.parse_id for r in catalog.parse_runs(scope) if r.status in ("ready", "held")} if scope else set()
    stale = sorted(set(stale_chunk_partitions(home, gated, models)) | set(resume))
    if not stale:
        if changed and not deferred:
            catalog.set_state(CHUNKER_SETTINGS, settings)
        return [], [], []
    drop_verdicts(catalog, stale, RECHUNK_VERDICTS)
    catalog.set_parse_statuses([StatusUpdate(p, "parsed", "rechunk", "chunks cut under another chunker than "
                                             "configured are being re-chunked") for p in stale])
    rechunk_job = job(home, "rechunk_job", models)
    run_ids, failed = [], []
    for keys in runs_over(instance, stale, home.config.sources.partitions_per_run, **run_budget(home, stale)):
        result = _execute(rechunk_job, home, instance, range_tags(keys))
        run_ids.append(result.run_id)
        if not result.success:
            failed.append(result.run_id)
    ann = home.config.annotation
    if ann.enabled and ann.required_for_activation:
        # Otherwise the re-chunked parses would wait for annotation, out of the next release.
        annotation_job = job(home, "annotation_job", models)
        for keys in plan_annotation_runs(instance, visible_parses(home, stale), home.config.sources.partitions_per_run):
            result = _execute(annotation_job, home, instance, range_tags(keys))
            run_ids.append(result.run_id)
            if not result.success:
                failed.append(result.run_id)
    if not failed and not deferred:
        catalog.set_state(CHUNKER_SETTINGS, settings)
    return run_ids, failed, stale


def ingest(path: str | os.PathLike, home: FabricHome, progress: ProgressCallback | None = None,
           models: ModelResources = CONFIGURED_MODELS) -> IngestSummary:
    """Register ``path`` as a root, scan all roots, parse what changed and activate.

    ``models``: the model roles the runs bind (the configured models; unit tests may bind
    ``FAKE_MODELS``).

    Raises
    ------
    NotADirectoryRoot
        If ``path`` is not an existing directory, or is ``/`` or lies in :data:`SYSTEM_FOLDERS`.
    fabric_resources.catalog.RootOverlapError
        If ``path`` is the Fabric home or inside it (its catalog, artifacts and admin token are
        never sources), or overlaps a registered root.
    fabric_resources.tables.TableStoreUnavailableError
        If the tables are on an object store that cannot be used (bucket missing, credentials
        refused, unreachable): before anything is scanned or run.
    """
    started = time.perf_counter()
    root = admissible_root(path, home)
    home.tables.check_available()
    with ingest_lock(home):
        return _ingest_locked(root, home, started, progress, models)


def admissible_root(path: str | os.PathLike, home: FabricHome) -> Path:
    """``path`` as a root ``home`` may ingest.

    Raises
    ------
    NotADirectoryRoot
        If ``path`` is not an existing directory (unless it is a registered root: then it is
        returned as registered, and the scan reports it ``root-unavailable``), or is ``/`` or lies
        in :data:`SYSTEM_FOLDERS`, or its path is not valid UTF-8.
    fabric_resources.catalog.RootOverlapError
        If ``path`` is the home or inside it: the home's catalog, artifacts and admin token are
        never sources (a root that *holds* the home is fine: the scan never enters the home); or
        if it lies inside a registered root or holds one (before any work: the CLI's one line).
    """
    root = Path(path)
    if not root.is_dir():
        gone = Path(os.path.abspath(root))
        if any(r.path == str(gone) for r in home.catalog.roots()):
            # A registered root that is gone (or now a link loop): the scan still runs, so that its
            # files are marked access_lost and the skip is reported, rather than served unflagged.
            return gone
        raise NotADirectoryRoot(not_a_folder(path))
    resolved = root.resolve()
    try:  # roots are stored as UTF-8 text (SQLite refused this one: a traceback); a folder inside a
        str(resolved).encode("utf-8")  # root with such a name is skipped as `name-not-utf-8`, as a file is
    except UnicodeEncodeError:
        raise NotADirectoryRoot(f"{str(resolved)!r}: its path is not valid UTF-8, so its files cannot be "
                                "keyed; rename the folder") from None
    if resolved == Path(resolved.anchor) or any(resolved.is_relative_to(p) for p in SYSTEM_FOLDERS):
        # The whole file system, or the kernel's pseudo-files: no documents (reading /proc/kmsg blocks).
        raise NotADirectoryRoot(f"{path} ({resolved}) is the file system's root or a system folder "
                                f"({', '.join(map(str, SYSTEM_FOLDERS))}): not a folder of documents")
    home_root = home.layout.root.resolve()
    if root.resolve().is_relative_to(home_root):
        raise RootOverlapError(f"{root.resolve()} is the Fabric home {home_root} or inside it: the home's own "
                               "files (catalog, artifacts, admin token) are never sources")
    for registered in home.catalog.roots():  # checked again when registered; here before any work starts
        other = Path(registered.path)
        if resolved != other and (resolved.is_relative_to(other) or other.is_relative_to(resolved)):
            raise RootOverlapError.between(resolved, other, registered.label)
    return root


def _ingest_locked(root: Path, home: FabricHome, started: float, progress: ProgressCallback | None,
                   models: ModelResources) -> IngestSummary:
    home.catalog.current_release()  # a damaged release row stops here, in one line, before any scan
    instance = dagster_instance(home)
    _finish_interrupted_restore(home, instance)
    if root.is_dir():  # else a registered root that is gone (admissible_root)
        home.catalog.register_root(root)
    with partition_key_memo(instance), heap_frozen():
        return _ingest_with(root, home, instance, started, progress, models)


def _finish_interrupted_restore(home: FabricHome, instance: dg.DagsterInstance) -> None:
    """An in-place snapshot restore killed part-way left what it had yet to forget
    (:mod:`fabric_assets.lifecycle.forgetting`): the ingest, holding the ingest lock, finishes it
    first unless a Dagster run is in progress (then the next ingest, restore or purge does)."""
    from fabric_assets.lifecycle.forgetting import pending
    from fabric_assets.lifecycle.run_history import runs_in_progress

    left = pending(home)
    if left is None or runs_in_progress(instance):
        return
    from fabric_assets.lifecycle.snapshots import finish_interrupted

    finish_interrupted(home, left, instance)


@contextmanager
def heap_frozen() -> Iterator[None]:
    """Within the block, Python's cyclic garbage collector leaves alone every object that existed
    when it began (``gc.freeze``: the loaded models, Dagster's definitions); on exit they are handed
    back to it (``gc.unfreeze``), so cyclic garbage among them is still collected later. Reference
    counting frees objects as always. A process that already froze its heap (a query view's
    ``settle_after_load``) is left as it is.

    Why: a warm process with both embedders and Dagster loaded tracks ~570,000 objects, and a change
    at 10,000 sources allocates enough survivors to set off full collections that walk all of them
    (~0.3-0.5 s each, landing on whichever step runs): a cost that grew with the corpus and the
    process, not with the change (docs/benchmarks.md, "Incremental updates").
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _ingest_with(root: Path, home: FabricHome, instance: dg.DagsterInstance, started: float,
                 progress: ProgressCallback | None, models: ModelResources) -> IngestSummary:
    report = scan(home)
    summary = IngestSummary(scan=report)
    # A parse left `parsed` with verdicts missing was in a run that was killed (no other ingest
    # holds the lock): run it again, or its source would stay out of every release. Unless no
    # source waits for it any more (deleted since): then it is dropped, like a pending one.
    missing = awaited_unfinished(home)
    pending = report.parse_ids_to_run
    if missing or pending:
        # A run the daemon or the UI launched may be writing them now (trial 13b: an ingest beside the
        # daemon's parse run ran its parses again and called them "resumed"). Leave to it what it
        # covers; while a run over untold partitions is in progress, every unfinished parse may be its
        # work, as the source sensor's resume rule holds (sensors.resume_requests).
        covered, untold = partitions_in_progress(instance)
        summary.left_to_runs = {p: covered[p] for p in [*pending, *missing] if p in covered}
        if untold:
            summary.left_to_runs.update({p: untold[0] for p in missing if p not in covered})
        missing = {p: v for p, v in missing.items() if p not in summary.left_to_runs}
        pending = [p for p in pending if p not in summary.left_to_runs]
    summary.retried = sorted(missing)
    # Killed after its units were written (a re-chunk, or a parse run past its parser): re-chunk only.
    resume = [p for p in summary.retried if rechunk_only(missing[p])]
    to_run = list(dict.fromkeys([*pending, *(p for p in summary.retried if p not in resume)]))
    summary.run_ids, summary.failed_runs = run_pending(home, instance, to_run, progress, models)
    # A chunking change leaves parses with chunks cut under the old chunker; sources that point at
    # an existing parse again may bring one back that predates a change.
    keys = {*report.new, *report.changed, *report.returned, *report.touched, *report.reparsed, *dict(report.moved).values()}
    returning = {s.parse_id for s in home.catalog.sources(keys=keys) if s.parse_id} if keys else set()
    summary.rechunk_run_ids, rechunk_failed, summary.rechunked = run_rechunk(home, instance, returning, resume,
                                                                             models)
    summary.failed_runs += rechunk_failed
    # A model change (config or weights) leaves active parses with vectors of the old model.
    summary.reproject_run_ids, reproject_failed = run_reprojection(home, instance, models)
    summary.failed_runs += reproject_failed
    if rechunk_failed:
        # A fault of Fabric left re-chunked parses `parsed`, their rows half rewritten in place: an
        # activation now would publish a release without their sources. The current release keeps
        # serving them; the next ingest resumes the re-chunk, then activates.
        summary.activation = {"release_id": home.catalog.current_release_id(), "published": False}
    else:
        summary.activation_run_id, summary.activation = run_activation(home, instance, models)
    if home.config.annotation.enabled and not rechunk_failed:
        # Annotation follows activation (or, when required for activation, precedes the next one);
        # the second activation publishes the new annotation and graph table versions.
        summary.annotation_run_ids, summary.annotation_failed_runs = run_annotation(home, instance, models)
        if summary.annotation_run_ids:
            summary.activation_run_id, summary.activation = run_activation(home, instance, models)
    summary.failed = failed_sources(home, set(to_run))
    summary.seconds = time.perf_counter() - started
    return summary
