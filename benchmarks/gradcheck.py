"""The usual gradient test of a kernel with a custom VJP: ``jax.vjp`` of kernel and reference.

A spec that declares ``transforms=("grad",)`` has its bugs in the backward kernels, which
a forward allclose never runs; a hand-written test suite would check the gradient too.
So the baselines do, for such specs: the VJP of the kernel (under the same forced
interpreter) and of the reference, with respect to every floating-point input, at a
seeded standard-normal cotangent, compared by allclose. The tolerance is the one
pallas-verify uses for gradients (the forward's times ``GRAD_TOLERANCE_FACTOR``, the
absolute part scaled by the largest expected gradient), so both sides judge alike.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["grad_failure"]


def _inexact(dtype: Any) -> bool:
    import jax.numpy as jnp

    return bool(jnp.issubdtype(dtype, jnp.inexact))


@functools.cache
def _vjp_fn(fn: Callable[..., Any], config_items: tuple[tuple[str, Any], ...], diff: tuple[int, ...]) -> Any:
    """jit of (inputs, cotangents) -> VJP of ``fn(*inputs, **config)`` w.r.t. inputs ``diff``."""
    import jax

    config = dict(config_items)

    def vjp(inputs: tuple[Any, ...], cotangents: Any) -> tuple[Any, ...]:
        def of_floats(*values: Any) -> Any:
            args = list(inputs)
            for i, value in zip(diff, values, strict=True):
                args[i] = value
            return fn(*args, **config)

        _, pullback = jax.vjp(of_floats, *(inputs[i] for i in diff))
        return tuple(pullback(cotangents))

    return jax.jit(vjp)


def _cotangents(spec: Any, config: dict[str, Any], inputs: tuple[np.ndarray, ...], seed: int) -> Any:
    import jax

    shapes = jax.eval_shape(functools.partial(spec.reference, **config), *inputs)
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda s: rng.standard_normal(s.shape).astype(s.dtype), shapes)


def _tolerance(spec: Any, expected: tuple[np.ndarray, ...]) -> tuple[float, float]:
    from benchmarks.bare import baseline_tolerance
    from pallas_verify.transforms import GRAD_TOLERANCE_FACTOR

    base = max((baseline_tolerance(spec, e.dtype) for e in expected), key=lambda t: t.rtol)
    scale = max((float(np.abs(e[np.isfinite(e)].astype(np.float64)).max(initial=0.0)) for e in expected), default=0.0)
    return GRAD_TOLERANCE_FACTOR * base.rtol, GRAD_TOLERANCE_FACTOR * (base.atol + base.rtol * scale)


def grad_failure(spec: Any, config: dict[str, Any], inputs: tuple[np.ndarray, ...], params: Any, seed: int) -> str | None:
    """Why the kernel's VJP differs from the reference's, or None when allclose."""
    import jax
    from jax.experimental.pallas import tpu as pltpu

    diff = tuple(i for i, x in enumerate(inputs) if _inexact(x.dtype))
    items = tuple(sorted(config.items()))
    cotangents = _cotangents(spec, config, inputs, seed)
    with pltpu.force_tpu_interpret_mode(params):
        got = jax.block_until_ready(_vjp_fn(spec.kernel, items, diff)(inputs, cotangents))
    want = jax.block_until_ready(_vjp_fn(spec.reference, items, diff)(inputs, cotangents))
    got, want = tuple(np.asarray(g) for g in got), tuple(np.asarray(w) for w in want)
    rtol, atol = _tolerance(spec, want)
    for i, (g, w) in zip(diff, zip(got, want, strict=True), strict=True):
        if not np.allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol):
            return f"the gradient of input {i} is not allclose to the reference's (rtol={rtol:.3g}, atol={atol:.3g})"
    return None
