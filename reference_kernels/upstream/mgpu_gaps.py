"""Plain-JAX reproducers of what GPU interpret mode cannot run yet (jax 0.12.0.1).

Each function runs a minimal ``plgpu.kernel`` under GPU interpret mode with nothing but
jax and numpy, and raises the interpreter's error; ``GAPS`` maps each to the error it
raises and the shipped Mosaic GPU kernels that hit it. ``tests/catalog/test_mgpu_gaps.py``
runs them: once one stops raising, JAX has closed the gap and the kernels it names can be
verified on ``gpu_interpret``. The kernels themselves are legal Mosaic GPU (each compiles
for H100 with the CUDA plugin).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

__all__ = ["GAPS", "Gap"]

_N = 64  # one 64 x 64 WGMMA tile


def _interpret(fn: Callable[..., jax.Array], *args: np.ndarray) -> np.ndarray:
    with plgpu.force_gpu_interpret_mode(plgpu.InterpretGPUParams()):
        return np.asarray(jax.jit(fn)(*args))


def semaphore_scratch() -> np.ndarray:
    """A REGULAR semaphore in ``scratch_types`` (all_gather_mgpu, reduce_scatter_mgpu).

    Raises ``NotImplementedError: nan + semaphore`` (uninitialized_memory="nan", the
    default; under "zero": ``AttributeError: ... 'AbstractSemaphoreTyRules' has no
    attribute 'full'``)."""
    def body(x_ref, o_ref, sem):
        pl.semaphore_signal(sem, 1)
        pl.semaphore_wait(sem, 1)
        o_ref[...] = x_ref[...]

    def fn(x):
        return plgpu.kernel(body, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
                            scratch_types=[plgpu.SemaphoreType.REGULAR])(x)

    return _interpret(fn, np.ones((128,), np.float32))


def _wgmma_kernel(lhs_from_registers: bool, run_state: bool) -> Callable[[jax.Array, jax.Array], jax.Array]:
    swizzle = plgpu.find_swizzle(_N * 16)
    transforms = (plgpu.TilingTransform((8, swizzle // 2)), plgpu.SwizzleTransform(swizzle))

    def body(a_gmem, b_gmem, o_gmem, a_smem, b_smem, o_smem, barrier):
        plgpu.copy_gmem_to_smem(a_gmem, a_smem, barrier)
        plgpu.barrier_wait(barrier)
        plgpu.copy_gmem_to_smem(b_gmem, b_smem, barrier)
        plgpu.barrier_wait(barrier)
        lhs = a_smem[...] if lhs_from_registers else a_smem

        def mma(acc_ref):
            plgpu.wgmma(acc_ref, lhs, b_smem)

        if run_state:
            acc = pl.run_state(mma)(plgpu.ACC.init(jnp.zeros((_N, _N), jnp.float32)))
        else:
            acc = pl.run_scoped(lambda acc_ref: (mma(acc_ref), plgpu.wgmma_wait(0), acc_ref[...])[2],
                                plgpu.ACC((_N, _N), jnp.float32))
        o_smem[...] = acc.astype(o_smem.dtype)
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(o_smem, o_gmem)
        plgpu.wait_smem_to_gmem(0)

    def fn(a, b):
        smem = plgpu.SMEM((_N, _N), jnp.float16, transforms=transforms)
        return plgpu.kernel(
            body, out_type=jax.ShapeDtypeStruct((_N, _N), jnp.float16),
            scratch_types=[smem, smem, plgpu.SMEM((_N, _N), jnp.float16), plgpu.Barrier(num_arrivals=1)],
            compiler_params=plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Warpgroup),
        )(a, b)

    return fn


def _tiles() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal((_N, _N)).astype(np.float16) for _ in range(2))


def wgmma_lhs_in_registers() -> np.ndarray:
    """``plgpu.wgmma(acc, lhs_value, rhs_smem)`` with the LHS an array in registers
    (hopper_mixed_type_matmul_mgpu converts int8 tiles in registers; attention_mgpu feeds
    the softmax probabilities). Raises ``ValueError: Expected shape (6,) but got (64, 64)``:
    the interpreter's wgmma takes both operands as SMEM allocations."""
    return _interpret(_wgmma_kernel(lhs_from_registers=True, run_state=False), *_tiles())


