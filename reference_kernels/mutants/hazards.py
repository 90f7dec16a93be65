"""Mutants of in-place kernels (input_output_aliases) and of manual double buffering.

On a chip an aliased input and its output are one buffer: an in-place kernel that reads
blocks already written back through its output reads new values. The interpreters share
the buffer too but run the steps one at a time, without the pipeline's prefetch (and the
HLO interpreter on one core), so only some of these show as mismatches there; the static
``alias_hazard`` check names each. A manual double buffer that prefetches into the wrong
slot waits forever on the other slot's semaphore (TPU interpret mode's ``deadlock``).
"""

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
NB = 4  # blocks along the grid
_NO_CONFIG = st.just({})


def _blocks(config):
    return seeded_arrays([(NB * BM, BK)])


def _neighbour(i, n):
    return (i + 1) % n


# --- An aliased stencil: out[i] = x[i] + x[(i + 1) % n], in place --------------------


def _stencil_kernel(x_ref, nb_ref, o_ref):
    o_ref[...] = x_ref[...] + nb_ref[...]


def stencil_in_place(x, *, alias: int = 0):
    """``x[i] + x[(i + 1) % n]`` per 8-row block; the output overwrites input ``alias``.

    ``alias=0`` aliases the input read at block i (each step reads and writes its own
    block: correct); ``alias=1`` aliases the neighbour input, read at block (i + 1) % n
    after an earlier step wrote it back (the last step reads block 0).
    """
    n = x.shape[0] // BM
    return pl.pallas_call(
        _stencil_kernel,
        grid=(n,),
        in_specs=[
            pl.BlockSpec((BM, BK), lambda i: (i, 0)),
            pl.BlockSpec((BM, BK), lambda i: (_neighbour(i, n), 0)),
        ],
        out_specs=pl.BlockSpec((BM, BK), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        input_output_aliases={alias: 0},
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
    )(x, x)


def _stencil_ref(x):
    return x + jnp.roll(x, -BM, axis=0)


inplace_stencil_spec = KernelSpec(
    name="inplace_stencil", kernel=stencil_in_place, reference=_stencil_ref,
    configs=_NO_CONFIG, inputs=_blocks, features=("aliasing",),
)
aliased_stencil_spec = KernelSpec(
    name="aliased_stencil", kernel=functools.partial(stencil_in_place, alias=1), reference=_stencil_ref,
    configs=_NO_CONFIG, inputs=_blocks, features=("aliasing",),
)


# --- A forward shift in place: a hazard only when two cores split the grid ------------


def _double_kernel(x_ref, o_ref):
    o_ref[...] = 2 * x_ref[...]


def shift_in_place(x, *, semantics: str = "arbitrary"):
    """``2 * x[min(i + 1, n - 1)]`` per block, written over ``x``.

    In order on one core every block is read before the step that writes it back; with
    the axis "parallel", a second core runs the upper half and writes back the block the
    first core's last step still reads.
    """
    n = x.shape[0] // BM
    return pl.pallas_call(
        _double_kernel,
        grid=(n,),
        in_specs=[pl.BlockSpec((BM, BK), lambda i: (jnp.minimum(i + 1, n - 1), 0))],
        out_specs=pl.BlockSpec((BM, BK), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        input_output_aliases={0: 0},
        compiler_params=pltpu.CompilerParams(dimension_semantics=(semantics,)),
    )(x)


def _shift_ref(x):
    return 2 * jnp.concatenate([x[BM:], x[-BM:]], axis=0)


shift_in_order_spec = KernelSpec(
    name="shift_in_order", kernel=shift_in_place, reference=_shift_ref,
    configs=_NO_CONFIG, inputs=_blocks, features=("aliasing",),
)
shift_across_cores_spec = KernelSpec(
    name="shift_across_cores", kernel=functools.partial(shift_in_place, semantics="parallel"),
    reference=_shift_ref, configs=_NO_CONFIG, inputs=_blocks, features=("aliasing",),
)


# --- Accumulating in place over an "arbitrary" axis -----------------------------------


def _acc_kernel(acc_ref, x_ref, o_ref, *, k_axis: int):
    @pl.when(pl.program_id(k_axis) == 0)
    def _init():
        o_ref[...] = acc_ref[...]

    o_ref[...] += x_ref[...]


def accumulate_in_place(acc, x, *, k_outer: bool = False):
    """``acc + sum_j x[:, j-th 128 columns]`` per row block, written over ``acc``.

    With the reduction axis last the accumulator block stays put over consecutive steps
    (read once, written back once); with it first, each accumulator block is fetched
    again after its write-back.
    """
    m, k = x.shape
    rows, cols = m // BM, k // BK
    if k_outer:
        grid, row, col = (cols, rows), (lambda j, i: i), (lambda j, i: j)
    else:
        grid, row, col = (rows, cols), (lambda i, j: i), (lambda i, j: j)
    return pl.pallas_call(
        functools.partial(_acc_kernel, k_axis=0 if k_outer else 1),
        grid=grid,
        in_specs=[
            pl.BlockSpec((BM, BK), lambda *g: (row(*g), 0)),
            pl.BlockSpec((BM, BK), lambda *g: (row(*g), col(*g))),
        ],
        out_specs=pl.BlockSpec((BM, BK), lambda *g: (row(*g), 0)),
        out_shape=jax.ShapeDtypeStruct(acc.shape, acc.dtype),
        input_output_aliases={0: 0},
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary", "arbitrary")),
    )(acc, x)


def _acc_inputs(config):
    return seeded_arrays([(2 * BM, BK), (2 * BM, 2 * BK)])


def _acc_ref(acc, x):
    return acc + x.reshape(x.shape[0], -1, BK).sum(axis=1)


accumulate_in_place_spec = KernelSpec(
    name="accumulate_in_place", kernel=accumulate_in_place, reference=_acc_ref,
    configs=_NO_CONFIG, inputs=_acc_inputs, features=("aliasing", "accumulator"), bitwise_stable=False,
)
accumulate_k_outer_spec = KernelSpec(
    name="accumulate_k_outer", kernel=functools.partial(accumulate_in_place, k_outer=True),
    reference=_acc_ref, configs=_NO_CONFIG, inputs=_acc_inputs, features=("aliasing", "accumulator"),
    bitwise_stable=False,
)


# --- A manual double buffer ------------------------------------------------------------


def _double_buffer_kernel(x_hbm, o_ref, buf, sems, *, wrong_slot: bool):
    i, n = pl.program_id(0), pl.num_programs(0)
    slot = i % 2

    def copy(block, into):
        return pltpu.make_async_copy(x_hbm.at[pl.ds(block * BM, BM)], buf.at[into], sems.at[into])

    @pl.when(i == 0)
    def _first():
        copy(0, 0).start()

    @pl.when(i + 1 < n)
    def _prefetch():
        # The next block belongs in the other slot; the bug puts it into this one, so
        # the next step waits on a semaphore no copy signals.
        copy(i + 1, slot if wrong_slot else 1 - slot).start()

    copy(i, slot).wait()
    o_ref[...] = 2 * buf[slot]


def double_buffered_scale(x, *, wrong_slot: bool = False):
    """``2 * x`` through a two-slot VMEM buffer filled by manual DMAs one block ahead."""
    return pl.pallas_call(
        functools.partial(_double_buffer_kernel, wrong_slot=wrong_slot),
        grid=(x.shape[0] // BM,),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((BM, BK), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM((2, BM, BK), x.dtype), pltpu.SemaphoreType.DMA((2,))],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
    )(x)


double_buffer_spec = KernelSpec(
    name="double_buffered_scale", kernel=double_buffered_scale, reference=lambda x: 2 * x,
    configs=_NO_CONFIG, inputs=_blocks, features=("dma",),
)
double_buffer_deadlock_spec = KernelSpec(
    name="double_buffer_deadlock", kernel=functools.partial(double_buffered_scale, wrong_slot=True),
    reference=lambda x: 2 * x, configs=_NO_CONFIG, inputs=_blocks, features=("dma",),
)

MUTANTS = [
    Mutant(
        spec=aliased_stencil_spec,
        twin=inplace_stencil_spec,
        expects=("alias_hazard",),
        bug="the output overwrites the input read one block ahead, so the last step reads a block already written",
        verdicts={"interpret": ("mismatch",), "tpu_interpret": ("mismatch",), "static": ("alias_hazard",)},
    ),
    Mutant(
        spec=shift_across_cores_spec,
        twin=shift_in_order_spec,
        expects=("alias_hazard",),
        bug="an in-place shift reads the next block, which another core writes when the axis is 'parallel'",
        verdicts={"tpu_interpret": ("mismatch", "race"), "static": ("alias_hazard",)},
    ),
    Mutant(
        spec=accumulate_k_outer_spec,
        twin=accumulate_in_place_spec,
        expects=("alias_hazard", "revisit"),
        bug="the reduction axis comes first, so the aliased accumulator is fetched again after its write-back",
        verdicts={"tpu_interpret": ("mismatch",), "static": ("alias_hazard", "revisit")},
    ),
    Mutant(
        spec=double_buffer_deadlock_spec,
        twin=double_buffer_spec,
        expects=("deadlock", "timeout"),
        bug="the prefetch goes into the slot about to be read, so the other slot's semaphore is never signalled",
    ),
]
