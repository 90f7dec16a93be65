"""KernelSpecs wrapping jax's TPU counter-based PRNG kernels (``ops.tpu.random``):
``threefry`` (Threefry-2x32 over a blocked iota of counters) and ``philox`` (Philox-4x32-10),
on shapes of rank 0 to 3 whose last two dims are ragged against the kernels' fixed
(256, 256) block, so the padded path (a larger grid, then a slice) runs too.

Known upstream bug (jax 0.12.0.1, both kernels): ``prng_utils.blocked_iota`` takes the
in-block row stride from ``total_shape[1]`` instead of ``total_shape[-1]``, so counters
collide whenever ``shape[1] != shape[-1]`` (rank >= 3): for (1, 256, 512) only 65792 of
131072 outputs are distinct, for (1, 2, 256, 256), whose last dims are equal, 1532. The
specs draw rank-3 shapes with equal last dims only (where ``shape[1] == shape[-1]``, so
the stride is right by accident); ``tests/catalog/test_upstream_prng.py`` pins the bug,
and docs/upstream-findings.md has the report and the one-line fix.

References, independent of the kernels:
- threefry: ``jax.random.bits`` with the stock (XLA) ``threefry2x32`` implementation and
  partitionable counters, whose bits are the kernel's by construction: both XOR the two
  Threefry output words of the row-major element index.
- philox: Philox-4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3",
  2011) written from the paper on counter ``(0, index + offset, 0, 0)`` and key
  ``(k0, k1)``, with its own 32x32 -> 64-bit multiply (``mulhilo``, Hacker's Delight
  8-2); checked against the Random123 known-answer vectors in the tests.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental.pallas.ops.tpu.random import philox, threefry

import pallas_verify as pv
import strategies as pvs

__all__ = ["TPU_PHILOX", "TPU_THREEFRY", "mulhilo", "philox_4x32_reference"]

#: The kernels' fixed block (rows, cols) of the last two dims.
BLOCK = threefry.BLOCK_SIZE
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)


@st.composite
def _shapes(draw):
    """Rank 0 to 3; the last two dims ragged against BLOCK (at most 2 blocks each), equal
    on rank 3 (the module docstring says why)."""
    rank = draw(st.integers(0, 3))
    rows = draw(pvs.ragged_sizes(block=BLOCK[0], max_blocks=2))
    cols = draw(pvs.ragged_sizes(block=BLOCK[1], max_blocks=2))
    lead = (draw(st.integers(1, 2)),)
    return {0: (), 1: (cols,), 2: (rows, cols), 3: (*lead, cols, cols)}[rank]


def _keys(_config):
    return pvs.arrays(shape=(2,), dtype="uint32").map(lambda key: (key,))


def threefry_bits(key, *, shape):
    return threefry.plthreefry_random_bits(key, 32, shape)


def threefry_reference(key, *, shape):
    with jax.threefry_partitionable(True):
        return jax.random.bits(jax.random.wrap_key_data(key, impl="threefry2x32"), shape, jnp.uint32)


TPU_THREEFRY = pv.KernelSpec(
    name="upstream_tpu_threefry",
    kernel=threefry_bits,
    reference=threefry_reference,
    configs=st.fixed_dictionaries({"shape": _shapes()}),
    inputs=_keys,
    features=("prng", "smem", "ragged", "upstream"),
)


def mulhilo(a, b):
    """(high, low) 32-bit words of the 64-bit product of uint32 ``a`` and ``b``."""
    a, b = jnp.asarray(a, jnp.uint32), jnp.asarray(b, jnp.uint32)
    a_lo, a_hi, b_lo, b_hi = a & 0xFFFF, a >> 16, b & 0xFFFF, b >> 16
    low_product = a_lo * b_lo
    middle = a_hi * b_lo + (low_product >> 16)
    middle2 = a_lo * b_hi + (middle & 0xFFFF)
    return a_hi * b_hi + (middle >> 16) + (middle2 >> 16), a * b


def philox_4x32_reference(counter, key, rounds=10):
    """Philox-4x32 of four uint32 counter words under a two-word key: four words."""
    c0, c1, c2, c3 = (jnp.asarray(c, jnp.uint32) for c in counter)
    k0, k1 = (jnp.asarray(k, jnp.uint32) for k in key)
    for r in range(rounds):
        hi0, lo0 = mulhilo(_PHILOX_M[0], c0)
        hi1, lo1 = mulhilo(_PHILOX_M[1], c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        if r != rounds - 1:
            k0, k1 = k0 + jnp.uint32(_PHILOX_W[0]), k1 + jnp.uint32(_PHILOX_W[1])
    return c0, c1, c2, c3


def philox_bits(key, *, shape, offset, fuse_output):
    return philox.philox_4x32_count(key, shape, offset=offset, fuse_output=fuse_output)


def philox_reference(key, *, shape, offset, fuse_output):
    index = jnp.arange(int(np.prod(shape)), dtype=jnp.uint32).reshape(shape)
    zero = jnp.zeros_like(index)
    words = philox_4x32_reference((zero, index + jnp.uint32(offset), zero, zero), (key[0], key[1]))
    return words[0] ^ words[1] if fuse_output else jnp.stack(words[:2])


TPU_PHILOX = pv.KernelSpec(
    name="upstream_tpu_philox",
    kernel=philox_bits,
    reference=philox_reference,
    configs=st.fixed_dictionaries({
        "shape": _shapes(),
        "offset": st.sampled_from([0, 1, 2**31 + 5, 2**32 - 1]),
        "fuse_output": st.booleans()}),
    inputs=_keys,
    features=("prng", "smem", "scalar_prefetch", "ragged", "upstream"),
)
