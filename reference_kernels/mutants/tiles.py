"""Mutants of tile-padded reads: manual DMAs that copy whole tiles past an array's end.

On a TPU an HBM array is laid out in (8, 128) tiles, so a kernel that pipelines tiles
itself (as grouped matmuls do) may copy a whole 128-wide tile past the logical end of
an array of n = 129 columns: the read stays inside the padded allocation and is legal.
The kernel must then mask the padding, whose contents are unspecified. The twin masks
it; the mutant adds the padding into its output.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from pallas_verify.spec import KernelSpec
from reference_kernels.mutants import Mutant
from reference_kernels.mutants._inputs import seeded_arrays

TM, TN = 8, 128  # rows per group (grid step), columns per tile
GROUPS = 2

# The HLO interpreter clamps a DMA window that starts inside the array but ends past
# it (it slices with dynamic_slice), so it reads the wrong columns for such a tile
# instead of the padding the chip reads: these kernels cannot be judged there.
_HLO_CLAMPS = (
    "the HLO interpreter clamps a DMA window that runs past the logical end of the array "
    "(dynamic_slice semantics) instead of reading the tile padding the chip reads; check "
    "tile-padded reads on tpu_interpret, which runs with the chip's padded buffer bounds"
)


def _tile_sum_kernel(x_hbm, o_ref, buf, sem, *, n: int, mask: bool):
    rows = pl.ds(pl.program_id(0) * TM, TM)
    o_ref[...] = jnp.zeros_like(o_ref)

    def add_tile(j, carry):
        copy = pltpu.make_async_copy(x_hbm.at[rows, pl.ds(j * TN, TN)], buf, sem)
        copy.start()
        copy.wait()
        tile = buf[...]
        if mask:  # the columns past n are tile padding: unspecified contents
            col = j * TN + jax.lax.broadcasted_iota(jnp.int32, tile.shape, 1)
            tile = jnp.where(col < n, tile, 0)
        o_ref[...] += tile
        return carry

    jax.lax.fori_loop(0, pl.cdiv(n, TN), add_tile, 0)


def tile_sum(x, *, n: int, mask: bool = True):
    """Per group of TM rows, the sum of x's 128-wide column tiles (a grouped reduction whose
    last tile runs past column n), with manual DMAs from x left in HBM."""
    return pl.pallas_call(
        functools.partial(_tile_sum_kernel, n=n, mask=mask),
        grid=(x.shape[0] // TM,),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((TM, TN), lambda g: (g, 0)),
        out_shape=jax.ShapeDtypeStruct((x.shape[0], TN), x.dtype),
        scratch_shapes=[pltpu.VMEM((TM, TN), x.dtype), pltpu.SemaphoreType.DMA],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x)


def _tile_sum_ref(x, *, n: int):
    tiles = -(-n // TN)
    padded = jnp.pad(x, ((0, 0), (0, tiles * TN - n)))
    return padded.reshape(x.shape[0], tiles, TN).sum(axis=1)


_CONFIGS = st.fixed_dictionaries({"n": st.sampled_from([129, 200])})


def _tile_inputs(config):
    return seeded_arrays([(GROUPS * TM, config["n"])])


def _spec(name: str, *, mask: bool) -> KernelSpec:
    return KernelSpec(
        name=name,
        kernel=functools.partial(tile_sum, mask=mask),
        reference=_tile_sum_ref,
        configs=_CONFIGS,
        inputs=_tile_inputs,
        platforms=("tpu",),
        features=("dma", "memory_space_any", "ragged", "tile_padding"),
        unsupported={"interpret": _HLO_CLAMPS},
    )


tile_sum_masked_spec = _spec("tile_sum_masked", mask=True)
tile_padding_leak_spec = _spec("tile_padding_leak", mask=False)

MUTANTS = [
    Mutant(
        spec=tile_padding_leak_spec,
        twin=tile_sum_masked_spec,
        # NaN fill: the output is NaN where the padding was added (mismatch); zero fill:
        # the output matches, and the NaN-fill rerun differs (uninitialized_read).
        expects=("uninitialized_read", "mismatch"),
        bug="the last 128-wide tile runs past column n and its padding is added into the output unmasked",
        exposed_by={"uninitialized_memory": "nan"},
        verdicts={"tpu_interpret": ("uninitialized_read", "mismatch")},
    ),
]
