"""A long-running child command (``dagster dev`` under ``fabric ui``) that stops when its parent is told to.

``subprocess.call`` left ``dagster dev`` and every service it starts (webserver, daemon, code server)
running when ``fabric ui`` got SIGTERM (``kill``): the parent died at once and nothing told the child.
Started from a script (``fabric ui &``), the shell also sets SIGINT to ignored, which the child
inherits; ``dagster dev`` maps SIGTERM to whatever SIGINT does, so it then ignored both and only
SIGKILL stopped it, leaving its services behind (trial 16c, left open until stop 50).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence

#: Seconds the child has to shut down after the SIGINT passed on to it, before its whole process
#: group is killed (``dagster dev`` stops its services in a few seconds).
GRACE_S = 30.0


def run_until_stopped(cmd: Sequence[str], grace_s: float = GRACE_S) -> int:
    """Run ``cmd`` in a process group of its own until it exits; SIGTERM or SIGHUP to this process
    (and SIGINT, unless this process ignores it) is passed on to the child as SIGINT, its graceful
    stop; a child still running ``grace_s`` seconds later has its group killed (SIGKILL).

    The child starts with SIGINT at its default disposition whatever this process inherited, so a
    Python child turns it into ``KeyboardInterrupt``. SIGTSTP (Ctrl-Z) stops the child's group
    with this process, and the group goes on when this process is continued.

    Returns
    -------
    int
        The child's exit code, or 128 + the number of the first signal that stopped this process
        (130 for SIGINT, 143 for SIGTERM: the shell's convention).

    Raises
    ------
    OSError
        ``cmd`` cannot be started.
    """
    inherited = signal.getsignal(signal.SIGINT)
    # A handled signal is reset to its default in the child at exec; an ignored one stays ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        child = subprocess.Popen(list(cmd), process_group=0)
    finally:
        signal.signal(signal.SIGINT, inherited)
    stopped: list[int] = []

    def pass_on(signo: int, _frame) -> None:
        stopped.append(signo)
        try:
            os.killpg(child.pid, signal.SIGINT)
        except ProcessLookupError:
            pass

    def suspend(_signo: int, _frame) -> None:
        # Ctrl-Z reaches the terminal's foreground group, which the child's own group is not: stop
        # the child's group with this process, and let it go on when this process does (`fg`, `bg`).
        try:
            os.killpg(child.pid, signal.SIGSTOP)
        except ProcessLookupError:
            return
        os.kill(os.getpid(), signal.SIGSTOP)
        try:
            os.killpg(child.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    watched = [signal.SIGTERM, signal.SIGHUP] + ([signal.SIGINT] if inherited is not signal.SIG_IGN else [])
    previous = {s: signal.signal(s, pass_on) for s in watched}
    if signal.getsignal(signal.SIGTSTP) is not signal.SIG_IGN:
        previous[signal.SIGTSTP] = signal.signal(signal.SIGTSTP, suspend)
    deadline = None
    try:
        while True:
            try:
                code = child.wait(timeout=0.5)  # short waits: a handler ran meanwhile starts the grace time
                break
            except subprocess.TimeoutExpired:
                if stopped and deadline is None:
                    deadline = time.monotonic() + grace_s
                if deadline is not None and time.monotonic() > deadline:
                    deadline = float("inf")
                    try:
                        os.killpg(child.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 128 + stopped[0] if stopped else code
