"""KernelSpecs wrapping jax's persistent Mosaic GPU kernels: ``plgpu.kernel`` grids sized
by the SM count of the device (``core_count``), each block looping over output tiles.

- ``ops.gpu.hopper_matmul_mgpu``: a warp-specialized WGMMA matmul (3 warpgroups: two
  compute, one TMA producer) with an ``emit_pipeline_warp_specialized`` over K, an
  optional 2-CTA cluster sharing tiles by collective TMA, a tiled epilogue and an
  optional addend ``c``.
- ``ops.gpu.transposed_ragged_dot_mgpu``: ``lhs.T @ rhs`` per group of rows of K (the
  ragged dimension is the contraction: group boundaries fall inside 64-row blocks and
  are masked), one output matrix per group, empty groups skipped.

A CPU device has no SM count; pallas-verify supplies it (GPU interpret mode's mode key
``sm_count``, the target's count when compiling for ``mosaic_gpu:<gpu>``). WGMMA is a
Hopper instruction: Blackwell (sm_100a) has no WGMMA, so ``mosaic_gpu:b200`` is declared
unsupported with the compiler's measured error.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu, transposed_ragged_dot_mgpu

import pallas_verify as pv
from reference_kernels._draw import normal, seeded, without

__all__ = ["GPU_HOPPER_MATMUL_MGPU", "GPU_TRANSPOSED_RAGGED_DOT_MGPU"]

_DIM = hopper_matmul_mgpu.MatmulDimension
_SMEM_FOR_STAGES = 160 * 1024  # bytes of pipeline stages (the epilogue and barriers need the rest)
_NO_WGMMA = ("WGMMA is Hopper-only: ptxas rejects it for B200 (JaxRuntimeError: Mosaic GPU pass pipeline "
             "failed: ... Instruction 'wgmma.fence' not supported on .target 'sm_100a', jax 0.12.0.1)")
_SM90 = ("TMA copies need Hopper or newer (ValueError: copy_gmem_to_smem with a barrier is only supported "
         "Hopper and newer GPUs, which use the TMA implementation, jax 0.12.0.1)")
_NO_HLO = ("the HLO interpreter cannot run Mosaic GPU copies (NotImplementedError: No state discharge "
           "rule implemented for primitive: copy_gmem_to_smem, jax 0.12.0.1)")
_HLO_THREADS = ("the HLO interpreter cannot run plgpu.kernel with threads (NotImplementedError: "
                "run_scoped interpret rule does not support collective axes, jax 0.12.0.1)")


def hopper_matmul(a, b, *c, tile_n, tile_k, max_concurrent_steps, epilogue, wg_dimension, grid_minor_dim,
                  grid_tile_width, cluster_dimension):
    config = hopper_matmul_mgpu.TuningConfig(
        tile_m=64, tile_n=tile_n, tile_k=tile_k, max_concurrent_steps=max_concurrent_steps,
        epi_tile_m=64 if epilogue else None, epi_tile_n=64 if epilogue else None,
        wg_dimension=_DIM[wg_dimension], grid_minor_dim=_DIM[grid_minor_dim], grid_tile_width=grid_tile_width,
        cluster_dimension=None if cluster_dimension is None else _DIM[cluster_dimension])
    return hopper_matmul_mgpu.matmul(a, b, c[0] if c else None, config)


def hopper_matmul_reference(a, b, *c):
    out = jnp.dot(a, b, preferred_element_type=jnp.float32)
    return (out + c[0]).astype(c[0].dtype) if c else out.astype(a.dtype)


@st.composite
def _hopper_configs(draw):
    tile_n = draw(st.sampled_from([64, 128]))
    config = {
        "tile_n": tile_n, "tile_k": draw(st.sampled_from([64, 128])),
        "max_concurrent_steps": draw(st.integers(1, 3)),
        "epilogue": tile_n > 64 and draw(st.booleans()),  # 64-wide epilogue tiles in a wider tile
        "wg_dimension": draw(st.sampled_from(["N", "M"])),
        "grid_minor_dim": draw(st.sampled_from(["N", "M"])),
        "grid_tile_width": draw(st.integers(1, 2)),
        "cluster_dimension": draw(st.sampled_from([None, "M", "N"])),
        "dtype": draw(st.sampled_from(["float16", "bfloat16"])),
        "addend": draw(st.booleans()),
    }
    cta_m = 64 * (2 if config["wg_dimension"] == "M" else 1)
    cta_n = tile_n * (2 if config["wg_dimension"] == "N" else 1)
    # Every pipeline stage holds an A and a B tile in SMEM: keep the stages within an
    # H100's 227 KiB (Mosaic GPU rejects more: "kernel exceeds available shared memory",
    # which GPU interpret mode does not check).
    stage = 2 * config["tile_k"] * (cta_m + cta_n)
    config["max_concurrent_steps"] = min(config["max_concurrent_steps"], _SMEM_FOR_STAGES // stage)
    config["m"] = cta_m * (2 if config["cluster_dimension"] == "M" else 1) * draw(st.integers(1, 2))
    config["n"] = cta_n * (2 if config["cluster_dimension"] == "N" else 1) * draw(st.integers(1, 2))
    config["k"] = config["tile_k"] * draw(st.integers(1, 3))  # k blocks vs. pipeline slots
    return config


def _hopper_inputs(config):
    m, n, k, dtype = config["m"], config["n"], config["k"], np.dtype(jnp.dtype(config["dtype"]))

    def make(rng):
        a, b = normal(rng, (m, k), dtype), normal(rng, (k, n), dtype)
        return (a, b, normal(rng, (m, n), np.float32)) if config["addend"] else (a, b)

    return seeded(make)


_HOPPER_SIZES = ("m", "n", "k", "dtype", "addend")

GPU_HOPPER_MATMUL_MGPU = pv.KernelSpec(
    name="upstream_gpu_hopper_matmul_mgpu",
    kernel=without(hopper_matmul, *_HOPPER_SIZES),
    reference=without(hopper_matmul_reference, *_HOPPER_SIZES, "tile_n", "tile_k", "max_concurrent_steps",
                      "epilogue", "wg_dimension", "grid_minor_dim", "grid_tile_width", "cluster_dimension"),
    configs=_hopper_configs(),
    inputs=_hopper_inputs,
    platforms=("gpu",),
    features=("matmul", "tma", "wgmma", "warp_specialized", "cluster", "persistent", "plgpu_kernel", "upstream"),
    unsupported={"interpret": _HLO_THREADS, "mosaic_gpu:a100": _SM90,
                 "mosaic_gpu:b200": _NO_WGMMA},
    bitwise_stable=False,
)


_BLOCK = 64


def transposed_ragged_dot(lhs, rhs, group_sizes, *, max_concurrent_steps, grid_block_n):
    return transposed_ragged_dot_mgpu.transposed_ragged_dot(
        lhs, rhs, group_sizes=group_sizes, block_m=_BLOCK, block_n=_BLOCK, block_k=_BLOCK,
        max_concurrent_steps=max_concurrent_steps, grid_block_n=grid_block_n)


def transposed_ragged_dot_reference(lhs, rhs, group_sizes):
    out = transposed_ragged_dot_mgpu.ref_transposed_ragged_dot(lhs, rhs, group_sizes)
    return out.astype(lhs.dtype)


@st.composite
def _ragged_configs(draw):
    # K is ragged (group boundaries inside blocks, a partial last block) but a multiple
    # of 8: Mosaic GPU rejects a TMA dimension that is not a multiple of its 8-row tiling
    # ("dimension 0 must have size smaller or a multiple of its tiling 8"), a rule GPU
    # interpret mode does not check (it runs K = 1 or 100).
    return {"k": draw(st.sampled_from([_BLOCK, 8, 2 * _BLOCK + 8, 3 * _BLOCK - 8])),
            "m": _BLOCK * draw(st.integers(1, 2)), "n": _BLOCK * draw(st.integers(1, 2)),
            "groups": draw(st.integers(1, 3)), "dtype": draw(st.sampled_from(["float16", "bfloat16"])),
            "max_concurrent_steps": draw(st.integers(1, 3)), "grid_block_n": draw(st.integers(1, 2))}


def _ragged_inputs(config):
    k, m, n, groups = config["k"], config["m"], config["n"], config["groups"]
    dtype = np.dtype(jnp.dtype(config["dtype"]))

    def make(rng):
        # Group boundaries anywhere in K (inside blocks, empty groups included).
        sizes = rng.multinomial(k, np.ones(groups) / groups).astype(np.int32)
        return normal(rng, (k, m), dtype), normal(rng, (k, n), dtype), sizes

    return seeded(make)


_RAGGED_SIZES = ("k", "m", "n", "groups", "dtype")

GPU_TRANSPOSED_RAGGED_DOT_MGPU = pv.KernelSpec(
    name="upstream_gpu_transposed_ragged_dot_mgpu",
    kernel=without(transposed_ragged_dot, *_RAGGED_SIZES),
    reference=without(transposed_ragged_dot_reference, *_RAGGED_SIZES, "max_concurrent_steps", "grid_block_n"),
    configs=_ragged_configs(),
    inputs=_ragged_inputs,
    platforms=("gpu",),
    features=("matmul", "grouped", "ragged", "tma", "wgmma", "persistent", "plgpu_kernel", "upstream"),
    unsupported={"interpret": _NO_HLO, "mosaic_gpu:a100": _SM90,
                 "mosaic_gpu:b200": _NO_WGMMA},
    bitwise_stable=False,
)
