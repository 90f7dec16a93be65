"""Two specs for stopping a verify run: one quick, one whose every example takes a second."""

from __future__ import annotations

import time

import jax
import numpy as np
from hypothesis import strategies as st
from jax.experimental import pallas as pl

import pallas_verify as pv


def _add(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1


def add_one(x):
    return pl.pallas_call(_add, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def _slow_add_one(x):
    slow = jax.pure_callback(lambda v: (time.sleep(1.0), v)[1], jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    return add_one(slow)


def _inputs(config):
    return st.integers(1, 64).map(lambda n: (np.arange(n, dtype=np.float32),))


_COMMON = {"reference": lambda x: x + 1, "configs": st.just({}), "inputs": _inputs}
quick = pv.KernelSpec(name="quick", kernel=add_one, **_COMMON)
slow = pv.KernelSpec(name="slow", kernel=_slow_add_one, **_COMMON)
