"""Overhead: the same cases run bare and through pallas-verify, side by side.

A case is (catalog spec, example drawn with a fixed seed, interpreter mode). Each case
runs on three paths, each executing the kernel the same number of times (once cold, after
``jax.clear_caches()``, so it traces and compiles; then ``repeats`` times warm, counted
as ``repeats`` times the median warm run):

- ``bare``: the jitted kernel called directly under the forced interpreter (bare.py);
- ``in_process``: ``backend.run(case)`` of the pallas-verify backend (what the Runner
  calls when it does not isolate);
- ``worker``: ``Runner.run(case)`` with ``isolate="always"``: the same call in the
  interpreter worker process, inputs and outputs crossing a pipe (what ``verify`` does by
  default for a module-level spec). Its cold run is the worker's first sight of the case.

``overhead_ratio`` is the worker path's total over the bare total (the default path);
the in-process ratio and the cold and warm parts are reported beside it.

A full example costs more than one execution, by design: the reference runs once per
example, and on TPU interpret mode the metamorphic reruns its base run shows could change
a bit follow it (the fill and DMA ones on the base run's compile, another grid order or
core count as one rerun that compiles). ``example_cost`` times ``Runner.check`` for one
example (first sight of the example and a repeat) against one bare test example (kernel,
reference, allclose), all with the base run already compiled; on the first sight a rerun
that changes the grid order compiles.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.bare import allclose_failure, bare_run, reference_run
from benchmarks.sampling import Example, draw_examples

__all__ = ["MODES", "SPECS", "overhead"]

#: Catalog specs of the overhead cases (module, name).
SPECS: tuple[tuple[str, str], ...] = (
    ("reference_kernels.elementwise", "RAGGED_ADD"),
    ("reference_kernels.reductions", "ROW_SUM"),
    ("reference_kernels.matmul", "MATMUL_F32"),
)
#: Interpreter modes: (pallas-verify backend, mode). TPU interpret mode runs as pallas-verify
#: runs it: InterpretParams(on_race="warn", **mode).
MODES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("interpret", {}),
    ("tpu_interpret", {}),
    ("tpu_interpret", {"detect_races": True, "num_cores_or_threads": 2}),
)
PATHS = ("bare", "in_process", "worker")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Case:
    spec: Any
    example: Example
    backend: str
    mode: dict[str, Any]

    def pv_case(self) -> Any:
        from pallas_verify.case import Case as PvCase

        return PvCase(spec=self.spec, config=self.example.config, inputs=self.example.inputs,
                      backend=self.backend, mode=self.mode)

    def params(self) -> Any:
        from jax.experimental.pallas import tpu as pltpu

        return True if self.backend == "interpret" else pltpu.InterpretParams(**{"on_race": "warn", **self.mode})


def cases(*, examples: int, seed: int, specs: tuple[tuple[str, str], ...] = SPECS,
          modes: tuple[tuple[str, dict[str, Any]], ...] = MODES) -> list[Case]:
    """Every (spec, drawn example, mode) combination."""
    import importlib

    out = []
    for module, name in specs:
        spec = getattr(importlib.import_module(module), name)
        for example in draw_examples(spec, count=examples, seed=seed):
            out.extend(Case(spec=spec, example=example, backend=b, mode=m) for b, m in modes)
    return out


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _path_runner(case: Case, path: str, runner: Any) -> Callable[[], Any]:
    from pallas_verify.backends import registry

    if path == "bare":
        params = case.params()
        return lambda: bare_run(case.spec, case.example.config, case.example.inputs, params)
    if path == "in_process":
        backend = registry.get(case.backend)
        return lambda: _checked(backend.run(case.pv_case()))
    return lambda: _checked(runner.run(case.pv_case()))


def _checked(outcome: Any) -> Any:
    if not outcome.ok:
        raise RuntimeError(f"a correct catalog kernel failed in the overhead benchmark: {outcome.error}")
    return outcome


def _measure(case: Case, path: str, runner: Any, repeats: int) -> tuple[float, float]:
    """(cold seconds, ``repeats`` warm runs) of one case on one path.

    The warm part is ``repeats`` times the median warm run: on a shared machine one
    descheduled run would otherwise outweigh the rest.
    """
    import jax

    if path != "worker":
        jax.clear_caches()
    run = _path_runner(case, path, runner)
    cold = _timed(run)
    return cold, repeats * statistics.median(_timed(run) for _ in range(repeats))


def _example_cost(case: Case) -> dict[str, float]:
    """One full example in-process (so both sides can start from cleared caches)."""
    import jax

    from pallas_verify.backends import registry
    from pallas_verify.runner import Runner

    ex, backend = case.example, registry.get(case.backend)

    def check() -> None:
        with Runner(case.spec, isolate="never") as runner:
            if runner.check(ex.config, ex.inputs, backend, case.mode):
                raise RuntimeError(f"a correct catalog kernel showed findings: {case.spec.name} {ex.config}")

    def bare_test() -> None:
        outputs = bare_run(case.spec, ex.config, ex.inputs, case.params())
        if allclose_failure(case.spec, outputs, reference_run(case.spec, ex.config, ex.inputs)):
            raise RuntimeError(f"a correct catalog kernel failed allclose: {case.spec.name} {ex.config}")

    times = {}
    for name, fn in (("bare_test", bare_test), ("pv_example", check)):
        jax.clear_caches()
        times[f"{name}_cold"], times[f"{name}_warm"] = _timed(fn), _timed(fn)
    return {**times, "kernel_runs_per_example": 1 + len(getattr(backend, "variants", lambda _: [])(case.mode))}


def _rotated(items: tuple[str, ...], i: int) -> tuple[str, ...]:
    """The paths in a different order per case, so drift in machine load spreads evenly."""
    k = i % len(items)
    return items[k:] + items[:k]


def _backend_ratios(cell: dict[str, float]) -> dict[str, float]:
    out = {}
    for path in ("in_process", "worker"):
        for part in ("cold", "warm"):
            out[f"{path}_{part}"] = cell[f"{path}_{part}"] / max(cell[f"bare_{part}"], 1e-12)
    return out


def _ratios(totals: dict[str, dict[str, float]]) -> dict[str, float]:
    out = {}
    for path in ("in_process", "worker"):
        for part in ("cold", "warm", "total"):
            out[f"{path}_{part}"] = totals[path][part] / max(totals["bare"][part], 1e-12)
    return out


def overhead(*, examples: int = 2, repeats: int = 5, seed: int = 0, specs: tuple[tuple[str, str], ...] = SPECS,
             modes: tuple[tuple[str, dict[str, Any]], ...] = MODES) -> dict[str, Any]:
    """Bare vs pallas-verify per case; ratios, totals, and the cost of a full example."""
    from pallas_verify.runner import Runner

    chosen = cases(examples=examples, seed=seed, specs=specs, modes=modes)
    with Runner(chosen[0].spec, isolate="always") as runner:  # start the worker, import jax everywhere
        for path in PATHS:
            _path_runner(chosen[0], path, runner)()
    totals = {p: {"cold": 0.0, "warm": 0.0, "total": 0.0} for p in PATHS}
    by_backend: dict[str, dict[str, float]] = {}
    full: list[dict[str, Any]] = []
    for i, case in enumerate(chosen):
        with Runner(case.spec, isolate="always") as runner:
            for path in _rotated(PATHS, i):
                cold, warm = _measure(case, path, runner, repeats)
                for part, value in (("cold", cold), ("warm", warm), ("total", cold + warm)):
                    totals[path][part] += value
                key = f"{case.backend}{'+races' if case.mode else ''}"
                cell = by_backend.setdefault(key, {})
                for part, value in (("cold", cold), ("warm", warm)):
                    cell[f"{path}_{part}"] = cell.get(f"{path}_{part}", 0.0) + value
        full.append({"backend": case.backend, "mode": case.mode, **_example_cost(case)})
    ratios = _ratios(totals)
    return {
        "overhead_ratio": ratios["worker_total"],
        "overhead_ratio_in_process": ratios["in_process_total"],
        "ratios": ratios,
        "by_backend": {k: _backend_ratios(v) for k, v in by_backend.items()},
        "totals_s": totals,
        "cases": len(chosen),
        "executions_per_path": len(chosen) * (1 + repeats),
        "example_cost": _example_summary(full),
    }


def _example_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for backend in sorted({r["backend"] for r in rows}):
        mine = [r for r in rows if r["backend"] == backend]

        def total(key: str, rows: list[dict[str, Any]] = mine) -> float:
            return sum(r[key] for r in rows)

        out[backend] = {
            "examples": len(mine),
            "kernel_runs_per_example": max(r["kernel_runs_per_example"] for r in mine),
            "ratio_cold": total("pv_example_cold") / max(total("bare_test_cold"), 1e-12),
            "ratio_warm": total("pv_example_warm") / max(total("bare_test_warm"), 1e-12),
            "mean_s": {k: total(k) / len(mine) for k in
                       ("bare_test_cold", "bare_test_warm", "pv_example_cold", "pv_example_warm")},
        }
    return out
