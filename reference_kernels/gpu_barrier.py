"""A Mosaic GPU kernel (``plgpu.kernel``): each block copies its rows GMEM -> SMEM with a
TMA barrier, waits on it, computes in SMEM and copies back SMEM -> GMEM."""

from __future__ import annotations

import functools

import jax
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

import pallas_verify as pv
import strategies as pvs
from reference_kernels._draw import array_tuples, without

__all__ = ["GPU_BARRIER_AFFINE"]


def _affine_body(x_gmem, o_gmem, smem, barrier, *, block_rows):
    rows = pl.ds(jax.lax.axis_index("blocks") * block_rows, block_rows)
    plgpu.copy_gmem_to_smem(x_gmem.at[rows], smem, barrier)
    plgpu.barrier_wait(barrier)
    smem[...] = smem[...] * 2.0 - 1.0
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(smem, o_gmem.at[rows])
    plgpu.wait_smem_to_gmem(0)


@functools.partial(jax.jit, static_argnames=("block_rows",))
def gpu_barrier_affine(x: jax.Array, *, block_rows: int) -> jax.Array:
    """``2x - 1`` by blocks of rows staged through SMEM behind a TMA barrier."""
    rows, cols = x.shape
    return plgpu.kernel(
        functools.partial(_affine_body, block_rows=block_rows),
        out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_types=[plgpu.SMEM((block_rows, cols), x.dtype), plgpu.Barrier(num_arrivals=1)],
        grid=(rows // block_rows,),
        grid_names=("blocks",),
    )(x)


@st.composite
def _configs(draw):
    """Whole row blocks (each block's TMA copy has no bounds check), lane-wide rows."""
    block_rows = draw(st.sampled_from([8, 16]))
    return {"rows": draw(pvs.ragged_sizes(block=block_rows, max_blocks=3, kinds=("exact",))),
            "cols": pvs.TPU_LANES, "block_rows": block_rows}


GPU_BARRIER_AFFINE = pv.KernelSpec(
    name="gpu_barrier_affine",
    kernel=without(gpu_barrier_affine, "rows", "cols"),
    reference=without(lambda x: x * 2.0 - 1.0, "rows", "cols", "block_rows"),
    configs=_configs(),
    inputs=lambda c: array_tuples((c["rows"], c["cols"])),
    platforms=("gpu",),
    features=("barrier", "tma", "smem", "mosaic_gpu"),
    unsupported={"interpret": "the HLO interpreter cannot discharge Mosaic GPU copies "
                 "(NotImplementedError: No state discharge rule implemented for primitive: "
                 "copy_gmem_to_smem)",
                 "mosaic_gpu:a100": "copy_gmem_to_smem with a barrier is a TMA copy, which needs "
                 "Hopper (sm_90) or newer; the Mosaic GPU compiler rejects it for A100"},
)
