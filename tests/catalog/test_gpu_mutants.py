"""Each Mosaic GPU mutant's raw signal shows in GPU interpret mode; each correct twin is clean."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import find
from jax.experimental.pallas import mosaic_gpu as plgpu

from pallas_verify import _jax_compat
from pallas_verify.backends.execute import jitted
from pallas_verify.backends.interpreters import GpuInterpret
from pallas_verify.case import Case
from reference_kernels.mutants import gpu_mutants

MUTANTS = {m.name: m for m in gpu_mutants()}


def example(spec, **where):
    config = find(spec.configs, lambda c: all(c.get(k) == v for k, v in where.items()))
    return config, find(spec.inputs(config), lambda _: True)


def run(spec, config, inputs, **mode):
    """(outputs, races found) in GPU interpret mode, as gpu_interpret runs it."""
    case = Case(spec=spec, config=config, inputs=inputs, backend="gpu_interpret",
                mode={"detect_races": True, "on_race": "warn", "sm_count": 2, **mode})
    outcome = GpuInterpret().run(case)
    assert outcome.error is None, outcome.error
    return [np.asarray(o, np.float32) for o in outcome.outputs], outcome.races


def reference(spec, config, inputs):
    return [np.asarray(spec.reference(*inputs, **config), np.float32)]


def close(got, want, tol=1e-5):
    return all(np.allclose(g, w, rtol=tol, atol=tol) for g, w in zip(got, want, strict=True))


def test_gpu_mutants_cover_the_four_mosaic_gpu_bugs():
    assert set(MUTANTS) == {"skipped_barrier_wait", "slot_overwritten", "wgmma_read_before_wait", "tma_ragged_tail",
                            "no_auto_barriers_in_place"}
    assert all(m.spec.platforms == ("gpu",) for m in MUTANTS.values())


def test_skipped_barrier_wait_races():
    m = MUTANTS["skipped_barrier_wait"]
    config, inputs = example(m.spec)
    assert run(m.spec, config, inputs)[1]
    assert not run(m.twin, config, inputs)[1]


def test_slot_refilled_before_it_is_read_races_and_reads_the_next_tile():
    m = MUTANTS["slot_overwritten"]
    for depth in (1, 2):
        config, inputs = example(m.spec, max_concurrent_steps=depth)
        out, races = run(m.spec, config, inputs)
        assert races and not close(out, reference(m.spec, config, inputs)), depth
        out, races = run(m.twin, config, inputs)
        assert not races and close(out, reference(m.twin, config, inputs)), depth


def test_wgmma_read_before_wait_is_right_in_the_interpreter_but_found_in_program_order():
    m = MUTANTS["wgmma_read_before_wait"]
    config, inputs = example(m.spec)
    case = Case(spec=m.spec, config=config, inputs=inputs, backend="gpu_interpret")
    with plgpu.force_gpu_interpret_mode(plgpu.InterpretGPUParams()):
        assert close([np.asarray(jitted(case)(*inputs), np.float32)], reference(m.spec, config, inputs), 2e-2)
    outcome = GpuInterpret().run(Case(spec=m.spec, config=config, inputs=inputs, backend="gpu_interpret",
                                      mode={"sm_count": 2}))
    assert outcome.error.message.startswith(_jax_compat.ASYNC_ORDER_MARKER)
    assert "wait_n=None" in outcome.error.message and "mosaic_gpu.py:" in outcome.error.message
    assert _jax_compat.error_kind(outcome.error.message) == "dma_ordering"
    out, races = run(m.twin, config, inputs)
    assert not races and close(out, reference(m.twin, config, inputs), 2e-2)


@pytest.mark.parametrize("fill", ["nan", "zero"])
def test_tma_ragged_tail_is_zero_filled_and_unmasked(fill):
    m = MUTANTS["tma_ragged_tail"]
    config = {}
    inputs = find(m.spec.inputs(config), lambda x: x[0].shape[0] == 11)  # a 3-row tail in the second block
    out, _ = run(m.spec, config, inputs, uninitialized_memory=fill)
    assert (out[0][1] == 0).all()  # the zero-filled rows win every column of the tail block
    out, races = run(m.twin, config, inputs, uninitialized_memory=fill)
    assert not races and close(out, reference(m.twin, config, inputs))


def test_reading_and_writing_one_buffer_without_auto_barriers_is_a_race():
    m = MUTANTS["no_auto_barriers_in_place"]
    config, inputs = example(m.spec)
    outcome = GpuInterpret().run(Case(spec=m.spec, config=config, inputs=inputs, backend="gpu_interpret",
                                      mode={"sm_count": 2}))
    assert _jax_compat.error_kind(outcome.error.message) == "race"
    assert "unsafe_no_auto_barriers=True" in outcome.error.message
    out, races = run(m.twin, config, inputs)
    assert not races and close(out, reference(m.twin, config, inputs))
