"""A kernel whose (7, 100) blocks the interpreters run and Mosaic TPU rejects, and a
copy kernel of any block shape for checking the block-shape rules against real compiles."""

from __future__ import annotations

import jax
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl

import pallas_verify as pv


def _add_one(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1


def add_one(x, *, block):
    grid = tuple(pl.cdiv(a, b) for a, b in zip(x.shape, block, strict=True))
    spec = pl.BlockSpec(block, lambda i, j: (i, j))
    return pl.pallas_call(_add_one, grid=grid, in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


ODD_BLOCKS = pv.KernelSpec(
    name="odd_blocks", kernel=add_one, reference=lambda x, *, block: x + 1,
    configs=st.just({"block": (7, 100)}),
    inputs=lambda config: st.just((np.arange(14 * 200, dtype=np.float32).reshape(14, 200),)),
    platforms=("tpu",))


def _copy(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def copy(x, *, block):
    """``x`` block by block; ``None`` in ``block`` squeezes a dimension."""
    grid = tuple(a if b is None else pl.cdiv(a, b) for a, b in zip(x.shape, block, strict=True))
    spec = pl.BlockSpec(block, lambda *i: i)
    return pl.pallas_call(_copy, grid=grid, in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


COPY = pv.KernelSpec(name="copy", kernel=copy, reference=lambda x, *, block: x, configs=st.just({}),
                     inputs=lambda config: st.just(()))
