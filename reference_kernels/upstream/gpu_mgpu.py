"""KernelSpec wrapping jax's Mosaic GPU grouped matmul (``ops.gpu.ragged_dot_mgpu``): a
``plgpu.kernel`` over 132 SMs with TMA copies, a WGMMA pipeline and ragged groups (rows
of ``lhs`` split into consecutive groups, each multiplied by its own ``rhs``), with
``rhs`` plain or transposed, groups that are empty, smaller than a block or straddle
block boundaries.

The reference is ``jax.lax.ragged_dot``, XLA's own grouped matmul.

The ``*_mgpu`` modules import ``absl`` (through ``jax._src.test_util``), hence the
``absl-py`` dependency. The other Mosaic GPU kernels in ``ops.gpu`` are not wrapped:
``reference_kernels.upstream.NOT_WRAPPED`` gives each one's measured reason.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental.pallas.ops.gpu import ragged_dot_mgpu

import pallas_verify as pv
from reference_kernels._draw import normal, seeded, without

__all__ = ["GPU_RAGGED_DOT_MGPU"]

_BLOCK = 64


def ragged_dot(lhs, rhs, group_sizes, *, transpose_rhs, block_n):
    return ragged_dot_mgpu.ragged_dot(
        lhs, rhs, group_sizes=group_sizes, block_m=_BLOCK, block_n=block_n, block_k=_BLOCK,
        max_concurrent_steps=2, grid_block_n=1, transpose_rhs=transpose_rhs)


def ragged_dot_reference(lhs, rhs, group_sizes, *, transpose_rhs):
    rhs = jnp.swapaxes(rhs, 1, 2) if transpose_rhs else rhs
    return jax.lax.ragged_dot(lhs, rhs, group_sizes, preferred_element_type=jnp.float32).astype(lhs.dtype)


@st.composite
def _configs(draw):
    return {"m": _BLOCK * draw(st.integers(1, 2)), "k": _BLOCK * draw(st.integers(1, 2)),
            "n": _BLOCK * draw(st.integers(1, 2)), "groups": draw(st.integers(1, 3)),
            "dtype": draw(st.sampled_from(["float16", "bfloat16"])),
            "transpose_rhs": draw(st.booleans()), "block_n": _BLOCK}


def _inputs(config):
    m, k, n, groups = config["m"], config["k"], config["n"], config["groups"]
    dtype = jnp.dtype(config["dtype"])
    rhs_shape = (groups, n, k) if config["transpose_rhs"] else (groups, k, n)

    def make(rng):
        # Ragged group sizes summing to m (some may be empty).
        sizes = rng.multinomial(m, np.ones(groups) / groups).astype(np.int32)
        return normal(rng, (m, k), dtype), normal(rng, rhs_shape, dtype), sizes

    return seeded(make)


_SIZES = ("m", "k", "n", "groups", "dtype")

GPU_RAGGED_DOT_MGPU = pv.KernelSpec(
    name="upstream_gpu_ragged_dot_mgpu",
    kernel=without(ragged_dot, *_SIZES),
    reference=without(ragged_dot_reference, *_SIZES, "block_n"),
    configs=_configs(),
    inputs=_inputs,
    platforms=("gpu",),
    features=("matmul", "grouped", "ragged", "tma", "wgmma", "plgpu_kernel", "upstream"),
    unsupported={"interpret": "the HLO interpreter cannot run Mosaic GPU copies (NotImplementedError: "
                 "No state discharge rule implemented for primitive: copy_gmem_to_smem, jax 0.12.0.1)",
                 "mosaic_gpu:a100": "the kernel is written for Hopper (TMA, WGMMA, async-proxy fences): "
                 "compiled for A100 the Mosaic GPU compiler aborts the process in LLVM (LLVM ERROR: Cannot "
                 "select: intrinsic %llvm.nvvm.fence.proxy.async.shared_cta, jax 0.12.0.1)",
                 "mosaic_gpu:b200": "WGMMA is Hopper-only: ptxas rejects it for B200 (JaxRuntimeError: Mosaic GPU "
                 "pass pipeline failed: ... Instruction 'wgmma.fence' not supported on .target 'sm_100a', "
                 "jax 0.12.0.1)"},
    bitwise_stable=False,
)
