"""Specs for the attribution tests (loaded by file reference): kernels adapted from jax's
tests/pallas that one interpreter cannot run, each at one fixed config, and a planted bug
in each that the other interpreter (or the static check) must still find."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas import triton as plt

import pallas_verify as pv
from reference_kernels.upstream import tests_gpu as gpu
from reference_kernels.upstream import tests_tpu_dma as dma
from reference_kernels.upstream import tests_tpu_pipeline as pipeline


def _fixed(name, kernel, reference, inputs, config=None, **options):
    """A spec of one config and one input tuple (``inputs``: a function of an rng)."""
    return pv.KernelSpec(name=name, kernel=kernel, reference=reference, configs=st.just(config or {}),
                         inputs=lambda c: st.just(inputs(np.random.default_rng(0))), **options)


def _normal(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# emit_pipeline over blocks that overhang every array end, split over a core axis, inside
# run_scoped. The HLO interpreter cannot run it: a dynamic-size DMA for ragged arrays,
# an AssertionError in axis_frame for whole blocks; TPU interpret mode runs it.
def _unmasked_tile(x_ref, y_ref, o_ref, acc_ref, *, k):
    """The planted bug: the padding the last k block reads is not masked out."""
    del k

    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = acc_ref[...]


def matmul(x, y):
    return pipeline.padded_matmul(x, y, bm=8, bk=128, bn=128)


def matmul_unmasked(x, y):
    return pipeline.padded_matmul(x, y, bm=8, bk=128, bn=128, tile=_unmasked_tile)


def matmul_ref(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32)


# Two k blocks, the second ragged (or whole): the smallest grid that shows each.
emit_pipeline_ragged = _fixed("emit_pipeline_ragged", matmul, matmul_ref,
                              lambda rng: (_normal(rng, 8, 200), _normal(rng, 200, 128)))
emit_pipeline_whole = _fixed("emit_pipeline_whole", matmul, matmul_ref,
                             lambda rng: (_normal(rng, 8, 256), _normal(rng, 256, 128)))
emit_pipeline_ragged_bug = _fixed("emit_pipeline_ragged_bug", matmul_unmasked, matmul_ref,
                                  lambda rng: (_normal(rng, 8, 200), _normal(rng, 200, 128)))


# A DMA whose size and offset are read from SMEM: the HLO interpreter cannot run it.
def _dma_inputs(rng):
    array = rng.integers(-9, 9, (32, 128)).astype(np.int32)
    data = rng.integers(-9, 9, (8, 128)).astype(np.int32)
    return array, data, np.array([5], np.int32), np.array([3], np.int32)


def dynamic_dma_shifted(array, data, index, size):
    """The planted bug: the copy lands one row below where it should."""
    return dma.dynamic_dma(array, data, index + 1, size)


dynamic_dma = _fixed("dynamic_dma", dma.dynamic_dma, dma.dynamic_dma_reference, _dma_inputs)
dynamic_dma_bug = _fixed("dynamic_dma_bug", dynamic_dma_shifted, dma.dynamic_dma_reference, _dma_inputs)


# Triton-style kernels: GPU interpret mode cannot run them, the HLO interpreter can.
def softmax_zero_fill(x, *, block):
    """The planted bug: lanes past the row's end load 0, not -inf, and join the sum."""
    return gpu.triton_softmax(x, block=block, other=0.0)


def softmax_ref(x, *, block):
    return jax.nn.softmax(x, axis=-1)


def _rows(rng):
    return (_normal(rng, 3, 129),)


triton_softmax = _fixed("triton_softmax", gpu.triton_softmax, softmax_ref, _rows, {"block": 256}, platforms=("gpu",))
triton_softmax_bug = _fixed("triton_softmax_bug", softmax_zero_fill, softmax_ref, _rows, {"block": 256},
                            platforms=("gpu",))


def _atomic_inputs(rng):
    return _normal(rng, 8, 4), np.zeros((4,), np.float32)


