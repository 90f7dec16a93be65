"""Which metamorphic reruns a kernel needs: the facts its jaxpr shows (``_jax_compat.knobs``)
through the rerun table (``backends.tpu_reruns``)."""

from __future__ import annotations

import numpy as np
import pytest

from pallas_verify._jax_compat import KERNEL_FACTS, kernel_facts, tpu_target
from pallas_verify.backends import tpu_reruns
from reference_kernels import dma, elementwise, matmul

F32 = np.float32


def _kinds(spec, config, *shapes):
    kernel = spec.kernel
    with tpu_target():  # emit_pipeline traces only for a TPU device kind, as the backend runs it
        return tpu_reruns.kinds_of(kernel_facts(lambda *xs: kernel(*xs, **config), [np.zeros(s, F32) for s in shapes])[0])


@pytest.mark.parametrize(("rows", "cols", "semantics", "expected"), [
    (16, 256, ("arbitrary", "arbitrary"), set()),  # whole blocks, sequential grid: nothing to vary
    (16, 256, ("parallel", "arbitrary"), {"grid_order", "race"}),  # two row blocks: their order, two cores
    (8, 256, ("parallel", "arbitrary"), set()),  # a parallel axis of one step is no order
    (13, 256, ("arbitrary", "arbitrary"), {"uninitialized_read"}),  # the last row block overhangs
])
def test_a_tiled_add_needs_what_its_grid_and_blocks_allow(rows, cols, semantics, expected):
    config = {"block_rows": 8, "block_cols": 128, "dimension_semantics": semantics}
    assert _kinds(elementwise.RAGGED_ADD, config, (rows, cols), (rows, cols)) == expected


def test_scratch_and_dmas_are_seen_inside_the_kernel_body():
    config = {"rows": 16, "cols": 128, "chunk": 8}
    assert _kinds(dma.DOUBLE_BUFFER, config, (16, 128)) == {"dma_ordering", "uninitialized_read"}
    assert _kinds(dma.EMIT_PIPELINE_SCALE, config, (16, 128)) == {"dma_ordering", "uninitialized_read"}


def test_an_accumulator_in_scratch_needs_the_fill_rerun():
    config = {"bm": 8, "bn": 128, "bk": 128}
    assert "uninitialized_read" in _kinds(matmul.MATMUL_F32, config, (8, 256), (256, 128))


def test_a_kernel_that_cannot_be_read_keeps_every_rerun():
    def broken(x):
        raise RuntimeError("does not trace")

    assert kernel_facts(broken, [np.zeros(4, F32)])[0] == KERNEL_FACTS
    assert tpu_reruns.kinds_of(KERNEL_FACTS) == {e.kind for e in tpu_reruns.RERUNS}
