"""Live progress of a campaign on the driver: a bar on a terminal, a line every 10 s otherwise.

The line says, per backend, how many cells have finished at least one unit, how many run
now and how many wait, and how many findings the campaign has so far.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Iterable
from typing import TextIO

__all__ = ["Progress", "per_backend"]


def per_backend(cells: Iterable[tuple[str, str]], done: set[tuple[str, str]], running: set[tuple[str, str]]) -> str:
    """``"interpret 3/1/2, tpu_interpret 0/2/4"``: done/running/pending cells per backend,
    for (kernel, backend) cells."""
    counts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    for cell in cells:
        counts[cell[1]][0 if cell in done else 1 if cell in running else 2] += 1
    return ", ".join(f"{b} {d}/{r}/{p}" for b, (d, r, p) in counts.items())


@dataclasses.dataclass
class Progress:
    """A one-line progress bar on a terminal; a plain line every 10 s otherwise."""

    stream: TextIO
    budget_s: float
    last: float = 0.0
    width: int = 0

    @property
    def tty(self) -> bool:
        """Whether the stream is a terminal (where the status line is redrawn in place)."""
        return bool(getattr(self.stream, "isatty", lambda: False)())

    def show(self, *, elapsed: float, cells: str, examples: int, findings: int,
             label: str = "cells done/running/pending", unit: str = "examples") -> None:
        tty = self.tty
        now = time.monotonic()
        if now - self.last < (0.25 if tty else 10.0):
            return
        self.last = now
        share = min(1.0, elapsed / self.budget_s)
        left = max(0.0, self.budget_s - elapsed)
        text = (f"{share:4.0%} | {label}: {cells} | {examples} {unit} | {findings} findings | "
                f"{int(left // 60):02d}:{int(left % 60):02d} left")
        if tty:
            bar = "#" * round(share * 20)
            line = f"[{bar:<20}] {text}"
            self.stream.write("\r" + line.ljust(self.width))
            self.width = len(line)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def note(self, line: str) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.width = 0
        self.stream.write(line + "\n")
        self.stream.flush()
        self.last = 0.0
