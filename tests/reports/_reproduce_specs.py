"""Specs for the reproducer's tests: one kernel with a planted bug, its fix, and the fix
judged by a reference that raises (loaded by file reference)."""

from __future__ import annotations

import jax
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl

import pallas_verify as pv


def _kernel(bump):
    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0 + bump

    def kernel(x, *, scale):
        return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    return kernel


def _twice(x, *, scale):
    return x * scale


def _gives_up(x, *, scale):
    raise ValueError("the reference gave up")


def _spec(kernel, reference=_twice):
    return pv.KernelSpec(name="twice", kernel=kernel, reference=reference,
                         configs=st.just({"scale": np.float32(2.0)}),
                         inputs=lambda config: st.just((np.arange(8, dtype=np.float32),)))


wrong = _spec(_kernel(1.0))
right = _spec(_kernel(0.0))
judged_by_a_raising_reference = _spec(_kernel(0.0), _gives_up)
