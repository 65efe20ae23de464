"""Query-process memory helpers (fabric_query.memory)."""

from __future__ import annotations

import gc
import weakref

from fabric_query.memory import settle_after_load


class _Node:
    pass


def test_settle_freezes_long_lived_objects_and_collects_garbage_first():
    """guards against: the freeze being skipped (full collections rescan a view's rows), or cyclic
    garbage that exists at the freeze being frozen with it (it would never be freed)."""
    gc.unfreeze()
    try:
        rows = [{"row": i} for i in range(1000)]
        settle_after_load(False)
        assert gc.get_freeze_count() == 0

        garbage = _Node()
        garbage.self = garbage  # a reference cycle: only the cyclic collector can free it
        alive = weakref.ref(garbage)
        del garbage
        settle_after_load(True)
        assert gc.get_freeze_count() >= len(rows)
        assert alive() is None
    finally:
        gc.unfreeze()
