"""Mutants of accumulation: missing init, unmasked ragged tails, low-precision accumulators."""

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
_ARBITRARY = pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"))


def _sum_kernel(x_ref, o_ref, *, init: bool):
    if init:

        @pl.when(pl.program_id(1) == 0)
        def _init():
            o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


def column_block_sum(x, *, init: bool = True):
    """out[:, c] = sum_j x[:, j * 128 + c], accumulated in the output block."""
    m, k = x.shape
    return pl.pallas_call(
        functools.partial(_sum_kernel, init=init),
        grid=(m // BM, k // BK),
        in_specs=[pl.BlockSpec((BM, BK), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((BM, BK), lambda i, j: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((m, BK), x.dtype),
        compiler_params=_ARBITRARY,
    )(x)


def _column_block_sum_ref(x):
    return x.reshape(x.shape[0], -1, BK).sum(axis=1)


def _sum_inputs(config):
    return seeded_arrays([(2 * BM, 3 * BK)])


_NO_CONFIG = st.just({})
column_block_sum_spec = KernelSpec(
    name="column_block_sum",
    kernel=column_block_sum,
    reference=_column_block_sum_ref,
    configs=_NO_CONFIG,
    inputs=_sum_inputs,
    features=("accumulator",),
    bitwise_stable=False,
)
missing_acc_init_spec = KernelSpec(
    name="missing_acc_init",
    kernel=functools.partial(column_block_sum, init=False),
    reference=_column_block_sum_ref,
    configs=_NO_CONFIG,
    inputs=_sum_inputs,
    features=("accumulator",),
    bitwise_stable=False,
)


def _ragged_kernel(x_ref, o_ref, *, n: int, mask: bool):
    i = pl.program_id(0)

    @pl.when(i == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)

    x = x_ref[...]
    if mask:
        rows = i * BM + jax.lax.broadcasted_iota(jnp.int32, x.shape, 0)
        x = jnp.where(rows < n, x, 0)
    o_ref[...] += jnp.sum(x, axis=0, keepdims=True)


def ragged_column_sum(x, *, mask: bool = True):
    """Column sums of ``x`` whose row count is not a multiple of the block."""
    n = x.shape[0]
    return pl.pallas_call(
        functools.partial(_ragged_kernel, n=n, mask=mask),
        grid=(pl.cdiv(n, BM),),
        in_specs=[pl.BlockSpec((BM, BK), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((1, BK), lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((1, BK), x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
    )(x)


def _ragged_inputs(config):
    return seeded_arrays([(2 * BM + 3, BK)])


ragged_column_sum_spec = KernelSpec(
    name="ragged_column_sum",
    kernel=ragged_column_sum,
    reference=lambda x: jnp.sum(x, axis=0, keepdims=True),
    configs=_NO_CONFIG,
    inputs=_ragged_inputs,
    features=("ragged", "accumulator"),
    bitwise_stable=False,
)
unmasked_ragged_reduction_spec = KernelSpec(
    name="unmasked_ragged_reduction",
    kernel=functools.partial(ragged_column_sum, mask=False),
    reference=lambda x: jnp.sum(x, axis=0, keepdims=True),
    configs=_NO_CONFIG,
    inputs=_ragged_inputs,
    features=("ragged", "accumulator"),
    bitwise_stable=False,
)

_CHUNK = 16


def _matmul_kernel(x_ref, w_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(0) == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    x, w = x_ref[...], w_ref[...]

    def step(t, acc):
        xs = jax.lax.dynamic_slice_in_dim(x, t * _CHUNK, _CHUNK, axis=1)
        ws = jax.lax.dynamic_slice_in_dim(w, t * _CHUNK, _CHUNK, axis=0)
        part = jnp.dot(xs, ws, preferred_element_type=jnp.float32)
        return (acc + part).astype(acc.dtype)

    acc_ref[...] = jax.lax.fori_loop(0, x.shape[1] // _CHUNK, step, acc_ref[...])

    @pl.when(pl.program_id(0) == pl.num_programs(0) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def chunked_matmul(x, w, *, acc_dtype=jnp.float32):
    """bf16 ``x @ w`` accumulated over K in chunks of 16 in an ``acc_dtype`` scratch."""
    m, k = x.shape
    bk = 512
    return pl.pallas_call(
        _matmul_kernel,
        grid=(k // bk,),
        in_specs=[
            pl.BlockSpec((m, bk), lambda j: (0, j)),
            pl.BlockSpec((bk, BK), lambda j: (j, 0)),
        ],
        out_specs=pl.BlockSpec((m, BK), lambda j: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((m, BK), x.dtype),
        scratch_shapes=[pltpu.VMEM((m, BK), acc_dtype)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
    )(x, w)


def _matmul_ref(x, w):
    return jnp.dot(x, w, preferred_element_type=jnp.float32).astype(x.dtype)


def _matmul_inputs(config):
    return seeded_arrays([(BM, 2048), (2048, BK)], dtype=jnp.bfloat16, low=0.0)


chunked_matmul_spec = KernelSpec(
    name="chunked_matmul_f32_acc",
    kernel=chunked_matmul,
    reference=_matmul_ref,
    configs=_NO_CONFIG,
    inputs=_matmul_inputs,
    features=("matmul", "bf16"),
    bitwise_stable=False,
)
bf16_long_k_spec = KernelSpec(
    name="bf16_long_k",
    kernel=functools.partial(chunked_matmul, acc_dtype=jnp.bfloat16),
    reference=_matmul_ref,
    configs=_NO_CONFIG,
    inputs=_matmul_inputs,
    features=("matmul", "bf16"),
    bitwise_stable=False,
)

MUTANTS = [
    Mutant(
        spec=missing_acc_init_spec,
        twin=column_block_sum_spec,
        expects=("uninitialized_read", "mismatch"),
        bug="the output accumulator is never zeroed at the first reduction step",
        exposed_by={"uninitialized_memory": "nan"},
        verdicts={"interpret": ("mismatch",), "tpu_interpret": ("uninitialized_read", "mismatch")},
    ),
    Mutant(
        spec=unmasked_ragged_reduction_spec,
        twin=ragged_column_sum_spec,
        expects=("uninitialized_read", "mismatch"),
        bug="the padded rows of the last (partial) block are summed without a mask",
        exposed_by={"uninitialized_memory": "nan"},
        verdicts={"interpret": ("mismatch",), "tpu_interpret": ("uninitialized_read", "mismatch")},
    ),
    Mutant(
        spec=bf16_long_k_spec,
        twin=chunked_matmul_spec,
        expects=("mismatch",),
        bug="a K=2048 reduction is accumulated in bf16, losing the small addends",
    ),
]
