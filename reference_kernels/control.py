"""Control flow and aliasing: an in-place update through ``input_output_aliases``, and a
kernel whose blocks branch with ``pl.when`` and iterate with ``lax.fori_loop``."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
import strategies as pvs
from reference_kernels._draw import array_tuples, without

__all__ = ["AXPY_INPLACE", "BRANCH_LOOP"]


def _axpy_body(x_ref, y_ref, o_ref, *, alpha):
    o_ref[...] = y_ref[...] + alpha * x_ref[...]


@functools.partial(jax.jit, static_argnames=("alpha", "block_rows", "block_cols", "dimension_semantics"))
def axpy_inplace(x: jax.Array, y: jax.Array, *, alpha: float, block_rows: int, block_cols: int,
                 dimension_semantics: tuple[str, str] = ("parallel", "parallel")) -> jax.Array:
    """``y + alpha * x`` written over y's buffer (input 1 aliases output 0)."""
    rows, cols = y.shape
    spec = pl.BlockSpec((block_rows, block_cols), lambda i, j: (i, j))
    return pl.pallas_call(
        functools.partial(_axpy_body, alpha=alpha),
        grid=(rows // block_rows, cols // block_cols),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(y.shape, y.dtype),
        input_output_aliases={1: 0},
        compiler_params=pltpu.CompilerParams(dimension_semantics=dimension_semantics),
    )(x, y)


# Whole blocks (``ragged=False``): TPU interpret mode (JAX 0.12) returns an aliased output
# at its padded size when a block overhangs the array, and fails to lower ("type of return
# operand ... doesn't match function result type").
_AXPY_CONFIGS = pvs.tiled_configs(ragged=False, max_grid_points=16).flatmap(
    lambda config: st.sampled_from([0.5, -2.0, 3.0]).map(lambda alpha: {**config, "alpha": alpha}))


def _one_or_two(n):
    def inputs(config):
        return array_tuples(*[(config["rows"], config["cols"])] * n)
    return inputs


AXPY_INPLACE = pv.KernelSpec(
    name="axpy_inplace",
    kernel=without(axpy_inplace, "rows", "cols", "grid", "dtype"),
    reference=without(lambda x, y, *, alpha: y + jnp.float32(alpha) * x, "rows", "cols", "block_rows",
                      "block_cols", "grid", "dimension_semantics", "dtype"),
    configs=_AXPY_CONFIGS,
    inputs=_one_or_two(2),
    features=("aliasing", "in_place"),
)


def _branch_loop_body(x_ref, o_ref, *, steps):
    @pl.when(pl.program_id(0) % 2 == 0)
    def _even():
        # Fixed-point iteration x <- 0.5 x + 1, run ``steps`` times.
        o_ref[...] = jax.lax.fori_loop(0, steps, lambda _, v: v * 0.5 + 1.0, x_ref[...])

    @pl.when(pl.program_id(0) % 2 == 1)
    def _odd():
        o_ref[...] = -x_ref[...]


@functools.partial(jax.jit, static_argnames=("steps", "block_rows"))
def branch_loop(x: jax.Array, *, steps: int, block_rows: int) -> jax.Array:
    """Even row blocks iterate ``v <- v/2 + 1`` ``steps`` times; odd row blocks negate."""
    rows, cols = x.shape
    block = pl.BlockSpec((block_rows, cols), lambda i: (i, 0))
    return pl.pallas_call(
        functools.partial(_branch_loop_body, steps=steps),
        grid=(pl.cdiv(rows, block_rows),),
        in_specs=[block],
        out_specs=block,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x)


def branch_loop_reference(x, *, steps, block_rows):
    iterated = x
    for _ in range(steps):
        iterated = iterated * 0.5 + 1.0
    even = (jnp.arange(x.shape[0]) // block_rows) % 2 == 0
    return jnp.where(even[:, None], iterated, -x)


@st.composite
def _branch_configs(draw):
    """Ragged rows and columns; a row's branch is the parity of its row block."""
    block_rows = draw(st.integers(1, 2).map(lambda k: k * pvs.preferred_sublane_tile("float32")))
    return {"rows": draw(pvs.ragged_sizes(block=block_rows)),
            "cols": draw(pvs.ragged_sizes(block=pvs.TPU_LANES, max_blocks=2)),
            "block_rows": block_rows, "steps": draw(st.integers(0, 5))}


BRANCH_LOOP = pv.KernelSpec(
    name="branch_loop",
    kernel=without(branch_loop, "rows", "cols"),
    reference=without(branch_loop_reference, "rows", "cols"),
    configs=_branch_configs(),
    inputs=_one_or_two(1),
    features=("control_flow", "when", "fori_loop", "ragged"),
)
