"""In-place kernels: an output aliased to an input, across grid steps and under vmap.

``table_alias_add`` writes ``x0 + x1[table]`` over ``x0`` (operand 1: a scalar-prefetch
table is operand 0), reading ``x1``'s blocks through the table at steps after earlier
steps wrote the output: an interpreter that syncs the aliased buffers by the wrong operand
index overwrites ``x1``'s blocks with the output. ``vmapped_inplace`` runs an in-place
kernel under ``jax.vmap`` with the aliased input batched along axis 1 and the output along
axis 0: the batching rule must move the aliased input's batch axis to the output's (as
many examples as rows, so a rule that does not still runs, on the wrong slices).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
from reference_kernels._draw import array_tuples

__all__ = ["TABLE_ALIAS_ADD", "VMAPPED_INPLACE"]

ROWS, COLS = 8, 128


def _table_body(t_ref, x0_ref, x1_ref, o_ref):
    o_ref[...] = x0_ref[...] + x1_ref[...]


def table_alias_add(x0: jax.Array, x1: jax.Array, *, table: tuple[int, ...]) -> jax.Array:
    """``x0 + x1``'s blocks permuted by ``table``, written over ``x0``."""
    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(len(table),),
        in_specs=[pl.BlockSpec((ROWS, COLS), lambda i, t: (i, 0)), pl.BlockSpec((ROWS, COLS), lambda i, t: (t[i], 0))],
        out_specs=pl.BlockSpec((ROWS, COLS), lambda i, t: (i, 0)))
    return pl.pallas_call(_table_body, grid_spec=spec, out_shape=jax.ShapeDtypeStruct(x0.shape, x0.dtype),
                          input_output_aliases={1: 0})(jnp.asarray(table, jnp.int32), x0, x1)


def table_alias_add_reference(x0, x1, *, table, **_config):
    blocks = x1.reshape(len(table), ROWS, COLS)[np.asarray(table)]
    return x0 + blocks.reshape(x1.shape)


def _tables(n: int) -> st.SearchStrategy[tuple[int, ...]]:
    return st.permutations(list(range(n))).map(tuple)


TABLE_ALIAS_ADD = pv.KernelSpec(
    name="table_alias_add",
    kernel=lambda x0, x1, *, blocks, table: table_alias_add(x0, x1, table=table),
    reference=lambda x0, x1, *, blocks, table: table_alias_add_reference(x0, x1, table=table),
    configs=st.integers(2, 4).flatmap(lambda n: st.fixed_dictionaries({"blocks": st.just(n), "table": _tables(n)})),
    inputs=lambda config: array_tuples((config["blocks"] * ROWS, COLS), (config["blocks"] * ROWS, COLS)),
    platforms=("tpu",),
    features=("aliasing", "scalar_prefetch"),
)


def _inplace_body(x_ref, o_ref):
    o_ref[...] = 2 * x_ref[...] + 1


def _inplace(x: jax.Array) -> jax.Array:
    return pl.pallas_call(_inplace_body, grid=(x.shape[0] // ROWS,), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          in_specs=[pl.BlockSpec((ROWS, COLS), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((ROWS, COLS), lambda i: (i, 0)), input_output_aliases={0: 0})(x)


def vmapped_inplace(x: jax.Array) -> jax.Array:
    """``2 x + 1`` in place, vmapped over ``x``'s axis 1 (the output's batch axis is 0)."""
    return jax.vmap(_inplace, in_axes=1, out_axes=0)(x)


VMAPPED_INPLACE = pv.KernelSpec(
    name="vmapped_inplace",
    kernel=lambda x, *, blocks, batch: vmapped_inplace(x),
    reference=lambda x, *, blocks, batch: jnp.moveaxis(2 * x + 1, 1, 0),
    # As many examples as rows: a batching rule that leaves the batch axis where it is runs
    # (the shapes agree) and computes on the wrong slices.
    configs=st.integers(1, 2).map(lambda n: {"blocks": n, "batch": n * ROWS}),
    inputs=lambda config: array_tuples((config["blocks"] * ROWS, config["batch"], COLS)),
    platforms=("tpu",),
    features=("aliasing", "vmap"),
)
