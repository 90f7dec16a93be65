"""The PRNG wrappers' own pieces: the Philox reference against the Random123 known-answer
vectors, its 32x32 multiply against numpy's 64-bit one, and the upstream counter bug the
specs steer around (pinned, so a fixed jax shows up here)."""

from __future__ import annotations

import numpy as np
import pytest
from jax.experimental.pallas import tpu as pltpu

from reference_kernels.upstream import tpu_prng

# Philox4x32-10 known-answer vectors of Random123 (kat_vectors): counter, key, output.
_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize(("counter", "key", "want"), _KAT)
def test_philox_reference_matches_random123(counter, key, want):
    got = tpu_prng.philox_4x32_reference(counter, key)
    assert [int(w) for w in got] == list(want)


def test_mulhilo_is_the_64_bit_product():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**32, size=1000, dtype=np.uint64)
    b = np.concatenate([rng.integers(0, 2**32, size=998, dtype=np.uint64),
                        np.array([2**32 - 1, 0], np.uint64)])
    hi, lo = tpu_prng.mulhilo(a.astype(np.uint32), b.astype(np.uint32))
    product = a * b  # < 2**64: exact in uint64
    np.testing.assert_array_equal(np.asarray(hi), (product >> np.uint64(32)).astype(np.uint32))
    np.testing.assert_array_equal(np.asarray(lo), (product & np.uint64(2**32 - 1)).astype(np.uint32))


@pytest.mark.parametrize("kernel", [
    tpu_prng.threefry_bits,
    lambda key, shape: tpu_prng.philox_bits(key, shape=shape, offset=0, fuse_output=True),
], ids=["threefry", "philox"])
def test_upstream_rank3_counters_collide(kernel):
    """jax 0.12.0.1: on (1, 256, 512) row r + 1 of block 0 repeats row r of block 1, so the
    specs draw rank-3 shapes with equal last dims only. When this fails, upstream fixed
    ``prng_utils.blocked_iota``: draw any rank-3 shape in ``tpu_prng._shapes``."""
    key = np.array([0, 0], np.uint32)
    with pltpu.force_tpu_interpret_mode(True):
        bits = np.asarray(kernel(key, shape=(1, 256, 512)))
    assert (bits[0, 1:, :256] == bits[0, :-1, 256:]).all()
    assert len(np.unique(bits)) < bits.size // 2 + 512
