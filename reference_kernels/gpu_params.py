"""A Mosaic GPU kernel whose ``plgpu.CompilerParams`` are drawn per example
(``strategies.mosaic_gpu_compiler_params``): ``exp(x) * 2 - 1`` by blocks of rows, each
block staged GMEM -> SMEM by TMA behind a barrier, computed into a second SMEM buffer and
copied back.

It reads one SMEM buffer and writes another, so it keeps the promise
``unsafe_no_auto_barriers=True`` asks for (no region read and written by one thread), and
its ``exp`` is what ``approx_math=True`` approximates on a GPU (GPU interpret mode computes
it exactly; an executing GPU is judged with the documented error, oracles/approx.py).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

import pallas_verify as pv
import strategies as pvs
from reference_kernels._draw import array_tuples, without

__all__ = ["GPU_EXP_AFFINE"]


def _body(x_gmem, o_gmem, x_smem, o_smem, barrier, *, block_rows):
    rows = pl.ds(jax.lax.axis_index("blocks") * block_rows, block_rows)
    plgpu.copy_gmem_to_smem(x_gmem.at[rows], x_smem, barrier)
    plgpu.barrier_wait(barrier)
    o_smem[...] = jnp.exp(x_smem[...]) * 2.0 - 1.0
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(o_smem, o_gmem.at[rows])
    plgpu.wait_smem_to_gmem(0)


def gpu_exp_affine(x: jax.Array, *, block_rows: int, compiler_params: dict) -> jax.Array:
    """``exp(x) * 2 - 1`` under ``plgpu.CompilerParams(**compiler_params)``."""
    rows, cols = x.shape
    smem = plgpu.SMEM((block_rows, cols), x.dtype)
    return plgpu.kernel(
        functools.partial(_body, block_rows=block_rows), out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_types=[smem, smem, plgpu.Barrier(num_arrivals=1)], grid=(rows // block_rows,),
        grid_names=("blocks",), compiler_params=plgpu.CompilerParams(**compiler_params))(x)


@st.composite
def _configs(draw):
    block_rows = draw(st.sampled_from([8, 16]))
    return {"rows": draw(pvs.ragged_sizes(block=block_rows, max_blocks=3, kinds=("exact",))),
            "cols": pvs.TPU_LANES, "block_rows": block_rows,
            "compiler_params": draw(pvs.mosaic_gpu_compiler_params(max_concurrent_steps=2))}


GPU_EXP_AFFINE = pv.KernelSpec(
    name="gpu_exp_affine",
    kernel=without(gpu_exp_affine, "rows", "cols"),
    reference=without(lambda x: jnp.exp(x) * 2.0 - 1.0, "rows", "cols", "block_rows", "compiler_params"),
    configs=_configs(),
    inputs=lambda c: array_tuples((c["rows"], c["cols"]), max_edge_values=0),
    platforms=("gpu",),
    features=("barrier", "tma", "smem", "mosaic_gpu", "compiler_params"),
    unsupported={"interpret": "the HLO interpreter cannot discharge Mosaic GPU copies (NotImplementedError: "
                 "No state discharge rule implemented for primitive: copy_gmem_to_smem)",
                 "mosaic_gpu:a100": "copy_gmem_to_smem with a barrier is a TMA copy, which needs Hopper (sm_90) or "
                 "newer; the Mosaic GPU compiler rejects it for A100"},
)
