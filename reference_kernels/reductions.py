"""Row and column sums: tiled reductions accumulating into the output block across an
"arbitrary" grid axis."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
import strategies as pvs
from reference_kernels._draw import array_tuples, without

__all__ = ["COL_SUM", "ROW_SUM"]

_SEMANTICS = ("parallel", "arbitrary")


def _row_sum_body(x_ref, o_ref):
    @pl.when(pl.program_id(1) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.sum(x_ref[...], axis=1, keepdims=True)


@functools.partial(jax.jit, static_argnames=("block_rows", "block_cols", "dimension_semantics"))
def row_sum(x: jax.Array, *, block_rows: int, block_cols: int,
            dimension_semantics: tuple[str, str] = _SEMANTICS) -> jax.Array:
    """Sum over columns, shape (rows, 1); the column axis is the reduction ("arbitrary")."""
    rows, cols = x.shape
    return pl.pallas_call(
        _row_sum_body,
        grid=(rows // block_rows, cols // block_cols),
        in_specs=[pl.BlockSpec((block_rows, block_cols), lambda i, k: (i, k))],
        out_specs=pl.BlockSpec((block_rows, 1), lambda i, k: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, 1), jnp.float32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=dimension_semantics),
    )(x)


def _col_sum_body(x_ref, o_ref):
    @pl.when(pl.program_id(1) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.sum(x_ref[...], axis=0, keepdims=True)


@functools.partial(jax.jit, static_argnames=("block_rows", "block_cols", "dimension_semantics"))
def col_sum(x: jax.Array, *, block_rows: int, block_cols: int,
            dimension_semantics: tuple[str, str] = _SEMANTICS) -> jax.Array:
    """Sum over rows, shape (1, cols); the row axis is the reduction ("arbitrary")."""
    rows, cols = x.shape
    return pl.pallas_call(
        _col_sum_body,
        grid=(cols // block_cols, rows // block_rows),
        in_specs=[pl.BlockSpec((block_rows, block_cols), lambda j, k: (k, j))],
        out_specs=pl.BlockSpec((1, block_cols), lambda j, k: (0, j)),
        out_shape=jax.ShapeDtypeStruct((1, cols), jnp.float32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=dimension_semantics),
    )(x)


def _configs(*, reduced: str):
    """Whole blocks only (``ragged=False``): a partial block would add its padding into the
    sum. The grid walks the kept axis first; the reduced axis is last and "arbitrary"."""
    kept = "rows" if reduced == "cols" else "cols"
    roles = {"rows": "sublane", "cols": "lane"}
    return pvs.tiled_configs(axes={kept: roles[kept], reduced: roles[reduced]},
                             reduction_axes=(reduced,), ragged=False, max_grid_points=16)


def _inputs(config):
    return array_tuples((config["rows"], config["cols"]), max_edge_values=1)


_SIZES = ("rows", "cols", "block_rows", "block_cols", "grid", "dimension_semantics", "dtype")

ROW_SUM = pv.KernelSpec(
    name="row_sum",
    kernel=without(row_sum, "rows", "cols", "grid", "dtype"),
    reference=without(lambda x: jnp.sum(x, axis=1, keepdims=True), *_SIZES),
    configs=_configs(reduced="cols"),
    inputs=_inputs,
    features=("reduction", "accumulator"),
    bitwise_stable=False,
)

COL_SUM = pv.KernelSpec(
    name="col_sum",
    kernel=without(col_sum, "rows", "cols", "grid", "dtype"),
    reference=without(lambda x: jnp.sum(x, axis=0, keepdims=True), *_SIZES),
    configs=_configs(reduced="rows"),
    inputs=_inputs,
    features=("reduction", "accumulator"),
    bitwise_stable=False,
)
