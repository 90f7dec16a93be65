"""Flash attention with Pallas backward kernels (``custom_vjp``), checked under ``grad``.

The forward is an online softmax over KV blocks that also writes the log-sum-exp of
each query row. The backward recomputes the probabilities block by block from it:
``dkv`` walks the query blocks for each KV block (dK, dV accumulated in VMEM scratch) and
``dq`` walks the KV blocks for each query block. Causal variants skip blocks above the
diagonal and mask the diagonal blocks in all three kernels.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
from reference_kernels._draw import normal, seeded, without

__all__ = ["FLASH_ATTENTION_CAUSAL_VJP", "FLASH_ATTENTION_VJP", "attention_configs", "attention_inputs",
           "attention_reference", "flash_attention_vjp"]

_NT = ((1,), (1,))  # a @ b.T
_TN = ((0,), (0,))  # a.T @ b
_NN = ((1,), (0,))  # a @ b


def _dot(a, b, dims):
    return jax.lax.dot_general(a, b, (dims, ((), ())), preferred_element_type=jnp.float32)


def _scores(q, k, qi, ki, *, causal, bq, bk, scale):
    s = _dot(q, k, _NT) * scale
    if causal:
        rows = qi * bq + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
        cols = ki * bk + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
        s = jnp.where(cols <= rows, s, -jnp.inf)
    return s


def _visible(qi, ki, *, causal, bq, bk):
    """Whether the (query block, KV block) pair has any unmasked score."""
    return ki * bk <= qi * bq + bq - 1 if causal else True


def _fwd_body(q_ref, k_ref, v_ref, o_ref, lse_ref, m_ref, l_ref, acc_ref, *, causal, bq, bk, scale):
    qi, ki = pl.program_id(1), pl.program_id(2)

    @pl.when(ki == 0)
    def _init():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(_visible(qi, ki, causal=causal, bq=bq, bk=bk))
    def _step():
        s = _scores(q_ref[...], k_ref[...], qi, ki, causal=causal, bq=bq, bk=bk, scale=scale)
        m_new = jnp.maximum(m_ref[...], jnp.max(s, axis=1, keepdims=True))
        p = jnp.exp(s - m_new)
        alpha = jnp.exp(m_ref[...] - m_new)
        l_ref[...] = alpha * l_ref[...] + jnp.sum(p, axis=1, keepdims=True)
        acc_ref[...] = alpha * acc_ref[...] + _dot(p, v_ref[...], _NN)
        m_ref[...] = m_new

    @pl.when(ki == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)
        lse_ref[...] = m_ref[...] + jnp.log(l_ref[...])


def _dkv_body(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref, dk_acc, dv_acc, *,
              causal, mask, bq, bk, scale):
    ki, qi = pl.program_id(1), pl.program_id(2)

    @pl.when(qi == 0)
    def _init():
        dk_acc[...] = jnp.zeros_like(dk_acc)
        dv_acc[...] = jnp.zeros_like(dv_acc)

    @pl.when(_visible(qi, ki, causal=causal and mask, bq=bq, bk=bk))
    def _step():
        q, do = q_ref[...], do_ref[...]
        s = _scores(q, k_ref[...], qi, ki, causal=causal and mask, bq=bq, bk=bk, scale=scale)
        p = jnp.exp(s - lse_ref[...])
        dv_acc[...] += _dot(p, do, _TN)
        ds = p * (_dot(do, v_ref[...], _NT) - delta_ref[...])
        dk_acc[...] += _dot(ds, q, _TN) * scale

    @pl.when(qi == pl.num_programs(2) - 1)
    def _store():
        dk_ref[...] = dk_acc[...].astype(dk_ref.dtype)
        dv_ref[...] = dv_acc[...].astype(dv_ref.dtype)


def _dq_body(q_ref, k_ref, v_ref, do_ref, lse_ref, delta_ref, dq_ref, dq_acc, *, causal, mask, bq, bk, scale,
             dq_scale):
    qi, ki = pl.program_id(1), pl.program_id(2)

    @pl.when(ki == 0)
    def _init():
        dq_acc[...] = jnp.zeros_like(dq_acc)

    @pl.when(_visible(qi, ki, causal=causal and mask, bq=bq, bk=bk))
    def _step():
        s = _scores(q_ref[...], k_ref[...], qi, ki, causal=causal and mask, bq=bq, bk=bk, scale=scale)
        p = jnp.exp(s - lse_ref[...])
        ds = p * (_dot(do_ref[...], v_ref[...], _NT) - delta_ref[...])
        dq_acc[...] += _dot(ds, k_ref[...], _NN) * dq_scale

    @pl.when(ki == pl.num_programs(2) - 1)
    def _store():
        dq_ref[...] = dq_acc[...].astype(dq_ref.dtype)


def _specs(heads_first, bq, bk, d):
    """Block specs of (q, k, v, do, lse, delta) on a (head, outer, inner) grid."""
    sq = pl.Squeezed()
    q_at = (lambda h, i, j: (h, i, 0)) if heads_first == "q" else (lambda h, i, j: (h, j, 0))
    k_at = (lambda h, i, j: (h, j, 0)) if heads_first == "q" else (lambda h, i, j: (h, i, 0))
    q_block, k_block, row = pl.BlockSpec((sq, bq, d), q_at), pl.BlockSpec((sq, bk, d), k_at), pl.BlockSpec((sq, bq, 1), q_at)
    return [q_block, k_block, k_block, q_block, row, row], q_block, k_block


_SEMANTICS = pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary"))


def _forward(q, k, v, *, causal, bq, bk, scale):
    heads, seq, d = q.shape
    in_specs, q_block, _ = _specs("q", bq, bk, d)
    return pl.pallas_call(
        functools.partial(_fwd_body, causal=causal, bq=bq, bk=bk, scale=scale),
        grid=(heads, seq // bq, seq // bk),
        in_specs=in_specs[:3],
        out_specs=[q_block, in_specs[4]],
        out_shape=[jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct((heads, seq, 1), jnp.float32)],
        scratch_shapes=[pltpu.VMEM((bq, 1), jnp.float32), pltpu.VMEM((bq, 1), jnp.float32),
                        pltpu.VMEM((bq, d), jnp.float32)],
        compiler_params=_SEMANTICS,
    )(q, k, v)


def _backward(q, k, v, o, lse, do, *, causal, bq, bk, scale, bug):
    heads, seq, d = q.shape
    delta = jnp.sum(o.astype(jnp.float32) * do.astype(jnp.float32), axis=-1, keepdims=True)
    mask = bug != "backward_causal_mask"
    kv_specs, _, kv_block = _specs("k", bq, bk, d)
    dk, dv = pl.pallas_call(
        functools.partial(_dkv_body, causal=causal, mask=mask, bq=bq, bk=bk, scale=scale),
        grid=(heads, seq // bk, seq // bq),
        in_specs=kv_specs,
        out_specs=[kv_block, kv_block],
        out_shape=[jax.ShapeDtypeStruct(k.shape, k.dtype), jax.ShapeDtypeStruct(v.shape, v.dtype)],
        scratch_shapes=[pltpu.VMEM((bk, d), jnp.float32), pltpu.VMEM((bk, d), jnp.float32)],
        compiler_params=_SEMANTICS,
    )(q, k, v, do, lse, delta)
    q_specs, q_block, _ = _specs("q", bq, bk, d)
    dq_scale = 1.0 if bug == "dq_scale" else scale
    dq = pl.pallas_call(
        functools.partial(_dq_body, causal=causal, mask=mask, bq=bq, bk=bk, scale=scale, dq_scale=dq_scale),
        grid=(heads, seq // bq, seq // bk),
        in_specs=q_specs,
        out_specs=q_block,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        scratch_shapes=[pltpu.VMEM((bq, d), jnp.float32)],
        compiler_params=_SEMANTICS,
    )(q, k, v, do, lse, delta)
    return dq, dk, dv


@functools.cache
def _with_vjp(causal: bool, bq: int, bk: int, bug: str | None):
    def blocks(q):
        return {"causal": causal, "bq": bq, "bk": bk, "scale": 1.0 / math.sqrt(q.shape[-1])}

    @jax.custom_vjp
    def attention(q, k, v):
        return _forward(q, k, v, **blocks(q))[0]

    def fwd(q, k, v):
        o, lse = _forward(q, k, v, **blocks(q))
        return o, (q, k, v, o, lse)

    def bwd(res, do):
        q, k, v, o, lse = res
        return _backward(q, k, v, o, lse, do, **blocks(q), bug=bug)

    attention.defvjp(fwd, bwd)
    return attention


def flash_attention_vjp(q, k, v, *, causal: bool, bq: int, bk: int, bug: str | None = None):
    """softmax(q k^T / sqrt(d)) v per head (q, k, v of shape (heads, seq, d)), with a Pallas
    VJP; ``bug`` ("dq_scale", "backward_causal_mask") plants a backward-only bug."""
    return _with_vjp(causal, bq, bk, bug)(q, k, v)


def attention_reference(q, k, v, *, causal: bool):
    s = jnp.einsum("hqd,hkd->hqk", q, k) / math.sqrt(q.shape[-1])
    if causal:
        seq = q.shape[1]
        s = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), s, -jnp.inf)
    return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v)


@st.composite
def attention_configs(draw, *, causal: bool):
    """Blocks of 64 or 128 rows over 128-256 positions, at most 8 points per grid."""
    bq, bk = draw(st.sampled_from([64, 128])), draw(st.sampled_from([64, 128]))
    seq = draw(st.sampled_from([128, 256]))
    points = (seq // bq) * (seq // bk)
    return {"heads": draw(st.integers(1, max(1, 8 // points))), "seq": seq, "d": 64,
            "causal": causal, "bq": bq, "bk": bk}


def attention_inputs(config):
    shape = (config["heads"], config["seq"], config["d"])
    return seeded(lambda rng: tuple(normal(rng, shape) for _ in range(3)))


_SIZES = ("heads", "seq", "d")


def _spec(name: str, causal: bool) -> pv.KernelSpec:
    return pv.KernelSpec(
        name=name,
        kernel=without(flash_attention_vjp, *_SIZES),
        reference=without(attention_reference, *_SIZES, "bq", "bk"),
        configs=attention_configs(causal=causal),
        inputs=attention_inputs,
        features=("attention", "online_softmax", "accumulator", "custom_vjp")
        + (("control_flow",) if causal else ()),
        transforms=("grad",),
        bitwise_stable=False,
    )


FLASH_ATTENTION_VJP = _spec("flash_attention_vjp", causal=False)
FLASH_ATTENTION_CAUSAL_VJP = _spec("flash_attention_causal_vjp", causal=True)
