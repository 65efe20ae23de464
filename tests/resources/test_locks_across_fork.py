"""A catalog lock held by a process that forks: the child inherits the lock's file descriptor (a
flock belongs to the open file description, which both share) or its PostgreSQL session (the
advisory lock belongs to the session). A child that leaves the ``with`` block (an exception, or
``sys.exit``, unwinding the frames it copied) must leave the parent's lock held."""

from __future__ import annotations

import os

import pytest


class _ChildDone(Exception):
    """Raised in the forked child to unwind the ``with`` block it inherited."""


@pytest.mark.parametrize("name", ["ingest", "sources"])
def test_a_child_forked_inside_a_lock_block_leaves_the_parents_lock_held(catalog, name):
    """guards against (trial 23e): the child's unwinding ran the lock's release on what it shared
    with the parent (``flock(LOCK_UN)``; ``pg_advisory_unlock`` then a closed session), so the
    parent went on as the holder of a lock nobody held: another ingest, cleanup or purge could
    start beside it. A child now only lets go of its own copy."""
    parent = os.getpid()
    try:
        with catalog.exclusive(name):
            pid = os.fork()
            if pid == 0:
                raise _ChildDone  # the child leaves the block, as an exception or sys.exit would
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0, "the child's release of its copy failed"
            assert catalog.lock_held(name) is True, "the forked child let go of the parent's lock"
    except BaseException as exc:
        if os.getpid() != parent:  # the child, out of the block: never back into pytest
            os._exit(0 if isinstance(exc, _ChildDone) else 1)
        raise
    assert catalog.lock_held(name) is False
    with catalog.exclusive(name):  # the parent's release still works
        assert catalog.lock_held(name) is True
