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
from reference_kernels._draw import normal, seeded, without

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


@functools.partial(jax.jit, static_argnames=("block_rows",))
def prng_uniform_range(seed: jax.Array, x: jax.Array, *, block_rows: int):
    """(x where the drawn uniform is in [0, 1) else NaN, bits shifted out to zero)."""
    rows, cols = x.shape
    block = pl.BlockSpec((block_rows, cols), lambda i, s: (i, 0))
    return pl.pallas_call(
        _prng_body,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(rows // block_rows,),
            in_specs=[block], out_specs=[block, block]),
        out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype),
                   jax.ShapeDtypeStruct(x.shape, jnp.int32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(seed, x)


def prng_uniform_range_reference(seed, x):
    del seed
    return [x, jnp.zeros(x.shape, jnp.int32)]


@st.composite
def _configs(draw):
    block_rows = draw(st.sampled_from([8, 16]))
    return {"rows": block_rows * draw(st.integers(1, 4)), "cols": 128, "block_rows": block_rows}


def _inputs(config):
    def make(rng):
        seed = rng.integers(0, 2**31 - 1, size=(1,), dtype=np.int32)
        return seed, normal(rng, (config["rows"], config["cols"]))
    return seeded(make)


PRNG_UNIFORM_RANGE = pv.KernelSpec(
    name="prng_uniform_range",
    kernel=without(prng_uniform_range, "rows", "cols"),
    reference=without(prng_uniform_range_reference, "rows", "cols", "block_rows"),
    configs=_configs(),
    inputs=_inputs,
    features=("prng", "scalar_prefetch"),
    unsupported={"interpret": "the HLO interpreter has no prng_seed (NotImplementedError)"},
)
