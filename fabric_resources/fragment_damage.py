"""Which parses a table's unreadable data files may have held, told without reading those files.

A Lance table is a list of fragments, each one data file. A file lost, emptied or cut short fails
every scan of the table; yet its rows belong to some parses only. Each write of a parse's
partition records how many rows the parse has in each table
(:func:`~fabric_resources.catalog.record_row_counts`), so the rows the *readable* fragments hold,
counted per parse, tell which parses may have lost rows to the others (:func:`lost_rows`):

- ``fabric repair`` (:mod:`fabric_assets.lifecycle.repair`) re-derives every such parse;
- a reader that may see some parses only (the query side, which reads the visible sources of a
  release) reads on without the unreadable fragments when none of its parses lost a row to them,
  and the rows those fragments held are accounted for by parses it does not read
  (:func:`unseen_by`): a document withheld since the release, whose own ingest wrote the damaged
  fragment, then changes nothing such a reader sees, as in a home that never had it.

The operator's ``fabric status`` still names the damage (:meth:`TableStore.version_problem
<fabric_resources.tables.TableStore.version_problem>`); a client's status leaves out what it could
only learn about documents it may not see.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow.compute as pc

from fabric_resources.catalog import row_counts
from fabric_resources.object_store import TableStoreUnavailableError, store_problem
from fabric_resources.tables import live_rows

if TYPE_CHECKING:
    import lance

    from fabric_resources.home import FabricHome


@dataclass
class FragmentCensus:
    """One table version's fragments: the unreadable ones by their live rows (from the manifest,
    no data read), and the parse of each row of the others."""

    #: Fragment ID → its live rows, for each fragment whose files cannot be read.
    damaged: dict[int, int] = field(default_factory=dict)
    #: Parse ID → its rows in the readable fragments.
    live: Counter = field(default_factory=Counter)
    #: The parses of each readable fragment's first and last row (where a merge may cut a parse).
    edges: set[str] = field(default_factory=set)

    @property
    def damaged_rows(self) -> int:
        return sum(self.damaged.values())


def census(ds: lance.LanceDataset) -> FragmentCensus:
    """:class:`FragmentCensus` of ``ds``: a fragment is unreadable when Lance's ``validate`` fails
    on it (a file missing, short, without a footer) or its ``parse_id`` column cannot be read.

    Raises
    ------
    TableStoreUnavailableError
        If the object store itself cannot be used (nothing is said about the data then).
    """
    out = FragmentCensus()
    for fragment in ds.get_fragments():
        try:
            fragment.validate()
            ids = fragment.to_table(columns=["parse_id"]).column("parse_id")
        except (OSError, ValueError, RuntimeError) as exc:  # RuntimeError: "Encountered corrupt file"
            problem = store_problem(exc)
            if problem is not None:
                raise TableStoreUnavailableError(f"the tables cannot be used: {problem}", problem=problem) from None
            out.damaged[fragment.fragment_id] = live_rows(fragment)
            continue
        if len(ids):
            out.live.update(dict(zip(*(c.to_pylist() for c in pc.value_counts(ids).flatten()))))
            out.edges.update((ids[0].as_py(), ids[-1].as_py()))
    return out


def lost_rows(recorded: int | None, live: int, at_an_edge: bool) -> bool:
    """Whether a parse may have lost rows of a table to its unreadable fragments: with the count its
    last write recorded (:func:`~fabric_resources.catalog.record_row_counts`), exactly when fewer
    live rows are left (so a parse that never had a row there is not re-derived for nothing);
    without one (a parse an older Fabric wrote), when none is left or a fragment's first or last
    row is its own."""
    if recorded is not None:
        return live != recorded
    return live == 0 or at_an_edge


def unseen_by(found: FragmentCensus, wanted: Collection[str], recorded: Mapping[str, int]) -> bool:
    """Whether a reader of the parses ``wanted`` reads every row of them without the unreadable
    fragments of ``found``: none of them may have lost a row there (:func:`lost_rows`, by
    ``recorded``: parse ID → its rows at its last write, parses with a count only), and the
    other parses' recorded rows missing from the readable fragments add up to at least the rows
    those fragments held (a count recorded by a later write than the version read could
    otherwise hide a wanted parse's rows lost there)."""
    if not found.damaged:
        return True
    if any(lost_rows(recorded.get(p), found.live[p], p in found.edges) for p in wanted):
        return False
    others = sum(max(0, n - found.live[p]) for p, n in recorded.items() if p not in wanted)
    return found.damaged_rows <= others


def recorded_rows(home: FabricHome, table: str) -> dict[str, int]:
    """Parse ID → its rows in ``table`` at its last write, for every parse run with a count."""
    out = {}
    for run in home.catalog.parse_run_overview():
        n = row_counts(run).get(table)
        if n is not None:
            out[run.parse_id] = n
    return out


def unseen_check(home: FabricHome, table: str, wanted: Collection[str]) -> Callable[[lance.LanceDataset], set[int]]:
    """What :meth:`TableStore.read_active_batches
    <fabric_resources.tables.TableStore.read_active_batches>` asks when a scan of ``table`` fails:
    the unreadable fragments a reader of ``wanted`` may read on without (:func:`unseen_by`), or
    none. Counts and reads nothing until a scan fails."""
    def check(ds: lance.LanceDataset) -> set[int]:
        found = census(ds)
        return set(found.damaged) if unseen_by(found, wanted, recorded_rows(home, table)) else set()

    return check


def damage_unseen(home: FabricHome, table: str, version: int, wanted: Collection[str]) -> bool:
    """Whether a reader of the parses ``wanted`` reads table ``table`` at ``version`` whole,
    every unreadable fragment there held by other parses (:func:`unseen_by`); False when the
    version itself cannot be opened or the store cannot be used."""
    try:
        ds = home.tables.dataset(table, version)
        return ds is not None and unseen_by(census(ds), wanted, recorded_rows(home, table))
    except (TableStoreUnavailableError, OSError, ValueError, RuntimeError):
        return False
