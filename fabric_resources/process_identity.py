"""Which process is which, across process-ID reuse and wall-clock steps (Linux ``/proc``).

A process ID alone does not name a process: IDs are reused. Its start, as ``psutil`` gives it
(``create_time``), is boot time plus start ticks, and boot time is recomputed from the wall clock,
so a clock step (NTP, a resumed VM) moves it. The start ticks of ``/proc/<pid>/stat`` (clock ticks
since boot) do not move, and the boot ID tells this boot from the last.
"""

from __future__ import annotations


def start_ticks(pid: int) -> int | None:
    """Field 22 (``starttime``) of ``/proc/<pid>/stat``, or None (no such process, or no procfs)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        # The command name (field 2) is in parentheses and may hold spaces and ')': split after the last one.
        return int(stat[stat.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def boot_id() -> str:
    """This boot's ID (``/proc/sys/kernel/random/boot_id``), or ``"?"`` where there is none."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or "?"
    except OSError:
        return "?"


__all__ = ["boot_id", "start_ticks"]
