"""Live progress on the driver: a bar on a terminal, a line every 10 s otherwise (or nothing).

The line says, per backend, how many cells have finished at least one unit, how many run
now and how many wait, and how many findings the campaign has so far.
"""

from __future__ import annotations

import collections
import dataclasses
import shutil
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
    """A one-line progress bar on a terminal; when the stream is not one, a plain line every
    ``piped_every_s`` seconds (None: nothing extra, only the notes)."""

    stream: TextIO
    budget_s: float | None = None
    last: float = 0.0
    width: int = 0
    piped_every_s: float | None = 10.0

    @property
    def tty(self) -> bool:
        return bool(getattr(self.stream, "isatty", lambda: False)())

    def show(self, *, elapsed: float, cells: str, examples: int, findings: int,
             label: str = "cells done/running/pending", unit: str = "examples") -> None:
        budget = self.budget_s or 0.0
        share = min(1.0, elapsed / budget) if budget > 0 else 0.0
        left = max(0.0, budget - elapsed)
        self.status(share, f"{share:4.0%} | {label}: {cells} | {examples} {unit} | "
                    f"{findings} findings | {int(left // 60):02d}:{int(left % 60):02d} left")

    def status(self, share: float, text: str, *, force: bool = False) -> None:
        """Redraw the status line (at most 4 times a second; ``force``: now)."""
        now = time.monotonic()
        if not self.tty and self.piped_every_s is None:
            return
        if not force and now - self.last < (0.25 if self.tty else (self.piped_every_s or 0.0)):
            return
        self.last = now
        if self.tty:
            bar = "#" * round(min(1.0, max(0.0, share)) * 20)
            line = f"[{bar:<20}] {text}"
            columns = shutil.get_terminal_size((120, 24)).columns - 1
            line = line if len(line) <= columns else line[: columns - 3] + "..."
            self.stream.write("\r" + line.ljust(self.width))
            self.width = len(line)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def clear(self) -> None:
        """Erase the status line (before other output goes to the terminal)."""
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0

    def note(self, line: str) -> None:
        self.clear()
        self.stream.write(line + "\n")
        self.stream.flush()
        self.last = 0.0
