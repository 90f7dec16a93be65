"""Kernels adapted from jax's own tests/pallas (TPU DMAs): an async copy started in one
``pallas_call`` and waited on in the next (its DMA semaphore passed between them), the
same for one slice of a stacked array, and a DMA whose size and offset are read from SMEM.

Adapted from ``tpu_pallas_async_test.py`` (make_async_copy, make_async_slice) and
``tpu_pallas_test.py`` (test_dynamic_dma_on_2nd_minor, whose expected value reads
``data[index:index+size]`` while its kernel copies ``data[:size]``: it passes upstream
only because ``data`` is all ones; the reference here follows the kernel).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
import strategies as pvs
from reference_kernels._draw import without

__all__ = ["JT_ASYNC_COPY", "JT_ASYNC_SLICE", "JT_DYNAMIC_DMA"]

_FEATURES = ("upstream", "jax_tests")
_DTYPES = ("float32", "int32", "bfloat16")
# No interpreter runs a pallas_call that returns a semaphore: _jax_compat's table makes
# both cells n/a with the reason; the grid is checked statically and Mosaic compiles it.


def _start_body(x_hbm, aliased_x, o_hbm, sem):
    del aliased_x
    pltpu.make_async_copy(x_hbm, o_hbm, sem).start()


def _done_body(x_hbm, o_hbm, sem, aliased_o):
    del aliased_o
    pltpu.make_async_copy(x_hbm, o_hbm, sem).wait()


def copy_start(x: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """Start copying ``x`` into a new HBM array; return ``x`` and the future (the
    destination and the DMA semaphore to wait on)."""
    x, out, sem = pl.pallas_call(
        _start_body,
        out_shape=(jax.ShapeDtypeStruct.like(x), jax.ShapeDtypeStruct.like(x), pltpu.SemaphoreType.DMA(())),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=(pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY),
                   pl.BlockSpec(memory_space=pltpu.SEMAPHORE)),
        input_output_aliases={0: 0},
    )(x)
    return x, (out, sem)


def copy_done(x: jax.Array, future: tuple[jax.Array, jax.Array]) -> jax.Array:
    """Wait, in a second pallas_call, for the copy ``copy_start`` began."""
    out, sem = future
    return pl.pallas_call(
        _done_body,
        out_shape=jax.ShapeDtypeStruct.like(x),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY),
                  pl.BlockSpec(memory_space=pltpu.SEMAPHORE)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        input_output_aliases={1: 0},
    )(x, out, sem)


@jax.jit
def async_copy(x: jax.Array) -> jax.Array:
    """A copy of ``x`` through a DMA that spans two pallas_calls."""
    x, future = copy_start(x)
    return copy_done(x, future)


@st.composite
def _copy_configs(draw):
    dtype = draw(st.sampled_from(_DTYPES))
    return {"rows": draw(pvs.ragged_sizes(block=8, max_blocks=3)), "cols": draw(st.sampled_from([128, 256])),
            "dtype": dtype}


JT_ASYNC_COPY = pv.KernelSpec(
    name="jaxtests_async_copy",
    kernel=without(async_copy, "rows", "cols", "dtype"),
    reference=without(lambda x: x, "rows", "cols", "dtype"),
    configs=_copy_configs(),
    inputs=lambda c: st.tuples(pvs.arrays(shape=(c["rows"], c["cols"]), dtype=c["dtype"])),
    features=("semaphore_outputs", "async_copy", "manual_dma", *_FEATURES),
)


def async_slice(x: jax.Array, *, index: int) -> jax.Array:
    """``x[index]`` copied by a DMA started in one pallas_call and waited in the next."""

    def start(x_hbm, aliased_x, o_hbm, sem):
        del aliased_x
        pltpu.make_async_copy(x_hbm.at[index], o_hbm, sem).start()

    def done(x_hbm, o_hbm, sem, aliased_o):
        del aliased_o
        pltpu.make_async_copy(x_hbm.at[index], o_hbm, sem).wait()

    row = jax.ShapeDtypeStruct(x.shape[1:], x.dtype)
    x, out, sem = pl.pallas_call(
        start,
        out_shape=(jax.ShapeDtypeStruct.like(x), row, pltpu.SemaphoreType.DMA(())),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=(pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY),
                   pl.BlockSpec(memory_space=pltpu.SEMAPHORE)),
        input_output_aliases={0: 0},
    )(x)
    return pl.pallas_call(
        done, out_shape=row,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY),
                  pl.BlockSpec(memory_space=pltpu.SEMAPHORE)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        input_output_aliases={1: 0},
    )(x, out, sem)


@st.composite
def _slice_configs(draw):
    count = draw(st.integers(1, 4))
    return {"count": count, "index": draw(st.integers(0, count - 1)), "rows": draw(st.sampled_from([8, 16])),
            "dtype": draw(st.sampled_from(_DTYPES))}


JT_ASYNC_SLICE = pv.KernelSpec(
    name="jaxtests_async_slice",
    kernel=without(async_slice, "count", "rows", "dtype"),
    reference=without(lambda x, *, index: x[index], "count", "rows", "dtype"),
    configs=_slice_configs(),
    inputs=lambda c: st.tuples(pvs.arrays(shape=(c["count"], c["rows"], 128), dtype=c["dtype"])),
    features=("semaphore_outputs", "async_copy", "manual_dma", *_FEATURES),
)


def _dynamic_dma_body(array_ref, data_ref, index_ref, size_ref, aliased_ref, sem):
    del aliased_ref
    size = size_ref[0]
    pltpu.async_copy(data_ref.at[pl.ds(0, size)], array_ref.at[pl.ds(index_ref[0], size)], sem).wait()


@jax.jit
def dynamic_dma(array: jax.Array, data: jax.Array, index: jax.Array, size: jax.Array) -> jax.Array:
    """``array`` with rows ``index .. index + size`` overwritten by ``data[:size]`` in place,
    by one DMA whose offset and size are read from SMEM."""
    return pl.pallas_call(
        _dynamic_dma_body,
        out_shape=jax.ShapeDtypeStruct.like(array),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pltpu.VMEM),
                  pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.SemaphoreType.DMA],
        input_output_aliases={0: 0},
    )(array, data, index, size)


def dynamic_dma_reference(array, data, index, size):
    source = jnp.arange(array.shape[0]) - index[0]
    inside = (source >= 0) & (source < size[0])
    return jnp.where(inside[:, None], data[jnp.clip(source, 0, data.shape[0] - 1)], array)


@st.composite
def _dma_inputs(draw, config):
    rows, dtype = config["rows"], config["dtype"]
    size = draw(st.integers(1, 8))
    index = draw(st.integers(0, rows - size))
    array, data = draw(st.tuples(pvs.arrays(shape=(rows, 128), dtype=dtype), pvs.arrays(shape=(8, 128), dtype=dtype)))
    return array, data, np.array([index], np.int32), np.array([size], np.int32)


JT_DYNAMIC_DMA = pv.KernelSpec(
    name="jaxtests_dynamic_dma",
    kernel=without(dynamic_dma, "rows", "dtype"),
    reference=without(dynamic_dma_reference, "rows", "dtype"),
    configs=st.fixed_dictionaries({"rows": st.sampled_from([8, 13, 32]), "dtype": st.sampled_from(["int32", "float32"])}),
    inputs=_dma_inputs,
    features=("dynamic_dma", "manual_dma", "smem", "in_place", "non_aligned_offsets", *_FEATURES),
)
