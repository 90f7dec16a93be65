"""Tiled matmuls: f32 with an f32 VMEM accumulator, bf16 inputs with f32 accumulation,
and a batched matmul with a squeezed batch dimension."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
from reference_kernels._draw import normal, seeded, without

__all__ = ["MATMUL_BATCHED", "MATMUL_BF16", "MATMUL_F32"]


def _matmul_body(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=("bm", "bn", "bk"))
def matmul(x: jax.Array, y: jax.Array, *, bm: int, bn: int, bk: int) -> jax.Array:
    """``x @ y`` tiled (bm, bn, bk), accumulated in an f32 VMEM scratch over the K axis."""
    (m, k), (_, n) = x.shape, y.shape
    return pl.pallas_call(
        _matmul_body,
        grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)


def matmul_reference(x, y, **_config):
    return jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)


@st.composite
def _matmul_configs(draw, *, dtype):
    bm, bn, bk = draw(st.sampled_from([8, 16, 32])), 128, draw(st.sampled_from([128, 256]))
    return {"m": bm * draw(st.integers(1, 2)), "n": bn * draw(st.integers(1, 2)),
            "k": bk * draw(st.integers(1, 4)), "bm": bm, "bn": bn, "bk": bk, "dtype": dtype}


def _matmul_inputs(config):
    m, n, k, dtype = config["m"], config["n"], config["k"], config["dtype"]
    return seeded(lambda rng: (normal(rng, (m, k), dtype), normal(rng, (k, n), dtype)))


_SIZES = ("m", "n", "k", "dtype")

MATMUL_F32 = pv.KernelSpec(
    name="matmul_f32",
    kernel=without(matmul, *_SIZES),
    reference=without(matmul_reference, *_SIZES),
    configs=_matmul_configs(dtype="float32"),
    inputs=_matmul_inputs,
    # K up to 1024 standard-normal products summed in a different order.
    tolerance=pv.Tolerance(rtol=1e-5, atol=1e-4),
    features=("matmul", "accumulator"),
    bitwise_stable=False,
)

MATMUL_BF16 = pv.KernelSpec(
    name="matmul_bf16",
    kernel=without(matmul, *_SIZES),
    reference=without(matmul_reference, *_SIZES),
    configs=_matmul_configs(dtype="bfloat16"),
    inputs=_matmul_inputs,
    features=("matmul", "accumulator", "bf16"),
    bitwise_stable=False,
)


def _batched_body(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


@functools.partial(jax.jit, static_argnames=("bm", "bn"))
def matmul_batched(x: jax.Array, y: jax.Array, *, bm: int, bn: int) -> jax.Array:
    """``x[b] @ y[b]`` per batch; the batch dimension is squeezed out of the blocks."""
    (b, m, k), (_, _, n) = x.shape, y.shape
    sq = pl.Squeezed()
    return pl.pallas_call(
        _batched_body,
        grid=(b, m // bm, n // bn),
        in_specs=[pl.BlockSpec((sq, bm, k), lambda bb, i, j: (bb, i, 0)),
                  pl.BlockSpec((sq, k, bn), lambda bb, i, j: (bb, 0, j))],
        out_specs=pl.BlockSpec((sq, bm, bn), lambda bb, i, j: (bb, i, j)),
        out_shape=jax.ShapeDtypeStruct((b, m, n), jnp.float32),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel")),
    )(x, y)


@st.composite
def _batched_configs(draw):
    bm, bn = draw(st.sampled_from([8, 16])), 128
    return {"b": draw(st.integers(1, 3)), "m": bm * draw(st.integers(1, 2)),
            "n": bn * draw(st.integers(1, 2)), "k": draw(st.sampled_from([128, 256])),
            "bm": bm, "bn": bn}


def _batched_inputs(config):
    b, m, n, k = config["b"], config["m"], config["n"], config["k"]
    return seeded(lambda rng: (normal(rng, (b, m, k)), normal(rng, (b, k, n))))


MATMUL_BATCHED = pv.KernelSpec(
    name="matmul_batched",
    kernel=without(matmul_batched, "b", "m", "n", "k"),
    reference=without(lambda x, y: jnp.einsum("bmk,bkn->bmn", x, y), "b", "m", "n", "k", "bm", "bn"),
    configs=_batched_configs(),
    inputs=_batched_inputs,
    tolerance=pv.Tolerance(rtol=1e-5, atol=1e-4),
    features=("matmul", "batched", "squeezed"),
    bitwise_stable=False,
)
