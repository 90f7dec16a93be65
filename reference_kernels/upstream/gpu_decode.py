"""KernelSpecs wrapping jax's GPU (Triton-style) decode kernels: single-token decode
attention (``ops.gpu.decode_attention``: ``mqa`` and grouped ``gqa``, without lengths, with
per-sequence ``kv_seq_len`` and with ``start_idx`` too) and paged attention
(``ops.gpu.paged_attention``, with and without lengths), in float32, bfloat16 and float16.

Query heads are drawn ragged against the kernels' 16-row head block (they pad), sequence
lengths cut inside a split and inside a page, and splits that hold no valid key at all.
The reference is the modules' own pure-``jnp`` ``*_reference`` math, the softmax in
float32 (``attention_reference``); paged attention's takes dense K/V, which the wrapper gathers from the pages with plain
indexing.

These kernels vmap a ``pallas_call`` over the batch; GPU interpret mode cannot batch one
(the upstream limitation ``VMAP_GPU_INTERPRET`` below), so they run on the HLO interpreter.
"""

from __future__ import annotations

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st

import pallas_verify as pv
from reference_kernels._draw import normal, seeded, without
from reference_kernels.upstream.gpu_ops import VMAP_GPU_INTERPRET

with warnings.catch_warnings():
    # Each module warns on import that it moved to tokamax; the kernels still ship in jax.
    warnings.filterwarnings("ignore", r"jax\.experimental\.pallas\.ops\.gpu\.\w+ is deprecated",
                            DeprecationWarning)
    from jax.experimental.pallas.ops.gpu import decode_attention as decode
    from jax.experimental.pallas.ops.gpu import paged_attention as gpu_paged

__all__ = ["GPU_DECODE_GQA", "GPU_DECODE_MQA", "GPU_PAGED_ATTENTION", "LENGTHS"]

#: How the valid keys of each sequence are given: all valid, ``kv_seq_len`` only, or a
#: ``[start_idx, kv_seq_len)`` window.
LENGTHS = ("none", "kv_seq_len", "start_and_len")
_DTYPES = ("float32", "bfloat16", "float16")


