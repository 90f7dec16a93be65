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
import strategies as pvs
from reference_kernels._draw import array_tuples, without
from reference_kernels.elementwise import WHOLE_ARRAY_SHAPES

__all__ = ["LAYER_NORM", "RMS_NORM", "SOFTMAX", "SOFTMAX_WHOLE"]

_EPS = 1e-5


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


_ROW_SEMANTICS = ("parallel",)


def _row_blocked(body, x, params, block_rows, dimension_semantics):
    rows, cols = x.shape
    return pl.pallas_call(
        body,
        grid=(pl.cdiv(rows, block_rows),),
        in_specs=[pl.BlockSpec((block_rows, cols), lambda i: (i, 0))]
        + [pl.BlockSpec((1, cols), lambda i: (0, 0)) for _ in params],
        out_specs=pl.BlockSpec((block_rows, cols), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=dimension_semantics),
    )(x, *params)


@functools.partial(jax.jit, static_argnames=("block_rows", "dimension_semantics"))
def softmax(x: jax.Array, *, block_rows: int,
            dimension_semantics: tuple[str] = _ROW_SEMANTICS) -> jax.Array:
    """Softmax over the last axis, one block of whole rows per grid point."""
    return _row_blocked(_softmax_body, x, (), block_rows, dimension_semantics)


@functools.partial(jax.jit, static_argnames=("block_rows", "dimension_semantics"))
def layer_norm(x: jax.Array, gamma: jax.Array, beta: jax.Array, *, block_rows: int,
               dimension_semantics: tuple[str] = _ROW_SEMANTICS) -> jax.Array:
    """Layer norm over the last axis with scale ``gamma`` and shift ``beta`` (1, cols)."""
    return _row_blocked(_layer_norm_body, x, (gamma, beta), block_rows, dimension_semantics)


@functools.partial(jax.jit, static_argnames=("block_rows", "dimension_semantics"))
def rms_norm(x: jax.Array, gamma: jax.Array, *, block_rows: int,
             dimension_semantics: tuple[str] = _ROW_SEMANTICS) -> jax.Array:
    """RMS norm over the last axis with scale ``gamma`` (1, cols)."""
    return _row_blocked(_rms_norm_body, x, (gamma,), block_rows, dimension_semantics)


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


def _row_configs():
    """Row blocks of one or two sublane tiles over ragged rows (a partial last block only
    computes padded rows, which are dropped), whole rows of a ragged width per block."""
    rows = pvs.tiled_configs(axes={"rows": "sublane"}, max_grid_points=16)
    return st.builds(lambda config, cols: {**config, "cols": cols}, rows, pvs.ragged_sizes(block=128))


def _inputs(n_params):
    """x with at most one edge value per array; gamma and beta without: a large gamma and
    an opposite large beta in one column cancel, amplifying x's rounding (rsqrt vs sqrt)."""
    def inputs(config):
        rows, cols = config["rows"], config["cols"]
        x = pvs.arrays(shape=(rows, cols), max_edge_values=1)
        return st.tuples(x, *(pvs.arrays(shape=(1, cols), max_edge_values=0) for _ in range(n_params)))

    return inputs


def _whole_inputs(config):
    return array_tuples(config["shape"], max_edge_values=1)


_SIZES = ("rows", "cols", "block_rows", "grid", "dimension_semantics", "dtype")
_KEEP = ("rows", "cols", "grid", "dtype")

SOFTMAX = pv.KernelSpec(
    name="softmax", kernel=without(softmax, *_KEEP),
    reference=without(jax.nn.softmax, *_SIZES), configs=_row_configs(), inputs=_inputs(0),
    features=("reduction", "row_blocked"), transforms=("vmap",), bitwise_stable=False,
)
LAYER_NORM = pv.KernelSpec(
    name="layer_norm", kernel=without(layer_norm, *_KEEP),
    reference=without(layer_norm_reference, *_SIZES), configs=_row_configs(), inputs=_inputs(2),
    features=("reduction", "row_blocked", "normalization"),
    bitwise_stable=False,
)
RMS_NORM = pv.KernelSpec(
    name="rms_norm", kernel=without(rms_norm, *_KEEP),
    reference=without(rms_norm_reference, *_SIZES), configs=_row_configs(), inputs=_inputs(1),
    features=("reduction", "row_blocked", "normalization"),
    bitwise_stable=False,
)
SOFTMAX_WHOLE = pv.KernelSpec(
    name="softmax_whole", kernel=without(softmax_whole, "shape"),
    reference=without(jax.nn.softmax, "shape"), configs=st.fixed_dictionaries({"shape": WHOLE_ARRAY_SHAPES}),
    inputs=_whole_inputs, platforms=("tpu", "gpu"), features=("reduction", "whole_array"),
    transforms=("vmap",), bitwise_stable=False,
)
