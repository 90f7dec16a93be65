"""Flash attention (online softmax over KV blocks), causal and not."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
from reference_kernels._draw import array_tuples, without

__all__ = ["FLASH_ATTENTION", "FLASH_ATTENTION_CAUSAL"]


def _flash_body(q_ref, k_ref, v_ref, o_ref, m_ref, l_ref, acc_ref, *, causal, bq, bk, scale):
    qi, ki = pl.program_id(1), pl.program_id(2)

    @pl.when(ki == 0)
    def _init():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)
        acc_ref[...] = jnp.zeros_like(acc_ref)

    def _step():
        s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale
        if causal:
            rows = qi * bq + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
            cols = ki * bk + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
            s = jnp.where(cols <= rows, s, -jnp.inf)
        m_new = jnp.maximum(m_ref[...], jnp.max(s, axis=1, keepdims=True))
        p = jnp.exp(s - m_new)
        alpha = jnp.exp(m_ref[...] - m_new)
        l_ref[...] = alpha * l_ref[...] + jnp.sum(p, axis=1, keepdims=True)
        acc_ref[...] = alpha * acc_ref[...] + jnp.dot(p, v_ref[...], preferred_element_type=jnp.float32)
        m_ref[...] = m_new

    if causal:
        # KV blocks entirely above the diagonal contribute nothing: skip them.
        pl.when(ki * bk <= qi * bq + bq - 1)(_step)
    else:
        _step()

    @pl.when(ki == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=("causal", "bq", "bk"))
def flash_attention(q, k, v, *, causal: bool, bq: int, bk: int) -> jax.Array:
    """softmax(q k^T / sqrt(d)) v per head; q, k, v of shape (heads, seq, d)."""
    heads, seq, d = q.shape
    sq = pl.Squeezed()
    body = functools.partial(_flash_body, causal=causal, bq=bq, bk=bk, scale=1.0 / math.sqrt(d))
    return pl.pallas_call(
        body,
        grid=(heads, seq // bq, seq // bk),
        in_specs=[pl.BlockSpec((sq, bq, d), lambda h, i, j: (h, i, 0)),
                  pl.BlockSpec((sq, bk, d), lambda h, i, j: (h, j, 0)),
                  pl.BlockSpec((sq, bk, d), lambda h, i, j: (h, j, 0))],
        out_specs=pl.BlockSpec((sq, bq, d), lambda h, i, j: (h, i, 0)),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        scratch_shapes=[pltpu.VMEM((bq, 1), jnp.float32), pltpu.VMEM((bq, 1), jnp.float32),
                        pltpu.VMEM((bq, d), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(q, k, v)


def attention_reference(q, k, v, *, causal: bool):
    s = jnp.einsum("hqd,hkd->hqk", q, k) / math.sqrt(q.shape[-1])
    if causal:
        seq = q.shape[1]
        s = jnp.where(jnp.tril(jnp.ones((seq, seq), bool)), s, -jnp.inf)
    return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v)


# A local composite: bq and bk tile the one sequence axis (queries and keys), which
# ``strategies.tiled_configs`` (one block per axis) cannot express; seq is a multiple of both.
@st.composite
def _configs(draw, *, causal):
    bq, bk = draw(st.sampled_from([64, 128])), draw(st.sampled_from([64, 128]))
    seq = draw(st.sampled_from([128, 256]))
    points = (seq // bq) * (seq // bk)
    heads = draw(st.integers(1, max(1, 8 // points)))  # at most 8 grid points
    return {"heads": heads, "seq": seq, "d": draw(st.sampled_from([64, 128])),
            "causal": causal, "bq": bq, "bk": bk}


def _inputs(config):
    shape = (config["heads"], config["seq"], config["d"])
    # No edge values: a lone 2**63 in q makes scores of ~2**59 whose online softmax the
    # HLO interpreter turns into NaN rows; attention is checked on well-conditioned values.
    return array_tuples(shape, shape, shape, max_edge_values=0)


_SIZES = ("heads", "seq", "d")


def _spec(name: str, causal: bool) -> pv.KernelSpec:
    return pv.KernelSpec(
        name=name,
        kernel=without(flash_attention, *_SIZES),
        reference=without(attention_reference, *_SIZES, "bq", "bk"),
        configs=_configs(causal=causal),
        inputs=_inputs,
        features=("attention", "online_softmax", "accumulator", "control_flow")
        if causal else ("attention", "online_softmax", "accumulator"),
        bitwise_stable=False,
    )


FLASH_ATTENTION = _spec("flash_attention", causal=False)
FLASH_ATTENTION_CAUSAL = _spec("flash_attention_causal", causal=True)
