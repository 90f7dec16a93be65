"""Row-wise normalisations: softmax, layer norm and RMS norm over row blocks, plus a
whole-array softmax that also runs on GPU."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
from reference_kernels._draw import normal, seeded, without

__all__ = ["LAYER_NORM", "RMS_NORM", "SOFTMAX", "SOFTMAX_WHOLE"]

_EPS = 1e-5
_TOL = pv.Tolerance(rtol=1e-5, atol=1e-5)


def _softmax(x: jax.Array) -> jax.Array:
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)


def _softmax_body(x_ref, o_ref):
    o_ref[...] = _softmax(x_ref[...])


def _layer_norm_body(x_ref, g_ref, b_ref, o_ref):
    x = x_ref[...]
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    o_ref[...] = (x - mean) * jax.lax.rsqrt(var + _EPS) * g_ref[...] + b_ref[...]


def _rms_norm_body(x_ref, g_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + _EPS) * g_ref[...]


def _row_blocked(body, x, params, block_rows):
    rows, cols = x.shape
    return pl.pallas_call(
        body,
        grid=(rows // block_rows,),
        in_specs=[pl.BlockSpec((block_rows, cols), lambda i: (i, 0))]
        + [pl.BlockSpec((1, cols), lambda i: (0, 0)) for _ in params],
        out_specs=pl.BlockSpec((block_rows, cols), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x, *params)


@functools.partial(jax.jit, static_argnames=("block_rows",))
def softmax(x: jax.Array, *, block_rows: int) -> jax.Array:
    """Softmax over the last axis, one block of whole rows per grid point."""
    return _row_blocked(_softmax_body, x, (), block_rows)


@functools.partial(jax.jit, static_argnames=("block_rows",))
def layer_norm(x: jax.Array, gamma: jax.Array, beta: jax.Array, *, block_rows: int) -> jax.Array:
    """Layer norm over the last axis with scale ``gamma`` and shift ``beta`` (1, cols)."""
    return _row_blocked(_layer_norm_body, x, (gamma, beta), block_rows)


@functools.partial(jax.jit, static_argnames=("block_rows",))
def rms_norm(x: jax.Array, gamma: jax.Array, *, block_rows: int) -> jax.Array:
    """RMS norm over the last axis with scale ``gamma`` (1, cols)."""
    return _row_blocked(_rms_norm_body, x, (gamma,), block_rows)


@jax.jit
def softmax_whole(x: jax.Array) -> jax.Array:
    """Softmax over the last axis of the whole array in one grid point (portable)."""
    return pl.pallas_call(_softmax_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def layer_norm_reference(x, gamma, beta):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.var(x, axis=-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + _EPS) * gamma + beta


def rms_norm_reference(x, gamma):
    return x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + _EPS) * gamma


@st.composite
def _configs(draw):
    block_rows = draw(st.sampled_from([8, 16]))
    return {"rows": block_rows * draw(st.integers(1, 4)),
            "cols": draw(st.sampled_from([128, 256, 512])), "block_rows": block_rows}


def _inputs(n_params):
    def inputs(config):
        rows, cols = config["rows"], config["cols"]

        def make(rng):
            x = normal(rng, (rows, cols)) * 3 + 1
            return (x, *(normal(rng, (1, cols)) for _ in range(n_params)))

        return seeded(make)

    return inputs


_SIZES = ("rows", "cols", "block_rows")

SOFTMAX = pv.KernelSpec(
    name="softmax", kernel=without(softmax, "rows", "cols"),
    reference=without(jax.nn.softmax, *_SIZES), configs=_configs(), inputs=_inputs(0),
    tolerance=_TOL, features=("reduction", "row_blocked"), bitwise_stable=False,
)
LAYER_NORM = pv.KernelSpec(
    name="layer_norm", kernel=without(layer_norm, "rows", "cols"),
    reference=without(layer_norm_reference, *_SIZES), configs=_configs(), inputs=_inputs(2),
    tolerance=pv.Tolerance(rtol=1e-4, atol=1e-4), features=("reduction", "row_blocked", "normalization"),
    bitwise_stable=False,
)
RMS_NORM = pv.KernelSpec(
    name="rms_norm", kernel=without(rms_norm, "rows", "cols"),
    reference=without(rms_norm_reference, *_SIZES), configs=_configs(), inputs=_inputs(1),
    tolerance=pv.Tolerance(rtol=1e-4, atol=1e-4), features=("reduction", "row_blocked", "normalization"),
    bitwise_stable=False,
)
SOFTMAX_WHOLE = pv.KernelSpec(
    name="softmax_whole", kernel=without(softmax_whole, *_SIZES),
    reference=without(jax.nn.softmax, *_SIZES), configs=_configs(), inputs=_inputs(0),
    tolerance=_TOL, platforms=("tpu", "gpu"), features=("reduction", "whole_array"),
    bitwise_stable=False,
)
