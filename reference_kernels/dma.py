"""Manual memory movement: a double-buffered DMA loop from HBM, ``emit_pipeline`` inside a
kernel, and ``run_scoped`` allocations of VMEM and a DMA semaphore."""

from __future__ import annotations

import contextlib
import functools

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
import strategies as pvs
from reference_kernels._draw import array_tuples, without

__all__ = ["DOUBLE_BUFFER", "EMIT_PIPELINE_SCALE", "RUN_SCOPED_COPY"]


def _double_buffer_body(x_hbm, o_ref, buf, sems, *, chunk, n_chunks):
    def copy(i, slot):
        return pltpu.make_async_copy(x_hbm.at[pl.ds(i * chunk, chunk)], buf.at[slot], sems.at[slot])

    copy(0, 0).start()

    def step(i, carry):
        slot = i % 2

        @pl.when(i + 1 < n_chunks)
        def _prefetch():
            copy(i + 1, 1 - slot).start()

        copy(i, slot).wait()
        o_ref[pl.ds(pl.multiple_of(i * chunk, chunk), chunk), :] = buf[slot] * 2.0 + 1.0
        return carry

    jax.lax.fori_loop(0, n_chunks, step, 0)


@functools.partial(jax.jit, static_argnames=("chunk",))
def double_buffer(x: jax.Array, *, chunk: int) -> jax.Array:
    """``2x + 1``: x stays in HBM and streams through two VMEM slots, chunk rows at a time."""
    rows, cols = x.shape
    body = functools.partial(_double_buffer_body, chunk=chunk, n_chunks=rows // chunk)
    return pl.pallas_call(
        body,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM((2, chunk, cols), x.dtype), pltpu.SemaphoreType.DMA((2,))],
    )(x)


@st.composite
def _chunk_configs(draw):
    """Whole chunks of rows (the DMAs copy ``chunk`` rows at a time with no bounds check)
    and a ragged width (every copy moves whole rows)."""
    chunk = draw(st.integers(1, 2).map(lambda k: k * pvs.preferred_sublane_tile("float32")))
    return {"rows": draw(pvs.ragged_sizes(block=chunk, max_blocks=5, kinds=("exact",))),
            "cols": draw(pvs.ragged_sizes(block=pvs.TPU_LANES, max_blocks=2)), "chunk": chunk}


def _x(config):
    return array_tuples((config["rows"], config["cols"]))


DOUBLE_BUFFER = pv.KernelSpec(
    name="double_buffer",
    kernel=without(double_buffer, "rows", "cols"),
    reference=without(lambda x: x * 2.0 + 1.0, "rows", "cols", "chunk"),
    configs=_chunk_configs(),
    inputs=_x,
    features=("manual_dma", "double_buffering", "semaphores", "fori_loop"),
)


def _scale_tile(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 3.0


def _emit_pipeline_body(x_hbm, o_hbm, *, chunk, n_chunks):
    cols = x_hbm.shape[1]
    spec = pl.BlockSpec((chunk, cols), lambda i: (i, 0))
    pltpu.emit_pipeline(_scale_tile, grid=(n_chunks,), in_specs=[spec], out_specs=[spec])(
        x_hbm, o_hbm)


#: ``emit_pipeline`` reads the chip's tiling from the device kind; off a TPU the kernel
#: targets this chip (an abstract mesh names it while tracing).
EMIT_PIPELINE_DEVICE_KIND = "TPU v5 lite"


def _tpu_device_kind() -> contextlib.AbstractContextManager[object]:
    """An abstract mesh naming a TPU chip, unless a TPU or an abstract mesh is present."""
    if jax.default_backend() == "tpu" or not jax.sharding.get_abstract_mesh().empty:
        return contextlib.nullcontext()
    device = jax.sharding.AbstractDevice(
        device_kind=EMIT_PIPELINE_DEVICE_KIND, num_cores=1, platform=jax.default_backend())
    mesh = jax.sharding.AbstractMesh(
        (1,), ("x",), (jax.sharding.AxisType.Auto,), abstract_device=device)
    return jax.sharding.use_abstract_mesh(mesh)


def emit_pipeline_scale(x: jax.Array, *, chunk: int) -> jax.Array:
    """``3x`` by an inner pipeline over HBM refs (the outer call has no grid)."""
    with _tpu_device_kind():
        return _emit_pipeline_scale(jax.device_put(x, jax.devices()[0]), chunk=chunk)


@functools.partial(jax.jit, static_argnames=("chunk",))
def _emit_pipeline_scale(x: jax.Array, *, chunk: int) -> jax.Array:
    rows, _ = x.shape
    body = functools.partial(_emit_pipeline_body, chunk=chunk, n_chunks=rows // chunk)
    return pl.pallas_call(
        body,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


EMIT_PIPELINE_SCALE = pv.KernelSpec(
    name="emit_pipeline_scale",
    kernel=without(emit_pipeline_scale, "rows", "cols"),
    reference=without(lambda x: x * 3.0, "rows", "cols", "chunk"),
    configs=_chunk_configs(),
    inputs=_x,
    features=("emit_pipeline", "manual_dma"),
)


def _run_scoped_body(x_hbm, o_hbm):
    def scoped(buf, sem):
        copy_in = pltpu.make_async_copy(x_hbm, buf, sem)
        copy_in.start()
        copy_in.wait()
        buf[...] = jnp.tanh(buf[...])
        copy_out = pltpu.make_async_copy(buf, o_hbm, sem)
        copy_out.start()
        copy_out.wait()

    pl.run_scoped(scoped, pltpu.VMEM(x_hbm.shape, x_hbm.dtype), pltpu.SemaphoreType.DMA(()))


@jax.jit
def run_scoped_copy(x: jax.Array) -> jax.Array:
    """``tanh(x)`` via a VMEM buffer and a DMA semaphore allocated with ``run_scoped``."""
    return pl.pallas_call(
        _run_scoped_body,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


RUN_SCOPED_COPY = pv.KernelSpec(
    name="run_scoped_copy",
    kernel=without(run_scoped_copy, "rows", "cols", "chunk"),
    reference=without(jnp.tanh, "rows", "cols", "chunk"),
    configs=_chunk_configs(),
    inputs=_x,
    features=("run_scoped", "manual_dma", "semaphores"),
)
