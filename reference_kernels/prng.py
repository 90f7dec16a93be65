"""On-chip PRNG: ``prng_seed`` + ``prng_random_bits`` turned into uniforms in [0, 1).

No reference can reproduce the hardware generator's bits (and the interpreters do not
promise the same bits as a chip), so the kernel's output is a deterministic function of
the input *given any bits*: each element is ``x`` when its uniform lies in [0, 1) (always,
for a correct bits-to-float conversion) and NaN otherwise; a second output is the drawn
bits masked to zero above bit 31 shifted out, i.e. ``(bits >> 31) >> 1`` == 0. A
conversion or seeding bug (wrong shift, signed overflow, reading an unseeded generator
into a NaN fill) shows up as NaN or non-zero elements.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
import strategies as pvs
from reference_kernels._draw import without

__all__ = ["PRNG_UNIFORM_RANGE"]


def _uniform(bits: jax.Array) -> jax.Array:
    """Uniform float32 in [0, 1) from the top 23 bits (exponent trick)."""
    mantissa = jax.lax.shift_right_logical(bits, jnp.uint32(9)) | jnp.uint32(0x3F800000)
    return jax.lax.bitcast_convert_type(mantissa, jnp.float32) - 1.0


def _prng_body(seed_ref, x_ref, o_ref, z_ref):
    pltpu.prng_seed(seed_ref[0], pl.program_id(0))
    bits = jax.lax.bitcast_convert_type(pltpu.prng_random_bits(x_ref.shape), jnp.uint32)
    u = _uniform(bits)
    o_ref[...] = jnp.where((u >= 0.0) & (u < 1.0), x_ref[...], jnp.nan)
    high = jax.lax.shift_right_logical(jax.lax.shift_right_logical(bits, jnp.uint32(31)),
                                       jnp.uint32(1))
    z_ref[...] = high.astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("block_rows", "dimension_semantics"))
def prng_uniform_range(seed: jax.Array, x: jax.Array, *, block_rows: int,
                       dimension_semantics: tuple[str] = ("parallel",)):
    """(x where the drawn uniform is in [0, 1) else NaN, bits shifted out to zero)."""
    rows, cols = x.shape
    block = pl.BlockSpec((block_rows, cols), lambda i, s: (i, 0))
    return pl.pallas_call(
        _prng_body,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(pl.cdiv(rows, block_rows),),
            in_specs=[block], out_specs=[block, block]),
        out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype),
                   jax.ShapeDtypeStruct(x.shape, jnp.int32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=dimension_semantics),
    )(seed, x)


def prng_uniform_range_reference(seed, x):
    del seed
    return [x, jnp.zeros(x.shape, jnp.int32)]


# Ragged row blocks (a partial block's padded rows are dropped) of lane-wide rows: the
# generator draws a whole (block_rows, 128) tile per grid point.
_CONFIGS = pvs.tiled_configs(axes={"rows": "sublane"}, max_grid_points=16).map(
    lambda config: {**config, "cols": pvs.TPU_LANES})


def _inputs(config):
    seeds = st.integers(0, 2**31 - 2).map(lambda s: np.asarray([s], np.int32))
    return st.tuples(seeds, pvs.arrays(shape=(config["rows"], config["cols"])))


_SIZES = ("rows", "cols", "grid", "dtype")

PRNG_UNIFORM_RANGE = pv.KernelSpec(
    name="prng_uniform_range",
    kernel=without(prng_uniform_range, *_SIZES),
    reference=without(prng_uniform_range_reference, *_SIZES, "block_rows", "dimension_semantics"),
    configs=_CONFIGS,
    inputs=_inputs,
    features=("prng", "scalar_prefetch"),
    unsupported={"interpret": "the HLO interpreter has no prng_seed (NotImplementedError)"},
)
