"""How a parse-partitioned projection asset is declared and run.

Declared from the registry (:mod:`fabric_assets.projections`): :func:`asset_args` for an
``@dg.asset``, :func:`spec` and :func:`check_specs` for an ``@dg.multi_asset``.

Run through a :class:`PartitionStep`, the scaffold every partitioned asset repeats, so that an
asset body only reads, calls pure code and hands over rows::

    step = PartitionStep(context, fabric.open(), "chunks")      # live parse IDs of the run
    units = step.read("units")                                   # rows of the live parses
    for pk, mine in step.by_parse(units):
        rows = pure_compute(pk, mine)
        step.add_rows(rows)                                      # this parse's new rows
        step.verdict(CHUNK_IDS_ARE_UNIQUE, pk, ids_unique(rows, "chunk_id"))
        step.partition_metadata(pk, {"rows": rows.num_rows})
    yield from step.finish()      # replace rows → materializations → verdicts + check results

Rows replace those of every partition of the run (the run's keys, failed parses included, so
nothing stale stays behind); the verdicts are recorded in the catalog (what activation reads) only
after the rows are stored, each check summarised as one Dagster check result.

A stage the configuration switches off (``Projection.enabled_by``) is not in the jobs
(``fabric_assets.jobs``): the step it is made from says it was skipped, for the partitions of its
run, when it finishes (:meth:`PartitionStep.finish`). Selected all the same (the asset picked by
hand in the UI, ``annotation_job`` run while annotation is off), it is declared optional and ends
with :meth:`PartitionStep.skip` instead of :meth:`PartitionStep.finish`. Either way Dagster records
it as skipped, not as an empty materialization (:mod:`fabric_assets.skips`)::

    if not step.enabled:
        step.skip()
        return
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from fabric_assets.gate import Verdict
from fabric_assets.partition_memo import partition_key_memo
from fabric_assets.partitions import PARTITIONED
from fabric_assets.projections import (CHUNKER_SETTINGS, REQUIRED_VERDICTS, Stage, downstream_of, projection,
                                       switched_off_below)
from fabric_assets.skips import report_skipped
from fabric_assets.source_tags import tag_run
from fabric_assets.verdicts import live_parse_ids, record, record_and_summarise
from fabric_resources.catalog import StatusUpdate, drop_verdicts, record_row_counts
from fabric_resources.home import FabricHome
from fabric_resources.identity import is_parse_id
from fabric_resources.schema import TABLES
from fabric_resources.tables import TableRemovedError


def check_specs(*keys: str) -> list[dg.AssetCheckSpec]:
    """The Dagster check specs of the projections ``keys``, in registry order."""
    return [dg.AssetCheckSpec(c.name, asset=k, description=c.description or None)
            for k in keys for c in projection(k).checks]


def asset_args(key: str) -> dict[str, Any]:
    """Decorator arguments of the ``@dg.asset`` of projection ``key``: its name, the parse
    partitions (many per run), deps, group and check specs. The code version is set when the
    definitions load (``projections.code_version``).

    Raises
    ------
    ValueError
        If a configuration switch can turn the stage off: declare it with :func:`optional_asset_args`.
    """
    p = projection(key)
    if p.enabled_by is not None:
        raise ValueError(f"{key} is switched by {p.enabled_by}: declare it with optional_asset_args")
    return {**PARTITIONED, "name": key, "deps": list(p.upstream), "group_name": p.stage.value,
            "check_specs": check_specs(key)}


def optional_asset_args(key: str, description: str) -> dict[str, Any]:
    """Decorator arguments of the ``@dg.multi_asset`` of projection ``key``, a stage a configuration
    switch can turn off (``Projection.enabled_by``): as :func:`asset_args`, with the asset's and its
    checks' outputs optional, so that a step that yields nothing is skipped in Dagster rather than
    failed. ``can_subset`` is what makes check outputs optional in Dagster 1.13 (an ``@asset``
    with ``output_required=False`` still requires its checks' results)."""
    return {**PARTITIONED, "name": key, "specs": [spec(key, description)], "check_specs": check_specs(key),
            "can_subset": True}


def spec(key: str, description: str) -> dg.AssetSpec:
    """The ``AssetSpec`` of projection ``key`` inside a ``@dg.multi_asset`` (skippable when a
    configuration switch can turn the stage off)."""
    p = projection(key)
    return dg.AssetSpec(key, deps=list(p.upstream), group_name=p.stage.value, description=description,
                        skippable=p.enabled_by is not None)


class PartitionStep:
    """One run of a partitioned asset over the parse partitions of its Dagster run.

    Parameters
    ----------
    context
        The asset's execution context (its ``partition_keys`` are the run's parse IDs).
    home
        The Fabric home the asset reads and writes.
    *keys
        The projections this asset writes (one, or several for a multi-asset), in registry order.

    Attributes
    ----------
    keys : list of str
        Every parse ID of the run.
    not_parse_ids : list of str
        The run's partition keys that are not parse IDs (added by hand), left out of everything.
    live : list of str
        Those whose parse has not failed (a failed parse is skipped by every projection) and, for a
        step made from units, whose units are written (not ``pending``); read from the catalog on
        first use.
    """

    def __init__(self, context: dg.AssetExecutionContext, home: FabricHome, *keys: str) -> None:
        self.context = context
        self.home = home
        self.config = home.config
        self.projections = tuple(projection(k) for k in keys)
        # A key of the `parses` partitions that is no parse ID (one added by hand in the UI) names no
        # rows and no parse run: left out, so that a backfill over every partition still runs the
        # real ones (the table filters refuse such a key, which failed the whole run).
        self.keys = [k for k in context.partition_keys if is_parse_id(k)]
        self.not_parse_ids = [k for k in context.partition_keys if not is_parse_id(k)]
        if self.not_parse_ids:
            shown = ", ".join(repr(k[:40] + ("…" if len(k) > 40 else "")) for k in self.not_parse_ids[:3])
            context.log.warning(f"{len(self.not_parse_ids)} partition key(s) of the run are not parse IDs and name "
                                f"nothing to compute, left out: {shown}")
        self._rows: dict[str, list[pa.Table]] = {p.key: [] for p in self.projections if p.table}
        self._verdicts: dict[str, dict[str, Verdict]] = {c.name: {} for p in self.projections for c in p.checks}
        self._run_metadata: dict[str, dict[str, Any]] = {p.key: {} for p in self.projections}
        self._partition_metadata: list[tuple[str, str, dict[str, Any]]] = []
        self.versions: dict[str, int | None] | None = None

    @cached_property
    def live(self) -> list[str]:
        # A step made from units (every stage but the canonical one) has nothing to compute for a
        # parse whose units are not written yet: one materialized from the UI before its upstream
        # recorded passing verdicts over no rows, and the parse went live without a chunk.
        made_from_units = any(p.stage is not Stage.CANONICAL for p in self.projections)
        return live_parse_ids(self.home, self.keys, parsed_only=made_from_units)

    @property
    def enabled(self) -> bool:
        """Whether the configuration runs this stage (``Projection.enabled_by``; the step's
        projections share one switch)."""
        return all(p.enabled(self.config) for p in self.projections)

    def skip(self) -> None:
        """End a step whose stage is switched off, or say so for one the run does not plan: no
        materialization and no check result (Dagster then shows the assets skipped, a planned
        check skipped, and skips the steps downstream), one skipped event per asset and partition
        of the run saying which switch is off. A check the gate requires
        (``projections.REQUIRED_VERDICTS``) passes with detail ``disabled`` for each live parse,
        because activation reads it; rows an earlier, enabled run left for the run's partitions
        are removed where the projection says so (``Projection.cleared_when_off``; nothing is
        written when there are none: no new table version).

        Run as the asset's own step, the asset must have been declared with optional outputs
        (:func:`optional_asset_args`, :func:`spec`)."""
        self.tag_run()
        switches = sorted({p.enabled_by for p in self.projections if p.enabled_by})
        for p in self.projections:
            for check in p.check_names:
                if check in REQUIRED_VERDICTS:
                    for pk in self.live:
                        self._verdicts[check].setdefault(pk, {"passed": True, "detail": "disabled"})
            if p.cleared_when_off and p.table and self.home.tables.exists(p.table):
                self.home.tables.replace_partitions(p.table, self.keys, TABLES[p.table].empty_table())
                record_row_counts(self.home.catalog, {p.table: dict.fromkeys(self.keys, 0)})
        for check, verdicts in self._verdicts.items():
            if verdicts:
                record(self.home, check, verdicts)
        report_skipped(self.context, [p.key for p in self.projections],
                       " and ".join(f"{s} is false in the home's config.json" for s in switches))

    def skip_switched_off_below(self) -> list[str]:
        """Skip (:meth:`skip`) the switched-off projections made from this step's that the run does
        not plan (the jobs leave them out), for the run's partitions; return their keys. So a
        partition's page says why it has no materialization of them, the gate gets its
        ``disabled`` verdicts and stale rows go, as when their own step ran and skipped."""
        planned = {k.to_user_string() for k in self.context.job_def.asset_layer.selected_asset_keys}
        below = [k for k in switched_off_below([p.key for p in self.projections], self.config) if k not in planned]
        if below:
            PartitionStep(self.context, self.home, *below).skip()
        return below

    def _key(self, key: str | None) -> str:
        if key is None:
            if len(self.projections) != 1:
                raise ValueError("name the asset key: this step writes several projections")
            return self.projections[0].key
        return key

    def read(self, table: str, columns: list[str] | None = None) -> pa.Table:
        """The rows of ``table`` of the live parses (``columns`` only, when given)."""
        return self.home.tables.read(table, parse_ids=self.live, columns=columns)

    def by_parse(self, rows: pa.Table) -> Iterator[tuple[str, pa.Table]]:
        """Each live parse ID with its rows of ``rows`` (in their order; empty when it has none)."""
        for pk in self.live:
            yield pk, rows.filter(pc.equal(rows.column("parse_id"), pk))

    def add_rows(self, rows: pa.Table, key: str | None = None) -> None:
        """New rows of projection ``key`` (the step's only one when omitted), any parses."""
        self._rows[self._key(key)].append(rows)

    def rows_added(self, key: str | None = None) -> int:
        """How many rows of projection ``key`` were added so far."""
        return sum(t.num_rows for t in self._rows[self._key(key)])

    def verdict(self, check: str, parse_id: str, verdict: Verdict) -> None:
        """The verdict of ``check`` for one parse (recorded by :meth:`finish`)."""
        self._verdicts[check][parse_id] = verdict

    def partition_metadata(self, parse_id: str, values: dict[str, Any], key: str | None = None) -> None:
        """Metadata of one partition's materialization of ``key`` (handed to Dagster by :meth:`finish`)."""
        self._partition_metadata.append((self._key(key), parse_id, values))

    def _add_partition_metadata(self) -> None:
        # Dagster checks each call's partition against the run's range by loading every key of
        # the dynamic partitions (`add_asset_metadata` → `get_partition_keys_in_range`): one load
        # per partition and asset, O(N) each. Inside the memo the whole step pays for one load.
        with partition_key_memo(self.context.instance):
            for key, parse_id, values in self._partition_metadata:
                self.context.add_asset_metadata(values, asset_key=key, partition_key=parse_id)
        self._partition_metadata.clear()

    def tag_run(self) -> int:
        """Tag the Dagster run with the source(s) of each of its partitions
        (``fabric/source:<source key>`` = parse ID, :mod:`fabric_assets.source_tags`), so that the
        UI's run filter finds a partition by its file name; return how many tags were new (the
        first step of a run adds them, the others find them there)."""
        by_parse = self.home.catalog.source_keys_by_parse(self.keys)
        return tag_run(self.context.instance, self.context.run_id,
                       {key: pid for pid, keys in by_parse.items() for key in keys})

    def run_metadata(self, values: dict[str, Any], key: str | None = None) -> None:
        """Metadata of the run's materialization of ``key`` (beside ``lance_version``)."""
        self._run_metadata[self._key(key)].update(values)

    def write(self, partitions: Sequence[str] | None = None) -> dict[str, int | None]:
        """Replace the rows of ``partitions`` (the run's keys by default) in every table of the step
        with the rows added; return each table's new Lance version. Over no partitions nothing is
        written (the version is ``None``): the tables keep their rows and their version."""
        scope = self.keys if partitions is None else list(partitions)
        self.versions = {}
        if scope:
            self._refuse_removed_tables(list(self._rows))
        counts: dict[str, dict[str, int]] = {}
        rewritten: set[str] = set()
        for key, tables in self._rows.items():
            rows = pa.concat_tables(tables) if tables else TABLES[key].empty_table()
            rewritten |= self._ids_rewritten(key, scope, rows)
            self.versions[key] = self.home.tables.replace_partitions(key, scope, rows) if scope else None
            counts[key] = rows_per_parse(scope, rows)
        record_row_counts(self.home.catalog, counts)
        self._send_downstream_back(rewritten)
        return self.versions

    def _below(self) -> tuple[str, ...]:
        """The gate verdicts of the projections made from this step's, not its own."""
        own = {p.key for p in self.projections}
        return tuple(dict.fromkeys(c for p in self.projections for q in downstream_of(p.key) if q.key not in own
                                   for c in q.check_names))

    def _ids_rewritten(self, key: str, scope: Sequence[str], rows: pa.Table) -> set[str]:
        """The parses of ``scope`` whose rows of ``key`` (a table whose IDs the tables made from it
        name: units, chunks, windows) get other IDs than they have now, among those with a verdict
        of a projection made from them recorded (made from the rows being replaced)."""
        column = ROW_IDS.get(key)
        below = set(self._below())
        if column is None or not scope or not below or not self.home.tables.exists(key):
            return set()
        made_from = [r.parse_id for r in self.home.catalog.parse_runs(list(scope))
                     if r.status != "failed" and below & r.verdicts.keys()]
        if not made_from:
            return set()
        old = self.home.tables.read(key, parse_ids=made_from, columns=["parse_id", column])

        def ids(table: pa.Table, pk: str) -> set[str]:
            return set(table.filter(pc.equal(table.column("parse_id"), pk)).column(column).to_pylist())

        return {pk for pk in made_from if ids(old, pk) != ids(rows, pk)}

    def _send_downstream_back(self, parse_ids: set[str]) -> None:
        """Parses whose rows of this step got other IDs (chunks cut under another chunker, one asset
        materialized from the UI): the verdicts of what is made from those rows go, and a gated
        (ready or held) parse goes back to ``parsed``, so no release pins the new rows beside
        projections made from the old ones until a run makes those again (``rechunk_job``: the
        source sensor or the next ingest runs it). Its rows are rewritten in place, so until then
        the current release keeps serving its old ones (hostile trial 13b: `chunks` alone
        materialized after a chunking change left the parse ready, and the next release served new
        chunks beside old lexical documents, vectors and windows: the index no longer the
        release's, every query on the scan fallback)."""
        if not parse_ids:
            return
        if any(p.key == "chunks" for p in self.projections):
            # Chunks cut here under another chunker than the one the last ingest checked for: that
            # check is no longer clean (a chunking setting changed and changed back, with this run
            # between: the next ingest found the settings as it left them and re-chunked nothing).
            self.home.catalog.set_state(CHUNKER_SETTINGS, None)
        below = self._below()
        runs = self.home.catalog.parse_runs(sorted(parse_ids))
        drop_verdicts(self.home.catalog, parse_ids, below)
        names = ", ".join(p.key for p in self.projections)
        self.home.catalog.set_parse_statuses([
            StatusUpdate(r.parse_id, "parsed", "rederive", f"{names} rewritten with other IDs: what is made from "
                         "them is made again before it is served") for r in runs if r.status in ("ready", "held")])
        self.context.log.warning(f"{len(parse_ids)} parse(s) got other {names} IDs than what is made from them "
                                 f"names; they wait for {', '.join(below)} to be made again (rechunk_job)")

    def _refuse_removed_tables(self, names: list[str]) -> None:
        """Raises :class:`~fabric_resources.tables.TableRemovedError` if the current release pins a
        version of one of ``names`` that the home no longer holds any file of."""
        release = self.home.catalog.current_release()
        pinned = release.manifest["tables"] if release else {}
        for name in names:
            if pinned.get(name) is not None and not self.home.tables.exists(name):
                raise TableRemovedError(f"table {name} holds no file but release {release.release_id} pins its "
                                        f"version {pinned[name]}: restore it (`fabric snapshot restore`); writing "
                                        "it afresh would drop every other parse's rows from the next release")

    def finish(self) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
        """Write (unless :meth:`write` ran), tag the run with its partitions' sources
        (:meth:`tag_run`), then yield one materialization per projection (``lance_version`` and the
        run metadata), then record each check's verdicts in the catalog and yield its summary, in
        registry order; last, skip the switched-off projections made from these that the run does
        not plan (:meth:`skip_switched_off_below`)."""
        if self.versions is None:
            self.write()
        self.tag_run()
        self._add_partition_metadata()
        single = len(self.projections) == 1
        for p in self.projections:
            metadata = ({"lance_version": self.versions[p.key]} if p.table else {}) | self._run_metadata[p.key]
            yield dg.MaterializeResult(metadata=metadata) if single else dg.MaterializeResult(
                asset_key=p.key, metadata=metadata)
        for p in self.projections:
            for c in p.checks:
                yield record_and_summarise(self.home, c.name, p.key, self._verdicts[c.name])
        self.skip_switched_off_below()


#: The ID column of each table whose IDs the tables made from it name.
ROW_IDS = {"units": "unit_id", "chunks": "chunk_id", "context_windows": "window_id", "colbert_windows": "window_id"}


def rows_per_parse(parse_ids: Sequence[str], rows: pa.Table) -> dict[str, int]:
    """How many of ``rows`` each of ``parse_ids`` has (0 for one with none), by their ``parse_id``."""
    counts = dict.fromkeys(parse_ids, 0)
    if rows.num_rows:
        for entry in pc.value_counts(rows.column("parse_id")).to_pylist():
            counts[entry["values"]] = entry["counts"]
    return counts
