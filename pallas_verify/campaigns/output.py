"""A campaign's output folder: checked before any work, locked, written as the run goes.

- Checked first (``reports.outdir.writable_dir``): a folder that cannot take the report
  (a file, read-only, full) is a usage error in one line, before the budget is spent.
- Locked: a second campaign on the same folder refuses (a usage error naming the one
  that holds it) instead of overwriting its report. The lock is ``flock`` on
  ``.pallas-verify.lock``: the kernel releases it when its holder exits, however it
  exits, so a crashed run never leaves a stale lock.
- Written as the run goes: every format after every unit, each atomically (a reader, or
  the next run after a crash, sees the previous report or the new one, never half). A
  write that fails (full disk) is said once; the report on disk then holds the run up to
  the last unit that could be written, and later writes keep trying.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from pallas_verify.errors import InvalidArgument
from pallas_verify.reports.outdir import writable_dir
from pallas_verify.reports.report import Report

__all__ = ["LOCK_NAME", "CampaignOutput"]

LOCK_NAME = ".pallas-verify.lock"
_FORMATS = ("json", "xml", "html", "md")


class CampaignOutput:
    """``out_dir`` for one campaign: use as a context manager around the whole run."""

    def __init__(self, out_dir: str | Path, *, command: str, option: str = "--out",
                 formats: Sequence[str] = _FORMATS, stream: TextIO | None = None) -> None:
        self.out_dir, self.command, self.option = Path(out_dir), command, option
        self.formats, self.stream = tuple(formats), stream or sys.stderr
        self.error: str | None = None  # why the last write failed, while it fails
        self.writes = 0
        self._lock: int | None = None

    def __enter__(self) -> CampaignOutput:
        writable_dir(self.out_dir, option=self.option)
        path = self.out_dir / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 4096).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise InvalidArgument(f"{self.option} {str(self.out_dir)!r} is in use by another campaign ({holder}); "
                                  "wait for it to finish or give another folder.") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}: pallas-verify {self.command}, since {time.strftime('%H:%M:%S')}\n".encode())
        self._lock = fd
        return self

    def write(self, report: Report) -> bool:
        """Write every format now; False (said once per failing stretch) when it cannot."""
        from pallas_verify.reports.render import write_reports

        try:
            write_reports(report, self.out_dir, formats=self.formats)
        except OSError as exc:
            if self.error is None:
                kept = f"the report there holds the run up to its write {self.writes}" if self.writes else \
                    "no report is there yet"
                self.stream.write(f"pallas-verify: cannot write the report under {self.out_dir} "
                                  f"({exc.strerror or exc}); {kept}; trying again after every unit\n")
                self.stream.flush()
            self.error = f"{exc.strerror or exc}"
            return False
        if self.error is not None:
            self.stream.write(f"pallas-verify: the report under {self.out_dir} is written again\n")
            self.error = None
        self.writes += 1
        return True

    def paths(self) -> dict[str, Path]:
        """Where each format is written."""
        return {f: self.out_dir / ("report.junit.xml" if f == "xml" else f"report.{f}") for f in self.formats}

    def __exit__(self, *exc: object) -> None:
        if self._lock is not None:
            os.close(self._lock)  # releases the flock
            self._lock = None
