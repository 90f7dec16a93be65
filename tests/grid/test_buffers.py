"""Race, semaphore, deadlock and out-of-bounds messages name the kernel's own buffers,
elements, grid points and source lines (not TPU interpret mode's buffer numbers)."""

from __future__ import annotations

import re

import pytest
from hypothesis import find

from pallas_verify.backends.interpreters import TpuInterpret
from pallas_verify.case import Case
from reference_kernels.mutants import mutants

MUTANTS = {m.name: m for m in mutants()}
RACY = {"detect_races": True, "num_cores_or_threads": 2, "dma_execution_mode": "eager"}


def outcome(name: str, **mode):
    spec = MUTANTS[name].spec
    config = find(spec.configs, lambda _: True)
    inputs = find(spec.inputs(config), lambda _: True)
    return TpuInterpret().run(Case(spec=spec, config=config, inputs=inputs, backend="tpu_interpret",
                                   mode=mode, transform=None))


def test_a_dma_race_names_the_scratch_buffer_and_the_kernel_lines_of_both_accesses():
    text = outcome("read_before_wait", **RACY).diagnostics
    lines = text.splitlines()
    assert lines[0] == "RACE DETECTED on buf (scratch 0 of _scale_kernel, VMEM float32[8, 128]), all of it:"
    assert re.fullmatch(r"  read by core 0 at .*mutants/dma\.py:31 \(_scale_kernel\): o_ref\[\.\.\.\] = buf\[\.\.\.\] \* 3",
                        lines[1]), lines[1]
    assert re.fullmatch(r"  write by DMA 1\d\d at .*mutants/dma\.py:29 \(_scale_kernel\): copy\.start\(\)", lines[2])
    assert lines[3] == "(1 more race like these, by other DMAs or at other steps)"  # one per grid step
    assert "clock" not in text and "'vmem', 103" not in text


def test_a_race_between_cores_names_the_output_block_and_the_grid_points_writing_it():
    text = outcome("acc_across_parallel", **RACY).diagnostics
    assert text.splitlines()[0] == (
        "RACE DETECTED on o_ref (output 0 of _row_sum_kernel, the whole array in HBM), elements [0:8, 0:128] = "
        "block (0, 0), which the out_specs index_map gives at grid points (0, j) for j in 0..3:")
    assert "write by core 1 (the pipeline writing an output block back to HBM after a grid step)" in text


def test_a_leaked_semaphore_is_named_with_what_its_count_means():
    [leak] = [line for line in outcome("never_wait", **RACY).diagnostics.splitlines() if "non-zero" in line]
    assert leak == ("Semaphore sem (scratch 0 of _hbm_copy_kernel, a DMA semaphore) has non-zero count for core 0 "
                    "at kernel exit: 8192 (bytes of DMAs never waited on); every signal and DMA needs its wait")


@pytest.mark.parametrize(("name", "words"), [
    ("deadlock_semaphore", "core 0 waits on semaphore sem (scratch 0 of _handshake_kernel, a semaphore) for 1"),
    ("shifted_window_oob", "Out-of-bounds read of x_ref (input 0 of _neighbour_kernel, its VMEM block buffer)"),
])
def test_deadlock_and_out_of_bounds_errors_name_the_semaphore_or_buffer(name, words):
    error = outcome(name, out_of_bounds_reads="raise").error
    assert words in error.message
