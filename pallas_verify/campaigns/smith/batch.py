"""One batch of a smith campaign: a few generated programs through ``verify``, each
finding re-run and classified (``recheck``) before it goes back to the campaign.

A batch runs in the campaign's process (``isolate="never"``: what tests that patch an
interpreter need) or as a unit of work in an executor's worker process (``run_unit``);
either way its outcome is the same plain dict (``campaigns.units.ship``'s,
plus ``started``, ``coverage``, ``noise`` and ``lost``), so the campaign folds both alike. A batch
stops on its own, after the case it is running, once ``stop_at`` (a wall-clock time) has
passed or the campaign has created ``stop_file`` (a cancel): what it found so far is kept.
"""

from __future__ import annotations

import dataclasses
import hashlib
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pallas_verify.execution import Work

__all__ = ["route", "run_batch", "run_unit"]

def _stopper(stop_at: float, stop_file: str | None) -> Callable[[], bool]:
    def stop() -> bool:
        return time.time() >= stop_at or (stop_file is not None and Path(stop_file).exists())

    return stop


def run_batch(spec: Any, backends: list[str], examples: int, seed: int, *, timeout_s: float, isolate: str,
              shrink_s: float, stop: Callable[[], bool]) -> dict[str, Any]:
    """``verify`` on ``examples`` programs (seed ``seed``) and the rechecked findings, as a dict."""
    from hypothesis.database import InMemoryExampleDatabase

    from pallas_verify.campaigns.smith import spec as smith_spec
    from pallas_verify.campaigns.smith.recheck import recheck
    from pallas_verify.campaigns.units import ship
    from pallas_verify.engine import verify
    from strategies.programs import program_productions

    started = time.time()
    out = Path(tempfile.mkdtemp(prefix="pv-smith-batch-"))
    smith_spec.DRAWN.clear()
    # No example database across batches: a failure found once would be replayed and
    # shrunk again by every later batch of the campaign (its signature is known already).
    # Aligned: every backend runs the same programs on the same inputs, so each is also
    # compared with the others bit for bit (the reference is computed once per program).
    report = verify(spec, backends, examples, seed, out_dir=out, timeout_s=timeout_s, isolate=isolate,
                    shrink_budget_s=shrink_s, database=InMemoryExampleDatabase(), stop=stop, metamorphic=False,
                    aligned=True)
    coverage = {hashlib.sha1(source.encode()).hexdigest(): sorted(set(program_productions(program)))
                for source, program in smith_spec.DRAWN.items()}
    report.findings, noise, lost = route([recheck(f, spec, isolate=isolate, timeout_s=timeout_s) for f in report.findings])
    failing = {f.backend for f in report.findings}
    report.results = [dataclasses.replace(r, status="pass", reason="its only findings were the generator's noise or "
                                          "lost cases (see noise, lost_batches)")
                      if r.status == "fail" and r.backend not in failing else r for r in report.results]
    return {**ship(report, out), "started": started, "coverage": coverage, "noise": noise, "lost": lost}


def route(checked: list[Any]) -> tuple[list[Any], list[dict[str, str]], list[str]]:
    """Rechecked findings as (findings, noise, lost): a ``reference-dependent`` one is the
    generator's noise; a crash whose case then ran clean is the machine's (a worker killed
    from outside, memory exhausted), a lost case rather than a finding; the rest are findings."""
    from pallas_verify.campaigns.smith.recheck import NOISE

    findings, noise, lost = [], [], []
    for f in checked:
        verdict = f.evidence.get("recheck")
        if verdict == NOISE:
            noise.append({"kind": f.kind, "backend": f.backend, "why": f.evidence.get("recheck_why", ""),
                          "program": repr(f.config.get("program"))})
        elif verdict == "flaky" and f.kind == "crash":
            lost.append(f"a case on {f.backend} was lost: {f.message.splitlines()[0][:200]}; it ran clean again")
        else:
            findings.append(f)
    return findings, noise, lost


def run_unit(work: Work) -> dict[str, Any]:
    """A batch as an executor's unit of work (``Work.params``: spec, timeout_s, shrink_s,
    stop_at, stop_file)."""
    from pallas_verify.loader import load_spec

    p = work.params
    stop = _stopper(p["stop_at"], p.get("stop_file"))
    return run_batch(load_spec(work.spec_ref), list(work.backends), int(work.max_examples or 1), int(work.seed or 0),
                     timeout_s=p["timeout_s"], isolate="auto", shrink_s=p["shrink_s"], stop=stop)

