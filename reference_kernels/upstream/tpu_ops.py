"""KernelSpecs wrapping the TPU kernels shipped in ``jax.experimental.pallas.ops.tpu``:
flash attention, matmul, megablox grouped matmul (gmm and its transposed tgmm), paged
attention and the example
``double`` kernel. None of them
passes ``interpret=`` on this path (gmm takes ``interpret=False`` as a default, which the
forced mode overrides), so every interpreter is forced from outside."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental.pallas.ops.tpu import example_kernel
from jax.experimental.pallas.ops.tpu import flash_attention as fa
from jax.experimental.pallas.ops.tpu import matmul as tpu_matmul
from jax.experimental.pallas.ops.tpu.megablox import ops as megablox
from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention_kernel as paged

import pallas_verify as pv
import strategies as pvs
from reference_kernels._draw import normal, seeded, without

__all__ = ["BACKWARD_BLOCKS", "TPU_DOUBLE", "TPU_FLASH_ATTENTION", "TPU_GMM", "TPU_MATMUL",
           "TPU_PAGED_ATTENTION", "TPU_TGMM"]


#: Backward block sizes of ``fa.BlockSizes``: the dK/dV kernel's and the dQ kernel's.
BACKWARD_BLOCKS = ("block_q_major_dkv", "block_k_major_dkv", "block_k_dkv", "block_q_dkv",
                   "block_k_major_dq", "block_k_dq", "block_q_dq")


def flash_attention(q, k, v, *, causal, sm_scale, block_q, block_k_major, block_k, **backward):
    """Upstream flash attention; ``backward`` holds the ``BACKWARD_BLOCKS`` its VJP uses."""
    sizes = fa.BlockSizes(block_q=block_q, block_k_major=block_k_major, block_k=block_k,
                          block_b=1, **backward)
    return fa.flash_attention(q, k, v, causal=causal, sm_scale=sm_scale, block_sizes=sizes)


def flash_attention_reference(q, k, v, *, causal, sm_scale, **_blocks):
    # mha_reference's own VJP raises NotImplementedError for sm_scale != 1; this one is
    # differentiated by jax.
    return fa.mha_reference_no_custom_vjp(q, k, v, None, causal=causal, sm_scale=sm_scale)


@st.composite
def _flash_configs(draw):
    # Upstream rules, not a tiling strategies draws: every major block is 128 or the whole
    # sequence, every minor block 128 (it must divide its major block).
    seq = draw(st.sampled_from([128, 256]))
    majors = st.sampled_from([128, seq])
    block_k_major, block_q = draw(majors), draw(majors)
    points = (seq // block_q) * (seq // block_k_major)
    backward = {"block_q_major_dkv": draw(majors), "block_k_major_dkv": draw(majors),
                "block_k_dkv": 128, "block_q_dkv": 128, "block_k_major_dq": draw(majors),
                "block_k_dq": 128, "block_q_dq": draw(majors)}
    return {"heads": draw(st.integers(1, max(1, 4 // points))), "seq": seq,
            "d": draw(st.sampled_from([64, 128])), "causal": draw(st.booleans()),
            "sm_scale": draw(st.sampled_from([1.0, 0.125])), "block_q": block_q,
            "block_k_major": block_k_major, "block_k": 128, **backward}


def _flash_inputs(config):
    shape = (1, config["heads"], config["seq"], config["d"])
    return seeded(lambda rng: tuple(normal(rng, shape) for _ in range(3)))


TPU_FLASH_ATTENTION = pv.KernelSpec(
    name="upstream_tpu_flash_attention",
    kernel=without(flash_attention, "heads", "seq", "d"),
    reference=without(flash_attention_reference, "heads", "seq", "d"),
    configs=_flash_configs(),
    inputs=_flash_inputs,
    features=("attention", "online_softmax", "accumulator", "upstream", "custom_vjp"),
    transforms=("grad",),
    bitwise_stable=False,
)


def matmul(x, y, *, bm, bn, bk):
    return tpu_matmul.matmul(x, y, block_shape=(bm, bn), block_k=bk)


@st.composite
def _matmul_configs(draw):
    bm, bn, bk = draw(st.sampled_from([8, 128])), 128, draw(st.sampled_from([128, 256]))
    return {"m": bm * draw(st.integers(1, 2)), "n": bn * draw(st.integers(1, 2)),
            "k": bk * draw(st.integers(1, 2)), "bm": bm, "bn": bn, "bk": bk}


TPU_MATMUL = pv.KernelSpec(
    name="upstream_tpu_matmul",
    kernel=without(matmul, "m", "n", "k"),
    reference=without(lambda x, y: jnp.dot(x, y), "m", "n", "k", "bm", "bn", "bk"),
    configs=_matmul_configs(),
    inputs=lambda c: seeded(lambda rng: (normal(rng, (c["m"], c["k"])),
                                         normal(rng, (c["k"], c["n"])))),
    features=("matmul", "accumulator", "upstream"),
    bitwise_stable=False,
)


def gmm(lhs, rhs, group_sizes, *, tm, tk, tn):
    return megablox.gmm(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                        tiling=(tm, tk, tn))


def gmm_reference(lhs, rhs, group_sizes):
    ends = jnp.cumsum(group_sizes)
    group = jnp.searchsorted(ends, jnp.arange(lhs.shape[0]), side="right")
    per_group = jnp.einsum("mk,gkn->gmn", lhs, rhs)
    return jnp.take_along_axis(per_group, group[None, :, None], axis=0)[0]


@st.composite
def _gmm_configs(draw):
    tm = draw(st.sampled_from([8, 16]))
    return {"m": tm * draw(st.integers(1, 4)), "k": 128, "n": 128, "groups": draw(st.integers(1, 3)),
            "tm": tm, "tk": 128, "tn": 128}


def _gmm_inputs(config):
    m, k, n, groups = config["m"], config["k"], config["n"], config["groups"]

    def make(rng):
        sizes = rng.multinomial(m, np.ones(groups) / groups).astype(np.int32)
        return normal(rng, (m, k)), normal(rng, (groups, k, n)), sizes

    return seeded(make)


_GMM_SIZES = ("m", "k", "n", "groups")

TPU_GMM = pv.KernelSpec(
    name="upstream_tpu_gmm",
    kernel=without(gmm, *_GMM_SIZES),
    reference=without(gmm_reference, *_GMM_SIZES, "tm", "tk", "tn"),
    configs=_gmm_configs(),
    inputs=_gmm_inputs,
    features=("matmul", "grouped", "scalar_prefetch", "ragged", "upstream"),
    bitwise_stable=False,
)


def tgmm(lhs, rhs, group_sizes, *, tm, tk, tn):
    return megablox.backend.tgmm(lhs, rhs, group_sizes, preferred_element_type=jnp.float32,
                                 tiling=(tm, tk, tn))


def tgmm_reference(lhs, rhs, group_sizes):
    """Per group g: lhs[:, rows of g] @ rhs[rows of g, :] (zeros for an empty group)."""
    ends = jnp.cumsum(group_sizes)
    group = jnp.searchsorted(ends, jnp.arange(lhs.shape[1]), side="right")
    member = group[None, :] == jnp.arange(group_sizes.shape[0])[:, None]  # (groups, m)
    return jnp.einsum("km,gm,mn->gkn", lhs, member.astype(lhs.dtype), rhs)


def _tgmm_inputs(config):
    m, k, n, groups = config["m"], config["k"], config["n"], config["groups"]

    def make(rng):
        sizes = rng.multinomial(m, np.ones(groups) / groups).astype(np.int32)
        return normal(rng, (k, m)), normal(rng, (m, n)), sizes

    return seeded(make)


TPU_TGMM = pv.KernelSpec(
    name="upstream_tpu_tgmm",
    kernel=without(tgmm, *_GMM_SIZES),
    reference=without(tgmm_reference, *_GMM_SIZES, "tm", "tk", "tn"),
    configs=_gmm_configs(),
    inputs=_tgmm_inputs,
    features=("matmul", "grouped", "scalar_prefetch", "ragged", "upstream"),
    bitwise_stable=False,
)


def paged_attention(q, k_pages, v_pages, lengths, page_indices, *, pages_per_compute_block):
    return paged.paged_attention(q, k_pages, v_pages, lengths, page_indices,
                                 pages_per_compute_block=pages_per_compute_block)


def paged_attention_reference(q, k_pages, v_pages, lengths, page_indices):
    batch, q_heads, d = q.shape
    kv_heads = k_pages.shape[0]
    # The kernel loads K and V pages as bfloat16 (``_maybe_dequantize``'s default dtype).
    k_pages, v_pages = (p.astype(jnp.bfloat16).astype(jnp.float32) for p in (k_pages, v_pages))
    k = k_pages[:, page_indices].reshape(kv_heads, batch, -1, d)  # (h, b, s, d)
    v = v_pages[:, page_indices].reshape(kv_heads, batch, -1, d)
    qg = q.reshape(batch, kv_heads, q_heads // kv_heads, d)
    logits = jnp.einsum("bhgd,hbsd->bhgs", qg, k)
    valid = jnp.arange(k.shape[2])[None, :] < lengths[:, None]
    logits = jnp.where(valid[:, None, None, :], logits, -jnp.inf)
    out = jnp.einsum("bhgs,hbsd->bhgd", jax.nn.softmax(logits, axis=-1), v)
    return out.reshape(batch, q_heads, d)


@st.composite
def _paged_configs(draw):
    return {"batch": draw(st.integers(1, 2)), "kv_heads": 1,
            "q_heads": draw(st.sampled_from([1, 2, 8])), "pages_per_sequence": 4,
            "page_size": 16, "total_pages": draw(st.integers(4, 12)), "d": 128,
            "pages_per_compute_block": draw(st.sampled_from([1, 2, 4]))}


def _paged_inputs(config):
    b, hkv, hq, pps = config["batch"], config["kv_heads"], config["q_heads"], config["pages_per_sequence"]
    ps, total, d = config["page_size"], config["total_pages"], config["d"]

    def make(rng):
        pages = (hkv, total, ps, d)
        lengths = rng.integers(1, pps * ps + 1, size=(b,), dtype=np.int32)
        indices = rng.integers(0, total, size=(b, pps), dtype=np.int32)
        return normal(rng, (b, hq, d)), normal(rng, pages), normal(rng, pages), lengths, indices

    return seeded(make)


_PAGED_SIZES = ("batch", "kv_heads", "q_heads", "pages_per_sequence", "page_size",
                "total_pages", "d")

TPU_PAGED_ATTENTION = pv.KernelSpec(
    name="upstream_tpu_paged_attention",
    kernel=without(paged_attention, *_PAGED_SIZES),
    reference=without(paged_attention_reference, *_PAGED_SIZES, "pages_per_compute_block"),
    configs=_paged_configs(),
    inputs=_paged_inputs,
    features=("attention", "paged", "manual_dma", "scalar_prefetch", "upstream"),
    bitwise_stable=False,
)


@st.composite
def _double_configs(draw):
    # One whole-array block (the kernel has no grid): any size, any rank the lowering takes.
    return {"shape": draw(pvs.array_shapes(block_shape=(8, 128), max_blocks=2)),
            "dtype": draw(st.sampled_from(["float32", "bfloat16", "int32"]))}


TPU_DOUBLE = pv.KernelSpec(
    name="upstream_tpu_double",
    kernel=without(example_kernel.double, "shape", "dtype"),
    reference=without(lambda x: x * 2, "shape", "dtype"),
    configs=_double_configs(),
    inputs=lambda c: pvs.arrays(shape=c["shape"], dtype=c["dtype"]).map(lambda x: (x,)),
    platforms=("tpu", "gpu"),
    features=("elementwise", "upstream"),
)
