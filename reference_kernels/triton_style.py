"""Triton-style kernels for GPU targets: whole-array refs indexed by program id with
masked loads and stores, and atomic accumulation."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

import pallas_verify as pv
import strategies as pvs
from reference_kernels._draw import array_tuples, without

__all__ = ["ATOMIC_BLOCK_SUM", "MASKED_RELU"]


def _masked_relu_body(x_ref, o_ref, *, block, n):
    offsets = pl.program_id(0) * block + jnp.arange(block)
    mask = offsets < n
    x = plt.load(x_ref.at[pl.ds(pl.program_id(0) * block, block)], mask=mask, other=0.0)
    plt.store(o_ref.at[pl.ds(pl.program_id(0) * block, block)], jnp.maximum(x, 0.0), mask=mask)


@functools.partial(jax.jit, static_argnames=("block",))
def masked_relu(x: jax.Array, *, block: int) -> jax.Array:
    """``relu(x)`` for 1-D x of any length: the tail block masks its loads and stores."""
    (n,) = x.shape
    return pl.pallas_call(
        functools.partial(_masked_relu_body, block=block, n=n),
        grid=(pl.cdiv(n, block),),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=plt.CompilerParams(),
    )(x)


def _atomic_sum_body(x_ref, zeros_ref, o_ref, *, block, n):
    del zeros_ref  # aliased to o_ref
    pid = pl.program_id(0)
    offsets = pid * block + jnp.arange(block)
    x = plt.load(x_ref.at[pl.ds(pid * block, block)], mask=offsets < n, other=0.0)
    plt.atomic_add(o_ref, (pl.ds(0, block),), x)


@functools.partial(jax.jit, static_argnames=("block",))
def atomic_block_sum(x: jax.Array, *, block: int) -> jax.Array:
    """Fold 1-D x into ``block`` lanes: ``out[j] = sum_i x[i * block + j]``, via atomics.

    The output starts as zeros through ``input_output_aliases`` (atomics only add).
    """
    (n,) = x.shape
    return pl.pallas_call(
        functools.partial(_atomic_sum_body, block=block, n=n),
        grid=(pl.cdiv(n, block),),
        out_shape=jax.ShapeDtypeStruct((block,), x.dtype),
        input_output_aliases={1: 0},
        compiler_params=plt.CompilerParams(),
    )(x, jnp.zeros((block,), x.dtype))


def atomic_block_sum_reference(x, *, block):
    padded = jnp.pad(x, (0, -x.shape[0] % block))
    return padded.reshape(-1, block).sum(axis=0)


@st.composite
def _configs(draw):
    """A length ragged against 128 and a power-of-two Triton block for it (<= 16 blocks)."""
    n = draw(pvs.ragged_sizes(block=128, max_blocks=4))
    (block,) = draw(pvs.triton_block_shapes(array_shape=(n,), max_grid_points=16))
    return {"n": n, "block": block}


# GPU interpret mode interprets Mosaic GPU kernels only: Triton's load_p raises there.
_TRITON_ONLY = {"gpu_interpret": "GPU interpret mode has no Triton primitives "
                "(NotImplementedError: load_p is not supported on GPU yet)"}
_x = lambda c: array_tuples((c["n"],), max_edge_values=1)  # noqa: E731

MASKED_RELU = pv.KernelSpec(
    name="masked_relu",
    kernel=without(masked_relu, "n"),
    reference=without(jax.nn.relu, "n", "block"),
    configs=_configs(),
    inputs=_x,
    platforms=("gpu",),
    features=("masked_load", "masked_store", "ragged"),
    unsupported=_TRITON_ONLY,
)

ATOMIC_BLOCK_SUM = pv.KernelSpec(
    name="atomic_block_sum",
    kernel=without(atomic_block_sum, "n"),
    reference=without(atomic_block_sum_reference, "n"),
    configs=_configs(),
    inputs=_x,
    platforms=("gpu",),
    features=("atomics", "masked_load", "aliasing"),
    unsupported=_TRITON_ONLY,
    bitwise_stable=False,
)
