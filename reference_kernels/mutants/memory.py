"""Mutants of memory access: dynamic windows past the end, writes into inputs."""

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


def _neighbour_kernel(x_ref, o_ref, *, wrap: bool):
    i = pl.program_id(0)
    nb = pl.num_programs(0)
    cur = x_ref[pl.ds(i * BM, BM), :]
    if wrap:
        nxt = x_ref[pl.ds(((i + 1) % nb) * BM, BM), :]
        shifted = jnp.concatenate([cur[1:], nxt[:1]], axis=0)
    else:
        shifted = x_ref[pl.ds(i * BM + 1, BM), :]
    o_ref[...] = cur + shifted


def neighbour_sum(x, *, wrap: bool = True):
    """out[r] = x[r] + x[(r + 1) % n], reading a one-row-shifted window of the whole ``x``."""
    return pl.pallas_call(
        functools.partial(_neighbour_kernel, wrap=wrap),
        grid=(x.shape[0] // BM,),
        in_specs=[pl.BlockSpec(x.shape, lambda i: (0, 0))],
        out_specs=pl.BlockSpec((BM, BK), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def _neighbour_ref(x):
    return x + jnp.roll(x, -1, axis=0)


def _neighbour_inputs(config):
    return seeded_arrays([(3 * BM, BK)])


neighbour_sum_spec = KernelSpec(
    name="neighbour_sum",
    kernel=neighbour_sum,
    reference=_neighbour_ref,
    configs=_NO_CONFIG,
    inputs=_neighbour_inputs,
    features=("dynamic_slice",),
)
shifted_window_oob_spec = KernelSpec(
    name="shifted_window_oob",
    kernel=functools.partial(neighbour_sum, wrap=False),
    reference=_neighbour_ref,
    configs=_NO_CONFIG,
    inputs=_neighbour_inputs,
    features=("dynamic_slice",),
)


def _double_kernel(x_hbm, o_ref, buf, sem, *, write_back: bool):
    rows = pl.ds(pl.program_id(0) * BM, BM)
    pltpu.sync_copy(x_hbm.at[rows], buf)
    buf[...] = buf[...] * 2
    if write_back:
        copy = pltpu.make_async_copy(buf, x_hbm.at[rows], sem)
        copy.start()
        copy.wait()
    o_ref[...] = buf[...]


def double_from_hbm(x, *, write_back: bool = False):
    """2 * x, copying each block of ``x`` (left in HBM) into a VMEM buffer first."""
    return pl.pallas_call(
        functools.partial(_double_kernel, write_back=write_back),
        grid=(x.shape[0] // BM,),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((BM, BK), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM((BM, BK), x.dtype), pltpu.SemaphoreType.DMA],
    )(x)


def _double_inputs(config):
    return seeded_arrays([(2 * BM, BK)])


double_from_hbm_spec = KernelSpec(
    name="double_from_hbm",
    kernel=double_from_hbm,
    reference=lambda x: 2 * x,
    configs=_NO_CONFIG,
    inputs=_double_inputs,
    features=("dma", "memory_space_any"),
)
input_mutation_spec = KernelSpec(
    name="input_mutation",
    kernel=functools.partial(double_from_hbm, write_back=True),
    reference=lambda x: 2 * x,
    configs=_NO_CONFIG,
    inputs=_double_inputs,
    features=("dma", "memory_space_any"),
)



def _scale_kernel(x_ref, o_ref, *, read_output_first: bool):
    if read_output_first:  # the mutant: adds to the output block before anything wrote it
        o_ref[...] += 2 * x_ref[...]
    else:
        o_ref[...] = 2 * x_ref[...]


def scale_blocks(x, *, read_output_first: bool = False):
    """2 * x, one row block per grid step; each output block is visited once."""
    return pl.pallas_call(
        functools.partial(_scale_kernel, read_output_first=read_output_first),
        grid=(x.shape[0] // BM,),
        in_specs=[pl.BlockSpec((BM, BK), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((BM, BK), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


scale_blocks_spec = KernelSpec(
    name="scale_blocks",
    kernel=scale_blocks,
    reference=lambda x: 2 * x,
    configs=_NO_CONFIG,
    inputs=_double_inputs,
    features=("elementwise",),
)
output_read_before_write_spec = KernelSpec(
    name="output_read_before_write",
    kernel=functools.partial(scale_blocks, read_output_first=True),
    reference=lambda x: 2 * x,
    configs=_NO_CONFIG,
    inputs=_double_inputs,
    features=("elementwise",),
)

MUTANTS = [
    Mutant(
        spec=shifted_window_oob_spec,
        twin=neighbour_sum_spec,
        expects=("out_of_bounds",),
        bug="the last block's one-row-shifted window reads one row past the end of x",
        exposed_by={"out_of_bounds_reads": "raise"},
        verdicts={"interpret": ("mismatch",), "tpu_interpret": ("out_of_bounds",)},
    ),
    Mutant(
        spec=input_mutation_spec,
        twin=double_from_hbm_spec,
        expects=("input_mutation",),
        bug="the doubled block is copied back into the input x through its pl.ANY ref",
        verdicts={"static": ("input_mutation",)},
    ),
    Mutant(
        spec=output_read_before_write_spec,
        twin=scale_blocks_spec,
        expects=("uninitialized_read", "mismatch"),
        bug="each output block is added to before anything wrote it: right only where outputs start at zero",
        exposed_by={"uninitialized_memory": "nan"},
        # The poison an interpreter starts outputs with shows it: NaN on the HLO interpreter,
        # NaN fill against zero fill in TPU interpret mode.
        verdicts={"interpret": ("mismatch",), "tpu_interpret": ("uninitialized_read", "mismatch")},
    ),
]
