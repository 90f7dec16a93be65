"""Tiled transpose: block (i, j) of the input becomes block (j, i) of the output."""

from __future__ import annotations

import functools

import jax
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
from reference_kernels._draw import normal, seeded, without

__all__ = ["TRANSPOSE"]


def _transpose_body(x_ref, o_ref):
    o_ref[...] = x_ref[...].T


@functools.partial(jax.jit, static_argnames=("block",))
def transpose(x: jax.Array, *, block: int) -> jax.Array:
    """``x.T`` with square (block, block) tiles."""
    rows, cols = x.shape
    return pl.pallas_call(
        _transpose_body,
        grid=(rows // block, cols // block),
        in_specs=[pl.BlockSpec((block, block), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((block, block), lambda i, j: (j, i)),
        out_shape=jax.ShapeDtypeStruct((cols, rows), x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")),
    )(x)


@st.composite
def _configs(draw):
    block = 128
    return {"rows": block * draw(st.integers(1, 3)), "cols": block * draw(st.integers(1, 3)),
            "block": block, "dtype": draw(st.sampled_from(["float32", "bfloat16"]))}


TRANSPOSE = pv.KernelSpec(
    name="transpose",
    kernel=without(transpose, "rows", "cols", "dtype"),
    reference=without(lambda x: x.T, "rows", "cols", "block", "dtype"),
    configs=_configs(),
    inputs=lambda c: seeded(lambda rng: (normal(rng, (c["rows"], c["cols"]), c["dtype"]),)),
    features=("transpose", "bf16"),
)