def atomic_rows_doubled(x, zeros, *, axis):
    """The planted bug: every program adds its row twice."""
    m, n = x.shape

    def body(x_ref, _, y_ref):
        row = x_ref[pl.program_id(0), jnp.arange(n)]
        plt.atomic_add(y_ref, (jnp.arange(n),), row + row)

    return pl.pallas_call(body, grid=(m,), input_output_aliases={1: 0}, out_shape=jax.ShapeDtypeStruct((n,), x.dtype),
                          compiler_params=plt.CompilerParams())(x, zeros)


def atomic_rows_ref(x, zeros, *, axis):
    return zeros + x.sum(axis=axis)


atomic_rows = _fixed("atomic_rows", gpu.atomic_rows, atomic_rows_ref, _atomic_inputs, {"axis": 0},
                     platforms=("gpu",), bitwise_stable=False)
atomic_rows_bug = _fixed("atomic_rows_bug", atomic_rows_doubled, atomic_rows_ref, _atomic_inputs, {"axis": 0},
                         platforms=("gpu",), bitwise_stable=False)


# A Mosaic GPU kernel over two threads: the HLO interpreter cannot run thread axes.
def threads_overlapping(x, *, threads):
    """The planted bug: each thread starts half a share too early, so the last rows stay unwritten."""
    rows = x.shape[0] // threads

    @functools.partial(plgpu.kernel, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype), num_threads=threads,
                       thread_name="thread")
    def kernel(x_ref, o_ref):
        mine = pl.ds(jax.lax.axis_index("thread") * (rows // 2), rows)
        o_ref[mine] = x_ref[mine] * 2 - 1

    return kernel(x)


def _threads_ref(x, *, threads):
    return x * 2 - 1


mgpu_threads = _fixed("mgpu_threads", gpu.mgpu_threads, _threads_ref, lambda rng: (_normal(rng, 16, 128),),
                      {"threads": 2}, platforms=("gpu",))
mgpu_threads_bug = _fixed("mgpu_threads_bug", threads_overlapping, _threads_ref, lambda rng: (_normal(rng, 16, 128),),
                          {"threads": 2}, platforms=("gpu",))


# An output revisited under RevisitMode.ANY: TPU interpret mode rejects the revisit.
def _revisit_inputs(rng):
    return (_normal(rng, 24, 256),)


def revisit_ref(x):
    return x.reshape(3, 8, -1).sum(axis=0)


def revisit_sum(x):
    return pipeline.revisit_any_sum(x, row_blocks=3, rows=8)


def _zero_per_column_block(x_ref, o_ref):
    """The planted bug: the accumulator is zeroed on each slab's first column block."""

    @pl.when(pl.program_id(1) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


def _revisit(x, body, mode):
    spec = functools.partial(pl.BlockSpec, (8, 128))
    return pl.pallas_call(body, grid=(3, x.shape[1] // 128), in_specs=[spec(lambda i, j: (i, j))],
                          out_specs=spec(lambda i, j: (0, j), **mode),
                          out_shape=jax.ShapeDtypeStruct((8, x.shape[1]), x.dtype))(x)


def revisit_sum_bug(x):
    return _revisit(x, _zero_per_column_block, {"pipeline_mode": pl.Buffered(1, revisit=pl.RevisitMode.ANY)})


def revisit_undeclared(x):
    """The same reduction without RevisitMode.ANY: on a chip the revisits lose data."""
    return _revisit(x, pipeline._sum_body, {})


revisit_any = _fixed("revisit_any", revisit_sum, revisit_ref, _revisit_inputs)
revisit_any_bug = _fixed("revisit_any_bug", revisit_sum_bug, revisit_ref, _revisit_inputs)
revisit_not_declared = _fixed("revisit_not_declared", revisit_undeclared, revisit_ref, _revisit_inputs)


# A DMA semaphore passed from one pallas_call to the next: no interpreter runs it.
def _wrong_way_done(x_hbm, o_hbm, sem, aliased_o):
    """The planted bug: the second call waits on a copy into its input, not its output."""
    del aliased_o
    pltpu.make_async_copy(o_hbm, x_hbm, sem).wait()


def async_copy_wrong_way(x):
    x, (out, sem) = dma.copy_start(x)
    return pl.pallas_call(
        _wrong_way_done, out_shape=jax.ShapeDtypeStruct.like(x),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY),
                  pl.BlockSpec(memory_space=pltpu.SEMAPHORE)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY), input_output_aliases={1: 0})(x, out, sem)


def _copy_inputs(rng):
    return (_normal(rng, 16, 128),)


async_copy = _fixed("async_copy", dma.async_copy, lambda x: x, _copy_inputs)
async_copy_bug = _fixed("async_copy_bug", async_copy_wrong_way, lambda x: x, _copy_inputs)


# Never hidden: an error no interpreter runs past, and a sanitizer signal.
def scalar_atomic_max(x):
    """Triton scalar atomics: JAX raises on the HLO interpreter and on GPU interpret mode."""

    def body(x_ref, _, o_ref):
        plt.atomic_max(o_ref, (), x_ref[pl.program_id(0)])

    return pl.pallas_call(body, grid=(x.shape[0],), input_output_aliases={1: 0},
                          out_shape=jax.ShapeDtypeStruct((), x.dtype),
                          compiler_params=plt.CompilerParams())(x, jnp.array(-jnp.inf, x.dtype))


def read_past_the_end(x):
    """Reads 8 elements far past the end of an n-element ref (a dynamic pl.ds, beyond its
    tiled allocation): the HLO interpreter clamps the slice to the last 8 and runs; TPU
    interpret mode raises out of bounds."""
    n = x.shape[0]

    def body(x_ref, o_ref):
        start = pl.program_id(0) + n + 4096
        o_ref[...] = x_ref[pl.ds(start, 8)]

    return pl.pallas_call(body, grid=(1,), out_shape=jax.ShapeDtypeStruct((8,), x.dtype),
                          in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)])(x)


