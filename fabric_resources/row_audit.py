"""Rows changed behind Fabric's back: each parse's live rows in a table against what its last
write recorded.

Every write of a parse's partition records how many rows the parse has in each table it wrote
(:func:`~fabric_resources.catalog.record_row_counts`). Rows removed from (or added to) a table by
anything else — a Lance ``delete`` run by hand, a tool that rewrote the table, a copy of another
home's files — keep every data file readable, so neither Lance's ``validate`` nor ``fabric repair``'s
fragment check sees them; the next activation pins that version and the release serves those
parses with rows missing (the vector digests then turn the dense channel off for every query).
:func:`changed_rows` finds them by counting; ``fabric status`` names them and ``fabric repair``
re-derives the parses named.

A parse written by an older Fabric (no count recorded for a table) is not judged for that table.
A parse being rewritten while the rows are counted (its write lands between the count and the
read of its record) can be named once; its recorded count changes with the write, so the two
readings of the catalog around the count tell most such parses apart (they are skipped).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fabric_resources.catalog import ParseRun, ParseRunOverview, row_counts
from fabric_resources.home import FabricHome
from fabric_resources.object_store import TableStoreUnavailableError
from fabric_resources.schema import TABLES


@dataclass(frozen=True)
class RowsChanged:
    """One table whose latest version holds, for some parses, another number of rows than their
    last write recorded."""

    table: str
    #: ``(parse ID, recorded rows, live rows)``, in parse-ID order.
    parses: tuple[tuple[str, int, int], ...]

    @property
    def missing(self) -> int:
        """Rows fewer than recorded, summed over the parses that lost rows."""
        return sum(max(0, recorded - live) for _, recorded, live in self.parses)

    @property
    def extra(self) -> int:
        """Rows more than recorded, summed over the parses that gained rows."""
        return sum(max(0, live - recorded) for _, recorded, live in self.parses)

    def describe(self) -> str:
        """``"chunk_vectors: 2 parse(s), 3 row(s) fewer and 0 more than written"``."""
        return (f"{self.table}: {len(self.parses)} parse(s), {self.missing} row(s) fewer and {self.extra} more "
                "than written")


def _recorded(home: FabricHome, parse_ids: list[str]) -> dict[str, dict[str, int]]:
    return {r.parse_id: row_counts(r) for r in home.catalog.parse_runs(parse_ids)}


def changed_rows(home: FabricHome, parse_ids: Iterable[str], tables: Iterable[str] | None = None,
                 runs: Iterable[ParseRun | ParseRunOverview] | None = None) -> list[RowsChanged]:
    """The tables (all of :data:`~fabric_resources.schema.TABLES` by default, in that order) whose
    latest version holds another number of rows for some of ``parse_ids`` than each one's last
    write recorded; tables with none are left out. Reads each table's ``parse_id`` column once
    (:meth:`~fabric_resources.tables.TableStore.parse_row_counts`), the parse runs once (or takes
    ``runs``, read before, as ``fabric status`` has them: decoding 100k runs' counts costs ~0.5 s) and the
    runs of the parses found changed again.

    A table that cannot be scanned (a data file lost or cut short) is left out: ``fabric status``
    names it as unreadable and ``fabric repair`` plans it by its damaged fragments.

    Raises
    ------
    TableStoreUnavailableError
        If the object store holding the tables cannot be used.
    fabric_resources.catalog.CatalogDamagedError
        If a parse run's counts cannot be decoded.
    """
    wanted = set(parse_ids)
    if not wanted:
        return []
    if runs is None:
        before = _recorded(home, sorted(wanted))
    else:
        before = {r.parse_id: row_counts(r) for r in runs if r.parse_id in wanted}
    live = {}
    for name in (tables if tables is not None else TABLES):
        try:
            if home.tables.exists(name):
                live[name] = home.tables.parse_row_counts(name)
        except TableStoreUnavailableError:
            raise
        except (OSError, ValueError, RuntimeError):  # Lance: RuntimeError for a corrupt file
            continue
    suspects: set[str] = set()
    for name, counts in live.items():
        # Status audits every active parse (100k at a time): each table is compared as a whole,
        # the recorded (parse, rows) pairs the table does not hold being a set difference in C.
        # A parse the table holds no row of matches a record of 0 (value_counts has no zeros).
        on_record = {pid: c[name] for pid, c in before.items() if name in c}
        differ = on_record.items() - counts.items()
        suspects.update(pid for pid, n in differ if n or pid in counts)
    after = _recorded(home, sorted(suspects)) if suspects else {}
    out = []
    for name, counts in live.items():
        parses = []
        for pid in sorted(suspects):
            recorded = after.get(pid, {}).get(name)
            if recorded is None or before.get(pid, {}).get(name) != recorded:
                continue  # not recorded (an older Fabric's write), or rewritten while counted
            n = counts.get(pid, 0)
            if n != recorded:
                parses.append((pid, recorded, n))
        if parses:
            out.append(RowsChanged(name, tuple(parses)))
    return out
