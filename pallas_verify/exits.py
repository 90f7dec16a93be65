"""The exit statuses of the ``pallas-verify`` commands: one table, read by every front end.

A run's status says what happened, most important first: findings (1) win over an
incomplete run, so a bug found before a cancel is never reported as a cancel; a run cut
short (SIGINT, SIGTERM) with nothing found is 130, never 0; a run that finished its
budget without reaching every cell, or lost units to its infrastructure, is 4. Usage
errors and invalid specs are 2. A reproducer (and a replay) says 1 while its finding
reproduces, 0 once fixed, 3 when its case cannot run here (``campaigns.replay``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import Any, NoReturn

__all__ = ["EXIT_CANNOT_RUN", "EXIT_CLEAN", "EXIT_FINDINGS", "EXIT_FIXED", "EXIT_INCOMPLETE", "EXIT_INTERRUPTED",
           "EXIT_REPRODUCES", "EXIT_USAGE", "campaign_status", "leave", "run_status"]

EXIT_CLEAN = 0  # every cell ran, nothing found
EXIT_FINDINGS = 1  # something was found (whether or not the run was complete)
EXIT_USAGE = 2  # a usage error, an unloadable spec file or an invalid spec
EXIT_INCOMPLETE = 4  # nothing found, but some cells were not reached or units were lost
EXIT_INTERRUPTED = 130  # stopped by SIGINT or SIGTERM before the end, nothing found

EXIT_REPRODUCES = 1  # a reproducer's finding (or another) still shows on its case
EXIT_FIXED = 0  # the case ran and showed no finding
EXIT_CANNOT_RUN = 3  # the case cannot run here: nothing is known about the finding


def run_status(*, findings: bool, interrupted: bool = False, incomplete: bool = False) -> int:
    """The exit status of a run: findings first, then an interruption, then incompleteness."""
    if findings:
        return EXIT_FINDINGS
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_INCOMPLETE if incomplete else EXIT_CLEAN


def campaign_status(report: Any) -> int:
    """The exit status of a campaign's report (fuzz, conformance): an invalid spec or a spec
    file that cannot be imported is a usage error (2); then ``run_status``, where the run is
    incomplete when a cell was not reached, a unit was lost, or the report could not be
    written."""
    if report.invalid:
        return EXIT_USAGE
    incomplete = (bool(report.run.get("lost")) or bool(report.run.get("output_error"))
                  or any(r.status in ("not_reached", "error") for r in report.results))
    # A failed cell is a finding even without one: a planted bug its backend no longer reports.
    failed = bool(report.findings) or any(r.status == "fail" for r in report.results)
    return run_status(findings=failed, interrupted=report.interrupted, incomplete=incomplete)


def leave(status: int) -> NoReturn:
    """End a command's process with ``status`` once it owes nothing more: its other
    threads done, every exit hook run (workers stopped, clusters shut down, logs flushed),
    stdout and stderr flushed; but without the interpreter's teardown of its modules and
    objects, which in a process that has loaded jax and compiled kernels takes about 0.4 s
    and changes nothing anyone sees. A thread still running (one not a daemon) gets the
    ordinary exit, which waits for it."""
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.current_thread()):
        sys.exit(status)
    atexit._run_exitfuncs()  # what the interpreter runs first at exit, in the same order
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):  # a reader gone, or no stream
            stream.flush()
    os._exit(status)
