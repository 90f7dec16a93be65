"""Live progress of ``verify`` and ``conformance``: a line per cell (or kernel) as it finishes,
a status line on a terminal.

The engine calls ``kernel`` when a spec's searches start, ``tick`` after every example
(and shrink step) of a search, and ``cell`` when a cell's verdict is known. The lines go
to the stream (stderr by default) whether or not it is a terminal; the status line (the
cell running, its examples, the findings so far, the time) only on a terminal, redrawn
in place (``reports.progress.Progress``), so a log or a pipe gets nothing extra.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from pallas_verify.reports.progress import Progress
from pallas_verify.reports.report import BackendResult, cell_key

__all__ = ["LiveProgress", "MatrixProgress"]


def _line(kernel: str, result: BackendResult) -> str:
    """``"add on interpret: PASS, 20 examples, 3.1 s"``; ``"add on static: FAIL (race)"``."""
    detail = f", {result.searched}" if result.searched else ""
    why = f" ({result.reason})" if result.reason else ""
    return f"{kernel} on {cell_key(result)}: {result.status.upper()}{detail}{why}"


@dataclasses.dataclass
class LiveProgress:
    """What a verify run has done so far, drawn as it goes.

    Attributes:
      stream: where the lines and the status line go.
      kernels: how many specs this run verifies (for the ``[k/n]`` of the status line).
    """

    stream: TextIO
    kernels: int = 1
    started: float = dataclasses.field(default_factory=time.monotonic)
    kernel_no: int = 0
    name: str = ""
    cells: int = 0
    done: int = 0
    findings: int = 0
    bar: Progress = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.bar = Progress(self.stream, piped_every_s=None)

    def kernel(self, name: str, cells: int, unrun: Sequence[BackendResult] = ()) -> None:
        """A spec's searches start: ``cells`` of them; ``unrun`` cells are skipped or unsupported."""
        self.kernel_no, self.name, self.cells, self.done = self.kernel_no + 1, name, cells, 0
        for result in unrun:
            self.bar.note(_line(name, result))

    def tick(self, cell: str, *, examples: int, max_examples: int, shrink_steps: int,
             failing: Sequence[str] = ()) -> None:
        """One example (or shrink step) of ``cell`` ran."""
        what = f"{examples}/{max_examples} examples"
        if failing:
            what += f", found {'/'.join(failing)}" + (f", shrinking ({shrink_steps} steps)" if shrink_steps else "")
        elapsed = time.monotonic() - self.started
        share = (self.done + min(1.0, examples / max(max_examples, 1))) / max(self.cells, 1)
        which = f"[{self.kernel_no}/{self.kernels}] " if self.kernels > 1 else ""
        self.bar.status(share, f"{which}{self.name} on {cell}: {what} | {self.done}/{self.cells} cells done | "
                        f"{self.findings} findings | {int(elapsed // 60):02d}:{int(elapsed % 60):02d}")

    def cell(self, result: BackendResult, findings: int = 0) -> None:
        """A cell's verdict: printed as a line at once."""
        self.done += 1
        self.findings += findings
        self.bar.note(_line(self.name, result))

    def close(self) -> None:
        """Erase the status line (before the summary is printed)."""
        self.bar.clear()


@dataclasses.dataclass
class MatrixProgress:
    """``conformance``'s progress: its line per finished kernel (on stdout, as the matrix),
    and a status line on ``stream`` when that is a terminal: kernels done, which run now,
    the time."""

    stream: TextIO
    total: int
    started: float = dataclasses.field(default_factory=time.monotonic)
    bar: Progress = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.bar = Progress(self.stream, piped_every_s=None)

    def line(self, text: str) -> None:
        self.bar.clear()
        print(text, file=sys.stdout, flush=True)

    def tick(self, done: int, running: Sequence[str]) -> None:
        elapsed = time.monotonic() - self.started
        now = f" | running: {', '.join(running)}" if running else ""
        self.bar.status(done / max(self.total, 1), f"{done}/{self.total} kernels done{now} | "
                        f"{int(elapsed // 60):02d}:{int(elapsed % 60):02d}")

    def close(self) -> None:
        self.bar.clear()
