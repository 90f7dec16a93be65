"""Mutants of Mosaic GPU kernels (``plgpu.kernel``: TMA copies, barriers, WGMMA), found on
``gpu_interpret``.

- ``skipped_barrier_wait``: a block reads the SMEM tile its TMA copy is still filling (no
  ``barrier_wait`` on the copy's barrier). GPU interpret mode's race detector sees the TMA
  write and the compute read unordered: ``race``.
- ``no_auto_barriers_in_place``: ``unsafe_no_auto_barriers=True`` with ``smem[...] =
  f(smem[...])``: one thread reads and writes a region, which the flag forbids (the warps
  of a warpgroup then race on a GPU). GPU interpret mode runs a warpgroup as one thread;
  ``gpu_interpret`` checks the flag's rule in the kernel's program: ``race``.
- ``slot_overwritten``: a ring of ``max_concurrent_steps`` TMA slots that refills the slot
  it is about to consume (the refill of step ``i + max_concurrent_steps`` is issued before
  step ``i`` reads its slot): keeping that many copies in flight during the compute needs
  one slot more. ``race`` (and ``mismatch``: the step reads the next tile).
- ``wgmma_read_before_wait``: the accumulator of a WGMMA is read with
  ``wgmma_accumulator_load(..., wait_n=None)``, before any ``wgmma_wait``. GPU interpret
  mode runs WGMMA synchronously (jax 0.12.0.1), so the values come out right there;
  ``gpu_interpret`` checks the order of WGMMA issue, wait and read in the kernel's
  program order and reports it as ``dma_ordering``.
- ``tma_ragged_tail``: a column max over row blocks whose last block is ragged: TMA fills
  the rows past the end of the array with zeros (on a GPU and in GPU interpret mode) and
  the kernel does not mask them, so a tail of negative rows has max 0: ``mismatch``.

Each twin is the correct kernel. Shapes are one or a few 8 x 128 tiles (one 64 x 64
WGMMA tile): GPU interpret mode costs about a second per case.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from pallas_verify.spec import KernelSpec
from reference_kernels.mutants import Mutant
from reference_kernels.mutants._inputs import seeded_arrays

__all__ = ["MUTANTS"]

B, C = 8, 128  # one row block
_HLO = {"interpret": "the HLO interpreter cannot discharge Mosaic GPU copies (NotImplementedError: No state "
                     "discharge rule implemented for primitive: copy_gmem_to_smem)"}
_FEATURES = ("mosaic_gpu", "tma", "barrier", "smem")


def _spec(name, kernel, reference, configs, inputs, features=_FEATURES, **extra) -> KernelSpec:
    return KernelSpec(name=name, kernel=kernel, reference=reference, configs=configs, inputs=inputs,
                      platforms=("gpu",), features=features, unsupported=_HLO, **extra)


# --- a block that skips the wait on its TMA barrier ------------------------------------


def _affine_body(x_gmem, o_gmem, smem, barrier, *, wait):
    rows = pl.ds(jax.lax.axis_index("blocks") * B, B)
    plgpu.copy_gmem_to_smem(x_gmem.at[rows], smem, barrier)
    if wait:
        plgpu.barrier_wait(barrier)
    smem[...] = smem[...] * 2.0 - 1.0
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(smem, o_gmem.at[rows])
    plgpu.wait_smem_to_gmem(0)


def affine(x, *, blocks, wait=True):
    del blocks
    return plgpu.kernel(functools.partial(_affine_body, wait=wait), out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        scratch_types=[plgpu.SMEM((B, C), x.dtype), plgpu.Barrier(num_arrivals=1)],
                        grid=(x.shape[0] // B,), grid_names=("blocks",))(x)


def _affine_ref(x, *, blocks):
    return x * 2.0 - 1.0


_BLOCKS = st.fixed_dictionaries({"blocks": st.integers(1, 3)})


def _rows(config):
    return seeded_arrays([(config["blocks"] * B, C)])


def _out_of_place_body(x_gmem, o_gmem, x_smem, o_smem, barrier):
    rows = pl.ds(jax.lax.axis_index("blocks") * B, B)
    plgpu.copy_gmem_to_smem(x_gmem.at[rows], x_smem, barrier)
    plgpu.barrier_wait(barrier)
    o_smem[...] = x_smem[...] * 2.0 - 1.0
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(o_smem, o_gmem.at[rows])
    plgpu.wait_smem_to_gmem(0)


def affine_without_auto_barriers(x, *, blocks, in_place=False):
    """``2x - 1`` with ``unsafe_no_auto_barriers=True``: in place in one SMEM buffer (read
    and written by one thread: what the flag forbids) or from one buffer into another."""
    del blocks
    body = functools.partial(_affine_body, wait=True) if in_place else _out_of_place_body
    buffers = [plgpu.SMEM((B, C), x.dtype)] * (1 if in_place else 2)
    return plgpu.kernel(body, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        scratch_types=[*buffers, plgpu.Barrier(num_arrivals=1)], grid=(x.shape[0] // B,),
                        grid_names=("blocks",),
                        compiler_params=plgpu.CompilerParams(unsafe_no_auto_barriers=True))(x)


# --- a TMA ring that refills the slot it is about to consume -----------------------------


def _ring_body(x_gmem, o_gmem, slots, out_smem, barriers, *, steps, depth, refill_first):
    """o = 2x, row block by row block, through ``depth`` SMEM slots kept full by TMA."""
    for s in range(min(depth, steps)):
        plgpu.copy_gmem_to_smem(x_gmem.at[pl.ds(s * B, B)], slots.at[s], barriers.at[s])

    @pl.loop(0, steps)
    def _step(i):
        slot = i % depth
        plgpu.barrier_wait(barriers.at[slot])

        def refill():
            @pl.when(i + depth < steps)
            def _():
                plgpu.copy_gmem_to_smem(x_gmem.at[pl.ds((i + depth) * B, B)], slots.at[slot], barriers.at[slot])

        if refill_first:  # keeps `depth` copies in flight during the compute: needs depth + 1 slots
            refill()
        out_smem[...] = slots[slot] * 2.0
        plgpu.commit_smem()  # orders the read of the slot before the TMA that refills it
        if not refill_first:
            refill()
        plgpu.copy_smem_to_gmem(out_smem, o_gmem.at[pl.ds(i * B, B)])
        plgpu.wait_smem_to_gmem(0)


def ring(x, *, max_concurrent_steps, refill_first=False):
    steps = x.shape[0] // B
    body = functools.partial(_ring_body, steps=steps, depth=max_concurrent_steps, refill_first=refill_first)
    return plgpu.kernel(body, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype), scratch_types=[
        plgpu.SMEM((max_concurrent_steps, B, C), x.dtype), plgpu.SMEM((B, C), x.dtype),
        plgpu.Barrier(num_arrivals=1, num_barriers=max_concurrent_steps)])(x)


def _ring_ref(x, *, max_concurrent_steps):
    return x * 2.0


@st.composite
def _ring_configs(draw):
    depth = draw(st.integers(1, 2))
    return {"max_concurrent_steps": depth, "steps": draw(st.integers(depth + 1, depth + 2))}


def _ring_inputs(config):
    return seeded_arrays([(config["steps"] * B, C)])


def _without_steps(fn, **fixed):
    def call(x, *, steps, **config):
        return fn(x, **config, **fixed)

    return call


# --- a WGMMA accumulator read before its wait ---------------------------------------------

_T = 64
_SWIZZLE = 128  # bytes: a 64-element f16 row
_TILED = (plgpu.TilingTransform((8, _SWIZZLE // 2)), plgpu.SwizzleTransform(_SWIZZLE))


def _tile_matmul_body(a_gmem, b_gmem, o_gmem, a_smem, b_smem, o_smem, barrier, *, wait):
    plgpu.copy_gmem_to_smem(a_gmem, a_smem, barrier)
    plgpu.barrier_wait(barrier)
    plgpu.copy_gmem_to_smem(b_gmem, b_smem, barrier)
    plgpu.barrier_wait(barrier)

    def scope(acc_ref):
        plgpu.wgmma(acc_ref, a_smem, b_smem)
        return acc_ref[...] if wait else plgpu.wgmma_accumulator_load(acc_ref, wait_n=None)

    acc = pl.run_scoped(scope, plgpu.ACC((_T, _T), jnp.float32))
    o_smem[...] = acc.astype(o_smem.dtype)
    plgpu.commit_smem()
    plgpu.copy_smem_to_gmem(o_smem, o_gmem)
    plgpu.wait_smem_to_gmem(0)


def tile_matmul(a, b, *, wait=True):
    """One 64 x 64 x 64 float16 WGMMA tile, float32 accumulator, float16 output."""
    smem = plgpu.SMEM((_T, _T), jnp.float16, transforms=_TILED)
    return plgpu.kernel(
        functools.partial(_tile_matmul_body, wait=wait), out_type=jax.ShapeDtypeStruct((_T, _T), jnp.float16),
        scratch_types=[smem, smem, plgpu.SMEM((_T, _T), jnp.float16), plgpu.Barrier(num_arrivals=1)],
        compiler_params=plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Warpgroup))(a, b)


def _tile_matmul_ref(a, b):
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(jnp.float16)


def _tiles(config):
    return st.integers(0, 2**32 - 1).map(lambda seed: tuple(
        np.random.default_rng(seed).standard_normal((_T, _T)).astype(np.float16) for _ in range(2)))


# --- a column max whose TMA-loaded ragged tail is not masked -------------------------------


def _colmax_body(x_gmem, o_gmem, smem, barrier, *, rows, masked):
    block = jax.lax.axis_index("blocks")
    plgpu.copy_gmem_to_smem(x_gmem.at[pl.ds(block * B, B)], smem, barrier)  # the tail block: TMA zero-fills
    plgpu.barrier_wait(barrier)
    tile = smem[...]
    if masked:
        valid = jax.lax.broadcasted_iota(jnp.int32, (B, C), 0) < rows - block * B
        tile = jnp.where(valid, tile, -jnp.inf)
    o_gmem[block] = jnp.max(tile, axis=0)


def column_max(x, *, masked=True):
    """The max of each column of each 8-row block (the last block may be partial)."""
    blocks = pl.cdiv(x.shape[0], B)
    body = functools.partial(_colmax_body, rows=x.shape[0], masked=masked)
    return plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((blocks, C), x.dtype),
                        scratch_types=[plgpu.SMEM((B, C), x.dtype), plgpu.Barrier(num_arrivals=1)],
                        grid=(blocks,), grid_names=("blocks",))(x)


def _colmax_ref(x):
    blocks = -(-x.shape[0] // B)
    padded = jnp.pad(x, ((0, blocks * B - x.shape[0]), (0, 0)), constant_values=-jnp.inf)
    return padded.reshape(blocks, B, C).max(axis=1)


def _negative_rows(config):
    """Rows 1 .. 2 blocks + 7, every value negative (so a zero-filled tail row wins the max)."""
    return st.tuples(st.integers(1, 2 * B + 7), st.integers(0, 2**32 - 1)).map(
        lambda drawn: (-1.0 - np.abs(np.random.default_rng(drawn[1]).standard_normal((drawn[0], C))).astype(np.float32),))


MUTANTS = [
    Mutant(
        spec=_spec("skipped_barrier_wait", functools.partial(affine, wait=False), _affine_ref, _BLOCKS, _rows),
        twin=_spec("barrier_affine_twin", affine, _affine_ref, _BLOCKS, _rows),
        expects=("race",),
        bug="each block computes on its SMEM tile without waiting on the barrier of the TMA copy filling it",
    ),
    Mutant(
        spec=_spec("no_auto_barriers_in_place", functools.partial(affine_without_auto_barriers, in_place=True),
                   _affine_ref, _BLOCKS, _rows),
        twin=_spec("no_auto_barriers_twin", affine_without_auto_barriers, _affine_ref, _BLOCKS, _rows),
        expects=("race",),
        bug="the kernel turns Mosaic GPU's automatic barriers off (unsafe_no_auto_barriers=True) yet reads and "
            "writes one SMEM buffer from one thread, which the flag's documentation forbids",
    ),
    Mutant(
        spec=_spec("slot_overwritten", _without_steps(ring, refill_first=True), _without_steps(_ring_ref), _ring_configs(),
                   _ring_inputs),
        twin=_spec("tma_ring_twin", _without_steps(ring), _without_steps(_ring_ref), _ring_configs(), _ring_inputs),
        expects=("race", "mismatch"),
        bug="the ring refills a slot before the step that reads it: max_concurrent_steps copies in flight during "
            "the compute need max_concurrent_steps + 1 slots",
    ),
    Mutant(
        spec=_spec("wgmma_read_before_wait", functools.partial(tile_matmul, wait=False), _tile_matmul_ref,
                   st.just({}), _tiles, features=(*_FEATURES, "wgmma"), bitwise_stable=False),
        twin=_spec("wgmma_tile_twin", tile_matmul, _tile_matmul_ref, st.just({}), _tiles,
                   features=(*_FEATURES, "wgmma"), bitwise_stable=False),
        expects=("dma_ordering",),
        bug="the WGMMA accumulator is read with wait_n=None before any wgmma_wait: the MMA may still be running",
    ),
    Mutant(
        spec=_spec("tma_ragged_tail", functools.partial(column_max, masked=False), _colmax_ref, st.just({}),
                   _negative_rows, features=(*_FEATURES, "ragged")),
        twin=_spec("tma_tail_masked_twin", column_max, _colmax_ref, st.just({}), _negative_rows,
                   features=(*_FEATURES, "ragged")),
        expects=("mismatch",),
        bug="the last block's TMA copy reads past the end of the array, where TMA fills zeros, and the column max "
            "does not mask those rows",
    ),
]
