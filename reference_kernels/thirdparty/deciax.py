"""deciax (Apache-2.0; https://pypi.org/project/deciax/): its TPU flash attention over a
packed q | k | v projection, with the key mask and a sliding window applied in the
kernel, against ``deciax.kernels.attention.reference.attention``, the pure-jnp reference
its module docstring names "the numerical reference for every kernel"; and two of its
fused encoder-layer kernels (``kernels.fused``: ``norm_linear``, ``out_mlp``) against the
formula each docstring states, written with the library's own jnp primitives
(``deciax.nn``: "Matmuls run in the weight dtype with fp32 accumulation").

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

__all__ = ["DECIAX_FLASH_ATTENTION", "DECIAX_NORM_LINEAR", "DECIAX_OUT_MLP"]

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


@needs(DIST, PACKAGE)
def norm_linear(x, norm_w, norm_b, w_t, bias, *, eps, normalize, tn, **_sizes):
    from deciax.kernels import fused

    return fused.norm_linear(x, norm_w, norm_b, eps, w_t, bias, normalize=normalize, tn=tn)


def norm_linear_reference(x, norm_w, norm_b, w_t, bias, *, eps, normalize, **_config):
    from deciax import nn

    # the docstring: [R, D] fp32 -> LayerNorm (if normalize) -> @ w_t [D, N] + bias -> [R, N] bf16
    y = nn.layer_norm(x, norm_w, norm_b, eps) if normalize else x
    return nn.linear(y, w_t.T, bias).astype(jnp.bfloat16)


@st.composite
def _norm_linear_configs(draw):
    # rows: any count up to its 512-row block; tn a multiple of 128 dividing n (None: d if
    # d divides n, else n, both multiples of 128 here).
    d, n = draw(st.sampled_from([128, 256])), draw(st.sampled_from([128, 256, 384]))
    return {"rows": draw(st.sampled_from([1, 7, 64])), "d": d, "n": n, "tn": draw(st.sampled_from([None, 128])),
            "normalize": draw(st.booleans()), "eps": draw(st.sampled_from([1e-5, 1e-12])),
            "weights": draw(st.sampled_from(["float32", "bfloat16"]))}


def _norm_linear_inputs(c):
    def make(seed):
        rng = np.random.default_rng(seed)
        weights = jnp.dtype(c["weights"])
        return (rng.standard_normal((c["rows"], c["d"]), np.float32),
                (1 + 0.1 * rng.standard_normal(c["d"])).astype(np.float32),
                (0.1 * rng.standard_normal(c["d"])).astype(np.float32),
                (rng.standard_normal((c["d"], c["n"]), np.float32) / np.sqrt(c["d"])).astype(weights),
                (0.1 * rng.standard_normal(c["n"])).astype(np.float32))

    return st.integers(0, 2**32 - 1).map(make)


DECIAX_NORM_LINEAR = pv.KernelSpec(
    name="deciax_norm_linear",
    kernel=norm_linear,
    reference=norm_linear_reference,
    configs=_norm_linear_configs(),
    inputs=_norm_linear_inputs,
    features=("norm", "matmul", "thirdparty"),
    bitwise_stable=False,
)


@needs(DIST, PACKAGE)
def out_mlp(att, x, wo_t, bo, norm_w, norm_b, wi_t, bi, wo2_t, b2, *, eps, act, **_sizes):
    from deciax.kernels import fused

    return fused.out_mlp(att, x, wo_t, bo, norm_w, norm_b, eps, wi_t, bi, wo2_t, b2, act=act)


def out_mlp_reference(att, x, wo_t, bo, norm_w, norm_b, wi_t, bi, wo2_t, b2, *, eps, act, **_config):
    import jax
    from deciax import nn

    # the docstring: y = att @ wo_t + bo + x, then y + act(LayerNorm(y) @ wi_t + bi) @ wo2_t + b2
    y = nn.linear(att, wo_t.T, bo) + x
    h = nn.linear(nn.layer_norm(y, norm_w, norm_b, eps), wi_t.T, bi)
    fp = wo2_t.shape[0]
    g = jax.nn.gelu(h[:, :fp], approximate=False) * h[:, fp:] if act == "gated_gelu" else jax.nn.relu(h)
    return nn.linear(g, wo2_t.T, b2) + y


@st.composite
def _out_mlp_configs(draw):
    return {"rows": draw(st.sampled_from([1, 5, 64])), "d": draw(st.sampled_from([128, 256])),
            "f": draw(st.sampled_from([128, 256])), "act": draw(st.sampled_from(["gated_gelu", "relu"])),
            "eps": 1e-5, "weights": draw(st.sampled_from(["float32", "bfloat16"]))}


def _out_mlp_inputs(c):
    def make(seed):
        rng = np.random.default_rng(seed)
        rows, d, f = c["rows"], c["d"], c["f"]
        wide = 2 * f if c["act"] == "gated_gelu" else f

        def weight(fan_in, fan_out):
            return (rng.standard_normal((fan_in, fan_out), np.float32) / np.sqrt(fan_in)).astype(jnp.dtype(c["weights"]))

        def vector(size, centre=0.0):
            return (centre + 0.1 * rng.standard_normal(size)).astype(np.float32)

        att = rng.standard_normal((rows, d), np.float32).astype(jnp.dtype(c["weights"]))
        return (att, rng.standard_normal((rows, d), np.float32),
                weight(d, d), vector(d), vector(d, 1.0), vector(d), weight(d, wide), vector(wide), weight(f, d),
                vector(d))

    return st.integers(0, 2**32 - 1).map(make)


DECIAX_OUT_MLP = pv.KernelSpec(
    name="deciax_out_mlp",
    kernel=out_mlp,
    reference=out_mlp_reference,
    configs=_out_mlp_configs(),
    inputs=_out_mlp_inputs,
    features=("matmul", "norm", "elementwise", "thirdparty"),
    bitwise_stable=False,
)
