"""The usual way to test a kernel, without pallas-verify: jit it, force an interpreter, allclose.

``bare_run`` is a direct ``pallas_call`` invocation: the kernel bound to its config and
jitted once per (kernel, config), called under ``pltpu.force_tpu_interpret_mode(params)``
(``True`` forces the HLO interpreter, an ``InterpretParams`` TPU interpret mode), with the
result pulled back to numpy. ``allclose_failure`` compares with the spec's reference the
way a parametrised test would: ``np.allclose`` with the spec's tolerance, else a hand-set
one (``HAND_SET``: what such tests set for float32 reductions, and what the catalog specs
carried before pallas-verify judged against a float64 ground truth), else the dtype's
default (the torch-style table), NaN never equal.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["HAND_SET", "INTERPRETERS", "allclose_failure", "bare_run", "baseline_tolerance", "interpret_params",
           "reference_run"]

#: (rtol, atol) a hand-written test sets per dtype name; others use the dtype's default.
HAND_SET: dict[str, tuple[float, float]] = {"float32": (1e-4, 1e-4)}


def baseline_tolerance(spec: Any, dtype: np.dtype) -> Any:
    """The tolerance a bare test compares ``dtype`` outputs with (see the module doc)."""
    from pallas_verify.spec import Tolerance
    from pallas_verify.tolerance import default_tolerance

    if spec.tolerance is not None:
        return spec.tolerance
    if np.dtype(dtype).name in HAND_SET:
        rtol, atol = HAND_SET[np.dtype(dtype).name]
        return Tolerance(rtol=rtol, atol=atol)
    return default_tolerance(dtype)

#: Interpreter modes of the benchmarks: name -> InterpretParams keyword arguments (None: HLO).
INTERPRETERS: dict[str, dict[str, Any] | None] = {"hlo": None, "tpu_default": {}}


def interpret_params(mode: dict[str, Any] | None) -> Any:
    """``True`` (the HLO interpreter) for None, else ``pltpu.InterpretParams(**mode)``."""
    from jax.experimental.pallas import tpu as pltpu

    return True if mode is None else pltpu.InterpretParams(**mode)


@functools.cache
def _jitted(fn: Callable[..., Any], config_items: tuple[tuple[str, Any], ...]) -> Callable[..., Any]:
    import jax

    config = dict(config_items)
    return jax.jit(lambda *xs: fn(*xs, **config))


def _bound(fn: Callable[..., Any], config: dict[str, Any]) -> Callable[..., Any]:
    return _jitted(fn, tuple(sorted(config.items())))


def bare_run(spec: Any, config: dict[str, Any], inputs: tuple[np.ndarray, ...], params: Any) -> tuple[np.ndarray, ...]:
    """Run the kernel once under the forced interpreter ``params``; numpy outputs."""
    import jax
    from jax.experimental.pallas import tpu as pltpu

    with pltpu.force_tpu_interpret_mode(params):
        result = jax.block_until_ready(_bound(spec.kernel, config)(*inputs))
    return tuple(np.asarray(leaf) for leaf in jax.tree.leaves(result))


def reference_run(spec: Any, config: dict[str, Any], inputs: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """The spec's reference, jitted on CPU; numpy outputs."""
    import jax

    result = jax.block_until_ready(_bound(spec.reference, config)(*inputs))
    return tuple(np.asarray(leaf) for leaf in jax.tree.leaves(result))


def allclose_failure(spec: Any, outputs: tuple[np.ndarray, ...], expected: tuple[np.ndarray, ...]) -> str | None:
    """Why ``outputs`` fail an allclose check against ``expected``, or None when they pass."""
    if len(outputs) != len(expected):
        return f"{len(outputs)} outputs, expected {len(expected)}"
    for i, (out, exp) in enumerate(zip(outputs, expected, strict=True)):
        if out.shape != exp.shape or out.dtype != exp.dtype:
            return f"output {i}: {out.shape} {out.dtype} != expected {exp.shape} {exp.dtype}"
        tol = baseline_tolerance(spec, out.dtype)
        if not np.allclose(out.astype(np.float64), exp.astype(np.float64), rtol=tol.rtol, atol=tol.atol):
            return f"output {i} is not allclose to the reference (rtol={tol.rtol}, atol={tol.atol})"
    return None
