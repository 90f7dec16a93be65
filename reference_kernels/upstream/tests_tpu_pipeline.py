"""Kernels adapted from jax's own tests/pallas (TPU pipelining): an output revisited under
``RevisitMode.ANY``, inputs with explicit buffer counts, ``emit_pipeline`` over ragged
blocks split over a core axis inside ``run_scoped``, and element-offset windows.

Adapted from ``tpu_pallas_test.py`` (TPUPipelineModeRevisitTest, TPUPipelineModeTest),
``tpu_pallas_pipeline_test.py`` (PaddedPipelineEmitterTest) and ``pallas_test.py``
(test_block_spec_element); the upstream tests fix one shape each, these draw the edges.
"""

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

__all__ = ["JT_BUFFERED_ADD", "JT_ELEMENT_WINDOWS", "JT_PADDED_MATMUL", "JT_REVISIT_ANY_SUM"]

_FEATURES = ("upstream", "jax_tests")


def _sum_body(x_ref, o_ref):
    @pl.when(pl.program_id(0) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


def revisit_any_sum(x: jax.Array, *, row_blocks: int, rows: int) -> jax.Array:
    """Sum of ``row_blocks`` stacked (rows, cols) slabs: the reduction axis is the grid's
    first, so each output block is revisited once per slab, not consecutively; the
    BlockSpec declares ``RevisitMode.ANY`` (single-buffered), which allows it."""
    cols = x.shape[1]
    block = (rows, 128)
    return pl.pallas_call(
        _sum_body,
        grid=(row_blocks, pl.cdiv(cols, 128)),
        in_specs=[pl.BlockSpec(block, lambda i, j: (i, j))],
        out_specs=pl.BlockSpec(block, lambda i, j: (0, j), pipeline_mode=pl.Buffered(1, revisit=pl.RevisitMode.ANY)),
        out_shape=jax.ShapeDtypeStruct((rows, cols), x.dtype),
    )(x)


def revisit_any_sum_reference(x, *, row_blocks, rows):
    total = x.reshape(row_blocks, rows, -1).sum(axis=0, dtype=x.dtype)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return total
    # The kernel adds each slab to zeros, and a float add flushes a subnormal result to
    # zero (on a TPU, and in XLA on the CPU); a sum over one slab is a copy that keeps it.
    # The add runs in float32 at least, so that is float32's subnormal range: float16's
    # own subnormals are float32 normals, which the add keeps.
    tiny = jnp.finfo(jnp.promote_types(x.dtype, jnp.float32)).tiny
    return jnp.where(jnp.abs(total) < tiny, jnp.zeros_like(total), total)


@st.composite
def _revisit_configs(draw):
    dtype = draw(st.sampled_from(["float32", "int32", "bfloat16"]))
    return {"row_blocks": draw(st.integers(1, 3)), "rows": pvs.preferred_sublane_tile(dtype),
            "cols": draw(pvs.ragged_sizes(block=128, max_blocks=2)), "dtype": dtype}


JT_REVISIT_ANY_SUM = pv.KernelSpec(
    name="jaxtests_revisit_any_sum",
    kernel=without(revisit_any_sum, "cols", "dtype"),
    reference=without(revisit_any_sum_reference, "cols", "dtype"),
    configs=_revisit_configs(),
    inputs=lambda c: array_tuples((c["row_blocks"] * c["rows"], c["cols"]), dtype=c["dtype"], max_edge_values=1),
    features=("revisit_any", "pipeline_mode", "accumulator", "ragged", *_FEATURES),
)


def _add_body(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def buffered_add(x: jax.Array, y: jax.Array, *, block: int, x_buffers: int, y_buffers: int) -> jax.Array:
    """``x + y`` over 1-D blocks, each input pipelined with its own buffer count."""
    (n,) = x.shape
    specs = [pl.BlockSpec((block,), lambda i: (i,), pipeline_mode=pl.Buffered(count))
             for count in (x_buffers, y_buffers)]
    return pl.pallas_call(
        _add_body, grid=(pl.cdiv(n, block),), in_specs=specs,
        out_specs=pl.BlockSpec((block,), lambda i: (i,)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


@st.composite
def _buffered_configs(draw):
    block = draw(st.sampled_from([1024, 2048]))
    return {"n": draw(pvs.ragged_sizes(block=block, max_blocks=3)), "block": block,
            "x_buffers": draw(st.integers(1, 2)), "y_buffers": draw(st.integers(1, 2)),
            "dtype": draw(st.sampled_from(["float32", "bfloat16", "int32"]))}


JT_BUFFERED_ADD = pv.KernelSpec(
    name="jaxtests_buffered_add",
    kernel=without(buffered_add, "n", "dtype"),
    reference=without(lambda x, y: x + y, "n", "dtype", "block", "x_buffers", "y_buffers"),
    configs=_buffered_configs(),
    inputs=lambda c: array_tuples((c["n"],), (c["n"],), dtype=c["dtype"]),
    features=("pipeline_mode", "buffer_count", "ragged", *_FEATURES),
)


def _matmul_tile(x_ref, y_ref, o_ref, acc_ref, *, k):
    step = pl.program_id(2)
    bk = x_ref.shape[1]

    @pl.when(step == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    # The last k block overhangs the arrays: mask the padding it reads on both sides.
    cols = step * bk + jax.lax.broadcasted_iota(jnp.int32, x_ref.shape, 1)
    rows = step * bk + jax.lax.broadcasted_iota(jnp.int32, y_ref.shape, 0)
    x = jnp.where(cols < k, x_ref[...], 0)
    y = jnp.where(rows < k, y_ref[...], 0)
    acc_ref[...] += jnp.dot(x, y, preferred_element_type=jnp.float32)

    @pl.when(step == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def padded_matmul(x: jax.Array, y: jax.Array, *, bm: int, bk: int, bn: int, tile=_matmul_tile) -> jax.Array:
    """``x @ y`` by an inner ``emit_pipeline`` over HBM refs whose blocks overhang every
    array end, its parallel axes split over a core axis, inside ``run_scoped``. ``tile``
    is the pipeline's body (the default masks the k padding; tests plant bugs there)."""
    m, k = x.shape
    n = y.shape[1]

    def body(x_hbm, y_hbm, o_hbm):
        def run(acc_ref):
            pltpu.emit_pipeline(
                functools.partial(tile, acc_ref=acc_ref, k=k),
                in_specs=[pl.BlockSpec((bm, bk), lambda i, j, s: (i, s)),
                          pl.BlockSpec((bk, bn), lambda i, j, s: (s, j))],
                out_specs=pl.BlockSpec((bm, bn), lambda i, j, s: (i, j)),
                grid=(pl.cdiv(m, bm), pl.cdiv(n, bn), pl.cdiv(k, bk)),
                core_axis=0,
                dimension_semantics=(pltpu.PARALLEL, pltpu.PARALLEL, pltpu.ARBITRARY),
            )(x_hbm, y_hbm, o_hbm)

        pl.run_scoped(run, pltpu.VMEM((bm, bn), jnp.float32))

    return pl.pallas_call(
        body, grid=(1,),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)] * 2, out_specs=pl.BlockSpec(memory_space=pl.ANY),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
    )(x, y)


def padded_matmul_reference(x, y, **_sizes):
    return jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)


@st.composite
def _matmul_configs(draw):
    dtype = draw(st.sampled_from(["float32", "bfloat16"]))
    bm = pvs.preferred_sublane_tile(dtype)
    # At most 2 x 1 x 2 grid points: TPU interpret mode simulates each of the pipeline's DMAs.
    return {"m": draw(pvs.ragged_sizes(block=bm, max_blocks=2)), "k": draw(pvs.ragged_sizes(block=128, max_blocks=2)),
            "n": draw(pvs.ragged_sizes(block=128, max_blocks=1)), "bm": bm, "bk": 128, "bn": 128, "dtype": dtype}


JT_PADDED_MATMUL = pv.KernelSpec(
    name="jaxtests_padded_matmul",
    kernel=without(padded_matmul, "m", "k", "n", "dtype"),
    reference=without(padded_matmul_reference, "m", "k", "n", "dtype"),
    configs=_matmul_configs(),
    inputs=lambda c: array_tuples((c["m"], c["k"]), (c["k"], c["n"]), dtype=c["dtype"], max_edge_values=1),
    features=("emit_pipeline", "core_axis", "run_scoped", "ragged", "accumulator", *_FEATURES),
)


def _window_body(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2 + pl.program_id(0).astype(o_ref.dtype)


def element_windows(x: jax.Array, *, windows: int, pad: int) -> jax.Array:
    """``2x + w`` on windows of 8 rows that start at element offsets ``8w``; the last
    window is padded by ``pad`` rows past the array's end (``pl.Element`` padding)."""
    block = (pl.Element(8, (0, pad)), pl.Element(128))
    spec = pl.BlockSpec(block, lambda i: (8 * i, 0))
    return pl.pallas_call(
        _window_body, grid=(windows,), in_specs=[spec], out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def element_windows_reference(x, *, windows, pad):
    window = (jnp.arange(x.shape[0]) // 8).astype(x.dtype)
    return x * 2 + window[:, None]


@st.composite
def _window_configs(draw):
    windows, pad = draw(st.integers(1, 3)), draw(st.integers(0, 7))
    return {"windows": windows, "pad": pad, "rows": 8 * windows - pad,
            "dtype": draw(st.sampled_from(["float32", "int32"]))}


JT_ELEMENT_WINDOWS = pv.KernelSpec(
    name="jaxtests_element_windows",
    kernel=without(element_windows, "rows", "dtype"),
    reference=without(element_windows_reference, "rows", "dtype"),
    configs=_window_configs(),
    inputs=lambda c: array_tuples((c["rows"], 128), dtype=c["dtype"]),
    features=("element_window", "padding", "ragged", *_FEATURES),
)
