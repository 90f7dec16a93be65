"""The usual ways of testing a kernel, run against the mutant catalog as baselines.

Each baseline draws examples from the mutant's own strategies (see sampling.py), runs the
kernel bare under one interpreter (bare.py) and compares with the reference by allclose;
an exception counts as a detection too (the test fails). A spec that declares the
``grad`` transform also has its VJP checked per example (gradcheck.py), as its own test
suite would. A baseline stops at its first failing example or when its budget is spent.

- ``hlo_grid``: a fixed grid of up to ``GRID_SIZE`` configs, one input each, on the HLO
  interpreter; it stops after the grid even with budget left (that is all a
  parametrised test runs).
- ``hlo_random``: random configs and inputs on the HLO interpreter until the budget ends.
- ``tpu_default``: random configs and inputs on TPU interpret mode with default
  ``InterpretParams()`` until the budget ends.

Baselines run as units of work on pallas-verify's executor (``baseline_unit`` is their
entry, see detection.py): a hang (a semaphore nothing signals) can only be ended by
killing the worker process. Each example's start is appended to a progress file, so the
driver knows when a case has run past the per-case limit; anything the kernels print is
discarded.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from benchmarks.bare import allclose_failure, bare_run, interpret_params, reference_run
from benchmarks.gradcheck import grad_failure
from benchmarks.sampling import Example, grid_examples, random_examples

__all__ = ["GRID_SIZE", "METHODS", "baseline_unit", "run_baseline"]

GRID_SIZE = 6
#: Baseline name -> (interpreter mode: None for HLO, else InterpretParams kwargs; grid or random).
METHODS: dict[str, tuple[dict[str, Any] | None, str]] = {
    "hlo_grid": (None, "grid"),
    "hlo_random": (None, "random"),
    "tpu_default": ({}, "random"),
}

Emit = Callable[[dict[str, Any]], None]


def _examples(spec: Any, how: str, seed: int) -> Iterable[Example]:
    if how == "grid":
        return grid_examples(spec, size=GRID_SIZE, seed=seed)
    return random_examples(spec, seed=seed)


def _failure(spec: Any, example: Example, params: Any, seed: int) -> str | None:
    try:
        outputs = bare_run(spec, example.config, example.inputs, params)
        expected = reference_run(spec, example.config, example.inputs)
        why = allclose_failure(spec, outputs, expected)
        if why is None and "grad" in spec.transforms:
            why = grad_failure(spec, example.config, example.inputs, params, seed)
    except Exception as exc:  # a failing test: the exception is the detection
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    return why


def run_baseline(spec: Any, method: str, *, budget_s: float, seed: int, emit: Emit) -> dict[str, Any]:
    """Run one baseline on ``spec``; emit a ``start`` event per example; return the verdict."""
    mode, how = METHODS[method]
    params = interpret_params(mode)
    started = time.perf_counter()
    examples = 0
    for example in _examples(spec, how, seed):
        if time.perf_counter() - started >= budget_s:
            break
        emit({"event": "start", "example": examples, "t": time.perf_counter() - started})
        why = _failure(spec, example, params, seed=seed * 1_000_003 + examples)
        examples += 1
        if why is not None:
            return {"found": True, "seconds": time.perf_counter() - started, "examples": examples, "why": why}
    return {"found": False, "seconds": time.perf_counter() - started, "examples": examples, "why": None}


def _warm_up() -> None:
    """Import jax and run one tiny kernel on each interpreter (a warm process, like pytest's)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import pallas as pl

    from benchmarks.bare import INTERPRETERS

    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    def kernel(x):
        return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    x = np.ones((8, 128), np.float32)
    for mode in INTERPRETERS.values():
        from jax.experimental.pallas import tpu as pltpu

        with pltpu.force_tpu_interpret_mode(interpret_params(mode)):
            jax.block_until_ready(jax.jit(kernel)(jnp.asarray(x)))


_warm = False


def _warm_once() -> None:
    """The first unit in a worker process: kernels' prints go nowhere, jax and the
    interpreters get warm (outside any baseline's timing)."""
    global _warm
    if _warm:
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    _warm_up()
    _warm = True


def baseline_unit(work: Any) -> dict[str, Any]:
    """Entry of a baseline unit (an ``execution.Work``): one baseline on one mutant.

    ``work.params``: ``mutant`` (its name), ``method`` (a METHODS key), ``budget_s``, and
    ``progress``: a file each example's start is appended to as a JSON line (``t`` since
    the baseline started, ``at`` the wall clock), for the driver's per-case limit.
    """
    import jax

    from reference_kernels.mutants import mutants

    _warm_once()
    params = work.params
    spec = {m.name: m for m in mutants()}[params["mutant"]].spec
    jax.clear_caches()  # every baseline compiles its kernel afresh, as pallas-verify does
    with open(params["progress"], "a") as progress:

        def emit(event: dict[str, Any]) -> None:
            progress.write(json.dumps({**event, "at": time.time()}) + "\n")
            progress.flush()

        return run_baseline(spec, params["method"], budget_s=params["budget_s"], seed=work.seed or 0, emit=emit)
