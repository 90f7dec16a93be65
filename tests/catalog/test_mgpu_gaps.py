"""What GPU interpret mode cannot run yet, reproduced with plain JAX; the shipped Mosaic GPU
kernels it keeps off ``gpu_interpret`` say so with the reproducer's name; and two upstream
kernel bugs the wrappers steer around, pinned."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallas_verify import _jax_compat
from reference_kernels.upstream import NOT_WRAPPED, gpu_mgpu_compiled, mgpu_gaps, specs_of_module


def _reset() -> None:
    _jax_compat.reset_interpreters()


# The failure of a 2-CTA tcgen05 MMA is raised inside one warp's thread; GPU interpret
# mode then sometimes waits forever on the others, before it reports anything (measured:
# about one run in four hangs, jax 0.12.0.1). Its reproducer runs in a child process with
# a time limit: the gap is still open when the child fails with the gap's error, or hangs.
# A failing run takes 2.5 to 3 s (6 s with both cores busy); a hang never writes a line, so
# the limit is all a hang costs (twice the slowest failing run).
IN_CHILD = {"tcgen05_collective"}
HANG_S = 12


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(IN_CHILD))
def test_gap_still_fails_in_a_child_process(name):
    gap = mgpu_gaps.GAPS[name]
    code = f"from reference_kernels.upstream import mgpu_gaps; mgpu_gaps.GAPS[{name!r}].reproduce()"
    try:
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S,
                             env={**os.environ, "JAX_PLATFORMS": "cpu"}, cwd=Path(__file__).parents[2])
    except subprocess.TimeoutExpired:
        return  # hung on the failure: still open
    assert run.returncode != 0, "the reproducer ran: JAX closed the gap, move its kernels to gpu_interpret"
    assert f"{gap.error}: {gap.message}" in run.stdout + run.stderr, (run.stdout + run.stderr)[-2000:]


@pytest.mark.parametrize("name", sorted(set(mgpu_gaps.GAPS) - IN_CHILD))
def test_gap_still_fails_in_gpu_interpret_mode(name):
    gap = mgpu_gaps.GAPS[name]
    try:
        with pytest.raises(Exception) as failure:  # noqa: PT011  (checked against the gap below)
            gap.reproduce()
    finally:
        _reset()
    text = f"{failure.type.__name__}: {failure.value}"
    assert gap.error in text and gap.message in text, text[-800:]


def test_every_kernel_a_gap_names_is_declared_unsupported_on_gpu_interpret_or_not_wrapped():
    specs = {s.name.removeprefix("upstream_gpu_"): s for s in specs_of_module("gpu_mgpu_compiled")}
    for name, gap in mgpu_gaps.GAPS.items():
        for kernel in gap.kernels:
            module = kernel.removeprefix("gpu.")
            if module in NOT_WRAPPED or kernel in NOT_WRAPPED:
                assert f"mgpu_gaps.{name}" in NOT_WRAPPED[kernel]
                continue
            reason = specs[module].unsupported_reason("gpu_interpret")
            assert reason is not None, kernel
            assert "mgpu_gaps." in reason
    semaphores = [k for k, why in NOT_WRAPPED.items() if "mgpu_gaps.semaphore_scratch" in why]
    assert sorted(semaphores) == ["gpu.all_gather_mgpu", "gpu.reduce_scatter_mgpu"]


def test_attention_mgpu_accepts_bfloat16_but_cannot_trace_it():
    from jax.experimental.pallas.ops.gpu import attention_mgpu

    config = attention_mgpu.TuningConfig(block_q=64, block_kv=64, max_concurrent_steps=2)
    q = jax.ShapeDtypeStruct((1, 128, 1, 64), jnp.bfloat16)
    with pytest.raises(ValueError, match="src had type bfloat16 and dst had type float16"):
        jax.eval_shape(lambda q, k, v: attention_mgpu.attention(q, k, v, config), q, q, q)
    f16 = jax.ShapeDtypeStruct((1, 128, 1, 64), jnp.float16)
    assert jax.eval_shape(lambda q, k, v: attention_mgpu.attention(q, k, v, config), f16, f16, f16).shape == f16.shape
    assert "bfloat16 call fails while it is traced" in gpu_mgpu_compiled.__doc__


def test_blackwell_ragged_dot_cannot_trace_without_its_cluster():
    from jax.experimental.pallas.ops.gpu import blackwell_matmul_mgpu, blackwell_ragged_dot_mgpu

    def call(collective):
        config = blackwell_ragged_dot_mgpu.TuningConfig(
            tile_m=128, tile_n=64, tile_k=64, max_concurrent_steps=2, collective=collective, grid_tile_width=1,
            grid_minor_dim=blackwell_matmul_mgpu.MatmulDimension.N, epilogue_tile_n=64)
        args = (jax.ShapeDtypeStruct((256, 128), jnp.float16), jax.ShapeDtypeStruct((2, 128, 128), jnp.float16),
                jax.ShapeDtypeStruct((2,), np.int32))
        with _jax_compat.gpu_device_facts(core_count=148):
            return jax.eval_shape(lambda a, b, g: blackwell_ragged_dot_mgpu.ragged_dot_kernel(a, b, g, config), *args)

    assert call(collective=True).shape == (256, 128)
    with pytest.raises(NameError, match="unbound axis name: x"):
        call(collective=False)