def wgmma_in_run_state() -> np.ndarray:
    """``pl.run_state(...)(plgpu.ACC.init(...))``, the accumulator of attention_mgpu: the
    interpreter discharges the state and binds ``wgmma`` outside the kernel. Raises
    ``NotImplementedError: MLIR translation rule for primitive 'wgmma' not found for
    platform cpu`` (attention_mgpu, which also feeds a register LHS to it, fails one step
    earlier: ``ValueError: Cannot lower jaxpr with effects: {..._WGMMAPipelineEffect...}``)."""
    return _interpret(_wgmma_kernel(lhs_from_registers=False, run_state=True), *_tiles())


def tcgen05_collective() -> np.ndarray:
    """A 2-CTA ``tcgen05_mma`` (``collective_axis``), through the shipped
    blackwell_ragged_dot_mgpu at its smallest config. Raises ``AssertionError:
    collective_axis not supported yet``. (Its ``collective=False`` configs cannot be traced
    at all: the kernel calls ``lax.axis_index("x")`` without a cluster axis "x", a
    NameError on any backend.) A CPU device has no SM count: the reproducer gives it one."""
    from jax.experimental.pallas.ops.gpu import blackwell_matmul_mgpu, blackwell_ragged_dot_mgpu

    cls = type(jax.devices()[0])
    cls.core_count = property(lambda device: 148)  # what a B200 reports
    try:
        config = blackwell_ragged_dot_mgpu.TuningConfig(
            tile_m=128, tile_n=64, tile_k=64, max_concurrent_steps=2, collective=True, grid_tile_width=1,
            grid_minor_dim=blackwell_matmul_mgpu.MatmulDimension.N, epilogue_tile_n=64)
        rng = np.random.default_rng(0)
        a = rng.standard_normal((256, 128)).astype(np.float16)
        b = rng.standard_normal((2, 128, 128)).astype(np.float16)
        return _interpret(lambda a, b, g: blackwell_ragged_dot_mgpu.ragged_dot_kernel(a, b, g, config),
                          a, b, np.array([100, 156], np.int32))
    finally:
        del cls.core_count


def inline_mgpu() -> np.ndarray:
    """``plgpu.inline_mgpu`` (blackwell_matmul_mgpu, blackwell_ragged_dot_mgpu). Raises
    ``ValueError: GPU interpret mode does not support `inline_mgpu```; with
    ``inline_mgpu="ignore"`` the call is skipped, so a kernel that relies on it is wrong."""
    @plgpu.inline_mgpu(arg_types=(plgpu.RefType(),), return_type=None)
    def touch(ctx, ref):
        del ctx, ref

    def body(x_ref, o_ref):
        touch(x_ref)
        o_ref[...] = x_ref[...]

    def fn(x):
        return plgpu.kernel(body, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    return _interpret(fn, np.ones((128,), np.float32))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Gap:
    """What GPU interpret mode cannot run: a reproducer, the error it raises (type and a
    fragment of the message), and the shipped kernels it keeps off ``gpu_interpret``."""

    reproduce: Callable[[], np.ndarray]
    error: str
    message: str
    kernels: tuple[str, ...]


GAPS: dict[str, Gap] = {
    "semaphore_scratch": Gap(reproduce=semaphore_scratch, error="NotImplementedError", message="nan + semaphore",
                             kernels=("gpu.all_gather_mgpu", "gpu.reduce_scatter_mgpu")),
    "wgmma_lhs_in_registers": Gap(reproduce=wgmma_lhs_in_registers, error="ValueError",
                                  message="Expected shape (6,) but got (64, 64)",
                                  kernels=("gpu.hopper_mixed_type_matmul_mgpu", "gpu.attention_mgpu")),
    "wgmma_in_run_state": Gap(reproduce=wgmma_in_run_state, error="NotImplementedError",
                              message="MLIR translation rule for primitive 'wgmma' not found",
                              kernels=("gpu.attention_mgpu",)),
    "tcgen05_collective": Gap(reproduce=tcgen05_collective, error="AssertionError",
                              message="collective_axis not supported yet",
                              kernels=("gpu.blackwell_ragged_dot_mgpu",)),
    "inline_mgpu": Gap(reproduce=inline_mgpu, error="ValueError", message="does not support `inline_mgpu`",
                       kernels=("gpu.blackwell_matmul_mgpu",)),
}
