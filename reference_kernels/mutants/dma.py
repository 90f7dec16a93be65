"""Mutants of DMAs and semaphores: reads before waits, missing waits, deadlocks."""

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

BM, BK = 8, 128
_NO_CONFIG = st.just({})
_ANY = pl.BlockSpec(memory_space=pl.ANY)
_BLOCK = pl.BlockSpec((BM, BK), lambda i: (i, 0))


def _inputs(config):
    return seeded_arrays([(2 * BM, BK)])


def _scale_kernel(x_hbm, o_ref, buf, sem, *, read_early: bool):
    copy = pltpu.make_async_copy(x_hbm.at[pl.ds(pl.program_id(0) * BM, BM)], buf, sem)
    copy.start()
    if read_early:
        o_ref[...] = buf[...] * 3
        copy.wait()
    else:
        copy.wait()
        o_ref[...] = buf[...] * 3


def scale_from_hbm(x, *, read_early: bool = False):
    """3 * x through an explicit HBM -> VMEM copy per block."""
    return pl.pallas_call(
        functools.partial(_scale_kernel, read_early=read_early),
        grid=(x.shape[0] // BM,),
        in_specs=[_ANY],
        out_specs=_BLOCK,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM((BM, BK), x.dtype), pltpu.SemaphoreType.DMA],
    )(x)


scale_from_hbm_spec = KernelSpec(
    name="scale_from_hbm",
    kernel=scale_from_hbm,
    reference=lambda x: 3 * x,
    configs=_NO_CONFIG,
    inputs=_inputs,
    features=("dma",),
)
read_before_wait_spec = KernelSpec(
    name="read_before_wait",
    kernel=functools.partial(scale_from_hbm, read_early=True),
    reference=lambda x: 3 * x,
    configs=_NO_CONFIG,
    inputs=_inputs,
    features=("dma",),
)


def _hbm_copy_kernel(x_hbm, o_hbm, sem, *, wait: bool):
    copy = pltpu.make_async_copy(x_hbm, o_hbm, sem)
    copy.start()
    if wait:
        copy.wait()


def hbm_copy(x, *, wait: bool = True):
    """Copies ``x`` HBM -> HBM with one DMA."""
    return pl.pallas_call(
        functools.partial(_hbm_copy_kernel, wait=wait),
        in_specs=[_ANY],
        out_specs=_ANY,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.SemaphoreType.DMA],
    )(x)


hbm_copy_spec = KernelSpec(
    name="hbm_copy",
    kernel=hbm_copy,
    reference=lambda x: x,
    configs=_NO_CONFIG,
    inputs=_inputs,
    features=("dma", "memory_space_any"),
)
never_wait_spec = KernelSpec(
    name="never_wait",
    kernel=functools.partial(hbm_copy, wait=False),
    reference=lambda x: x,
    configs=_NO_CONFIG,
    inputs=_inputs,
    features=("dma", "memory_space_any"),
)


def _zero_head_kernel(x_hbm, o_ref, buf, sem, *, zero_in_flight: bool):
    copy = pltpu.make_async_copy(x_hbm.at[pl.ds(pl.program_id(0) * BM, BM)], buf, sem)
    copy.start()
    if zero_in_flight:
        buf[0:1, :] = jnp.zeros((1, BK), buf.dtype)
        copy.wait()
    else:
        copy.wait()
        buf[0:1, :] = jnp.zeros((1, BK), buf.dtype)
    o_ref[...] = buf[...]


def zero_block_heads(x, *, zero_in_flight: bool = False):
    """``x`` with the first row of every 8-row block set to zero."""
    return pl.pallas_call(
        functools.partial(_zero_head_kernel, zero_in_flight=zero_in_flight),
        grid=(x.shape[0] // BM,),
        in_specs=[_ANY],
        out_specs=_BLOCK,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM((BM, BK), x.dtype), pltpu.SemaphoreType.DMA],
    )(x)


def _zero_heads_ref(x):
    rows = jnp.arange(x.shape[0])[:, None]
    return jnp.where(rows % BM == 0, 0, x).astype(x.dtype)


zero_block_heads_spec = KernelSpec(
    name="zero_block_heads",
    kernel=zero_block_heads,
    reference=_zero_heads_ref,
    configs=_NO_CONFIG,
    inputs=_inputs,
    features=("dma",),
)
write_dma_dest_in_flight_spec = KernelSpec(
    name="write_dma_dest_in_flight",
    kernel=functools.partial(zero_block_heads, zero_in_flight=True),
    reference=_zero_heads_ref,
    configs=_NO_CONFIG,
    inputs=_inputs,
    features=("dma",),
)


def _handshake_kernel(x_ref, o_ref, sem, *, signal: bool):
    if signal:
        pl.semaphore_signal(sem, 1)
    pl.semaphore_wait(sem, 1)
    o_ref[...] = x_ref[...] + 1


def semaphore_handshake(x, *, signal: bool = True):
    """x + 1 after signalling and waiting a regular semaphore (a self-handshake)."""
    return pl.pallas_call(
        functools.partial(_handshake_kernel, signal=signal),
        grid=(x.shape[0] // BM,),
        in_specs=[_BLOCK],
        out_specs=_BLOCK,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.SemaphoreType.REGULAR],
    )(x)


semaphore_handshake_spec = KernelSpec(
    name="semaphore_handshake",
    kernel=semaphore_handshake,
    reference=lambda x: x + 1,
    configs=_NO_CONFIG,
    inputs=_inputs,
    features=("semaphore",),
)
deadlock_semaphore_spec = KernelSpec(
    name="deadlock_semaphore",
    kernel=functools.partial(semaphore_handshake, signal=False),
    reference=lambda x: x + 1,
    configs=_NO_CONFIG,
    inputs=_inputs,
    features=("semaphore",),
)

MUTANTS = [
    Mutant(
        spec=read_before_wait_spec,
        twin=scale_from_hbm_spec,
        expects=("dma_ordering", "mismatch"),
        bug="the DMA destination is read before the copy is waited on",
        exposed_by={"dma_execution_mode": "on_wait"},
        verdicts={"tpu_interpret": ("race", "dma_ordering", "mismatch")},
    ),
    Mutant(
        spec=never_wait_spec,
        twin=hbm_copy_spec,
        expects=("semaphore_leak", "dma_ordering", "mismatch"),
        bug="the HBM -> HBM copy is started but never waited on",
        exposed_by={"dma_execution_mode": "eager"},
        verdicts={"tpu_interpret": ("semaphore_leak", "dma_ordering", "mismatch", "race")},
    ),
    Mutant(
        spec=write_dma_dest_in_flight_spec,
        twin=zero_block_heads_spec,
        expects=("race", "dma_ordering"),
        bug="the DMA destination is written while the copy into it is in flight",
        exposed_by={"detect_races": True},
        verdicts={"tpu_interpret": ("race", "dma_ordering")},
    ),
    Mutant(
        spec=deadlock_semaphore_spec,
        twin=semaphore_handshake_spec,
        expects=("deadlock", "timeout"),
        bug="the kernel waits on a semaphore that nothing signals",
    ),
]
