"""Specs whose runs hang idle or stay busy, for the adaptive per-case limit's tests."""

from __future__ import annotations

import time

import jax
import numpy as np
from hypothesis import strategies as st

import pallas_verify as pv


def _host(fn, x):
    """Call ``fn`` on the host when the computation runs (not when it is traced)."""
    return jax.pure_callback(lambda v: (fn(), v)[1], jax.ShapeDtypeStruct(x.shape, x.dtype), x)


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


BUSY_S = 3.0  # past the 1 s idle limit and the 1 s of idle samples that make a case hung
_inputs = st.just((np.arange(8, dtype=np.float32),))

sleeps = pv.KernelSpec(name="sleeps", kernel=lambda x: _host(lambda: time.sleep(600), x),
                       reference=lambda x: x, configs=st.just({}), inputs=lambda c: _inputs)
spins = pv.KernelSpec(name="spins", kernel=lambda x: _host(lambda: _spin(BUSY_S), x),
                      reference=lambda x: x, configs=st.just({}), inputs=lambda c: _inputs)
