"""Tiny specs for the worker process's tests (loaded by file reference in the worker)."""

from __future__ import annotations

import os
import time

import jax
import numpy as np
from hypothesis import strategies as st

import pallas_verify as pv

X = np.arange(8, dtype=np.float32)


def _host(fn, x):
    """Call ``fn(x)`` on the host when the computation runs (not when it is traced)."""
    return jax.pure_callback(fn, jax.ShapeDtypeStruct(x.shape, x.dtype), x)


def _pid(x):
    return np.full(x.shape, os.getpid(), x.dtype)


def _raise(x):
    raise ArithmeticError("planted failure in the kernel")


def _make(name, fn):
    return pv.KernelSpec(name=name, kernel=lambda x: _host(fn, x), reference=lambda x: x, configs=st.just({}),
                         inputs=lambda config: st.just((X,)))


pid = _make("pid", _pid)  # the worker's process id, in every element
raises = _make("raises", _raise)
sleeps = _make("sleeps", lambda x: (time.sleep(600), x)[1])
aborts = _make("aborts", lambda x: (os.abort(), x)[1])
