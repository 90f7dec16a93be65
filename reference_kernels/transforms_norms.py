"""Layer norm with a Pallas backward kernel (``custom_vjp``), checked under ``grad``.

The backward kernel walks the row blocks in order ("arbitrary"): per block it recomputes
the normalised rows, writes dx, and accumulates dgamma and dbeta in their (1, cols)
output blocks, which every grid point revisits.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from hypothesis import strategies as st
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import pallas_verify as pv
from reference_kernels._draw import normal, seeded, without
from reference_kernels.norms import layer_norm, layer_norm_reference

__all__ = ["LAYER_NORM_VJP", "layer_norm_vjp"]

_EPS = 1e-5


def _normalised(x):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    rstd = jax.lax.rsqrt(jnp.mean((x - mean) ** 2, axis=-1, keepdims=True) + _EPS)
    return (x - mean) * rstd, rstd


def _bwd_body(x_ref, g_ref, dy_ref, dx_ref, dg_ref, db_ref):
    @pl.when(pl.program_id(0) == 0)
    def _init():
        dg_ref[...] = jnp.zeros_like(dg_ref)
        db_ref[...] = jnp.zeros_like(db_ref)

    xhat, rstd = _normalised(x_ref[...])
    dy = dy_ref[...]
    gdy = dy * g_ref[...]
    dx_ref[...] = rstd * (gdy - jnp.mean(gdy, axis=-1, keepdims=True)
                          - xhat * jnp.mean(gdy * xhat, axis=-1, keepdims=True))
    dg_ref[...] += jnp.sum(dy * xhat, axis=0, keepdims=True)
    db_ref[...] += jnp.sum(dy, axis=0, keepdims=True)


def _backward(x, gamma, dy, *, block_rows):
    rows, cols = x.shape
    row_block = pl.BlockSpec((block_rows, cols), lambda i: (i, 0))
    param = pl.BlockSpec((1, cols), lambda i: (0, 0))
    return pl.pallas_call(
        _bwd_body,
        grid=(rows // block_rows,),
        in_specs=[row_block, param, row_block],
        out_specs=[row_block, param, param],
        out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(gamma.shape, gamma.dtype),
                   jax.ShapeDtypeStruct(gamma.shape, gamma.dtype)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
    )(x, gamma, dy)


@functools.cache
def _with_vjp(block_rows: int):
    @jax.custom_vjp
    def norm(x, gamma, beta):
        return layer_norm(x, gamma, beta, block_rows=block_rows)

    def fwd(x, gamma, beta):
        return norm(x, gamma, beta), (x, gamma)

    def bwd(res, dy):
        x, gamma = res
        return _backward(x, gamma, dy, block_rows=block_rows)

    norm.defvjp(fwd, bwd)
    return norm


def layer_norm_vjp(x, gamma, beta, *, block_rows: int):
    """Layer norm over the last axis (scale ``gamma``, shift ``beta`` of shape (1, cols))
    whose VJP is one Pallas kernel."""
    return _with_vjp(block_rows)(x, gamma, beta)


@st.composite
def _configs(draw):
    block_rows = draw(st.sampled_from([8, 16]))
    return {"rows": block_rows * draw(st.integers(1, 4)), "cols": draw(st.sampled_from([128, 256])),
            "block_rows": block_rows}


def _inputs(config):
    rows, cols = config["rows"], config["cols"]
    return seeded(lambda rng: (normal(rng, (rows, cols)) * 3 + 1, normal(rng, (1, cols)), normal(rng, (1, cols))))


LAYER_NORM_VJP = pv.KernelSpec(
    name="layer_norm_vjp",
    kernel=without(layer_norm_vjp, "rows", "cols"),
    reference=without(layer_norm_reference, "rows", "cols", "block_rows"),
    configs=_configs(),
    inputs=_inputs,
    features=("reduction", "row_blocked", "normalization", "custom_vjp"),
    transforms=("grad",),
    bitwise_stable=False,
)
