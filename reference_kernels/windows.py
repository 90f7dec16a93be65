"""Windows that overhang their ref: a masked ``pl.ds`` load and store whose last window runs
past the end of the array.

Each grid step reads an 8-row window of ``x`` that starts ``shift`` rows into its block,
so the last window runs past the array's end; the rows past it are masked off on the load
(``pltpu.load(..., mask=)``, filled with 0) and on the store. An interpreter that clamps
the start of a window that overhangs its ref, instead of padding the ref, reads and writes
rows shifted back: the output is then wrong in the last window's rows.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
from reference_kernels._draw import array_tuples

__all__ = ["TAIL_WINDOWS"]

ROWS = 8  # rows per window
COLS = 128


def _tail_body(x_ref, o_ref, *, n: int, shift: int):
    g = pl.program_id(0)

    @pl.when(g == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)

    start = g * ROWS + shift
    inside = start + lax.broadcasted_iota(jnp.int32, (ROWS, COLS), 0) < n
    window = pl.ds(start, ROWS)
    value = jnp.where(inside, pltpu.load(x_ref.at[window, :], mask=inside), 0.0)
    pltpu.store(o_ref.at[window, :], 2 * value + 1, mask=inside)


@functools.partial(jax.jit, static_argnames=("shift",))
def tail_windows(x: jax.Array, *, shift: int) -> jax.Array:
    """Rows ``shift`` and after of ``2 x + 1``, zeros before: 8-row windows from row ``shift``."""
    n = x.shape[0]
    return pl.pallas_call(
        functools.partial(_tail_body, n=n, shift=shift),
        grid=(pl.cdiv(n - shift, ROWS),),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
    )(x)


def tail_windows_reference(x, *, shift: int, **_config):
    rows = lax.broadcasted_iota(jnp.int32, x.shape, 0)
    return jnp.where(rows >= shift, 2 * x + 1, 0.0).astype(x.dtype)


# n is never a multiple of 8 past the shift: the last window always overhangs.
_CONFIGS = st.fixed_dictionaries({"shift": st.integers(1, ROWS - 1), "blocks": st.integers(1, 3),
                                  "over": st.integers(1, ROWS - 1)})

TAIL_WINDOWS = pv.KernelSpec(
    name="tail_windows",
    kernel=lambda x, *, shift, blocks, over: tail_windows(x, shift=shift),
    reference=lambda x, *, shift, blocks, over: tail_windows_reference(x, shift=shift),
    configs=_CONFIGS,
    inputs=lambda config: array_tuples((config["shift"] + (config["blocks"] - 1) * ROWS + config["over"], COLS)),
    platforms=("tpu",),
    features=("masked_load", "masked_store", "dynamic_slice", "ragged"),
    unsupported={"tpu_interpret": "TPU interpret mode (JAX 0.10 to 0.12) cannot run a masked load "
                                  "(NotImplementedError: masked load_p)"},
)
