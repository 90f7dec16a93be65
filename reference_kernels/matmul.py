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
import strategies as pvs
from reference_kernels._draw import array_tuples, without

__all__ = ["MATMUL_BATCHED", "MATMUL_BF16", "MATMUL_F32"]


def _matmul_body(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


_MATMUL_SEMANTICS = ("parallel", "parallel", "arbitrary")


@functools.partial(jax.jit, static_argnames=("bm", "bn", "bk", "dimension_semantics"))
def matmul(x: jax.Array, y: jax.Array, *, bm: int, bn: int, bk: int,
           dimension_semantics: tuple[str, str, str] = _MATMUL_SEMANTICS) -> jax.Array:
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
        compiler_params=pltpu.CompilerParams(dimension_semantics=dimension_semantics),
    )(x, y)


def matmul_reference(x, y, **_config):
    return jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)


def _matmul_configs(*, dtype):
    """Whole blocks (``ragged=False``: a partial K block would add its padding into the
    sum); bm is one or two sublane tiles, bn and bk one or two lane tiles."""
    tiled = pvs.tiled_configs(axes={"m": "sublane", "n": "lane", "k": "lane"}, reduction_axes=("k",),
                              dtypes=(dtype,), ragged=False, max_grid_points=16)
    return tiled.map(_short_block_names)


def _short_block_names(config):
    """block_m, block_n, block_k -> bm, bn, bk (the kernels' keywords)."""
    return {(f"b{key[6:]}" if key.startswith("block_") else key): value for key, value in config.items()}


def _matmul_inputs(config):
    m, n, k = config["m"], config["n"], config["k"]
    return array_tuples((m, k), (k, n), dtype=config["dtype"], max_edge_values=1)


_SIZES = ("m", "n", "k", "dtype", "grid")

MATMUL_F32 = pv.KernelSpec(
    name="matmul_f32",
    kernel=without(matmul, *_SIZES),
    reference=without(matmul_reference, *_SIZES),
    configs=_matmul_configs(dtype="float32"),
    inputs=_matmul_inputs,
    features=("matmul", "accumulator"),
    transforms=("vmap",),
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


@functools.partial(jax.jit, static_argnames=("bm", "bn", "dimension_semantics"))
def matmul_batched(x: jax.Array, y: jax.Array, *, bm: int, bn: int,
                   dimension_semantics: tuple[str, str, str] = ("parallel",) * 3) -> jax.Array:
    """``x[b] @ y[b]`` per batch; the batch dimension is squeezed out of the blocks."""
    (b, m, k), (_, _, n) = x.shape, y.shape
    sq = pl.Squeezed()
    return pl.pallas_call(
        _batched_body,
        grid=(b, pl.cdiv(m, bm), pl.cdiv(n, bn)),
        in_specs=[pl.BlockSpec((sq, bm, k), lambda bb, i, j: (bb, i, 0)),
                  pl.BlockSpec((sq, k, bn), lambda bb, i, j: (bb, 0, j))],
        out_specs=pl.BlockSpec((sq, bm, bn), lambda bb, i, j: (bb, i, j)),
        out_shape=jax.ShapeDtypeStruct((b, m, n), jnp.float32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=dimension_semantics),
    )(x, y)


@st.composite
def _batched_configs(draw):
    """b in 1..3, ragged m and n tiles (partial blocks only drop padded rows and
    columns), a ragged K kept whole in every block, and semantics for the 3-axis grid."""
    b = draw(st.integers(1, 3))
    tiled = draw(pvs.tiled_configs(axes={"m": "sublane", "n": "lane"}, max_grid_points=16 // b)
                 .map(_short_block_names))
    return {**tiled, "b": b, "k": draw(pvs.ragged_sizes(block=128, max_blocks=2)),
            "grid": (b, *tiled["grid"]), "dimension_semantics": draw(pvs.dimension_semantics(num_axes=3))}


def _batched_inputs(config):
    b, m, n, k = config["b"], config["m"], config["n"], config["k"]
    return array_tuples((b, m, k), (b, k, n), max_edge_values=1)


MATMUL_BATCHED = pv.KernelSpec(
    name="matmul_batched",
    kernel=without(matmul_batched, "b", "m", "n", "k", "grid", "dtype"),
    reference=without(lambda x, y: jnp.einsum("bmk,bkn->bmn", x, y), "b", "m", "n", "k", "bm", "bn",
                       "grid", "dimension_semantics", "dtype"),
    configs=_batched_configs(),
    inputs=_batched_inputs,
    features=("matmul", "batched", "squeezed"),
    bitwise_stable=False,
)
