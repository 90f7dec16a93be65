"""No orphans: a unit's processes die with it.

A unit's worker process (a slot of the local executor) leads a process group of its own
from birth (``process.Child``), and the case workers it starts (``pallas_verify._worker``)
join it; stopping the unit kills its whole tree (``kill_tree``: that group, and any
descendant that moved to a group of its own), so a cancelled or timed-out unit leaves
nothing behind; the group is still reached after its leader was SIGKILLed by someone
else. Every such process also follows its parent (``follow_parent``): once its parent is
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
from pathlib import Path

__all__ = ["children", "descendants", "follow_parent", "kill_group", "kill_tree"]

_WATCH_S = 0.5


def kill_tree(pid: int, *, leads_group: bool) -> None:
    """SIGKILL ``pid``, every process below it, and the process groups they lead.

    ``leads_group``: ``pid`` leads a process group (its members outlive a leader that
    already died, so they are still reached). Our own process group is never signalled
    as a whole (a child that joined it is killed by its pid).
    """
    below = descendants(pid)  # before the kill: the children of a dead process move to init
    groups = {pid} if leads_group else set()
    for member in below:
        with contextlib.suppress(OSError):
            groups.add(os.getpgid(member))
    for group in groups:
        kill_group(group)
    for member in (pid, *below):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(member, signal.SIGKILL)


def kill_group(pgid: int) -> None:
    """SIGKILL the process group ``pgid`` (never our own)."""
    if pgid != os.getpgrp():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def descendants(pid: int) -> list[int]:
    """The live processes below ``pid`` (children first), read from /proc; [] without it."""
    found, queue = [], [pid]
    while queue:
        kids = children(queue.pop(0))
        found += kids
        queue += kids
    return found


def children(pid: int) -> list[int]:
    """The live child processes of ``pid``, read from /proc; [] without it."""
    tasks = Path(f"/proc/{pid}/task")
    try:
        return [int(k) for task in tasks.iterdir() for k in (task / "children").read_text().split()]
    except OSError:  # gone, no /proc, or a kernel without the children files: scan every process
        return _children_by_scan(pid) if Path("/proc/self/stat").exists() and tasks.exists() else []


def _children_by_scan(pid: int) -> list[int]:
    found = []
    for entry in (e for e in os.listdir("/proc") if e.isdigit()):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def follow_parent() -> None:
    """Exit this process (status 0, no cleanup) soon after its parent process is gone."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_WATCH_S)
        os._exit(0)

    if parent > 1:
        threading.Thread(target=watch, name="pallas-verify-follow-parent", daemon=True).start()
