"""atomic-ops (MIT; https://pypi.org/project/atomic-ops/): its fused Gated DeltaNet-2
forward on TPU (three Pallas kernels: chunk scores, the WY solve, the WY recompute, then
the inter-chunk combine), twice: against ``gdn2_token_serial_reference``, the
token-by-token scan the library calls its "ground truth", and against
``gdn2_chunked_wy_reference``, its XLA implementation of the same chunked algorithm
(what ``gdn2_forward`` runs off TPU). docs/thirdparty.md (T4) says why both.

The kernels take a head dim of 128 and a sequence that is a multiple of the chunk ``bt``
(``validate_inputs``); ``KernelConfig`` takes ``bt = 2 * bc`` and ``bc`` a multiple of
``mb``. The spec draws chunks of 16 to 64 tokens, one or several chunks, one or two
heads, an initial state or none, and inputs as a Gated DeltaNet layer makes them: keys
L2-normalised, the write strength ``b`` and gate ``w`` in (0, 1), log decays ``g`` <= 0.
``wy_eps`` stays 0 (a damping the reference does not apply).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st

import pallas_verify as pv
from reference_kernels.thirdparty._library import needs

__all__ = ["ATOMIC_GDN2_FORWARD", "ATOMIC_GDN2_FORWARD_CHUNKED"]

DIST, PACKAGE = "atomic-ops", "atomic_ops"
HEAD_DIM = 128


@needs(DIST, PACKAGE)
def gdn2_forward(q, k, v, w, b, g, h0, *, bt, mb, with_h0, **_sizes):
    from atomic_ops import KernelConfig, gdn2_pallas_forward

    config = KernelConfig(bt=bt, bc=bt // 2, mb=mb, wy_eps=0.0)
    return tuple(gdn2_pallas_forward(q, k, v, w, b, g, HEAD_DIM**-0.5, h0=h0 if with_h0 else None, config=config))


def gdn2_forward_reference(q, k, v, w, b, g, h0, *, with_h0, **_config):
    from atomic_ops import gdn2_token_serial_reference

    # The library's forward returns o in float32 on both its paths (this kernel, and the
    # chunked reference gdn2_forward runs off TPU); the token-serial scan computes in
    # float32 and casts o to q's dtype at the end. q in float32 keeps that last cast out
    # (docs/thirdparty.md, T3); every other input is passed as drawn.
    return tuple(gdn2_token_serial_reference(q.astype(jnp.float32), k, v, g, b, w, HEAD_DIM**-0.5,
                                             h0=h0 if with_h0 else None))


@st.composite
def _configs(draw):
    bt = draw(st.sampled_from([16, 32, 64]))
    return {"batch": draw(st.sampled_from([1, 2])), "chunks": draw(st.sampled_from([1, 2, 3])),
            "heads": draw(st.sampled_from([1, 2])), "bt": bt,
            "mb": draw(st.sampled_from([m for m in (8, 16) if (bt // 2) % m == 0])),
            "with_h0": draw(st.booleans()), "dtype": draw(st.sampled_from(["float32", "bfloat16"]))}


def _inputs(c):
    shape = (c["batch"], c["chunks"] * c["bt"], c["heads"], HEAD_DIM)
    dtype = jnp.dtype(c["dtype"])

    def make(seed):
        rng = np.random.default_rng(seed)

        def unit(x):
            return x / np.linalg.norm(x, axis=-1, keepdims=True)

        def sigmoid(x):
            return 1 / (1 + np.exp(-x))

        normal = lambda: rng.standard_normal(shape, np.float32)  # noqa: E731
        q, k, v = unit(normal()), unit(normal()), normal()
        w, b = sigmoid(normal()), sigmoid(normal())
        g = -np.log1p(np.exp(normal() - 2))  # -softplus: decays exp(g) in (0, 1), most near 1
        h0 = 0.1 * rng.standard_normal((c["batch"], c["heads"], HEAD_DIM, HEAD_DIM), np.float32)
        return (*(x.astype(dtype) for x in (q, k, v, w, b, g)), h0)

    return st.integers(0, 2**32 - 1).map(make)


ATOMIC_GDN2_FORWARD = pv.KernelSpec(
    name="atomic_gdn2_forward",
    kernel=gdn2_forward,
    reference=gdn2_forward_reference,
    configs=_configs(),
    inputs=_inputs,
    features=("scan", "linear_attention", "matmul", "thirdparty"),
    bitwise_stable=False,
)


def gdn2_forward_chunked_reference(q, k, v, w, b, g, h0, *, bt, with_h0, **_config):
    from atomic_ops import gdn2_chunked_wy_reference

    return tuple(gdn2_chunked_wy_reference(q, k, v, g, b, w, HEAD_DIM**-0.5, chunk_size=bt,
                                           h0=h0 if with_h0 else None))


ATOMIC_GDN2_FORWARD_CHUNKED = pv.KernelSpec(
    name="atomic_gdn2_forward_chunked",
    kernel=gdn2_forward,
    reference=gdn2_forward_chunked_reference,
    configs=_configs(),
    inputs=_inputs,
    features=("scan", "linear_attention", "matmul", "thirdparty"),
    bitwise_stable=False,
)
