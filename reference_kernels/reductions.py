"""Row and column sums: tiled reductions accumulating into the output block across an
"arbitrary" grid axis."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
from reference_kernels._draw import normal, seeded, without

__all__ = ["COL_SUM", "ROW_SUM"]

_SEMANTICS = pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"))


def _row_sum_body(x_ref, o_ref):
    @pl.when(pl.program_id(1) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.sum(x_ref[...], axis=1, keepdims=True)


@functools.partial(jax.jit, static_argnames=("block_rows", "block_cols"))
def row_sum(x: jax.Array, *, block_rows: int, block_cols: int) -> jax.Array:
    """Sum over columns, shape (rows, 1); the column axis is the reduction ("arbitrary")."""
    rows, cols = x.shape
    return pl.pallas_call(
        _row_sum_body,
        grid=(rows // block_rows, cols // block_cols),
        in_specs=[pl.BlockSpec((block_rows, block_cols), lambda i, k: (i, k))],
        out_specs=pl.BlockSpec((block_rows, 1), lambda i, k: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, 1), jnp.float32),
        compiler_params=_SEMANTICS,
    )(x)


def _col_sum_body(x_ref, o_ref):
    @pl.when(pl.program_id(1) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.sum(x_ref[...], axis=0, keepdims=True)


@functools.partial(jax.jit, static_argnames=("block_rows", "block_cols"))
def col_sum(x: jax.Array, *, block_rows: int, block_cols: int) -> jax.Array:
    """Sum over rows, shape (1, cols); the row axis is the reduction ("arbitrary")."""
    rows, cols = x.shape
    return pl.pallas_call(
        _col_sum_body,
        grid=(cols // block_cols, rows // block_rows),
        in_specs=[pl.BlockSpec((block_rows, block_cols), lambda j, k: (k, j))],
        out_specs=pl.BlockSpec((1, block_cols), lambda j, k: (0, j)),
        out_shape=jax.ShapeDtypeStruct((1, cols), jnp.float32),
        compiler_params=_SEMANTICS,
    )(x)


@st.composite
def _configs(draw):
    block_rows = draw(st.sampled_from([8, 16]))
    block_cols = draw(st.sampled_from([128, 256]))
    return {"rows": block_rows * draw(st.integers(1, 3)),
            "cols": block_cols * draw(st.integers(1, 3)),
            "block_rows": block_rows, "block_cols": block_cols}


def _inputs(config):
    return seeded(lambda rng: (normal(rng, (config["rows"], config["cols"])),))


_SIZES = ("rows", "cols", "block_rows", "block_cols")
# Sums of up to 768 standard normals in blocks: reassociation error is ~1e-5 relative.
_TOL = pv.Tolerance(rtol=1e-5, atol=1e-4)

ROW_SUM = pv.KernelSpec(
    name="row_sum",
    kernel=without(row_sum, "rows", "cols"),
    reference=without(lambda x: jnp.sum(x, axis=1, keepdims=True), *_SIZES),
    configs=_configs(),
    inputs=_inputs,
    tolerance=_TOL,
    features=("reduction", "accumulator"),
    bitwise_stable=False,
)

COL_SUM = pv.KernelSpec(
    name="col_sum",
    kernel=without(col_sum, "rows", "cols"),
    reference=without(lambda x: jnp.sum(x, axis=0, keepdims=True), *_SIZES),
    configs=_configs(),
    inputs=_inputs,
    tolerance=_TOL,
    features=("reduction", "accumulator"),
    bitwise_stable=False,
)
