"""SIGINT and SIGTERM stop a campaign cleanly instead of killing it.

A cancelled CI job sends SIGTERM, a user presses Ctrl-C: either way the campaign stops
submitting, keeps what already arrived (units that finish in the same poll included),
cancels what still runs (with every process it started), and writes its report, marked
interrupted. A second signal while it stops raises KeyboardInterrupt at once.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

__all__ = ["StopOnSignal"]


class StopOnSignal:
    """While active, SIGINT and SIGTERM set ``requested`` (the signal's name)."""

    def __init__(self) -> None:
        self.requested: str | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._stop)
        return self

    def _stop(self, signum: int, frame: Any) -> None:
        if self.requested is not None:
            raise KeyboardInterrupt
        self.requested = signal.Signals(signum).name

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._old.items():
            signal.signal(sig, handler)
        self._old.clear()
