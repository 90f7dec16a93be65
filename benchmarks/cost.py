"""Cost per example per backend, and how it grows with grid points.

One portable tiled kernel (``TILED_ADD``: an (8, 128) block per grid point, no compiler
params, so Mosaic TPU and Triton both take it) runs at grids of G points on every
backend, through pallas-verify's backends as ``verify`` runs them: interpreters
in-process, compilers in their worker process (started and warmed on another shape
first, so no process start is timed). ``cold`` is the first run of a grid (trace,
compile, run); ``warm`` a repeat (the interpreters' execution alone; the compilers
answer a repeat from their compile cache, so it is not reported for them).

A straight line ``fixed_s + per_point_s * G`` is fitted to each series by least squares.
A TPU interpret example runs the base case (with race detection) and the metamorphic
reruns its base run shows could change a bit (those of the grid order tracing anew).
``recommended_max_grid_points`` is the largest power of two at which the grid points of
such an example (cold: a search's configs vary) cost no more than its fixed part: beyond
it, the grid dominates the example's cost.
"""

from __future__ import annotations

import time
from typing import Any

import jax
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl

import pallas_verify as pv

__all__ = ["BACKENDS", "TILED_ADD", "cost"]

BM, BN = 8, 128
#: (label, pallas-verify backend, mode).
BACKENDS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("interpret", "interpret", {}),
    ("tpu_interpret", "tpu_interpret", {}),
    ("tpu_interpret+races", "tpu_interpret", {"detect_races": True, "num_cores_or_threads": 2}),
    ("mosaic_tpu:v5e", "mosaic_tpu:v5e", {}),
    ("triton:h100", "triton:h100", {}),
)
RERUNS_PER_TPU_EXAMPLE = 3


def _add_body(x_ref: Any, y_ref: Any, o_ref: Any) -> None:
    o_ref[...] = x_ref[...] + y_ref[...]


def tiled_add(x: jax.Array, y: jax.Array, *, points: int) -> jax.Array:
    """``x + y`` over a grid of ``points`` row blocks of (8, 128)."""
    block = pl.BlockSpec((BM, BN), lambda i: (i, 0))
    return pl.pallas_call(_add_body, grid=(points,), in_specs=[block, block], out_specs=block,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


def _inputs(config: dict[str, Any]) -> st.SearchStrategy[tuple[np.ndarray, ...]]:
    shape = (BM * config["points"], config.get("cols", BN))
    return st.integers(0, 2**32 - 1).map(
        lambda seed: tuple(np.random.default_rng(seed).standard_normal(shape, dtype=np.float32) for _ in range(2)))


TILED_ADD = pv.KernelSpec(
    name="tiled_add",
    kernel=lambda x, y, *, points, cols=BN: tiled_add(x, y, points=points),
    reference=lambda x, y, *, points, cols=BN: x + y,
    configs=st.fixed_dictionaries({"points": st.sampled_from([1, 2, 4, 8])}),
    inputs=_inputs,
    platforms=("tpu", "gpu"),
)


def _case(backend: str, mode: dict[str, Any], points: int, cols: int = BN) -> Any:
    from pallas_verify.case import Case

    shape = (BM * points, cols)
    rng = np.random.default_rng(points)
    inputs = tuple(rng.standard_normal(shape, dtype=np.float32) for _ in range(2))
    return Case(spec=TILED_ADD, config={"points": points, "cols": cols}, inputs=inputs, backend=backend, mode=mode)


def _timed_run(runner: Any, case: Any) -> float:
    start = time.perf_counter()
    outcome = runner.run(case)
    if not outcome.ok:
        raise RuntimeError(f"the cost kernel failed on {case.backend} at {case.config}: {outcome.error or outcome.crashed}")
    return time.perf_counter() - start


def _fit(points: list[int], seconds: list[float]) -> dict[str, float]:
    if len(points) < 2:
        return {"fixed_s": seconds[0] if seconds else 0.0, "per_point_s": 0.0}
    slope, intercept = np.polyfit(np.asarray(points, float), np.asarray(seconds, float), 1)
    return {"fixed_s": float(intercept), "per_point_s": float(slope)}


def _series(label: str, backend: str, mode: dict[str, Any], grid_points: tuple[int, ...]) -> dict[str, Any]:
    from pallas_verify.backends import registry
    from pallas_verify.runner import Runner

    executes = registry.get(backend).executes
    with Runner(TILED_ADD, isolate="never") as runner:
        _timed_run(runner, _case(backend, mode, 1, cols=2 * BN))  # warm the process on another shape
        rows = []
        for g in grid_points:
            jax.clear_caches()
            cold = _timed_run(runner, _case(backend, mode, g))
            warm = _timed_run(runner, _case(backend, mode, g)) if executes else None
            rows.append({"grid_points": g, "cold_s": cold, "warm_s": warm})
    out = {"label": label, "backend": backend, "mode": mode, "rows": rows,
           "cold_fit": _fit([r["grid_points"] for r in rows], [r["cold_s"] for r in rows])}
    if executes:
        out["warm_fit"] = _fit([r["grid_points"] for r in rows], [r["warm_s"] for r in rows])
    return out


def _recommend(series: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if not {"tpu_interpret", "tpu_interpret+races"} <= set(series):
        return {"recommended_max_grid_points": None}
    """The largest power-of-two grid at which a cold TPU interpret example spends no more
    time on its grid points than on its fixed part (trace and compile of the base run and
    its reruns): past it, a search buys fewer examples for a larger grid at a
    loss."""
    base, rerun = series["tpu_interpret+races"]["cold_fit"], series["tpu_interpret"]["cold_fit"]
    fixed = base["fixed_s"] + RERUNS_PER_TPU_EXAMPLE * rerun["fixed_s"]
    per_point = base["per_point_s"] + RERUNS_PER_TPU_EXAMPLE * rerun["per_point_s"]
    best = 1
    while best < 4096 and per_point * 2 * best <= fixed:
        best *= 2
    return {"recommended_max_grid_points": best,
            "tpu_example_fit": {"fixed_s": fixed, "per_point_s": per_point},
            "predicted_tpu_example_s": {g: fixed + per_point * g for g in sorted({1, 4, 16, 64, best})}}


def cost(*, grid_points: tuple[int, ...] = (1, 2, 4, 8, 16, 32),
         backends: tuple[tuple[str, str, dict[str, Any]], ...] = BACKENDS) -> dict[str, Any]:
    """Cold and warm seconds per run at each grid size, per backend; fits; the budget."""
    from pallas_verify.backends import registry

    series: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    for label, backend, mode in backends:
        reason = registry.get(backend).available()
        if reason is not None:
            skipped[label] = reason
            continue
        series[label] = _series(label, backend, mode, grid_points)
    return {"grid_points": list(grid_points), "series": series, "skipped": skipped,
            **_recommend(series)}
