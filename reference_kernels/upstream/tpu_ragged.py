"""KernelSpec wrapping jax's TPU ragged paged attention
(``ops.tpu.ragged_paged_attention``): mixed prefill and decode over a paged KV cache, with
ragged per-sequence query and KV lengths, fewer live sequences than slots, optional
sliding window and logit soft cap.

The reference gathers every token's pages densely and applies the causal (and sliding
window) mask per token, independent of the kernel's manual multi-page DMAs. The module's
``ref_ragged_paged_attention`` loops over concrete sequence lengths and cannot be jitted;
the tests check this reference against it.

Neither interpreter of jax 0.12.0.1 runs this kernel: the failures are JAX's own and occur
with the mode forced by hand, without pallas-verify (``unsupported`` quotes them).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as rpa

import pallas_verify as pv
from reference_kernels._draw import normal, seeded, without

__all__ = ["TPU_RAGGED_PAGED_ATTENTION"]


def ragged_paged_attention(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, *,
                           sm_scale, sliding_window, soft_cap, kv_pages_per_block, queries_per_block):
    return rpa.ragged_paged_attention(
        q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, sm_scale=sm_scale,
        sliding_window=sliding_window, soft_cap=soft_cap,
        num_kv_pages_per_block=kv_pages_per_block, num_queries_per_block=queries_per_block)


def ragged_paged_attention_reference(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, *,
                                     sm_scale, sliding_window, soft_cap):
    """Every token valid (``cu_q_lens[num_seqs] == len(q)``, as the inputs draw them)."""
    del num_seqs  # the trailing slots repeat the last cumulative length
    tokens, q_heads, d = q.shape
    kv_heads = kv_pages.shape[2] // 2
    token = jnp.arange(tokens)
    seq = jnp.searchsorted(cu_q_lens, token, side="right") - 1
    q_len = cu_q_lens[seq + 1] - cu_q_lens[seq]
    q_span = kv_lens[seq] - q_len + (token - cu_q_lens[seq])  # each token's last key
    pages = kv_pages[page_indices[seq]]  # (token, page, slot, 2 * kv_heads, d)
    k, v = (jnp.repeat(pages[..., part::2, :].reshape(tokens, -1, kv_heads, d),
                       q_heads // kv_heads, axis=2) for part in (0, 1))
    logits = jnp.einsum("thd,tkhd->thk", q, k, preferred_element_type=jnp.float32) * sm_scale
    if soft_cap is not None:
        logits = soft_cap * jnp.tanh(logits / soft_cap)
    key = jnp.arange(k.shape[1])[None, :]
    allowed = key <= q_span[:, None]
    if sliding_window is not None:
        allowed &= key > q_span[:, None] - sliding_window
    weights = jax.nn.softmax(jnp.where(allowed[:, None, :], logits, -jnp.inf), axis=-1)
    return jnp.einsum("thk,tkhd->thd", weights, v.astype(jnp.float32)).astype(q.dtype)


@st.composite
def _configs(draw):
    kv_heads = draw(st.sampled_from([1, 2]))
    return {"tokens": draw(st.sampled_from([8, 16])), "max_seqs": draw(st.integers(1, 3)),
            "kv_heads": kv_heads, "q_heads": kv_heads * draw(st.sampled_from([1, 2])),
            "d": 128, "page_size": 16, "pages_per_seq": draw(st.sampled_from([2, 4])),
            "sm_scale": draw(st.sampled_from([1.0, 0.125])),
            "sliding_window": draw(st.sampled_from([None, 8])),
            "soft_cap": draw(st.sampled_from([None, 2.0])),
            "kv_pages_per_block": draw(st.sampled_from([1, 2])),
            "queries_per_block": draw(st.sampled_from([8, 16]))}


def _inputs(config):
    tokens, slots, pps, ps = config["tokens"], config["max_seqs"], config["pages_per_seq"], config["page_size"]

    def make(rng):
        live = int(rng.integers(1, min(slots, tokens) + 1))
        # Ragged query lengths summing to `tokens`; each KV length covers its queries.
        cuts = np.sort(rng.choice(np.arange(1, tokens), size=live - 1, replace=False))
        q_lens = np.diff([0, *cuts, tokens])
        kv_lens = np.zeros(slots, np.int32)
        kv_lens[:live] = [int(rng.integers(n, pps * ps + 1)) for n in q_lens]
        cu_q_lens = np.zeros(slots + 1, np.int32)
        cu_q_lens[1:live + 1] = np.cumsum(q_lens)
        cu_q_lens[live + 1:] = cu_q_lens[live]
        total_pages = slots * pps
        page_indices = rng.permutation(total_pages).reshape(slots, pps).astype(np.int32)
        q = normal(rng, (tokens, config["q_heads"], config["d"]))
        kv_pages = normal(rng, (total_pages, ps, 2 * config["kv_heads"], config["d"]))
        return q, kv_pages, kv_lens, page_indices, cu_q_lens, np.array([live], np.int32)

    return seeded(make)


_SIZES = ("tokens", "max_seqs", "kv_heads", "q_heads", "d", "page_size", "pages_per_seq")

TPU_RAGGED_PAGED_ATTENTION = pv.KernelSpec(
    name="upstream_tpu_ragged_paged_attention",
    kernel=without(ragged_paged_attention, *_SIZES),
    reference=without(ragged_paged_attention_reference, *_SIZES, "kv_pages_per_block", "queries_per_block"),
    configs=_configs(),
    inputs=_inputs,
    features=("attention", "paged", "ragged", "manual_dma", "scalar_prefetch", "upstream"),
    unsupported={
        "interpret": "jax 0.12.0.1's HLO interpreter fails on the kernel's SMEM scalar reads "
                     "(AttributeError: 'TypedInt' object has no attribute 'shape'), also with "
                     "interpret=True forced by hand",
        "tpu_interpret": "jax 0.12.0.1's TPU interpret mode fails on the kernel's reshaped "
                         "page refs (AttributeError: 'ReshapeTransform' object has no attribute "
                         "'indices'), also with InterpretParams() forced by hand",
    },
    bitwise_stable=False,
)
