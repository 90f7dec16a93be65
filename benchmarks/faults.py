"""The faults section: a nightly campaign's infrastructure broken on purpose, one fault at a time.

Each fault runs ``pallas-verify fuzz`` (or ``conformance``) as a night would, on three
tiny specs, a correct block copy, a planted mismatch and a race (plus a hanging kernel
where the fault is a hang), and checks what survived:

- ``report_written``: the report is on disk and reads back (for a full disk: the one
  written before the disk filled);
- ``no_false_finding``: nothing charged to a kernel that the kernel did not do (no
  finding against the correct kernel, no crash or exception for what the infrastructure
  did);
- ``no_finding_lost``: the findings of a clean run, or every finding printed before the
  fault, are in the report;
- ``no_orphan``: no process the campaign started is left running (``faultkit.Tagged``).

A fault the command must refuse before any work (an unusable ``--out``, a bad number, a
second campaign on one folder) survives when it exits 2 with one line and no traceback,
and touches nothing. ``faults()`` returns, per fault, the checks, its exit status and the
wall seconds it cost; the cases live in ``faultcases``, what a fault left behind and
its checks in ``faultrun``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.faultcases import CASES
from benchmarks.faultkit import Unavailable

__all__ = ["faults"]


def faults(only: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every fault of ``faultcases.CASES`` (or ``only`` those), each in a fresh folder."""
    per_fault: dict[str, Any] = {}
    for name, case in CASES.items():
        if only and name not in only:
            continue
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix=f"pv-fault-{name}-") as tmp:
            try:
                outcome = case(Path(tmp))
            except Unavailable as exc:
                per_fault[name] = {"skipped": str(exc)}
                continue
        per_fault[name] = {"survived": outcome.survived(), "checks": outcome.checks(), "exit": outcome.exit,
                           "seconds": round(outcome.seconds, 1),
                           "wall_s": round(time.perf_counter() - started, 1)}
    ran = [r for r in per_fault.values() if "survived" in r]
    return {"per_fault": per_fault, "faults_tried": len(ran), "faults_survived": sum(r["survived"] for r in ran),
            "faults_skipped": len(per_fault) - len(ran)}
