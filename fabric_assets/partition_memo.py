"""Answer Dagster's repeated reads of the ``parses`` partition keys from one read per in-process run.

Why: Dagster 1.13 turns a run's partition range ``[start, end]`` into keys by loading *every*
key of the dynamic partitions definition and slicing (``get_partition_keys_in_range``), and
it does so again for each asset context, input, output and planned event: 54 loads in one
parse run over two partitions (cProfile of an incremental round, ``docs/benchmarks.md``).
Each load reads all N keys from the instance's SQLite (3.0 ms at 330 keys, 7.7 ms at 2,030,
timed directly), so a two-document change paid ~54 such loads, a term linear in the corpus
size on top of their fixed cost. With the memo a run pays for one load.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import dagster as dg

#: The instance methods the memo stands in for while it is active.
_READS = ("get_dynamic_partitions", "has_dynamic_partition")
_WRITES = ("add_dynamic_partitions", "delete_dynamic_partition")


@contextmanager
def partition_key_memo(instance: dg.DagsterInstance) -> Iterator[None]:
    """Within the block, serve ``instance``'s dynamic partition keys from one read per definition.

    Correctness rests on two facts. A run's range is fixed before it starts, and keys keep
    their insertion order, so keys another process adds meanwhile land after every key of
    the range and cannot change its slice. And writes made through ``instance`` in the block
    keep the memo true for this process: ``add_dynamic_partitions`` appends the keys it added
    (as Dagster does), ``delete_dynamic_partition`` drops the memo. ``has_dynamic_partition``
    answers ``True`` from the memo and asks the instance otherwise, so a key added elsewhere is
    still found.

    The instance's own methods are restored on exit, also when the block raises. Nested
    blocks over the same instance share the outer memo.
    """
    if any(name in vars(instance) for name in _READS):
        yield  # already inside a memo for this instance
        return
    originals = {name: getattr(instance, name) for name in (*_READS, *_WRITES)}
    memo: dict[str, tuple[list[str], frozenset[str]]] = {}

    def load(name: str) -> tuple[list[str], frozenset[str]]:
        if name not in memo:
            keys = list(originals["get_dynamic_partitions"](name))
            memo[name] = (keys, frozenset(keys))
        return memo[name]

    def get_dynamic_partitions(partitions_def_name: str) -> Sequence[str]:
        return list(load(partitions_def_name)[0])  # a copy: callers may not mutate the memo

    def has_dynamic_partition(partitions_def_name: str, partition_key: str) -> bool:
        if partition_key in load(partitions_def_name)[1]:
            return True
        return originals["has_dynamic_partition"](partitions_def_name, partition_key)

    def add_dynamic_partitions(partitions_def_name: str, partition_keys: Sequence[str]):
        result = originals["add_dynamic_partitions"](partitions_def_name, partition_keys)
        if partitions_def_name in memo:
            # Dagster appends the keys it did not hold, in the order given: so does the memo
            # (reloading every key after each addition cost 55 ms at 10,000 keys).
            keys, known = memo[partitions_def_name]
            added = [k for k in dict.fromkeys(partition_keys) if k not in known]
            memo[partitions_def_name] = (keys + added, known | frozenset(added))
        return result

    def delete_dynamic_partition(partitions_def_name: str, *args, **kwargs):
        memo.pop(partitions_def_name, None)
        return originals["delete_dynamic_partition"](partitions_def_name, *args, **kwargs)

    overrides = {"get_dynamic_partitions": get_dynamic_partitions, "has_dynamic_partition": has_dynamic_partition,
                 "add_dynamic_partitions": add_dynamic_partitions, "delete_dynamic_partition": delete_dynamic_partition}
    for name, fn in overrides.items():
        setattr(instance, name, fn)
    try:
        yield
    finally:
        for name in overrides:
            vars(instance).pop(name, None)
