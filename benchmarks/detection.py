"""Detection: pallas-verify against the usual ways, on every mutant, with one budget each.

pallas-verify's seconds-to-detect for a mutant is the ``elapsed_s`` of its first finding
of a declared kind in ``verify(spec, ["interpret", "tpu_interpret"], profile="ci",
shrink_budget_s=0)`` (counted from the start of verify for that kernel). Each baseline
(baselines.py) runs in a separate warm process under the same budget; a case that runs
past the same per-case time limit pallas-verify uses is killed and counts as a detection
at that limit (a test runner with a timeout fails the test). Either side counts as
finding a mutant only when its detection came within the budget, so the budget must
exceed the per-case limit for a hang to be findable at all.
"""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
import time
from typing import Any

from benchmarks.baselines import METHODS
from benchmarks.child import ChildProcess, Silent

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


def _baseline(child: ChildProcess, mutant: Any, method: str, settings: Settings) -> dict[str, Any]:
    child.send({"mutant": mutant.name, "method": method, "budget_s": settings.budget_s, "seed": settings.seed})
    last_start = 0.0
    while True:
        try:
            event = child.next_event(settings.case_timeout_s + 2 * settings.budget_s + 60.0
                                     if last_start == 0.0 else settings.case_timeout_s)
        except Silent:
            seconds = last_start + settings.case_timeout_s
            return {"found": seconds <= settings.budget_s, "seconds": seconds, "examples": None,
                    "why": f"timeout: a case ran past {settings.case_timeout_s} s and was killed"}
        if event["event"] == "start":
            last_start = event["t"] or 1e-9
        elif event["event"] == "done":
            return {k: event[k] for k in ("found", "seconds", "examples", "why")}


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
             "reference": lambda: reference_outputs(mutant.spec, ex.config, ex.inputs),
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
    from reference_kernels.mutants import mutants

    chosen = [m for m in mutants() if not settings.only or m.name in settings.only]
    child = ChildProcess("benchmarks.baselines")
    per_mutant: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="pv-bench-") as out_dir:
        _warm_up(settings, out_dir)
        try:
            for mutant in chosen:
                pv = _pv_detect(mutant, settings, out_dir)
                baselines = {method: _baseline(child, mutant, method, settings) for method in METHODS}
                row = per_mutant[mutant.name] = {"expects": list(mutant.expects), "pallas_verify": pv,
                                                 "baselines": baselines}
                if pv["found"] and any(b["found"] for b in baselines.values()):
                    row["ablation"] = _ablation(mutant, pv, settings, out_dir)
                    row["components"] = _components(mutant, settings.seed)
        finally:
            child.close()
    return {"budget_s": settings.budget_s, "case_timeout_s": settings.case_timeout_s, "mutants": len(chosen),
            **_rates(per_mutant), **_ratio(per_mutant), "per_mutant": per_mutant}