scalar_atomic = _fixed("scalar_atomic", scalar_atomic_max, lambda x: x.max(),
                       lambda rng: (_normal(rng, 4),), platforms=("gpu",))
out_of_bounds_read = _fixed("out_of_bounds_read", read_past_the_end, lambda x: x[-8:],
                            lambda rng: (_normal(rng, 16),))


# No interpreter runs it: the HLO interpreter cannot discharge the DMA of dynamic size,
# and TPU interpret mode has no rule for pl.semaphore_read; each fails inside JAX.
def _dynamic_dma_read_sem_body(array_ref, data_ref, index_ref, size_ref, aliased_ref, sem, pending_ref):
    del aliased_ref
    size = size_ref[0]
    copy = pltpu.async_copy(data_ref.at[pl.ds(0, size)], array_ref.at[pl.ds(index_ref[0], size)], sem)
    pending_ref[0] = pl.semaphore_read(sem)
    copy.wait()


def _read_sem_past_the_end_body(array_ref, data_ref, index_ref, size_ref, aliased_ref, sem, pending_ref):
    """The planted bug: a static window 8 rows past the array's end (the kernel's own line)."""
    del aliased_ref, index_ref, size_ref
    copy = pltpu.async_copy(data_ref, array_ref.at[pl.ds(array_ref.shape[0], 8)], sem)
    pending_ref[0] = pl.semaphore_read(sem)
    copy.wait()


def _reading_sem(body):
    """``body`` as jax's dynamic_dma calls its own (array in place, data, index and size in
    SMEM), with one more scratch: the SMEM word the semaphore's count is read into."""

    @jax.jit
    def call(array, data, index, size):
        return pl.pallas_call(
            body,
            out_shape=jax.ShapeDtypeStruct.like(array),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pltpu.VMEM),
                      pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec(memory_space=pltpu.SMEM)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            scratch_shapes=[pltpu.SemaphoreType.DMA, pltpu.SMEM((1,), jnp.int32)],
            input_output_aliases={0: 0},
        )(array, data, index, size)

    return call


nothing_runs = _fixed("nothing_runs", _reading_sem(_dynamic_dma_read_sem_body), dma.dynamic_dma_reference,
                      _dma_inputs)
nothing_runs_bug = _fixed("nothing_runs_bug", _reading_sem(_read_sem_past_the_end_body), dma.dynamic_dma_reference,
                          _dma_inputs)
