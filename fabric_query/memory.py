"""Process memory of the query side: glibc's heap arenas, freed-memory return, and the cyclic
garbage collector's view of long-lived rows.

Lance reads on many Rust threads, and glibc gives busy threads their own heap arenas, whose freed
pages mostly stay resident: at 100k chunks, streaming the vector table once left ~60-85 MB behind
and every further read added more; with one arena one read left ~31 MB and a second none, with
two ~35 MB each
(``docs/benchmarks.md``, "Query memory"). Both functions are no-ops off glibc (macOS, musl).
"""

from __future__ import annotations

import ctypes
import gc

import pyarrow as pa

#: glibc's ``mallopt`` parameter number for the arena limit (``M_ARENA_MAX``, malloc.h).
_M_ARENA_MAX = -8


def _glibc():
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


_LIBC = _glibc()
_ARENAS_SET: list[int] = []


def limit_malloc_arenas(arenas: int) -> bool:
    """Cap glibc's heap arenas for the whole process at ``arenas`` (0: leave glibc's default, 8 per
    core). Applies to arenas created from now on, so call it before large reads. Returns whether a
    cap was set; the first call of a process wins (it is process-wide)."""
    if _LIBC is None or arenas <= 0 or _ARENAS_SET:
        return False
    _ARENAS_SET.append(arenas)
    return bool(_LIBC.mallopt(_M_ARENA_MAX, arenas))


def release_freed_memory() -> None:
    """Hand memory freed after a large read back to the OS: Arrow's pool and the C heap."""
    pa.default_memory_pool().release_unused()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def settle_after_load(freeze: bool) -> None:
    """After a large long-lived load (a release view's rows, maps, matrices): with ``freeze``, run
    one collection and move every object the cyclic garbage collector tracks into its permanent
    generation (``gc.freeze``), so later full collections do not rescan them; then
    :func:`release_freed_memory`. Frozen objects are still freed by reference counting; only cyclic
    garbage that exists at the freeze would stay, hence the collection first.

    At 100k chunks a full collection of the warm query process took 39 ms (timed next to another
    job); settling after view loads took the English p99 from ~95 ms to ~63-69 ms
    (``docs/benchmarks.md``, "Query memory").
    """
    if freeze:
        gc.collect()
        gc.freeze()
    release_freed_memory()
