"""Mutants of shape-dependent numerics: rows whose last bits depend on how long the array
around them is.

``pltpu.CompilerParams.shape_invariant_numerics`` is True unless a kernel sets it False: the
kernel claims that the rows it computes come out bit for bit the same inside a longer or
shorter array. A matmul that picks its K tile from the problem size breaks the claim: a
problem of one row block is done as one dot over K, a larger one as a sum of 128-wide
partial dots, which round differently. Both stay within tolerance of the reference; only
the shape_invariance rerun (the rows embedded in an array twice as long, the outputs cut
back and compared bitwise) sees it. The twin takes its K tile from its config.
"""

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

BM, K, N = 8, 256, 128  # rows per block, contraction length, columns
PARTIAL_K = 128  # the K tile of a large problem


def _rows_matmul_kernel(x_ref, w_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(1) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(1) == pl.num_programs(1) - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def rows_matmul(x, w, *, block_k: int | None = None):
    """``x @ w`` in row blocks of BM, accumulating over K tiles of ``block_k`` (None: K for a
    problem of one row block, PARTIAL_K for a larger one)."""
    m, k = x.shape
    bk = block_k if block_k is not None else (k if m <= BM else PARTIAL_K)
    return pl.pallas_call(
        _rows_matmul_kernel,
        grid=(m // BM, k // bk),
        in_specs=[pl.BlockSpec((BM, bk), lambda i, kk: (i, kk)), pl.BlockSpec((bk, N), lambda i, kk: (kk, 0))],
        out_specs=pl.BlockSpec((BM, N), lambda i, kk: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((m, N), x.dtype),
        scratch_shapes=[pltpu.VMEM((BM, N), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(x, w)


def _rows_matmul_ref(x, w, **_config):
    return jnp.dot(x, w, preferred_element_type=jnp.float32, precision=jax.lax.Precision.HIGHEST)


def _inputs(_config):
    return seeded_arrays([(BM, K), (K, N)])


def _spec(name: str, configs: st.SearchStrategy, kernel) -> KernelSpec:
    return KernelSpec(name=name, kernel=kernel, reference=_rows_matmul_ref, configs=configs, inputs=_inputs,
                      platforms=("tpu",), features=("matmul", "shape_invariance"))


k_tiled_matmul_spec = _spec("k_tiled_matmul", st.fixed_dictionaries({"block_k": st.just(PARTIAL_K)}), rows_matmul)
size_tiled_matmul_spec = _spec("size_tiled_matmul", st.just({}), functools.partial(rows_matmul, block_k=None))

MUTANTS = [
    Mutant(
        spec=size_tiled_matmul_spec,
        twin=k_tiled_matmul_spec,
        expects=("shape_invariance",),
        bug="the K tile is chosen from the number of rows, so the same rows round differently inside a longer array",
    ),
]
