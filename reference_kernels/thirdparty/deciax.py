"""deciax (Apache-2.0; https://pypi.org/project/deciax/): its TPU flash attention over a
packed q | k | v projection, with the key mask and a sliding window applied in the
kernel, against ``deciax.kernels.attention.reference.attention``, the pure-jnp reference
its module docstring names "the numerical reference for every kernel".

The kernel asserts its sequence divides its blocks (512 x 512 full, 256 x 128 sliding,
capped at the sequence) and a head dim of 64, so the spec draws those sequences (a
sequence of 1 among them), an even number of heads, masked keys (padding, a row of no real token), windows of 1 and wider, and
float32 and bfloat16.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st

import pallas_verify as pv
from reference_kernels.thirdparty._library import needs

__all__ = ["DECIAX_FLASH_ATTENTION"]

DIST, PACKAGE = "deciax", "deciax"


@needs(DIST, PACKAGE)
def flash_attention(q, k, v, mask, *, window, **_sizes):
    from deciax.kernels.attention import pallas

    return pallas.attention(q, k, v, mask, window=window)


def flash_attention_reference(q, k, v, mask, *, window, **_sizes):
    from deciax.kernels.attention import reference

    return reference.attention(q, k, v, mask, window=window)


@st.composite
def _configs(draw):
    window = draw(st.sampled_from([0, 0, 1, 16, 200]))
    seqs = [1, 8, 128, 256] if window else [1, 8, 128, 384, 512]  # divides its blocks
    return {"batch": draw(st.sampled_from([1, 2])), "seq": draw(st.sampled_from(seqs)),
            # heads * 64 a multiple of 128: one head's 64 lanes of a packed 192-lane row is a
            # block Mosaic TPU does not tile (pallas-verify's static check; docs/thirdparty.md)
            "heads": draw(st.sampled_from([2, 4])), "window": window,
            "dtype": draw(st.sampled_from(["float32", "bfloat16"]))}


def _inputs(c):
    shape = (c["batch"], c["seq"], c["heads"], 64)

    def make(seed_and_lengths):
        seed, lengths = seed_and_lengths
        rng = np.random.default_rng(seed)
        q, k, v = (rng.standard_normal(shape, np.float32).astype(jnp.dtype(c["dtype"])) for _ in range(3))
        # right padding: each row's real tokens first (0 real tokens: a row of padding)
        mask = (np.arange(c["seq"])[None, :] < np.asarray(lengths)[:, None] % (c["seq"] + 1)).astype(np.int32)
        return q, k, v, mask

    lengths = st.lists(st.integers(0, 2**16), min_size=c["batch"], max_size=c["batch"])
    return st.tuples(st.integers(0, 2**32 - 1), lengths).map(make)


DECIAX_FLASH_ATTENTION = pv.KernelSpec(
    name="deciax_flash_attention",
    kernel=flash_attention,
    reference=flash_attention_reference,
    configs=_configs(),
    inputs=_inputs,
    features=("attention", "online_softmax", "masked", "thirdparty"),
    bitwise_stable=False,
)
