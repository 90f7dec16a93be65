"""Race detection with ``skip_floating_point_ops`` against the same run computing its floats:
what a races-only rerun would save. pallas-verify does not run one: race detection is a
run-time knob of TPU interpret mode, so it rides in the example's one rerun (``reruns``)
at no compile of its own, where a races-only rerun would cost a compile (a cold ratio
near 1 here means exactly that).

For each case a kernel runs under race detection, through pallas-verify's own backends
(TPU interpret mode on 2 cores, or GPU interpret mode at 2 SMs), with and without
``skip_floating_point_ops``, the two interleaved, ``repeats`` times each:

- ``cold``: a fresh ``jax.jit`` each time (trace, compile, run), what a rerun costs
  (interpret params are trace-time: a rerun in another mode always retraces);
- ``warm``: a repeat of the same traced call (execution alone).

``races_only_speedup`` is the median over cases of the cold ratio (full / races-only).
``races_agree`` checks that the rerun keeps what it is for: on the racy mutant
``acc_across_parallel`` both runs report a race, and on its twin neither does.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any

__all__ = ["CASES", "races_only"]

#: (label, bundled spec or mutant name, platform, config overrides): small catalog
#: kernels, one with 512-wide blocks (where the floats cost), jax's Mosaic GPU kernels.
CASES: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
    ("matmul_f32", "matmul_f32", "tpu", {}),
    ("matmul_f32 512 blocks", "matmul_f32", "tpu",
     {"m": 1024, "n": 1024, "k": 1024, "bm": 512, "bn": 512, "bk": 512, "grid": (2, 2, 2)}),
    ("softmax", "softmax", "tpu", {}),
    ("acc_across_parallel", "acc_across_parallel", "tpu", {}),
    ("upstream_gpu_hopper_matmul_mgpu", "upstream_gpu_hopper_matmul_mgpu", "gpu", {}),
    ("upstream_gpu_transposed_ragged_dot_mgpu", "upstream_gpu_transposed_ragged_dot_mgpu", "gpu", {}),
)


def _spec(name: str) -> Any:
    from pallas_verify.campaigns.conformance import registered_specs
    from reference_kernels.mutants import mutants

    found = {m.name: m.spec for m in mutants()} | {m.twin.name: m.twin for m in mutants()}
    return found[name] if name in found else registered_specs(name)[0]


def _example(spec: Any, overrides: dict[str, Any]) -> tuple[dict[str, Any], tuple[Any, ...]]:
    from hypothesis import find

    config = {**find(spec.configs, lambda c: True), **overrides}
    return config, find(spec.inputs(config), lambda _: True)


def _run(spec: Any, config: dict[str, Any], inputs: tuple[Any, ...], platform: str, skip: bool,
         *, fresh: bool) -> tuple[float, bool]:
    """Seconds of one race-detecting run, and whether it reported a race."""
    from pallas_verify.backends import execute
    from pallas_verify.backends.interpreters import GpuInterpret, TpuInterpret
    from pallas_verify.case import Case

    if fresh:
        execute._JIT_CACHE.clear()  # a new jax.jit: trace and compile again, as a rerun does
    if platform == "tpu":
        backend, mode = TpuInterpret(), {"detect_races": True, "num_cores_or_threads": 2, "random_seed": 1}
    else:
        backend, mode = GpuInterpret(), {"detect_races": True, "on_race": "warn", "sm_count": 2}
    case = Case(spec=spec, config=config, inputs=inputs, backend=backend.name,
                mode={**mode, "skip_floating_point_ops": skip})
    started = time.perf_counter()
    outcome = backend.run(case)
    seconds = time.perf_counter() - started
    if outcome.error is not None and not outcome.races:
        raise RuntimeError(f"{spec.name} (skip_floating_point_ops={skip}) failed: {outcome.error.summary()}")
    return seconds, outcome.races


@dataclasses.dataclass
class _Times:
    full: list[float] = dataclasses.field(default_factory=list)
    races_only: list[float] = dataclasses.field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        full, races = statistics.median(self.full), statistics.median(self.races_only)
        return {"full_s": round(full, 4), "races_only_s": round(races, 4), "speedup": round(full / races, 3)}


def _time_case(name: str, platform: str, overrides: dict[str, Any], repeats: int) -> dict[str, Any]:
    spec = _spec(name)
    config, inputs = _example(spec, overrides)
    cold, warm = _Times(), _Times()
    for skip in (False, True):  # warm up: the interpreters' first use is not the rerun's cost
        _run(spec, config, inputs, platform, skip, fresh=True)
    for i in range(repeats):
        for skip in ((False, True) if i % 2 == 0 else (True, False)):
            (cold.races_only if skip else cold.full).append(_run(spec, config, inputs, platform, skip, fresh=True)[0])
            (warm.races_only if skip else warm.full).append(_run(spec, config, inputs, platform, skip, fresh=False)[0])
    return {"platform": platform, "cold": cold.summary(), "warm": warm.summary()}


def _agreement() -> dict[str, Any]:
    from reference_kernels.mutants import mutants

    mutant = next(m for m in mutants() if m.name == "acc_across_parallel")
    seen = {}
    for label, spec in (("mutant", mutant.spec), ("twin", mutant.twin)):
        config, inputs = _example(spec, {})
        seen[label] = {f"skip_floating_point_ops={skip}": _run(spec, config, inputs, "tpu", skip, fresh=False)[1]
                       for skip in (False, True)}
    agree = all(seen["mutant"].values()) and not any(seen["twin"].values())
    return {"races_agree": agree, "races_seen": seen}


def races_only(repeats: int = 3, cases: tuple[tuple[str, str, str, dict[str, Any]], ...] = CASES) -> dict[str, Any]:
    """Cold and warm seconds, with and without floats, per case; the median cold speed-up."""
    per_case = {label: _time_case(name, platform, overrides, repeats) for label, name, platform, overrides in cases}
    speedups = [c["cold"]["speedup"] for c in per_case.values()]
    return {"races_only_speedup": round(statistics.median(speedups), 3),
            "races_only_speedup_warm_max": max(c["warm"]["speedup"] for c in per_case.values()),
            "repeats": repeats, "per_case": per_case, **_agreement()}
