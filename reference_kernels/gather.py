"""Block gather: row blocks of a table picked by indices prefetched into SMEM
(``PrefetchScalarGridSpec``), used by the index map."""

from __future__ import annotations

import functools

import jax
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
import strategies as pvs
from reference_kernels._draw import without

__all__ = ["GATHER_BLOCKS"]


def _gather_body(idx_ref, table_ref, o_ref):
    del idx_ref  # consumed by the index map
    o_ref[...] = table_ref[...]


@functools.partial(jax.jit, static_argnames=("block_rows",))
def gather_blocks(indices: jax.Array, table: jax.Array, *, block_rows: int) -> jax.Array:
    """Output block i is table row block ``indices[i]``; indices are scalar-prefetched."""
    cols = table.shape[1]
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(indices.shape[0],),
        in_specs=[pl.BlockSpec((block_rows, cols), lambda i, idx: (idx[i], 0))],
        out_specs=pl.BlockSpec((block_rows, cols), lambda i, idx: (i, 0)),
    )
    return pl.pallas_call(
        _gather_body,
        grid_spec=grid_spec,
        out_shape=jax.ShapeDtypeStruct((indices.shape[0] * block_rows, cols), table.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(indices, table)


def gather_blocks_reference(indices, table, *, block_rows):
    blocks = table.reshape(-1, block_rows, table.shape[1])
    return blocks[indices].reshape(-1, table.shape[1])


@st.composite
def _configs(draw):
    # Sublane-tile row blocks of a lane-wide table; table_blocks and n are plain counts.
    return {"table_blocks": draw(st.integers(1, 6)), "n": draw(st.integers(1, 8)),
            "block_rows": draw(st.integers(1, 2).map(lambda k: k * pvs.preferred_sublane_tile("float32"))),
            "cols": pvs.TPU_LANES}


def _inputs(config):
    blocks, rows, n = config["table_blocks"], config["block_rows"], config["n"]
    # Block indices: a list of in-range ints (strategies has no index arrays); shrinks to 0s.
    indices = st.lists(st.integers(0, blocks - 1), min_size=n, max_size=n).map(
        lambda xs: np.asarray(xs, np.int32))
    return st.tuples(indices, pvs.arrays(shape=(blocks * rows, config["cols"])))


_SIZES = ("table_blocks", "n", "cols")

GATHER_BLOCKS = pv.KernelSpec(
    name="gather_blocks",
    kernel=without(gather_blocks, *_SIZES),
    reference=without(gather_blocks_reference, *_SIZES),
    configs=_configs(),
    inputs=_inputs,
    features=("scalar_prefetch", "gather", "data_dependent_index"),
)
