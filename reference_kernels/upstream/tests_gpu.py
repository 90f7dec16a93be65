"""Kernels adapted from jax's own tests/pallas (GPU): Triton-style row softmax over masked
lanes, row-wise atomic adds, a compare-and-swap, a masked load from a dynamic slice that
runs past the array's end, and a Mosaic GPU ``plgpu.kernel`` split over two threads.

Adapted from ``triton_pallas_test.py`` (test_softmax, test_array_atomic_add,
test_atomic_cas, test_masked_oob_load_store_slice) and ``mosaic_gpu_test.py`` (kernels
with ``num_threads``). GPU interpret mode runs only Mosaic GPU primitives and the HLO
interpreter no thread axes: each runs on the other interpreter, and the rule of
``pallas_verify.attribution`` reports the one JAX cannot run as an upstream limitation.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu
from jax.experimental.pallas import triton as plt

import pallas_verify as pv
from reference_kernels._draw import array_tuples, without

__all__ = ["JT_ATOMIC_CAS", "JT_ATOMIC_ROWS", "JT_MASKED_SLICE", "JT_MGPU_THREADS", "JT_TRITON_SOFTMAX"]

_FEATURES = ("upstream", "jax_tests")


def triton_softmax(x: jax.Array, *, block: int, other: float = -float("inf")) -> jax.Array:
    """Softmax of each row, one program per row; lanes past the row's end load ``other``
    (``-inf``, which the max and the sum then ignore; tests plant other fills)."""
    rows, size = x.shape

    def body(x_ref, o_ref):
        lanes = jnp.arange(block)
        where = (pl.program_id(0), lanes)
        mask = lanes < size
        row = plt.load(x_ref.at[where], mask=mask, other=other)
        numerator = jnp.exp(row - jnp.max(row, axis=0))
        plt.store(o_ref.at[where], numerator / jnp.sum(numerator, axis=0), mask=mask)

    return pl.pallas_call(body, grid=(rows,), out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          compiler_params=plt.CompilerParams())(x)


@st.composite
def _softmax_configs(draw):
    size = draw(st.sampled_from([1, 2, 129, 255, 256]))  # upstream's sizes
    return {"rows": draw(st.integers(1, 4)), "size": size, "block": max(2, 1 << (size - 1).bit_length())}


JT_TRITON_SOFTMAX = pv.KernelSpec(
    name="jaxtests_triton_softmax",
    kernel=without(triton_softmax, "rows", "size"),
    reference=without(lambda x: jax.nn.softmax(x, axis=-1), "rows", "size", "block"),
    configs=_softmax_configs(),
    inputs=lambda c: array_tuples((c["rows"], c["size"]), max_edge_values=1),
    platforms=("gpu",),
    features=("triton", "masked_load", "masked_store", "softmax", *_FEATURES),
)


def atomic_rows(x: jax.Array, zeros: jax.Array, *, axis: int) -> jax.Array:
    """``x.sum(axis)`` by atomic adds: one program per slice along ``axis``, each adding
    its slice into the output (aliased to ``zeros``)."""
    m, n = x.shape

    def body(x_ref, _, y_ref):
        i = pl.program_id(0)
        where = (i, jnp.arange(n)) if axis == 0 else (jnp.arange(m), i)
        plt.atomic_add(y_ref, (jnp.arange(y_ref.shape[0]),), x_ref[where])

    return pl.pallas_call(body, grid=(x.shape[axis],), input_output_aliases={1: 0},
                          out_shape=jax.ShapeDtypeStruct(zeros.shape, x.dtype),
                          compiler_params=plt.CompilerParams())(x, zeros)


@st.composite
def _atomic_inputs(draw, config):
    m, n = config["m"], config["n"]
    (x,) = draw(array_tuples((m, n), max_edge_values=0))
    return x, np.zeros((n if config["axis"] == 0 else m,), np.float32)


JT_ATOMIC_ROWS = pv.KernelSpec(
    name="jaxtests_atomic_rows",
    kernel=without(atomic_rows, "m", "n"),
    reference=without(lambda x, zeros, *, axis: zeros + x.sum(axis=axis), "m", "n"),
    configs=st.fixed_dictionaries({"m": st.sampled_from([1, 2, 8, 32]), "n": st.sampled_from([1, 4, 8, 16]),
                                   "axis": st.integers(0, 1)}),
    inputs=_atomic_inputs,
    platforms=("gpu",),
    features=("triton", "atomics", "aliasing", *_FEATURES),
    bitwise_stable=False,  # atomics add in the order the programs run
)


def atomic_cas(lock: jax.Array, *, compare: int, new: int) -> tuple[jax.Array, jax.Array]:
    """Compare-and-swap on a scalar lock (aliased in place): ``(lock', old lock)``."""

    def body(_, lock_ref, old_ref):
        old_ref[()] = plt.atomic_cas(lock_ref, compare, new)

    scalar = jax.ShapeDtypeStruct((), jnp.int32)
    return pl.pallas_call(body, out_shape=(scalar, scalar), input_output_aliases={0: 0},
                          compiler_params=plt.CompilerParams())(lock)


def atomic_cas_reference(lock, *, compare, new):
    return jnp.where(lock == compare, jnp.int32(new), lock), lock


JT_ATOMIC_CAS = pv.KernelSpec(
    name="jaxtests_atomic_cas",
    kernel=atomic_cas,
    reference=atomic_cas_reference,
    configs=st.fixed_dictionaries({"compare": st.integers(-1, 2), "new": st.integers(-1, 2)}),
    inputs=lambda c: st.integers(-1, 2).map(lambda v: (np.array(v, np.int32),)),
    platforms=("gpu",),
    features=("triton", "atomics", "compare_and_swap", "scalar", *_FEATURES),
)


def masked_slice(x: jax.Array, mask: jax.Array, start: jax.Array) -> jax.Array:
    """``x[start : start + n]`` where ``mask`` holds and -1 elsewhere; the slice starts at
    a run-time offset and runs past the array's end, where the mask is off."""
    n = x.shape[0]

    def body(x_ref, mask_ref, start_ref, o_ref):
        o_ref[...] = plt.load(x_ref.at[pl.ds(start_ref[()], n)], mask=mask_ref[...], other=-1.0)

    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          compiler_params=plt.CompilerParams())(x, mask, start)


