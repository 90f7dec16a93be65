"""Small whole-array kernels with Pallas backward kernels, for fast transform tests."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl

import pallas_verify as pv


def _scaled_body(x_ref, o_ref, *, scale):
    o_ref[...] = x_ref[...] * scale


def _scaled(x, scale):
    body = functools.partial(_scaled_body, scale=scale)
    return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


@functools.cache
def _cube_with_vjp(backward_scale: float):
    """x -> 3 x (forward), backward ``backward_scale * g`` (3.0 is right)."""

    @jax.custom_vjp
    def cube(x):
        return _scaled(x, 3.0)

    cube.defvjp(lambda x: (cube(x), None), lambda _, g: (_scaled(g, backward_scale),))
    return cube


def triple(x, *, backward_scale: float = 3.0):
    return _cube_with_vjp(backward_scale)(x)


def wrong_triple(x):
    return triple(x, backward_scale=2.0)


def _inputs(config):
    return st.integers(0, 2**16).map(lambda s: (np.random.default_rng(s).standard_normal((8, 128)).astype(np.float32),))


def _masked_body(x_ref, n_ref, o_ref):
    o_ref[...] = x_ref[...] * n_ref[0].astype(jnp.float32)


def scale_by_count(x, n):
    """x * n[0]: one float input, one integer (metadata) input."""
    return pl.pallas_call(_masked_body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, n)


def _count_inputs(config):
    return st.integers(0, 2**16).map(lambda s: (np.random.default_rng(s).standard_normal((8, 128)).astype(np.float32),
                                                np.array([s % 5], np.int32)))


TRIPLE = pv.KernelSpec(name="triple", kernel=triple, reference=lambda x: 3.0 * x, configs=st.just({}),
                       inputs=_inputs, platforms=("tpu", "gpu"), transforms=("vmap", "grad"))
WRONG_TRIPLE = pv.KernelSpec(name="wrong_triple", kernel=wrong_triple, reference=lambda x: 3.0 * x,
                             configs=st.just({}), inputs=_inputs, platforms=("tpu", "gpu"), transforms=("grad",))
SCALE_BY_COUNT = pv.KernelSpec(name="scale_by_count", kernel=scale_by_count,
                               reference=lambda x, n: x * n[0].astype(jnp.float32), configs=st.just({}),
                               inputs=_count_inputs, transforms=("vmap",))
