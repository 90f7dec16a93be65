"""How long a case may run: a limit that adapts to what the spec's own cases take.

A fixed per-case limit is either long (a hang costs minutes) or short (a slow correct
kernel times out). The adaptive limit has two parts:

- ``ceiling``: the user's limit (``timeout_s``); no case runs longer.
- ``idle_after``: from this many seconds on, a case whose worker process spends (almost)
  no CPU time is hung (a deadlock waits; it does not compute) and is stopped. It is a
  multiple of the slowest case of this spec that finished so far, never under a floor;
  before any case finished, a first-case allowance that covers starting a worker,
  importing jax and compiling.

A slow correct kernel keeps a core busy, so it runs on to the ceiling; a hang is stopped
soon after the limit its spec's cases set.
"""

from __future__ import annotations

import dataclasses
import os

__all__ = ["IDLE_S", "SAMPLE_S", "CaseLimit", "CpuMeter"]

#: Seconds a spec's first case may take before idleness counts (worker start, imports, compile).
FIRST_CASE_S = 15.0
#: The idle limit never drops under this many seconds (a new config compiles again).
FLOOR_S = 5.0
#: The idle limit is this multiple of the slowest finished case.
FACTOR = 5.0
#: A worker using less than this share of one core over a sample is idle.
IDLE_CPU_SHARE = 0.05
#: Seconds between CPU samples once the idle limit has passed.
SAMPLE_S = 0.5
#: Seconds of consecutive idle samples that make a case hung.
IDLE_S = 1.0


@dataclasses.dataclass
class CaseLimit:
    """The limits of one spec's cases (see the module docstring)."""

    ceiling: float
    first_case_s: float = FIRST_CASE_S
    floor_s: float = FLOOR_S
    factor: float = FACTOR
    slowest: float | None = None
    finished: int = 0

    def idle_after(self, *, fresh: bool = False) -> float:
        """Seconds after which an idle case is hung (at most the ceiling). ``fresh``: the
        case's worker process starts for it, which the first-case allowance covers too."""
        paced = self.first_case_s if self.slowest is None else max(self.floor_s, self.factor * self.slowest)
        return min(self.ceiling, max(paced, self.first_case_s) if fresh else paced)

    def record(self, seconds: float, *, finished: bool) -> None:
        """Account one case's run time (only cases that finished set the pace)."""
        if finished:
            self.finished += 1
            self.slowest = seconds if self.slowest is None else max(self.slowest, seconds)

    def describe(self, *, fresh: bool = False) -> str:
        """Where the idle limit comes from, for a timeout's message."""
        if self.slowest is None or self.idle_after(fresh=fresh) > self.idle_after():
            basis = f"the first-case allowance of {self.first_case_s:g} s"
            basis += "" if self.slowest is None else " (its worker process started for it)"
        else:
            basis = (f"{self.factor:g} x the slowest of the {self.finished} finished case(s) of this spec "
                     f"({self.slowest:.2f} s), at least {self.floor_s:g} s")
        return f"idle limit {self.idle_after(fresh=fresh):.1f} s: {basis}; ceiling timeout_s={self.ceiling:g} s"


class CpuMeter:
    """CPU seconds a process has used, read from /proc (None where there is no /proc)."""

    def __init__(self, pid: int) -> None:
        self.path = f"/proc/{pid}/stat"
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def seconds(self) -> float | None:
        try:
            with open(self.path) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        # After the command: state(0) ... utime(11) stime(12) cutime(13) cstime(14).
        return sum(int(v) for v in fields[11:15]) / self.tick

    def idle(self, before: float | None, seconds: float) -> bool:
        """True when the process used under IDLE_CPU_SHARE of a core since ``before``
        (a reading ``seconds`` ago); False when either reading is unknown (never call a
        case hung on a guess)."""
        after = self.seconds()
        if before is None or after is None or seconds <= 0:
            return False
        return after - before < IDLE_CPU_SHARE * seconds
