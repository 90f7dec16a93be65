"""Tiled transpose: block (i, j) of the input becomes block (j, i) of the output."""

from __future__ import annotations

import functools

import jax
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
import strategies as pvs
from reference_kernels._draw import array_tuples, without

__all__ = ["TRANSPOSE"]


def _transpose_body(x_ref, o_ref):
    o_ref[...] = x_ref[...].T


@functools.partial(jax.jit, static_argnames=("block",))
def transpose(x: jax.Array, *, block: int) -> jax.Array:
    """``x.T`` with square (block, block) tiles; edge tiles may be partial."""
    rows, cols = x.shape
    return pl.pallas_call(
        _transpose_body,
        grid=(pl.cdiv(rows, block), pl.cdiv(cols, block)),
        in_specs=[pl.BlockSpec((block, block), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((block, block), lambda i, j: (j, i)),
        out_shape=jax.ShapeDtypeStruct((cols, rows), x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")),
    )(x)


_BLOCK = 128  # square tiles: a dim is a lane dim of the input or of the output


@st.composite
def _configs(draw):
    """Ragged rows and columns (partial edge tiles), square lane tiles, float dtypes."""
    return {"rows": draw(pvs.ragged_sizes(block=_BLOCK, max_blocks=3)),
            "cols": draw(pvs.ragged_sizes(block=_BLOCK, max_blocks=3)), "block": _BLOCK,
            "dtype": draw(pvs.dtypes(floating_only=True))}


TRANSPOSE = pv.KernelSpec(
    name="transpose",
    kernel=without(transpose, "rows", "cols", "dtype"),
    reference=without(lambda x: x.T, "rows", "cols", "block", "dtype"),
    configs=_configs(),
    inputs=lambda c: array_tuples((c["rows"], c["cols"]), dtype=c["dtype"]),
    features=("transpose", "bf16", "ragged"),
)
