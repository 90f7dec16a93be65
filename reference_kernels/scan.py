"""Cumulative sum down the rows: a carry in VMEM scratch across an "arbitrary" axis."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
import strategies as pvs
from reference_kernels._draw import array_tuples, without

__all__ = ["CUMSUM"]


def _cumsum_body(x_ref, o_ref, carry_ref):
    @pl.when(pl.program_id(1) == 0)
    def _init():
        carry_ref[...] = jnp.zeros_like(carry_ref)

    n = x_ref.shape[0]
    # Inclusive prefix sum within the block as a lower-triangular matmul (no scan on TPU).
    tri = (jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
           <= jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)).astype(jnp.float32)
    block = jnp.dot(tri, x_ref[...], preferred_element_type=jnp.float32,
                    precision=jax.lax.Precision.HIGHEST) + carry_ref[...]
    o_ref[...] = block
    carry_ref[...] = block[n - 1:n, :]


@functools.partial(jax.jit, static_argnames=("block_rows", "block_cols", "dimension_semantics"))
def cumsum(x: jax.Array, *, block_rows: int, block_cols: int,
           dimension_semantics: tuple[str, str] = ("parallel", "arbitrary")) -> jax.Array:
    """Inclusive cumulative sum along axis 0; row blocks are visited in order."""
    rows, cols = x.shape
    return pl.pallas_call(
        _cumsum_body,
        grid=(cols // block_cols, rows // block_rows),
        in_specs=[pl.BlockSpec((block_rows, block_cols), lambda j, i: (i, j))],
        out_specs=pl.BlockSpec((block_rows, block_cols), lambda j, i: (i, j)),
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),
        scratch_shapes=[pltpu.VMEM((1, block_cols), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=dimension_semantics),
    )(x)


# Whole row blocks (``ragged=False``): the in-block prefix sum is a triangular matmul, so
# a partial block's padded rows (NaN under a NaN fill) would poison the valid rows too.
_CONFIGS = pvs.tiled_configs(axes={"cols": "lane", "rows": "sublane"}, reduction_axes=("rows",),
                             ragged=False, max_grid_points=16)
_SIZES = ("rows", "cols", "grid", "dtype")

CUMSUM = pv.KernelSpec(
    name="cumsum",
    kernel=without(cumsum, *_SIZES),
    reference=without(lambda x: jnp.cumsum(x, axis=0), *_SIZES, "block_rows", "block_cols",
                      "dimension_semantics"),
    configs=_CONFIGS,
    inputs=lambda c: array_tuples((c["rows"], c["cols"]), max_edge_values=1),
    features=("scan", "carry", "arbitrary_order"),
    bitwise_stable=False,
)