@st.composite
def _decode_configs(draw, *, grouped: bool):
    seq = draw(st.sampled_from([64, 128, 256]))
    k_splits = draw(st.sampled_from([s for s in (1, 2, 4) if seq // s >= 16]))
    split = seq // k_splits
    kv_heads = draw(st.sampled_from([1, 2])) if grouped else 1
    return {"batch": draw(st.integers(1, 2)), "seq": seq, "kv_heads": kv_heads,
            "heads": kv_heads * draw(st.sampled_from([1, 4, 16, 20])),
            "d": draw(st.sampled_from([32, 64])), "dtype": draw(st.sampled_from(_DTYPES)),
            "lengths": draw(st.sampled_from(LENGTHS)),
            "k_splits": k_splits, "block_k": draw(st.sampled_from([b for b in (16, 32, 64) if split % b == 0]))}


def _decode_inputs(*, grouped: bool):
    def inputs(config):
        b, s, d, dtype = config["batch"], config["seq"], config["d"], jnp.dtype(config["dtype"])
        kv_shape = (b, s, config["kv_heads"], d) if grouped else (b, s, d)

        def make(rng):
            arrays = (normal(rng, (b, config["heads"], d), dtype), normal(rng, kv_shape, dtype),
                      normal(rng, kv_shape, dtype))
            if config["lengths"] == "none":
                return arrays
            lengths = rng.integers(1, s + 1, size=(b,), dtype=np.int32)
            if config["lengths"] == "kv_seq_len":
                return (*arrays, lengths)
            # A window [start, length) that keeps at least one key.
            return (*arrays, lengths, (rng.random(b) * lengths).astype(np.int32))

        return seeded(make)

    return inputs


def _windows(windows: tuple) -> dict:
    """``kv_seq_len`` and ``start_idx`` keyword arguments from the extra inputs."""
    return dict(zip(("kv_seq_len", "start_idx"), windows, strict=False))


def _decode(kernel):
    def call(q, k, v, *windows, k_splits, block_k):
        out = kernel(q, k, v, **_windows(windows), k_splits=k_splits, block_k=block_k)
        # Upstream returns float32 for bfloat16 inputs (its last normalisation adds a numpy
        # float32 eps, which promotes; measured on jax 0.12.0.1); its own reference keeps
        # q's dtype. The values are compared at q's precision.
        return out.astype(q.dtype)

    call.__name__ = kernel.__name__
    return call


def attention_reference(q, k, v, start_idx=None, kv_seq_len=None, *, sm_scale=None):
    """Upstream's ``gqa_reference`` (``mqa_reference`` for 3-d ``k``, ``v``: one KV head;
    ``paged_attention_reference`` with ``sm_scale=1``): the softmax in float32, cast to
    ``q``'s dtype at the end. The kernels round their softmax weights to ``v``'s dtype
    before they meet ``v`` (``s_curr.astype(v.dtype)``), as a matrix unit's inputs are
    rounded; the precision oracle allows that rounding (``reference.Truth.dots``)."""
    if k.ndim == 3:
        k, v = k[:, :, None], v[:, :, None]
    batch, heads, d = q.shape
    grouped = q.astype(jnp.float32).reshape(batch, k.shape[2], heads // k.shape[2], d)
    scale = 1 / math.sqrt(d) if sm_scale is None else sm_scale
    logits = jnp.einsum("bkgd,bskd->bkgs", grouped, k.astype(jnp.float32)) * scale
    if start_idx is not None or kv_seq_len is not None:
        keys = jnp.arange(k.shape[1])[None, :]
        start = jnp.broadcast_to(0 if start_idx is None else start_idx, (batch,))[:, None]
        end = jnp.broadcast_to(k.shape[1] if kv_seq_len is None else kv_seq_len, (batch,))[:, None]
        valid = (keys >= start) & (keys < end)
        logits = logits + (~valid[:, None, None, :]) * (0.7 * jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("bkgs,bskd->bkgd", weights, v.astype(jnp.float32))
    return out.reshape(batch, heads, d).astype(q.dtype)


def _decode_reference(q, k, v, *windows):
    return attention_reference(q, k, v, **_windows(windows))


_DECODE_SIZES = ("batch", "seq", "kv_heads", "heads", "d", "dtype", "lengths")


def _decode_spec(name: str, kernel, *, grouped: bool) -> pv.KernelSpec:
    return pv.KernelSpec(
        name=name,
        kernel=without(_decode(kernel), *_DECODE_SIZES),
        reference=without(_decode_reference, *_DECODE_SIZES, "k_splits", "block_k"),
        configs=_decode_configs(grouped=grouped),
        inputs=_decode_inputs(grouped=grouped),
        platforms=("gpu",),
        features=("attention", "online_softmax", "split_k", "masked_load", "vmap",
                  "rank0_blocks", "upstream"),
        unsupported=VMAP_GPU_INTERPRET,
        bitwise_stable=False,
    )


GPU_DECODE_MQA = _decode_spec("upstream_gpu_decode_mqa", decode.mqa, grouped=False)
GPU_DECODE_GQA = _decode_spec("upstream_gpu_decode_gqa", decode.gqa, grouped=True)


@st.composite
def _paged_configs(draw):
    pages_per_sequence = draw(st.sampled_from([2, 4, 8]))
    k_splits = draw(st.sampled_from([s for s in (1, 2, 4) if pages_per_sequence % s == 0]))
    kv_heads = draw(st.sampled_from([1, 2]))
    return {"batch": draw(st.integers(1, 2)), "kv_heads": kv_heads,
            "heads": kv_heads * draw(st.sampled_from([1, 4, 16, 20])),
            "d": draw(st.sampled_from([32, 64])), "page_size": draw(st.sampled_from([16, 32])),
            "pages_per_sequence": pages_per_sequence, "total_pages": draw(st.integers(2, 12)),
            "dtype": draw(st.sampled_from(_DTYPES)), "with_lengths": draw(st.booleans()),
            "k_splits": k_splits, "pages_per_compute_block": draw(st.sampled_from([1, 2, 4]))}


def _paged_inputs(config):
    b, pps, ps = config["batch"], config["pages_per_sequence"], config["page_size"]
    pages = (config["kv_heads"], config["total_pages"], ps, config["d"])
    dtype = jnp.dtype(config["dtype"])

    def make(rng):
        tables = rng.integers(0, config["total_pages"], size=(b, pps), dtype=np.int32)
        arrays = (normal(rng, (b, config["heads"], config["d"]), dtype), normal(rng, pages, dtype),
                  normal(rng, pages, dtype), tables)
        if not config["with_lengths"]:
            return arrays
        return (*arrays, rng.integers(1, pps * ps + 1, size=(b,), dtype=np.int32))

    return seeded(make)


def paged_attention(q, k_pages, v_pages, tables, *lengths, k_splits, pages_per_compute_block):
    return gpu_paged.paged_attention(q, k_pages, v_pages, tables, lengths[0] if lengths else None,
                                     k_splits=k_splits, pages_per_compute_block=pages_per_compute_block)


def paged_attention_reference(q, k_pages, v_pages, tables, *lengths):
    def dense(pages):  # (kv_heads, pages, page_size, d) -> (batch, seq, kv_heads, d)
        gathered = pages[:, tables]  # (kv_heads, batch, pages_per_sequence, page_size, d)
        kv_heads, batch = gathered.shape[:2]
        return gathered.reshape(kv_heads, batch, -1, gathered.shape[-1]).transpose(1, 2, 0, 3)

    return attention_reference(q, dense(k_pages), dense(v_pages), kv_seq_len=lengths[0] if lengths else None,
                               sm_scale=1.0)


_PAGED_SIZES = ("batch", "kv_heads", "heads", "d", "page_size", "pages_per_sequence",
                "total_pages", "dtype", "with_lengths")

GPU_PAGED_ATTENTION = pv.KernelSpec(
    name="upstream_gpu_paged_attention",
    kernel=without(paged_attention, *_PAGED_SIZES),
    reference=without(paged_attention_reference, *_PAGED_SIZES, "k_splits", "pages_per_compute_block"),
    configs=_paged_configs(),
    inputs=_paged_inputs,
    platforms=("gpu",),
    features=("attention", "paged", "online_softmax", "split_k", "masked_load", "vmap", "upstream"),
    unsupported=VMAP_GPU_INTERPRET,
    bitwise_stable=False,
)
