"""A tiled f32 matmul with Pallas backward kernels (``custom_vjp``), checked under
``vmap`` and ``grad``.

The forward and both backward products run through one tiled kernel that contracts
blocks with ``lax.dot_general``, so an operand can enter transposed without a copy:
``dx = g @ y.T`` (``transpose_b``) and ``dy = x.T @ g`` (``transpose_a``), each
accumulated in an f32 VMEM scratch over its own reduction axis.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
from reference_kernels._draw import normal, seeded, without

__all__ = ["MATMUL_VJP", "matmul_vjp", "matmul_vjp_configs", "matmul_vjp_inputs", "tiled_matmul"]


def _body(a_ref, b_ref, o_ref, acc_ref, *, dims):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jax.lax.dot_general(a_ref[...], b_ref[...], (dims, ((), ())),
                                        preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def tiled_matmul(a, b, *, blocks, transpose_a=False, transpose_b=False):
    """``op(a) @ op(b)`` with ``op`` a transpose where asked; ``blocks = (bm, bn, bk)`` tile
    the output rows, output columns and the contracted axis."""
    bm, bn, bk = blocks
    m = a.shape[1] if transpose_a else a.shape[0]
    n = b.shape[0] if transpose_b else b.shape[1]
    k = a.shape[0] if transpose_a else a.shape[1]
    a_spec = (pl.BlockSpec((bk, bm), lambda i, j, kk: (kk, i)) if transpose_a
              else pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)))
    b_spec = (pl.BlockSpec((bn, bk), lambda i, j, kk: (j, kk)) if transpose_b
              else pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)))
    dims = ((0,) if transpose_a else (1,), (1,) if transpose_b else (0,))
    return pl.pallas_call(
        functools.partial(_body, dims=dims),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[a_spec, b_spec],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(a, b)


@functools.cache
def _with_vjp(bm: int, bn: int, bk: int, bug: str | None):
    @jax.custom_vjp
    def mm(x, y):
        return tiled_matmul(x, y, blocks=(bm, bn, bk))

    def fwd(x, y):
        return mm(x, y), (x, y)

    def bwd(res, g):
        x, y = res
        # dx (m, k) = g (m, n) @ y.T: reduce over n. A square tile of y taken untransposed
        # (the "transposed_operand" bug) has the same shape when n == k.
        dx = tiled_matmul(g, y, blocks=(bm, bk, bn), transpose_b=bug != "transposed_operand")
        # dy (k, n) = x.T (k, m) @ g (m, n): reduce over m.
        dy = tiled_matmul(x, g, blocks=(bk, bn, bm), transpose_a=True)
        return dx, dy

    mm.defvjp(fwd, bwd)
    return mm


def matmul_vjp(x, y, *, bm: int, bn: int, bk: int, bug: str | None = None):
    """``x @ y`` whose VJP runs two Pallas backward kernels; ``bug`` plants a backward bug."""
    return _with_vjp(bm, bn, bk, bug)(x, y)


def matmul_reference(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)


@st.composite
def matmul_vjp_configs(draw, *, square: bool = False):
    """Tiles (bm in 8/16, bn = bk = 128) and sizes of 1-2 tiles; ``square``: n == k."""
    bm, bn, bk = draw(st.sampled_from([8, 16])), 128, 128
    n = bn * draw(st.integers(1, 2))
    k = n if square else bk * draw(st.integers(1, 2))
    return {"m": bm * draw(st.integers(1, 2)), "n": n, "k": k, "bm": bm, "bn": bn, "bk": bk}


def matmul_vjp_inputs(config):
    m, n, k = config["m"], config["n"], config["k"]
    return seeded(lambda rng: (normal(rng, (m, k)), normal(rng, (k, n))))


_SIZES = ("m", "n", "k")

MATMUL_VJP = pv.KernelSpec(
    name="matmul_vjp",
    kernel=without(matmul_vjp, *_SIZES),
    reference=without(matmul_reference, *_SIZES, "bm", "bn", "bk"),
    configs=matmul_vjp_configs(),
    inputs=matmul_vjp_inputs,
    features=("matmul", "accumulator", "custom_vjp"),
    transforms=("vmap", "grad"),
    bitwise_stable=False,
)