def masked_slice_reference(x, mask, start):
    n = x.shape[0]
    return jnp.where(mask, x[jnp.clip(jnp.arange(n) + start, 0, n - 1)], -1.0).astype(x.dtype)


@st.composite
def _slice_inputs(draw, config):
    n = config["n"]
    start = draw(st.integers(0, n - 1))
    (x,) = draw(array_tuples((n,)))
    return x, (np.arange(n) + start) < n, np.array(start, np.int32)


JT_MASKED_SLICE = pv.KernelSpec(
    name="jaxtests_masked_slice",
    kernel=without(masked_slice, "n"),
    reference=without(masked_slice_reference, "n"),
    configs=st.fixed_dictionaries({"n": st.sampled_from([1, 2, 16, 32])}),
    inputs=_slice_inputs,
    platforms=("gpu",),
    features=("triton", "masked_load", "non_aligned_offsets", *_FEATURES),
)


def mgpu_threads(x: jax.Array, *, threads: int) -> jax.Array:
    """``2x - 1`` by a Mosaic GPU kernel whose ``threads`` threads each take their rows."""
    rows = x.shape[0] // threads

    @functools.partial(plgpu.kernel, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype), num_threads=threads,
                       thread_name="thread")
    def kernel(x_ref, o_ref):
        mine = pl.ds(jax.lax.axis_index("thread") * rows, rows)
        o_ref[mine] = x_ref[mine] * 2 - 1

    return kernel(x)


JT_MGPU_THREADS = pv.KernelSpec(
    name="jaxtests_mgpu_threads",
    kernel=without(mgpu_threads, "rows", "cols"),
    reference=without(lambda x: x * 2 - 1, "rows", "cols", "threads"),
    # Each thread's slice holds at least 128 elements (one per thread of its warpgroup):
    # Mosaic GPU cannot lay out a (1, 16) slice ("Failed to infer a possible set of
    # layouts" on a100, h100 and b200, jax 0.12.0.1), while (1, 128) and (8, 16) compile.
    configs=st.sampled_from([1, 2, 4]).flatmap(lambda t: st.fixed_dictionaries({
        "threads": st.just(t), "rows": st.sampled_from([t, 8 * t]), "cols": st.sampled_from([16, 128])}))
    .filter(lambda c: c["rows"] // c["threads"] * c["cols"] >= 128),
    inputs=lambda c: array_tuples((c["rows"], c["cols"])),
    platforms=("gpu",),
    features=("mosaic_gpu", "threads", "plgpu_kernel", *_FEATURES),
)
