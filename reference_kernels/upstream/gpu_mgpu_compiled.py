"""KernelSpecs wrapping jax's Mosaic GPU kernels that GPU interpret mode cannot run yet
(jax 0.12.0.1), so that they are checked where they can be: compiled for their GPU.

- ``ops.gpu.hopper_mixed_type_matmul_mgpu``: int8 x bf16/f16 matmul, the int8 tile
  converted in registers and fed to WGMMA as its LHS (H100).
- ``ops.gpu.attention_mgpu``: flash attention with WGMMA, a schedule barrier between two
  compute warpgroups and a TMA producer (H100). Known upstream bug (jax 0.12.0.1): it
  accepts bfloat16 ("Only f16 and bf16 are supported") but allocates its SMEM buffers as
  float16, so every bfloat16 call fails while it is traced (ValueError: Expected dtypes to
  match but src had type bfloat16 and dst had type float16); the spec draws float16 and
  ``tests/catalog/test_mgpu_gaps.py`` pins the bug. With ``causal=True`` it assumes as
  many keys as queries, which it does not check: each query block's KV loop runs to
  ``cdiv(q_block_end, block_kv)`` steps, past a shorter key sequence. Measured on an H200
  (jax 0.11.2, 256 queries, 64 keys): one row of 256 is off by up to 0.5%, the same on
  every run. The spec draws causal configs with equal lengths.
- ``ops.gpu.blackwell_matmul_mgpu``: tcgen05 MMA into tensor memory, 1- or 2-CTA (B200).
- ``ops.gpu.blackwell_ragged_dot_mgpu``: grouped matmul on tcgen05, 2-CTA (B200). Its
  ``collective=False`` configs cannot be traced on any backend (the kernel calls
  ``lax.axis_index("x")`` without a cluster axis "x": NameError), so the spec draws
  ``collective=True`` only.

Why each interpreter cannot run them is declared per backend and comes from
``reference_kernels.upstream.mgpu_gaps``, whose plain-JAX reproducers
``tests/catalog/test_mgpu_gaps.py`` keeps honest: when one stops failing, the kernels it
names can move to ``gpu_interpret``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental.pallas.ops.gpu import (
    attention_mgpu,
    blackwell_matmul_mgpu,
    blackwell_ragged_dot_mgpu,
    hopper_mixed_type_matmul_mgpu,
)

import pallas_verify as pv
from reference_kernels._draw import normal, seeded, without

__all__ = ["GPU_ATTENTION_MGPU", "GPU_BLACKWELL_MATMUL_MGPU", "GPU_BLACKWELL_RAGGED_DOT_MGPU",
           "GPU_HOPPER_MIXED_TYPE_MATMUL_MGPU"]

_GAPS = "(jax 0.12.0.1; plain-JAX reproducer: reference_kernels.upstream.mgpu_gaps.{})"
_THREADS = ("the HLO interpreter cannot run plgpu.kernel with threads (NotImplementedError: run_scoped "
            "interpret rule does not support collective axes, jax 0.12.0.1)")
_SM90 = ("TMA copies need Hopper or newer (ValueError: copy_gmem_to_smem with a barrier is only supported "
         "Hopper and newer GPUs, which use the TMA implementation, jax 0.12.0.1)")
_HOPPER_ON_B200 = ("WGMMA is Hopper-only: compiling it for B200 aborts the compiler (LLVM ERROR: Cannot select: "
                   "intrinsic %llvm.nvvm.wgmma.fence.sync.aligned, jax 0.12.0.1)")
_TCGEN05 = ("tcgen05 and tensor memory are Blackwell-only: compiling them for H100 aborts the compiler (LLVM "
            "ERROR: Cannot select: intrinsic %llvm.nvvm.tcgen05.fence.after.thread.sync, jax 0.12.0.1)")


def _hopper(gap: str, reason: str) -> dict[str, str]:
    return {"interpret": _THREADS, "gpu_interpret": f"{reason} {_GAPS.format(gap)}",
            "mosaic_gpu:a100": _SM90, "mosaic_gpu:b200": _HOPPER_ON_B200}


def _blackwell(gap: str, reason: str) -> dict[str, str]:
    return {"interpret": _THREADS, "gpu_interpret": f"{reason} {_GAPS.format(gap)}",
            "mosaic_gpu:a100": _SM90, "mosaic_gpu:h100": _TCGEN05}


# --- hopper_mixed_type_matmul_mgpu ----------------------------------------------------


def mixed_matmul(a, b, *, tile_n, max_concurrent_steps, wg_dimension):
    config = hopper_mixed_type_matmul_mgpu.TuningConfig(
        tile_m=64, tile_n=tile_n, tile_k=64, max_concurrent_steps=max_concurrent_steps,
        epi_tile_m=None, epi_tile_n=None, wg_dimension=hopper_mixed_type_matmul_mgpu.MatmulDimension[wg_dimension])
    return hopper_mixed_type_matmul_mgpu.mixed_matmul_kernel(a, b, out_dtype=b.dtype, config=config)


@st.composite
def _mixed_configs(draw):
    config = {"tile_n": draw(st.sampled_from([64, 128])), "max_concurrent_steps": draw(st.integers(1, 3)),
              "wg_dimension": draw(st.sampled_from(["N", "M"])), "dtype": draw(st.sampled_from(["bfloat16", "float16"]))}
    config["m"] = 64 * (2 if config["wg_dimension"] == "M" else 1) * draw(st.integers(1, 2))
    config["n"] = config["tile_n"] * (2 if config["wg_dimension"] == "N" else 1)
    config["k"] = 64 * draw(st.integers(1, 3))
    return config


def _mixed_inputs(config):
    def make(rng):
        a = rng.integers(-128, 128, (config["m"], config["k"])).astype(np.int8)
        return a, normal(rng, (config["k"], config["n"]), jnp.dtype(config["dtype"]))

    return seeded(make)


_MIXED_SIZES = ("m", "n", "k", "dtype")

GPU_HOPPER_MIXED_TYPE_MATMUL_MGPU = pv.KernelSpec(
    name="upstream_gpu_hopper_mixed_type_matmul_mgpu",
    kernel=without(mixed_matmul, *_MIXED_SIZES),
    reference=without(lambda a, b: hopper_mixed_type_matmul_mgpu.reference(a, b, out_dtype=b.dtype), *_MIXED_SIZES,
                      "tile_n", "max_concurrent_steps", "wg_dimension"),
    configs=_mixed_configs(), inputs=_mixed_inputs, platforms=("gpu",),
    features=("matmul", "mixed_dtype", "int8", "tma", "wgmma", "warp_specialized", "plgpu_kernel", "upstream"),
    unsupported=_hopper("wgmma_lhs_in_registers", "GPU interpret mode cannot run a WGMMA whose LHS is in "
                        "registers (ValueError: Expected shape (6,) but got (64, 64))"),
    bitwise_stable=False,
)


# --- attention_mgpu -------------------------------------------------------------------


def attention(q, k, v, *, block_q, block_kv, max_concurrent_steps, causal):
    config = attention_mgpu.TuningConfig(block_q=block_q, block_kv=block_kv,
                                         max_concurrent_steps=max_concurrent_steps, causal=causal)
    return attention_mgpu.attention(q, k, v, config)


@st.composite
def _attention_configs(draw):
    block_q, block_kv, causal = 64, draw(st.sampled_from([64, 128])), draw(st.booleans())
    q_len = 2 * block_q * draw(st.integers(1, 2))
    # Causal attention needs as many keys as queries: the kernel runs each query block's
    # KV loop to the block's own end, past a shorter key sequence (module docstring).
    kv_blocks = q_len // block_kv if causal else draw(st.integers(1, 2))
    return {"block_q": block_q, "block_kv": block_kv, "max_concurrent_steps": draw(st.integers(2, 3)),
            "causal": causal, "batch": draw(st.integers(1, 2)), "q_len": q_len, "kv_blocks": kv_blocks,
            "kv_heads": draw(st.integers(1, 2)), "group": draw(st.integers(1, 2)),
            "dtype": "float16"}  # bfloat16: see the module docstring


def _attention_inputs(config):
    dtype = jnp.dtype(config["dtype"])
    kv_len = config["block_kv"] * config["kv_blocks"]
    heads = config["kv_heads"] * config["group"]

    def make(rng):
        return (normal(rng, (config["batch"], config["q_len"], heads, 64), dtype),
                normal(rng, (config["batch"], kv_len, config["kv_heads"], 64), dtype),
                normal(rng, (config["batch"], kv_len, config["kv_heads"], 64), dtype))

    return seeded(make)


_ATTENTION_SIZES = ("batch", "q_len", "kv_blocks", "kv_heads", "group", "dtype")

GPU_ATTENTION_MGPU = pv.KernelSpec(
    name="upstream_gpu_attention_mgpu",
    kernel=without(attention, *_ATTENTION_SIZES),
    reference=without(lambda q, k, v, *, causal: attention_mgpu.attention_reference(q, k, v, causal=causal).astype(q.dtype),
                      *_ATTENTION_SIZES, "block_q", "block_kv", "max_concurrent_steps"),
    configs=_attention_configs(), inputs=_attention_inputs, platforms=("gpu",),
    features=("attention", "softmax", "tma", "wgmma", "warp_specialized", "barrier", "plgpu_kernel", "upstream"),
    unsupported=_hopper("wgmma_in_run_state", "GPU interpret mode cannot run WGMMA inside pl.run_state nor with a "
                        "register LHS (ValueError: Cannot lower jaxpr with effects: ... _WGMMAPipelineEffect)"),
    bitwise_stable=False,
)


# --- blackwell_matmul_mgpu and blackwell_ragged_dot_mgpu --------------------------------


def blackwell_matmul(a, b, *, tile_n, max_concurrent_steps, collective):
    config = blackwell_matmul_mgpu.TuningConfig(tile_m=128, tile_n=tile_n, tile_k=64,
                                                max_concurrent_steps=max_concurrent_steps, collective=collective)
    return blackwell_matmul_mgpu.matmul_kernel(a, b, config)


@st.composite
def _blackwell_configs(draw):
    config = {"tile_n": draw(st.sampled_from([64, 128])), "max_concurrent_steps": draw(st.integers(2, 3)),
              "collective": draw(st.booleans()), "dtype": draw(st.sampled_from(["float16", "bfloat16"]))}
    cluster = 2 if config["collective"] else 1
    config["m"] = 128 * cluster * draw(st.integers(1, 2))
    config["n"] = config["tile_n"] * cluster * draw(st.integers(1, 2))
    config["k"] = 64 * draw(st.integers(1, 3))
    return config


def _matmul_inputs(config):
    dtype = jnp.dtype(config["dtype"])
    return seeded(lambda rng: (normal(rng, (config["m"], config["k"]), dtype),
                               normal(rng, (config["k"], config["n"]), dtype)))


def _matmul_reference(a, b):
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype)


_MATMUL_SIZES = ("m", "n", "k", "dtype")

GPU_BLACKWELL_MATMUL_MGPU = pv.KernelSpec(
    name="upstream_gpu_blackwell_matmul_mgpu",
    kernel=without(blackwell_matmul, *_MATMUL_SIZES),
    reference=without(_matmul_reference, *_MATMUL_SIZES, "tile_n", "max_concurrent_steps", "collective"),
    configs=_blackwell_configs(), inputs=_matmul_inputs, platforms=("gpu",),
    features=("matmul", "tma", "tcgen05", "tmem", "cluster", "warp_specialized", "plgpu_kernel", "upstream"),
    unsupported=_blackwell("inline_mgpu", "GPU interpret mode does not support plgpu.inline_mgpu (ValueError)"),
    bitwise_stable=False,
)


def blackwell_ragged_dot(a, b, group_sizes, *, max_concurrent_steps):
    config = blackwell_ragged_dot_mgpu.TuningConfig(
        tile_m=128, tile_n=64, tile_k=64, max_concurrent_steps=max_concurrent_steps, collective=True,
        grid_tile_width=1, grid_minor_dim=blackwell_matmul_mgpu.MatmulDimension.N, epilogue_tile_n=64)
    return blackwell_ragged_dot_mgpu.ragged_dot_kernel(a, b, group_sizes, config)


@st.composite
def _ragged_configs(draw):
    return {"max_concurrent_steps": draw(st.integers(2, 3)), "groups": draw(st.integers(1, 3)),
            "m": 256 * draw(st.integers(1, 2)), "n": 128 * draw(st.integers(1, 2)), "k": 64 * draw(st.integers(1, 2)),
            "dtype": draw(st.sampled_from(["float16", "bfloat16"]))}


def _ragged_inputs(config):
    dtype = jnp.dtype(config["dtype"])
    groups = config["groups"]

    def make(rng):
        sizes = rng.multinomial(config["m"], np.ones(groups) / groups).astype(np.int32)
        return (normal(rng, (config["m"], config["k"]), dtype),
                normal(rng, (groups, config["k"], config["n"]), dtype), sizes)

    return seeded(make)


def _ragged_reference(a, b, group_sizes):
    import jax

    return jax.lax.ragged_dot(a, b, group_sizes, preferred_element_type=jnp.float32).astype(a.dtype)


_RAGGED_SIZES = ("m", "n", "k", "groups", "dtype")

GPU_BLACKWELL_RAGGED_DOT_MGPU = pv.KernelSpec(
    name="upstream_gpu_blackwell_ragged_dot_mgpu",
    kernel=without(blackwell_ragged_dot, *_RAGGED_SIZES),
    reference=without(_ragged_reference, *_RAGGED_SIZES, "max_concurrent_steps"),
    configs=_ragged_configs(), inputs=_ragged_inputs, platforms=("gpu",),
    features=("matmul", "grouped", "ragged", "tma", "tcgen05", "tmem", "cluster", "persistent", "plgpu_kernel",
              "upstream"),
    unsupported=_blackwell("tcgen05_collective", "GPU interpret mode cannot run a 2-CTA tcgen05 MMA "
                           "(AssertionError: collective_axis not supported yet)"),
    bitwise_stable=False,
)
