"""KernelSpecs wrapping jax's TPU splash attention (``ops.tpu.splash_attention``): the
multi-head kernel (one K/V head per Q head, or grouped: fewer K/V heads) and the
multi-query kernel (one K/V shared by every head), under causal, local, chunked-causal,
full and random dense masks, a different mask per head, optional segment ids and an
optional logit soft cap, in float32 and bfloat16.

The reference is the module's own ``make_masked_m{h,q}a_reference``: plain ``einsum`` and
softmax over the dense mask the mask object materialises, independent of the kernel's
block-sparse mask processing (``mask_info``), which is what the kernel path exercises.
Every mask keeps at least one key per query row (the diagonal), since a fully masked row
has no defined softmax.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental.pallas.ops.tpu import splash_attention as sa
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_mask as sa_mask

import pallas_verify as pv
from reference_kernels._draw import normal, seeded, without

__all__ = ["MASK_KINDS", "TPU_SPLASH_MHA", "TPU_SPLASH_MQA", "head_masks"]

#: Mask kinds drawn per head; "random" is a dense NumpyMask, the others are lazy masks
#: the kernel evaluates block by block.
MASK_KINDS = ("causal", "full", "local", "chunked", "random")
# (left, right) local windows; an unbounded (None, None) window makes the kernel capture
# its dense mask as a constant, which pallas_call rejects at trace time (a misuse: that
# mask is FullMask), so it is never drawn.
_WINDOWS = ((0, 0), (None, 0), (31, 0), (128, 17), (0, None), (31, None))
_SHAPE_KEYS = ("heads", "kv_heads", "d", "dtype", "segments")


def _mask(kind: str, shape: tuple[int, int], *, window: tuple, chunk: int, seed: int) -> sa.Mask:
    if kind == "causal":
        return sa.CausalMask(shape)
    if kind == "full":
        return sa.FullMask(shape)
    if kind == "local":
        return sa.LocalMask(shape, window_size=window, offset=0)
    if kind == "chunked":
        return sa_mask.ChunkedCausalMask(shape, chunk_size=chunk)
    dense = np.random.default_rng(seed).random(shape) < 0.5
    dense[np.arange(min(shape)), np.arange(min(shape))] = True
    return sa.NumpyMask(dense)


def head_masks(config: dict) -> sa.MultiHeadMask:
    """One mask per query head, as ``config`` describes them."""
    shape = (config["q_seq"], config["kv_seq"])
    return sa.MultiHeadMask([
        _mask(kind, shape, window=tuple(config["window"]), chunk=config["chunk"],
              seed=config["mask_seed"] + head)
        for head, kind in enumerate(config["masks"])])


def _block_sizes(config: dict) -> sa.BlockSizes:
    return sa.BlockSizes(block_q=config["block_q"], block_kv=config["block_kv"],
                         block_kv_compute=config["block_kv_compute"])


def _segment_ids(segments: tuple) -> sa.SegmentIds | None:
    return sa.SegmentIds(q=segments[0], kv=segments[0]) if segments else None


def _splash(is_mqa: bool):
    make = sa.make_splash_mqa_single_device if is_mqa else sa.make_splash_mha_single_device

    def splash(q, k, v, *segments, soft_cap, **config):
        kernel = make(head_masks(config), block_sizes=_block_sizes(config),
                      attn_logits_soft_cap=soft_cap)
        return kernel(q, k, v, segment_ids=_segment_ids(segments))

    splash.__name__ = f"splash_{'mqa' if is_mqa else 'mha'}"
    return splash


def _reference(is_mqa: bool):
    make = sa.make_masked_mqa_reference if is_mqa else sa.make_masked_mha_reference

    def reference(q, k, v, *segments, soft_cap, **config):
        out = make(head_masks(config))(q, k, v, _segment_ids(segments),
                                       attn_logits_soft_cap=soft_cap)
        # The reference computes in float32 and returns float32; the kernel returns q's dtype.
        return out.astype(q.dtype)

    reference.__name__ = f"splash_{'mqa' if is_mqa else 'mha'}_reference"
    return reference


def _configs(*, is_mqa: bool) -> st.SearchStrategy[dict]:
    @st.composite
    def draw_config(draw):
        q_seq, kv_seq = draw(st.sampled_from([128, 256])), draw(st.sampled_from([128, 256]))
        square = q_seq == kv_seq
        # Local, chunked and random masks keep the diagonal only on a square mask.
        kinds = MASK_KINDS if square else ("causal", "full")
        block_q = draw(st.sampled_from(sorted({128, q_seq})))
        block_kv = draw(st.sampled_from(sorted({128, kv_seq})))
        points = (q_seq // block_q) * (kv_seq // block_kv)
        heads = draw(st.integers(1, max(1, 8 // points)))
        kv_heads = 1 if is_mqa else draw(st.sampled_from([h for h in (heads, 1) if heads % h == 0]))
        return {
            "heads": heads, "kv_heads": kv_heads, "q_seq": q_seq, "kv_seq": kv_seq, "d": 128,
            "dtype": draw(st.sampled_from(["float32", "bfloat16"])),
            "masks": tuple(draw(st.sampled_from(kinds)) for _ in range(heads)),
            "window": draw(st.sampled_from(_WINDOWS)), "chunk": draw(st.sampled_from([32, 100, 128])),
            "mask_seed": draw(st.integers(0, 7)),
            "segments": square and draw(st.booleans()),
            "soft_cap": draw(st.sampled_from([None, 2.0])),
            "block_q": block_q, "block_kv": block_kv,
            "block_kv_compute": draw(st.sampled_from(sorted({128, block_kv}))),
        }

    return draw_config()


def _inputs(*, is_mqa: bool):
    def inputs(config):
        dtype = jnp.dtype(config["dtype"])
        q_shape = (config["heads"], config["q_seq"], config["d"])
        kv_shape = (config["kv_seq"], config["d"])
        if not is_mqa:
            kv_shape = (config["kv_heads"], *kv_shape)

        def make(rng):
            arrays = (normal(rng, q_shape, dtype), normal(rng, kv_shape, dtype),
                      normal(rng, kv_shape, dtype))
            if not config["segments"]:
                return arrays
            # Contiguous segments (a packed batch of sequences): sorted ids from 0.
            cuts = np.sort(rng.integers(0, config["q_seq"], size=3))
            return (*arrays, np.searchsorted(cuts, np.arange(config["q_seq"]), side="right").astype(np.int32))

        return seeded(make)

    return inputs


def _spec(name: str, *, is_mqa: bool, features: tuple[str, ...]) -> pv.KernelSpec:
    return pv.KernelSpec(
        name=name,
        kernel=without(_splash(is_mqa), *_SHAPE_KEYS),
        reference=without(_reference(is_mqa), *_SHAPE_KEYS),
        configs=_configs(is_mqa=is_mqa),
        inputs=_inputs(is_mqa=is_mqa),
        features=("attention", "online_softmax", "block_sparse", "scalar_prefetch",
                  "masked", "upstream", *features),
        bitwise_stable=False,
    )


TPU_SPLASH_MHA = _spec("upstream_tpu_splash_mha", is_mqa=False, features=("grouped_heads",))
TPU_SPLASH_MQA = _spec("upstream_tpu_splash_mqa", is_mqa=True, features=("multi_query",))
