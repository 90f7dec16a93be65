"""KernelSpecs wrapping the GPU (Triton-style) kernels shipped in
``jax.experimental.pallas.ops.gpu``: attention, layer norm, RMS norm and softmax, each
against the reference function its module ships where it has one. They take
``interpret=False`` as a default argument; ``pallas_call`` uses the forced mode instead."""

from __future__ import annotations

import warnings

import jax
from hypothesis import strategies as st

import pallas_verify as pv
from reference_kernels._draw import normal, seeded, without

with warnings.catch_warnings():
    # Each module warns on import that it moved to tokamax; the kernels still ship in jax.
    warnings.filterwarnings("ignore", r"jax\.experimental\.pallas\.ops\.gpu\.\w+ is deprecated",
                            DeprecationWarning)
    from jax.experimental.pallas.ops.gpu import attention as gpu_attention
    from jax.experimental.pallas.ops.gpu import layer_norm as gpu_layer_norm
    from jax.experimental.pallas.ops.gpu import rms_norm as gpu_rms_norm
    from jax.experimental.pallas.ops.gpu import softmax as gpu_softmax

__all__ = ["GPU_ATTENTION", "GPU_LAYER_NORM", "GPU_RMS_NORM", "GPU_SOFTMAX", "VMAP_GPU_INTERPRET"]


def attention(q, k, v, *, causal, sm_scale, block_q, block_k):
    sizes = gpu_attention.BlockSizes(block_q=block_q, block_k=block_k)
    return gpu_attention.mha(q, k, v, None, sm_scale=sm_scale, causal=causal, block_sizes=sizes)


def attention_reference(q, k, v, *, causal, sm_scale, **_blocks):
    return gpu_attention.mha_reference(q, k, v, None, sm_scale=sm_scale, causal=causal)


@st.composite
def _attention_configs(draw):
    seq = draw(st.sampled_from([64, 128]))
    return {"batch": 1, "seq": seq, "heads": draw(st.integers(1, 2)),
            "d": draw(st.sampled_from([32, 64])), "causal": draw(st.booleans()),
            "sm_scale": draw(st.sampled_from([1.0, 0.125])),
            "block_q": draw(st.sampled_from([32, 64])), "block_k": draw(st.sampled_from([32, 64]))}


def _attention_inputs(config):
    shape = (config["batch"], config["seq"], config["heads"], config["d"])
    return seeded(lambda rng: tuple(normal(rng, shape) for _ in range(3)))


GPU_ATTENTION = pv.KernelSpec(
    name="upstream_gpu_attention",
    kernel=without(attention, "batch", "seq", "heads", "d"),
    reference=without(attention_reference, "batch", "seq", "heads", "d"),
    configs=_attention_configs(),
    inputs=_attention_inputs,
    platforms=("gpu",),
    features=("attention", "online_softmax", "masked_load", "upstream"),
    unsupported={"gpu_interpret": "GPU interpret mode runs pallas_call only with whole-array "
                 "blocks (bare AssertionError on mha's (block_q, head_dim) BlockSpecs)"},
    bitwise_stable=False,
)


@st.composite
def _row_configs(draw):
    return {"batch": draw(st.integers(1, 2)), "rows": draw(st.integers(1, 4)),
            "cols": draw(st.sampled_from([128, 200, 256]))}


def _norm_inputs(config):
    def make(rng):
        x = normal(rng, (config["batch"], config["rows"], config["cols"])) * 2 + 0.5
        return x, normal(rng, (config["cols"],)), normal(rng, (config["cols"],))
    return seeded(make)


_ROWS = ("batch", "rows", "cols")
# These ops vmap a whole-array pallas_call; under GPU interpret mode the batching rule
# rejects the interpreter's keyword (a JAX 0.12.0.1 bug).
VMAP_GPU_INTERPRET = {
    "gpu_interpret": "GPU interpret mode cannot vmap a pallas_call (TypeError: "
    "_pallas_call_batching_rule() got an unexpected keyword argument 'kernel_arg_transforms')"}

GPU_LAYER_NORM = pv.KernelSpec(
    name="upstream_gpu_layer_norm",
    kernel=without(gpu_layer_norm.layer_norm, *_ROWS),
    reference=without(gpu_layer_norm.layer_norm_reference, *_ROWS),
    configs=_row_configs(),
    inputs=_norm_inputs,
    platforms=("gpu",),
    features=("normalization", "reduction", "masked_load", "vmap", "upstream"),
    unsupported=VMAP_GPU_INTERPRET,
    bitwise_stable=False,
)

GPU_RMS_NORM = pv.KernelSpec(
    name="upstream_gpu_rms_norm",
    kernel=without(gpu_rms_norm.rms_norm, *_ROWS),
    reference=without(gpu_rms_norm.rms_norm_reference, *_ROWS),
    configs=_row_configs(),
    inputs=_norm_inputs,
    platforms=("gpu",),
    features=("normalization", "reduction", "masked_load", "vmap", "upstream"),
    unsupported=VMAP_GPU_INTERPRET,
    bitwise_stable=False,
)

GPU_SOFTMAX = pv.KernelSpec(
    name="upstream_gpu_softmax",
    kernel=without(lambda x: gpu_softmax.softmax(x, axis=-1), *_ROWS),
    reference=without(lambda x: jax.nn.softmax(x, axis=-1), *_ROWS),
    configs=_row_configs(),
    inputs=lambda c: seeded(lambda rng: (normal(rng, (c["batch"], c["rows"], c["cols"])) * 3,)),
    platforms=("gpu",),
    features=("reduction", "masked_load", "vmap", "upstream"),
    unsupported=VMAP_GPU_INTERPRET,
    bitwise_stable=False,
)
