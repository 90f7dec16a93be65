"""Elementwise kernels: a ragged tiled add over a ``pl.cdiv`` grid, and a whole-array
portable kernel."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
from reference_kernels._draw import multiples, normal, seeded, without

__all__ = ["RAGGED_ADD", "SCALE_SHIFT"]


def _add_body(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


@functools.partial(jax.jit, static_argnames=("block_rows", "block_cols"))
def ragged_add(x: jax.Array, y: jax.Array, *, block_rows: int, block_cols: int) -> jax.Array:
    """``x + y`` tiled by (block_rows, block_cols); the last row block is partial."""
    rows, cols = x.shape
    block = pl.BlockSpec((block_rows, block_cols), lambda i, j: (i, j))
    return pl.pallas_call(
        _add_body,
        grid=(pl.cdiv(rows, block_rows), pl.cdiv(cols, block_cols)),
        in_specs=[block, block],
        out_specs=block,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")),
    )(x, y)


def ragged_add_reference(x, y, **_config):
    return x + y


@st.composite
def _ragged_configs(draw):
    block_rows = draw(st.sampled_from([8, 16]))
    # rows is not a multiple of the block: the last block is partial (padding is masked).
    rows = draw(st.integers(min_value=1, max_value=3 * block_rows))
    return {"rows": rows, "cols": draw(multiples(128, max_factor=2)),
            "block_rows": block_rows, "block_cols": 128}


def _two_arrays(config):
    shape = (config["rows"], config["cols"])
    return seeded(lambda rng: (normal(rng, shape), normal(rng, shape)))


RAGGED_ADD = pv.KernelSpec(
    name="ragged_add",
    kernel=without(ragged_add, "rows", "cols"),
    reference=without(ragged_add_reference, "rows", "cols"),
    configs=_ragged_configs(),
    inputs=_two_arrays,
    platforms=("tpu",),
    features=("ragged", "elementwise"),
)


def _scale_shift_body(x_ref, o_ref, *, scale: float, shift: float):
    o_ref[...] = x_ref[...] * scale + shift


@functools.partial(jax.jit, static_argnames=("scale", "shift"))
def scale_shift(x: jax.Array, *, scale: float, shift: float) -> jax.Array:
    """``x * scale + shift`` on the whole array in one grid point (portable)."""
    body = functools.partial(_scale_shift_body, scale=scale, shift=shift)
    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def scale_shift_reference(x, *, scale, shift):
    return x * jnp.asarray(scale, x.dtype) + jnp.asarray(shift, x.dtype)


def _scale_shift_inputs(config):
    return seeded(lambda rng: (normal(rng, config["shape"]),))


SCALE_SHIFT = pv.KernelSpec(
    name="scale_shift",
    kernel=without(scale_shift, "shape"),
    reference=without(scale_shift_reference, "shape"),
    configs=st.fixed_dictionaries({
        "shape": st.sampled_from([(8, 128), (16, 128), (8, 256)]),
        "scale": st.sampled_from([0.5, 2.0, -1.0]),
        "shift": st.sampled_from([0.0, 1.0]),
    }),
    inputs=_scale_shift_inputs,
    platforms=("tpu", "gpu"),
    features=("elementwise", "whole_array"),
)
