"""Stopping a run cleanly: SIGINT and SIGTERM as one exception that carries what finished.

``verify`` lets a KeyboardInterrupt through (a pytest session stops on it as on any
Ctrl-C), but first folds what its searches finished into a report and raises
:class:`Interrupted` with it, so a front end can write that report, print its summary and
exit with ``exits.EXIT_INTERRUPTED`` (or 1 when something was found before the stop).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pallas_verify.reports.report import BackendResult, Report
    from pallas_verify.spec import KernelSpec

__all__ = ["Interrupted", "not_started", "signal_name", "signals_interrupt", "unfinished"]


class Interrupted(KeyboardInterrupt):
    """The run was stopped by ``signame``; ``report`` holds what finished before (or None)."""

    def __init__(self, signame: str = "SIGINT", report: Report | None = None) -> None:
        super().__init__(signame)
        self.signame, self.report = signame, report


def signal_name(exc: BaseException) -> str:
    """The signal that stopped the run: ``exc``'s own, or SIGINT for a bare Ctrl-C."""
    return getattr(exc, "signame", "SIGINT")


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """Inside, SIGINT and SIGTERM raise :class:`Interrupted` (naming the signal) in the main
    thread; their previous handlers come back afterwards. Elsewhere than the main thread
    nothing changes (Python only delivers signals there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise Interrupted(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def unfinished(result: BackendResult, signame: str) -> BackendResult:
    """A cell whose search was stopped: ``interrupted`` unless it already failed (what it
    found stays a finding) or could not run."""
    import dataclasses

    if result.status != "pass":
        return result
    return dataclasses.replace(result, status="interrupted", reason=f"stopped by {signame} before the search finished")


def not_started(spec: KernelSpec, backends: list[str], signame: str, what: str = "backend") -> list[BackendResult]:
    """The cells (bare and per transform) of ``spec`` on ``backends`` a stopped run never began."""
    from pallas_verify.reports.report import unrun_results

    return [cell for name in backends
            for cell in unrun_results(spec, name, "interrupted", f"stopped by {signame} before this {what} ran")]
