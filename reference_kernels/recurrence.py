"""Chunked gated linear attention against its token-serial reference.

The recurrence, one head: a state ``S_t = exp(g_t) S_{t-1} + k_t^T v_t`` (``dk x dv``) and
an output ``o_t = q_t S_t``; ``g_t <= 0`` is a log-decay. The reference runs it token by
token (``lax.scan``). The kernel runs it a chunk of ``chunk`` tokens per grid step, as
linear-attention, state-space and delta-rule kernels do: with ``G`` the cumulative
log-decay inside the chunk, the outputs within it are a masked, decayed ``q k^T`` times
``v``, plus ``q`` decayed from the chunk's start times the state carried in from the
chunk before; the carried state is decayed across the chunk and gains the chunk's
``k^T v``, each key decayed to the chunk's end. Mathematically equal to the reference,
numerically different: the decays are exponentials of differences of cumulative sums,
and every term passes through a matmul. It returns the outputs and the final state.

Drawn: sequences of one chunk or several (``seq`` a multiple of ``chunk``: a ragged last
chunk would need a mask the kernel does not have), key sizes 8 to 64 and value sizes 8 to
128, decays from none (``g = 0``) to strong.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
from reference_kernels._draw import seeded, without

__all__ = ["CHUNKED_GLA", "CHUNKED_GLA_EXCLUSIVE", "chunked_gla", "serial_gla"]


def _chunk_body(q_ref, k_ref, v_ref, g_ref, o_ref, s_out_ref, s_ref, *, carry_decay: bool, to_end: str):
    @pl.when(pl.program_id(0) == 0)
    def _init():
        s_ref[...] = jnp.zeros_like(s_ref)

    q, k, v = q_ref[...], k_ref[...], v_ref[...]
    g = g_ref[...]  # (chunk, 1)
    n = g.shape[0]
    rows = jax.lax.broadcasted_iota(jnp.int32, (n, n), 0)
    cols = jax.lax.broadcasted_iota(jnp.int32, (n, n), 1)
    cum = jnp.dot((cols <= rows).astype(jnp.float32), g, precision=jax.lax.Precision.HIGHEST)  # G_t, inclusive
    last = cum[n - 1:n, :]  # (1, 1): the whole chunk's log-decay
    decay = jnp.where(cols <= rows, jnp.exp(cum - cum.reshape(1, n)), 0.0)  # exp(G_t - G_s), s <= t
    scores = jnp.dot(q, k.T, precision=jax.lax.Precision.HIGHEST) * decay
    inner = jnp.dot(scores, v, precision=jax.lax.Precision.HIGHEST)
    state = s_ref[...]
    carried = jnp.dot(q * jnp.exp(cum), state, precision=jax.lax.Precision.HIGHEST)
    o_ref[...] = inner + carried
    if to_end == "inclusive":  # each key decayed to the chunk's end: exp(G_last - G_s)
        decayed = k * jnp.exp(last - cum)
    else:  # from the exclusive cumulative sum: exp(G_last - (G_s - g_s) - g_s), the last step once
        before = cum - g
        decayed = k * jnp.exp(last - before - (g if to_end == "exclusive" else 0.0))
    update = jnp.dot(decayed.T, v, precision=jax.lax.Precision.HIGHEST)
    s_ref[...] = (jnp.exp(last) * state if carry_decay else state) + update
    s_out_ref[...] = s_ref[...]


def chunked_gla(q, k, v, g, *, chunk, carry_decay=True, to_end="inclusive"):
    """Outputs ``(seq, dv)`` and final state ``(dk, dv)``, a chunk of tokens per grid step;
    ``to_end`` says how each key's decay to the chunk's end is written (``"inclusive"``:
    from the inclusive cumulative log-decay; ``"exclusive"``: from the exclusive one, the
    key's own step subtracted; ``"exclusive_off_by_one"``: that step forgotten, a bug)."""
    seq, dk = q.shape
    dv = v.shape[1]
    body = functools.partial(_chunk_body, carry_decay=carry_decay, to_end=to_end)
    rows = lambda d: pl.BlockSpec((chunk, d), lambda c: (c, 0))  # noqa: E731
    return pl.pallas_call(
        body,
        grid=(seq // chunk,),
        in_specs=[rows(dk), rows(dk), rows(dv), rows(1)],
        out_specs=[rows(dv), pl.BlockSpec((dk, dv), lambda c: (0, 0))],
        out_shape=[jax.ShapeDtypeStruct((seq, dv), jnp.float32), jax.ShapeDtypeStruct((dk, dv), jnp.float32)],
        scratch_shapes=[pltpu.VMEM((dk, dv), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
    )(q, k, v, g[:, None])


def serial_gla(q, k, v, g, **_):
    """The recurrence token by token: ``S_t = exp(g_t) S_{t-1} + k_t^T v_t``, ``o_t = q_t S_t``."""
    def step(state, token):
        qt, kt, vt, gt = token
        state = jnp.exp(gt) * state + jnp.outer(kt, vt)
        return state, qt @ state

    final, out = jax.lax.scan(step, jnp.zeros((q.shape[1], v.shape[1]), jnp.float32), (q, k, v, g))
    return out, final


@st.composite
def _configs(draw):
    chunk = draw(st.sampled_from([8, 16, 64]))
    return {"chunk": chunk, "seq": chunk * draw(st.sampled_from([1, 2, 4])),
            "dk": draw(st.sampled_from([8, 16, 64])), "dv": draw(st.sampled_from([8, 32, 128])),
            "decay": draw(st.sampled_from([0.0, 0.02, 0.3, 0.5]))}


def _inputs(config):
    seq, dk, dv = config["seq"], config["dk"], config["dv"]

    def make(rng: np.random.Generator):
        q, k = ((rng.standard_normal((seq, dk)) / np.sqrt(dk)).astype(np.float32) for _ in range(2))
        v = rng.standard_normal((seq, dv), np.float32)
        g = (-config["decay"] * rng.uniform(0.0, 2.0, seq)).astype(np.float32)
        return q, k, v, g

    return seeded(make)


_SIZES = ("seq", "dk", "dv", "decay")
CHUNKED_GLA = pv.KernelSpec(
    name="chunked_gla",
    kernel=without(chunked_gla, *_SIZES),
    reference=without(serial_gla, *_SIZES, "chunk"),
    configs=_configs(),
    inputs=_inputs,
    features=("recurrence", "chunked", "accumulator", "matmul"),
    bitwise_stable=False,
)
#: The same kernel with each key's decay to the chunk's end written from the exclusive
#: cumulative log-decay, as chunked kernels that keep the state before each token do.
CHUNKED_GLA_EXCLUSIVE = dataclasses.replace(
    CHUNKED_GLA, name="chunked_gla_exclusive", kernel=without(functools.partial(chunked_gla, to_end="exclusive"),
                                                              *_SIZES))
