"""Detection: pallas-verify against the usual ways, on every mutant, with one budget each.

pallas-verify's seconds-to-detect for a mutant is the ``elapsed_s`` of its first finding
of a declared kind in ``verify(spec, ["interpret", "tpu_interpret"], profile="ci",
shrink_budget_s=0)`` (counted from the start of verify for that kernel). Each baseline
(baselines.py) runs as a unit of work on pallas-verify's local executor (a warm worker
process) under the same budget; a case that runs past the same per-case time limit
pallas-verify uses is killed and counts as a detection at that limit (a test runner with
a timeout fails the test). Either side counts as
finding a mutant only when its detection came within the budget, so the budget must
exceed the per-case limit for a hang to be findable at all.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.baselines import METHODS

__all__ = ["detection"]

BACKENDS = ("interpret", "tpu_interpret")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Settings:
    """Budget per mutant and method, per-case time limit, seed, and which mutants."""

    budget_s: float
    case_timeout_s: float
    seed: int = 0
    only: tuple[str, ...] = ()


def _pv_detect(mutant: Any, settings: Settings, out_dir: str, *, backends: list[str] | None = None,
               static: bool = True, isolate: str = "auto") -> dict[str, Any]:
    import jax

    from pallas_verify.engine import verify

    jax.clear_caches()  # the reference compiles afresh too, as in the baselines
    started = time.perf_counter()
    report = verify(mutant.spec, backends or list(BACKENDS), profile="ci", shrink_budget_s=0.0,
                    timeout_s=settings.case_timeout_s, out_dir=out_dir, static=static, isolate=isolate)
    wall = time.perf_counter() - started
    hits = sorted((f for f in report.findings if f.kind in mutant.expects), key=lambda f: f.elapsed_s)
    first = hits[0] if hits else None
    searches = {r.backend: {"status": r.status, "examples": r.examples, "seconds": round(r.seconds, 3)}
                for r in report.results if r.transform is None}
    return {
        "found": first is not None and first.elapsed_s <= settings.budget_s,
        "seconds": first.elapsed_s if first else None,
        "kind": f"{first.backend}:{first.kind}" if first else None,
        "examples": first.evidence.get("examples_to_detect") if first else None,
        "wall_s": wall,
        "searches": searches,
    }


# Before a baseline's first example: the worker's warm-up (first unit only), then drawing.
_START_ALLOWANCE_S = 300.0
_POLL_S = 0.05


def _baseline(executor: Any, mutant: Any, method: str, settings: Settings, progress: Path) -> dict[str, Any]:
    """One baseline on ``mutant`` as a unit on ``executor``; a case past the per-case limit
    (seen in the unit's progress file) is killed and counts as a detection at that limit."""
    from pallas_verify.execution import Done, Work

    progress.write_text("")
    executor.submit(Work(entry="benchmarks.baselines:baseline_unit", kind="baseline", seed=settings.seed,
                         limit_s=_START_ALLOWANCE_S + settings.case_timeout_s + 2 * settings.budget_s + 60.0,
                         params={"mutant": mutant.name, "method": method, "budget_s": settings.budget_s,
                                 "progress": str(progress)}))
    while True:
        for done in (d for d in executor.poll(_POLL_S) if isinstance(d, Done)):
            return _verdict(done.value, done.failure, _last_start(progress), settings)
        start = _last_start(progress)
        if start is not None and time.time() - start["at"] > settings.case_timeout_s:
            executor.cancel()
            return _killed(start, settings)


def _last_start(progress: Path) -> dict[str, Any] | None:
    """The last complete start event in the progress file, or None before the first."""
    lines = progress.read_text().split("\n")[:-1]  # the text after the last newline may be partial
    return json.loads(lines[-1]) if lines else None


def _killed(start: dict[str, Any] | None, settings: Settings) -> dict[str, Any]:
    seconds = (start["t"] if start else 0.0) + settings.case_timeout_s
    return {"found": seconds <= settings.budget_s, "seconds": seconds, "examples": None,
            "why": f"timeout: a case ran past {settings.case_timeout_s} s and was killed"}


def _verdict(result: dict[str, Any] | None, failure: Any, start: dict[str, Any] | None,
             settings: Settings) -> dict[str, Any]:
    """A finished unit's verdict. The unit's own limit counts as a killed case; a worker
    that died while running a case fails the test run at that moment (a detection)."""
    if failure is None:
        assert result is not None
        return {k: result[k] for k in ("found", "seconds", "examples", "why")}
    if failure.cause == "overran":
        return _killed(start, settings)
    if failure.cause == "died" and start is not None:
        seconds = start["t"] + (time.time() - start["at"])
        return {"found": seconds <= settings.budget_s, "seconds": seconds, "examples": None,
                "why": f"crash: {failure.message}"}
    raise RuntimeError(f"the baseline unit failed ({failure.cause}): {failure.message}\n{failure.traceback}")


def _warm_up(settings: Settings, out_dir: str) -> None:
    """One clean verify first: the interpreter worker and jax are then warm, as for baselines."""
    from pallas_verify.engine import verify
    from reference_kernels.mutants import mutants

    first = mutants()[0]
    verify(first.twin, list(BACKENDS), profile="ci", max_examples=1, timeout_s=settings.case_timeout_s, out_dir=out_dir)
    _components(first, settings.seed)  # the in-process interpreters' first use is not a component's cost


def _rates(per_mutant: dict[str, dict[str, Any]]) -> dict[str, float]:
    n = max(len(per_mutant), 1)
    rates = {"kill_rate": sum(m["pallas_verify"]["found"] for m in per_mutant.values()) / n}
    for method in METHODS:
        rates[f"kill_rate_{method}"] = sum(m["baselines"][method]["found"] for m in per_mutant.values()) / n
    return rates


def _ratio(per_mutant: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Median over mutants found by pallas-verify and some baseline of pv / best baseline seconds."""
    ratios, shares = {}, []
    for name, m in per_mutant.items():
        found = [b["seconds"] for b in m["baselines"].values() if b["found"]]
        if found and m["pallas_verify"]["found"]:
            ratios[name] = m["pallas_verify"]["seconds"] / max(min(found), 1e-9)
            shares.append(_shares(m["ablation"], m["components"]))
    stages = {k: statistics.median(s[k] for s in shares if s.get(k) is not None)
              for k in (shares[0] if shares else {})}
    return {"detect_ratio_vs_best_baseline": statistics.median(ratios.values()) if ratios else None,
            "detect_ratios": ratios, "pv_detect_time_shares": stages}


def _shares(ablation: dict[str, float | None], components: dict[str, float]) -> dict[str, float | None]:
    """Parts of pallas-verify's seconds-to-detect (median over mutants, as shares of it)."""
    full, no_static, alone = ablation["full"] or 0.0, ablation["no_static"], ablation["finding_backend_only"]
    if not full or no_static is None or alone is None:  # not ablated
        return dict.fromkeys(("static_check", "earlier_backend_search", "finding_backend", *components))
    shares = {"static_check": max(full - no_static, 0.0) / full,
              "earlier_backend_search": max(no_static - alone, 0.0) / full,
              "finding_backend": alone / full}
    return {**shares, **{k: v / full for k, v in components.items()}}


def _ablation(mutant: Any, pv: dict[str, Any], settings: Settings, out_dir: str) -> dict[str, float | None]:
    """Seconds-to-detect in-process (caches cleared before each run): the whole pipeline,
    without the static check (inline in each example), and on the finding backend alone. The differences say what
    the earlier, cheaper stages cost before the finding one ran. A hang (``timeout``) can
    only be measured in a worker, and a static finding has no earlier stage: neither is
    ablated."""
    backend, kind = str(pv["kind"]).split(":")
    if backend == "static" or kind == "timeout":
        return {"full": None, "no_static": None, "finding_backend_only": None}
    runs = {"full": (list(BACKENDS), True), "no_static": (list(BACKENDS), False),
            "finding_backend_only": ([backend], False)}
    return {name: _pv_detect(mutant, settings, out_dir, backends=backends, static=static, isolate="never")["seconds"]
            for name, (backends, static) in runs.items()}


def _components(mutant: Any, seed: int) -> dict[str, float]:
    """Cold cost of the pieces of pallas-verify's first example, each timed alone in-process:
    the static grid trace, the reference (jit and run), the kernel on the HLO interpreter."""
    import jax

    from benchmarks.sampling import draw_examples
    from pallas_verify.backends import registry
    from pallas_verify.case import Case
    from pallas_verify.grid import check as gridcheck
    from pallas_verify.reference import reference_outputs

    [ex] = draw_examples(mutant.spec, count=1, seed=seed)
    case = Case(spec=mutant.spec, config=ex.config, inputs=ex.inputs, backend="interpret")
    steps = {"static_trace": lambda: gridcheck.check_grid(mutant.spec.kernel, ex.inputs, ex.config),
             "reference": lambda: reference_outputs(mutant.spec.reference, ex.config, ex.inputs),
             "hlo_kernel": lambda: registry.get("interpret").run(case)}
    out = {}
    for name, step in steps.items():
        jax.clear_caches()
        start = time.perf_counter()
        step()
        out[name] = time.perf_counter() - start
    return out


def detection(settings: Settings) -> dict[str, Any]:
    """Every mutant through pallas-verify and every baseline; rates, ratio, per-mutant times."""
    from pallas_verify import execution
    from reference_kernels.mutants import mutants

    chosen = [m for m in mutants() if not settings.only or m.name in settings.only]
    per_mutant: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="pv-bench-") as out_dir, execution.make("local", workers=1) as pool:
        progress = Path(out_dir) / "baseline-progress.jsonl"
        _warm_up(settings, out_dir)
        for mutant in chosen:
            pv = _pv_detect(mutant, settings, out_dir)
            baselines = {method: _baseline(pool, mutant, method, settings, progress) for method in METHODS}
            row = per_mutant[mutant.name] = {"expects": list(mutant.expects), "pallas_verify": pv,
                                             "baselines": baselines}
            if pv["found"] and any(b["found"] for b in baselines.values()):
                row["ablation"] = _ablation(mutant, pv, settings, out_dir)
                row["components"] = _components(mutant, settings.seed)
    return {"budget_s": settings.budget_s, "case_timeout_s": settings.case_timeout_s, "mutants": len(chosen),
            **_rates(per_mutant), **_ratio(per_mutant), "per_mutant": per_mutant}
