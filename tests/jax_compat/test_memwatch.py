"""What a TPU interpret mode run's memory says of its reruns (``_jax_compat.memwatch``).

Each kernel here is run by the backend in one mode and then, where the watch says a
knob cannot change its outputs, in the other modes too: the outputs must agree bitwise
there (the watch is right to skip the rerun), and must not where it keeps the rerun for
a dependence it saw.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from pallas_verify._jax_compat import MemoryPlan
from pallas_verify._jax_compat.memwatch import MemoryWatch
from pallas_verify.backends.interpreters import TpuInterpret
from pallas_verify.backends.tpu_reruns import settle
from pallas_verify.case import Case
from pallas_verify.spec import KernelSpec

FILL, GRID_ORDER, RACE = "uninitialized_read", "grid_order", "race"


def settled(kinds, watch):
    """The rerun table's settling, given a watch (or None) as TpuInterpret.run gives it."""
    return settle(kinds, None if watch is None else watch.saw())


F32 = np.float32
BM, BN = 8, 128
MODES = [{"num_cores_or_threads": c, "random_seed": s, "uninitialized_memory": f}
         for c, s, f in ((1, 0, "nan"), (1, 7, "zero"), (2, 3, "nan"), (2, 11, "zero"))]


def _rows(kernel, *, rows=4, scratch=(), semantics=("parallel", "arbitrary"), k_steps=2, aliases=None,
          in_rows=None, out_block=None):
    """A pallas_call over (row blocks, k steps) of a (rows*8, k_steps*128) input."""

    def call(x):
        m = x.shape[0]
        return pl.pallas_call(
            kernel,
            grid=(pl.cdiv(m, BM), k_steps),
            in_specs=[pl.BlockSpec((BM, BN), lambda i, k: (i, k))],
            out_specs=pl.BlockSpec(out_block or (BM, BN), lambda i, k: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((m, BN), x.dtype),
            scratch_shapes=list(scratch),
            input_output_aliases=aliases or {},
            compiler_params=pltpu.CompilerParams(dimension_semantics=semantics),
        )(x)

    return call, (np.arange((in_rows or rows * BM) * k_steps * BN, dtype=F32).reshape(-1, k_steps * BN) % 17,)


@functools.cache
def _spec(fn):
    """One spec per kernel function: a run in a mode already run reuses its compile."""
    return KernelSpec(name="watched", kernel=fn, reference=fn, configs=st.just({}),
                      inputs=lambda _: st.nothing())


def _run(fn, inputs, mode):
    spec = _spec(fn)
    outcome = TpuInterpret().run(Case(spec=spec, config={}, inputs=inputs, backend="tpu_interpret",
                                      mode={"detect_races": False, **mode}))
    assert outcome.ok, outcome.error
    return outcome


def _agree(fn, inputs) -> bool:
    outs = [_run(fn, inputs, mode).outputs for mode in MODES]
    return all(np.array_equal(o[0], outs[0][0], equal_nan=True) for o in outs)


def _sum_kernel(x_ref, o_ref, acc_ref, *, init=True):
    k = pl.program_id(1)
    if init:
        @pl.when(k == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += x_ref[...]

    @pl.when(k == pl.num_programs(1) - 1)
    def _():
        o_ref[...] = acc_ref[...]


def test_an_accumulator_initialized_each_sweep_settles_every_rerun_and_no_mode_changes_it():
    fn, inputs = _rows(_sum_kernel, scratch=[pltpu.VMEM((BM, BN), jnp.float32)])
    for mode in MODES:
        outcome = _run(fn, inputs, mode)
        assert outcome.reruns == frozenset(), mode
        assert set(outcome.settled) == {FILL, GRID_ORDER, RACE}, mode
    assert _agree(fn, inputs)


def test_an_accumulator_never_initialized_keeps_the_fill_and_order_reruns():
    fn, inputs = _rows(functools.partial(_sum_kernel, init=False), scratch=[pltpu.VMEM((BM, BN), jnp.float32)])
    one_core = _run(fn, inputs, MODES[0])
    assert {FILL, GRID_ORDER, RACE} <= one_core.reruns and not one_core.settled  # sweep 2 reads sweep 1's sum
    assert not _agree(fn, inputs)


def test_scratch_carried_from_one_parallel_sweep_to_the_next_keeps_the_order_rerun():
    def carry(x_ref, o_ref, acc_ref):
        @pl.when((pl.program_id(0) == 0) & (pl.program_id(1) == 0))
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += x_ref[...]  # a running sum over every row block: depends on their order
        o_ref[...] = acc_ref[...]

    fn, inputs = _rows(carry, scratch=[pltpu.VMEM((BM, BN), jnp.float32)], k_steps=1)
    outcome = _run(fn, inputs, MODES[1])
    assert GRID_ORDER in outcome.reruns and RACE in outcome.reruns
    assert not _agree(fn, inputs)


def test_an_output_block_two_sweeps_write_before_it_is_copied_out_keeps_the_order_rerun():
    """Every row block writes output block 0 and none reads it: the last sweep's write is the
    one copied out, the others are lost before they reach HBM (no read, no HBM overwrite)."""

    def last_wins(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def call(x):
        return pl.pallas_call(
            last_wins, grid=(x.shape[0] // BM,),
            in_specs=[pl.BlockSpec((BM, BN), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((BM, BN), lambda i: (0, 0)),
            out_shape=jax.ShapeDtypeStruct((BM, BN), x.dtype),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
        )(x)

    x = (np.arange(4 * BM * BN, dtype=F32).reshape(4 * BM, BN) % 13,)
    outcome = _run(call, x, MODES[0])
    assert GRID_ORDER in outcome.reruns and RACE in outcome.reruns
    assert not _agree(call, x)


def test_an_output_block_left_half_unwritten_adds_the_fill_rerun_the_jaxpr_did_not_show():
    def half(x_ref, o_ref):
        o_ref[: BM // 2, :] = x_ref[: BM // 2, :]

    fn, inputs = _rows(half, k_steps=1)
    outcome = _run(fn, inputs, MODES[0])
    assert FILL in outcome.reruns  # no scratch, no padding: the jaxpr alone keeps no fill rerun
    assert not _agree(fn, inputs)


def test_a_block_overhanging_its_array_keeps_the_fill_rerun():
    def copy(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    fn, inputs = _rows(copy, k_steps=1, in_rows=3 * BM + 5)  # the last row block overhangs
    outcome = _run(fn, inputs, MODES[0])
    assert FILL in outcome.reruns
    assert set(outcome.settled) == {GRID_ORDER, RACE}


def test_an_in_place_kernel_on_its_own_blocks_settles_but_one_reading_its_neighbour_does_not():
    def scale(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    fn, inputs = _rows(scale, k_steps=1, aliases={0: 0})
    outcome = _run(fn, inputs, MODES[0])
    assert outcome.reruns == frozenset() and {GRID_ORDER, RACE} <= set(outcome.settled)

    def stencil(x_ref, o_ref):  # the whole aliased input, copied in while other sweeps write theirs back
        i = pl.program_id(0)
        nxt = jnp.minimum(i + 1, pl.num_programs(0) - 1)
        o_ref[...] = x_ref[pl.ds(nxt * BM, BM), :] + 1

    def call(x):
        return pl.pallas_call(
            stencil, grid=(x.shape[0] // BM,),
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
            out_specs=pl.BlockSpec((BM, BN), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), input_output_aliases={0: 0},
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
        )(x)

    x = (np.arange(4 * BM * BN, dtype=F32).reshape(4 * BM, BN) % 13,)
    outcome = _run(call, x, MODES[0])
    assert GRID_ORDER in outcome.reruns


def test_a_kernel_with_dmas_is_not_watched_and_keeps_its_reruns():
    from reference_kernels.dma import DOUBLE_BUFFER

    config = {"rows": 16, "cols": 128, "chunk": 8}
    x = (np.ones((16, 128), F32),)
    outcome = TpuInterpret().run(Case(spec=DOUBLE_BUFFER, config=config, inputs=x, backend="tpu_interpret",
                                      mode={"detect_races": False}))
    assert outcome.ok and outcome.settled == () and {"dma_ordering", FILL} <= outcome.reruns


def test_a_watch_that_broke_settles_nothing():
    watch = MemoryWatch(MemoryPlan(input_shapes=((8, 128),), num_index_operands=0, parallel=(True,)))
    assert settled(frozenset({FILL, GRID_ORDER, RACE}), watch) == (frozenset(), frozenset({FILL, GRID_ORDER, RACE}))
    watch.broken = True
    assert settled(frozenset({FILL, GRID_ORDER, RACE}), watch) == (frozenset({FILL, GRID_ORDER, RACE}), frozenset())
    assert settled(frozenset({GRID_ORDER}), None) == (frozenset({GRID_ORDER}), frozenset())


@pytest.mark.parametrize("name", ["missing_acc_init", "acc_across_parallel"])
def test_the_planted_order_and_fill_bugs_keep_their_reruns_in_every_base_mode(name):
    from pallas_verify.causes import simplest
    from reference_kernels.mutants import mutants

    mutant = {m.name: m for m in mutants()}[name]
    config = simplest(mutant.spec.configs)
    inputs = tuple(simplest(mutant.spec.inputs(config)))
    for mode in MODES:
        outcome = TpuInterpret().run(Case(spec=mutant.spec, config=config, inputs=inputs, backend="tpu_interpret",
                                          mode={"detect_races": False, **mode}))
        assert outcome.reruns & {FILL, GRID_ORDER}, mode


def _faithful(case):
    """``case`` run with every knob compiled in (no run-time knobs, no watch)."""
    from pallas_verify import _jax_compat
    from pallas_verify.backends import schedule
    from pallas_verify.backends.execute import execute

    params = _jax_compat.tpu_run_params(case.mode, recorder=schedule.RECORDER)
    with _jax_compat.tpu_target(), _jax_compat.deadlock_watch():
        return execute(case, params)


@pytest.mark.parametrize("name", ["ragged_add", "double_buffer", "run_scoped_copy", "tile_padding_leak",
                                  "unmasked_ragged_reduction", "missing_acc_init", "read_before_wait",
                                  "write_dma_dest_in_flight", "upstream_tpu_gmm"])
def test_knobs_applied_at_run_time_give_the_bits_they_give_compiled_in(name):
    """The fill, the DMA timing and race detection are applied to a run compiled with their
    defaults (so reruns that change only them reuse the compile): the outcome must be the
    one TPU interpret mode gives with them compiled in, bit for bit, NaNs, races and all."""
    from hypothesis import given, settings
    from hypothesis import strategies as hst

    from benchmarks.clean_pass import CATALOG, UPSTREAM
    from reference_kernels.mutants import mutants

    specs = {m.spec.name: m.spec for m in mutants()}
    for module, attr in CATALOG + UPSTREAM:
        spec = getattr(__import__(module, fromlist=[attr]), attr)
        specs[spec.name] = spec
    spec = specs[name]
    examples = []

    @settings(max_examples=2, database=None, derandomize=True)
    @given(hst.data())
    def draw(data):
        config = data.draw(spec.configs)
        examples.append((config, tuple(data.draw(spec.inputs(config)))))

    draw()
    for (config, inputs), (fill, dma, races) in zip(examples * 2, [("zero", "eager", False), ("zero", "on_wait", True),
                                                                   ("nan", "eager", True), ("zero", "eager", True)],
                                                     strict=False):
        case = Case(spec=spec, config=config, inputs=inputs, backend="tpu_interpret",
                    mode={"uninitialized_memory": fill, "dma_execution_mode": dma, "detect_races": races})
        ours, theirs = TpuInterpret().run(case), _faithful(case)
        assert (ours.error is None, ours.races) == (theirs.error is None, theirs.races), (config, case.mode)
        if ours.outputs is not None:
            for a, b in zip(ours.outputs, theirs.outputs, strict=True):
                assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), (config, case.mode)


def test_several_devices_sharing_one_memory_are_not_followed_and_never_refilled():
    """Devices share one interpreter memory and the grid-point recorder does not name the
    device: a watch of such a run settles nothing and leaves the fill as compiled (a kernel
    over shard_map has no plan; at run time, a memory of several devices breaks the watch)."""
    from jax.sharding import Mesh, PartitionSpec

    from pallas_verify._jax_compat import kernel_facts

    def copy(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def sharded(x):
        call = pl.pallas_call(copy, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))
        mesh = Mesh(np.array(jax.devices()[:1]), ("d",))
        return jax.shard_map(call, mesh=mesh, in_specs=PartitionSpec("d"), out_specs=PartitionSpec("d"))(x)

    assert kernel_facts(sharded, [jax.ShapeDtypeStruct((8, 128), jnp.float32)])[1] is None
    watch = MemoryWatch(MemoryPlan(input_shapes=((8, 128),), num_index_operands=0, parallel=(False,)),
                        fill_value="zero")
    watch.new_call(num_devices=2)
    content = np.full((8, 128), np.nan, np.float32)
    watch.allocated(("hbm", 100, 1, 0), content, (8, 128))  # device 1's input, counted as the first of none
    assert watch.broken and np.isnan(content).all()
    assert settled(frozenset({FILL, GRID_ORDER}), watch) == (frozenset({FILL, GRID_ORDER}), frozenset())
