"""Deadlocks: seconds from the start of a search to the ``deadlock`` finding.

Every mutant that declares ``deadlock`` runs through ``verify`` with the default per-case
limit (``timeout_s=120``, as a user runs it), shrinking off, in a fresh interpreter worker:
once on TPU interpret mode alone without the static check (``seconds`` is then the time
from the start of its search) and once on interpret then TPU interpret with the static
check (the time from the start of a ``ci`` run of the kernel). The target is 20 s from the start of the search on a 2-core machine.
"""

from __future__ import annotations

import tempfile
import time
from typing import Any

__all__ = ["deadlock"]

TIMEOUT_S = 120.0
TARGET_S = 20.0
#: label -> (backends, static check on)
RUNS = {"tpu_interpret_alone": (["tpu_interpret"], False), "ci_backends": (["interpret", "tpu_interpret"], True)}


def _first(report: Any, kind: str) -> Any:
    hits = sorted((f for f in report.findings if f.kind == kind), key=lambda f: f.elapsed_s)
    return hits[0] if hits else None


def deadlock(only: tuple[str, ...] = ()) -> dict[str, Any]:
    """Per deadlocking mutant and run: the finding's kind, seconds to it, and wall seconds."""
    from pallas_verify.engine import verify
    from pallas_verify.execution.isolation import shared_worker
    from reference_kernels.mutants import mutants

    chosen = [m for m in mutants() if "deadlock" in m.expects and (not only or m.name in only)]
    per_mutant: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="pv-bench-deadlock-") as out_dir:
        for mutant in chosen:
            row = per_mutant[mutant.name] = {}
            for label, (backends, static) in RUNS.items():
                for slot in ("interpreters", "tracer"):  # fresh workers: their start counts, as for a user
                    shared_worker(slot).close()
                started = time.perf_counter()
                report = verify(mutant.spec, backends, profile="ci", shrink_budget_s=0.0, timeout_s=TIMEOUT_S,
                                out_dir=out_dir, static=static)
                wall = time.perf_counter() - started
                first = _first(report, "deadlock") or _first(report, "timeout")
                row[label] = {"kind": first.kind if first else None,
                              "seconds": round(first.elapsed_s, 3) if first else None, "wall_s": round(wall, 3)}
    alone = [r["tpu_interpret_alone"]["seconds"] for r in per_mutant.values()]
    worst = max((s for s in alone if s is not None), default=None)
    return {"timeout_s": TIMEOUT_S, "target_s": TARGET_S, "deadlock_report_s": worst,
            "all_reported_as_deadlock": all(r[k]["kind"] == "deadlock" for r in per_mutant.values() for k in RUNS),
            "per_mutant": per_mutant}

