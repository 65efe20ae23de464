"""Group parse partitions into few runs, each a contiguous range (pure)."""

from __future__ import annotations

from collections.abc import Sequence


def partition_ranges(ordered_keys: Sequence[str], wanted: Sequence[str], per_run: int) -> list[list[str]]:
    """Split ``wanted`` into runs of at most ``per_run`` keys, each contiguous in ``ordered_keys``.

    A Dagster run over dynamic partitions covers a *range* ``[start, end]`` in
    the order partitions were added (STACK_NOTES), so a run may only hold keys
    with consecutive positions; a gap starts a new run. Keys missing from
    ``ordered_keys`` are ignored. Returns the runs in partition order.
    """
    if per_run < 1:
        raise ValueError("per_run must be positive")
    position = {k: i for i, k in enumerate(ordered_keys)}
    positions = sorted({position[k] for k in wanted if k in position})
    runs: list[list[str]] = []
    for pos in positions:
        if runs and position[runs[-1][-1]] == pos - 1 and len(runs[-1]) < per_run:
            runs[-1].append(ordered_keys[pos])
        else:
            runs.append([ordered_keys[pos]])
    return runs
