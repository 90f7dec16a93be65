"""Cumulative sum down the rows: a carry in VMEM scratch across an "arbitrary" axis."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
from reference_kernels._draw import normal, seeded, without

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


@functools.partial(jax.jit, static_argnames=("block_rows", "block_cols"))
def cumsum(x: jax.Array, *, block_rows: int, block_cols: int) -> jax.Array:
    """Inclusive cumulative sum along axis 0; row blocks are visited in order."""
    rows, cols = x.shape
    return pl.pallas_call(
        _cumsum_body,
        grid=(cols // block_cols, rows // block_rows),
        in_specs=[pl.BlockSpec((block_rows, block_cols), lambda j, i: (i, j))],
        out_specs=pl.BlockSpec((block_rows, block_cols), lambda j, i: (i, j)),
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),
        scratch_shapes=[pltpu.VMEM((1, block_cols), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(x)


@st.composite
def _configs(draw):
    block_rows = draw(st.sampled_from([8, 16, 32]))
    return {"rows": block_rows * draw(st.integers(1, 4)), "cols": 128 * draw(st.integers(1, 2)),
            "block_rows": block_rows, "block_cols": 128}


CUMSUM = pv.KernelSpec(
    name="cumsum",
    kernel=without(cumsum, "rows", "cols"),
    reference=without(lambda x: jnp.cumsum(x, axis=0), "rows", "cols", "block_rows", "block_cols"),
    configs=_configs(),
    inputs=lambda c: seeded(lambda rng: (normal(rng, (c["rows"], c["cols"])),)),
    tolerance=pv.Tolerance(rtol=1e-5, atol=1e-4),
    features=("scan", "carry", "arbitrary_order"),
    bitwise_stable=False,
)
