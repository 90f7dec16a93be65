"""Mutants of grid structure: dimension semantics, index maps, program ids, revisits."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from pallas_verify.spec import KernelSpec
from reference_kernels.mutants import Mutant
from reference_kernels.mutants._inputs import seeded_arrays

BM, BK = 8, 128


def _row_sum_kernel(x_ref, o_ref):
    @pl.when(pl.program_id(1) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


def block_row_sum(x, *, bk: int = BK, semantics: tuple[str, str] = ("parallel", "arbitrary")):
    """Sums the 128-column blocks of ``x``: out[:, c] = sum_j x[:, j * 128 + c]."""
    m, k = x.shape
    return pl.pallas_call(
        _row_sum_kernel,
        grid=(m // BM, k // bk),
        in_specs=[pl.BlockSpec((BM, bk), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((BM, bk), lambda i, j: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((m, bk), x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=semantics),
    )(x)


def block_row_sum_ref(x, *, bk: int = BK, semantics: tuple[str, str] = ("parallel", "arbitrary")):
    del semantics
    return x.reshape(x.shape[0], -1, bk).sum(axis=1)


# One row block, so that the split of the (parallel) reduction axis over two cores puts
# blocks of the same output on both cores.
_ROW_SUM_CONFIGS = st.fixed_dictionaries({"bk": st.just(BK)})


def _row_sum_inputs(config):
    return seeded_arrays([(BM, 4 * BK)])


block_row_sum_spec = KernelSpec(
    name="block_row_sum",
    kernel=block_row_sum,
    reference=block_row_sum_ref,
    configs=_ROW_SUM_CONFIGS,
    inputs=_row_sum_inputs,
    features=("accumulator",),
    bitwise_stable=False,
)
acc_across_parallel_spec = KernelSpec(
    name="acc_across_parallel",
    kernel=functools.partial(block_row_sum, semantics=("parallel", "parallel")),
    reference=block_row_sum_ref,
    configs=_ROW_SUM_CONFIGS,
    inputs=_row_sum_inputs,
    features=("accumulator",),
    bitwise_stable=False,
)


def _revisit_kernel(x_ref, o_ref):
    @pl.when(pl.program_id(0) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


def block_row_sum_k_outer(x):
    """block_row_sum with the reduction axis first: every output block is revisited."""
    m, k = x.shape
    return pl.pallas_call(
        _revisit_kernel,
        grid=(k // BK, m // BM),
        in_specs=[pl.BlockSpec((BM, BK), lambda j, i: (i, j))],
        out_specs=pl.BlockSpec((BM, BK), lambda j, i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((m, BK), x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary", "arbitrary")),
    )(x)


def _revisit_inputs(config):
    return seeded_arrays([(2 * BM, 2 * BK)])


row_sum_twin_spec = KernelSpec(
    name="block_row_sum_2x2",
    kernel=block_row_sum,
    reference=block_row_sum_ref,
    configs=_ROW_SUM_CONFIGS,
    inputs=_revisit_inputs,
    features=("accumulator",),
    bitwise_stable=False,
)
output_revisit_spec = KernelSpec(
    name="output_revisit",
    kernel=lambda x, bk: block_row_sum_k_outer(x),
    reference=block_row_sum_ref,
    configs=_ROW_SUM_CONFIGS,
    inputs=_revisit_inputs,
    features=("accumulator",),
    bitwise_stable=False,
)


def _copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def block_copy(x, *, rotate: int = 0):
    """Copies ``x`` block by block; ``rotate`` shifts the output index map (a bug if != 0)."""
    n = x.shape[0] // BM
    return pl.pallas_call(
        _copy_kernel,
        grid=(n,),
        in_specs=[pl.BlockSpec((BM, BK), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((BM, BK), lambda i: ((i + rotate) % n, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


_COPY_CONFIGS = st.fixed_dictionaries({"rotate": st.just(0)})


def _copy_inputs(config):
    return seeded_arrays([(4 * BM, BK)])


block_copy_spec = KernelSpec(
    name="block_copy",
    kernel=block_copy,
    reference=lambda x, rotate: x,
    configs=_COPY_CONFIGS,
    inputs=_copy_inputs,
)
rotated_index_map_spec = KernelSpec(
    name="rotated_index_map",
    kernel=lambda x, rotate: block_copy(x, rotate=1),
    reference=lambda x, rotate: x,
    configs=_COPY_CONFIGS,
    inputs=_copy_inputs,
)


def _tril_kernel(x_ref, o_ref, *, row_axis: int):
    row0 = pl.program_id(row_axis) * BM
    col0 = pl.program_id(1) * BK
    rows = row0 + jax.lax.broadcasted_iota(jnp.int32, (BM, BK), 0)
    cols = col0 + jax.lax.broadcasted_iota(jnp.int32, (BM, BK), 1)
    o_ref[...] = jnp.where(rows >= cols, x_ref[...], 0).astype(o_ref.dtype)


def block_tril(x, *, row_axis: int = 0):
    """The lower triangle of ``x``; row indices come from ``program_id(row_axis)``."""
    spec = pl.BlockSpec((BM, BK), lambda i, j: (i, j))
    return pl.pallas_call(
        functools.partial(_tril_kernel, row_axis=row_axis),
        grid=(x.shape[0] // BM, x.shape[1] // BK),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


_TRIL_CONFIGS = st.fixed_dictionaries({"row_axis": st.just(0)})


def _tril_inputs(config):
    return seeded_arrays([(2 * BM, 2 * BK)])


block_tril_spec = KernelSpec(
    name="block_tril",
    kernel=block_tril,
    reference=lambda x, row_axis: jnp.tril(x),
    configs=_TRIL_CONFIGS,
    inputs=_tril_inputs,
    features=("program_id",),
)
wrong_program_id_spec = KernelSpec(
    name="wrong_program_id",
    kernel=lambda x, row_axis: block_tril(x, row_axis=1),
    reference=lambda x, row_axis: jnp.tril(x),
    configs=_TRIL_CONFIGS,
    inputs=_tril_inputs,
    features=("program_id",),
)

MUTANTS = [
    Mutant(
        spec=acc_across_parallel_spec,
        twin=block_row_sum_spec,
        expects=("race", "grid_order", "mismatch"),
        bug="the reduction axis of an accumulating output is marked 'parallel'",
        exposed_by={"detect_races": True, "num_cores_or_threads": 2},
        verdicts={"tpu_interpret": ("race", "grid_order", "mismatch")},
    ),
    Mutant(
        spec=output_revisit_spec,
        twin=row_sum_twin_spec,
        expects=("revisit",),
        bug="the reduction axis comes first, so each output block is revisited non-consecutively",
        verdicts={"tpu_interpret": ("revisit",)},
    ),
    Mutant(
        spec=rotated_index_map_spec,
        twin=block_copy_spec,
        expects=("mismatch",),
        bug="the output index_map is rotated by one block",
    ),
    Mutant(
        spec=wrong_program_id_spec,
        twin=block_tril_spec,
        expects=("mismatch",),
        bug="row offsets are computed from program_id(1) instead of program_id(0)",
    ),
]
