"""No orphans: a unit's processes die with it.

A unit's worker process (a slot of the local executor) leads a process group of its own,
and the case workers it starts (``pallas_verify._worker``) join it; stopping the unit
kills the whole group (``kill_group``), so a cancelled or timed-out unit leaves nothing
behind. Every such process also follows its parent (``follow_parent``): once its parent is
gone, whatever killed it (SIGKILL, a Ray force-cancel, the out-of-memory killer), it exits
within a second instead of holding memory as an orphan. Starting its own group also keeps
a terminal's Ctrl-C, meant for the driver, away from the unit's processes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

__all__ = ["follow_parent", "kill_group", "lead_group"]

_WATCH_S = 0.5


def lead_group() -> None:
    """Make this process the leader of a new process group (its children join it)."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)


def kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads, and ``pid`` itself (it may not lead one
    yet). Its members outlive a leader that already died, so this still reaches them."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def follow_parent() -> None:
    """Exit this process (status 0, no cleanup) soon after its parent process is gone."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_WATCH_S)
        os._exit(0)

    if parent > 1:
        threading.Thread(target=watch, name="pallas-verify-follow-parent", daemon=True).start()
