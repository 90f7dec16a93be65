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
import strategies as pvs
from reference_kernels._draw import array_tuples, without

__all__ = ["RAGGED_ADD", "SCALE_SHIFT", "WHOLE_ARRAY_SHAPES"]


def _add_body(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


@functools.partial(jax.jit, static_argnames=("block_rows", "block_cols", "dimension_semantics"))
def ragged_add(x: jax.Array, y: jax.Array, *, block_rows: int, block_cols: int,
               dimension_semantics: tuple[str, str] = ("parallel", "parallel")) -> jax.Array:
    """``x + y`` tiled by (block_rows, block_cols); the last blocks may be partial."""
    rows, cols = x.shape
    block = pl.BlockSpec((block_rows, block_cols), lambda i, j: (i, j))
    return pl.pallas_call(
        _add_body,
        grid=(pl.cdiv(rows, block_rows), pl.cdiv(cols, block_cols)),
        in_specs=[block, block],
        out_specs=block,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=dimension_semantics),
    )(x, y)


def ragged_add_reference(x, y, **_config):
    return x + y


def _two_arrays(config):
    shape = (config["rows"], config["cols"])
    return array_tuples(shape, shape, dtype=config["dtype"])


# Sizes are ragged in both dims (the last blocks are partial; padding is masked on write).
RAGGED_ADD = pv.KernelSpec(
    name="ragged_add",
    kernel=without(ragged_add, "rows", "cols", "grid", "dtype"),
    reference=ragged_add_reference,
    configs=pvs.tiled_configs(dtypes=("float32", "bfloat16"), max_grid_points=16),
    inputs=_two_arrays,
    platforms=("tpu",),
    features=("ragged", "elementwise"),
    transforms=("vmap",),
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


#: Whole-array shapes for a portable kernel: the block is the array, and Triton needs
#: power-of-two blocks, so whole tiles (8|16, 128|256) only, no ragged sizes.
WHOLE_ARRAY_SHAPES = pvs.array_shapes(block_shape=(8, 128), max_blocks=2, kinds=("exact",))

SCALE_SHIFT = pv.KernelSpec(
    name="scale_shift",
    kernel=without(scale_shift, "shape"),
    reference=without(scale_shift_reference, "shape"),
    configs=st.fixed_dictionaries({
        "shape": WHOLE_ARRAY_SHAPES,
        "scale": st.sampled_from([0.5, 2.0, -1.0]),
        "shift": st.sampled_from([0.0, 1.0]),
    }),
    inputs=lambda config: array_tuples(config["shape"]),
    platforms=("tpu", "gpu"),
    features=("elementwise", "whole_array"),
    transforms=("vmap",),
)
