"""Mutants of Triton-style masks: whole-array refs indexed by program id, loads and stores
masked to the row's length.

A row norm with one program per row loads and stores a power-of-two block of columns,
masking the columns past the row's end. The mutant's store mask is ``cols <= n``: it lets
one lane past the end through. On a GPU that lane writes into the next row (or past the
array); the HLO interpreter pads the ref and drops the lane, so the output is right there,
and only a bounds check of the mask catches it.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from pallas_verify.spec import KernelSpec
from reference_kernels.mutants import Mutant
from reference_kernels.mutants._inputs import seeded_arrays

ROWS = 4
_EPS = 1e-6


def _row_norm_kernel(x_ref, o_ref, *, n: int, block: int, store_past_end: bool):
    row = pl.program_id(0)
    cols = jnp.arange(block)
    x = plt.load(x_ref.at[row, cols], mask=cols < n, other=0.0)
    y = x * jax.lax.rsqrt(jnp.sum(x * x) / n + _EPS)
    store_mask = cols <= n if store_past_end else cols < n  # the mutant: one lane past the row's end
    plt.store(o_ref.at[row, cols], y, mask=store_mask)


def row_norm(x, *, store_past_end: bool = False):
    """RMS-normalise each row of ``x``: one program per row, a power-of-two column block."""
    rows, n = x.shape
    block = pl.next_power_of_2(n)
    return pl.pallas_call(
        functools.partial(_row_norm_kernel, n=n, block=block, store_past_end=store_past_end),
        grid=(rows,),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=plt.CompilerParams(),
    )(x)


def _row_norm_ref(x):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=1, keepdims=True) + _EPS)


_CONFIGS = st.fixed_dictionaries({"n": st.sampled_from([100, 200, 300])})
# GPU interpret mode interprets Mosaic GPU kernels only: Triton's load_p raises there.
_TRITON_ONLY = {"gpu_interpret": "GPU interpret mode has no Triton primitives "
                "(NotImplementedError: load_p is not supported on GPU yet)"}


def _spec(name: str, *, store_past_end: bool) -> KernelSpec:
    return KernelSpec(
        name=name,
        kernel=lambda x, *, n: row_norm(x, store_past_end=store_past_end),
        reference=lambda x, *, n: _row_norm_ref(x),
        configs=_CONFIGS,
        inputs=lambda config: seeded_arrays([(ROWS, config["n"])]),
        platforms=("gpu",),
        features=("masked_load", "masked_store", "ragged"),
        unsupported=_TRITON_ONLY,
    )


row_norm_masked_spec = _spec("row_norm_masked", store_past_end=False)
row_norm_store_past_end_spec = _spec("row_norm_store_past_end", store_past_end=True)

MUTANTS = [
    Mutant(
        spec=row_norm_store_past_end_spec,
        twin=row_norm_masked_spec,
        expects=("out_of_bounds",),
        bug="the store mask is cols <= n: one lane past each row's end is written (into the next row on a GPU)",
    ),
]
